"""Posterior Agreement (PA) between two sets of class scores: the public API.

    r = posterior_agreement(scores_a, scores_b, solver="exact")
    r.logpa   # paper scale: sum_i k_i(beta*), in [-N log K, 0]
    r.pa      # normalised: logpa / N + log K, in [0, log K]
    r.beta    # optimal inverse temperature (inf when the optimum is unbounded)
    r.kernel  # per-sample k_i(beta*), shape (N,)

Inputs of shape (N, K) give scalars; a stack of P pairs (P, N, K) gives arrays of shape (P,)
(and kernel (P, N)).  Everything is computed in float64 in log space.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from pabench.core.threads import limit_threads, size_of
from pabench.metrics.adam import solve_adam
from pabench.metrics.exact import solve_exact
from pabench.metrics.kernel import CentredPairs, summed_terms

SOLVERS = ("exact", "adam")
INPUTS = ("logits", "log_probs", "probs")
SUM_TOL = 1e-4  # allowed |row sum - 1| for probabilities (float32 model outputs are ~1e-7 off)


@dataclass(frozen=True)
class PAResult:
    logpa: Any
    pa: Any
    beta: Any
    kernel: np.ndarray
    solver: str
    n: int
    k: int
    epoch: Any = None  # adam: best epoch (1-based)
    history: dict | None = field(default=None, repr=False)  # adam: per-epoch beta and logpa

    def summary(self) -> dict:
        """JSON-friendly scalars (lists for a stack of pairs); inf is kept as float('inf')."""
        def plain(x):
            return x.tolist() if isinstance(x, np.ndarray) else x
        out = {"logpa": plain(self.logpa), "pa": plain(self.pa), "beta": plain(self.beta),
               "solver": self.solver, "n": self.n, "k": self.k}
        if self.epoch is not None:
            out["epoch"] = plain(self.epoch)
        return out


def as_scores(x, name: str) -> torch.Tensor:
    """Any array-like as a floating-point tensor, without copying float data (torch tensors keep
    their device and dtype; integers become float64).  Work in float64 happens downstream."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        if x.is_complex() or x.dtype == torch.bool:
            raise ValueError(f"{name}: cannot be read as real scores (dtype {x.dtype})")
    else:
        try:
            arr = np.asarray(x)
            if arr.dtype.kind not in "iuf":  # complex scores would lose their imaginary part
                raise TypeError(f"dtype {arr.dtype}")
            if arr.flags.writeable:
                x = torch.as_tensor(arr)
            else:  # e.g. a memory-mapped score file: only read here, so PyTorch's warning is moot
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                    x = torch.as_tensor(arr)
        except (TypeError, ValueError, RuntimeError) as err:
            raise ValueError(f"{name}: cannot be read as a numeric array ({err})") from None
    return x if x.is_floating_point() else x.to(torch.float64)


def as_float64(x, name: str) -> torch.Tensor:
    """Any array-like as a float64 tensor."""
    return as_scores(x, name).to(torch.float64)


def _check_finite(x: torch.Tensor, name: str, allow_neg_inf: bool) -> None:
    # Two reductions (NaN propagates through amax) decide; counting only runs on failure.
    top, bottom = float(x.amax()), float(x.amin())
    if top == top and top < torch.inf and (allow_neg_inf or bottom > -torch.inf):
        return
    nan = int(torch.isnan(x).sum())
    bad_inf = torch.isposinf(x) if allow_neg_inf else torch.isinf(x)
    inf = int(bad_inf.sum())
    if nan or inf:
        raise ValueError(f"{name} contains {nan} NaN and {inf} infinite values "
                         f"(of {x.numel()}); scores must be finite")


def validate_scores(a, b, inputs: str = "logits") -> tuple[torch.Tensor, torch.Tensor]:
    """Check two score arrays and return them as log-scores (logits up to a row constant);
    logits keep their dtype (CentredPairs converts to float64), probabilities are logged in float64."""
    if inputs not in INPUTS:
        raise ValueError(f"inputs must be one of {INPUTS}, got {inputs!r}")
    a, b = as_scores(a, "scores_a"), as_scores(b, "scores_b")
    for x, name in ((a, "scores_a"), (b, "scores_b")):  # each on its own, then the pair
        if x.dim() not in (2, 3):
            raise ValueError(f"{name}: scores must have shape (N, K) or (P, N, K), got "
                             f"{tuple(x.shape)}")
        if x.numel() == 0:
            raise ValueError(f"{name}: empty input, shape {tuple(x.shape)}")
        if x.shape[-1] < 2:
            raise ValueError(f"{name}: need K >= 2 classes, got K = {x.shape[-1]}")
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: scores_a {tuple(a.shape)} vs scores_b {tuple(b.shape)}")
    out = []
    for x, name in ((a, "scores_a"), (b, "scores_b")):
        if inputs == "logits":
            _check_finite(x, name, allow_neg_inf=False)
        elif inputs == "log_probs":
            _check_finite(x, name, allow_neg_inf=True)
            if float(x.amax()) > 1e-9:
                raise ValueError(f"{name}: log-probabilities must be <= 0")
            x = x.to(torch.float64)
            _check_sums(torch.logsumexp(x, -1).exp(), name, "exp(log_probs)")
        else:
            _check_finite(x, name, allow_neg_inf=False)
            if float(x.amin()) < 0:
                raise ValueError(f"{name}: {int((x < 0).sum())} negative probabilities")
            x = x.to(torch.float64)
            _check_sums(x.sum(-1), name, "probabilities")
            x = torch.log(x)
        out.append(x)
    return out[0], out[1]


