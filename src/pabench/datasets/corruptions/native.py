"""The fused C kernels of native.c: each corruption's whole formula in one pass over a batch of
uint8 (N, H, W, 3) images, written as uint8, with the random draws made inside the loop.

`FUSED[name](images, severity, rs)` is used by `corrupt` when the library can be built here
(pabench.core.native); otherwise `corrupt` runs the numpy / PyTorch functions of noise.py,
blur.py, weather.py and digital.py, which do the same arithmetic in the same order, so both paths
give the same bytes (tests/unit/test_corruptions.py compares them).
"""
from __future__ import annotations

import ctypes
from functools import lru_cache
from pathlib import Path

import numpy as np
from scipy.special import ndtri

from pabench.core.native import compile_library
from pabench.datasets.corruptions import blur, digital, noise, weather
from pabench.datasets.corruptions.frost import frost_textures_hwc

SOURCE = Path(__file__).with_name("native.c")
# No -ffast-math and no fused multiply-adds: the fallbacks' float operations, one for one.
# -fno-trapping-math (no floating-point traps assumed) only lets GCC vectorise floor(); values
# are unchanged (the byte-equality tests cover every kernel).
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math",
         "-fPIC", "-shared")

_P, _L, _U64, _I, _F, _D = (ctypes.c_void_p, ctypes.c_long, ctypes.c_uint64, ctypes.c_int,
                            ctypes.c_float, ctypes.c_double)
_SIGNATURES = {
    "cc_noise": [_P, _P, _L, _L, _P, _U64, _U64, _I, _F],
    "cc_gaussian": [_P, _P, _L, _L, _P, _U64, _U64, _P, _P, _F, _F],
    "cc_gaussian_offsets": [_P, _P, _L, _P, _P, _F, _F],
    "cc_shot_noise": [_P, _P, _L, _L, _P, _U64, _U64, _P, _P, _L, _L, _F],
    "cc_motion_blur": [_P, _P, _L, _L, _L, _L, _P, _L, _P, _P],
    "cc_defocus": [_P, _P, _L, _L, _L, _L, _P, _L, _L],
    "cc_frost": [_P, _P, _L, _L, _L, _P, _L, _P, _P, _P, _D, _D],
    "cc_fog": [_P, _P, _L, _L, _L, _P, _L, _D],
    "cc_brightness_table": [_D, _P],
    "cc_brightness": [_P, _P, _L, _P],
    "cc_contrast": [_P, _P, _L, _L, _D],
    "cc_pixelate": [_P, _P, _L, _L, _L, _L, _L, _P, _P, _P, _P],
    "cc_jpeg": [_P, _P, _L, _L, _L, _P, _P, _P, _P],
    "cc_elastic": [_P, _P, _L, _L, _L, _P, _P, _U64, _U64, _P, _L, _D],
    "cc_snow": [_P, _P, _L, _L, _L, _P, _U64, _U64, _F, _F, _P, _P, _P, _P, _P, _P, _F, _P, _L, _P,
                _P, _F, _F],
}


@lru_cache(maxsize=None)
def load():
    """The compiled library, or None when it cannot be built here."""
    lib = compile_library(SOURCE, FLAGS)
    if lib is None:
        return None
    for name, args in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, None
    return lib


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _pointwise_noise(kind: int, params):
    def run(images, severity, rs):
        out = np.empty_like(images)
        n = images[0].size
        start = rs.take(n)
        load().cc_noise(_ptr(images), _ptr(out), len(images), n, _ptr(rs.index), int(rs.key), start,
                        kind, params[severity - 1])
        return out
    return run


