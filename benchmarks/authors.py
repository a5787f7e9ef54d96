"""The average-case paper's own way of computing Taylor and MMSE, as the baseline of
bench_avgcase.py and bench_runtime.py (written from the authors' public code, AI4LIFE-GROUP/
average-case-robustness, its batched estimators `calc_prob_batched`):

- class gradients: `torch.autograd.functional.jacobian(lambda x: model(x).sum(0), x,
  vectorize=True)`, i.e. one vmapped backward pass per class over the whole batch (a point's
  logits depend on its own input only, so the sum over the batch has each point's gradient in
  its own slot);
- Taylor: the prediction and g from two forward passes, then that jacobian for the batch;
- MMSE: point by point, the same for its n noisy copies as one batch, averaged over the copies;
- then z and UU^T + 1e-5 I in the model's dtype, and scipy's `multivariate_normal.cdf` per point
  with maxpts 10,000 and abseps = releps = 1e-4.

Each returns (p, seconds before the CDF loop), timed on `x`'s device (synchronised on a GPU) by
`clock`.
"""
from __future__ import annotations

import time

import numpy as np
import torch
from scipy.stats import multivariate_normal

JITTER = 1e-5
clock = time.perf_counter   # bench_avgcase.py --clock cpu: time.process_time
CDF = {"maxpts": 10_000, "abseps": 1e-4, "releps": 1e-4}   # the authors' defaults


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def class_gradients(model, x) -> torch.Tensor:
    """(B, C, d): every logit's input gradient, by the vectorised jacobian of the batch sum."""
    jac = torch.autograd.functional.jacobian(lambda inp: model(inp).sum(0), x, vectorize=True)
    return jac.flatten(2).transpose(0, 1)


def others(values: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Rows without each point's target class: (B, C, ...) -> (B, C-1, ...)."""
    keep = torch.ones(values.shape[:2], dtype=torch.bool, device=values.device)
    keep[torch.arange(len(values), device=values.device), target] = False
    return values[keep].reshape(len(values), values.shape[1] - 1, *values.shape[2:])


def decision(logits, grad_f, target):
    """g = f_t - f_i and grad g, i != t."""
    rows = torch.arange(len(logits), device=logits.device)
    g = logits[rows, target][:, None] - others(logits, target)
    grad_g = grad_f[rows, target][:, None] - others(grad_f, target)
    return g, grad_g


def cdf_loop(g, grad_g, sigma) -> np.ndarray:
    """z, UU^T + 1e-5 I in the model's dtype, then scipy per point (on the CPU)."""
    norm = grad_g.norm(dim=2)
    unit = grad_g / norm[..., None]
    cov = unit @ unit.transpose(1, 2) + JITTER * torch.eye(g.shape[1], device=g.device)
    z = (g / (sigma * norm)).detach().cpu().numpy()
    cov = cov.detach().cpu().numpy()
    return np.array([multivariate_normal.cdf(z[i], mean=np.zeros(z.shape[1]), cov=cov[i], **CDF)
                     for i in range(len(z))])


def taylor(model, x, sigma):
    sync(x.device)
    start = clock()
    target = model(x).argmax(1)
    g, grad_g = decision(model(x), class_gradients(model, x), target)
    sync(x.device)
    grad_seconds = clock() - start
    return cdf_loop(g, grad_g, sigma), grad_seconds


def mmse(model, x, sigma, n, seed=0, batch_size=256):
    """The noise is the library's (`estimators.linearised`: blocks of batch_size // n points, one
    draw each from a generator seeded with `seed` on x's device), so p agree with p_mmse to CDF
    accuracy; the gradients are taken point by point, as the authors do."""
    sync(x.device)
    start = clock()
    gen = torch.Generator(device=x.device).manual_seed(seed)
    per = max(1, batch_size // n)
    gs, grads = [], []
    for lo in range(0, len(x), per):
        block = x[lo:lo + per]
        noise = torch.randn((len(block) * n, *x.shape[1:]), generator=gen, device=x.device,
                            dtype=x.dtype)
        for i in range(len(block)):
            target = model(block[i:i + 1]).argmax(1).repeat(n)
            copies = block[i:i + 1] + sigma * noise[i * n:(i + 1) * n]
            g, grad_g = decision(model(copies), class_gradients(model, copies), target)
            gs.append(g.mean(0))
            grads.append(grad_g.mean(0))
    g, grad_g = torch.stack(gs), torch.stack(grads)
    sync(x.device)
    grad_seconds = clock() - start
    return cdf_loop(g, grad_g, sigma), grad_seconds
