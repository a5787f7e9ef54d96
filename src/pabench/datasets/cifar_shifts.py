"""The dataset shifts OODRobustBench evaluates CIFAR-10 models on, and ImageNet-variant folders.
Every loader returns images uint8 (N, 3, H, W), C-contiguous, and labels int64 (N,).

- CIFAR-10-C: `CIFAR-10-C.tar` (Zenodo record 2535967) with `CIFAR-10-C/<corruption>.npy` (50,000
  x 32 x 32 x 3 uint8, severities 1..5 in blocks of 10,000) and `labels.npy`; our own generator
  writes the same layout, read by the same `load_cifar10c`.
- CIFAR-10.1 v6: `cifar10.1_v6_data.npy` + `_labels.npy` (github.com/modestyachts/CIFAR-10.1).
- CIFAR-10.2: `cifar102_test.npz`, keys `images`, `labels` (github.com/modestyachts/cifar-10.2).
- CINIC-10: `CINIC-10.tar.gz` (Edinburgh DataShare); the first 10,000 images of OODRobustBench's
  id list of its ImageNet-derived test images (`image_ids/`, shipped with the package).
- CIFAR-10-R: the ImageNet-R (`imagenet-r.tar`) renditions of 8 CIFAR-10 classes, at 32x32: the
  6,837 images of OODRobustBench's id list, in its order.
- The reference generator's frost photographs (GitHub hendrycks/robustness), for our generator.
- ImageNet-V2, -A, -R, -Sketch, -C: user-given folders in ImageFolder layout.

Downloads go through `pabench.core.download` (`file://` URLs work): the MD5 or SHA-256 is
checked before a file is kept or an archive is unpacked, an interrupted download resumes, a wrong
checksum keeps nothing, and jobs fetching the same file wait for each other.
"""
from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path

import numpy as np

from pabench.attacks.datasets import IMAGE_EXTENSIONS, load_image
from pabench.core.download import download_archive, download_file, verify_file
from pabench.core.io import load_npz
from pabench.datasets.corruptions import check_corruption, check_severity

log = logging.getLogger("pabench.datasets")

CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                   "truck")

# Checksums as published (CIFAR-10-C: Zenodo's MD5) or as pinned in public loaders (CIFAR-10.1,
# CINIC-10, ImageNet-R: several agreeing; CIFAR-10.2: one project, for the repository's commit
# 521467a).  Each downloader takes its checksum as an argument too.
CIFAR10C_URL = "https://zenodo.org/record/2535967/files/CIFAR-10-C.tar"
CIFAR10C_MD5 = "56bf5dcef84df0e2308c6dcbcbbd8499"
CIFAR101_URLS = {
    "data": "https://github.com/modestyachts/CIFAR-10.1/raw/master/datasets/cifar10.1_v6_data.npy",
    "labels": "https://github.com/modestyachts/CIFAR-10.1/raw/master/datasets/"
              "cifar10.1_v6_labels.npy",
}
CIFAR101_MD5 = {"data": "4fcae82cb1326aec9ed1dc1fc62345b8",
                "labels": "09a97fb7c430502fcbd69d95093a3f85"}
CIFAR102_URL = "https://github.com/modestyachts/cifar-10.2/raw/master/cifar102_test.npz"
CIFAR102_SHA256 = "e4fd6462bd5141ed293acd52ea570952f65d1bfd4ec9b068f87742f75a7a632e"
CINIC10_URL = "https://datashare.ed.ac.uk/bitstream/handle/10283/3192/CINIC-10.tar.gz"
CINIC10_MD5 = "6ee4d0c996905fe93221de577967a372"
IMAGENET_R_URL = "https://people.eecs.berkeley.edu/~hendrycks/imagenet-r.tar"
IMAGENET_R_MD5 = "a61312130a589d0ca1a8fca1f2bd3337"

# The reference CIFAR-10-C generator's frost photographs (make_cifar_c.py draws one of the first
# five with randint(5), so frost6.jpg is never used), at a pinned commit of its repository.
FROST_URL = ("https://raw.githubusercontent.com/hendrycks/robustness/"
             "8190fe329f5f072a06e3a2aea02bb5dda69aed9f/ImageNet-C/create_c/{name}")
FROST_SHA256 = {
    "frost1.png": "ff9f907860bd7a835d459e32f9d588062b7f61ee267343cc7222b56753a14755",
    "frost2.png": "fe211a89b336999c207a852ce05818d4545d0b57c5beadd824b4cc9d9a9b6137",
    "frost3.png": "2d0d50b4a9bb213f38b024ef7768731bb83cc08d2f26b5766bbc167cdfa0e504",
    "frost4.jpg": "3f8b91ca1a9fa7167b09e773da53f5ae60d0a1fd88f02a783f6e328a72887f6e",
    "frost5.jpg": "5fc6a19df4a429ba68abdcc8f8a4278d4c9f81c9ccafd2c92ab0c8cf8992ebd2",
}