@lru_cache(maxsize=None)
def gaussian_quantile_fit() -> np.ndarray:
    """Coefficients (5, 32) float32 of native.c's fast path: Phi^-1(q) as a degree-4 polynomial
    in t = 4 m - 5 on each of 24 half-octaves of q in [2^-13, 1/2) (q = m 2^e, m in [1, 2);
    segment 2 (e + 13) + (m >= 1.5)), interpolated at 64 Chebyshev nodes.  Its accuracy only
    decides how often the exact search runs: GUARD_Z bounds the error (tested)."""
    coef = np.zeros((5, 32), np.float32)
    t = np.cos(np.pi * (np.arange(64) + 0.5) / 64)
    for seg in range(24):
        m = (t + 5) / 4 + 0.5 * (seg % 2)
        cheb = np.polynomial.chebyshev.chebfit(t, ndtri(m * 2.0 ** (seg // 2 - 13)), 4)
        coef[:, seg] = np.polynomial.chebyshev.cheb2poly(cheb)
    return coef


GUARD_Z = 1e-5      # bound on the float32 polynomial's error in z (at most 2.0e-6 over every q)


@lru_cache(maxsize=None)
def gaussian_tables(severity: int):
    """(coefficients, thresholds, scale 255 c, guard) of cc_gaussian: the fast path's floor of
    s = 255 c z is trusted when s is at least `guard` from a whole number, i.e. farther than the
    polynomial's error times 255 c plus float32 rounding of s (|s| < 256: 1.5e-5)."""
    scale = 255 * noise.GAUSSIAN[severity - 1]
    return (gaussian_quantile_fit(), noise.gaussian_thresholds(severity), scale,
            scale * GUARD_Z + 2e-5)


def gaussian_noise(images, severity, rs):
    coef, thr, scale, guard = gaussian_tables(severity)
    out = np.empty_like(images)
    n = images[0].size
    start = rs.take(n)
    load().cc_gaussian(_ptr(images), _ptr(out), len(images), n, _ptr(rs.index), int(rs.key), start,
                       _ptr(coef), _ptr(thr), scale, guard)
    return out


@lru_cache(maxsize=None)
def _shot_tables(photons: int):
    """noise.poisson_tables as the kernel reads them: each CDF value as the smallest float32
    above it (the uniforms are float32, so `cdf < u` is `threshold <= u`) and the guide as int16
    (k_max < 32768)."""
    cdf, guide, k_max = noise.poisson_tables(photons)
    if k_max >= 2 ** 15:
        raise ValueError(f"shot noise at {photons} photons needs k_max {k_max} >= 32768")
    thr = cdf.astype(np.float32)
    thr = np.where(thr.astype(np.float64) <= cdf, np.nextafter(thr, np.float32(np.inf)), thr)
    return np.ascontiguousarray(thr), np.ascontiguousarray(guide, dtype=np.int16), k_max


def shot_noise(images, severity, rs):
    photons = noise.SHOT[severity - 1]
    thr, guide, k_max = _shot_tables(photons)
    out = np.empty_like(images)
    n = images[0].size
    start = rs.take(n)
    load().cc_shot_noise(_ptr(images), _ptr(out), len(images), n, _ptr(rs.index), int(rs.key), start,
                         _ptr(thr), _ptr(guide), k_max, guide.shape[1] - 1, photons)
    return out


def _motion(images, radius, sigma, angles):
    k = blur.motion_kernel(radius, sigma)
    dy, dx = blur.motion_offsets(len(k), angles)
    out = np.empty_like(images)
    b, h, w, c = images.shape
    load().cc_motion_blur(_ptr(images), _ptr(out), b, h, w, c, _ptr(_f64(k)), len(k), _ptr(dy),
                          _ptr(dx))
    return out


def motion_blur(images, severity, rs):
    radius, sigma = blur.MOTION[severity - 1]
    return _motion(images, radius, sigma, rs.between(-45, 45, 1)[:, 0])


def defocus_blur(images, severity, rs):
    k = _f64(blur.disk_kernel(*blur.DEFOCUS[severity - 1]))
    out = np.empty_like(images)
    b, h, w, c = images.shape
    load().cc_defocus(_ptr(images), _ptr(out), b, h, w, c, _ptr(k), *k.shape)
    return out


def frost(images, severity, rs):
    w_image, w_frost = weather.FROST[severity - 1]
    pick, top, left = weather.frost_draws(rs, *images.shape[1:3])
    textures = frost_textures_hwc()   # (T, side, side, 3), interleaved like the images
    out = np.empty_like(images)
    b, h, w, _ = images.shape
    load().cc_frost(_ptr(images), _ptr(out), b, h, w, _ptr(textures), textures.shape[1],
                    _ptr(_i64(pick)), _ptr(_i64(top)), _ptr(_i64(left)), w_image, w_frost)
    return out


def fog(images, severity, rs):
    strength, decay = weather.FOG[severity - 1]
    b, h, w, _ = images.shape
    size = weather.fog_map_size(h, w)
    plasma = np.ascontiguousarray(weather.plasma_fractal(rs, b, size, decay).numpy())
    out = np.empty_like(images)
    load().cc_fog(_ptr(images), _ptr(out), b, h, w, _ptr(plasma), size, strength)
    return out


@lru_cache(maxsize=None)
def _brightness_table(severity: int) -> np.ndarray:
    """Every output byte of brightness at this severity by (pixel maximum, byte): 64 KiB."""
    table = np.zeros(256 * 256, np.uint8)
    load().cc_brightness_table(digital.BRIGHTNESS[severity - 1], _ptr(table))
    return table


def brightness(images, severity, rs):
    out = np.empty_like(images)
    load().cc_brightness(_ptr(images), _ptr(out), images.size // 3, _ptr(_brightness_table(severity)))
    return out


def contrast(images, severity, rs):
    out = np.empty_like(images)
    b, h, w, _ = images.shape
    load().cc_contrast(_ptr(images), _ptr(out), b, h * w, digital.CONTRAST[severity - 1])
    return out


@lru_cache(maxsize=None)
def _box_weights(n_in: int, n_out: int) -> np.ndarray:
    return _f64(digital.box_weights(n_in, n_out))


def pixelate(images, severity, rs):
    c = digital.PIXELATE[severity - 1]
    b, h, w, _ = images.shape
    hs, ws = int(h * c), int(w * c)
    weights = [_box_weights(n_in, n_out) for n_in, n_out in ((w, ws), (h, hs), (ws, w), (hs, h))]
    out = np.empty_like(images)
    load().cc_pixelate(_ptr(images), _ptr(out), b, h, w, hs, ws, *map(_ptr, weights))
    return out


@lru_cache(maxsize=None)
def _jpeg_tables(quality: int):
    d = _f64(digital.DCT)
    return (_f64(digital.quant_table(digital.LUMA, quality)),
            _f64(digital.quant_table(digital.CHROMA, quality)), d, _f64(d.T))


def jpeg_compression(images, severity, rs):
    tables = _jpeg_tables(digital.JPEG[severity - 1])
    out = np.empty_like(images)
    b, h, w, _ = images.shape
    load().cc_jpeg(_ptr(images), _ptr(out), b, h, w, *map(_ptr, tables))
    return out


def elastic_transform(images, severity, rs):
    alpha, sigma, affine = digital.ELASTIC[severity - 1]
    b, h, w, _ = images.shape
    inverse = digital.elastic_affine(rs, b, h, w, affine)
    start = rs.take(2 * h * w)                  # the displacement fields: dx, then dy
    k = _f64(digital.elastic_kernel(sigma))
    out = np.empty_like(images)
    load().cc_elastic(_ptr(images), _ptr(out), b, h, w, _ptr(inverse), _ptr(rs.index), int(rs.key),
                      start, _ptr(k), len(k), alpha)
    return out


def snow(images, severity, rs):
    mean, std, zoom, threshold, radius, sigma, blend = weather.SNOW[severity - 1]
    b, h, w, _ = images.shape
    start = rs.take(h * w)                      # the layer's normal draws
    k = _f64(blur.motion_kernel(radius, sigma))
    dy, dx = blur.motion_offsets(len(k), weather.snow_angles(rs))
    zoom_rows, zoom_cols = weather.zoom_taps(h, zoom), weather.zoom_taps(w, zoom)  # (lo, hi, f)
    dy, dx = _i64(dy), _i64(dx)
    out = np.empty_like(images)
    load().cc_snow(_ptr(images), _ptr(out), b, h, w, _ptr(rs.index), int(rs.key), start, mean, std,
                   *map(_ptr, zoom_rows), *map(_ptr, zoom_cols), threshold, _ptr(k), len(k), _ptr(dy),
                   _ptr(dx), blend, 1 - blend)
    return out


FUSED = {
    "gaussian_noise": gaussian_noise,
    "speckle_noise": _pointwise_noise(1, noise.SPECKLE),
    "impulse_noise": _pointwise_noise(2, noise.IMPULSE),
    "shot_noise": shot_noise,
    "motion_blur": motion_blur,
    "defocus_blur": defocus_blur,
    "frost": frost,
    "fog": fog,
    "brightness": brightness,
    "contrast": contrast,
    "pixelate": pixelate,
    "jpeg_compression": jpeg_compression,
    "elastic_transform": elastic_transform,
    "snow": snow,
}
