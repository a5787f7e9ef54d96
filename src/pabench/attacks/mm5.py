"""The minimum-margin (MM) attack family as OODRobustBench runs it (MM3, MM5, MM+).

MM (Gao et al., ICML 2022) is targeted APGD (Croce & Hein, ICML 2020, Algorithm 1) on the
minimum-margin loss ``-(f_y(x) - f_t(x))`` of the raw logits (no DLR rescaling).  The targets are
the classes with the 2nd, 3rd, ... highest clean logits; they are attacked one after another, each
with one run (one random start) of ``n_iter`` iterations, and each target only on the points that
are still robust (correctly classified and not yet broken by an earlier target).  OODRobustBench
evaluates every model with MM5 (5 targets x 20 iterations); MM3 uses 3 targets, MM+ 9 targets x 100
iterations.  Threat models: L-inf and L2 balls of radius ``eps`` intersected with the [0, 1] box.

One APGD run on a chunk of points, per point (everything is per-point, so points never interact):

* random start: L-inf ``x + eps * u / max|u|`` with ``u ~ U[-1, 1]^d``, L2 ``x + eps * g / ||g||_2``
  with ``g ~ N(0, I)``, clipped to [0, 1];
* step size ``eta = 2 * eps``; update ``z = P(x_k + eta * s(grad))`` with ``s`` = sign (L-inf)
  or the L2-normalised gradient (L2), then
  ``x_{k+1} = P(x_k + a (z - x_k) + (1 - a)(x_k - x_{k-1}))`` with momentum ``a = 0.75``
  (``a = 1`` on the first step); ``P`` = projection onto the eps-ball, then the box;
* checkpoints: the first after ``max(int(0.22 n), 1)`` iterations, then each window
  ``max(int(0.03 n), 1)`` shorter than the previous one, never shorter than ``max(int(0.06 n), 1)``
  (the integer schedule of the reference implementation; for ``n = 100`` it is Algorithm 1's
  p_j = 0.22, 0.41, 0.57, ..., for ``n = 20`` it gives checkpoints after iterations
  4, 7, 9, 10, 11, ..., 20);
* at a checkpoint the step is halved where (1) the loss rose in at most ``rho * k`` of the window's
  ``k`` steps (``rho = 0.75``; the window includes the step from its first point, for the first
  window the random start), or (2) the step was not halved at the previous checkpoint and the best
  loss has not improved since; where it is halved, the iterate restarts from the best point so far
  (highest loss) and its gradient;
* a point is broken as soon as an iterate is misclassified; its adversarial example is the last
  misclassified iterate.  Points the attack does not break keep the clean image (the reference's
  convention), so ``x_adv == x`` exactly where ``robust`` is True.

Gradient evaluations: every forward pass that is followed by a backward pass to the input adds the
number of images in it (one random start + ``n_iter`` iterations = ``n_iter + 1`` per point and
target).  Forward-only passes (the clean predictions, one single-image probe for the number of
classes, the re-check of broken points) are not counted.

Where this deliberately differs from the reference code (pyautoattack / OODRobustBench's copy):
its first oscillation window compares the first iterate's loss with an unfilled (zero) slot of its
loss history; here it is compared with the loss at the random start, as Algorithm 1 says.  Random
starts are drawn from a CPU generator seeded with ``seed`` and moved to the input's device, so they
are the same on CPU and CUDA; results are deterministic for a given (seed, batch_size).

``early_stop=True`` (not the reference's behaviour) drops a point from its run at its first
misclassified iterate, which becomes its adversarial example.  Points never interact and the random
starts are drawn for the same chunks, so the robust flags are exactly those of the full run; only
x_adv differs (first instead of last misclassified iterate).  On weak models most points break in
a few iterations, so this saves most of the passes (OODRobustBench's many shifted sets).
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from types import MappingProxyType

import torch

__all__ = ["MM3", "MM5", "MMPLUS", "MMResult", "checkpoints", "mm_attack"]

#: Presets, usable as ``mm_attack(model, x, y, eps, **MM5)``.
MM3 = MappingProxyType({"n_targets": 3, "n_iter": 20})
MM5 = MappingProxyType({"n_targets": 5, "n_iter": 20})
MMPLUS = MappingProxyType({"n_targets": 9, "n_iter": 100})

_NORMS = {"linf": "Linf", "l2": "L2"}
_RHO = 0.75  # oscillation threshold of the step-size rule
_MOMENTUM = 0.75
_TINY = 1e-12


@dataclass(frozen=True)
class MMResult:
    """``x_adv``: adversarial images (in [0, 1], within eps of x; the clean image where the point
    is robust or misclassified from the start).  ``robust``: per point, correctly classified on
    ``x_adv`` (False for points misclassified when clean).  ``grad_evals``: forward+backward passes
    per image, summed."""

    x_adv: torch.Tensor
    robust: torch.Tensor
    grad_evals: int

    @property
    def robust_accuracy(self) -> float:
        return float(self.robust.float().mean().item())


def checkpoints(n_iter: int) -> list[int]:
    """The iterations (1-based counts of iterations done) after which the step-size rule is
    checked, for a run of ``n_iter`` iterations."""
    k = max(int(0.22 * n_iter), 1)
    k_min = max(int(0.06 * n_iter), 1)
    k_dec = max(int(0.03 * n_iter), 1)
    out, at = [], 0
    while at + k <= n_iter:
        at += k
        out.append(at)
        k = max(k - k_dec, k_min)
    return out


def check_int(name: str, value, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return int(value)


def check_eps(eps) -> float:
    """A finite radius > 0 (a number or a one-element tensor), as a float."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) and not (
            isinstance(eps, torch.Tensor) and eps.numel() == 1):
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    eps_f = float(eps)
    if not math.isfinite(eps_f) or eps_f <= 0:
        raise ValueError(f"eps must be a finite number > 0, got {eps!r}")
    return eps_f