# OODRobustBench's id lists (its repository at commit 1be449c, datasets/image_ids/, MIT licence),
# shipped in image_ids/ beside this file and checked against these SHA-256 sums when read.
IMAGE_IDS = Path(__file__).parent / "image_ids"
IMAGE_ID_SHA256 = {
    "CINIC-10": "d2c25ddc6efb258a6d3226b313b2e0efeea817d7547b30636ac1d1bcd0b3bebf",
    "CIFAR10-R": "fbc13ec219472445b363911b56a91f65707b14d255f27856912e615a3aa45af1",
    # the ImageNet L-inf setup's (pabench.datasets.imagenet_shifts)
    "imagenet_test": "d4121626d07722a0126c35b1563042e46a546f1a05ce705f2cdc635896d58574",
    "imagenet-v2": "5d48ebe8e2f358d02d9b8fd35a2780f56f1aa418ecad5b68d2f49f3d966c2a69",
    "imagenet-a": "edddb0505f0ca51b7797d95b5985a21bb8eac29da9eea74f4954dec28de81055",
    "imagenet-r": "4d5118b997632cff93f0016630d6b2a81bd8f53053131e8364a268bf029b6700",
    "objectnet": "0db497afc4d8ccf410e5005386126cf9ad49dd2ec75d8f458ac9ec39f02555f0",
    "imagenet-s": "b3d1aa18204b86dfc21f484dd10dde566108536a32bbbbfce84cd7fb3d3e20d7",
}


# ---------------------------------------------------------------------------------------------
# Downloads (pabench.core.download: resumed, checked, locked)

def download_cifar10c(root, url: str = CIFAR10C_URL, md5: str = CIFAR10C_MD5) -> Path:
    """CIFAR-10-C under `root`; returns the folder with `<corruption>.npy` and `labels.npy`."""
    return download_archive(root, url, md5, "CIFAR-10-C", "labels.npy")


def download_cifar101(root, urls: dict = CIFAR101_URLS, md5: dict = CIFAR101_MD5) -> Path:
    """The two CIFAR-10.1 v6 files in `root`/cifar-10.1; returns that folder."""
    folder = Path(root) / "cifar-10.1"
    for part in ("data", "labels"):
        download_file(urls[part], folder / f"cifar10.1_v6_{part}.npy", md5[part])
    return folder


def download_cifar102(root, url: str = CIFAR102_URL, sha256: str = CIFAR102_SHA256) -> Path:
    """The CIFAR-10.2 test file in `root`/cifar-10.2; returns that folder."""
    folder = Path(root) / "cifar-10.2"
    download_file(url, folder / "cifar102_test.npz", sha256)
    return folder


def download_cinic10(root, url: str = CINIC10_URL, md5: str = CINIC10_MD5) -> Path:
    """CINIC-10 as `root`/CINIC-10 (with train/, valid/, test/); returns that folder."""
    return download_archive(root, url, md5, "CINIC-10", "test")


def download_imagenet_r(root, url: str = IMAGENET_R_URL, md5: str = IMAGENET_R_MD5) -> Path:
    """ImageNet-R as `root`/imagenet-r (one folder per WordNet id); returns that folder."""
    # The top folder is found by one of its class folders (tabby cat, also a CIFAR-10-R class).
    return download_archive(root, url, md5, "imagenet-r", "n02123045")


def download_frost_photos(root, url: str | None = None, sha256: dict | None = None) -> Path:
    """The reference generator's frost photographs in `root`/frost; returns that folder.  `url`:
    a template with `{name}` for each file of `sha256` ({file name: SHA-256}); defaults:
    `FROST_URL`, `FROST_SHA256`."""
    folder = Path(root) / "frost"
    for name, digest in (sha256 or FROST_SHA256).items():
        download_file((url or FROST_URL).format(name=name), folder / name, digest)
    return folder


# ---------------------------------------------------------------------------------------------
# Arrays: CIFAR-10-C, CIFAR-10.1, CIFAR-10.2

