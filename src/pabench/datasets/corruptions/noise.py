"""Noise corruptions (reference generator's CIFAR parameters). Each takes uint8 images
(B, 3, H, W) as a tensor, the severity and the batch's Streams, and returns floats on 0..255."""
from __future__ import annotations

import numpy as np
import torch
from scipy.special import ndtr
from scipy.stats import poisson

GAUSSIAN = (0.04, 0.06, 0.08, 0.09, 0.10)
SHOT = (500, 250, 100, 75, 50)
IMPULSE = (0.01, 0.02, 0.03, 0.05, 0.07)
SPECKLE = (0.06, 0.1, 0.12, 0.16, 0.2)


# Draws run over each image's values in (H, W, C) order (the stored layout, which the native
# kernels walk); the tensors here are (B, C, H, W), hence the permutes.  The arithmetic is float32
# in native.c's order, so that both give the same bytes.
_F = np.float32


def _hwc(x: torch.Tensor) -> np.ndarray:
    """(B, C, H, W) uint8 tensor -> float32 (B, H, W, C) on [0, 1]."""
    return x.permute(0, 2, 3, 1).numpy().astype(np.float32) / _F(255)


def _chw(y: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(y.transpose(0, 3, 1, 2)))


def _on_255(y: np.ndarray) -> torch.Tensor:
    return _chw(np.clip(y, _F(0), _F(1)) * _F(255))


def gaussian_thresholds(severity: int) -> np.ndarray:
    """Gaussian noise as exact integer offsets.  The stored byte is trunc(clip(x/255 + c z, 0, 1)
    * 255) = clip(x + D, 0, 255) with D = floor(255 c z): it moves every level by the same whole
    number of levels.  With z = Phi^-1((k + 0.5) 2^-24) for the draw's 24 bits k, D >= d exactly
    when k >= K_d = ceil(Phi(d / (255 c)) 2^24 - 0.5), so D = -256 + #{d in -255..255: K_d <= k}
    (offsets beyond +-255 saturate every level alike).  Returns K (511 ascending uint32, 2^24
    for a threshold no draw reaches); Phi in double precision, so D is the exact floor of the
    exact normal quantile, with no float32 approximation of it."""
    scale = 255 * GAUSSIAN[severity - 1]
    k = np.ceil(ndtr(np.arange(-255, 256) / scale) * 2.0 ** 24 - 0.5)
    return k.clip(0, 2 ** 24).astype(np.uint32)


def gaussian_noise(x, severity, rs):
    """The reference's clip(x/255 + N(0, c^2), 0, 1) * 255, truncated to a byte by the writer,
    computed as clip(x + D, 0, 255) (gaussian_thresholds)."""
    offset = np.searchsorted(gaussian_thresholds(severity), rs.bits(*x.shape[2:], x.shape[1]),
                             side="right").astype(np.int32) - 256
    level = x.permute(0, 2, 3, 1).numpy().astype(np.int32)
    return _chw(np.clip(level + offset, 0, 255).astype(np.float32))


def speckle_noise(x, severity, rs):
    c = _F(SPECKLE[severity - 1])
    x = _hwc(x)
    return _on_255(x + (x * c) * rs.normal(*x.shape[1:]).numpy())


def impulse_noise(x, severity, rs):
    """skimage's salt-and-pepper: each value (channel included) is replaced with probability
    `amount`, by 1 or 0 with equal chance.  One draw u per value decides both: replaced when
    u < amount, by 1 when u < amount / 2 (given u < amount, u / amount is uniform)."""
    amount = _F(IMPULSE[severity - 1])
    out = _hwc(x)
    u = rs.uniform(*out.shape[1:])
    out = np.where(u < amount, np.where(u < amount * _F(0.5), _F(1), _F(0)), out)
    return _chw(out * _F(255))


_GUIDE = 512    # guide-table cells: most searches end in the cell they start in (no CDF look-up
                # at all in the C kernel), and the int16 table (256 x 513) stays in L2; 256 and
                # 1024 cells measured 1.2x and 1.05x slower


def _poisson_tables(photons: int):
    """For every uint8 level v, the CDF of Poisson(v / 255 * photons) (rows of a (256, K) table,
    flattened) and a guide table: guide[v, j] = the smallest k whose CDF reaches j / _GUIDE."""
    lam = np.arange(256) / 255 * photons
    k_max = int(lam[-1] + 12 * np.sqrt(lam[-1]) + 20)
    cdf = poisson.cdf(np.arange(k_max)[None, :], lam[:, None])
    cdf[:, -1] = 1.0                                   # the tail beyond k_max is < 1e-20
    grid = np.arange(_GUIDE + 1) / _GUIDE
    guide = np.stack([np.searchsorted(row, grid) for row in cdf]).clip(max=k_max - 1)
    return cdf.ravel(), guide, k_max


_TABLES: dict = {}


def shot_noise(x, severity, rs):
    """Poisson(x * photons) / photons by inverse CDF: with uint8 inputs there are only 256 rates,
    so one table serves every pixel.  The answer for u in cell j lies between guide[v, j] and
    guide[v, j + 1]; a bisection over the (few) values still undecided finds it."""
    photons = SHOT[severity - 1]
    cdf, guide, k_max = poisson_tables(photons)
    shape = x.permute(0, 2, 3, 1).shape
    level = x.permute(0, 2, 3, 1).numpy().ravel().astype(np.intp)
    u = rs.uniform(*shape[1:]).ravel()
    at = level * (_GUIDE + 1) + (u * _GUIDE).astype(np.intp)   # flat indices: 2-D fancy indexing is slower
    lo, hi = guide.ravel()[at], guide.ravel()[at + 1]
    todo = np.flatnonzero(lo < hi)
    while todo.size:
        mid = (lo[todo] + hi[todo]) // 2
        below = cdf[level[todo] * k_max + mid] < u[todo]
        lo[todo] = np.where(below, mid + 1, lo[todo])
        hi[todo] = np.where(below, hi[todo], mid)
        todo = todo[lo[todo] < hi[todo]]
    return _on_255(lo.reshape(shape).astype(np.float32) / _F(photons))


def poisson_tables(photons: int):
    """The (cdf, guide, k_max) tables of shot noise at this photon count, made once."""
    if photons not in _TABLES:
        _TABLES[photons] = _poisson_tables(photons)
    return _TABLES[photons]
