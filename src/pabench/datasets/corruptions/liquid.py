"""The OpenCV steps of the reference's liquid spatter, batched over layers (B, H, W) in numpy:
Canny edges, the 5x5 chamfer distance, box blurs, histogram equalisation and the emboss kernel,
each with OpenCV's arithmetic (integer gradients, float32 distances, the 8-bit box filter's
fixed-point division, a float32 equalisation table), so that the bytes are OpenCV's."""
from __future__ import annotations

import numpy as np

# Canny's direction test in 15-bit fixed point: tan(22.5 deg) * 2^15, rounded
_TG22, _SHIFT = 13573, 15
# distanceTransform(DIST_L2, 5): steps 1, 1.4 and 2.1969 as float32, exactly, in units of 2^-23
_A, _B, _C, _UNIT = 8388608, 11744051, 18428932, 2.0 ** -23
_FAR = np.int64(1) << 50
EMBOSS = np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]])


def _shifted(p: np.ndarray, di: int, dj: int, h: int, w: int) -> np.ndarray:
    """The (h, w) window of a padded-by-1 array p moved by (di, dj)."""
    return p[:, 1 + di:1 + di + h, 1 + dj:1 + dj + w]


def _pad101(x: np.ndarray) -> np.ndarray:
    """One pixel of OpenCV's default border (BORDER_REFLECT_101: c b | a b c | b a)."""
    return np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="reflect")


def correlate3(x: np.ndarray, kernel) -> np.ndarray:
    """3x3 correlation (filter2D's orientation) with reflect-101 borders, in x's dtype."""
    h, w = x.shape[1:]
    p = _pad101(x)
    k = np.asarray(kernel).tolist()                 # Python numbers: x's dtype is kept
    return sum(k[i][j] * _shifted(p, i - 1, j - 1, h, w) for i in range(3) for j in range(3) if k[i][j])


def canny(u8: np.ndarray, low: int, high: int) -> np.ndarray:
    """cv2.Canny(u8, low, high) (aperture 3, L1 gradient) of each image: bool (B, H, W).
    Sobel gradients with replicated borders; non-maximum suppression along the gradient's
    direction in OpenCV's three sectors (of two equal neighbours along a row or column the first
    is kept; diagonals need a strict maximum); hysteresis over 8-connected candidates above
    `low` from those above `high`."""
    b, h, w = u8.shape
    p = np.pad(u8.astype(np.int32), ((0, 0), (1, 1), (1, 1)), mode="edge")
    s = lambda di, dj: _shifted(p, di, dj, h, w)  # noqa: E731
    dx = s(-1, 1) + 2 * s(0, 1) + s(1, 1) - s(-1, -1) - 2 * s(0, -1) - s(1, -1)
    dy = s(1, -1) + 2 * s(1, 0) + s(1, 1) - s(-1, -1) - 2 * s(-1, 0) - s(-1, 1)
    mag = np.abs(dx) + np.abs(dy)
    mp = np.pad(mag, ((0, 0), (1, 1), (1, 1)))      # magnitudes outside the image are 0
    m = lambda di, dj: _shifted(mp, di, dj, h, w)  # noqa: E731
    ax, ay = np.abs(dx), np.abs(dy) << _SHIFT
    tg22 = ax * _TG22
    along_row = ay < tg22
    along_col = ay > tg22 + (ax << (_SHIFT + 1))
    same_sign = (dx ^ dy) >= 0
    peak = np.where(along_row, (mag > m(0, -1)) & (mag >= m(0, 1)),
                    np.where(along_col, (mag > m(-1, 0)) & (mag >= m(1, 0)),
                             np.where(same_sign, (mag > m(-1, -1)) & (mag > m(1, 1)),
                                      (mag > m(-1, 1)) & (mag > m(1, -1)))))
    candidate = peak & (mag > low)
    edges = candidate & (mag > high)
    while True:
        e = np.pad(edges, ((0, 0), (1, 1), (1, 1)))
        grown = candidate & np.logical_or.reduce([_shifted(e, di, dj, h, w)
                                                  for di in (-1, 0, 1) for dj in (-1, 0, 1)])
        if (grown == edges).all():
            return edges
        edges = grown


