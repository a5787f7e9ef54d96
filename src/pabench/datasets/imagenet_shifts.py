"""ImageNet and its variants for OODRobustBench's ImageNet L-inf setup (paper scale).

Every set is selected by one of the authors' id lists (shipped in image_ids/, checked against
its SHA-256; pabench.datasets.cifar_shifts.image_ids), in the list's order, from a folder the
user gives in the published layout:
- the ID test subset (5,000 ids): an ImageNet validation folder, `<wnid>/ILSVRC2012_val_<k>.JPEG`;
- ImageNet-C: the published folder, `<corruption>/<severity>/<wnid>/<file>` (its files carry the
  validation images' names, so that each pairs with its original);
- the natural shifts ImageNet-V2 (matched frequency, folders named by class index), -A, -R,
  ObjectNet (wnid folders; ObjectNet's of the classes it shares with ImageNet) and, as an option
  outside the paper, ImageNet-Sketch.  ImageNet-R alone is downloaded where no folder is given
  (cifar_shifts.download_imagenet_r, MD5-checked); the others need their folder (ObjectNet and
  ImageNet-Sketch ship under licences or from hosts a downloader cannot check).
Labels are ImageNet's class indices (the wnid's position among the 1000 sorted wnids, or the
folder's number for ImageNet-V2), for the models' 1000 logits, as the authors' loader maps them.
Images: shorter side to `resize`, central `image_size` crop, uint8 (N, 3, S, S).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np

from pabench.attacks.datasets import IMAGENET_CLASSES, load_image
from pabench.datasets.cifar_shifts import download_imagenet_r, image_ids

# natural shift -> its id list
NATURAL = {"imagenet-v2": "imagenet-v2", "imagenet-a": "imagenet-a", "imagenet-r": "imagenet-r",
           "objectnet": "objectnet", "imagenet-s": "imagenet-s"}
ID_LIST = "imagenet_test"
DOWNLOADS = {"imagenet-r": download_imagenet_r}   # the variants downloaded (checksummed) without a folder


@lru_cache(maxsize=1)
def wnids() -> tuple[str, ...]:
    """ImageNet's 1000 WordNet ids in class-index order (timm's list, sorted)."""
    from importlib.resources import files

    names = tuple((files("timm.data") / "_info" / "imagenet_synsets.txt").read_text().split())
    if len(names) != IMAGENET_CLASSES or list(names) != sorted(names):
        raise RuntimeError("timm's imagenet_synsets.txt is not ImageNet's 1000 sorted wnids")
    return names


def label(class_folder: str) -> int:
    """ImageNet's class index of an id's folder: a wnid, or a class index (ImageNet-V2)."""
    if class_folder.isdigit() and int(class_folder) < IMAGENET_CLASSES:
        return int(class_folder)
    try:
        return wnids().index(class_folder)
    except ValueError:
        raise ValueError(f"{class_folder!r} is neither an ImageNet wnid nor a class index") from None


def listed(folder, ids, image_size: int = 224, resize: int = 256):
    """The images of `ids` (relative paths) under `folder` and their labels; missing files are
    one error naming how many and the first few."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    paths = [folder / i for i in ids]
    missing = [i for i, p in zip(ids, paths) if not p.is_file()]
    if missing:
        raise ValueError(f"{folder}: {len(missing)} of the {len(ids)} listed images are missing, "
                         f"e.g. {', '.join(missing[:3])}")
    x = np.empty((len(ids), 3, image_size, image_size), np.uint8)
    for k, p in enumerate(paths):
        x[k] = load_image(p, image_size, resize)
    return x, np.array([label(i.split("/")[0]) for i in ids], dtype=np.int64)


def _first(name: str, n: int | None) -> tuple[str, ...]:
    if n is not None and n < 1:
        raise ValueError(f"n must be positive, got {n}")
    return image_ids(name)[:n]


def load_test(folder, n: int | None = None, image_size: int = 224, resize: int = 256):
    """The ID test subset: the first `n` (None: all 5,000) ids of the authors' list."""
    return listed(folder, _first(ID_LIST, n), image_size, resize)


def load_corruption(c_folder, corruption: str, severity: int, ids, image_size: int = 224,
                    resize: int = 256):
    """ImageNet-C's `corruption` at `severity` of the validation images `ids` (its files are
    224 x 224 central crops already: resized only where another size is asked for)."""
    return listed(Path(c_folder) / corruption / str(int(severity)), ids, image_size, resize)


def load_natural(name: str, folder=None, root=None, n: int | None = None, image_size: int = 224,
                 resize: int = 256):
    """One natural shift: the first `n` (None: all) ids of its list, from `folder`, or (ImageNet-R
    only) downloaded into `root`."""
    if name not in NATURAL:
        raise ValueError(f"unknown ImageNet natural shift {name!r} (known: {', '.join(NATURAL)})")
    if folder is None:
        if name not in DOWNLOADS:
            raise ValueError(f"{name}: no folder given (oodrb.natural_folders.{name}) and no "
                             "checksummed download exists for it")
        folder = DOWNLOADS[name](root)
    return listed(folder, _first(NATURAL[name], n), image_size, resize)