def _open_npy(path: Path) -> np.ndarray:
    """A .npy file memory-mapped (nothing is read until sliced); no pickles."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise ValueError(f"{path}: not a readable .npy file ({type(err).__name__}: {err})") \
            from None


def _check_images(images, path) -> None:
    if not (images.dtype == np.uint8 and images.shape[1:] == (32, 32, 3) and len(images)):
        raise ValueError(f"{path}: images must be uint8 (N, 32, 32, 3) with N >= 1, found "
                         f"{images.dtype} {images.shape}")


def _check_labels(labels, n: int, path) -> None:
    if not (labels.shape == (n,) and np.issubdtype(labels.dtype, np.integer)):
        raise ValueError(f"{path}: labels must be {n} integers, found {labels.dtype} "
                         f"{labels.shape}")
    if labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path}: labels must lie in 0..9, found {labels.min()}..{labels.max()}")


def _channels_first(images, labels):
    return np.ascontiguousarray(np.asarray(images).transpose(0, 3, 1, 2)), \
        np.asarray(labels).astype(np.int64)


def cifar10c_arrays(folder, corruption: str):
    """Memory-mapped `(images, labels)` of one corruption in a CIFAR-10-C style folder
    (`<corruption>.npy`, N x 32 x 32 x 3 uint8 with N = 5 blocks of equal size, and `labels.npy`):
    the published files and our generator's output share this one layout."""
    folder = Path(folder)
    check_corruption(corruption)
    images_path, labels_path = folder / f"{corruption}.npy", folder / "labels.npy"
    images, labels = _open_npy(images_path), _open_npy(labels_path)
    _check_images(images, images_path)
    if len(images) % 5:
        raise ValueError(f"{images_path}: {len(images)} images do not split into 5 severities")
    _check_labels(labels, len(images), labels_path)
    return images, labels


def load_cifar10c(folder, corruption: str, severity: int, n: int | None = None):
    """The first `n` (all when None) images of one severity block of one corruption."""
    severity = check_severity(severity)
    images, labels = cifar10c_arrays(folder, corruption)
    block = len(images) // 5
    if n is not None and n < 1:
        raise ValueError(f"n must be positive, got {n}")
    start = (severity - 1) * block
    stop = start + (block if n is None else min(n, block))
    return _channels_first(images[start:stop], labels[start:stop])


def load_cifar101(folder):
    """CIFAR-10.1 v6 from a folder with `cifar10.1_v6_data.npy` and `cifar10.1_v6_labels.npy`."""
    folder = Path(folder)
    images_path = folder / "cifar10.1_v6_data.npy"
    labels_path = folder / "cifar10.1_v6_labels.npy"
    images, labels = _open_npy(images_path), _open_npy(labels_path)
    _check_images(images, images_path)
    _check_labels(labels, len(images), labels_path)
    return _channels_first(images, labels)


def load_cifar102(folder):
    """The CIFAR-10.2 test set from `cifar102_test.npz` in `folder` (its other keys unread)."""
    path = Path(folder) / "cifar102_test.npz"
    arrays = load_npz(path, ["images", "labels"], only=True)
    _check_images(arrays["images"], path)
    _check_labels(arrays["labels"], len(arrays["images"]), path)
    return _channels_first(arrays["images"], arrays["labels"])


# ---------------------------------------------------------------------------------------------
# Image folders: CINIC-10, CIFAR-10-R, ImageNet variants

def _class_images(folder: Path, names, required) -> dict:
    """{name: sorted image files of folder/name} for `names`; a class of `required` whose folder
    is absent or holds no image is missing, and missing classes are an error naming them."""
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    found = {}
    for name in names:
        sub = folder / name
        found[name] = sorted(p for p in sub.iterdir() if p.is_file()
                             and p.suffix.lower() in IMAGE_EXTENSIONS) if sub.is_dir() else []
    missing = [name for name in required if not found.get(name)]
    if missing:
        more = f" ... ({len(missing)} in all)" if len(missing) > 20 else ""
        raise ValueError(f"{folder}: missing class folders (absent or without images): "
                         f"{', '.join(missing[:20])}{more}")
    return found


