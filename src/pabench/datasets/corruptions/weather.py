"""Weather corruptions (reference generator's CIFAR parameters); same signature as noise.py."""
from __future__ import annotations

import numpy as np
import torch
from scipy import ndimage

from pabench.datasets.corruptions import liquid
from pabench.datasets.corruptions.blur import motion_blur_u8
from pabench.datasets.corruptions.frost import frost_sizes, frost_textures

# (mean, std, zoom, threshold, blur radius, blur sigma, blend)
SNOW = ((0.1, 0.2, 1, 0.6, 8, 3, 0.95), (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9), (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8))
FROST = ((1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45))   # (image, frost) weights
FOG = ((0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75))         # (strength, decay)
# (mean, std, blur sigma, threshold, intensity, mud?)
SPATTER = ((0.62, 0.1, 0.7, 0.7, 0.5, 0), (0.65, 0.1, 0.8, 0.7, 0.5, 0),
           (0.65, 0.3, 1, 0.69, 0.5, 0), (0.65, 0.1, 0.7, 0.69, 0.6, 1),
           (0.65, 0.1, 0.5, 0.68, 0.6, 1))


def zoom_taps(n: int, factor: float):
    """The reference's clipped_zoom along one axis of length n as linear-interpolation taps: for
    each output position, source indices lo, hi (int64, into the whole axis) and the weight f of
    hi (float64).  The centre ceil(n / factor) is zoomed to round(ch * factor) with corners
    aligned (scipy.ndimage.zoom, order 1) and the centre n kept, as blur.clipped_zoom does."""
    ch = int(np.ceil(n / factor))
    top = (n - ch) // 2
    side = int(round(ch * factor))
    trim = (side - n) // 2
    pos = (np.arange(n) + trim) * (ch - 1) / (side - 1)
    lo = np.floor(pos)
    hi = np.minimum(lo + 1, ch - 1)
    return (lo + top).astype(np.int64), (hi + top).astype(np.int64), pos - lo


def zoom_layer(layer: torch.Tensor, factor: float) -> torch.Tensor:
    """clipped_zoom of float32 layers (B, H, W) by `zoom_taps`: interpolated in float64 along the
    columns, then the rows, rounded to float32 (native.c's order)."""
    _, h, w = layer.shape
    r_lo, r_hi, fy = (torch.from_numpy(a) for a in zoom_taps(h, factor))
    c_lo, c_hi, fx = (torch.from_numpy(a) for a in zoom_taps(w, factor))
    v = layer.double()
    cols = v[:, :, c_lo] * (1 - fx) + v[:, :, c_hi] * fx
    fy = fy[:, None]
    return (cols[:, r_lo] * (1 - fy) + cols[:, r_hi] * fy).float()


def snow_angles(rs) -> np.ndarray:
    """Each image's motion-blur angle of the snow layer, drawn after its h * w layer draws."""
    return rs.between(-135, -45, 1)[:, 0]


def snow(x, severity, rs):
    mean, std, zoom, threshold, radius, sigma, blend = SNOW[severity - 1]
    x = x.float() / 255
    b, _, h, w = x.shape
    layer = zoom_layer(mean + std * rs.normal(h, w), zoom).unsqueeze(1)
    layer[layer < threshold] = 0
    layer_u8 = (layer.clamp(0, 1) * 255).floor_()      # astype(np.uint8) before ImageMagick
    layer = motion_blur_u8(layer_u8, radius, sigma, snow_angles(rs)).float() / 255
    # OpenCV's RGB2GRAY weights (float32), summed left to right as native.c does
    gray = x[:, 0:1] * 0.299 + x[:, 1:2] * 0.587 + x[:, 2:3] * 0.114
    x = blend * x + (1 - blend) * torch.maximum(x, gray * 1.5 + 0.5)
    return (x + layer + layer.flip(-2, -1)).clamp_(0, 1) * 255


def frost_draws(rs, h: int, w: int):
    """Each image's texture index and the top-left corner of its crop, (B,) int64 each (the
    reference's order: index, row, column; each within its texture's size)."""
    sizes = frost_sizes()
    pick = rs.integers(0, len(sizes), 1)[:, 0]
    # float32 bounds, as a scalar bound multiplies the float32 draws
    top = rs.integers(0, (sizes[pick, :1] - h).astype(np.float32), 1)[:, 0]
    left = rs.integers(0, (sizes[pick, 1:] - w).astype(np.float32), 1)[:, 0]
    return pick, top, left


