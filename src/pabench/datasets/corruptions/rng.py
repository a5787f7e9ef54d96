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


# Hashes computed at a time: 32 images of 3,072 draws, whose work arrays stay in cache (measured
# 2x faster than 1,000 such images at once).  Sized in hashes, not images: a few draws per image
# (frost's crop, a blur's angle) then take one pass for the whole batch, not one per 32 images.
_CHUNK = 32 * 1536


class Streams:
    """Uniform draws for a batch of images: each call returns the next `shape` draws of every
    image's own stream, as a (B, *shape) float32 array in (0, 1) with 24 random bits (or the
    bits themselves); each 64-bit hash gives two draws."""

    def __init__(self, seed: int, name: str, severity: int, index):
        self.key = np.uint64(stream_key(seed, name, severity))
        self.index = np.ascontiguousarray(index, dtype=np.uint64)
        self.used = 0

    def bits(self, *shape: int) -> np.ndarray:
        """The next `shape` draws of every image as their 24 random bits: uint32 (B, *shape)
        in [0, 2^24); `uniform` returns (bits + 0.5) 2^-24 of the same draws."""
        n = int(np.prod(shape, dtype=np.int64))
        pairs = (n + 1) // 2
        counters = np.arange(self.used, self.used + pairs, dtype=np.uint64)
        self.used += pairs
        out = np.empty((len(self.index), pairs, 2), np.uint32)
        rows = max(1, _CHUNK // max(pairs, 1))
        for lo in range(0, len(self.index), rows):
            z = (self.index[lo:lo + rows, None] << np.uint64(32)) + counters
            with np.errstate(over="ignore"):
                z *= _GAMMA
                z += self.key
                tmp = np.empty_like(z)
                _mix(z, tmp)
            np.right_shift(z, np.uint64(40), out=tmp)
            out[lo:lo + rows, :, 0] = tmp
            np.bitwise_and(z, np.uint64(0xFFFFFF), out=tmp)
            out[lo:lo + rows, :, 1] = tmp
        return out.reshape(len(self.index), -1)[:, :n].reshape(len(self.index), *shape)

    def uniform(self, *shape: int) -> np.ndarray:
        """The next `shape` draws as float32 (B, *shape) in (0, 1), 24 random bits each."""
        out = self.bits(*shape).astype(np.float32)
        out += 0.5
        out *= 2.0 ** -24
        return out

    def take(self, n: int) -> int:
        """Skip the next n draws of every image and return the first pair counter they had: a
        native kernel given it draws exactly what `uniform(n)` would have returned."""
        start = self.used
        self.used += (n + 1) // 2
        return start

    def normal(self, *shape: int) -> torch.Tensor:
        """Standard normal draws (inverse CDF), float32 tensor (B, *shape)."""
        return torch.from_numpy(normal_from_uniform(self.uniform(*shape)))

    def integers(self, low: int, high: int, *shape: int) -> np.ndarray:
        """Integers uniform in [low, high), like numpy's randint."""
        return low + np.floor(self.uniform(*shape) * (high - low)).astype(np.int64)

    def between(self, low: float, high: float, *shape: int) -> np.ndarray:
        return low + (high - low) * self.uniform(*shape).astype(np.float64)


# The inverse normal CDF in float32 operations that native.c repeats one for one (same order, no
# fused multiply-adds), so that the C kernels and this fallback draw the same bytes.
_F = np.float32


def _log(a: np.ndarray) -> np.ndarray:
    """log of positive normal float32 values: exponent * ln 2 + 2 atanh((m - 1) / (m + 1)) of
    the mantissa m in [sqrt(1/2), sqrt(2)], an odd series to s^9 (error < 1e-8 there)."""
    bits = a.view(np.uint32)
    e = ((bits >> np.uint32(23)).astype(np.int32) - 127).astype(np.float32)
    m = ((bits & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32)
    big = m > _F(1.41421356)
    m = np.where(big, m * _F(0.5), m)
    e = np.where(big, e + _F(1), e)
    s = (m - _F(1)) / (m + _F(1))
    s2 = s * s
    poly = _F(0.142857143) + s2 * _F(0.111111111)
    for c in (0.2, 0.333333333, 1.0):
        poly = _F(c) + s2 * poly
    return e * _F(0.693147181) + (_F(2) * s) * poly


_CENTRE = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
           -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


def _horner(coefs, t):
    p = np.full_like(t, _F(coefs[0]))
    for c in coefs[1:]:
        p = _F(c) + p * t
    return p


def normal_from_uniform(u: np.ndarray) -> np.ndarray:
    """sqrt(2) erfinv(2u - 1) for float32 u in (0, 1), with Giles' single-precision erfinv
    ("Approximating the erfinv function", GPU Computing Gems, 2011; relative error < 4e-7)."""
    u = np.asarray(u, np.float32)
    x = _F(2) * u - _F(1)
    w = -_log((_F(1) - x) * (_F(1) + x))
    p = np.where(w < _F(5), _horner(_CENTRE, w - _F(2.5)), _horner(_TAIL, np.sqrt(w) - _F(3)))
    return (p * x) * _F(1.41421356)
