"""Datasets of the average-case robustness experiment: Fashion-MNIST (Debian files, and the
downloader against a local HTTP server serving small files in the real IDX .gz format) and
CIFAR-100 (a small archive in the real pickle layout)."""
import functools
import gzip
import hashlib
import http.server
import pickle
import struct
import tarfile
import threading

import numpy as np
import pytest

from conftest import leftovers
from pabench.attacks import datasets as ds
from pabench.datasets import fashion_mnist as fm
from pabench.core.io import file_digest

# --------------------------------------------------------------------------- Fashion-MNIST (Debian)


@pytest.mark.skipif(not all((fm.DEBIAN_DIR / n).is_file() for f in fm.FILES.values() for n in f),
                    reason=f"Debian package dataset-fashion-mnist not installed ({fm.DEBIAN_DIR})")
def test_debian_files_load_complete():
    for split, n in (("train", 60_000), ("test", 10_000)):
        x, y = fm.load(split, source="debian")
        assert x.shape == (n, 28, 28) and x.dtype == np.uint8 and x.flags.writeable
        assert y.shape == (n,) and y.dtype == np.int64
        assert np.bincount(y, minlength=10).tolist() == [n // 10] * 10
        assert y[0] == fm.CLASSES.index("Ankle boot")  # both splits start with an ankle boot
        assert 0 < x.mean() < 255 and x.max() == 255
        xa, ya = fm.load(split)  # "auto" picks the Debian folder
        assert (xa == x).all() and (ya == y).all()


# --------------------------------------------------------------------------- small IDX files

def _idx(array: np.ndarray) -> bytes:
    return bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) \
        + array.astype(np.uint8).tobytes()