def _image32(path: Path, squash: bool) -> np.ndarray:
    """An image as RGB (3, 32, 32); with `squash`, resized to 32x32 by Pillow's box filter
    (aspect ratio not kept), otherwise required to be 32x32."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as err:
        raise ValueError(f"{path}: cannot be read as an image ({err})") from None
    if img.size != (32, 32) and not squash:
        raise ValueError(f"{path}: expected a 32x32 image, found {img.size[0]}x{img.size[1]}")
    return np.asarray(img.resize((32, 32), Image.BOX), dtype=np.uint8).transpose(2, 0, 1)


def _stack(paths, labels, read):
    images = np.ascontiguousarray(np.stack([read(p) for p in paths]))
    return images, np.asarray(labels, dtype=np.int64)


@lru_cache(maxsize=None)
def image_ids(name: str) -> tuple[str, ...]:
    """One of OODRobustBench's id lists shipped in `IMAGE_IDS` (a key of IMAGE_ID_SHA256), in its
    order: `<class>/<file>` per image, checked against its SHA-256."""
    path = IMAGE_IDS / f"{name}_image_ids.txt"
    verify_file(path, IMAGE_ID_SHA256[name], path, "the package's id list is damaged: reinstall pabench")
    return tuple(path.read_text().splitlines())


def _listed(folder: Path, ids, n, where) -> tuple[list[Path], np.ndarray]:
    """The files of the first `n` (None: all) ids under `folder` (`where(id)`: an id's relative
    path) and their labels (the id's class folder); missing files are an error naming them."""
    if n is not None and n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    ids = ids[:n]
    paths = [folder / where(i) for i in ids]
    missing = [str(where(i)) for i, p in zip(ids, paths) if not p.is_file()]
    if missing:
        raise ValueError(f"{folder}: {len(missing)} of the {len(ids)} listed images are missing, "
                         f"e.g. {', '.join(missing[:3])}")
    labels = np.array([CIFAR10_CLASSES.index(i.split("/")[0]) for i in ids], dtype=np.int64)
    return paths, labels


def load_cinic10(folder, n: int | None = 10_000):
    """The first `n` (None: all 70,000) images of OODRobustBench's CINIC-10 id list (the
    ImageNet-derived test images, shuffled), in the list's order, from a CINIC-10 folder
    (`test/<class>/<file>.png`, 32x32)."""
    paths, labels = _listed(Path(folder) / "test", image_ids("CINIC-10"), n, Path)
    return _stack(paths, labels, lambda p: _image32(p, squash=False))


def imagenet_r_name(cifar10r_id: str) -> str:
    """The ImageNet-R file a CIFAR-10-R id was made from: `dog/n02085620_misc_36.png` (the
    authors' 32x32 file) -> `n02085620/misc_36.jpg`."""
    wnid, stem = cifar10r_id.split("/")[1].rsplit(".", 1)[0].split("_", 1)
    return f"{wnid}/{stem}.jpg"


def load_cifar10r(imagenet_r_folder, n: int | None = None):
    """CIFAR-10-R built from an ImageNet-R folder: the first `n` (None: all 6,837) images of
    OODRobustBench's id list, in its order, labelled by the list's CIFAR-10 class, converted to
    RGB and resized to 32x32 with Pillow's box filter without keeping the aspect ratio, as the
    authors' make_cifar-r.py does (CINIC-10's and Imagenet32's downscaling)."""
    paths, labels = _listed(Path(imagenet_r_folder), image_ids("CIFAR10-R"), n, imagenet_r_name)
    return _stack(paths, labels, lambda p: _image32(p, squash=True))


def load_image_folder(folder, classes, required=None, n: int | None = None, seed: int = 0,
                      image_size: int = 224, resize: int = 256):
    """An ImageNet variant in ImageFolder layout: ImageNet-V2 (folders "0".."999"), -A or -R (200
    WordNet-id folders), -Sketch, or one <corruption>/<severity> folder of ImageNet-C.  Labels are
    positions in `classes`; a folder not in `classes` is an error, and so is a missing class of
    `required` (default: all of `classes`).  `n` (None: all) images are drawn uniformly without
    replacement (seeded) and kept in file order; each is preprocessed as RobustBench's
    Res256Crop224 (shorter side to `resize`, central `image_size` crop)."""
    folder = Path(folder)
    index = {name: i for i, name in enumerate(classes)}
    if n is not None and n < 1:
        raise ValueError(f"n must be positive, got {n}")
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such folder")
    unknown = sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in index)
    if unknown:
        raise ValueError(f"{folder}: class folders not among the given classes: "
                         f"{', '.join(unknown[:20])}")
    by_class = _class_images(folder, [c for c in classes if (folder / c).is_dir()],
                             classes if required is None else required)
    paths = [p for c in by_class for p in by_class[c]]
    labels = np.asarray([index[c] for c in by_class for _ in by_class[c]], dtype=np.int64)
    chosen = np.arange(len(paths))
    if n is not None and n < len(paths):
        chosen = np.sort(np.random.default_rng(seed).choice(len(paths), size=n, replace=False))
    if not paths:
        raise ValueError(f"{folder}: no images ({'/'.join(IMAGE_EXTENSIONS)}) in its class folders")
    images = np.stack([load_image(paths[i], image_size, resize) for i in chosen])
    return np.ascontiguousarray(images), labels[chosen]
