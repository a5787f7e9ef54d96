"""Fashion-MNIST (Xiao et al. 2017): 60,000 training and 10,000 test images, 28x28 grey, 10 classes.

Sources (`load(..., source=)`):
- "debian": the Debian package `dataset-fashion-mnist`, which installs the four IDX .gz files in
  /usr/share/datasets/fashion-mnist.  Debian recompressed them, so the .gz files differ from
  upstream's; their decompressed content is checked against `RAW_MD5` instead.
- "root": a folder (default data/fashion-mnist) with the upstream .gz files, downloaded there
  when missing and `download` is true; each .gz is checked against upstream's MD5 (`GZ_MD5`).
- "auto": "debian" when that folder holds the split's files, otherwise "root".
"""
from __future__ import annotations

import gzip
import hashlib
import logging
from pathlib import Path

import numpy as np

from pabench.core.download import download_file
from pabench.core.io import file_digest
from pabench.datasets.mnist import read_idx

log = logging.getLogger("pabench.datasets")

CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
           "Bag", "Ankle boot")
SPLITS = ("train", "test")
SOURCES = ("auto", "debian", "root")
FILES = {  # split -> (images, labels)
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
BASE_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
DEFAULT_ROOT = Path("data/fashion-mnist")
# Upstream's MD5 of the published .gz files (README of zalandoresearch/fashion-mnist).
GZ_MD5 = {
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
# MD5 of the decompressed files, keyed by the .gz name; measured on Debian's
# dataset-fashion-mnist 0.0~git20200523.55506a9-1 (the same values other projects list for
# upstream's files, so Debian changed the compression only).
RAW_MD5 = {
    "train-images-idx3-ubyte.gz": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte.gz": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte.gz": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte.gz": "15d484375f8d13e6eb1aabb0c3f46965",
}
_CHUNK = 1 << 20


def _check(where, got: str, expected: str, what: str = "md5", note: str = "") -> None:
    if got != expected:
        raise ValueError(f"{where}: checksum mismatch ({what} {got}, expected {expected}){note}")


def _raw_md5(path: Path) -> str:
    h = hashlib.md5()
    try:
        with gzip.open(path, "rb") as fh:
            for block in iter(lambda: fh.read(_CHUNK), b""):
                h.update(block)
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: cannot be decompressed ({err})") from None
    return h.hexdigest()


def download_fashion_mnist(root=DEFAULT_ROOT, splits=SPLITS, base_url: str = BASE_URL,
                           md5=None) -> Path:
    """Put the verified .gz files of `splits` into `root`; returns `root`.  Files already there
    whose MD5 is right are kept, others are (re)downloaded from `base_url` + name
    (pabench.core.download: resumed, MD5-checked before it is kept).  `md5` maps file names to
    expected digests (default `GZ_MD5`)."""
    root, md5 = Path(root), {**GZ_MD5, **(md5 or {})}
    for split in splits:
        _check_split(split)
        for name in FILES[split]:
            path = root / name
            if path.is_file():
                if file_digest(path, "md5") == md5[name]:
                    continue
                log.warning("%s: checksum mismatch, downloading it again", path)
                path.unlink()
            download_file(base_url.rstrip("/") + "/" + name, path, md5[name])
    return root


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown Fashion-MNIST split {split!r} (use one of {SPLITS})")


def _read_split(folder: Path, split: str):
    image_file, label_file = (folder / name for name in FILES[split])
    images, labels = read_idx(image_file), read_idx(label_file)
    if images.ndim != 3 or images.shape[1:] != (28, 28):
        raise ValueError(f"{image_file}: expected (N, 28, 28) images, found {images.shape}")
    if labels.shape != (len(images),):
        raise ValueError(f"{label_file}: expected {len(images)} labels, found shape {labels.shape}")
    if labels.size and labels.max() >= len(CLASSES):
        raise ValueError(f"{label_file}: labels outside 0..{len(CLASSES) - 1}")
    # read_idx returns a read-only view of the decompressed bytes; callers may want to edit.
    return np.array(images), labels.astype(np.int64)


def _has_split(folder: Path, split: str) -> bool:
    return all((folder / name).is_file() for name in FILES[split])


def load(split: str, source: str = "auto", root=None, download: bool = True, *,
         base_url: str = BASE_URL, md5=None, debian_dir=DEBIAN_DIR):
    """(images uint8 (N, 28, 28), labels int64 (N,)) of `split` ("train" or "test").

    `root` (default data/fashion-mnist) and `download`, `base_url`, `md5` (expected .gz digests,
    default `GZ_MD5`) apply to the "root" source; `debian_dir` is where "debian" looks."""
    _check_split(split)
    if source not in SOURCES:
        raise ValueError(f"unknown Fashion-MNIST source {source!r} (use one of {SOURCES})")
    debian_dir = Path(debian_dir)
    if source == "debian" or (source == "auto" and _has_split(debian_dir, split)):
        for name in FILES[split]:
            path = debian_dir / name
            if not path.is_file():
                raise FileNotFoundError(f"{path}: missing (apt-get install dataset-fashion-mnist)")
            _check(path, _raw_md5(path), RAW_MD5[name], "md5 of the decompressed content")
        return _read_split(debian_dir, split)
    folder = Path(root if root is not None else DEFAULT_ROOT)
    if download:
        download_fashion_mnist(folder, (split,), base_url=base_url, md5=md5)
    else:
        expected = {**GZ_MD5, **(md5 or {})}
        for name in FILES[split]:
            path = folder / name
            if not path.is_file():
                raise FileNotFoundError(f"{path}: missing; use download=True, or install Debian's "
                                        "dataset-fashion-mnist and source 'debian'")
            _check(path, file_digest(path, "md5"), expected[name],
                   note="; delete it and download again")
    return _read_split(folder, split)
