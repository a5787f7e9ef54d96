"""PPGD and LPA: the two LPIPS-bounded threat-shift attacks of OODRobustBench.

OODRobustBench (Li et al., ICML 2024) runs them with perceptual-advex (Laidlaw, Singla & Feizi,
ICLR 2021; github.com/cassidylaidlaw/perceptual-advex, ``perceptual_advex/perceptual_attacks.py``):
``PerceptualPGDAttack`` and ``LagrangePerceptualAttack`` with ``bound=0.5``, ``num_iterations=40``,
``projection='newtons'`` and, on CIFAR-10, ``lpips_model='alexnet_cifar'`` (``'alexnet'``, the
ImageNet AlexNet, on ImageNet); see ``oodrobustbench/attacks/__init__.py``.  This module computes
what they compute, from those sources.

LPIPS distance (``distances.py``, ``models.py`` ``AlexNetFeatureModel``): the image is normalised
with the ImageNet mean and standard deviation and run through AlexNet's convolutional stack; the
activations after its five ReLUs (``features[:2]``, ``[2:5]``, ``[5:8]``, ``[8:10]``, ``[10:12]``)
are each divided, at every position, by their L2 norm over channels (+ 1e-10) and by
sqrt(H * W), flattened and concatenated into ``phi(x)``; ``d(a, b) = ||phi(a) - phi(b)||_2``.  No
learned linear layer (the "unweighted" LPIPS of the paper).  ``alexnet_cifar`` is an AlexNet for
32 x 32 inputs (``CifarAlexNet``: 3x3 convolutions of 64 (stride 2), 192, 384, 256, 256 channels,
max-pools of 2) trained on CIFAR-10 by the authors; ``alexnet`` is torchvision's ImageNet AlexNet.

The margin loss of both (``utilities.MarginLoss``, ``kappa=1``): ``min(kappa, max_{i != y} f_i -
f_y)`` on the logits, maximised.

PPGD (``PerceptualPGDAttack``; ``decay_step_size=False``, so the LPIPS step is ``2 * bound /
steps``; ``cg_iterations=5``, ``h=1e-3``): start at ``x + N(0, 0.01^2)`` (not clipped); each of
the ``steps`` iterations takes one first-order step (``FirstOrderStepPerceptualAttack``) and
projects onto the LPIPS ball.  The step solves ``(J^T J) s = g`` by 5 conjugate-gradient
iterations, ``g`` the gradient of the loss and ``J`` the Jacobian of ``phi`` at the current
point (``J^T J v`` as ``J^T (phi(a + h v) - phi(a)) / h``, a finite difference and one backward
pass), then moves to ``clip(a + lam s, 0, 1)`` with ``lam = step / ||(phi(a + h s) - phi(a)) /
h||`` (no move where ``||g|| < 1e-4``).  CG stops once ``||r||^2 < 0.1`` after its first iteration.

LPA (``LagrangePerceptualAttack``; ``decay_step_size=True``, ``step = bound``, ``binary_steps=5``,
``h=0.1``): start at ``x + N(0, 0.01^2)``, ``lambda = 0.01`` per point.  Up to 5 rounds of up to
``steps`` iterations: the loss ``-margin + lambda * relu(d(x, a) - bound)``; its gradient
normalised to unit L2 norm, ``n``; the step ``-n * step_t / (||phi(a) - phi(a + h n)|| / h +
1e-8)`` with ``step_t = bound * 0.1^(t / steps)`` (an LPIPS step of about ``step_t``), clipped to
[0, 1].  A point stops once it is misclassified within the bound; after each round, lambda is
multiplied by 10 for the points whose last distance reached the bound.  The final point is
projected onto the ball.

Projection (``NewtonsPerceptualProjection``, overshoot 0.1, at most 10 iterations, then
``BisectionPerceptualProjection``): for a point outside the ball, a Newton step on ``d(x, a) =
bound``, ``a -= (d - bound + 0.1) * 1.1 * grad / ||grad||^2``, clipped to [0, 1], repeated until
inside; points still outside after 10 steps are bisected on the segment from ``x``.

Where this module differs from the reference (none widens the threat model: every image returned
is in [0, 1] and within the bound, which tests check):

* The Newton projection takes each step with the gradient at the current point.  The reference
  re-enters the same leaf tensor and never zeroes its ``.grad``, so its k-th step uses the sum of
  the k gradients so far (smaller steps, more bisection).  Bisection keeps the largest fraction
  found inside the ball (the reference returns its last midpoint, which can lie just outside), and
  runs only on the points still outside.
* CG stops per point (``||r||^2 < 0.1``); the reference stops the whole batch when every point has,
  so a point's step there depends on the other points of its batch.
* A point is broken as soon as an iterate that lies within the bound (and in [0, 1]) is
  misclassified, and that iterate is returned (LPA's reference stops such a point one update
  later and returns the projection of that later point; PPGD's reference keeps attacking).  Points
  misclassified when clean are not attacked.  Robustness is re-checked on the returned images.
* The random start is drawn from ``seed`` for all N points at once, so chunking (``batch_size``)
  does not change it.

Gradient evaluations count the classifier's forward+backward passes per image (one per
iteration); the LPIPS network's passes are not counted.
"""
from __future__ import annotations

