"""The dataset shifts OODRobustBench evaluates CIFAR-10 models on, and ImageNet-variant folders.
Every loader returns images uint8 (N, 3, H, W), C-contiguous, and labels int64 (N,).

- CIFAR-10-C: `CIFAR-10-C.tar` (Zenodo record 2535967) with `CIFAR-10-C/<corruption>.npy` (50,000
  x 32 x 32 x 3 uint8, severities 1..5 in blocks of 10,000) and `labels.npy`; our own generator
  writes the same layout, read by the same `load_cifar10c`.
- CIFAR-10.1 v6: `cifar10.1_v6_data.npy` + `_labels.npy` (github.com/modestyachts/CIFAR-10.1).
- CIFAR-10.2: `cifar102_test.npz`, keys `images`, `labels` (github.com/modestyachts/cifar-10.2).
- CINIC-10: `CINIC-10.tar.gz` (Edinburgh DataShare); the ImageNet-derived images of `test/`.
- CIFAR-10-R: the ImageNet-R (`imagenet-r.tar`) renditions of 8 CIFAR-10 classes, at 32x32.
- ImageNet-V2, -A, -R, -Sketch, -C: user-given folders in ImageFolder layout.

Downloads accept `file://` URLs, check the MD5 or SHA-256 before a file is kept or an archive is
unpacked, and write through temporary names: nothing half-written is ever left in place.
"""
from __future__ import annotations

import logging
import os
import shutil
import tarfile
import tempfile
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

import numpy as np

from pabench.adversarial.datasets import IMAGE_EXTENSIONS, _load_image
from pabench.core.io import atomic_path, file_digest, load_npz
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

# CIFAR-10-R: the ImageNet-R classes (WordNet ids) that CINIC-10's synsets-to-cifar-10-classes.txt
# names under a CIFAR-10 class ("the same class mapping as CINIC"), by CIFAR-10 label; none is
# named under airplane or horse.  Classes only deeper in a listed subtree (beagle under hound) are
# not named there and not taken: these 44 classes x ~150 images fit the paper's 6,837 images.
_CIFAR10R_WNIDS = {
    1: "n02701002 n03594945",  # automobile: ambulance, jeep
    2: "n01514859 n01518878 n01531178 n01534433 n01614925 n01616318 n01806143 n01820546 "
       "n01833805 n01843383 n01847000 n01855672 n01860187 n02007558 n02009912 n02051845 "
       "n02056570",  # bird: hen, ostrich, ... king penguin
    3: "n02123045 n02128385 n02128757 n02129165 n02129604 n02130308",  # cat: tabby, big cats
    4: "n02410509",  # deer: bison (CINIC's deer group is the ruminants)
    # dog: 11 breeds, timber wolf, hyena, red fox (CINIC's dog group is the canines)
    5: "n02085620 n02086240 n02108089 n02109525 n02110341 n02110958 n02112018 n02112137 "
       "n02113023 n02113624 n02113799 n02114367 n02117135 n02119022",
    6: "n01644373",  # frog: tree frog
    8: "n02951358",  # ship: canoe (CINIC's ship group is the boats)
    9: "n03345487 n03930630",  # truck: fire engine, pickup
}
CIFAR10R_CLASSES = {w: label for label, ids in _CIFAR10R_WNIDS.items() for w in ids.split()}


# ---------------------------------------------------------------------------------------------
# Downloads

def _algorithm(checksum, name) -> str:
    """The hash ("md5" or "sha256") that the checksum's length tells."""
    algo = {32: "md5", 64: "sha256"}.get(len(checksum or ""))
    if algo is None or any(c not in "0123456789abcdef" for c in checksum.lower()):
        raise ValueError(f"{name}: a checksum is required to trust a download: an MD5 (32 hex "
                         f"digits) or SHA-256 (64 hex digits), got {checksum!r}")
    return algo


def _verify(path: Path, checksum: str, name, advice: str) -> None:
    algo = _algorithm(checksum, name)
    got = file_digest(path, algo)
    if got != checksum.lower():
        raise ValueError(f"{name}: checksum mismatch ({algo} {got}, expected {checksum}); "
                         f"{advice}")


def _fetch(url: str, out: Path) -> None:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        source = Path(urllib.request.url2pathname(parsed.path))
        if not source.is_file():
            raise FileNotFoundError(f"{source}: no such file ({url})")
        shutil.copyfile(source, out)
    elif parsed.scheme in ("http", "https"):
        request = urllib.request.Request(url, headers={"User-Agent": "pabench"})
        with urllib.request.urlopen(request, timeout=60) as response, open(out, "wb") as fh:
            shutil.copyfileobj(response, fh, 1 << 20)
    else:
        raise ValueError(f"unsupported URL {url!r} (use http, https or file)")


