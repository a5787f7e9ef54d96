"""The per-sample posterior-agreement kernel and its derivatives in beta, in float64 log space.

For one sample with scores a, b in R^K and s = a + b,

    k(beta)   = lse(beta*s) - lse(beta*a) - lse(beta*b)
    k'(beta)  = E_ps[s] - E_pa[a] - E_pb[b]
    k''(beta) = Var_ps[s] - Var_pa[a] - Var_pb[b]

where p_x = softmax(beta*x).  Rows are centred (max 0) once, so every exponential is <= 1
and exp(beta*(A+B)) = exp(beta*A) * exp(beta*B) needs no third exponential, except for rows
where that product could underflow (beta*delta large); those are recomputed from the
centred sum S.  Entries equal to -inf (probability 0) are supported exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# exp(-UNDERFLOW) is far above the smallest normal float64 (exp(-708)), so while
# beta*delta <= UNDERFLOW the largest term of exp(beta*A)*exp(beta*B) keeps full precision.
UNDERFLOW = 600.0


@dataclass
class CentredPairs:
    """Score pairs of shape (..., N, K), centred so that each row's maximum is 0."""

    A: torch.Tensor
    B: torch.Tensor
    S: torch.Tensor  # A + B + delta, row maximum 0
    delta: torch.Tensor  # (..., N): -max(A + B) >= 0; inf where the supports are disjoint
    masked: bool  # whether any entry is -inf
    delta_max: float = math.inf  # largest finite delta (decides when underflow needs care)

    @classmethod
    def from_scores(cls, a: torch.Tensor, b: torch.Tensor) -> "CentredPairs":
        A = a - a.amax(-1, keepdim=True)
        B = b - b.amax(-1, keepdim=True)
        s = A + B
        smax = s.amax(-1, keepdim=True)
        masked = bool(torch.isinf(A).any() or torch.isinf(B).any())
        if masked:
            disjoint = torch.isinf(smax)
            S = torch.where(disjoint, torch.zeros_like(s), s - smax)
        else:
            S = s - smax
        delta = -smax.squeeze(-1)
        finite = delta[torch.isfinite(delta)]
        return cls(A, B, S, delta, masked, float(finite.max()) if finite.numel() else 0.0)

    @property
    def n(self) -> int:
        return self.A.shape[-2]

    @property
    def k(self) -> int:
        return self.A.shape[-1]

    def rows(self, lo: int, hi: int) -> "CentredPairs":
        return CentredPairs(self.A[..., lo:hi, :], self.B[..., lo:hi, :], self.S[..., lo:hi, :],
                            self.delta[..., lo:hi], self.masked, self.delta_max)

    def take(self, idx: torch.Tensor) -> "CentredPairs":
        """The rows `idx` (a 1-D index tensor) of every pair."""
        return CentredPairs(self.A[..., idx, :], self.B[..., idx, :], self.S[..., idx, :],
                            self.delta[..., idx], self.masked, self.delta_max)

    def pair(self, i: int) -> "CentredPairs":
        """Pair i of a stack (batch shape (P,))."""
        return CentredPairs(self.A[i], self.B[i], self.S[i], self.delta[i], self.masked,
                            self.delta_max)


def _tilted(x: torch.Tensor, beta: torch.Tensor, masked: bool) -> torch.Tensor:
    """exp(beta * x) with exp(beta * -inf) = 0 also at beta = 0."""
    t = beta * x
    if masked:
        t = torch.where(torch.isinf(x), x, t)
    return t.exp_()


def _moments(t: torch.Tensor, x: torch.Tensor, z: torch.Tensor, order: int, masked: bool):
    """Mean and variance of x under the weights t (row sums z); zero where z == 0."""
    if masked:
        x = torch.where(torch.isinf(x), torch.zeros_like(x), x)
        z = torch.where(z > 0, z, torch.ones_like(z))
    tx = t * x
    mean = tx.sum(-1).div_(z)
    if order < 2:
        return mean, None
    var = tx.mul_(x).sum(-1).div_(z).sub_(mean * mean)
    return mean, var


