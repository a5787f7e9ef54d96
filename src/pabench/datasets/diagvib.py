"""A clean-room DiagViB-6 style generator: MNIST digits painted with controlled shift factors.

Factor semantics follow the DiagViB-6 paper as summarised in shared/REFERENCE.md (no code or
texture image of the AGPL original is used):
- hue: red 0, yellow 60, green 120, cyan 180, blue 240, magenta 300 degrees, each sample drawn
  uniformly within +-15 degrees (HLS, saturation 1);
- lightness: two HLS lightness values (l1, l2) per sample giving colours c1, c2 (ranges below);
- position: object centre uniform in a 1/7-wide band of the (size - 1) px canvas per axis, named
  by where it renders: rows upper / center / lower, columns left / center / right ("lower-center",
  or the paper's codes: CC, LC, UL ...).  The original code transposes rows and columns for
  asymmetric names; we do not;
- scale: multiplier on the object (ranges below);
- texture: blank, tiles, wood, carpet, bricks, lava (textures.py), coloured per channel as
  (c1 T + c2 (255 - T)) / 255.
Rendering at canvas size S (128 in the paper; 64 and 32 for small scales): the digit is cropped to
its pixels > 100, resized so the longer side is 28/40 of the object, centred on the object square
of 40 S / 128 px; mask = digit > 150; the textured, coloured object is scaled, placed and
alpha-blended onto a constant grey (127) background.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

from pabench.datasets.textures import SIZE as TEXTURE_SIZE
from pabench.datasets.textures import TEXTURES

FACTORS = ("hue", "lightness", "position", "scale", "texture")
HUES = {"red": 0.0, "yellow": 60.0, "green": 120.0, "cyan": 180.0, "blue": 240.0, "magenta": 300.0}
HUE_JITTER = 15.0
LIGHTNESS = {
    "dark": ((0.0, 1 / 11), (4 / 11, 5 / 11)),
    "darker": ((2 / 11, 3 / 11), (6 / 11, 7 / 11)),
    "brighter": ((4 / 11, 5 / 11), (8 / 11, 9 / 11)),
    "bright": ((6 / 11, 7 / 11), (10 / 11, 1.0)),
}
BANDS = {"upper": (1 / 7, 2 / 7), "left": (1 / 7, 2 / 7), "center": (3 / 7, 4 / 7),
         "lower": (5 / 7, 6 / 7), "right": (5 / 7, 6 / 7)}
ROWS, COLS = ("upper", "center", "lower"), ("left", "center", "right")
POSITIONS = {f"{r}-{c}": (BANDS[r], BANDS[c]) for r in ROWS for c in COLS}
POSITION_CODES = {f"{r[0].upper()}{c[0].upper()}": f"{r}-{c}" for r in ROWS for c in COLS}
SCALES = {"small": (1 / 1.45, 1 / 1.35), "smaller": (1 / 1.25, 1 / 1.15), "normal": (1 / 1.05, 1.05),
          "larger": (1.15, 1.25), "large": (1.35, 1.45)}
VALUES = {"hue": tuple(HUES), "lightness": tuple(LIGHTNESS), "position": tuple(POSITIONS),
          "scale": tuple(SCALES), "texture": TEXTURES}
BACKGROUND = 127.0
OBJECT = 40  # object square at a 128 px canvas
DIGIT = 28  # longer side of the digit inside the object square
IMAGE_SIZES = (32, 64, 128)
# Uniform variates per sample: one choice per factor (0-4), hue jitter (5), l1 (6), l2 (7),
# centre row (8) and column (9), scale (10), texture offset row (11) and column (12).
N_VARIATES = 13


def canonical(factor: str, value: str) -> str:
    """The canonical name of a factor value (position codes like 'LC' become 'lower-center')."""
    if factor == "position":
        value = POSITION_CODES.get(value, value)
    if value not in VALUES[factor]:
        raise ValueError(f"unknown {factor} value {value!r}; choose one of {list(VALUES[factor])}"
                         + (f" or codes {list(POSITION_CODES)}" if factor == "position" else ""))
    return value


@dataclass
class Environment:
    """Factor values of one environment: per factor, the values a sample may take (uniformly),
    optionally per digit ({digit: [values]}); and the digits it shows (a subset of the study's,
    which builds co-occurrence patterns between digits and environments)."""

    name: str
    factors: dict = field(default_factory=dict)
    digits: list = field(default_factory=list)

    @classmethod
    def from_config(cls, name: str, spec: dict, digits) -> "Environment":
        unknown = set(spec) - set(FACTORS) - {"digits"}
        if unknown:
            raise ValueError(f"environment {name!r}: unknown factors {sorted(unknown)}; "
                             f"known: {list(FACTORS)} (and digits)")
        own = [int(d) for d in spec.get("digits", digits)]
        extra = sorted(set(own) - set(int(d) for d in digits))
        if extra or not own:
            raise ValueError(f"environment {name!r}: digits {own} must be a non-empty subset of "
                             f"the study's digits {list(digits)}")
        factors = {}
        for factor in FACTORS:
            if factor not in spec:
                raise ValueError(f"environment {name!r}: missing factor {factor!r}")
            factors[factor] = _values(name, factor, spec[factor], own)
        return cls(name, factors, own)

    def choices(self, factor: str, digit: int) -> list[str]:
        values = self.factors[factor]
        return values[digit] if isinstance(values, dict) else values


def _values(env: str, factor: str, spec, digits):
    where = f"environment {env!r}, factor {factor!r}"
    if isinstance(spec, dict):
        missing = set(digits) - {int(d) for d in spec}
        if missing:
            raise ValueError(f"{where}: no values for digits {sorted(missing)}")
        return {int(d): _values(env, factor, v, digits)[:] for d, v in spec.items()}
    values = [spec] if isinstance(spec, str) else list(spec)
    if not values:
        raise ValueError(f"{where}: empty list of values")
    try:
        return [canonical(factor, str(v)) for v in values]
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def hls_to_rgb(h_deg: np.ndarray, light: np.ndarray, sat: float = 1.0) -> np.ndarray:
    """HLS (hue in degrees, lightness and saturation in [0, 1]) to RGB in [0, 255], vectorised."""
    c = (1 - np.abs(2 * light - 1)) * sat
    hp = (np.asarray(h_deg) % 360) / 60.0
    x = c * (1 - np.abs(hp % 2 - 1))
    zeros = np.zeros_like(c)
    sector = np.floor(hp).astype(int) % 6
    table = [(c, x, zeros), (x, c, zeros), (zeros, c, x), (zeros, x, c), (x, zeros, c), (c, zeros, x)]
    rgb = np.zeros(np.shape(c) + (3,))
    for s, (r, g, b) in enumerate(table):
        pick = sector == s
        rgb[pick] = np.stack([r[pick], g[pick], b[pick]], -1)
    return (rgb + (light - c / 2)[..., None]) * 255.0


def sample_factors(env: Environment, labels: np.ndarray, variates: np.ndarray, size: int) -> dict:
    """Per-sample factor values of `env` for digits `labels`, from uniform `variates` of shape
    (n, N_VARIATES).  Paired environments pass the same variates, so samples differ only where
    the factor values differ."""
    u = variates
    out = {k: [] for k in FACTORS}
    for i, d in enumerate(labels):
        for j, factor in enumerate(FACTORS):
            options = env.choices(factor, int(d))
            out[factor].append(options[min(int(u[i, j] * len(options)), len(options) - 1)])
    hue_centre = np.array([HUES[h] for h in out["hue"]])
    hue = (hue_centre + (2 * u[:, 5] - 1) * HUE_JITTER) % 360
    l1 = np.array([np.interp(u[i, 6], [0, 1], LIGHTNESS[v][0]) for i, v in enumerate(out["lightness"])])
    l2 = np.array([np.interp(u[i, 7], [0, 1], LIGHTNESS[v][1]) for i, v in enumerate(out["lightness"])])
    rows = np.array([POSITIONS[v][0] for v in out["position"]])
    cols = np.array([POSITIONS[v][1] for v in out["position"]])
    cy = (rows[:, 0] + u[:, 8] * (rows[:, 1] - rows[:, 0])) * (size - 1)
    cx = (cols[:, 0] + u[:, 9] * (cols[:, 1] - cols[:, 0])) * (size - 1)
    scale_range = np.array([SCALES[v] for v in out["scale"]])
    scale = scale_range[:, 0] + u[:, 10] * (scale_range[:, 1] - scale_range[:, 0])
    span = TEXTURE_SIZE - OBJECT + 1
    tex_y = np.minimum(np.floor(u[:, 11] * span), span - 1).astype(np.int64)
    tex_x = np.minimum(np.floor(u[:, 12] * span), span - 1).astype(np.int64)
    return {
        "hue": np.array(out["hue"]), "hue_deg": hue, "lightness": np.array(out["lightness"]),
        "l1": l1, "l2": l2, "position": np.array(out["position"]), "cy": cy, "cx": cx,
        "scale": np.array(out["scale"]), "scale_factor": scale,
        "texture": np.array(out["texture"]), "tex_y": tex_y, "tex_x": tex_x,
    }


def _digit_objects(digits: torch.Tensor) -> torch.Tensor:
    """(n, 40, 40) digit squares in [0, 255]: each digit's pixels > 100 cropped and resized so
    that the longer side spans DIGIT of OBJECT px, centred (one vectorised bilinear resampling)."""
    import torch  # here: factors and environments are read without PyTorch
    import torch.nn.functional as F

    n = digits.shape[0]
    on = digits > 100
    rows, cols = on.any(2), on.any(1)
    ar = torch.arange(28)
    empty = ~rows.any(1)
    big = torch.full_like(ar, 99)
    r0 = torch.where(rows, ar, big).amin(1)
    r1 = torch.where(rows, ar, -big).amax(1)
    c0 = torch.where(cols, ar, big).amin(1)
    c1 = torch.where(cols, ar, -big).amax(1)
    r0, r1 = torch.where(empty, 0, r0), torch.where(empty, 27, r1)
    c0, c1 = torch.where(empty, 0, c0), torch.where(empty, 27, c1)
    side = torch.maximum(r1 - r0 + 1, c1 - c0 + 1).double()
    centre_y, centre_x = (r0 + r1 + 1).double() / 2, (c0 + c1 + 1).double() / 2
    pos = torch.arange(OBJECT, dtype=torch.float64) + 0.5 - OBJECT / 2  # object px centres
    ratio = (side / DIGIT)[:, None]
    gy = (centre_y[:, None] + pos[None] * ratio) / 28 * 2 - 1  # (n, 40)
    gx = (centre_x[:, None] + pos[None] * ratio) / 28 * 2 - 1
    grid = torch.stack(torch.broadcast_tensors(gx[:, None, :], gy[:, :, None]), -1).float()
    out = F.grid_sample(digits[:, None].float(), grid, mode="bilinear", padding_mode="zeros",
                        align_corners=False)
    return out[:, 0].reshape(n, OBJECT, OBJECT)


def render(digits: np.ndarray, factors: dict, size: int, textures: torch.Tensor) -> np.ndarray:
    """Images (n, 3, size, size) uint8 for digits (n, 28, 28) uint8 and sampled factors."""
    import torch  # here: factors and environments are read without PyTorch
    import torch.nn.functional as F

    if size not in IMAGE_SIZES:
        raise ValueError(f"image size {size} not supported; choose one of {IMAGE_SIZES}")
    n = len(digits)
    canvas = np.full((n, 3, size, size), int(BACKGROUND), dtype=np.uint8)
    if n == 0:
        return canvas
    obj_digit = _digit_objects(torch.from_numpy(np.ascontiguousarray(digits)))
    mask = (obj_digit > 150).float() * 255.0
    tex_index = torch.as_tensor([TEXTURES.index(t) for t in factors["texture"]])
    ar = torch.arange(OBJECT)
    ty = torch.as_tensor(factors["tex_y"])[:, None, None] + ar[None, :, None]
    tx = torch.as_tensor(factors["tex_x"])[:, None, None] + ar[None, None, :]
    patch = textures[tex_index[:, None, None], ty, tx]  # (n, 40, 40)
    c1 = torch.as_tensor(hls_to_rgb(factors["hue_deg"], factors["l1"]), dtype=torch.float32)
    c2 = torch.as_tensor(hls_to_rgb(factors["hue_deg"], factors["l2"]), dtype=torch.float32)
    colour = (c1[:, :, None, None] * patch[:, None] + c2[:, :, None, None] * (255 - patch[:, None])) / 255
    obj = torch.cat([colour, mask[:, None]], 1)  # (n, 4, 40, 40): RGB + alpha
    side = OBJECT * size / 128  # object square at this canvas size
    base = max(2, round(side))
    if base != OBJECT:  # anti-aliased to the canvas resolution once, then scaled per sample
        obj = F.interpolate(obj, size=(base, base), mode="bilinear", antialias=True, align_corners=False)
    s = torch.as_tensor(factors["scale_factor"], dtype=torch.float64)
    box = int(math.ceil(side * max(SCALES["large"]))) + 2
    cy = torch.as_tensor(factors["cy"], dtype=torch.float64) + 0.5  # continuous coordinates
    cx = torch.as_tensor(factors["cx"], dtype=torch.float64) + 0.5
    y0 = torch.floor(cy - box / 2).long()
    x0 = torch.floor(cx - box / 2).long()
    pix = torch.arange(box, dtype=torch.float64) + 0.5
    oy = ((y0[:, None] + pix[None] - cy[:, None]) / (s[:, None] * side / base) + base / 2) / base * 2 - 1
    ox = ((x0[:, None] + pix[None] - cx[:, None]) / (s[:, None] * side / base) + base / 2) / base * 2 - 1
    grid = torch.stack(torch.broadcast_tensors(ox[:, None, :], oy[:, :, None]), -1).float()
    patchbox = F.grid_sample(obj, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    alpha = patchbox[:, 3:4] / 255.0
    composite = (BACKGROUND * (1 - alpha) + patchbox[:, :3] * alpha).round_().clamp_(0, 255)
    composite = composite.to(torch.uint8).numpy()
    for i in range(n):  # paste each box, clipped to the canvas
        ya, xa = int(y0[i]), int(x0[i])
        ys, xs = max(0, ya), max(0, xa)
        ye, xe = min(size, ya + box), min(size, xa + box)
        if ye > ys and xe > xs:
            canvas[i, :, ys:ye, xs:xe] = composite[i, :, ys - ya:ye - ya, xs - xa:xe - xa]
    return canvas
