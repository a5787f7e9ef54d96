"""The two non-Lp "threat shift" attacks of OODRobustBench: StAdv and ReColorAdv.

OODRobustBench (Li et al., ICML 2024) evaluates threat shifts with the implementations of
perceptual-advex (Laidlaw, Singla & Feizi, ICLR 2021; github.com/cassidylaidlaw/perceptual-advex),
``StAdvAttack(model, bound=eps, num_iterations=100)`` with eps 0.05 and
``ReColorAdvAttack(model, bound=eps, num_iterations=100)`` with eps 0.06 on CIFAR-10 (200
iterations on ImageNet); see ``oodrobustbench/attacks/__init__.py`` in
github.com/OODRobustBench/OODRobustBench.  Both perceptual-advex classes are thin wrappers
(``perceptual_advex/attacks.py``: ``MisterEdAttack``, ``StAdvAttack``, ``ReColorAdvAttack``) around
the mister_ed PGD of github.com/cassidylaidlaw/ReColorAdv.  This module re-implements what they
compute, from these sources:

Optimisation (``MisterEdAttack._setup_attack``, ``recoloradv/mister_ed/adversarial_attacks.py``
``PGD.attack``): unsigned steps of ``torch.optim.Adam`` (betas 0.9 / 0.999, eps 1e-8), learning
rate 0.01 for StAdv and 0.001 for ReColorAdv (perceptual-advex's default; ``StAdvAttack`` sets
``lr=0.01``), no random start (``randomize=False``), ``num_iterations`` steps.  The loss minimised,
summed over the batch (each point only depends on its own parameters, and Adam is per-parameter,
so points never interact), is ::

    f_y(x') - max_{i != y} f_i(x')  +  lambda * smoothness(perturbation)

i.e. the Carlini-Wagner f6 margin of the raw logits with ``kappa = inf`` (``CWLossF6``: no clamp)
plus ``lambda = 0.0025 / eps`` (StAdv) or ``0.0036 / eps`` (ReColorAdv) times the smoothness of the
perturbation field (``perturbation_norm_loss``; ``PerturbationNormLoss`` -> ``stAdv_norm`` /
``smoothness_norm``).  The smoothness of a field over a grid is Xiao et al.'s flow loss: for every
grid node and each of its 2 * (grid dims) neighbours, ``sqrt(||d_node - d_neighbour||^2 + 1e-10)``,
summed, with the neighbour of an edge node outside the grid taken to be the node itself
(``recoloradv/norms.py`` ``smoothness``; ``FullSpatial.stAdv_norm`` builds the same sum with shift
matrices).  Each step starts by projecting the parameters into the threat model
(``constrain_params`` runs in every forward pass), so the gradient is taken at the projected point.

StAdv (Xiao et al., ICLR 2018) as bounded there (``StAdvAttack``: ``ParameterizedXformAdv`` with
``FullSpatial``, ``lp_style='inf'``, ``use_stadv=True``; ``recoloradv/mister_ed/
spatial_transformers.py`` ``FullSpatial``): one sampling grid per image, ``(N, H, W, 2)`` in
``F.grid_sample`` coordinates with ``align_corners=True`` (pixel centres from -1 to 1, last axis
(x, y) = (width, height)), shared by the channels, applied with bilinear ``F.grid_sample``.  The
projection first clamps the grid to [-1, 1] (so no sample falls outside the image), then clamps
every component of ``grid - identity`` to [-eps, eps].  So the flow ``flow = grid - identity`` is
bounded per pixel in **L-inf over its two components** (not L2), in **normalised coordinates**:
the image width spans 2 units, one pixel is ``2 / (W - 1)`` horizontally and ``2 / (H - 1)``
vertically (eps 0.05 is 0.775 pixel on a 32 x 32 image).  Border handling as in the reference:
``grid_sample``'s default ``padding_mode='zeros'`` on the projected grid.  As the grid never leaves
[-1, 1], no sample takes weight from outside the image (beyond float rounding); the zero padding
only shows in the gradient of an edge pixel's outward flow component (the derivative towards
the zero outside), which the reference has too.  The projection is applied to the parameters,
not in the graph, so the gradient at a clamped grid value is not cut (as in the reference).

ReColorAdv (Laidlaw & Feizi, NeurIPS 2019) as bounded there (``ReColorAdvAttack``:
``recoloradv/perturbations.py`` ``ReColorAdv`` with ``color_transformers.FullSpatial``,
``CIELUVColorSpace()``, resolution 16 x 32 x 32, ``lp_style='inf'``, ``use_smooth_loss=True``):
the colour of every pixel goes through one colour function per image, defined on a regular grid
of 16 x 32 x 32 nodes over the CIE L*u*v* space as ``color_spaces.CIELUVColorSpace`` scales it to
[0, 1]^3 (``(L / 100, (u + 100) / 200, (v + 100) / 200)``; sRGB with D65 white u'=0.1978,
v'=0.4683 via CIE XYZ; the constants of ``CIEXYZColorSpace``), 16 nodes along L and 32 along u and
v, and trilinearly interpolated between nodes.  Parameters: a per-node perturbation ``delta``
``(N, 16, 32, 32, 3)`` of the node's colour (identity node at ``(i / 15, j / 31, k / 31)``).  The
projection clamps the node colours ``identity + delta`` to [0, 1], moves them into the sRGB gamut
by a round trip LUV -> RGB (with its clamps) -> LUV (``FullSpatial.clip_params``), then clamps
every component of ``delta`` to [-eps, eps] (``project_params``): **L-inf per node component, in
the scaled LUV units**.  Trilinear interpolation is a convex combination, so every pixel's colour
moves by at most eps per (scaled) LUV component before the conversion back to RGB (which clamps
to [0, 1]).

One deliberate deviation (ReColorAdv).  The reference interpolates the node *colours*
``identity + delta`` and clamps the grid index of every pixel to the grid; saturated sRGB colours
lie outside the scaled u/v range [0, 1] (pure red has u* = 175, i.e. 1.375; pure blue v* = -130),
so the reference pulls them onto the grid boundary -- desaturates them by an unbounded amount --
even at ``delta = 0``.  Here the colour function is ``c + interp(delta)(c)``: identical to the
reference for every colour inside the grid (trilinear interpolation reproduces the identity
exactly), and for a colour outside it the perturbation of the nearest boundary cell is added to
the colour itself instead of replacing it (``F.grid_sample`` with ``padding_mode='border'``).  So
the output changes only by the bounded perturbation, for every colour.

Where this module goes beyond the reference (no effect on which points a run counts robust,
except that it can only break more):

* Points misclassified when clean are not attacked (the clean image is returned, as in
  ``mm5.mm_attack``); the reference perturbs every point, but the clean image is inside both
  threat models (the identity) and already misclassified.
* A point is broken as soon as one of its iterates is misclassified; that iterate is kept as its
  adversarial example and the point stops (the reference runs every point for every step and
  returns the last iterate, so a point broken at step 30 can be correct again at step 100).  For
  a point never broken, ``x_adv`` is its iterate with the lowest margin ``f_y - max_{i != y} f_i``
  among the ``steps + 1`` iterates (the start, and the point after each step).  Robustness is
  re-checked on the returned images (forward pass, in chunks of ``batch_size``).
* NaN / inf entries of a parameter gradient (possible in the LUV -> RGB conversion at L* = 0) are
  replaced by 0 before the Adam step.

``seed`` is accepted (and checked) for the interface of ``mm5.mm_attack``; with the reference's
configuration there is no random start, so results do not depend on it: every run is
deterministic on CPU, and chunking (``batch_size``) does not change it.  On CUDA,
``grid_sample``'s backward pass to its input (ReColorAdv) uses atomic additions, so ReColorAdv
runs there are reproducible only up to float rounding.  Rounding matters more than usual here:
the smoothness terms (``|d|`` against ``sqrt(1e-10)``) and Adam (``|g|`` against 1e-8) turn
differences at rounding level into steps of order ``lr`` for parameters whose true gradient is
zero (ReColorAdv grid nodes that no pixel uses), so two correct implementations agree on the
images and robust flags but not on those nodes (tests/unit/test_threats.py compares with a
step-by-step re-implementation of the reference formulation in float64).

Implementation: the parameters are offsets from the identity (Adam is invariant to that shift;
the reference stores the absolute grid / node colours); the smoothness gradient is computed in
closed form; on CPU the element-wise update and projection run in cache-sized blocks of points.

Gradient evaluations: each forward pass followed by a backward pass adds the number of images in
it (at most ``steps`` per attacked point; fewer for points broken early).  Forward-only passes
(the clean predictions, the single-image probe for the number of classes, the evaluation of the
iterate after the last step, the re-check) are not counted.
"""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from typing import Callable, Optional

