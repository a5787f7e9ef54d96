"""Downloads: pabench.core.download and every downloader of the project, against a local HTTP
server (conftest.FileServer) serving small files in the real formats.  Each downloader must:
name the URL when the server fails (HTTP 500, 404) and keep nothing; keep nothing of a corrupted
file (neither the file nor a part a later run would trust); and, after a transfer the server cut
short, resume it from where it stopped (HTTP range request) and give the data back."""
import gzip
import hashlib
import importlib.util
import io
import json
import pickle
import tarfile
import threading

import numpy as np
import pytest
import torch
from PIL import Image

from conftest import leftovers
from pabench.core import download

pytestmark = pytest.mark.usefixtures("one_thread")   # small tensors


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tar_bytes(files: dict, gz: bool) -> bytes:
    """A tar archive (gzipped if `gz`) of {name: bytes}."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, "PNG")
    return buf.getvalue()


def torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def images(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)


# =============================================================================================
# download_file

@pytest.fixture
def srv(file_server):
    file_server.body = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    return file_server


def test_an_interrupted_download_resumes_where_it_stopped(tmp_path, srv):
    url, dest = srv.url("files/data.bin"), tmp_path / "data.bin"
    srv.mode = "truncate"
    with pytest.raises(OSError, match=rf"{url}: download failed.*2500 bytes kept in .*data\.bin\.part"):
        download.download_file(url, dest, sha256(srv.body))
    assert leftovers(tmp_path) == ["data.bin.part"]
    srv.mode = "ok"
    assert download.download_file(url, dest, sha256(srv.body)) == dest
    assert dest.read_bytes() == srv.body and leftovers(tmp_path) == ["data.bin"]
    assert srv.requests == [None, "bytes=2500-"]        # the second fetched only the rest
    download.download_file(url, dest, sha256(srv.body))  # there: checked, not fetched again
    assert len(srv.requests) == 2


def test_a_server_that_ignores_the_range_sends_everything_again(tmp_path, srv):
    url, dest = srv.url("files/data.bin"), tmp_path / "data.bin"
    (tmp_path / "data.bin.part").write_bytes(b"stale bytes of another try")
    srv.mode = "norange"
    download.download_file(url, dest, "sha256:" + sha256(srv.body)[:8])
    assert dest.read_bytes() == srv.body and srv.requests == ["bytes=26-"]
    # a part that already holds everything: the server has nothing more (416); it is checked
    srv.mode, srv.requests = "ok", []
    (tmp_path / "again.bin.part").write_bytes(srv.body)
    download.download_file(url, tmp_path / "again.bin", md5(srv.body))
    assert (tmp_path / "again.bin").read_bytes() == srv.body and srv.requests == ["bytes=5000-"]


def test_corrupted_and_failing_downloads_keep_nothing_and_name_the_url(tmp_path, srv):
    url, dest = srv.url("files/data.bin"), tmp_path / "data.bin"
    srv.mode = "corrupt"
    with pytest.raises(ValueError, match=rf"data\.bin: checksum mismatch.*download from {url} was "
                                         "not kept"):
        download.download_file(url, dest, sha256(srv.body))
    assert leftovers(tmp_path) == []
    # a resumed download whose first part was wrong fails its checksum and is deleted: the next
    # try starts afresh
    srv.mode = "ok"
    (tmp_path / "data.bin.part").write_bytes(b"x" * 100)
    with pytest.raises(ValueError, match="checksum mismatch"):
        download.download_file(url, dest, sha256(srv.body))
    assert leftovers(tmp_path) == []
    assert download.download_file(url, dest, sha256(srv.body)).read_bytes() == srv.body
    dest.unlink()
    srv.mode = "error"
    with pytest.raises(OSError, match=rf"{url}: download failed \(HTTPError: HTTP Error 500"):
        download.download_file(url, dest, sha256(srv.body))
    assert leftovers(tmp_path) == []
    with pytest.raises(ValueError, match="at least 8 of its leading digits"):
        download.download_file(url, dest, "sha256:1234")


def test_without_a_checksum_a_format_check_decides_and_the_sha256_is_logged(tmp_path, srv, caplog):
    url, dest = srv.url("files/data.bin"), tmp_path / "data.bin"
    with pytest.raises(ValueError, match="needs a format check"):
        download.download_file(url, dest, None)

    def starts_right(path):
        if path.read_bytes()[:4] != srv.body[:4]:
            raise ValueError(f"{path}: not the expected format")

    srv.mode = "corrupt"
    with pytest.raises(ValueError, match=rf"not the expected format; the download from {url} was "
                                         "not kept"):
        download.download_file(url, dest, None, starts_right)
    assert leftovers(tmp_path) == []
    srv.mode = "ok"
    assert download.download_file(url, dest, None, starts_right).read_bytes() == srv.body
    assert sha256(srv.body) in caplog.text


def test_git_blob_checksums_as_the_hub_lists_them(tmp_path, srv):
    # git hash-object of a file holding "hello\n"
    srv.body = b"hello\n"
    dest = download.download_file(srv.url("f"), tmp_path / "f",
                                  "git-sha1:ce013625030ba8dba906f756967f9e9ca394464a")
    assert dest.read_bytes() == b"hello\n"
    with pytest.raises(ValueError, match="checksum mismatch.*git-sha1"):
        download.download_file(srv.url("g"), tmp_path / "g", "git-sha1:" + "0" * 40)


def test_jobs_fetching_the_same_file_download_it_once(tmp_path, srv):
    srv.mode = "slow"
    url, dest, errors = srv.url("files/data.bin"), tmp_path / "data.bin", []

    def fetch():
        try:
            download.download_file(url, dest, sha256(srv.body))
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=fetch) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and dest.read_bytes() == srv.body
    assert len(srv.requests) == 1          # the others waited for the lock, then found the file


def test_a_file_url_download_resumes_too(tmp_path):
    data = bytes(range(256)) * 20
    (tmp_path / "src.bin").write_bytes(data)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f.bin.part").write_bytes(data[:1000])
    download.download_file((tmp_path / "src.bin").as_uri(), tmp_path / "out" / "f.bin", sha256(data))
    assert (tmp_path / "out" / "f.bin").read_bytes() == data and leftovers(tmp_path / "out") == ["f.bin"]


# =============================================================================================
# Every downloader: each case serves its files and returns (root, fetch, verify): `fetch()` runs
# the downloader into `root`, `verify(result)` checks what it gave back.

def mnist_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import mnist

    def idx(array):
        return gzip.compress(bytes([0, 0, 8, array.ndim])
                             + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
                             + array.tobytes())

    rng = np.random.default_rng(1)
    arrays = {"train-images-idx3-ubyte.gz": rng.integers(0, 256, (20, 28, 28), dtype=np.uint8),
              "train-labels-idx1-ubyte.gz": np.arange(20, dtype=np.uint8) % 10,
              "t10k-images-idx3-ubyte.gz": rng.integers(0, 256, (10, 28, 28), dtype=np.uint8),
              "t10k-labels-idx1-ubyte.gz": np.arange(10, dtype=np.uint8)}
    files = {name: idx(a) for name, a in arrays.items()}
    srv.files = {f"/mnist/{name}": data for name, data in files.items()}
    monkeypatch.setattr(mnist, "MNIST_MD5", {name: md5(data) for name, data in files.items()})
    root = tmp_path / "data"

    def verify(raw):
        pools = mnist.load_idx_folder(raw)
        assert (pools.images[20:] == arrays["t10k-images-idx3-ubyte.gz"]).all()
        assert list(pools.labels[:20]) == list(np.arange(20) % 10)
    return root, lambda: mnist.download_torchvision(root, mirrors=(srv.url("mnist/"),)), verify


def _cifar_case(tmp_path, srv, which):
    from pabench.attacks import datasets as ds

    x = images(12, 2)
    rows = x.transpose(0, 3, 1, 2).reshape(12, -1)
    if which == "cifar10":
        folder, key = ds.CIFAR10_FOLDER, b"labels"
        batches = {f"data_batch_{i}": slice(2 * i - 2, 2 * i) for i in range(1, 6)}
        batches["test_batch"] = slice(10, 12)
        extra = {"batches.meta": pickle.dumps({b"label_names": [b"c"] * 10}, protocol=2)}
    else:
        folder, key = ds.CIFAR100_FOLDER, b"fine_labels"
        batches = {"train": slice(0, 10), "test": slice(10, 12)}
        extra = {"meta": pickle.dumps({b"fine_label_names": [b"c"] * 100}, protocol=2)}
    labels = np.arange(12) * 7 % (10 if which == "cifar10" else 100)
    files = {f"{folder}/{name}": pickle.dumps({b"data": rows[part], key: labels[part].tolist()},
                                              protocol=2)
             for name, part in batches.items()}
    files.update({f"{folder}/{name}": data for name, data in extra.items()})
    archive = tar_bytes(files, gz=True)
    name = f"{which.replace('cifar', 'cifar-')}-python.tar.gz"
    srv.files = {f"/kriz/{name}": archive}
    root = tmp_path / "data"
    fetch = ds.download_cifar10 if which == "cifar10" else ds.download_cifar100
    read = ds.read_cifar10 if which == "cifar10" else ds.read_cifar100

    def verify(got):
        x_test, y_test = read(got, "test")
        assert (x_test == x[10:].transpose(0, 3, 1, 2)).all() and list(y_test) == list(labels[10:])
    return root, lambda: fetch(root, url=srv.url(f"kriz/{name}"), md5=md5(archive)), verify


def cifar10_case(tmp_path, srv, monkeypatch):
    return _cifar_case(tmp_path, srv, "cifar10")


def cifar100_case(tmp_path, srv, monkeypatch):
    return _cifar_case(tmp_path, srv, "cifar100")


def fashion_mnist_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import fashion_mnist as fm

    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 256, (6, 28, 28), dtype=np.uint8), np.arange(6, dtype=np.uint8)
    header = {3: bytes([0, 0, 8, 3]) + b"".join(int(d).to_bytes(4, "big") for d in x.shape),
              1: bytes([0, 0, 8, 1]) + (6).to_bytes(4, "big")}
    files = dict(zip(fm.FILES["test"], (gzip.compress(header[3] + x.tobytes()),
                                        gzip.compress(header[1] + y.tobytes()))))
    srv.files = {f"/fm/{name}": data for name, data in files.items()}
    digests = {name: md5(data) for name, data in files.items()}
    root = tmp_path / "data"

    def verify(_):
        got_x, got_y = fm.load("test", "root", root, download=False, md5=digests)
        assert (got_x == x).all() and list(got_y) == list(range(6))
    return root, lambda: fm.download_fashion_mnist(root, ("test",), srv.url("fm/"), digests), verify


def cifar10c_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import cifar_shifts as cs

    x = images(10, 4)
    files = {"CIFAR-10-C/fog.npy": _npy(x), "CIFAR-10-C/labels.npy": _npy(np.arange(10) % 10)}
    archive = tar_bytes(files, gz=False)
    srv.files = {"/zenodo/CIFAR-10-C.tar": archive}
    root = tmp_path / "data"

    def verify(folder):
        got, _ = cs.load_cifar10c(folder, "fog", 3)
        assert (got == x[4:6].transpose(0, 3, 1, 2)).all()
    return root, lambda: cs.download_cifar10c(root, srv.url("zenodo/CIFAR-10-C.tar"),
                                              md5(archive)), verify


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def cifar101_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import cifar_shifts as cs

    x, y = images(4, 5), np.array([3, 1, 4, 1])
    files = {"data": _npy(x), "labels": _npy(y)}
    srv.files = {f"/c101/{part}.npy": data for part, data in files.items()}
    urls = {part: srv.url(f"c101/{part}.npy") for part in files}
    root = tmp_path / "data"

    def verify(folder):
        got_x, got_y = cs.load_cifar101(folder)
        assert (got_x == x.transpose(0, 3, 1, 2)).all() and list(got_y) == list(y)
    return root, lambda: cs.download_cifar101(root, urls, {p: md5(d) for p, d in files.items()}), \
        verify


def cifar102_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import cifar_shifts as cs

    x, y = images(4, 6), np.array([0, 9, 2, 5])
    buf = io.BytesIO()
    np.savez(buf, images=x, labels=y)
    data = buf.getvalue()
    srv.files = {"/c102/cifar102_test.npz": data}
    root = tmp_path / "data"

    def verify(folder):
        got_x, got_y = cs.load_cifar102(folder)
        assert (got_x == x.transpose(0, 3, 1, 2)).all() and list(got_y) == list(y)
    return root, lambda: cs.download_cifar102(root, srv.url("c102/cifar102_test.npz"),
                                              sha256(data)), verify


def cinic10_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import cifar_shifts as cs

    listed, x = cs.image_ids("CINIC-10")[:3], images(3, 7)
    archive = tar_bytes({f"test/{i}": png(im) for i, im in zip(listed, x)}, gz=True)
    srv.files = {"/datashare/CINIC-10.tar.gz": archive}
    root = tmp_path / "data"

    def verify(folder):
        got, labels = cs.load_cinic10(folder, n=3)
        assert (got == x.transpose(0, 3, 1, 2)).all()
        assert list(labels) == [cs.CIFAR10_CLASSES.index(i.split("/")[0]) for i in listed]
    return root, lambda: cs.download_cinic10(root, srv.url("datashare/CINIC-10.tar.gz"),
                                             md5(archive)), verify


def cifar10r_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import cifar_shifts as cs

    listed, x = cs.image_ids("CIFAR10-R")[:3], images(4, 8)
    tabby = next(i for i in cs.image_ids("CIFAR10-R") if "n02123045" in i)  # the archive's marker
    archive = tar_bytes({f"imagenet-r/{cs.imagenet_r_name(i)}": png(im)
                         for i, im in zip(listed + (tabby,), x)}, gz=False)
    srv.files = {"/berkeley/imagenet-r.tar": archive}
    root = tmp_path / "data"

    def verify(folder):
        got, labels = cs.load_cifar10r(folder, n=3)
        assert (got == x[:3].transpose(0, 3, 1, 2)).all()     # 32x32 already: kept as it is
        assert list(labels) == [cs.CIFAR10_CLASSES.index(i.split("/")[0]) for i in listed]
    return root, lambda: cs.download_imagenet_r(root, srv.url("berkeley/imagenet-r.tar"),
                                                md5(archive)), verify


def frost_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import cifar_shifts as cs

    rng = np.random.default_rng(9)
    files = {name: png(rng.integers(0, 256, (40 + k, 50, 3), dtype=np.uint8))
             for k, name in enumerate(cs.FROST_SHA256)}
    srv.files = {f"/robustness/{name}": data for name, data in files.items()}
    root = tmp_path / "data"

    def verify(folder):
        assert sorted(p.name for p in folder.iterdir() if p.suffix != ".lock") == sorted(files)
        assert all((folder / n).read_bytes() == d for n, d in files.items())
    return root, lambda: cs.download_frost_photos(root, srv.url("robustness/{name}"),
                                                  {n: sha256(d) for n, d in files.items()}), verify


def imdb_case(tmp_path, srv, monkeypatch):
    from pabench.datasets import imdb
    from pabench.tools.rehearsal import write_imdb_archive

    archive = write_imdb_archive(tmp_path / "src" / imdb.ARCHIVE, per_class=3).read_bytes()
    srv.files = {f"/stanford/{imdb.ARCHIVE}": archive}
    root = tmp_path / "data"

    def verify(path):
        reviews = imdb.read_split(path, "test")
        assert len(reviews) == 6 and {r.label for r in reviews} == {0, 1}
    return root, lambda: imdb.imdb_archive(root, None, srv.url(f"stanford/{imdb.ARCHIVE}"),
                                           md5(archive)), verify


def _lpips_case(tmp_path, srv, network):
    from pabench.attacks import perceptual as P

    torch.manual_seed(10)
    root = tmp_path / "data"
    if network == "alexnet_cifar":    # perceptual-advex's checkpoint; no published checksum
        features = P.cifar_alexnet_features()
        data = torch_bytes({"model": {f"model.features.{k}": v
                                      for k, v in features.state_dict().items()}})
        name = "alexnet_cifar.pt"
        fetch = lambda: P.load_lpips(network, "download", root,  # noqa: E731
                                     url=srv.url(f"lpips/{name}"))
        state = lambda net: net.features.state_dict()  # noqa: E731
    else:                             # torchvision's state dict, the SHA-256 prefix in its name
        nn = torch.nn   # torchvision's AlexNet features (building its classifier takes seconds)
        features = nn.Sequential(
            nn.Conv2d(3, 64, 11, 4, 2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(), nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(), nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2))
        data = torch_bytes({f"features.{k}": v for k, v in features.state_dict().items()})
        name = f"alexnet-owt-{sha256(data)[:8]}.pth"
        # the file load_lpips reads (it would build torchvision's whole AlexNet, seconds, per try)
        fetch = lambda: P.fetch_weights(network, root, srv.url(f"lpips/{name}"))  # noqa: E731
        state = lambda path: P._features_state(network, path)  # noqa: E731
    srv.files = {f"/lpips/{name}": data}

    def verify(result):
        got = state(result)
        assert all(torch.equal(got[k], v) for k, v in features.state_dict().items())
    return root, fetch, verify


def lpips_alexnet_cifar_case(tmp_path, srv, monkeypatch):
    return _lpips_case(tmp_path, srv, "alexnet_cifar")


def lpips_alexnet_case(tmp_path, srv, monkeypatch):
    return _lpips_case(tmp_path, srv, "alexnet")


def published_case(tmp_path, srv, monkeypatch):
    from pabench.attacks import published
    from pabench.attacks.models import build

    torch.manual_seed(11)
    net = build("resnet20").eval()
    data = torch_bytes(net.net.state_dict())
    name = f"cifar10_resnet20-{sha256(data)[:8]}.pt"
    srv.files = {f"/chenyaofo/{name}": data}
    monkeypatch.setitem(published.CATALOGUE, "test/resnet20", published.Published(
        "resnet20", srv.url(f"chenyaofo/{name}"), f"sha256:{sha256(data)[:8]}", 90.0, "test"))
    root = tmp_path / "data"

    def verify(got):
        x = torch.rand(2, 3, 32, 32)
        torch.testing.assert_close(got[0](x), net(x))
    return root, lambda: published.load("test/resnet20", root), verify


class _Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3 * 32 * 32, 10)

    def forward(self, x):
        return self.fc(x.flatten(1))


def _robustbench_zoo(monkeypatch, dataset, model_id, entry):
    if importlib.util.find_spec("robustbench") is None:
        pytest.skip("the optional robustbench package is not installed (make env installs it)")
    from pabench.attacks import robustbench

    zoo = robustbench.architectures(dataset)   # the dict robustbench's load_model reads too
    monkeypatch.setitem(zoo, model_id, entry)


def robustbench_case(tmp_path, srv, monkeypatch):
    """A model of RobustBench's zoo (a small stand-in: an ensemble of two files, by Google
    Drive id), loaded by robustbench's own load_model from the files we downloaded."""
    from pabench.attacks import robustbench

    members = []
    for seed in (12, 13):
        torch.manual_seed(seed)
        members.append(_Tiny())

    class Ensemble(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.models = torch.nn.ModuleList([_Tiny(), _Tiny()])

        def forward(self, x):
            return sum(m(x) for m in self.models) / 2

    _robustbench_zoo(monkeypatch, "cifar10", "Test2000Tiny",
                     {"model": Ensemble, "gdrive_id": ["id-a", "id-b"]})
    srv.files = {f"/drive/{gid}": torch_bytes({"state_dict": m.state_dict()})
                 for gid, m in zip(("id-a", "id-b"), members)}
    monkeypatch.setattr(robustbench, "GDRIVE_URL", srv.url("drive/{id}"))
    root = tmp_path / "data"

    def verify(model):
        x = torch.rand(2, 3, 32, 32)
        torch.testing.assert_close(model(x), (members[0](x) + members[1](x)) / 2)
        assert leftovers(root) == ["cifar10/Linf/Test2000Tiny.pt_m0.pt",
                                   "cifar10/Linf/Test2000Tiny.pt_m1.pt"]
    return root, lambda: robustbench.load("Test2000Tiny", "cifar10", root), verify


def robustbench_torchvision_case(tmp_path, srv, monkeypatch):
    """An ImageNet constructor of RobustBench's zoo that starts from torchvision weights, fetched
    by torch.hub's load_state_dict_from_url (Standard_R50's way)."""
    from pabench.attacks import robustbench

    torch.manual_seed(14)
    reference = _Tiny()
    data = torch_bytes(reference.state_dict())
    name = f"tiny-{sha256(data)[:10]}.pth"
    srv.files = {f"/torchvision/{name}": data}

    def pretrained():
        net = _Tiny()
        net.load_state_dict(torch.hub.load_state_dict_from_url(srv.url(f"torchvision/{name}"),
                                                             check_hash=True))  # as torchvision
        return net

    # no Drive file, and robustbench returns the ImageNet models named "Standard..." as built
    _robustbench_zoo(monkeypatch, "imagenet", "Standard_Test",
                     {"model": pretrained, "gdrive_id": ""})
    root = tmp_path / "hub"
    monkeypatch.setattr(torch.hub, "_hub_dir", str(root))

    def verify(model):
        x = torch.rand(2, 3, 32, 32)
        torch.testing.assert_close(model(x), reference(x))
        assert leftovers(root) == [f"checkpoints/{name}"]
    return root, lambda: robustbench.load("Standard_Test", "imagenet", tmp_path / "rb"), verify


def hub_case(tmp_path, srv, monkeypatch):
    """A hub model at a pinned revision: the listing (the hub's API) names each file with its
    checksum (LFS: SHA-256; others: git blob SHA-1); from_pretrained reads the folder."""
    from pabench.experiments.text.compute import load_classifier
    from pabench.tools.rehearsal import write_tiny_distilbert

    folder = write_tiny_distilbert(tmp_path / "src", layers=1, dim=8)
    commit, repo = "714eb0f" + "a" * 33, "org/tiny-sst2"
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    siblings = []
    for name, data in sorted(files.items()):
        entry = {"rfilename": name, "size": len(data),
                 "blobId": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
        if name.endswith(".safetensors"):
            entry["lfs"] = {"sha256": sha256(data), "size": len(data), "pointerSize": 134}
        siblings.append(entry)
    for skipped in ("README.md", "tf_model.h5", "onnx/model.onnx", "pytorch_model.bin"):
        siblings.append({"rfilename": skipped, "size": 1, "blobId": "0" * 40})
    listing = json.dumps({"id": repo, "sha": commit, "siblings": siblings}).encode()
    srv.files = {f"/api/models/{repo}/revision/714eb0f?blobs=true": listing,
                 **{f"/{repo}/resolve/{commit}/{n}": d for n, d in files.items()}}
    srv.targets = {f"/{repo}/resolve/{commit}/{n}" for n in files}   # the files, not the listing
    monkeypatch.setenv("HF_ENDPOINT", srv.url().rstrip("/"))
    root = tmp_path / "data"

    def verify(path):
        assert path == str(root / repo / commit)
        assert leftovers(path) == sorted(files)            # README, onnx/, TF, .bin: not fetched
        tokenizer, model = load_classifier(path)
        with torch.no_grad():
            logits = model(**tokenizer(["a good film"], return_tensors="pt")).logits
        assert logits.shape == (1, 2)
    return root, lambda: download.hub_model(repo, "714eb0f", root), verify


CASES = {"mnist": mnist_case, "cifar10": cifar10_case, "cifar100": cifar100_case,
         "fashion-mnist": fashion_mnist_case, "cifar10-c": cifar10c_case,
         "cifar10.1": cifar101_case, "cifar10.2": cifar102_case, "cinic10": cinic10_case,
         "cifar10-r": cifar10r_case, "frost-photos": frost_case, "imdb": imdb_case,
         "lpips-alexnet_cifar": lpips_alexnet_cifar_case, "lpips-alexnet": lpips_alexnet_case,
         "published": published_case, "robustbench": robustbench_case,
         "robustbench-torchvision": robustbench_torchvision_case, "hub-distilbert": hub_case}


@pytest.mark.parametrize("name", CASES)
def test_a_downloader_names_the_url_keeps_nothing_wrong_and_resumes(name, tmp_path, file_server,
                                                                    monkeypatch):
    srv = file_server
    root, fetch, verify = CASES[name](tmp_path, srv, monkeypatch)
    for status in (500, 404):               # a server error: the message names the URL
        srv.mode, srv.status, srv.paths = "error", status, []
        with pytest.raises(OSError) as failed:
            fetch()
        assert srv.url(srv.paths[-1]) in str(failed.value)
        assert f"HTTP Error {status}" in str(failed.value)
        assert leftovers(root) == []
    srv.mode, srv.paths = "corrupt", []     # wrong bytes: neither the file nor a part is kept
    with pytest.raises(ValueError, match="was not kept") as failed:
        fetch()
    assert srv.url(srv.paths[-1]) in str(failed.value)
    assert leftovers(root) == []
    srv.mode, srv.paths = "truncate", []    # cut short: half a file kept, nothing unpacked
    with pytest.raises(OSError, match="download failed") as failed:
        fetch()
    cut = srv.paths[-1]
    assert srv.url(cut) in str(failed.value)
    parts = leftovers(root)
    assert len(parts) == 1 and parts[0].endswith(".part"), parts
    have = (root / parts[0]).stat().st_size
    assert have > 0
    srv.mode, srv.paths, srv.requests = "ok", [], []
    verify(fetch())                          # resumed: only the rest of the cut file asked for
    assert (cut, f"bytes={have}-") in list(zip(srv.paths, srv.requests))
    assert not [p for p in leftovers(root) if p.endswith(".part")]


def test_mnist_takes_the_next_mirror_when_one_fails(tmp_path, file_server, monkeypatch):
    from pabench.datasets import mnist

    root, _, verify = mnist_case(tmp_path, file_server, monkeypatch)
    file_server.files = {k.replace("/mnist/", "/second/"): v for k, v in file_server.files.items()}
    file_server.body = b"<html>not found</html>"
    file_server.mode, file_server.status = "error", 404
    file_server.targets = {f"/first/{n}" for n in mnist.MNIST_MD5}
    mirrors = (file_server.url("first/"), file_server.url("second/"))
    verify(mnist.download_torchvision(root, mirrors))


def test_hub_listing_errors_name_the_url(tmp_path, file_server, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", file_server.url().rstrip("/"))
    file_server.mode, file_server.status = "error", 404
    with pytest.raises(OSError, match=r"/api/models/org/tiny-sst2/revision/main\?blobs=true: cannot "
                                      r"list the files of org/tiny-sst2 at revision None.*404"):
        download.hub_model("org/tiny-sst2", None, tmp_path / "data")
    file_server.mode, file_server.body = "ok", b"<html>"
    with pytest.raises(ValueError, match="revision/other.*not a hub model listing"):
        download.hub_model("org/tiny-sst2", "other", tmp_path / "data")
    assert download.hub_model("package:x/y", None) == "package:x/y"
    assert download.hub_model(str(tmp_path), "main") == str(tmp_path)   # a folder: as it is
