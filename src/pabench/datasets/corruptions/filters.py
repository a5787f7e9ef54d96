"""Batched image filters on float tensors (B, C, H, W): borders as scipy/OpenCV name them,
separable and 2-D correlation, bilinear sampling at per-image coordinates."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

# "nearest": a a | a b c | c c (skimage's default); "mirror": c b | a b c | b a (OpenCV's
# BORDER_REFLECT_101); "reflect": b a | a b c | c b (scipy's half-sample symmetric).
MODES = ("nearest", "mirror", "reflect")


def fold(i, n: int, mode: str):
    """Map integer indices (any range) into [0, n) by the border rule `mode`."""
    if mode == "nearest":
        return i.clip(0, n - 1)
    if mode == "mirror":
        period = max(2 * n - 2, 1)
        i = i % period
        return np.minimum(i, period - i) if isinstance(i, np.ndarray) else torch.minimum(i, period - i)
    if mode == "reflect":
        i = i % (2 * n)
        return np.minimum(i, 2 * n - 1 - i) if isinstance(i, np.ndarray) else torch.minimum(i, 2 * n - 1 - i)
    raise ValueError(f"unknown border mode {mode!r} (use one of {MODES})")


def pad(x: torch.Tensor, r_h: int, r_w: int, mode: str) -> torch.Tensor:
    h, w = x.shape[-2:]
    rows = torch.from_numpy(fold(np.arange(-r_h, h + r_h), h, mode))
    cols = torch.from_numpy(fold(np.arange(-r_w, w + r_w), w, mode))
    return x.index_select(-2, rows).index_select(-1, cols)


def gaussian_kernel(sigma: float, truncate: float = 4.0) -> np.ndarray:
    """scipy.ndimage's 1-D Gaussian: radius int(truncate * sigma + 0.5), normalised."""
    radius = int(truncate * sigma + 0.5)
    t = np.arange(-radius, radius + 1, dtype=np.float64)
    k = np.exp(-0.5 * t * t / (sigma * sigma))
    return k / k.sum()


def correlate(x: torch.Tensor, kernel, mode: str) -> torch.Tensor:
    """2-D correlation of every channel with one (kh, kw) kernel (odd sizes), borders by `mode`."""
    k = torch.as_tensor(np.asarray(kernel), dtype=x.dtype)
    c = x.shape[1]
    xp = pad(x, k.shape[0] // 2, k.shape[1] // 2, mode)
    return F.conv2d(xp, k.expand(c, 1, *k.shape).contiguous(), groups=c)


def separable(x: torch.Tensor, k1d, mode: str) -> torch.Tensor:
    """The same 1-D kernel along rows and columns."""
    k = np.asarray(k1d)
    return correlate(correlate(x, k[None, :], mode), k[:, None], mode)


def gaussian(x: torch.Tensor, sigma: float, mode: str = "nearest", truncate: float = 4.0):
    """scipy.ndimage.gaussian_filter over the two image axes (skimage's `gaussian` calls it)."""
    if sigma <= 0:
        return x
    return separable(x, gaussian_kernel(sigma, truncate), mode)


def gaussian_taps(x: torch.Tensor, k1d, mode: str) -> torch.Tensor:
    """`separable` with the taps summed one at a time from zero in ascending order (horizontal
    pass, then vertical): a fixed summation order that native.c repeats, unlike conv2d's."""
    k = [float(v) for v in np.asarray(k1d)]
    r = len(k) // 2
    h, w = x.shape[-2:]
    xp = pad(x, 0, r, mode)
    out = torch.zeros_like(x)
    for t, weight in enumerate(k):
        out += weight * xp[..., :, t:t + w]
    xp = pad(out, r, 0, mode)
    out = torch.zeros_like(x)
    for t, weight in enumerate(k):
        out += weight * xp[..., t:t + h, :]
    return out


def bilinear(x: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor, mode: str) -> torch.Tensor:
    """x (B, C, H, W) sampled at per-image coordinates rows, cols (B, H', W'), linear
    interpolation between the four neighbours, out-of-range neighbours folded by `mode`."""
    b, c, h, w = x.shape
    r0, c0 = rows.floor(), cols.floor()
    fr, fc = (rows - r0).unsqueeze(1), (cols - c0).unsqueeze(1)
    r0, c0 = r0.long(), c0.long()
    flat = x.reshape(b, c, h * w)

    def at(r, q):
        idx = (fold(r, h, mode) * w + fold(q, w, mode)).reshape(b, 1, -1).expand(b, c, -1)
        return flat.gather(2, idx).reshape(b, c, *rows.shape[1:])

    top = at(r0, c0) * (1 - fc) + at(r0, c0 + 1) * fc
    bottom = at(r0 + 1, c0) * (1 - fc) + at(r0 + 1, c0 + 1) * fc
    return top * (1 - fr) + bottom * fr