import torch
import torch.nn.functional as F

from pabench.attacks.mm5 import (  # shared with the MM attacks
    check_eps,
    check_int,
    check_range,
    check_seed,
    check_tensors,
    Frozen,
    predict,
)

__all__ = [
    "RECOLOR_RESOLUTION", "THREATS", "ThreatResult", "apply_color_grid", "apply_flow",
    "identity_grid", "luv_to_rgb", "recolor_attack", "reference_lr", "rgb_to_luv", "smoothness",
    "stadv_attack", "threat_attack",
]

# --- reference hyperparameters (perceptual_advex/attacks.py) -------------------------------------
STADV_LR = 0.01           # StAdvAttack: kwargs.setdefault('lr', 0.01)
STADV_SMOOTH = 0.0025     # StAdvAttack: perturbation_norm_loss = 0.0025 / bound
RECOLOR_LR = 0.001        # MisterEdAttack default lr
RECOLOR_SMOOTH = 0.0036   # ReColorAdvAttack: perturbation_norm_loss = 0.0036 / bound
# The bounds those learning rates go with (OODRobustBench on CIFAR-10, 100 iterations)
STADV_BOUND, RECOLOR_BOUND = 0.05, 0.06
#: Nodes of the ReColorAdv colour grid along (L*, u*, v*).
RECOLOR_RESOLUTION = (16, 32, 32)

