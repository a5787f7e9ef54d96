"""The C-1 decision functions g_i = f_t - f_i (i != t) and their input gradients, for a whole batch.

One forward pass and C-1 backward passes over the whole batch, one per decision function: the
j-th pass back-propagates +1 on each point's target logit and -1 on its j-th other class, so its
input gradient is grad g_j of every point at once (a point's output depends on its own input
only, the model being in eval mode).  Not the full-batch Jacobian, whose cross-sample blocks are
all zero, nor a Python loop over points; and C-1 passes where differencing the C class gradients
would take C (10% fewer for 10 classes).
"""
from __future__ import annotations

import torch


def others(values: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """values (B, C, ...) without each row's target class: (B, C-1, ...), classes in order."""
    b, c = values.shape[:2]
    keep = torch.ones(b, c, dtype=torch.bool, device=values.device)
    keep[torch.arange(b, device=values.device), target] = False
    return values[keep].reshape(b, c - 1, *values.shape[2:])


def decision_functions(model, x: torch.Tensor, target: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """g (B, C-1) and grad_x g (B, C-1, d) for the decision functions g_i = f_t - f_i, i != t.
    (A vmapped backward, `is_grads_batched`, measured 1.4-2.5x slower on CPU.)"""
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        logits = model(x)
        b, c = logits.shape
        rows = torch.arange(b, device=logits.device)
        rest = others(torch.arange(c, device=logits.device).expand(b, c), target)  # (B, C-1)
        grads = []
        for j in range(c - 1):
            seed = torch.zeros_like(logits)
            seed[rows, target] = 1.0
            seed[rows, rest[:, j]] = -1.0
            grads.append(torch.autograd.grad(logits, x, seed, retain_graph=j < c - 2)[0])
    logits = logits.detach()
    g = logits[rows, target][:, None] - others(logits, target)
    return g, torch.stack(grads, 1).reshape(b, c - 1, -1)
