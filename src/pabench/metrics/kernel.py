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

from dataclasses import dataclass

import torch

# exp(-UNDERFLOW) is far above the smallest normal float64 (exp(-708)), so while
# beta*delta <= UNDERFLOW the largest term of exp(beta*A)*exp(beta*B) keeps full precision.
UNDERFLOW = 600.0


@dataclass
class CentredPairs:
    """Score pairs of shape (..., N, K), centred so that each row's maximum is 0, stored as one
    tensor X of shape (..., N, 3, K) holding [A, B, S] with S = A + B + delta (row max 0): a
    minibatch is one gather and one evaluation reads one contiguous block."""

    X: torch.Tensor
    delta: torch.Tensor  # (..., N): -max(A + B) >= 0; inf where the supports are disjoint
    masked: bool  # whether any entry is -inf (a zero probability)
    delta_max: float  # largest finite delta (decides when underflow needs care)

    @classmethod
    def from_scores(cls, a: torch.Tensor, b: torch.Tensor, masked: bool | None = None) -> "CentredPairs":
        """From scores of any float dtype (entries may be -inf, never +inf or NaN), converted to
        float64 before centring (exact for float32 input); `masked=False` promises that no entry
        is -inf (logits), saving a pass over the data."""
        X = torch.empty(a.shape[:-1] + (3, a.shape[-1]), dtype=torch.float64, device=a.device)
        for i, x in enumerate((a, b)):
            part = X[..., i, :]
            part.copy_(x)
            part.sub_(part.amax(-1, keepdim=True))
        S = X[..., 2, :]
        torch.add(X[..., 0, :], X[..., 1, :], out=S)
        smax = S.amax(-1, keepdim=True)
        if masked is None:
            masked = not bool(torch.isfinite(X[..., :2, :].amin()))
        if masked:  # rows with disjoint supports have S = -inf everywhere: keep them finite
            S.copy_(torch.where(torch.isinf(smax), torch.zeros_like(S), S - smax))
        else:
            S.sub_(smax)
        delta = -smax.squeeze(-1)
        finite = delta[torch.isfinite(delta)]
        return cls(X, delta, masked, float(finite.max()) if finite.numel() else 0.0)

    @property
    def A(self) -> torch.Tensor:
        return self.X[..., 0, :]

    @property
    def B(self) -> torch.Tensor:
        return self.X[..., 1, :]

    @property
    def n(self) -> int:
        return self.X.shape[-3]

    @property
    def k(self) -> int:
        return self.X.shape[-1]

    def _with(self, X, delta) -> "CentredPairs":
        return CentredPairs(X, delta, self.masked, self.delta_max)

    def rows(self, lo: int, hi: int) -> "CentredPairs":
        return self._with(self.X[..., lo:hi, :, :], self.delta[..., lo:hi])

    def take(self, idx: torch.Tensor) -> "CentredPairs":
        """The rows `idx` (a 1-D index tensor) of every pair."""
        return self._with(self.X[..., idx, :, :], self.delta[..., idx])

    def pair(self, i) -> "CentredPairs":
        """Pair i (or the sub-stack of pairs i, an index tensor) of a stack."""
        return self._with(self.X[i], self.delta[i])


def _weights(p: CentredPairs, beta: torch.Tensor, work: torch.Tensor | None):
    """Unnormalised posteriors T = exp(beta [A, B, A + B]) of every row, their sums Z and
    log z_w (exact also where the product of exponentials underflows)."""
    X = p.X
    b = beta[..., None, None, None]
    shape = torch.broadcast_shapes(b.shape, X.shape)
    if work is None:
        T = torch.empty(shape, dtype=X.dtype, device=X.device)
    else:
        T = work[:shape.numel()].view(shape)
    torch.mul(X[..., :2, :], b, out=T[..., :2, :])
    if p.masked:  # exp(beta * -inf) = 0 also at beta = 0
        T[..., :2, :] = torch.where(torch.isinf(X[..., :2, :]), X[..., :2, :], T[..., :2, :])
    T[..., :2, :].exp_()
    torch.mul(T[..., 0, :], T[..., 1, :], out=T[..., 2, :])  # exp(beta * (A + B))
    bd = beta[..., None] * p.delta
    risky = None
    if float(beta.max()) * p.delta_max > UNDERFLOW:
        risky = (bd > UNDERFLOW) & torch.isfinite(p.delta)
        if bool(risky.any()):
            # The product underflows: weight by exp(beta * S) instead (same distribution),
            # with log z_w = log sum exp(beta * S) - beta * delta.
            S = X[..., 2, :]
            scaled = S * b[..., 0, :, :]
            if p.masked:
                scaled = torch.where(torch.isinf(S), S, scaled)
            T[..., 2, :] = torch.where(risky[..., None], scaled.exp(), T[..., 2, :])
        else:
            risky = None
    Z = T.sum(-1)  # (..., N, 3): z_a, z_b, z_w
    logZ = Z.log()
    log_zw = logZ[..., 2] if risky is None else torch.where(risky, logZ[..., 2] - bd, logZ[..., 2])
    return T, Z, logZ, log_zw