import logging
import math
import numbers
import re
from pathlib import Path
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from pabench.attacks.mm5 import Frozen, predict
from pabench.attacks.threats import ThreatResult, logit_margin, validate
from pabench.core.download import download_file
from pabench.core.io import file_digest

log = logging.getLogger("pabench.perceptual")

NETWORKS = ("alexnet", "alexnet_cifar")
WEIGHTS = ("download", "random")
URLS = {"alexnet": "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
        "alexnet_cifar": "https://perceptual-advex.s3.us-east-2.amazonaws.com/alexnet_cifar.pt"}
# torchvision's files carry the first hex digits of their SHA-256 after the last dash of their
# name (torch.hub's convention); the authors publish no checksum for alexnet_cifar.pt (pin one
# with `sha256`).
_HASH_IN_NAME = re.compile(r"-([a-f0-9]{8,})\.")

_MEAN = (0.485, 0.456, 0.406)
_STD = (0.229, 0.224, 0.225)
_CUTS = (2, 5, 8, 10, 12)      # features[:2], [2:5], [5:8], [8:10], [10:12]: after each ReLU
_NORM_EPS = 1e-10
_START_STD = 0.01
KAPPA = 1.0
PPGD_CG_STEPS, PPGD_H = 5, 1e-3
LPA_BINARY_STEPS, LPA_H, LPA_LAMBDA = 5, 0.1, 0.01
_OVERSHOOT, _NEWTON_STEPS, _BISECTION_STEPS = 0.1, 10, 10
_SMALL_GRAD = 1e-4
_CG_TOL = 1e-1


# =================================================================================================
# The LPIPS network
# =================================================================================================

def cifar_alexnet_features() -> nn.Sequential:
    """The convolutional stack of perceptual-advex's ``CifarAlexNet`` (32 x 32 inputs)."""
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, stride=2, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(64, 192, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(),
        nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(),
        nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))


def imagenet_alexnet_features() -> nn.Sequential:
    import torchvision

    return torchvision.models.alexnet(weights=None).features


