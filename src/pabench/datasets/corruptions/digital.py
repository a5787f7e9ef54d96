"""Digital corruptions (reference generator's CIFAR parameters); same signature as noise.py."""
from __future__ import annotations

import numpy as np
import torch

from pabench.datasets.corruptions.filters import bilinear, gaussian_kernel, gaussian_taps

BRIGHTNESS = (0.05, 0.1, 0.15, 0.2, 0.3)
CONTRAST = (0.75, 0.5, 0.4, 0.3, 0.15)
SATURATE = ((0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2))          # (factor, shift)
ELASTIC = tuple(tuple(32 * v for v in c) for c in                       # (alpha, sigma, affine)
                ((0, 0, 0.08), (0.05, 0.2, 0.07), (0.08, 0.06, 0.06), (0.1, 0.04, 0.05),
                 (0.1, 0.03, 0.03)))
PIXELATE = (0.95, 0.9, 0.85, 0.75, 0.65)
JPEG = (80, 65, 58, 50, 40)


def _unit(x):
    return x.double() / 255


def brightness(x, severity, rs):
    """skimage's HSV round trip with V + c: at fixed hue and saturation RGB scales with V, so the
    pixel is scaled by V'/V (a black pixel, V = 0, becomes grey V')."""
    x = _unit(x)
    v = x.max(1, keepdim=True).values
    v_new = (v + BRIGHTNESS[severity - 1]).clamp(0, 1)
    out = torch.where(v > 0, x * (v_new / v.clamp_min(1e-12)), v_new.expand_as(x))
    return out.clamp_(0, 1) * 255


def saturate(x, severity, rs):
    """skimage's HSV round trip with S * factor + shift: at fixed hue and value, V - RGB scales
    with S.  A grey pixel (S = 0) has hue 0 in skimage, so a positive shift tints it red."""
    factor, shift = SATURATE[severity - 1]
    x = _unit(x)
    v = x.max(1, keepdim=True).values
    s = torch.where(v > 0, (v - x.min(1, keepdim=True).values) / v.clamp_min(1e-12), 0.0)
    s_new = (s * factor + shift).clamp(0, 1)
    scaled = v - (v - x) * s_new / s.clamp_min(1e-12)
    red = torch.cat([v, v * (1 - s_new), v * (1 - s_new)], 1)
    return torch.where(s > 0, scaled, red).clamp_(0, 1) * 255


def contrast(x, severity, rs):
    # the mean from the exact integer sum: no summation order to match in native.c
    mean = x.sum((2, 3), keepdim=True, dtype=torch.int64).double() / (x.shape[2] * x.shape[3]) / 255
    x = _unit(x)
    return ((x - mean) * CONTRAST[severity - 1] + mean).clamp_(0, 1) * 255


def elastic_affine(rs, batch: int, h: int, w: int, affine: float) -> np.ndarray:
    """Each image's inverse affine map (B, 2, 3) float32, output (x, y, 1) -> source (x, y): three
    points jittered by U(-affine, affine) (the reference's getAffineTransform), the first draws
    of the image's stream."""
    centre, half = np.float32(h // 2), (min(h, w) // 3)
    src = np.array([[centre + half, centre + half], [centre + half, centre - half],
                    [centre - half, centre - half]], np.float32)              # (x, y) points
    dst = src + rs.between(-affine, affine, 3, 2).astype(np.float32)
    ones = np.ones((3, 1), np.float32)
    forward = np.linalg.solve(np.hstack([src, ones])[None], dst).transpose(0, 2, 1)  # (B, 2, 3)
    full = np.concatenate([forward, np.broadcast_to([[[0, 0, 1]]], (batch, 1, 3))], 1)
    return np.ascontiguousarray(np.linalg.inv(full)[:, :2], dtype=np.float32)


def elastic_kernel(sigma: float) -> np.ndarray:
    """The displacement field's Gaussian (truncated at 3 sigma); sigma 0 (severity 1): no
    smoothing, the one-tap kernel [1]."""
    return gaussian_kernel(sigma, truncate=3) if sigma > 0 else np.ones(1)


def elastic_transform(x, severity, rs):
    """A random affine warp (OpenCV warpAffine: bilinear, mirrored borders) of three points
    jittered by +-affine, then a displacement field of smoothed uniform noise (sigma, scaled
    by alpha; scipy map_coordinates, order 1, reflected borders).  OpenCV's 1/32-pixel
    coordinate rounding is not reproduced.  Every sum has a fixed order (the affine map's
    terms left to right, the Gaussian's taps one at a time), native.c's."""
    alpha, sigma, affine = ELASTIC[severity - 1]
    x = x.float() / 255
    b, _, h, w = x.shape
    m = torch.from_numpy(elastic_affine(rs, b, h, w, affine))[:, :, :, None, None]
    yy, xx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                            indexing="ij")
    sx = (m[:, 0, 0] * xx + m[:, 0, 1] * yy) + m[:, 0, 2]
    sy = (m[:, 1, 0] * xx + m[:, 1, 1] * yy) + m[:, 1, 2]
    x = bilinear(x, sy, sx, "mirror")
    field = torch.from_numpy(rs.between(-1, 1, 2, h, w))
    d = (gaussian_taps(field, elastic_kernel(sigma), "reflect") * alpha).float()
    dx, dy = d[:, 0], d[:, 1]
    return bilinear(x, yy + dy, xx + dx, "reflect").clamp_(0, 1) * 255