def frost(x, severity, rs):
    """The image blended with a random 32x32 crop of one of five frost textures: procedural, or
    the reference's photographs (indices from randint(5): five of its six files) within
    `frost.photos`."""
    w_image, w_frost = FROST[severity - 1]
    textures = frost_textures()                     # (5, 3, S, S) uint8, padded
    b, _, h, w = x.shape
    pick, top, left = frost_draws(rs, h, w)
    rows = torch.from_numpy(top)[:, None] + torch.arange(h)
    cols = torch.from_numpy(left)[:, None] + torch.arange(w)
    crops = textures[torch.from_numpy(pick)[:, None, None, None], torch.arange(3)[None, :, None, None],
                     rows[:, None, :, None], cols[:, None, None, :]]
    return (w_image * x.double() + w_frost * crops.double()).clamp_(0, 255)


def plasma_fractal(rs, batch: int, size: int = 32, decay: float = 3.0) -> torch.Tensor:
    """The reference's diamond-square plasma, batched, normalised to [0, 1] per map.  Its random
    term is wibble * U(-wibble, wibble) (the square of the current wibble), kept as is."""
    m = torch.zeros(batch, size, size, dtype=torch.float64)
    step, wibble = size, 100.0

    def wibbled(a):
        return a / 4 + wibble * torch.from_numpy(rs.between(-wibble, wibble, *a.shape[1:]))

    while step >= 2:
        half = step // 2
        corners = m[:, 0::step, 0::step]
        square = corners + corners.roll(-1, 1)
        square = square + square.roll(-1, 2)
        m[:, half::step, half::step] = wibbled(square)
        centres, corners = m[:, half::step, half::step], m[:, 0::step, 0::step]
        m[:, 0::step, half::step] = wibbled(centres + centres.roll(1, 1) + corners + corners.roll(-1, 2))
        m[:, half::step, 0::step] = wibbled(centres + centres.roll(1, 2) + corners + corners.roll(-1, 1))
        step //= 2
        wibble /= decay
    flat = m.reshape(batch, -1)
    flat = flat - flat.min(1, keepdim=True).values
    return (flat / flat.max(1, keepdim=True).values).reshape(batch, size, size)


def fog_map_size(h: int, w: int) -> int:
    """The reference's plasma map size: the smallest power of 2 covering the image."""
    return 1 << (max(h, w) - 1).bit_length()


def fog(x, severity, rs):
    strength, decay = FOG[severity - 1]
    x = x.double() / 255
    b, _, h, w = x.shape
    top = x.reshape(b, -1).max(1).values.reshape(b, 1, 1, 1)
    size = fog_map_size(h, w)
    x = x + strength * plasma_fractal(rs, b, size, decay)[:, None, :h, :w]
    return (x * top / (top + strength)).clamp_(0, 1) * 255


def spatter_layer(rs, severity: int, h: int, w: int) -> np.ndarray:
    """Each image's liquid layer (B, H, W) float64: normal draws blurred as skimage's gaussian
    (scipy's gaussian_filter, which the reference calls through it), values below the threshold
    set to 0."""
    mean, std, sigma, threshold = SPATTER[severity - 1][:4]
    layer = ndimage.gaussian_filter((mean + std * rs.normal(h, w)).double().numpy(), (0, sigma, sigma),
                                    mode="nearest")
    layer[layer < threshold] = 0
    return layer


def spatter(x, severity, rs):
    """Liquid (severities 1-3) or mud (4-5) blobs where the blurred noise layer passes its
    threshold.  Liquid adds pale turquoise weighted by the layer times its embossed, equalised
    distance to the layer's Canny edges (`liquid.shading`), normalised to the image's maximum;
    mud replaces the image by brown where the blurred blob mask reaches 0.8."""
    intensity, mud = SPATTER[severity - 1][4:]
    x = x.float() / 255
    b, _, h, w = x.shape
    layer = spatter_layer(rs, severity, h, w)
    if mud:
        # float32 in, float32 between the two axes' passes (skimage keeps float32)
        m = ndimage.gaussian_filter((layer > SPATTER[severity - 1][3]).astype(np.float32),
                                    (0, intensity, intensity), mode="nearest")
        m = torch.from_numpy(m).unsqueeze(1)
        m[m < 0.8] = 0
        colour = torch.tensor([63, 42, 20]).reshape(1, 3, 1, 1) / 255
        return (x * (1 - m) + colour * m).clamp_(0, 1) * 255
    # np.uint8 of layer * 255: truncated, and taken modulo 256 above 255 (x86's cast)
    u8 = (np.floor(layer * 255).astype(np.int64) % 256).astype(np.uint8)
    m = liquid.shading(u8)
    top = m.reshape(b, -1).max(1).reshape(b, 1, 1)
    # An image without liquid divides 0 by 0 in the reference: NaN, which np.uint8 makes 0
    with np.errstate(invalid="ignore"):
        m = m / top * np.float32(intensity)
    colour = torch.tensor([175, 238, 238]).reshape(1, 3, 1, 1) / 255
    out = (x + torch.from_numpy(m).unsqueeze(1) * colour).clamp_(0, 1) * 255
    return out.nan_to_num_(0.0)