def _weighted_means(p: CentredPairs, T: torch.Tensor, Z: torch.Tensor):
    """E[A], E[B], E[S] under the weights T (turned into T * X in place), and X for more moments."""
    if p.masked:  # zero weights at -inf entries: take 0 * -inf as 0
        Xf = torch.where(torch.isinf(p.X), torch.zeros_like(p.X), p.X)
        Z = torch.where(Z > 0, Z, torch.ones_like(Z))
    else:
        Xf = p.X
    T.mul_(Xf)
    return T.sum(-1).div_(Z), Xf, Z


def kernel_terms(p: CentredPairs, beta: torch.Tensor, order: int = 0, work: torch.Tensor | None = None):
    """Per-sample k_i(beta) and, up to `order`, its first and second derivatives.

    `beta` has the batch shape of `p` (a scalar tensor for one pair); for one pair it may also
    be a vector of betas.  Returns (k, dk, d2k), each (..., N); derivatives above `order` are None.
    `work`, a flat float64 buffer with room for the broadcast of beta and X, is reused if given.
    """
    T, Z, logZ, log_zw = _weights(p, beta, work)
    k = log_zw - logZ[..., 0] - logZ[..., 1]
    if order == 0:
        return k, None, None
    mean, Xf, Z = _weighted_means(p, T, Z)
    delta = torch.where(torch.isfinite(p.delta), p.delta, torch.zeros_like(p.delta)) if p.masked else p.delta
    dk = mean[..., 2] - delta - mean[..., 0] - mean[..., 1]
    d2k = None
    if order >= 2:
        T.mul_(Xf)
        var = T.sum(-1).div_(Z).sub_(mean * mean)
        d2k = var[..., 2] - var[..., 0] - var[..., 1]
    if p.masked:
        dead = torch.isinf(p.delta)  # disjoint supports: k = -inf whatever beta is
        dk = torch.where(dead, torch.zeros_like(dk), dk)
        if d2k is not None:
            d2k = torch.where(dead, torch.zeros_like(d2k), d2k)
    return k, dk, d2k


def convex_parts(p: CentredPairs, beta: torch.Tensor, chunk_elems: int = 1 << 20) -> torch.Tensor:
    """f = F1 - F2 with F1 = sum_i log z_w,i and F2 = sum_i log z_a,i + log z_b,i, both convex
    in beta (log-sum-exp of lines).  Returns (..., 3): F1, F2 and F2' = sum_i E_a[A] + E_b[B].
    Between two evaluated betas, f <= chord of F1 - tangent of F2: an exact upper bound."""
    batch = max(p.X[..., 0, 0, 0].numel(), beta.numel())
    rows = max(1, chunk_elems // (3 * p.k * batch))
    out = torch.zeros(beta.shape + (3,), dtype=p.X.dtype, device=p.X.device)
    for lo in range(0, p.n, rows):
        part = p.rows(lo, lo + rows)
        T, Z, logZ, log_zw = _weights(part, beta, None)
        mean, _, _ = _weighted_means(part, T, Z)
        out[..., 0] += log_zw.sum(-1)
        out[..., 1] += (logZ[..., 0] + logZ[..., 1]).sum(-1)
        out[..., 2] += (mean[..., 0] + mean[..., 1]).sum(-1)
    return out


def summed_terms(p: CentredPairs, beta: torch.Tensor, order: int = 0, chunk_elems: int = 1 << 20,
                 keep_kernel: bool = False):
    """Sums over samples of k, k', k'' (shape: batch shape of `p`), evaluated in row chunks
    so that temporaries stay small.  With keep_kernel, also the per-sample k."""
    batch = max(p.X[..., 0, 0, 0].numel(), beta.numel())
    rows = max(1, chunk_elems // (3 * p.k * batch))
    f = torch.zeros_like(beta)
    f1 = torch.zeros_like(beta) if order >= 1 else None
    f2 = torch.zeros_like(beta) if order >= 2 else None
    kernels = []
    # One work buffer for all chunks: fresh multi-megabyte temporaries cost page faults.
    work = torch.empty(batch * min(rows, p.n) * 3 * p.k, dtype=p.X.dtype, device=p.X.device)
    for lo in range(0, p.n, rows):
        k, dk, d2k = kernel_terms(p.rows(lo, lo + rows), beta, order, work)
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
    sets Ta, Tb; -inf where they do not intersect, which is exactly where delta > 0."""
    disjoint = p.delta > 0
    if bool(disjoint.any()):
        return torch.where(disjoint, -torch.inf, 0.0).to(p.X.dtype)  # the sum is -inf anyway
    ta = p.A == 0
    tb = p.B == 0
    both = (ta & tb).sum(-1).to(p.X.dtype)
    return torch.log(both) - torch.log(ta.sum(-1).to(p.X.dtype)) - torch.log(tb.sum(-1).to(p.X.dtype))
