"""Blur corruptions (reference generator's CIFAR parameters); same signature as noise.py."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy.ndimage import correlate1d

from pabench.datasets.corruptions.filters import fold, gaussian, pad

DEFOCUS = ((0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1))        # (radius, alias sigma)
GLASS = ((0.05, 1, 1), (0.25, 1, 1), (0.4, 1, 1), (0.25, 1, 2), (0.4, 1, 2))  # (sigma, delta, iters)
MOTION = ((6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5))                       # (radius, sigma)
ZOOM_END = (1.06, 1.11, 1.16, 1.21, 1.26)
GAUSSIAN_BLUR = (0.4, 0.6, 0.7, 0.8, 1.0)


def _unit(x):
    return x.double() / 255


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """The reference's anti-aliased disk: a 17x17 indicator of the disk, normalised, blurred with
    OpenCV's 3x3 Gaussian of sigma alias_blur (borders mirrored), cropped to its support."""
    t = np.arange(-8, 9)
    xx, yy = np.meshgrid(t, t)
    disk = (xx ** 2 + yy ** 2 <= radius ** 2).astype(np.float64)
    disk /= disk.sum()
    g = np.exp(-np.arange(-1, 2) ** 2 / (2 * alias_blur ** 2))
    g /= g.sum()
    k = correlate1d(correlate1d(disk, g, axis=0, mode="mirror"), g, axis=1, mode="mirror")
    rows, cols = np.flatnonzero(k.any(1)), np.flatnonzero(k.any(0))
    r = max(8 - rows[0], cols[-1] - 8, 8 - cols[0], rows[-1] - 8)   # a centred, odd crop
    return k[8 - r:9 + r, 8 - r:9 + r].astype(np.float32)


def defocus_blur(x, severity, rs):
    """Taps summed one shifted image at a time in row-major order: native.c's order, so both
    round alike (a flat region lands exactly on a truncation boundary)."""
    k = disk_kernel(*DEFOCUS[severity - 1]).astype(np.float64)
    x = _unit(x)
    h, w = x.shape[-2:]
    r = k.shape[0] // 2
    xp = pad(x, r, r, "mirror")
    out = torch.zeros_like(x)
    for i in range(k.shape[0]):
        for j in range(k.shape[1]):
            out += float(k[i, j]) * xp[..., i:i + h, j:j + w]
    return out.clamp_(0, 1) * 255


def gaussian_blur(x, severity, rs):
    return gaussian(_unit(x), GAUSSIAN_BLUR[severity - 1]).clamp_(0, 1) * 255


def glass_blur(x, severity, rs):
    """Blur, truncate to uint8, displace pixels locally (`displace`), blur again."""
    sigma, delta, iterations = GLASS[severity - 1]
    y = (gaussian(_unit(x), sigma) * 255).floor_()
    h, w = y.shape[-2:]
    for _ in range(iterations):
        d = rs.integers(-delta, delta, 2, h - delta - 1, w - delta - 1)
        y = displace(y, torch.from_numpy(d[:, 1]), torch.from_numpy(d[:, 0]), delta)
    return gaussian(y / 255, sigma).clamp_(0, 1) * 255


def displace(y: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, delta: int) -> torch.Tensor:
    """One pass of the reference's pixel "swaps": for h, w from the bottom-right corner down to
    delta + 1, pixel (h, w) takes the value at (h + dy, w + dx), dy, dx (B, H - delta - 1,
    W - delta - 1) in [-delta, delta).  Its swap of numpy views copies one way only, and with
    delta = 1 (all CIFAR severities) every source lies above or to the left, not yet overwritten
    in that pass: so the pass is one gather."""
    b, c, h, w = y.shape
    rows = torch.arange(delta + 1, h)[None, :, None] + dy
    cols = torch.arange(delta + 1, w)[None, None, :] + dx
    idx = (rows * w + cols).reshape(b, 1, -1).expand(b, c, -1)
    out = y.clone()
    out[:, :, delta + 1:, delta + 1:] = y.reshape(b, c, h * w).gather(2, idx).reshape(b, c, h - delta - 1, w - delta - 1)
    return out