def check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    return int(seed)


def check_tensors(x, y) -> None:
    """Images a floating-point tensor, labels an integer one."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor, got "
                         f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
    if not isinstance(y, torch.Tensor) or y.dtype.is_floating_point or y.dtype == torch.bool \
            or y.is_complex():
        raise ValueError(f"y must be an integer tensor of labels, got "
                         f"{y.dtype if isinstance(y, torch.Tensor) else type(y).__name__}")


def check_range(x) -> None:
    """Every value finite and in [0, 1]."""
    lo, hi = x.min().item(), x.max().item()
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo < 0 or hi > 1:
        raise ValueError(f"x must lie in [0, 1], got values in [{lo}, {hi}]")


def _validate(x, y, eps, norm, n_targets, n_iter, seed, batch_size):
    """Everything that can be checked without running the model; returns the clean values."""
    eps_f = check_eps(eps)
    if not isinstance(norm, str) or norm.lower() not in _NORMS:
        raise ValueError(f"norm must be 'Linf' or 'L2', got {norm!r}")
    n_targets = check_int("n_targets", n_targets, 1)
    n_iter = check_int("n_iter", n_iter, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    seed = check_seed(seed)
    check_tensors(x, y)
    if x.ndim < 2 or y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(f"x must be (N, ...) and y (N,) with the same N, got x of shape "
                         f"{tuple(x.shape)} and y of shape {tuple(y.shape)}")
    if x.shape[0] == 0:
        raise ValueError("x is empty (0 points)")
    check_range(x)
    return eps_f, _NORMS[norm.lower()], n_targets, n_iter, seed, batch_size


class Frozen:
    """Eval mode and frozen parameters for the attack; both restored afterwards."""

    def __init__(self, model: torch.nn.Module):
        self.model = model

    def __enter__(self):
        self.modes = [(m, m.training) for m in self.model.modules()]
        self.flags = [(p, p.requires_grad) for p in self.model.parameters()]
        self.model.eval()
        self.model.requires_grad_(False)
        return self.model

    def __exit__(self, *exc):
        for m, mode in self.modes:
            m.training = mode
        for p, flag in self.flags:
            p.requires_grad_(flag)
        return False


class _Attack:
    """One mm_attack call: the model, threat model, counters and random stream."""

    def __init__(self, model, eps, norm, n_iter, seed, device, dtype):
        self.model, self.eps, self.norm, self.n_iter = model, eps, norm, n_iter
        self.device, self.dtype = device, dtype
        self.gen = torch.Generator(device="cpu").manual_seed(seed)
        self.grad_evals = 0

    # --- threat model ---------------------------------------------------------------------
    def _flat_norm(self, v: torch.Tensor) -> torch.Tensor:
        flat = v.flatten(1)
        n = flat.abs().amax(1) if self.norm == "Linf" else flat.norm(p=2, dim=1)
        return n.view(-1, *([1] * (v.ndim - 1)))

    def project(self, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """Onto the eps-ball around x, then the [0, 1] box (clipping keeps the ball)."""
        if self.norm == "Linf":
            v = torch.minimum(torch.maximum(v, x - self.eps), x + self.eps)
        else:
            d = v - x
            n = self._flat_norm(d)
            v = x + d * (torch.clamp(n, max=self.eps) / (n + _TINY))
        return v.clamp(0.0, 1.0)

    def direction(self, g: torch.Tensor) -> torch.Tensor:
        return g.sign() if self.norm == "Linf" else g / (self._flat_norm(g) + _TINY)

    def random_start(self, x: torch.Tensor) -> torch.Tensor:
        if self.norm == "Linf":
            u = 2 * torch.rand(x.shape, generator=self.gen) - 1
        else:
            u = torch.randn(x.shape, generator=self.gen)
        u = u.to(device=self.device, dtype=self.dtype)
        return (x + self.eps * u / (self._flat_norm(u) + _TINY)).clamp(0.0, 1.0)

    # --- loss and its gradient ------------------------------------------------------------
    def evaluate(self, x_adv, y, target):
        """MM loss, its input gradient and whether each point is still correctly classified."""
        xg = x_adv.detach().requires_grad_(True)
        with torch.enable_grad():
            logits = self.model(xg)
            loss = logits.gather(1, target[:, None])[:, 0] - logits.gather(1, y[:, None])[:, 0]
            (grad,) = torch.autograd.grad(loss.sum(), xg)
        self.grad_evals += xg.shape[0]
        correct = logits.detach().argmax(1) == y
        return loss.detach(), grad.detach(), correct

    # --- one targeted APGD run ------------------------------------------------------------
    def run(self, x, y, target, early_stop: bool = False):
        """Returns (last misclassified iterate, broken) for a chunk of points.  With early_stop a
        point leaves the run at its first misclassified iterate (which it keeps): the same
        broken flags, since points never interact, for a fraction of the passes on weak models."""
        view = (-1,) + (1,) * (x.ndim - 1)
        x_cur = self.random_start(x)
        loss, grad, correct = self.evaluate(x_cur, y, target)
        broken = ~correct
        found = x_cur.clone()
        x_best, grad_best, loss_best = x_cur.clone(), grad.clone(), loss.clone()
        step = torch.full((x.shape[0],), 2.0 * self.eps, device=self.device, dtype=self.dtype)
        x_prev = x_cur.clone()
        history = [loss]  # losses since (and including) the start of the current window
        marks = set(checkpoints(self.n_iter))
        best_at_check = loss_best.clone()
        halved_at_check = torch.ones_like(broken)  # condition 2 cannot fire at the first check
        at = torch.arange(x.shape[0], device=self.device)  # chunk positions of the points still run
        full = (x, y, target)

        for i in range(self.n_iter):
            if early_stop:
                keep = ~broken[at]
                if not keep.all():
                    at = at[keep]
                    if at.numel() == 0:
                        break
                    x, y, target = (t[at] for t in full)
                    x_cur, x_prev, grad, x_best, grad_best = (
                        t[keep] for t in (x_cur, x_prev, grad, x_best, grad_best))
                    loss_best, step, best_at_check, halved_at_check = (
                        t[keep] for t in (loss_best, step, best_at_check, halved_at_check))
                    history = [h[keep] for h in history]
            with torch.no_grad():
                a = 1.0 if i == 0 else _MOMENTUM
                z = self.project(x, x_cur + step.view(view) * self.direction(grad))
                x_new = self.project(x, x_cur + a * (z - x_cur) + (1 - a) * (x_cur - x_prev))
                x_prev, x_cur = x_cur, x_new

            loss, grad, correct = self.evaluate(x_cur, y, target)
            with torch.no_grad():
                found[at[~correct]] = x_cur[~correct]
                broken[at[~correct]] = True
                better = loss > loss_best
                x_best[better] = x_cur[better]
                grad_best[better] = grad[better]
                loss_best = torch.where(better, loss, loss_best)
                history.append(loss)

                if i + 1 in marks:  # checkpoint: k steps since the last one
                    h = torch.stack(history)
                    k = h.shape[0] - 1
                    rises = (h[1:] > h[:-1]).sum(0)
                    halve = (rises <= _RHO * k) | (~halved_at_check & (best_at_check >= loss_best))
                    step = torch.where(halve, step / 2, step)
                    x_cur = torch.where(halve.view(view), x_best, x_cur)
                    grad = torch.where(halve.view(view), grad_best, grad)
                    halved_at_check, best_at_check = halve, loss_best.clone()
                    history = [loss]
        return found, broken


@torch.no_grad()
def predict(model, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    return torch.cat([model(x[i:i + batch_size]) for i in range(0, x.shape[0], batch_size)])


def mm_attack(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float,
              norm: str = "Linf", n_targets: int = 5, n_iter: int = 20, seed: int = 0,
              batch_size: int = 256, early_stop: bool = False) -> MMResult:
    """Run the MM attack (defaults: MM5) on ``model`` (logits out, inputs in [0, 1]).

    ``x``: (N, ...) float tensor in [0, 1]; ``y``: (N,) integer labels; ``eps``: radius of the
    ``norm`` ball ("Linf" or "L2").  Points are attacked in chunks of ``batch_size``.  The model
    runs in eval mode with frozen parameters during the attack; both are restored afterwards.
    Every tensor is created on ``x``'s device.  ``early_stop``: see the module docstring."""
    eps, norm, n_targets, n_iter, seed, batch_size = _validate(
        x, y, eps, norm, n_targets, n_iter, seed, batch_size)
    device = x.device
    x = x.detach()
    y = y.detach().to(device=device, dtype=torch.long)

    with Frozen(model):
        probe = predict(model, x[:1], 1)
        if probe.ndim != 2:
            raise ValueError(f"the model must return (N, classes) logits, got shape "
                             f"{tuple(probe.shape)}")
        n_classes = probe.shape[1]
        if n_targets >= n_classes:
            raise ValueError(f"n_targets must be < the number of classes ({n_classes}), "
                             f"got {n_targets}")
        y_lo, y_hi = y.min().item(), y.max().item()
        if y_lo < 0 or y_hi >= n_classes:
            raise ValueError(f"labels must lie in [0, {n_classes - 1}], got values in "
                             f"[{y_lo}, {y_hi}]")

        logits = predict(model, x, batch_size)
        robust = logits.argmax(1) == y
        # targets[:, j]: the class with the (j + 2)-th highest clean logit (ties: lower index first)
        order = torch.sort(logits, dim=1, descending=True, stable=True).indices
        targets = order[:, 1:n_targets + 1]
        x_adv = x.clone()
        attack = _Attack(model, eps, norm, n_iter, seed, device, x.dtype)

        for j in range(n_targets):
            todo = robust.nonzero().flatten()
            for start in range(0, todo.numel(), batch_size):
                idx = todo[start:start + batch_size]
                found, broken = attack.run(x[idx], y[idx], targets[idx, j], early_stop)
                if broken.any():
                    hit = idx[broken]
                    x_adv[hit] = found[broken]
                    # re-check outside the run, as the reference does; a point that is still
                    # correctly classified (borderline numerics) stays robust with its clean image
                    still = predict(model, x_adv[hit], batch_size).argmax(1) == y[hit]
                    robust[hit] = still
                    x_adv[hit[still]] = x[hit[still]]
    return MMResult(x_adv=x_adv, robust=robust, grad_evals=attack.grad_evals)