def box_weights(n_in: int, n_out: int) -> np.ndarray:
    """Pillow's BOX resampling weights (n_out, n_in): each output pixel averages the input pixels
    whose centres fall in its box (Pillow's support and rounding rules)."""
    scale = n_in / n_out
    filterscale = max(scale, 1.0)
    support = 0.5 * filterscale
    w = np.zeros((n_out, n_in))
    for o in range(n_out):
        centre = (o + 0.5) * scale
        lo, hi = max(int(centre - support + 0.5), 0), min(int(centre + support + 0.5), n_in)
        t = (np.arange(lo, hi) - centre + 0.5) / filterscale
        w[o, lo:hi] = (t > -0.5) & (t <= 0.5)
    return w / w.sum(1, keepdims=True)


def _pil_resize(x: torch.Tensor, h_out: int, w_out: int) -> torch.Tensor:
    """Pillow's two-pass BOX resize of uint8 images: horizontal pass, round to uint8, vertical pass,
    round again."""
    _, _, h, w = x.shape
    cols = torch.from_numpy(box_weights(w, w_out))
    rows = torch.from_numpy(box_weights(h, h_out))
    x = (x @ cols.T + 0.5).floor_().clamp_(0, 255)
    return (rows @ x + 0.5).floor_().clamp_(0, 255)


def pixelate(x, severity, rs):
    c = PIXELATE[severity - 1]
    _, _, h, w = x.shape
    small = _pil_resize(x.double(), int(h * c), int(w * c))
    return _pil_resize(small, h, w)


# ---------------------------------------------------------------------------------------------
# JPEG: baseline, 4:2:0, libjpeg's quality-scaled tables, rounding as libjpeg does it

LUMA = np.array([16, 11, 10, 16, 24, 40, 51, 61, 12, 12, 14, 19, 26, 58, 60, 55,
                  14, 13, 16, 24, 40, 57, 69, 56, 14, 17, 22, 29, 51, 87, 80, 62,
                  18, 22, 37, 56, 68, 109, 103, 77, 24, 35, 55, 64, 81, 104, 113, 92,
                  49, 64, 78, 87, 103, 121, 120, 101, 72, 92, 95, 98, 112, 100, 103, 99]).reshape(8, 8)
CHROMA = np.full((8, 8), 99)
CHROMA[:4, :4] = [[17, 18, 24, 47], [18, 21, 26, 66], [24, 26, 56, 99], [47, 66, 99, 99]]
DCT = np.array([[np.sqrt((1 if u == 0 else 2) / 8) * np.cos((2 * i + 1) * u * np.pi / 16)
                  for i in range(8)] for u in range(8)])   # orthonormal 8-point DCT-II


