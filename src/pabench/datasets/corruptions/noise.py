"""Noise corruptions (reference generator's CIFAR parameters). Each takes uint8 images
(B, 3, H, W) as a tensor, the severity and the batch's Streams, and returns floats on 0..255."""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import poisson

GAUSSIAN = (0.04, 0.06, 0.08, 0.09, 0.10)
SHOT = (500, 250, 100, 75, 50)
IMPULSE = (0.01, 0.02, 0.03, 0.05, 0.07)
SPECKLE = (0.06, 0.1, 0.12, 0.16, 0.2)


def _unit(x):
    return x.float() / 255


def gaussian_noise(x, severity, rs):
    c = GAUSSIAN[severity - 1]
    return (_unit(x) + c * rs.normal(*x.shape[1:])).clamp_(0, 1) * 255


def speckle_noise(x, severity, rs):
    c = SPECKLE[severity - 1]
    x = _unit(x)
    return (x + x * c * rs.normal(*x.shape[1:])).clamp_(0, 1) * 255


def impulse_noise(x, severity, rs):
    """skimage's salt-and-pepper: each value (channel included) is replaced with probability
    `amount`, by 1 or 0 with equal chance."""
    amount = IMPULSE[severity - 1]
    flip = torch.from_numpy(rs.uniform(*x.shape[1:]) < amount)
    salt = torch.from_numpy(rs.uniform(*x.shape[1:]) < 0.5)
    out = _unit(x)
    out[flip] = salt[flip].float()
    return out * 255


_GUIDE = 4096   # guide-table cells: most searches end in the cell they start in


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
    if photons not in _TABLES:
        _TABLES[photons] = _poisson_tables(photons)
    cdf, guide, k_max = _TABLES[photons]
    level = x.numpy().ravel().astype(np.intp)
    u = rs.uniform(*x.shape[1:]).ravel()
    at = level * (_GUIDE + 1) + (u * _GUIDE).astype(np.intp)   # flat indices: 2-D fancy indexing is slower
    lo, hi = guide.ravel()[at], guide.ravel()[at + 1]
    todo = np.flatnonzero(lo < hi)
    while todo.size:
        mid = (lo[todo] + hi[todo]) // 2
        below = cdf[level[todo] * k_max + mid] < u[todo]
        lo[todo] = np.where(below, mid + 1, lo[todo])
        hi[todo] = np.where(below, hi[todo], mid)
        todo = todo[lo[todo] < hi[todo]]
    k = torch.from_numpy(lo.reshape(x.shape)).float()
    return (k / photons).clamp_(0, 1) * 255
