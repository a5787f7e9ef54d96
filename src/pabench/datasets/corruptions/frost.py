"""Procedural frost textures, in place of the reference generator's frost photographs (which we
may not ship): a dim, uneven ice film crossed by bright branching crystals, tinted blue-white.
The textures are fixed (seeded) and made once per process; their statistics differ from the
photographs', so our frost files differ from the published ones."""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
from scipy.ndimage import gaussian_filter

SIDE = 128          # crops of 32x32 are taken at random positions
N_TEXTURES = 5      # as many as the reference draws from
_TINT = np.array([0.86, 0.93, 1.0])   # blue-white


def _crystals(rng, side: int) -> np.ndarray:
    """Density of branching random walks: each seed grows a few arms that keep their heading
    with small turns and fork now and then, like dendritic ice."""
    canvas = np.zeros((side, side))
    arms = [(rng.uniform(0, side, 2), rng.uniform(0, 2 * np.pi), rng.integers(15, 50))
            for _ in range(90)]
    while arms:
        (pos, heading, steps), arms = arms[0], arms[1:]
        for _ in range(steps):
            heading += rng.normal(0, 0.15)
            pos = pos + 0.7 * np.array([np.sin(heading), np.cos(heading)])
            r, c = int(pos[0]) % side, int(pos[1]) % side
            canvas[r, c] += 1.0
            if rng.uniform() < 0.04 and steps > 6:        # a side branch at about 60 degrees
                arms.append((pos.copy(), heading + rng.choice([-1, 1]) * np.pi / 3, steps // 2))
    return canvas


def make_texture(seed: int, side: int = SIDE) -> np.ndarray:
    """One frost texture, float (3, side, side) on 0..255."""
    rng = np.random.default_rng(seed)
    film = gaussian_filter(rng.standard_normal((side, side)), 10, mode="wrap")
    film = 0.25 + 0.1 * film / (np.abs(film).max() + 1e-12)
    ice = gaussian_filter(_crystals(rng, side), 0.8, mode="wrap")
    ice = 1 - np.exp(-3 * ice)                            # saturate where arms cross
    grain = 0.03 * rng.standard_normal((side, side))
    value = np.clip(film + 0.75 * ice + grain, 0, 1)
    return 255 * _TINT[:, None, None] * value[None]


@lru_cache(maxsize=1)
def frost_textures() -> torch.Tensor:
    """The five textures, (5, 3, SIDE, SIDE) uint8, rounded like the reference's photographs (and
    a quarter of a float's bytes, which the frost kernel reads for every pixel)."""
    textures = np.stack([make_texture(1000 + i) for i in range(N_TEXTURES)])
    return torch.from_numpy(np.rint(textures).clip(0, 255).astype(np.uint8))