@pytest.fixture
def served(tmp_path):
    """Small Fashion-MNIST-shaped .gz files served over HTTP from a thread; yields
    (base_url, folder, {split: (images, labels)}, upstream-style md5 dict, request log)."""
    folder = tmp_path / "served"
    folder.mkdir()
    rng = np.random.default_rng(0)
    truth = {}
    for split, n in (("train", 30), ("test", 20)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = np.arange(n) % 10
        truth[split] = (images, labels)
        for name, array in zip(fm.FILES[split], (images, labels)):
            (folder / name).write_bytes(gzip.compress(_idx(array)))
    digests = {p.name: file_digest(p, "md5") for p in folder.iterdir()}
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

        def log_message(self, *args):  # keep the test output clean
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", folder, truth, digests, requests
    finally:
        server.shutdown()
        server.server_close()


def _fm_load(split, root, url, digests, **kw):
    return fm.load(split, source="root", root=root, base_url=url, md5=digests, **kw)


def test_download_verifies_and_reuses(served, tmp_path):
    url, _, truth, digests, requests = served
    root = tmp_path / "root"
    x, y = _fm_load("test", root, url, digests)
    assert (x == truth["test"][0]).all() and (y == truth["test"][1]).all()
    assert y.dtype == np.int64 and x.shape == (20, 28, 28)
    assert sorted(requests) == sorted("/" + n for n in fm.FILES["test"])  # the split's files only
    assert leftovers(root) == sorted(fm.FILES["test"])  # no temporary files
    # Present and verified: not downloaded again, also without download rights.
    x2, _ = _fm_load("test", root, url, digests)
    x3, _ = _fm_load("test", root, url, digests, download=False)
    assert len(requests) == 2 and (x2 == x).all() and (x3 == x).all()
    # A damaged copy fails the check without download rights, and is replaced with them.
    path = root / fm.FILES["test"][0]
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(ValueError, match=f"{path.name}.*checksum mismatch.*{digests[path.name]}"):
        _fm_load("test", root, url, digests, download=False)
    x4, _ = _fm_load("test", root, url, digests)
    assert len(requests) == 3 and requests[-1] == "/" + path.name and (x4 == x).all()
    # download_fashion_mnist fetches both splits; "auto" without the Debian folder uses root.
    fm.download_fashion_mnist(root, base_url=url, md5=digests)
    assert len(requests) == 5
    xa, ya = fm.load("train", root=root, base_url=url, md5=digests,
                     debian_dir=tmp_path / "no-debian")
    assert (xa == truth["train"][0]).all() and (ya == truth["train"][1]).all()
    assert len(requests) == 5


def test_download_wrong_checksum_leaves_nothing(served, tmp_path):
    url, _, _, digests, requests = served
    root = tmp_path / "root"
    name = fm.FILES["train"][1]
    wrong = {**digests, name: "0" * 32}
    with pytest.raises(ValueError, match="checksum mismatch") as info:
        _fm_load("train", root, url, wrong)
    message = str(info.value)
    assert name in message and digests[name] in message and "0" * 32 in message
    assert "/" + name in requests  # it was downloaded, then refused
    assert not (root / name).exists()
    assert not [p for p in leftovers(root) if p.startswith(".") or p.endswith(".part")]  # nor a part
    # The default digests are upstream's: the small files fail them.
    with pytest.raises(ValueError, match=fm.GZ_MD5[fm.FILES["test"][0]]):
        fm.load("test", source="root", root=tmp_path / "other", base_url=url)


def test_download_from_file_urls_and_errors(served, tmp_path):
    _, folder, truth, digests, _ = served
    root = tmp_path / "root"
    x, y = _fm_load("train", root, folder.as_uri(), digests)
    assert (x == truth["train"][0]).all() and (y == truth["train"][1]).all()
    with pytest.raises(OSError, match="missing-folder.*download failed"):
        _fm_load("test", root, (tmp_path / "missing-folder").as_uri(), digests)
    assert not any(p.startswith("t10k") or p.startswith(".") for p in leftovers(root))
    with pytest.raises(FileNotFoundError, match="t10k-images.*download=True"):
        _fm_load("test", root, folder.as_uri(), digests, download=False)
    with pytest.raises(ValueError, match="split"):
        fm.load("val", source="root", root=root)
    with pytest.raises(ValueError, match="source"):
        fm.load("test", source="torchvision", root=root)
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        fm.load("test", source="debian", debian_dir=tmp_path / "no-debian")


def test_debian_source_checks_decompressed_content(served, tmp_path, monkeypatch):
    _, folder, truth, _, _ = served
    # Recompress (as Debian did): other .gz bytes, same content.
    debian = tmp_path / "debian"
    debian.mkdir()
    for path in folder.iterdir():
        raw = gzip.decompress(path.read_bytes())
        (debian / path.name).write_bytes(gzip.compress(raw, compresslevel=1, mtime=1))
        assert file_digest(debian / path.name, "md5") != file_digest(path, "md5")
        monkeypatch.setitem(fm.RAW_MD5, path.name, hashlib.md5(raw).hexdigest())
    x, y = fm.load("train", source="debian", debian_dir=debian)
    assert (x == truth["train"][0]).all() and (y == truth["train"][1]).all()
    x, _ = fm.load("test", debian_dir=debian, root=tmp_path / "unused", download=False)  # auto
    assert (x == truth["test"][0]).all()
    name = fm.FILES["test"][1]
    monkeypatch.setitem(fm.RAW_MD5, name, "f" * 32)
    with pytest.raises(ValueError, match=f"{name}.*decompressed.*{'f' * 32}"):
        fm.load("test", source="debian", debian_dir=debian)


def test_reader_rejects_inconsistent_files(tmp_path):
    images = np.zeros((5, 28, 28), np.uint8)
    for labels, match in ((np.arange(4), "5 labels"), (np.array([0, 1, 2, 3, 10]), "outside")):
        for name, array in zip(fm.FILES["test"], (images, labels)):
            (tmp_path / name).write_bytes(gzip.compress(_idx(array)))
        digests = {n: file_digest(tmp_path / n, "md5") for n in fm.FILES["test"]}
        with pytest.raises(ValueError, match=match):
            _fm_load("test", tmp_path, "http://127.0.0.1:9/", digests, download=False)


# --------------------------------------------------------------------------- CIFAR-100

def _cifar100_archive(tmp_path, sizes=(("train", 9), ("test", 6)), label_key=b"fine_labels"):
    src = tmp_path / "src" / ds.CIFAR100_FOLDER
    src.mkdir(parents=True)
    rng = np.random.default_rng(1)
    truth = {}
    for name, n in sizes:
        data = rng.integers(0, 256, size=(n, 3072), dtype=np.uint8)
        fine = [int(v) for v in rng.integers(0, 100, size=n)]
        fine[0] = 99  # a label a CIFAR-10 range check would refuse
        batch = {b"filenames": [f"img_{i}.png".encode() for i in range(n)],
                 b"batch_label": f"{name} batch".encode(), label_key: fine,
                 b"coarse_labels": [v // 5 for v in fine], b"data": data}
        (src / name).write_bytes(pickle.dumps(batch, protocol=2))
        truth[name] = (data, np.array(fine))
    (src / "meta").write_bytes(pickle.dumps({b"fine_label_names": [b"x"] * 100,
                                             b"coarse_label_names": [b"y"] * 20}, protocol=2))
    archive = tmp_path / "src" / "cifar-100-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(src, arcname=ds.CIFAR100_FOLDER)
    return archive, truth


def test_cifar100_download_and_read(tmp_path):
    archive, truth = _cifar100_archive(tmp_path)
    root = tmp_path / "root"
    folder = ds.download_cifar100(root, url=archive.as_uri(), md5=file_digest(archive, "md5"))
    assert folder == root / ds.CIFAR100_FOLDER
    for split in ds.SPLITS:
        x, y = ds.read_cifar100(folder, split)
        data, fine = truth[split]
        assert x.shape == (len(data), 3, 32, 32) and x.dtype == np.uint8 and x.flags.c_contiguous
        assert y.dtype == np.int64 and (y == fine).all() and y.max() == 99
        assert (x[:, 1].reshape(len(x), -1) == data[:, 1024:2048]).all()
    archive.unlink()  # extracted: no download needed
    x, y = ds.cifar100(root, "test")
    assert len(x) == 6
    x, y = ds.load("cifar100", "train", {"root": root, "download": False})
    assert (y == truth["train"][1]).all()
    # The CIFAR-10 reader still refuses labels outside 0..9.
    (root / ds.CIFAR10_FOLDER).mkdir()
    (root / ds.CIFAR10_FOLDER / "test_batch").write_bytes(pickle.dumps(
        {b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, 99]}, protocol=2))
    with pytest.raises(ValueError, match=r"CIFAR-10 batch.*0\.\.9"):
        ds.read_cifar10(root / ds.CIFAR10_FOLDER, "test")


def test_cifar100_errors(tmp_path):
    archive, _ = _cifar100_archive(tmp_path)
    root = tmp_path / "root"
    with pytest.raises(ValueError, match="checksum"):
        ds.download_cifar100(root, url=archive.as_uri(), md5="0" * 32)
    assert not (root / ds.CIFAR100_FOLDER).exists()
    # A CIFAR-10-style batch (no fine labels) is refused, naming the file.
    other = tmp_path / "other"
    other.mkdir()
    archive, _ = _cifar100_archive(other, label_key=b"labels")
    folder = ds.download_cifar100(other / "root", url=archive.as_uri(),
                                  md5=file_digest(archive, "md5"))
    with pytest.raises(ValueError, match="test.*fine_labels"):
        ds.read_cifar100(folder, "test")
    with pytest.raises(ValueError, match="cifar100"):
        ds.load("cifar1000", "test", {})
    with pytest.raises(ValueError, match="split"):
        ds.cifar100(root, "val", download=False)