def kernel_terms(p: CentredPairs, beta: torch.Tensor, order: int = 0):
    """Per-sample k_i(beta) and, up to `order`, its first and second derivatives.

    `beta` has the batch shape of `p` (a scalar tensor for a single pair).
    Returns (k, dk, d2k), each (..., N); derivatives are None above `order`.
    """
    b = beta[..., None, None]
    ta = _tilted(p.A, b, p.masked)
    tb = _tilted(p.B, b, p.masked)
    w = ta * tb
    za, zb = ta.sum(-1), tb.sum(-1)
    zw = w.sum(-1)
    log_zw = torch.log(zw)
    bd = beta[..., None] * p.delta
    risky = None
    if float(beta.max()) * p.delta_max > UNDERFLOW:
        risky = (bd > UNDERFLOW) & torch.isfinite(p.delta)
    if risky is not None and bool(risky.any()):
        # The product underflows: weight by exp(beta*S) instead (same distribution).
        w_safe = _tilted(p.S, b, p.masked)
        w = torch.where(risky[..., None], w_safe, w)
        zs = w_safe.sum(-1)
        zw = torch.where(risky, zs, zw)
        log_zw = torch.where(risky, torch.log(zs) - bd, log_zw)
    k = log_zw - torch.log(za) - torch.log(zb)
    if order == 0:
        return k, None, None
    ea, va = _moments(ta, p.A, za, order, p.masked)
    eb, vb = _moments(tb, p.B, zb, order, p.masked)
    es, vs = _moments(w, p.S, zw, order, p.masked)
    delta = torch.where(torch.isfinite(p.delta), p.delta, torch.zeros_like(p.delta)) if p.masked else p.delta
    dk = es - delta - ea - eb
    d2k = vs - va - vb if order >= 2 else None
    if p.masked:
        dead = torch.isinf(p.delta)  # disjoint supports: k = -inf whatever beta is
        dk = torch.where(dead, torch.zeros_like(dk), dk)
        if d2k is not None:
            d2k = torch.where(dead, torch.zeros_like(d2k), d2k)
    return k, dk, d2k


def summed_terms(p: CentredPairs, beta: torch.Tensor, order: int = 0, chunk_elems: int = 1 << 20,
                 keep_kernel: bool = False):
    """Sums over samples of k, k', k'' (shape: batch shape of `p`), evaluated in row chunks
    so that temporaries stay small.  With keep_kernel, also the per-sample k."""
    batch = max(p.A[..., 0, 0].numel(), beta.numel())
    rows = max(1, chunk_elems // (p.k * batch))
    f = torch.zeros_like(beta)
    f1 = torch.zeros_like(beta) if order >= 1 else None
    f2 = torch.zeros_like(beta) if order >= 2 else None
    kernels = []
    for lo in range(0, p.n, rows):
        k, dk, d2k = kernel_terms(p.rows(lo, lo + rows), beta, order)
        f = f + k.sum(-1)
        if order >= 1:
            f1 = f1 + dk.sum(-1)
        if order >= 2:
            f2 = f2 + d2k.sum(-1)
        if keep_kernel:
            kernels.append(k)
    kernel = torch.cat(kernels, -1) if keep_kernel else None
    return f, f1, f2, kernel


def limit_at_infinity(p: CentredPairs) -> torch.Tensor:
    """Per-sample lim_{beta->inf} k_i(beta): log(|Ta & Tb| / (|Ta| |Tb|)) over the argmax
    sets Ta, Tb; -inf where they do not intersect."""
    ta = p.A == 0
    tb = p.B == 0
    both = (ta & tb).sum(-1).to(p.A.dtype)
    return torch.log(both) - torch.log(ta.sum(-1).to(p.A.dtype)) - torch.log(tb.sum(-1).to(p.A.dtype))