class LPIPS(nn.Module):
    """``phi``: images (N, 3, H, W) in [0, 1] -> (N, D) normalised, flattened AlexNet
    activations, so that ``d(a, b) = ||phi(a) - phi(b)||`` (see the module docstring)."""

    def __init__(self, features: nn.Sequential, network: str = "", weights: str = ""):
        super().__init__()
        if len(features) != 13:
            raise ValueError(f"an AlexNet feature stack has 13 modules, got {len(features)}")
        self.features = features
        self.network, self.weights = network, weights
        self.register_buffer("mean", torch.tensor(_MEAN).view(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor(_STD).view(1, 3, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = (x - self.mean.to(x.dtype)) / self.std.to(x.dtype)
        parts, start = [], 0
        for cut in _CUTS:
            h = self.features[start:cut](h)
            start = cut
            norm = h.pow(2).sum(1, keepdim=True).sqrt() + _NORM_EPS
            parts.append((h / (norm * math.sqrt(h.shape[2] * h.shape[3]))).flatten(1))
        return torch.cat(parts, 1)

    def distance(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """The LPIPS distance of every pair of images, (N,)."""
        return (self(a) - self(b)).norm(dim=1)


def _features_state(network: str, path: Path) -> dict:
    """The feature stack's tensors from a downloaded file (torchvision's AlexNet state dict, or
    perceptual-advex's checkpoint ``{'model': AlexNetFeatureModel state dict}``)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same message
        raise ValueError(f"{path}: not a PyTorch weights file ({type(err).__name__}: {err})") \
            from None
    if network == "alexnet_cifar":
        state = state.get("model", {}) if isinstance(state, dict) else {}
        prefix = "model.features."
    else:
        prefix = "features."
    out = {k[len(prefix):]: v for k, v in state.items()
           if isinstance(k, str) and k.startswith(prefix)} if isinstance(state, dict) else {}
    if not out:
        raise ValueError(f"{path}: holds no {prefix}* tensors: not the {network} LPIPS weights")
    return out


def fetch_weights(network: str, root, url: Optional[str] = None,
                  sha256: Optional[str] = None) -> Path:
    """The LPIPS network's weights file under ``root`` (downloaded once from ``url``, default
    ``URLS[network]``).  Checked against ``sha256`` when given, else against the SHA-256 prefix
    in the file name (torchvision's ``alexnet-owt-7be5be79.pth``); alexnet_cifar.pt has no
    published checksum: its SHA-256 is logged so that it can be pinned.  A file that fails its
    check, or holds no LPIPS weights, is not kept (pabench.core.download: resumed, checked)."""
    if network not in NETWORKS:
        raise ValueError(f"LPIPS network must be one of {NETWORKS}, got {network!r}")
    url = url or URLS[network]
    dest = Path(root) / Path(url).name
    in_name = _HASH_IN_NAME.search(dest.name)
    checksum = sha256 or (in_name and f"sha256:{in_name.group(1)}")
    path = download_file(url, dest, checksum, check=lambda part: _features_state(network, part))
    if not checksum:
        log.warning("%s: no published checksum; its SHA-256 is %s (pin it: oodrb.lpips.sha256)",
                    path, file_digest(path))
    return path


def load_lpips(network: str = "alexnet_cifar", weights: str = "download", root="data/lpips",
               *, url: Optional[str] = None, sha256: Optional[str] = None,
               device="cpu") -> LPIPS:
    """The LPIPS network in eval mode on ``device``.  ``weights="random"`` builds the same
    architecture with random weights from a fixed seed and downloads nothing (the rehearsal and
    the tests: a distance of the right shape, not a perceptual one)."""
    if network not in NETWORKS:
        raise ValueError(f"LPIPS network must be one of {NETWORKS}, got {network!r}")
    if weights not in WEIGHTS:
        raise ValueError(f"LPIPS weights must be one of {WEIGHTS}, got {weights!r}")
    build = cifar_alexnet_features if network == "alexnet_cifar" else imagenet_alexnet_features
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        features = build()
    if weights == "download":
        path = fetch_weights(network, root, url, sha256)
        try:
            features.load_state_dict(_features_state(network, path))
        except RuntimeError as err:
            raise ValueError(f"{path}: its tensors do not fit the {network} feature stack: "
                             f"{err}") from None
    else:
        log.warning("LPIPS %s with RANDOM weights (rehearsal / tests: not a perceptual distance)",
                    network)
    return LPIPS(features, network, weights).to(device).eval().requires_grad_(False)


# =================================================================================================
# Shared pieces
# =================================================================================================

def _loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """perceptual-advex's MarginLoss(kappa=1): min(kappa, max_{i != y} f_i - f_y), to maximise."""
    return (-logit_margin(logits, y)).clamp(max=KAPPA)


def _rows(v: torch.Tensor) -> torch.Tensor:
    return v.flatten(1)


def _in_box(a: torch.Tensor) -> torch.Tensor:
    return (_rows(a).amin(1) >= 0) & (_rows(a).amax(1) <= 1)


def project(lpips: LPIPS, x: torch.Tensor, a: torch.Tensor, bound: float,
            phi_x: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``a`` moved into the LPIPS ball of radius ``bound`` around ``x`` (Newton steps with
    overshoot, then bisection on the segment from ``x`` for the points still outside); points
    already inside are returned unchanged."""
    with torch.no_grad():
        phi_x = lpips(x) if phi_x is None else phi_x
        out = a.detach().clone()
        need = (lpips(out) - phi_x).norm(dim=1) > bound
    for _ in range(_NEWTON_STEPS):
        idx = need.nonzero().flatten()
        if idx.numel() == 0:
            return out
        p = out[idx].requires_grad_(True)
        with torch.enable_grad():
            d = (lpips(p) - phi_x[idx]).norm(dim=1)
            (g,) = torch.autograd.grad(d.sum(), p)
        with torch.no_grad():
            d = d.detach()
            inside = d <= bound
            gn2 = _rows(g).pow(2).sum(1)
            size = torch.where(inside | (gn2 == 0), torch.zeros_like(d),
                               (d - bound + _OVERSHOOT) * (1 + _OVERSHOOT) / gn2.clamp_min(1e-30))
            out[idx] = (p.detach() - size.view(-1, 1, 1, 1) * g).clamp(0, 1)
            need[idx[inside]] = False
    with torch.no_grad():
        idx = need.nonzero().flatten()
        if idx.numel():
            need[idx] = (lpips(out[idx]) - phi_x[idx]).norm(dim=1) > bound
            idx = need.nonzero().flatten()
        if idx.numel():
            x0, a0 = x[idx], out[idx]
            lo = torch.zeros(idx.numel(), device=x.device, dtype=x.dtype)
            hi = torch.ones_like(lo)
            for _ in range(_BISECTION_STEPS):
                mid = (lo + hi) / 2
                m = mid.view(-1, 1, 1, 1)
                ok = (lpips(x0 + m * (a0 - x0)) - phi_x[idx]).norm(dim=1) <= bound
                lo, hi = torch.where(ok, mid, lo), torch.where(ok, hi, mid)
            out[idx] = x0 + lo.view(-1, 1, 1, 1) * (a0 - x0)
    return out


class _Best:
    """Per chunk: the image to return for every point, and which points are broken."""

    def __init__(self, x: torch.Tensor):
        self.x_adv = x.clone()
        self.broken = torch.zeros(x.shape[0], dtype=torch.bool, device=x.device)

    def take(self, idx, a, logits, y, dist, bound) -> torch.Tensor:
        """Record the iterates ``a`` of points ``idx`` that are misclassified within the bound
        and in [0, 1]; returns that mask."""
        hit = (logits.argmax(1) != y) & (dist <= bound) & _in_box(a)
        if hit.any():
            self.x_adv[idx[hit]] = a[hit]
            self.broken[idx[hit]] = True
        return hit


# =================================================================================================
# PPGD
# =================================================================================================

def _ppgd_chunk(model, lpips, x, y, start, bound, steps, step):
    best = _Best(x)
    with torch.no_grad():
        phi_x = lpips(x)
    a = x + start
    idx = torch.arange(x.shape[0], device=x.device)  # chunk positions of the points attacked
    grad_evals = 0
    for t in range(steps + 1):
        p = a.detach().requires_grad_(True)
        with torch.set_grad_enabled(t < steps):
            phi = lpips(p)
            logits = model(p)
        keep = torch.ones(idx.numel(), dtype=torch.bool, device=x.device)
        if t > 0:   # a projected iterate (the start is not clipped to [0, 1])
            with torch.no_grad():
                dist = (phi - phi_x[idx]).norm(dim=1)
                keep = ~best.take(idx, p.detach(), logits.detach(), y[idx], dist, bound)
            if t == steps or not keep.any():
                best.x_adv[idx[keep]] = p.detach()[keep]
                break
        with torch.enable_grad():   # broken points take no step (their loss is left out)
            (g,) = torch.autograd.grad((_loss(logits, y[idx]) * keep).sum(), p,
                                       retain_graph=True)
        grad_evals += int(idx.numel())
        s = _cg_solve(lpips, p, phi, g)
        with torch.no_grad():
            moved = (lpips(p + PPGD_H * s) - phi).norm(dim=1) / PPGD_H
            small = _rows(g).norm(dim=1) < _SMALL_GRAD
            lam = torch.where(small | (moved == 0), torch.zeros_like(moved),
                              step / moved.clamp_min(1e-30))
            a = (p.detach() + lam.view(-1, 1, 1, 1) * s).clamp(0, 1)[keep]
        idx = idx[keep]
        a = project(lpips, x[idx], a, bound, phi_x[idx])
    return best, grad_evals


def _cg_solve(lpips, p, phi, g):
    """Conjugate gradient on ``(J^T J) s = g`` (J: the Jacobian of phi at p), per point."""

    def jtj(v):
        with torch.no_grad():
            jv = (lpips(p.detach() + PPGD_H * v) - phi.detach()) / PPGD_H
        (out,) = torch.autograd.grad(phi, p, grad_outputs=jv, retain_graph=True)
        return out

    def dot(u, v):
        return (_rows(u) * _rows(v)).sum(1)

    s = torch.zeros_like(g)
    r = g.clone()
    d = r.clone()
    active = torch.ones(g.shape[0], dtype=torch.bool, device=g.device)
    for k in range(PPGD_CG_STEPS):
        rr = dot(r, r)
        if k > 0:
            active &= rr >= _CG_TOL
            if not active.any():
                break
        ad = jtj(d)
        dad = dot(d, ad)
        alpha = torch.where(active & (dad != 0), rr / torch.where(dad != 0, dad, 1.0),
                            torch.zeros_like(rr)).view(-1, 1, 1, 1)
        s = s + alpha * d
        if k < PPGD_CG_STEPS - 1:
            r = r - alpha * ad
            beta = torch.where(active & (rr != 0), dot(r, r) / torch.where(rr != 0, rr, 1.0),
                               torch.zeros_like(rr)).view(-1, 1, 1, 1)
            d = torch.where(active.view(-1, 1, 1, 1), r + beta * d, d)
    return s.detach()


# =================================================================================================
# LPA
# =================================================================================================

def _lpa_chunk(model, lpips, x, y, start, bound, steps, step):
    n = x.shape[0]
    best = _Best(x)
    with torch.no_grad():
        phi_x = lpips(x)
    pert = start.clone()
    lam = torch.full((n,), LPA_LAMBDA, device=x.device, dtype=x.dtype)
    live = torch.ones(n, dtype=torch.bool, device=x.device)
    grad_evals = 0
    for _ in range(LPA_BINARY_STEPS):
        last = torch.zeros(n, device=x.device, dtype=x.dtype)
        for t in range(steps):
            size = step * 0.1 ** (t / steps)
            idx = live.nonzero().flatten()
            p = (x[idx] + pert[idx]).requires_grad_(True)
            with torch.enable_grad():
                phi = lpips(p)
                logits = model(p)
                d = (phi - phi_x[idx]).norm(dim=1)
                loss = -_loss(logits, y[idx]) + lam[idx] * F.relu(d - bound)
                (g,) = torch.autograd.grad(loss.sum(), p)
            grad_evals += int(idx.numel())
            with torch.no_grad():
                d = d.detach()
                last[idx] = d
                hit = best.take(idx, p.detach(), logits.detach(), y[idx], d, bound)
                unit = g / (_rows(g).norm(dim=1).view(-1, 1, 1, 1) + 1e-8)
                moved = (phi.detach() - lpips(p.detach() + LPA_H * unit)).norm(dim=1) / LPA_H
                update = -unit * (size / (moved + 1e-8)).view(-1, 1, 1, 1)
                pert[idx] = (p.detach() + update).clamp(0, 1) - x[idx]
                live[idx[hit]] = False
            if not live.any():
                break
        lam[last >= bound] *= 10
        if not live.any():
            break
    rest = (~best.broken).nonzero().flatten()
    if rest.numel():
        best.x_adv[rest] = project(lpips, x[rest], x[rest] + pert[rest], bound, phi_x[rest])
    return best, grad_evals


# =================================================================================================
# Public API
# =================================================================================================

def _attack(chunk_fn, default_step, model, lpips, x, y, eps, steps, seed, batch_size,
            step) -> ThreatResult:
    eps, steps, seed, batch_size = validate(x, y, eps, steps, seed, batch_size, False)
    if x.shape[1] != 3:
        raise ValueError(f"PPGD / LPA measure LPIPS with an AlexNet: RGB images (N, 3, H, W) "
                         f"needed, got shape {tuple(x.shape)}")
    if not isinstance(lpips, LPIPS):
        raise ValueError(f"lpips must be an LPIPS network (load_lpips), got {type(lpips).__name__}")
    if step is not None and (isinstance(step, bool) or not isinstance(step, numbers.Real)
                             or not (math.isfinite(float(step)) and float(step) > 0)):
        raise ValueError(f"step must be a finite number > 0, got {step!r}")
    step = default_step(eps, steps) if step is None else float(step)
    device = x.device
    x = x.detach()
    y = y.detach().to(device=device, dtype=torch.long)
    batch_size = batch_size or x.shape[0]
    gen = torch.Generator().manual_seed(seed)
    start = (torch.randn(x.shape, generator=gen) * _START_STD).to(device=device, dtype=x.dtype)
    lpips = lpips.to(device=device, dtype=x.dtype)
    with Frozen(model), Frozen(lpips):
        probe = predict(model, x[:1], 1)
        if probe.ndim != 2 or probe.shape[1] < 2:
            raise ValueError(f"the model must return (N, classes) logits with >= 2 classes, got "
                             f"shape {tuple(probe.shape)}")
        if y.min().item() < 0 or y.max().item() >= probe.shape[1]:
            raise ValueError(f"labels must lie in [0, {probe.shape[1] - 1}], got values in "
                             f"[{y.min().item()}, {y.max().item()}]")
        robust = predict(model, x, batch_size).argmax(1) == y
        x_adv = x.clone()
        grad_evals = 0
        todo = robust.nonzero().flatten()
        for lo in range(0, todo.numel(), batch_size):
            sel = todo[lo:lo + batch_size]
            best, evals = chunk_fn(model, lpips, x[sel], y[sel], start[sel], eps, steps, step)
            x_adv[sel] = best.x_adv
            grad_evals += evals
        if todo.numel():
            robust[todo] = predict(model, x_adv[todo], batch_size).argmax(1) == y[todo]
    return ThreatResult(x_adv=x_adv, robust=robust, grad_evals=grad_evals)


def ppgd_attack(model: nn.Module, lpips: LPIPS, x: torch.Tensor, y: torch.Tensor,
                eps: float = 0.5, steps: int = 40, seed: int = 0,
                batch_size: Optional[int] = None, *, step: Optional[float] = None) -> ThreatResult:
    """Perceptual PGD as OODRobustBench runs it (defaults: LPIPS bound 0.5, 40 iterations, an
    LPIPS step of ``2 * eps / steps``; see the module docstring).  ``x``: (N, 3, H, W) in
    [0, 1]; ``y``: (N,) labels; ``lpips``: ``load_lpips(...)``.  The model and the LPIPS
    network run in eval mode with frozen parameters; both are restored afterwards."""
    return _attack(_ppgd_chunk, lambda eps, steps: 2 * eps / steps, model, lpips, x, y, eps,
                   steps, seed, batch_size, step)


def lpa_attack(model: nn.Module, lpips: LPIPS, x: torch.Tensor, y: torch.Tensor,
               eps: float = 0.5, steps: int = 40, seed: int = 0,
               batch_size: Optional[int] = None, *, step: Optional[float] = None) -> ThreatResult:
    """The Lagrangian perceptual attack as OODRobustBench runs it (defaults: LPIPS bound 0.5,
    5 rounds of up to 40 iterations, the LPIPS step decaying from ``eps`` to ``eps / 10``; see
    the module docstring).  Arguments as ``ppgd_attack``."""
    return _attack(_lpa_chunk, lambda eps, steps: eps, model, lpips, x, y, eps, steps, seed,
                   batch_size, step)