_ADAM_B1, _ADAM_B2, _ADAM_EPS = 0.9, 0.999, 1e-8  # torch.optim.Adam defaults
_SMOOTH_EPS = 1e-10       # inside the square root of the smoothness terms

# --- colour constants (recoloradv/color_spaces.py; sRGB / D65) -----------------------------------
_RGB_TO_XYZ = ((0.4124, 0.3576, 0.1805),
               (0.2126, 0.7152, 0.0722),
               (0.0193, 0.1192, 0.9504))
_XYZ_TO_RGB = ((3.2406, -1.5372, -0.4986),
               (-0.9689, 1.8758, 0.0415),
               (0.0557, -0.2040, 1.0570))
_UP_WHITE, _VP_WHITE, _Y_WHITE = 0.1978, 0.4683, 1.0
_LUV_EPS = 1e-10


@dataclass(frozen=True)
class ThreatResult:
    """``x_adv``: adversarial images (in [0, 1]; the clean image for points misclassified when
    clean).  ``robust``: per point, correctly classified on ``x_adv`` (False for points
    misclassified when clean).  ``grad_evals``: forward+backward passes per image, summed.
    ``perturbation``: only when asked for (``return_perturbation=True``): the parameters that
    produce ``x_adv`` -- the flow ``(N, H, W, 2)`` for StAdv (``apply_flow(x, flow)``), the colour
    grid perturbation ``(N, 16, 32, 32, 3)`` for ReColorAdv (``apply_color_grid(x, delta)``);
    zeros for points not attacked."""

    x_adv: torch.Tensor
    robust: torch.Tensor
    grad_evals: int
    perturbation: Optional[torch.Tensor] = None

    @property
    def robust_accuracy(self) -> float:
        return float(self.robust.float().mean().item())


# =================================================================================================
# Building blocks (public so that they can be checked on their own)
# =================================================================================================

def smoothness(field: torch.Tensor, channel_dim: int = -1) -> torch.Tensor:
    """Per-point smoothness of a vector field ``(N, *grid, K)`` over a grid of any dimension
    (``channel_dim`` names the vector axis, last by default): the sum over grid nodes and their
    2 * len(grid) neighbours of ``sqrt(||d_node - d_neighbour||^2 + 1e-10)``, an edge node's
    missing neighbour being itself.  Each pair of adjacent nodes appears twice (once from each
    side); each edge node contributes ``sqrt(1e-10)`` per missing neighbour.  Returns ``(N,)``."""
    n = field.shape[0]
    cdim = channel_dim % field.ndim
    total = field.new_zeros(n)
    tiny = math.sqrt(_SMOOTH_EPS)
    for dim in range(1, field.ndim):
        if dim == cdim:
            continue
        size = field.shape[dim]
        if size > 1:
            diff = field.narrow(dim, 1, size - 1) - field.narrow(dim, 0, size - 1)
            terms = (diff.pow(2).sum(cdim) + _SMOOTH_EPS).sqrt()
            total = total + 2.0 * terms.reshape(n, -1).sum(1)
        lines = field[0].numel() // (field.shape[cdim] * size)  # grid lines along this dim
        total = total + 2.0 * lines * tiny
    return total


