"""Procedural greyscale textures (256 x 256, values 0..255), deterministic from a seed.

Our own designs standing in for DiagViB-6's texture images (which are not reused): blank (flat),
tiles, wood, carpet, bricks and lava.  In the generator a texture value T mixes the object's two
colours as (c1 T + c2 (255 - T)) / 255; blank is flat mid-grey (T = 127.5), the mean of the two
colours, so that its hue stays visible for dark and bright lightness alike.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

SIZE = 256
TEXTURES = ("blank", "tiles", "wood", "carpet", "bricks", "lava")


def _noise(rng: np.random.Generator, cells: int) -> np.ndarray:
    """Smooth value noise in [0, 1]: a random cells x cells grid, bicubically upsampled."""
    import torch  # here: the texture names are read by code that must not load PyTorch
    import torch.nn.functional as F

    grid = torch.as_tensor(rng.random((1, 1, cells, cells)))
    up = F.interpolate(grid, size=(SIZE, SIZE), mode="bicubic", align_corners=False)[0, 0].numpy()
    return np.clip(up, 0.0, 1.0)


def _fbm(rng: np.random.Generator, octaves=(4, 8, 16, 32)) -> np.ndarray:
    total = sum(_noise(rng, c) * (0.5 ** i) for i, c in enumerate(octaves))
    return total / sum(0.5 ** i for i in range(len(octaves)))


def _tiles(rng):
    y, x = np.mgrid[0:SIZE, 0:SIZE]
    grout = ((x % 32) < 3) | ((y % 32) < 3)
    face = 40 + 30 * _noise(rng, 16)
    return np.where(grout, 235.0, face)


def _wood(rng):
    y, x = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
    cy, cx = rng.uniform(-200, -100), rng.uniform(60, 200)
    r = np.hypot(y - cy, x - cx)
    rings = np.sin(2 * np.pi * (r / 14.0 + 1.2 * _noise(rng, 6)))
    return 127.5 + 110 * rings + 15 * (_noise(rng, 64) - 0.5)


def _carpet(rng):
    y, x = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)
    weave = np.sin(x * 2 * np.pi / 4) * np.sin(y * 2 * np.pi / 4)
    fibres = rng.random((SIZE, SIZE))
    return 127.5 + 60 * weave + 90 * (fibres - 0.5)


def _bricks(rng):
    y, x = np.mgrid[0:SIZE, 0:SIZE]
    row = y // 24
    shifted = x + (row % 2) * 28
    mortar = (y % 24 < 4) | (shifted % 56 < 4)
    brick_id = row * 16 + shifted // 56
    tone = rng.uniform(30, 110, size=int(brick_id.max()) + 1)[brick_id]
    return np.where(mortar, 220.0, tone + 20 * (_noise(rng, 32) - 0.5))


def _lava(rng):
    turbulence = np.abs(2 * _fbm(rng) - 1)  # near 0 along the "cracks"
    return 255.0 * np.exp(-turbulence / 0.06) + 20 * _noise(rng, 8)


_MAKERS = {"tiles": _tiles, "wood": _wood, "carpet": _carpet, "bricks": _bricks, "lava": _lava}


def make_texture(name: str, seed: int = 0) -> np.ndarray:
    """The texture `name` as float32 (256, 256) in [0, 255]."""
    if name not in TEXTURES:
        raise ValueError(f"unknown texture {name!r}; choose one of {TEXTURES}")
    if name == "blank":
        return np.full((SIZE, SIZE), 127.5, dtype=np.float32)
    rng = np.random.default_rng([seed, TEXTURES.index(name)])
    return np.clip(_MAKERS[name](rng), 0, 255).astype(np.float32)


def texture_bank(seed: int = 0) -> torch.Tensor:
    """All textures stacked in TEXTURES order: (6, 256, 256) float32."""
    import torch

    return torch.stack([torch.from_numpy(make_texture(n, seed)) for n in TEXTURES])
