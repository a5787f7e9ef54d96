"""CIFAR-10-C style corruptions of our own: the 15 benchmark corruptions and the 4 extras of the
reference generator (Hendrycks & Dietterich's `make_cifar_c.py`), with its CIFAR-10 parameters.

Images are uint8 (N, H, W, 3), the layout of the published CIFAR-10-C files. Work is vectorised
over a batch (torch or numpy array ops, no per-image or per-pixel Python loops), and every random
draw comes from a counter-based stream keyed by (seed, corruption, severity, image index), so an
image's result does not depend on how the images are batched or split across processes.

Two corruptions differ from the published files by construction: motion blur (the reference calls
ImageMagick; ours is ImageMagick's one-sided Gaussian line kernel written in torch) and frost (the
reference blends crops of frost photographs we may not ship; ours are procedural textures).
JPEG is our own vectorised baseline JPEG (libjpeg's tables, 4:2:0, fancy upsampling), not libjpeg.
"""
from __future__ import annotations

CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
               "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
               "elastic_transform", "pixelate", "jpeg_compression")
EXTRA_CORRUPTIONS = ("speckle_noise", "gaussian_blur", "spatter", "saturate")
ALL_CORRUPTIONS = CORRUPTIONS + EXTRA_CORRUPTIONS
SEVERITIES = (1, 2, 3, 4, 5)


def check_corruption(name: str) -> str:
    if name not in ALL_CORRUPTIONS:
        raise ValueError(f"unknown corruption {name!r}; use one of {', '.join(ALL_CORRUPTIONS)}")
    return name


# Image sizes a corruption cannot take: its JPEG blocks, its zoom (square), its filters' reach.
MULTIPLE_OF = {"jpeg_compression": 16}
SQUARE = ("zoom_blur",)
MIN_SIDE = {"glass_blur": 2, "pixelate": 2, "elastic_transform": 3}


def check_size(name: str, height: int, width: int) -> None:
    """Raise if corruption `name` cannot take images of height x width."""
    size = f"{height}x{width}"
    step = MULTIPLE_OF.get(name)
    if step and (height % step or width % step):
        raise ValueError(f"{name} needs H and W multiples of {step}, got {size} images")
    if name in SQUARE and height != width:
        raise ValueError(f"{name} needs square images, got {size}")
    side = MIN_SIDE.get(name, 1)
    if min(height, width) < side:
        raise ValueError(f"{name} needs images of at least {side}x{side} pixels, got {size}")


def check_severity(severity) -> int:
    if isinstance(severity, bool) or severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, got {severity!r}")
    return int(severity)


def __getattr__(name: str):
    """`corrupt`, imported on first use: the workflow's config check reads the names above, and
    importing apply (torch, scipy) would add seconds to every Snakemake start."""
    if name == "corrupt":
        from pabench.datasets.corruptions.apply import corrupt

        return corrupt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ALL_CORRUPTIONS", "CORRUPTIONS", "EXTRA_CORRUPTIONS", "SEVERITIES", "check_corruption",
           "check_severity", "check_size", "corrupt"]