def _check_sums(sums: torch.Tensor, name: str, what: str) -> None:
    off = (sums - 1).abs() > SUM_TOL
    if bool(off.any()):
        worst = float((sums - 1).abs().max())
        raise ValueError(f"{name}: {int(off.sum())} rows of {what} do not sum to 1 "
                         f"(largest deviation {worst:.3g})")


# One thread for small inputs: on a busy machine extra threads cost more than they save.
@limit_threads(lambda scores_a, *args, **kwargs: size_of(scores_a))
def posterior_agreement(scores_a, scores_b, solver: str = "exact", inputs: str = "logits", *,
                        epochs: int = 500, lr: float = 0.1, batch_size: int = 64,
                        beta0: float = 1.0, seed: int = 0, progress: bool = False) -> PAResult:
    """PA between the posteriors of scores_a (X') and scores_b (X'').

    solver="exact": the maximiser over beta >= 0 (see exact.py); solver="adam": the authors'
    procedure (epochs, lr, batch_size, beta0 and seed apply only to it).
    """
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    a, b = validate_scores(scores_a, scores_b, inputs)
    stacked = a.dim() == 3
    n, k = a.shape[-2], a.shape[-1]
    pairs = CentredPairs.from_scores(a if stacked else a[None], b if stacked else b[None],
                                     masked=None if inputs != "logits" else False)
    if solver == "exact":
        solved = [solve_exact(pairs.pair(i)) for i in range(pairs.A.shape[0])]
        beta = np.array([s[0] for s in solved])
        logpa = np.array([s[1] for s in solved])
        kernel = torch.stack([s[2] for s in solved]).cpu().numpy()
        epoch = history = None
    else:
        if epochs < 1 or batch_size < 1 or lr <= 0 or beta0 < 0:
            raise ValueError("adam solver needs epochs >= 1, batch_size >= 1, lr > 0, beta0 >= 0")
        trace = solve_adam(pairs, epochs=epochs, lr=lr, batch_size=batch_size, beta0=beta0,
                           seed=seed, progress=progress)
        kern = summed_terms(pairs, trace.beta.to(pairs.X.device), keep_kernel=True)[3]
        beta = trace.beta.cpu().numpy()
        logpa = trace.logpa.cpu().numpy()
        kernel = kern.cpu().numpy()
        epoch = trace.epoch.cpu().numpy()
        history = {"beta": trace.beta_history.cpu().numpy(),
                   "logpa": trace.logpa_history.cpu().numpy()}
    pa = logpa / n + math.log(k)
    if not stacked:
        beta, logpa, pa, kernel = float(beta[0]), float(logpa[0]), float(pa[0]), kernel[0]
        if epoch is not None:
            epoch = int(epoch[0])
            history = {key: val[:, 0] for key, val in history.items()}
    return PAResult(logpa=logpa, pa=pa, beta=beta, kernel=kernel, solver=solver, n=n, k=k,
                    epoch=epoch, history=history)


@limit_threads(lambda scores_a, scores_b, betas, *args, **kwargs: size_of(scores_a) * size_of(betas))
def pa_curve(scores_a, scores_b, betas, inputs: str = "logits") -> np.ndarray:
    """The objective sum_i k_i(beta) (paper scale) at each beta in `betas`, for one pair."""
    a, b = validate_scores(scores_a, scores_b, inputs)
    if a.dim() != 2:
        raise ValueError("pa_curve takes one pair of (N, K) scores")
    beta = as_float64(betas, "betas").reshape(-1)
    if bool((beta < 0).any()) or not bool(torch.isfinite(beta).all()):
        raise ValueError("betas must be finite and >= 0")
    pairs = CentredPairs.from_scores(a, b, masked=None if inputs != "logits" else False)
    return summed_terms(pairs, beta)[0].cpu().numpy()
