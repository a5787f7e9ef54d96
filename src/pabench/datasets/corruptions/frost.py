"""Frost textures: procedural ones of our own (the default, offline), or the reference generator's
frost photographs when a folder of them is given (`photos`; the paper scale downloads them, we
may not ship them).

Procedural: a dim, uneven ice film crossed by bright branching crystals, tinted blue-white, fixed
(seeded) and made once per process; their statistics differ from the photographs', so frost files
made with them differ from the published ones.

Photographs: the reference (`make_cifar_c.py`) reads one of frost1.png ... frost5.jpg with OpenCV
(colour, alpha dropped), shrinks it with `cv2.resize(fx=0.2, fy=0.2)` and crops 32x32 at a random
position.  The shrink is bilinear with half-pixel centres at scale exactly 5, so output pixel d
reads source position (d + 0.5) * 5 - 0.5 = 5d + 2, a whole pixel: every fifth pixel from the
third, round(0.2 n) of them along an axis of n.  The crop's draws are ours (weather.frost_draws).
"""
from __future__ import annotations

from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
from scipy.ndimage import gaussian_filter

SIDE = 128          # crops of 32x32 are taken at random positions
N_TEXTURES = 5      # as many as the reference draws from
_TINT = np.array([0.86, 0.93, 1.0])   # blue-white
PHOTOS = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg")
_SHRINK = 5         # cv2.resize's fx = fy = 0.2
_photo_folder: Path | None = None     # set by `photos`


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


def photo_texture(path) -> np.ndarray:
    """One frost photograph as the reference uses it: RGB (3, round(0.2 H), round(0.2 W)) uint8
    (see the module docstring)."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            rgb = np.asarray(img.convert("RGB"))
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise ValueError(f"{path}: cannot be read as an image ({err})") from None
    h, w = (int(np.rint(n / _SHRINK)) for n in rgb.shape[:2])
    return np.ascontiguousarray(rgb[_SHRINK // 2::_SHRINK, _SHRINK // 2::_SHRINK][:h, :w]
                                .transpose(2, 0, 1))


@lru_cache(maxsize=4)
def _textures(folder: Path | None):
    """(textures (T, 3, S, S) uint8, sizes (T, 2) int64: each texture's rows and columns, from
    its top-left corner; the rest is padding, never cropped; the textures (T, S, S, 3))."""
    if folder is None:
        # rounded like the photographs (and a quarter of a float's bytes, which the frost kernel
        # reads for every pixel)
        made = [np.rint(make_texture(1000 + i)).clip(0, 255).astype(np.uint8)
                for i in range(N_TEXTURES)]
    else:
        made = [photo_texture(folder / name) for name in PHOTOS]
    sizes = np.array([t.shape[1:] for t in made], dtype=np.int64)
    small = [name for name, (h, w) in zip(PHOTOS, sizes) if min(h, w) <= 32]
    if small:
        raise ValueError(f"{folder}: frost photographs too small for a 32x32 crop after the "
                         f"reference's 0.2 shrink: {', '.join(small)}")
    side = int(sizes.max())
    textures = np.zeros((len(made), 3, side, side), np.uint8)
    for t, texture in zip(textures, made):
        t[:, :texture.shape[1], :texture.shape[2]] = texture
    return (torch.from_numpy(textures), sizes,
            np.ascontiguousarray(textures.transpose(0, 2, 3, 1)))


def frost_textures() -> torch.Tensor:
    """The five textures in use, (5, 3, S, S) uint8 (`frost_sizes` says how much of each is
    texture)."""
    return _textures(_photo_folder)[0]


def frost_sizes() -> np.ndarray:
    """(5, 2) int64: the rows and columns of each texture in use."""
    return _textures(_photo_folder)[1]


def frost_textures_hwc() -> np.ndarray:
    """The textures in use as (5, S, S, 3) uint8, laid out like the images (the C kernel's)."""
    return _textures(_photo_folder)[2]


@contextmanager
def photos(folder):
    """Within the block, frost uses the reference's photographs in `folder` (frost1.png ...
    frost5.jpg) instead of the procedural textures."""
    global _photo_folder
    previous, _photo_folder = _photo_folder, Path(folder).resolve()
    try:
        _textures(_photo_folder)    # unreadable or missing photographs fail here
        yield
    finally:
        _photo_folder = previous
