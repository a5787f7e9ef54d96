"""The authors' beta optimisation ("adam" solver), batched over many pairs at once.

Per pair: beta0 = 1, Adam (lr 0.1, torch defaults betas=(0.9, 0.999), eps=1e-8) on the loss
-sum_i k_i(beta) of a random minibatch of 64 samples, beta projected to >= 0 after every step;
after each epoch the full-data objective f(beta_e) is evaluated and the best epoch is
reported.  All P pairs share one random order per epoch (seeded), so a stack of P pairs gives
the same betas as P separate runs with the same seed.  Gradients are analytic (k'(beta)).

Speed: a whole epoch of all pairs runs in the fused C kernel (native.py) when it can be built,
otherwise in PyTorch step by step.  The best epoch, max_e f(beta_e), is found without
evaluating every epoch: f = F1 - F2 with F1, F2 convex in beta (kernel.convex_parts), so
between two evaluated betas f is at most the chord of F1 minus the tangents of F2.  Epochs
whose bound cannot beat the best value found (up to BOUND_TOL, relative) are never evaluated;
the result equals the full search to that tolerance.  history["logpa"] is NaN for them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from pabench.metrics import native
from pabench.metrics.kernel import CentredPairs, convex_parts, kernel_terms

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
BOUND_TOL = 1e-12


@dataclass
class AdamTrace:
    beta: torch.Tensor  # (P,) beta of the best epoch
    logpa: torch.Tensor  # (P,) full-data objective at the best epoch
    epoch: torch.Tensor  # (P,) best epoch, 1-based
    beta_history: torch.Tensor  # (epochs, P)
    logpa_history: torch.Tensor  # (epochs, P); NaN where the bound made evaluation unnecessary


def _run_epochs(p: CentredPairs, epochs, lr, batch_size, beta0, seed, progress) -> torch.Tensor:
    """Beta after every epoch, shape (epochs, P)."""
    n_pairs, n = p.X.shape[0], p.n
    beta = torch.full((n_pairs,), float(beta0), dtype=torch.float64, device=p.X.device)
    m = torch.zeros_like(beta)
    v = torch.zeros_like(beta)
    b1, b2 = ADAM_BETAS
    gen = torch.Generator().manual_seed(int(seed))
    history = torch.empty(epochs, n_pairs, dtype=torch.float64)
    use_native = native.usable(p)
    steps_per_epoch = -(-n // batch_size)
    for epoch in tqdm(range(epochs), desc=f"adam beta ({n_pairs} pairs)", disable=not progress,
                      mininterval=2.0):
        order = torch.randperm(n, generator=gen).to(p.X.device)
        if use_native:
            native.adam_epoch(p, order, batch_size, lr, ADAM_BETAS, ADAM_EPS,
                              epoch * steps_per_epoch, beta, m, v)
        else:
            for i, lo in enumerate(range(0, n, batch_size)):
                step = epoch * steps_per_epoch + i + 1
                _, dk, _ = kernel_terms(p.take(order[lo:lo + batch_size]), beta, order=1)
                grad = -dk.sum(-1)
                m = b1 * m + (1 - b1) * grad
                v = b2 * v + (1 - b2) * grad * grad
                denom = (v.sqrt() / (1 - b2 ** step) ** 0.5) + ADAM_EPS
                beta = (beta - (lr / (1 - b1 ** step)) * m / denom).clamp_min(0.0)
        history[epoch] = beta.cpu()
    return history


def _parts(p: CentredPairs, pairs: np.ndarray, betas: np.ndarray) -> np.ndarray:
    """(F1, F2, F2') for each request (pair index, beta)."""
    idx = torch.as_tensor(pairs, dtype=torch.long, device=p.X.device)
    beta = torch.as_tensor(betas, dtype=torch.float64, device=p.X.device)
    if native.usable(p):
        return native.convex_parts(p, idx, beta).numpy()
    return convex_parts(p.pair(idx), beta).cpu().numpy()


class _Search:
    """Branch and bound over the distinct betas of one pair's epochs."""

    def __init__(self, betas: np.ndarray):
        self.values, self.first = np.unique(betas, return_index=True)  # sorted, first epoch
        self.parts: dict[int, np.ndarray] = {}
        self.best, self.best_i = -np.inf, -1

    def record(self, i: int, parts: np.ndarray) -> None:
        self.parts[i] = parts
        f = parts[0] - parts[1]
        if f > self.best or (f == self.best and self.first[i] < self.first[self.best_i]):
            self.best, self.best_i = f, i

    def start(self) -> list[int]:
        return sorted({0, len(self.values) - 1})

    def next_point(self):
        """The unevaluated beta with the highest upper bound, if it could beat the best."""
        done = sorted(self.parts)
        margin = BOUND_TOL * abs(self.best) if np.isfinite(self.best) else 0.0
        best_bound, best_i = self.best + margin, None
        for lo, hi in zip(done, done[1:]):
            if hi - lo < 2:
                continue
            inner = np.arange(lo + 1, hi)
            x = self.values[inner]
            (f1l, f2l, d2l), (f1h, f2h, d2h) = self.parts[lo], self.parts[hi]
            xl, xh = self.values[lo], self.values[hi]
            chord = f1l + (f1h - f1l) * (x - xl) / (xh - xl)
            tangent = np.maximum(f2l + d2l * (x - xl), f2h + d2h * (x - xh))
            bound = chord - tangent
            j = int(np.argmax(bound))
            if bound[j] > best_bound:
                best_bound, best_i = bound[j], int(inner[j])
        return best_i


def _best_epochs(p: CentredPairs, history: torch.Tensor):
    """max_e f(beta_e) per pair by branch and bound; returns (best f, best epoch 1-based,
    f history with NaN where not evaluated)."""
    hist = history.cpu().numpy()
    searches = [_Search(hist[:, j]) for j in range(hist.shape[1])]
    requests = [(j, i) for j, s in enumerate(searches) for i in s.start()]
    while requests:
        pairs = np.array([j for j, _ in requests])
        betas = np.array([searches[j].values[i] for j, i in requests])
        for (j, i), parts in zip(requests, _parts(p, pairs, betas)):
            searches[j].record(i, parts)
        requests = [(j, i) for j, s in enumerate(searches) if (i := s.next_point()) is not None]
    f_hist = np.full(hist.shape, np.nan)
    for j, s in enumerate(searches):
        for i, parts in s.parts.items():
            f_hist[hist[:, j] == s.values[i], j] = parts[0] - parts[1]
    best = np.array([s.best for s in searches])
    epoch = np.array([s.first[s.best_i] + 1 for s in searches])
    return best, epoch, f_hist


def solve_adam(p: CentredPairs, epochs: int = 500, lr: float = 0.1, batch_size: int = 64,
               beta0: float = 1.0, seed: int = 0, progress: bool = False) -> AdamTrace:
    """Run the procedure on a stack of pairs (CentredPairs with X of shape (P, N, 3, K))."""
    history = _run_epochs(p, epochs, lr, batch_size, beta0, seed, progress)
    best, epoch, f_hist = _best_epochs(p, history)
    epoch_t = torch.as_tensor(epoch, dtype=torch.long)
    best_beta = history[epoch_t - 1, torch.arange(history.shape[1])].cpu()
    return AdamTrace(best_beta, torch.as_tensor(best), epoch_t, history, torch.as_tensor(f_hist))
