"""Shift-ratio views of paired test environments, and the average structural similarity (ASS)
between paired environments as a model-free measure of shift size."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

# SSIM as in Wang et al. (2004): 11-tap Gaussian window (sigma 1.5), K1 = 0.01, K2 = 0.03,
# dynamic range 255; computed per colour channel and averaged.
WINDOW, SIGMA, K1, K2, RANGE = 11, 1.5, 0.01, 0.03, 255.0


def shift_ratio_view(n: int, env: str, ratio: float, base: str = "env0") -> list[dict]:
    """The SR dataset of `env`: the first (1 - SR) n samples from `base`, the rest from `env`.
    Rows are [start, stop) slices of the paired environments: an index view, not a copy."""
    if not 0.0 <= ratio <= 1.0:
        raise ValueError(f"shift ratio {ratio} outside [0, 1]")
    cut = int(round((1.0 - ratio) * n))
    parts = [{"env": base, "start": 0, "stop": cut}, {"env": env, "start": cut, "stop": n}]
    return [p for p in parts if p["stop"] > p["start"]]


def take_view(split: dict, view: list[dict]):
    """Images and labels of a view over a loaded split ({env: EnvironmentData})."""
    images = np.concatenate([split[p["env"]].images[p["start"]:p["stop"]] for p in view])
    labels = np.concatenate([split[p["env"]].labels[p["start"]:p["stop"]] for p in view])
    return images, labels


def _taps() -> torch.Tensor:
    x = torch.arange(WINDOW, dtype=torch.float64) - WINDOW // 2
    g = torch.exp(-x * x / (2 * SIGMA * SIGMA))
    return g / g.sum()


def ssim(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Mean SSIM of each pair of images (n, C, H, W) uint8 -> (n,), over the valid window area."""
    a = torch.as_tensor(np.asarray(x), dtype=torch.float64)
    b = torch.as_tensor(np.asarray(y), dtype=torch.float64)
    if a.shape != b.shape:
        raise ValueError(f"ssim: shapes differ {tuple(a.shape)} vs {tuple(b.shape)}")
    n, c = a.shape[:2]
    g = _taps()
    rows, cols = g.view(1, 1, 1, WINDOW).expand(c, 1, 1, WINDOW), g.view(1, 1, WINDOW, 1).expand(c, 1, WINDOW, 1)
    # The Gaussian window is separable: a row pass and a column pass (22 taps, not 121), over
    # the five maps at once.
    maps = F.conv2d(F.conv2d(torch.cat([a, b, a * a, b * b, a * b]), rows, groups=c), cols, groups=c)
    mu_a, mu_b, aa, bb, ab = maps.split(n)
    var_a, var_b, cov = aa - mu_a ** 2, bb - mu_b ** 2, ab - mu_a * mu_b
    c1, c2 = (K1 * RANGE) ** 2, (K2 * RANGE) ** 2
    s = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return s.mean(dim=(1, 2, 3)).numpy()


def average_ssim(x: np.ndarray, y: np.ndarray, chunk: int = 256) -> float:
    """ASS: SSIM averaged over paired images, computed in chunks (memory-mapped inputs stay on disk)."""
    if len(x) != len(y):
        raise ValueError(f"average_ssim: {len(x)} vs {len(y)} images; environments must be paired")
    total = 0.0
    for lo in range(0, len(x), chunk):
        total += float(ssim(x[lo:lo + chunk], y[lo:lo + chunk]).sum())
    return total / len(x)