def motion_kernel(radius: float, sigma: float) -> np.ndarray:
    """ImageMagick's one-sided motion-blur weights: width 2*ceil(radius)+1, exp(-i^2 / 2 sigma^2)."""
    width = int(2 * math.ceil(radius) + 1)
    k = np.exp(-np.arange(width) ** 2 / (2 * sigma ** 2))
    return k / k.sum()


def motion_offsets(taps: int, angle_deg: np.ndarray):
    """Tap i's offset (round(i sin a), round(i cos a)) (rows, columns), halves rounded up; each
    (B, taps) int64."""
    a = np.deg2rad(angle_deg)[:, None]
    i = np.arange(taps)[None, :]
    return np.ceil(i * np.sin(a) - 0.5).astype(np.int64), np.ceil(i * np.cos(a) - 0.5).astype(np.int64)


def motion_blur_u8(x: torch.Tensor, radius: float, sigma: float, angle_deg: np.ndarray):
    """ImageMagick's MotionBlurImage on uint8 images (B, C, H, W), one angle per image: tap i reads
    the pixel at offset (round(i sin a), round(i cos a)) (rows, columns), edges repeated; the sum
    is rounded to uint8 as ImageMagick writes it."""
    k = motion_kernel(radius, sigma)
    b, c, h, w = x.shape
    all_dy, all_dx = motion_offsets(len(k), np.asarray(angle_deg))
    flat = x.double().reshape(b, c, h * w)
    out = torch.zeros(b, c, h * w, dtype=torch.float64)
    rows, cols = torch.arange(h)[None, :, None], torch.arange(w)[None, None, :]
    for i, weight in enumerate(k):
        dy = torch.from_numpy(all_dy[:, i])[:, None, None]
        dx = torch.from_numpy(all_dx[:, i])[:, None, None]
        idx = fold(rows + dy, h, "nearest") * w + fold(cols + dx, w, "nearest")
        out += weight * flat.gather(2, idx.reshape(b, 1, -1).expand(b, c, -1))
    return out.round_().reshape(b, c, h, w)


def motion_blur(x, severity, rs):
    radius, sigma = MOTION[severity - 1]
    return motion_blur_u8(x, radius, sigma, rs.between(-45, 45, 1)[:, 0])


def _zoom_shape(h: int, factor: float) -> tuple[int, int]:
    """The centre crop's side ceil(h / factor) and its zoomed side round(crop * factor)."""
    ch = int(np.ceil(h / factor))
    return ch, int(round(ch * factor))


def clipped_zoom(x: torch.Tensor, factor: float) -> torch.Tensor:
    """The reference's clipped_zoom: crop the centre ceil(h / factor) square, scipy.ndimage.zoom
    it (order 1, output side round(side * factor), corners aligned), keep the centre h x h.
    With corners aligned the result depends on the two sides only, not on the factor itself."""
    h = x.shape[-1]
    ch, side = _zoom_shape(h, factor)
    top = (h - ch) // 2
    z = F.interpolate(x[..., top:top + ch, top:top + ch], size=(side, side), mode="bilinear",
                      align_corners=True)
    trim = (side - h) // 2
    return z[..., trim:trim + h, trim:trim + h]


def zoom_blur(x, severity, rs):
    """The mean of the image and its clipped zooms at factors 1, 1.01, ... (the reference's
    grid).  Factors with the same (crop, zoomed) sides give the same zoom (26 factors, 14 distinct
    zooms at severity 5 on 32x32): each is computed once, and added as often as the reference
    adds it, in its order, so the sum is the same."""
    factors = np.arange(1, ZOOM_END[severity - 1], 0.01)
    x = x.float() / 255
    out = torch.zeros_like(x)
    zooms = {}
    for f in factors:
        key = _zoom_shape(x.shape[-1], f)
        if key not in zooms:
            zooms[key] = clipped_zoom(x, f)
        out += zooms[key]
    return ((x + out) / (len(factors) + 1)).clamp_(0, 1) * 255
