"""The authors' beta optimisation ("adam" solver), batched over many pairs at once.

Per pair: beta0 = 1, Adam (lr 0.1, torch defaults betas=(0.9, 0.999), eps=1e-8) on the loss
-sum_i k_i(beta) of a random minibatch of 64 samples, beta projected to >= 0 after every step;
after each epoch the full-data objective is evaluated, and the best epoch is reported.  All P
pairs share one random order per epoch (seeded), so a stack of P pairs gives the same betas
as P separate runs with the same seed.  Gradients are analytic (k'(beta)), not autograd.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from tqdm.auto import tqdm

from .kernel import CentredPairs, kernel_terms, summed_terms

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


@dataclass
class AdamTrace:
    beta: torch.Tensor  # (P,) beta of the best epoch
    logpa: torch.Tensor  # (P,) full-data objective at the best epoch
    epoch: torch.Tensor  # (P,) best epoch, 1-based
    beta_history: torch.Tensor  # (epochs, P)
    logpa_history: torch.Tensor  # (epochs, P)


def solve_adam(p: CentredPairs, epochs: int = 500, lr: float = 0.1, batch_size: int = 64,
               beta0: float = 1.0, seed: int = 0, progress: bool = False) -> AdamTrace:
    """Run the procedure on a stack of pairs (CentredPairs with A of shape (P, N, K))."""
    n_pairs, n = p.X.shape[0], p.n
    dtype = p.X.dtype
    beta = torch.full((n_pairs,), float(beta0), dtype=dtype)
    m = torch.zeros_like(beta)
    v = torch.zeros_like(beta)
    b1, b2 = ADAM_BETAS
    gen = torch.Generator().manual_seed(int(seed))
    best = torch.full_like(beta, -torch.inf)
    best_beta = beta.clone()
    best_epoch = torch.zeros(n_pairs, dtype=torch.long)
    beta_hist = torch.empty(epochs, n_pairs, dtype=dtype)
    logpa_hist = torch.empty(epochs, n_pairs, dtype=dtype)
    step = 0
    for epoch in tqdm(range(epochs), desc=f"adam beta ({n_pairs} pairs)", disable=not progress,
                      mininterval=2.0):
        order = torch.randperm(n, generator=gen)
        for lo in range(0, n, batch_size):
            _, dk, _ = kernel_terms(p.take(order[lo:lo + batch_size]), beta, order=1)
            grad = -dk.sum(-1)
            step += 1
            m = b1 * m + (1 - b1) * grad
            v = b2 * v + (1 - b2) * grad * grad
            denom = (v.sqrt() / (1 - b2 ** step) ** 0.5) + ADAM_EPS
            beta = (beta - (lr / (1 - b1 ** step)) * m / denom).clamp_min(0.0)
        f = summed_terms(p, beta)[0]
        beta_hist[epoch] = beta
        logpa_hist[epoch] = f
        better = f > best
        best = torch.where(better, f, best)
        best_beta = torch.where(better, beta, best_beta)
        best_epoch = torch.where(better, torch.full_like(best_epoch, epoch + 1), best_epoch)
    return AdamTrace(best_beta, best, best_epoch, beta_hist, logpa_hist)
