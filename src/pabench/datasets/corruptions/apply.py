"""`corrupt`: one corruption at one severity on a batch of uint8 images."""
from __future__ import annotations

import numpy as np
import torch

from pabench.datasets.corruptions import blur, digital, native, noise, weather
from pabench.datasets.corruptions import check_corruption, check_severity, check_size
from pabench.datasets.corruptions.rng import Streams

FUNCTIONS = {
    "gaussian_noise": noise.gaussian_noise, "shot_noise": noise.shot_noise,
    "impulse_noise": noise.impulse_noise, "speckle_noise": noise.speckle_noise,
    "defocus_blur": blur.defocus_blur, "glass_blur": blur.glass_blur,
    "motion_blur": blur.motion_blur, "zoom_blur": blur.zoom_blur,
    "gaussian_blur": blur.gaussian_blur,
    "snow": weather.snow, "frost": weather.frost, "fog": weather.fog, "spatter": weather.spatter,
    "brightness": digital.brightness, "contrast": digital.contrast,
    "saturate": digital.saturate, "elastic_transform": digital.elastic_transform,
    "pixelate": digital.pixelate, "jpeg_compression": digital.jpeg_compression,
}


def corrupt(images, name: str, severity: int, seed: int = 0, start: int = 0,
            index=None) -> np.ndarray:
    """`name` at `severity` applied to uint8 RGB images (N, H, W, 3); returns uint8 (N, H, W, 3).

    Image i draws its randomness from the stream of (seed, name, severity, index[i]), where
    index defaults to start, start + 1, ...: give each image its position in the whole dataset
    and any batching gives the same result.  As in the reference generator, the float result is
    truncated (not rounded) to uint8."""
    check_corruption(name)
    severity = check_severity(severity)
    images = np.asarray(images)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"images must be uint8 (N, H, W, 3), got {images.dtype} {images.shape}")
    check_size(name, *images.shape[1:3])
    n = len(images)
    index = np.arange(start, start + n) if index is None else np.asarray(index)
    if index.shape != (n,) or (index < 0).any():
        raise ValueError(f"index must hold {n} non-negative image positions, got shape {index.shape}")
    if n == 0:
        return images.copy()
    rs = Streams(seed, name, severity, index)
    if name in native.FUSED and native.load() is not None:     # the same bytes, in one C pass
        return native.FUSED[name](np.ascontiguousarray(images), severity, rs)
    x = torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))
    out = FUNCTIONS[name](x, severity, rs)
    out = out.clamp(0, 255).to(torch.uint8)        # truncation, like np.uint8 on the reference's floats
    return np.ascontiguousarray(out.permute(0, 2, 3, 1).numpy())