def _smoothness_grad(field: torch.Tensor, cdim: int) -> torch.Tensor:
    """Gradient of ``smoothness(field, cdim).sum()`` with respect to ``field`` (closed form:
    each adjacent pair (lo, hi) adds ``2 (hi - lo) / r`` to hi and subtracts it from lo, with
    ``r = sqrt(||hi - lo||^2 + 1e-10)``)."""
    grad = torch.zeros_like(field)
    for dim in range(1, field.ndim):
        size = field.shape[dim]
        if dim == cdim or size < 2:
            continue
        diff = field.narrow(dim, 1, size - 1) - field.narrow(dim, 0, size - 1)
        r = (diff * diff).sum(cdim, keepdim=True).add_(_SMOOTH_EPS).sqrt_()
        q = diff.div_(r).mul_(2.0)
        grad.narrow(dim, 1, size - 1).add_(q)
        grad.narrow(dim, 0, size - 1).sub_(q)
    return grad


def identity_grid(height: int, width: int, *, device=None,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The ``F.grid_sample`` grid (``align_corners=True``) that maps an image onto itself:
    ``(H, W, 2)`` with ``[..., 0]`` the x (width) and ``[..., 1]`` the y (height) coordinate of
    each pixel centre, from -1 to 1."""
    ys = torch.linspace(-1.0, 1.0, height, device=device, dtype=dtype)
    xs = torch.linspace(-1.0, 1.0, width, device=device, dtype=dtype)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], dim=-1)


def _sample(x: torch.Tensor, grid: torch.Tensor) -> torch.Tensor:
    """The reference's forward pass for a sampling grid inside [-1, 1]."""
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
    return out.clamp(0.0, 1.0)


def apply_flow(x: torch.Tensor, flow: torch.Tensor) -> torch.Tensor:
    """Warp images ``x`` ``(N, C, H, W)`` by a flow ``(N, H, W, 2)`` in normalised coordinates
    (``[..., 0]`` along the width, one pixel = ``2 / (W - 1)``; ``[..., 1]`` along the height, one
    pixel = ``2 / (H - 1)``): output pixel p is ``x`` bilinearly sampled at ``p + flow[p]``, the
    sampling point clamped into the image.  Zero flow is the identity (up to rounding); a flow of
    ``+2 / (W - 1)`` in x shifts the content one pixel to the left."""
    if x.ndim != 4 or flow.shape != (x.shape[0], x.shape[2], x.shape[3], 2):
        raise ValueError(f"flow must have shape (N, H, W, 2) = "
                         f"{(x.shape[0],) + tuple(x.shape[2:]) + (2,) if x.ndim == 4 else '?'} "
                         f"for x of shape {tuple(x.shape)}, got {tuple(flow.shape)}")
    ident = identity_grid(x.shape[2], x.shape[3], device=x.device, dtype=x.dtype)
    return _sample(x, (ident + flow.to(x.dtype)).clamp(-1.0, 1.0))  # as the projection clamps


@functools.lru_cache(maxsize=16)
def _matrix(matrix, dtype, device) -> torch.Tensor:
    return torch.tensor(matrix, dtype=dtype, device=device)


def _mix(c: torch.Tensor, matrix) -> torch.Tensor:
    """3x3 colour matrix applied along dim 1 (any trailing shape)."""
    m = _matrix(matrix, c.dtype, c.device)
    return (m @ c.reshape(c.shape[0], 3, -1)).reshape(c.shape)


def _select(mask: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a`` where ``mask`` else ``b``, as the reference blends (``a * m + b * (1 - m)``; exact
    for finite values, and several times faster than ``torch.where`` on CPU)."""
    m = mask.to(a.dtype)
    return a * m + b * (1.0 - m)


def rgb_to_luv(rgb: torch.Tensor) -> torch.Tensor:
    """sRGB in [0, 1] (channels on dim 1, any trailing shape) to CIE L*u*v* scaled as in
    ``CIELUVColorSpace``: ``(L / 100, (u + 100) / 200, (v + 100) / 200)``."""
    lin = _select(rgb < 0.04045, rgb / 12.92, ((rgb.clamp(min=0.0) + 0.055) / 1.055) ** 2.4)
    x, y, z = _mix(lin, _RGB_TO_XYZ).unbind(1)
    denom = x + 15.0 * y + 3.0 * z + _LUV_EPS
    yr = y / _Y_WHITE
    light = _select(yr < (6.0 / 29.0) ** 3, (29.0 / 3.0) ** 3 * yr,
                    116.0 * yr.clamp(min=_LUV_EPS) ** (1.0 / 3.0) - 16.0)
    u = 13.0 * light * (4.0 * x / denom - _UP_WHITE)
    v = 13.0 * light * (9.0 * y / denom - _VP_WHITE)
    return torch.stack([light / 100.0, (u + 100.0) / 200.0, (v + 100.0) / 200.0], 1)


def luv_to_rgb(luv: torch.Tensor) -> torch.Tensor:
    """Inverse of ``rgb_to_luv`` as ``CIELUVColorSpace.to_rgb`` computes it: XYZ clamped to
    [0, 1.1], the result clamped to [0, 1] (so colours outside the sRGB gamut are clipped)."""
    light = luv[:, 0] * 100.0
    u = luv[:, 1] * 200.0 - 100.0
    v = luv[:, 2] * 200.0 - 100.0
    scale = 13.0 * light + _LUV_EPS
    up = u / scale + _UP_WHITE
    vp = v / scale + _VP_WHITE
    t = (light + 16.0) / 116.0
    y = _select(light <= 8.0, light * (_Y_WHITE * (3.0 / 29.0) ** 3), _Y_WHITE * (t * t * t))
    y_over = y / (4.0 * vp + _LUV_EPS)
    x = 9.0 * up * y_over
    z = (12.0 - 3.0 * up - 20.0 * vp) * y_over
    lin = _mix(torch.stack([x, y, z], 1).clamp_(0.0, 1.1), _XYZ_TO_RGB)
    rgb = _select(lin < 0.0031308, 12.92 * lin,
                  1.055 * lin.clamp(min=_LUV_EPS) ** (1.0 / 2.4) - 0.055)
    return rgb.clamp_(0.0, 1.0)


def _color_identity(device, dtype) -> torch.Tensor:
    """Identity colour grid, channel first: ``(1, 3, 16, 32, 32)``."""
    axes = [torch.linspace(0.0, 1.0, r, device=device, dtype=dtype) for r in RECOLOR_RESOLUTION]
    return torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=0)[None]


def _color_coords(x: torch.Tensor):
    """Scaled LUV colours ``(N, 3, H, W)`` of the images and the matching ``grid_sample`` grid
    ``(N, 1, H, W, 3)`` into a ``(N, 3, L, u, v)`` volume (grid order: v -> W, u -> H, L -> D)."""
    luv = rgb_to_luv(x)
    grid = (2.0 * luv - 1.0).flip(1).permute(0, 2, 3, 1)[:, None].contiguous()
    return luv, grid


def _recolor(luv: torch.Tensor, grid: torch.Tensor, delta_cf: torch.Tensor) -> torch.Tensor:
    """``delta_cf``: channel-first colour grid perturbation ``(N, 3, 16, 32, 32)``."""
    shift = F.grid_sample(delta_cf, grid, mode="bilinear", padding_mode="border",
                          align_corners=True)[:, :, 0]
    return luv_to_rgb(luv + shift)


def apply_color_grid(x: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """Recolour RGB images ``x`` ``(N, 3, H, W)`` with a colour-grid perturbation ``delta``
    ``(N, 16, 32, 32, 3)`` (scaled LUV units, node ``(i, j, k)`` at ``(i / 15, j / 31, k / 31)``):
    each pixel's scaled LUV colour ``c`` becomes ``c + delta(c)``, ``delta(c)`` trilinearly
    interpolated between the nodes (the boundary cell's value outside the grid), then back to RGB
    (clamped to [0, 1])."""
    expected = (x.shape[0],) + RECOLOR_RESOLUTION + (3,) if x.ndim == 4 else None
    if x.ndim != 4 or x.shape[1] != 3 or tuple(delta.shape) != expected:
        raise ValueError(f"need x of shape (N, 3, H, W) and delta of shape (N, 16, 32, 32, 3), "
                         f"got {tuple(x.shape)} and {tuple(delta.shape)}")
    luv, grid = _color_coords(x)
    return _recolor(luv, grid, delta.to(x.dtype).permute(0, 4, 1, 2, 3))


# =================================================================================================
# The two threat models: parameters (internal layout), projection, image
# =================================================================================================

class _StAdv:
    """Flow ``(N, H, W, 2)``."""
    lr, smooth, cdim = STADV_LR, STADV_SMOOTH, 3

    def __init__(self, x: torch.Tensor, eps: float):
        self.eps = eps
        self.ident = identity_grid(x.shape[2], x.shape[3], device=x.device, dtype=x.dtype)

    def param_shape(self, x):
        return (x.shape[0], x.shape[2], x.shape[3], 2)

    def context(self, x):
        return (x,)

    def project(self, p):
        grid = (self.ident + p).clamp_(-1.0, 1.0)
        return grid.sub_(self.ident).clamp_(-self.eps, self.eps)

    def image(self, ctx, p):
        return _sample(ctx[0], self.ident + p)

    @staticmethod
    def public(p):
        return p


class _ReColor:
    """Colour grid perturbation, channel first ``(N, 3, 16, 32, 32)``."""
    lr, smooth, cdim = RECOLOR_LR, RECOLOR_SMOOTH, 1

    def __init__(self, x: torch.Tensor, eps: float):
        self.eps = eps
        self.ident = _color_identity(x.device, x.dtype)

    def param_shape(self, x):
        return (x.shape[0], 3) + RECOLOR_RESOLUTION

    def context(self, x):
        return _color_coords(x)

    def project(self, p):
        nodes = (self.ident + p).clamp_(0.0, 1.0)
        nodes = rgb_to_luv(luv_to_rgb(nodes))  # into the sRGB gamut
        return nodes.sub_(self.ident).clamp_(-self.eps, self.eps)

    def image(self, ctx, p):
        return _recolor(ctx[0], ctx[1], p)

    @staticmethod
    def public(p):
        return p.permute(0, 2, 3, 4, 1).contiguous()


# =================================================================================================
# Checks
# =================================================================================================

def validate(x, y, eps, steps, seed, batch_size, channels3: bool):
    eps_f = check_eps(eps)
    steps = check_int("steps", steps, 1)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, 1)
    seed = check_seed(seed)
    check_tensors(x, y)
    if x.ndim != 4:
        raise ValueError(f"x must be a batch of images (N, C, H, W), got shape {tuple(x.shape)}")
    if y.ndim != 1 or x.shape[0] != y.shape[0]:
        raise ValueError(f"y must be (N,) with the N of x, got x of shape {tuple(x.shape)} and "
                         f"y of shape {tuple(y.shape)}")
    if channels3 and x.shape[1] != 3:
        raise ValueError(f"ReColorAdv needs RGB images (N, 3, H, W), got shape {tuple(x.shape)}")
    if x.shape[0] == 0:
        raise ValueError("x is empty (0 points)")
    if x.numel() == 0:
        raise ValueError(f"x has no pixels, shape {tuple(x.shape)}")
    check_range(x)
    return eps_f, steps, seed, batch_size


def logit_margin(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``f_y - max_{i != y} f_i`` per row (CW f6 with kappa = inf)."""
    own = logits.gather(1, y[:, None])[:, 0]
    others = logits.scatter(1, y[:, None], float("-inf"))
    return own - others.amax(1)


# =================================================================================================
# The attack loop
# =================================================================================================

_BLOCK_ELEMS = 1 << 16  # CPU: parameter rows processed together by the update (cache-sized)


def _blocks(p: torch.Tensor):
    """Row slices for the element-wise parameter updates: the whole batch on an accelerator;
    on CPU blocks of about _BLOCK_ELEMS elements, so that the dozens of element-wise operations
    of the update and projection run in cache (3-4x faster there than on whole-batch tensors).
    Every operation is per point, so the blocking does not change the result."""
    rows = p.shape[0]
    block = rows if p.device.type != "cpu" else max(1, _BLOCK_ELEMS // max(1, p[0].numel()))
    return [slice(i, i + block) for i in range(0, rows, block)]


def _project(threat, p: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(p)
    for sl in _blocks(p):
        out[sl] = threat.project(p[sl])
    return out


def _adam_step(threat, p, g, m1, m2, t, lr, weight):
    """Gradient of the smoothness term added to ``g`` (the margin's gradient), one
    ``torch.optim.Adam`` step (bias-corrected moments ``m1``, ``m2`` updated in place), then the
    projection.  Returns the new parameters."""
    out = torch.empty_like(p)
    step = lr / (1.0 - _ADAM_B1 ** t)
    bias2 = math.sqrt(1.0 - _ADAM_B2 ** t)
    for sl in _blocks(p):
        pb, gb, m1b, m2b = p[sl], g[sl], m1[sl], m2[sl]
        gb.add_(_smoothness_grad(pb, threat.cdim), alpha=weight)
        torch.nan_to_num_(gb, nan=0.0, posinf=0.0, neginf=0.0)
        m1b.lerp_(gb, 1.0 - _ADAM_B1)
        m2b.mul_(_ADAM_B2).addcmul_(gb, gb, value=1.0 - _ADAM_B2)
        denom = m2b.sqrt().div_(bias2).add_(_ADAM_EPS)
        out[sl] = threat.project(pb.addcdiv(m1b, denom, value=-step))
    return out


def _run_chunk(model, threat, x, y, steps, lr, weight, keep_params):
    """Attack one chunk of (clean-correct) points.  Returns (x_adv, params in the internal layout
    or None, grad_evals)."""
    n = x.shape[0]
    best_x = x.clone()
    best_p = x.new_zeros(threat.param_shape(x)) if keep_params else None
    best_margin = torch.full((n,), float("inf"), device=x.device, dtype=x.dtype)

    ctx = threat.context(x)
    p = _project(threat, x.new_zeros(threat.param_shape(x)))
    m1, m2 = torch.zeros_like(p), torch.zeros_like(p)
    idx = torch.arange(n, device=x.device)  # chunk positions of the active points
    ya = y
    grad_evals = 0

    def record(x_it, logits, p_it):
        """Keep the best iterate per active point; returns the mask of points broken now."""
        margin = logit_margin(logits, ya)
        broken = logits.argmax(1) != ya
        take = broken | (margin < best_margin[idx])
        if take.any():
            where = idx[take]
            best_x[where] = x_it[take]
            best_margin[where] = torch.where(broken[take], float("-inf"), margin[take])
            if keep_params:
                best_p[where] = p_it[take]
        return broken

    for t in range(1, steps + 1):
        pg = p.detach().requires_grad_(True)
        with torch.enable_grad():
            x_it = threat.image(ctx, pg)
            logits = model(x_it)
            (g,) = torch.autograd.grad(logit_margin(logits, ya).sum(), pg)
        grad_evals += idx.numel()
        with torch.no_grad():
            broken = record(x_it.detach(), logits.detach(), p)
            if broken.any():
                keep = ~broken
                if not keep.any():
                    return best_x, best_p, grad_evals
                idx, ya, p, g, m1, m2 = (v[keep] for v in (idx, ya, p, g, m1, m2))
                ctx = tuple(c[keep] for c in ctx)
            p = _adam_step(threat, p, g, m1, m2, t, lr, weight)

    with torch.no_grad():  # the iterate after the last step (what the reference returns)
        x_it = threat.image(ctx, p)
        record(x_it, model(x_it), p)
    return best_x, best_p, grad_evals


def _attack(threat_cls, model, x, y, eps, steps, seed, batch_size, *, lr=None,
            return_perturbation=False) -> ThreatResult:
    eps, steps, seed, batch_size = validate(x, y, eps, steps, seed, batch_size,
                                             threat_cls is _ReColor)
    if lr is None:
        lr = threat_cls.lr
    elif isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not (
            math.isfinite(float(lr)) and float(lr) > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    lr = float(lr)
    device = x.device
    x = x.detach()
    y = y.detach().to(device=device, dtype=torch.long)
    if batch_size is None:
        batch_size = x.shape[0]
    weight = threat_cls.smooth / eps

    with Frozen(model):
        probe = predict(model, x[:1], 1)
        if probe.ndim != 2 or probe.shape[1] < 2:
            raise ValueError(f"the model must return (N, classes) logits with >= 2 classes, got "
                             f"shape {tuple(probe.shape)}")
        n_classes = probe.shape[1]
        y_lo, y_hi = y.min().item(), y.max().item()
        if y_lo < 0 or y_hi >= n_classes:
            raise ValueError(f"labels must lie in [0, {n_classes - 1}], got values in "
                             f"[{y_lo}, {y_hi}]")

        robust = predict(model, x, batch_size).argmax(1) == y
        x_adv = x.clone()
        threat = threat_cls(x[:1], eps)
        params = threat.public(x.new_zeros(threat.param_shape(x))) if return_perturbation \
            else None
        grad_evals = 0
        todo = robust.nonzero().flatten()
        for start in range(0, todo.numel(), batch_size):
            sel = todo[start:start + batch_size]
            adv, p, evals = _run_chunk(model, threat, x[sel], y[sel], steps, lr, weight,
                                       return_perturbation)
            x_adv[sel] = adv
            if return_perturbation:
                params[sel] = threat.public(p)
            grad_evals += evals
        if todo.numel():  # re-check on the returned images
            robust[todo] = predict(model, x_adv[todo], batch_size).argmax(1) == y[todo]
    return ThreatResult(x_adv=x_adv, robust=robust, grad_evals=grad_evals, perturbation=params)


# =================================================================================================
# Public API
# =================================================================================================

def stadv_attack(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float = 0.05,
                 steps: int = 100, seed: int = 0, batch_size: Optional[int] = None, *,
                 lr: Optional[float] = None, return_perturbation: bool = False) -> ThreatResult:
    """Untargeted StAdv bounded as in perceptual-advex / OODRobustBench (defaults: eps 0.05,
    100 Adam steps at lr 0.01; see the module docstring).  ``eps`` bounds every component of the
    per-pixel flow, in ``grid_sample`` coordinates (2 units = the image width / height).

    ``x``: (N, C, H, W) float in [0, 1]; ``y``: (N,) integer labels; the model returns logits.
    Points are attacked in chunks of ``batch_size`` (None: all at once).  ``lr`` overrides the
    reference learning rate; ``return_perturbation`` adds the flows to the result.  The model runs
    in eval mode with frozen parameters during the attack; both are restored afterwards."""
    return _attack(_StAdv, model, x, y, eps, steps, seed, batch_size, lr=lr,
                   return_perturbation=return_perturbation)


def recolor_attack(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float = 0.06,
                   steps: int = 100, seed: int = 0, batch_size: Optional[int] = None, *,
                   lr: Optional[float] = None, return_perturbation: bool = False) -> ThreatResult:
    """Untargeted ReColorAdv bounded as in perceptual-advex / OODRobustBench (defaults: eps 0.06,
    100 Adam steps at lr 0.001; 16 x 32 x 32 colour grid in scaled CIE L*u*v*; see the module
    docstring).  ``eps`` bounds every component of every node's colour perturbation.

    ``x``: (N, 3, H, W) RGB float in [0, 1]; otherwise as ``stadv_attack``."""
    return _attack(_ReColor, model, x, y, eps, steps, seed, batch_size, lr=lr,
                   return_perturbation=return_perturbation)


def reference_lr(name: str, eps: float, scale: float = 1.0) -> float:
    """The Adam learning rate of ``name`` ("stadv" or "recolor") at bound ``eps``: the
    reference's step relative to its bound (its lr x ``eps`` / its bound: the same fraction of the
    bound per step), times ``scale``.  At the reference's bound and scale 1: its lr."""
    lr, bound = {"stadv": (STADV_LR, STADV_BOUND), "recolor": (RECOLOR_LR, RECOLOR_BOUND)}[name]
    return lr * eps / bound * scale


#: The threat-shift attacks by OODRobustBench's name.
THREATS: dict[str, Callable[..., ThreatResult]] = {"stadv": stadv_attack,
                                                   "recolor": recolor_attack}


def threat_attack(name: str, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
                  eps: float, steps: int, seed: int = 0, batch_size: Optional[int] = None,
                  **options) -> ThreatResult:
    """Run the threat-shift attack ``name`` ("stadv" or "recolor"); ``options`` are passed on
    (``lr``, ``return_perturbation``)."""
    if not isinstance(name, str) or name not in THREATS:
        raise ValueError(f"unknown threat attack {name!r}; known: {', '.join(sorted(THREATS))}")
    return THREATS[name](model, x, y, eps, steps, seed, batch_size, **options)