def chamfer_distance(zero: np.ndarray) -> np.ndarray:
    """cv2.distanceTransform(src, DIST_L2, 5) where src is 0 exactly at `zero` (bool (B, H, W)):
    its two raster passes over the 5x5 chamfer mask (float32 steps 1, 1.4, 2.1969; borders
    far), summed exactly in integers and rounded once to float32 (OpenCV adds them in float32
    through IPP, in 16-bit fixed point without).
    Within a row the step-1 recursion d[j] = min(c[j], d[j-1] + 1) is a running minimum of
    c[k] - k, plus j."""
    b, h, w = zero.shape
    d = np.where(zero, 0, _FAR).astype(np.int64)
    d = np.pad(d, ((0, 0), (2, 2), (2, 2)), constant_values=_FAR)
    ramp = np.arange(w, dtype=np.int64) * _A
    for rows, step in ((range(2, h + 2), 1), (range(h + 1, 1, -1), -1)):
        for i in rows:
            up, up2 = d[:, i - step], d[:, i - 2 * step]
            c = np.minimum.reduce([d[:, i, 2:-2], up[:, 2:-2] + _A, up[:, 1:-3] + _B, up[:, 3:-1] + _B,
                                   up[:, :-4] + _C, up[:, 4:] + _C, up2[:, 1:-3] + _C, up2[:, 3:-1] + _C])
            if step == 1:
                d[:, i, 2:-2] = np.minimum.accumulate(c - ramp, axis=1) + ramp
            else:
                d[:, i, 2:-2] = (np.minimum.accumulate((c + ramp)[:, ::-1], axis=1)[:, ::-1] - ramp)
    return (d[:, 2:-2, 2:-2] * _UNIT).astype(np.float32)


def box3_float(x: np.ndarray) -> np.ndarray:
    """cv2.blur(x, (3, 3)) of float32 images: sums in double, times 1/9, rounded to float32."""
    return (correlate3(x.astype(np.float64), np.ones((3, 3))) * (1.0 / 9)).astype(np.float32)


def box3_u8(x: np.ndarray) -> np.ndarray:
    """cv2.blur(x, (3, 3)) of uint8 images: OpenCV's fixed-point division of the 3x3 sum by 9,
    (sum + 4) * 7282 >> 16 (the nearest integer to sum / 9 for every 3x3 sum of bytes)."""
    total = correlate3(x.astype(np.int32), np.ones((3, 3), np.int32))
    return ((total + 4) * 7282 >> 16).astype(np.uint8)


def equalize_hist(x: np.ndarray) -> np.ndarray:
    """cv2.equalizeHist of each uint8 image: level v goes to round(255 * #(min < pixel <= v) /
    #(pixel > min)) in float32 (the minimum to 0); an image of one level is kept as it is."""
    b = len(x)
    flat = x.reshape(b, -1)
    hist = np.bincount((flat + 256 * np.arange(b)[:, None]).ravel(), minlength=256 * b).reshape(b, 256)
    low = flat.min(1)
    below = hist[np.arange(b), low]                  # pixels at the minimum level
    rest = flat.shape[1] - below
    scale = np.float32(255) / np.maximum(rest, 1).astype(np.float32)
    above = np.cumsum(hist, 1) - below[:, None]       # pixels in (min, v] for v >= min
    lut = np.rint(above.astype(np.float32) * scale[:, None]).clip(0, 255).astype(np.uint8)
    lut[rest == 0] = np.arange(256, dtype=np.uint8)  # one level: unchanged
    return np.take_along_axis(lut, flat.astype(np.int64), 1).reshape(x.shape)


def shading(u8: np.ndarray) -> np.ndarray:
    """The reference's liquid weight before normalisation, u8 * dist (float32 (B, H, W)) for the
    liquid layer as bytes: distance to its Canny edges (50, 150), cut at 20, box-blurred to
    bytes, equalised, embossed (clipped to bytes) and box-blurred again."""
    dist = np.minimum(chamfer_distance(canny(u8, 50, 150)), np.float32(20))
    dist = equalize_hist(box3_float(dist).astype(np.uint8))
    dist = correlate3(dist.astype(np.int32), EMBOSS).clip(0, 255).astype(np.uint8)
    return u8.astype(np.float32) * box3_u8(dist).astype(np.float32)
