"""Per-image random streams: a counter-based generator (SplitMix64's output function applied to
key + counter), so that draw j of image i is a pure function of (seed, corruption, severity, i, j)
and a whole batch is drawn with a few vectorised integer operations."""
from __future__ import annotations

import hashlib

import numpy as np
import torch

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def stream_key(seed: int, name: str, severity: int) -> int:
    digest = hashlib.blake2b(f"{int(seed)}/{name}/{int(severity)}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def _mix(z: np.ndarray, tmp: np.ndarray) -> None:
    """SplitMix64's finaliser, in place (tmp: scratch of the same shape)."""
    for shift, mult in ((30, _M1), (27, _M2), (31, None)):
        np.right_shift(z, np.uint64(shift), out=tmp)
        np.bitwise_xor(z, tmp, out=z)
        if mult is not None:
            np.multiply(z, mult, out=z)


_ROWS = 32   # images hashed at a time: the work arrays stay in cache (measured 2x faster than 1,000)


class Streams:
    """Uniform draws for a batch of images: each call returns the next `shape` draws of every
    image's own stream, as a (B, *shape) float32 array in (0, 1) with 24 random bits; each
    64-bit hash gives two draws."""

    def __init__(self, seed: int, name: str, severity: int, index):
        self.key = np.uint64(stream_key(seed, name, severity))
        self.index = np.asarray(index, dtype=np.uint64)
        self.used = 0

    def uniform(self, *shape: int) -> np.ndarray:
        n = int(np.prod(shape, dtype=np.int64))
        pairs = (n + 1) // 2
        counters = np.arange(self.used, self.used + pairs, dtype=np.uint64)
        self.used += pairs
        out = np.empty((len(self.index), pairs, 2), np.float32)
        for lo in range(0, len(self.index), _ROWS):
            z = (self.index[lo:lo + _ROWS, None] << np.uint64(32)) + counters
            with np.errstate(over="ignore"):
                z *= _GAMMA
                z += self.key
                tmp = np.empty_like(z)
                _mix(z, tmp)
            np.right_shift(z, np.uint64(40), out=tmp)
            out[lo:lo + _ROWS, :, 0] = tmp
            np.bitwise_and(z, np.uint64(0xFFFFFF), out=tmp)
            out[lo:lo + _ROWS, :, 1] = tmp
        out += 0.5
        out *= 2.0 ** -24
        return out.reshape(len(self.index), -1)[:, :n].reshape(len(self.index), *shape)

    def normal(self, *shape: int) -> torch.Tensor:
        """Standard normal draws (inverse CDF), float32 tensor (B, *shape)."""
        u = torch.from_numpy(self.uniform(*shape))
        return u.mul_(2).sub_(1).erfinv_().mul_(2 ** 0.5)

    def integers(self, low: int, high: int, *shape: int) -> np.ndarray:
        """Integers uniform in [low, high), like numpy's randint."""
        return low + np.floor(self.uniform(*shape) * (high - low)).astype(np.int64)

    def between(self, low: float, high: float, *shape: int) -> np.ndarray:
        return low + (high - low) * self.uniform(*shape).astype(np.float64)