def quant_table(base: np.ndarray, quality: int) -> torch.Tensor:
    scale = 5000 // quality if quality < 50 else 200 - 2 * quality
    return torch.from_numpy(np.clip((base * scale + 50) // 100, 1, 255).astype(np.float64))


def _along(x: torch.Tensor, m: torch.Tensor, axis: int) -> torch.Tensor:
    """m applied along the last (axis -1) or second-last (axis -2) axis of 8x8 blocks:
    out[a] = sum over k of m[a, k] x[k], one product at a time in ascending k (native.c's order,
    so both paths quantise a coefficient that sits on a rounding boundary alike)."""
    if axis == -2:
        terms = (m[:, k, None] * x[..., k:k + 1, :] for k in range(8))
    else:
        terms = (x[..., :, k:k + 1] * m[:, k] for k in range(8))
    out = next(terms)
    for t in terms:
        out = out + t
    return out


def _blocks_roundtrip(plane: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Level shift, 8x8 DCT, quantise (round half away from zero), dequantise, inverse DCT,
    round and clamp to 0..255, for planes (B, H, W) with H, W multiples of 8."""
    b, h, w = plane.shape
    d = torch.from_numpy(DCT)
    blocks = (plane - 128).reshape(b, h // 8, 8, w // 8, 8).transpose(2, 3)
    coef = _along(_along(blocks, d, -2), d, -1)                          # d X d^T
    coef = torch.sign(coef) * torch.floor(coef.abs() / q + 0.5) * q
    back = _along(_along(coef, d.T, -2), d.T, -1)                       # d^T C d
    back = back.transpose(2, 3).reshape(b, h, w)
    return (back + 128.5).floor_().clamp_(0, 255)


def _fancy_upsample(c: torch.Tensor) -> torch.Tensor:
    """libjpeg's h2v2 fancy (triangle) upsampling with its integer rounding, edges replicated."""
    up = torch.cat([c[:, :1], c[:, :-1]], 1)
    down = torch.cat([c[:, 1:], c[:, -1:]], 1)
    rows = torch.stack([3 * c + up, 3 * c + down], 2).flatten(1, 2)    # (B, 2H, W), x4
    left = torch.cat([rows[:, :, :1], rows[:, :, :-1]], 2)
    right = torch.cat([rows[:, :, 1:], rows[:, :, -1:]], 2)
    even = torch.floor((3 * rows + left + 8) / 16)
    odd = torch.floor((3 * rows + right + 7) / 16)
    return torch.stack([even, odd], 3).flatten(2, 3)


def jpeg_roundtrip(x: torch.Tensor, quality: int) -> torch.Tensor:
    """uint8-valued RGB (B, 3, H, W), H and W multiples of 16 -> the decoded JPEG as floats."""
    r, g, b_ = x.double().unbind(1)
    y = (0.299 * r + 0.587 * g + 0.114 * b_ + 0.5).floor()
    cb = (-0.168735892 * r - 0.331264108 * g + 0.5 * b_ + 128 + 0.5 - 1e-9).floor()
    cr = (0.5 * r - 0.418687589 * g - 0.081312411 * b_ + 128 + 0.5 - 1e-9).floor()
    n, h, w = y.shape
    bias = torch.tensor([1.0, 2.0]).repeat(w // 4)                    # libjpeg's 1, 2, 1, 2 ...

    def down(c):
        return torch.floor((c.reshape(n, h // 2, 2, w // 2, 2).sum((2, 4)) + bias) / 4)

    y = _blocks_roundtrip(y, quant_table(LUMA, quality))
    cb = _fancy_upsample(_blocks_roundtrip(down(cb), quant_table(CHROMA, quality)))
    cr = _fancy_upsample(_blocks_roundtrip(down(cr), quant_table(CHROMA, quality)))
    red = y + torch.floor(1.402 * (cr - 128) + 0.5)
    green = y + torch.floor(-0.344136286 * (cb - 128) - 0.714136286 * (cr - 128) + 0.5)
    blue = y + torch.floor(1.772 * (cb - 128) + 0.5)
    return torch.stack([red, green, blue], 1).clamp_(0, 255)


def jpeg_compression(x, severity, rs):
    return jpeg_roundtrip(x, JPEG[severity - 1])