def download_file(url: str, dest, checksum: str) -> Path:
    """`url` saved as `dest` once its MD5 / SHA-256 matches `checksum` (a file already at `dest`
    is checked instead of fetched).  A mismatch leaves nothing at `dest`."""
    dest = Path(dest)
    if dest.is_file():
        _verify(dest, checksum, dest, "delete it and download again")
        return dest
    _algorithm(checksum, dest)  # a bad checksum argument fails before a long download
    log.info("downloading %s", url)
    with atomic_path(dest) as tmp:
        _fetch(url, tmp)
        _verify(tmp, checksum, dest, f"the download from {url} was not kept")
    return dest


def _unpack(archive: Path, target: Path, marker: str) -> Path:
    """Unpack a verified tar archive as folder `target`: the archive's top level or its single
    top folder, whichever holds `marker`.  `target` appears only once complete."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for stale in target.parent.glob(f".{target.name}.*.unpacking"):  # left by a killed job
        shutil.rmtree(stale, ignore_errors=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".unpacking",
                                dir=target.parent))
    try:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")  # refuses absolute paths, '..', outside links
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{archive}: cannot be unpacked ({type(err).__name__}: {err})") \
                from None
        tops = [tmp] + sorted(p for p in tmp.iterdir() if p.is_dir())
        top = next((p for p in tops if (p / marker).exists()), None)
        if top is None:
            raise ValueError(f"{archive}: holds no {marker!r}, at its top or in a top folder")
        os.replace(top, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _download_archive(root, url: str, checksum: str, folder: str, marker: str) -> Path:
    root = Path(root)
    target = root / folder
    if target.is_dir():  # only a complete unpacking is ever renamed to `target`
        return target
    archive = download_file(url, root / Path(urllib.parse.urlparse(url).path).name, checksum)
    return _unpack(archive, target, marker)


def download_cifar10c(root, url: str = CIFAR10C_URL, md5: str = CIFAR10C_MD5) -> Path:
    """CIFAR-10-C under `root`; returns the folder with `<corruption>.npy` and `labels.npy`."""
    return _download_archive(root, url, md5, "CIFAR-10-C", "labels.npy")


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
    return _download_archive(root, url, md5, "CINIC-10", "test")


def download_imagenet_r(root, url: str = IMAGENET_R_URL, md5: str = IMAGENET_R_MD5) -> Path:
    """ImageNet-R as `root`/imagenet-r (one folder per WordNet id); returns that folder."""
    # The top folder is found by one of its class folders (tabby cat, also a CIFAR-10-R class).
    return _download_archive(root, url, md5, "imagenet-r", "n02123045")


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


def load_cinic10(folder, n: int | None = 10_000):
    """The first `n` (None: all) ImageNet-derived test images of a CINIC-10 folder (`test/<class>/`;
    files named "cifar10-..." come from CIFAR-10 and are left out).  Stable order: file names
    sorted within each class, classes interleaved (one image per class in label order, then the
    next), so that every prefix is class-balanced.  OODRobustBench draws its 10,000 from a fixed
    id list of its own, which is not public."""
    if n is not None and n < 1:
        raise ValueError(f"n must be positive, got {n}")
    test = Path(folder) / "test"
    by_class = _class_images(test, CIFAR10_CLASSES, CIFAR10_CLASSES)
    lists = [[p for p in by_class[c] if not p.name.startswith("cifar")] for c in CIFAR10_CLASSES]
    order = []
    for i in range(max(len(files) for files in lists)):
        order += [(files[i], label) for label, files in enumerate(lists) if i < len(files)]
    if not order:
        raise ValueError(f"{test}: no ImageNet-derived images (all names start with 'cifar')")
    order = order[:n]
    return _stack([p for p, _ in order], [label for _, label in order],
                  lambda p: _image32(p, squash=False))


def load_cifar10r(imagenet_r_folder):
    """CIFAR-10-R built from an ImageNet-R folder: the images of the `CIFAR10R_CLASSES` folders
    (the others are ignored), ordered by label, WordNet id and file name, converted to RGB and
    resized to 32x32 with Pillow's box filter without keeping the aspect ratio, as the authors'
    make_cifar-r.py does (CINIC-10's and Imagenet32's downscaling)."""
    folder = Path(imagenet_r_folder)
    wnids = sorted(CIFAR10R_CLASSES, key=lambda w: (CIFAR10R_CLASSES[w], w))
    by_class = _class_images(folder, wnids, wnids)
    paths = [p for w in wnids for p in by_class[w]]
    return _stack(paths, [CIFAR10R_CLASSES[w] for w in wnids for _ in by_class[w]],
                  lambda p: _image32(p, squash=True))


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
    images = np.stack([_load_image(paths[i], image_size, resize) for i in chosen])
    return np.ascontiguousarray(images), labels[chosen]
