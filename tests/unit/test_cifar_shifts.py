"""OODRobustBench's CIFAR-10 dataset shifts: the real downloaders run on small files in the real
formats (file:// URLs: right and wrong checksums; interrupted, corrupted and failing downloads over
HTTP: tests/unit/test_downloads.py), the shipped id lists, and the loaders on good and bad files."""
import fnmatch
import hashlib
import importlib.util
import io
import shutil
import tarfile
import tomllib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pabench.datasets import cifar_shifts as cs
from conftest import REPO

FOOLBOX_DATA = Path(importlib.util.find_spec("foolbox").submodule_search_locations[0]) / "data"


@pytest.fixture(scope="module")
def cifar():
    """The 20 real CIFAR-10 test images that ship with foolbox, (20, 32, 32, 3), and labels."""
    paths = sorted(FOOLBOX_DATA.glob("cifar10_*.png"))
    images = np.stack([np.asarray(Image.open(p).convert("RGB")) for p in paths])
    labels = np.array([int(p.stem.split("_")[2]) for p in paths])
    assert images.shape == (20, 32, 32, 3)
    return images, labels


def md5(path):
    return hashlib.md5(Path(path).read_bytes()).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kept(folder):
    """What a download left in `folder`, its lock files (empty, kept for the next job) aside."""
    return sorted(p.name for p in Path(folder).iterdir() if not p.name.endswith(".lock"))


def make_tar(path, folder, arc_prefix=""):
    """Tar every file under `folder`, named `arc_prefix` + its path relative to `folder`."""
    with tarfile.open(path, "w:gz" if str(path).endswith(".gz") else "w") as tar:
        for file in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
            tar.add(file, arcname=arc_prefix + file.relative_to(folder).as_posix())
    return path


def chw(images):
    return images.transpose(0, 3, 1, 2)


def write_c_folder(folder, images, labels):
    """Our generator's layout (the published one): 5 severity blocks per corruption file."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "gaussian_noise.npy", images)
    np.save(folder / "fog.npy", 255 - images)
    np.save(folder / "labels.npy", labels.astype(np.uint8))
    return folder


# ------------------------------------------------------------------------------- CIFAR-10-C

def test_cifar10c_download_and_load(tmp_path, cifar):
    images, labels = cifar  # 5 severity blocks of 4 images
    write_c_folder(tmp_path / "src" / "CIFAR-10-C", images, labels)
    archive = make_tar(tmp_path / "CIFAR-10-C.tar", tmp_path / "src")
    root = tmp_path / "data"

    folder = cs.download_cifar10c(root, url=archive.as_uri(), md5=md5(archive))
    assert folder == root / "CIFAR-10-C" and (root / "CIFAR-10-C.tar").is_file()

    x, y = cs.load_cifar10c(folder, "gaussian_noise", 3)
    assert x.dtype == np.uint8 and x.shape == (4, 3, 32, 32) and x.flags.c_contiguous
    assert not isinstance(x, np.memmap)
    np.testing.assert_array_equal(x, chw(images[8:12]))
    assert y.dtype == np.int64 and list(y) == list(labels[8:12])

    x, y = cs.load_cifar10c(folder, "fog", 5, n=2)
    np.testing.assert_array_equal(x, chw(255 - images[16:18]))
    assert list(y) == list(labels[16:18])
    assert len(cs.load_cifar10c(folder, "fog", 1, n=100)[0]) == 4  # at most one block

    archive.unlink()  # already unpacked: nothing is fetched again
    assert cs.download_cifar10c(root, url=archive.as_uri(), md5=md5(root / "CIFAR-10-C.tar")) \
        == folder


def test_cifar10c_wrong_checksum_keeps_nothing(tmp_path, cifar):
    write_c_folder(tmp_path / "src" / "CIFAR-10-C", *cifar)
    archive = make_tar(tmp_path / "CIFAR-10-C.tar", tmp_path / "src")
    root = tmp_path / "data"
    with pytest.raises(ValueError, match=r"CIFAR-10-C\.tar: checksum mismatch"):
        cs.download_cifar10c(root, url=archive.as_uri(), md5="0" * 32)
    assert kept(root) == []
    with pytest.raises(ValueError, match="checksum is required"):
        cs.download_cifar10c(root, url=archive.as_uri(), md5="")
    assert kept(root) == []

    # A corrupted archive already in place is refused before anything is unpacked.
    (root / "CIFAR-10-C.tar").write_bytes(b"not the archive")
    with pytest.raises(ValueError, match="delete it and download again"):
        cs.download_cifar10c(root, url=archive.as_uri(), md5=md5(archive))
    assert kept(root) == ["CIFAR-10-C.tar"]


def test_unsafe_archive_is_refused(tmp_path):
    archive = tmp_path / "CIFAR-10-C.tar"
    with tarfile.open(archive, "w") as tar:
        for name in ("CIFAR-10-C/labels.npy", "../evil.npy"):
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"bad"))
    root = tmp_path / "deep" / "data"
    with pytest.raises(ValueError, match="cannot be unpacked"):
        cs.download_cifar10c(root, url=archive.as_uri(), md5=md5(archive))
    assert not (root / "evil.npy").exists()
    assert kept(root) == ["CIFAR-10-C.tar"]  # no half-unpacked folder


def test_cifar10c_reads_severity_blocks_memory_mapped(tmp_path, cifar, monkeypatch):
    folder = write_c_folder(tmp_path / "ours", *cifar)
    modes = []
    real_load = np.load
    monkeypatch.setattr(cs.np, "load", lambda *a, **k: modes.append(k.get("mmap_mode"))
                        or real_load(*a, **k))
    cs.load_cifar10c(folder, "gaussian_noise", 2)
    assert modes == ["r", "r"]


def test_cifar10c_bad_inputs(tmp_path, cifar):
    images, labels = cifar
    folder = write_c_folder(tmp_path / "c", images, labels)
    with pytest.raises(ValueError, match="unknown corruption 'gauss'.*jpeg_compression.*saturate"):
        cs.load_cifar10c(folder, "gauss", 1)
    for severity in (0, 6, 2.5, True):
        with pytest.raises(ValueError, match="severity"):
            cs.load_cifar10c(folder, "fog", severity)
    with pytest.raises(FileNotFoundError, match="snow.npy"):
        cs.load_cifar10c(folder, "snow", 1)
    with pytest.raises(ValueError, match="n must be positive"):
        cs.load_cifar10c(folder, "fog", 1, n=0)

    # float32, channels first, not 5 equal blocks, no images
    for array in (images.astype(np.float32), chw(images).copy(), images[:19], images[:0]):
        np.save(folder / "fog.npy", array)
        with pytest.raises(ValueError, match=r"fog\.npy: "):
            cs.load_cifar10c(folder, "fog", 1)
    np.save(folder / "fog.npy", np.array([object()] * 20))  # a pickle: never loaded
    with pytest.raises(ValueError, match=r"fog\.npy: not a readable \.npy file"):
        cs.load_cifar10c(folder, "fog", 1)

    for array in (np.where(labels == 3, 10, labels), labels[:10], labels.astype(float)):
        np.save(folder / "labels.npy", array)
        with pytest.raises(ValueError, match=r"labels\.npy: labels must"):
            cs.load_cifar10c(folder, "gaussian_noise", 1)


# ------------------------------------------------------------------------- CIFAR-10.1 / 10.2

def test_cifar101(tmp_path, cifar):
    images, labels = cifar
    src = tmp_path / "src"
    src.mkdir()
    np.save(src / "data.npy", images[:6])
    np.save(src / "labels.npy", labels[:6])
    urls = {part: (src / f"{part}.npy").as_uri() for part in ("data", "labels")}
    sums = {part: md5(src / f"{part}.npy") for part in ("data", "labels")}

    root = tmp_path / "bad"
    with pytest.raises(ValueError, match=r"cifar10\.1_v6_data\.npy: checksum mismatch"):
        cs.download_cifar101(root, urls, {**sums, "data": "f" * 32})
    assert kept(root / "cifar-10.1") == []

    folder = cs.download_cifar101(tmp_path / "data", urls, sums)
    x, y = cs.load_cifar101(folder)
    np.testing.assert_array_equal(x, chw(images[:6]))
    assert x.flags.c_contiguous and y.dtype == np.int64 and list(y) == list(labels[:6])

    np.save(folder / "cifar10.1_v6_labels.npy", np.arange(6) + 5)
    with pytest.raises(ValueError, match=r"cifar10\.1_v6_labels\.npy: labels must lie in 0\.\.9"):
        cs.load_cifar101(folder)
    np.save(folder / "cifar10.1_v6_data.npy", images[:6].astype(np.int16))
    with pytest.raises(ValueError, match=r"cifar10\.1_v6_data\.npy: images must be uint8"):
        cs.load_cifar101(folder)


def test_cifar102(tmp_path, cifar):
    images, labels = cifar
    src = tmp_path / "cifar102_test.npz"
    names = np.array(["airplane", None], dtype=object)  # the real file has non-array extras
    np.savez(src, images=images[5:], labels=labels[5:], label_names=names, ti_indices=np.arange(15))
    sha = hashlib.sha256(src.read_bytes()).hexdigest()

    root = tmp_path / "bad"
    with pytest.raises(ValueError, match=r"cifar102_test\.npz: checksum mismatch \(sha256"):
        cs.download_cifar102(root, url=src.as_uri(), sha256="0" * 64)
    assert kept(root / "cifar-10.2") == []

    folder = cs.download_cifar102(tmp_path / "data", url=src.as_uri(), sha256=sha)
    x, y = cs.load_cifar102(folder)
    np.testing.assert_array_equal(x, chw(images[5:]))
    assert y.dtype == np.int64 and list(y) == list(labels[5:])

    np.savez(folder / "cifar102_test.npz", images=images, labels=labels[:4])
    with pytest.raises(ValueError, match=r"cifar102_test\.npz: labels must be 20 integers"):
        cs.load_cifar102(folder)
    np.savez(folder / "cifar102_test.npz", images=images)
    with pytest.raises(ValueError, match=r"cifar102_test\.npz: missing arrays \['labels'\]"):
        cs.load_cifar102(folder)


# --------------------------------------------------------------------- OODRobustBench's id lists

def test_shipped_id_lists_match_their_pinned_sums_and_ship_with_the_package():
    folder = cs.IMAGE_IDS
    sums = dict(reversed(line.split()) for line in (folder / "SHA256SUMS").read_text().splitlines())
    assert sums == {f"{name}_image_ids.txt": digest for name, digest in cs.IMAGE_ID_SHA256.items()}
    for name, digest in sums.items():
        assert sha256((folder / name).read_bytes()) == digest, name
    assert "MIT License" in (folder / "LICENSE").read_text()
    assert "OODRobustBench" in (folder / "LICENSE").read_text()
    # a non-editable install carries every file of the folder (pyproject's package data)
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]["pabench"]
    package = REPO / "src" / "pabench"
    for f in folder.iterdir():
        assert any(fnmatch.fnmatch(f.relative_to(package).as_posix(), p) for p in patterns), f


def test_id_lists_as_the_benchmark_reads_them():
    cinic = cs.image_ids("CINIC-10")
    assert len(cinic) == 70_000 and len(set(cinic)) == 70_000
    assert cinic[:2] == ("truck/n04465666_12188.png", "bird/n01829413_1320.png")
    first = np.array([cs.CIFAR10_CLASSES.index(i.split("/")[0]) for i in cinic[:10_000]])
    assert list(np.bincount(first)) == [1034, 979, 990, 1025, 994, 973, 977, 1032, 993, 1003]
    assert not any(i.split("/")[1].startswith("cifar") for i in cinic)  # ImageNet-derived only
    r = cs.image_ids("CIFAR10-R")
    labels = np.array([cs.CIFAR10_CLASSES.index(i.split("/")[0]) for i in r])
    assert len(r) == 6_837 and list(np.bincount(labels, minlength=10)) == [
        0, 235, 3127, 1064, 246, 1626, 200, 0, 92, 247]
    assert cs.imagenet_r_name(r[0]) == "n02085620/misc_36.jpg"   # "dog/n02085620_misc_36.png"
    assert len({cs.imagenet_r_name(i).split("/")[0] for i in r}) == 44   # WordNet ids


def test_a_damaged_id_list_is_refused(tmp_path, monkeypatch):
    shutil.copytree(cs.IMAGE_IDS, tmp_path / "ids")
    path = tmp_path / "ids" / "CINIC-10_image_ids.txt"
    path.write_text(path.read_text().replace("truck/", "trucks/", 1))
    monkeypatch.setattr(cs, "IMAGE_IDS", tmp_path / "ids")
    cs.image_ids.cache_clear()
    try:
        with pytest.raises(ValueError, match="CINIC-10_image_ids.txt: checksum mismatch.*reinstall"):
            cs.image_ids("CINIC-10")
    finally:
        cs.image_ids.cache_clear()


# ---------------------------------------------------------------------------------- CINIC-10

def test_cinic10_takes_the_listed_images_in_the_lists_order(tmp_path, cifar):
    images, _ = cifar
    listed = cs.image_ids("CINIC-10")[:30]
    test = tmp_path / "src" / "test"
    for k, image_id in enumerate(listed):
        (test / image_id).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(images[k % 20] if k < 20 else 255 - images[k - 20]).save(test / image_id)
    for name in ("airplane", "bird"):   # files the list does not name: never read
        (test / name).mkdir(exist_ok=True)
        Image.fromarray(images[0]).save(test / name / "n00000000_1.png")
        Image.fromarray(images[1]).save(test / name / f"cifar10-test-{name}.png")
    (tmp_path / "src" / "README.md").write_text("CINIC-10")
    archive = make_tar(tmp_path / "CINIC-10.tar.gz", tmp_path / "src")  # no top folder

    root = tmp_path / "data"
    with pytest.raises(ValueError, match=r"CINIC-10\.tar\.gz: checksum mismatch"):
        cs.download_cinic10(root, url=archive.as_uri(), md5="1" * 32)
    assert kept(root) == []
    folder = cs.download_cinic10(root, url=archive.as_uri(), md5=md5(archive))
    assert folder == root / "CINIC-10"

    x, y = cs.load_cinic10(folder, n=30)
    assert x.shape == (30, 3, 32, 32) and x.dtype == np.uint8 and y.dtype == np.int64
    np.testing.assert_array_equal(x, chw(np.concatenate([images, 255 - images[:10]])))
    assert list(y) == [cs.CIFAR10_CLASSES.index(i.split("/")[0]) for i in listed]
    assert list(cs.load_cinic10(folder, n=3)[1]) == [9, 2, 2]   # truck, bird, bird

    with pytest.raises(ValueError, match="9970 of the 10000 listed images are missing"):
        cs.load_cinic10(folder)        # the benchmark's 10,000
    with pytest.raises(ValueError, match="n must be positive"):
        cs.load_cinic10(folder, n=0)
    Image.new("RGB", (40, 32)).save(folder / "test" / listed[5])
    with pytest.raises(ValueError, match=r"expected a 32x32 image"):
        cs.load_cinic10(folder, n=30)


# -------------------------------------------------------------------------------- CIFAR-10-R

def test_cifar10r_takes_the_listed_renditions_in_the_lists_order(tmp_path):
    rng = np.random.default_rng(0)
    listed = cs.image_ids("CIFAR10-R")[:25]
    src = tmp_path / "src" / "imagenet-r"
    sources = {}
    for image_id in listed:
        path = src / cs.imagenet_r_name(image_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        sources[image_id] = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        Image.fromarray(sources[image_id]).save(path, "PNG")   # named .jpg, read by content
    gray = src / cs.imagenet_r_name(listed[3])
    Image.fromarray(rng.integers(0, 256, (48, 96), dtype=np.uint8)).save(gray, "PNG")  # 96x48
    (src / "n01443537").mkdir()          # goldfish: not a CIFAR-10-R class, never read
    Image.fromarray(sources[listed[0]]).save(src / "n01443537" / "art_0.jpg")
    archive = make_tar(tmp_path / "imagenet-r.tar", tmp_path / "src")

    root = tmp_path / "data"
    with pytest.raises(ValueError, match=r"imagenet-r\.tar: checksum mismatch"):
        cs.download_imagenet_r(root, url=archive.as_uri(), md5="2" * 32)
    assert kept(root) == []
    folder = cs.download_imagenet_r(root, url=archive.as_uri(), md5=md5(archive))

    x, y = cs.load_cifar10r(folder, n=25)
    assert x.shape == (25, 3, 32, 32) and x.dtype == np.uint8 and x.flags.c_contiguous
    assert list(y) == [cs.CIFAR10_CLASSES.index(i.split("/")[0]) for i in listed]
    # 64x64 -> 32x32 with a box filter: each pixel is the mean of a 2x2 block, in the list's order
    for k in (0, 1, 24):
        box = sources[listed[k]].reshape(32, 2, 32, 2, 3).mean(axis=(1, 3))
        np.testing.assert_allclose(x[k].transpose(1, 2, 0), box, atol=1)
    assert (x[3, 0] == x[3, 1]).all() and (x[3, 1] == x[3, 2]).all()   # squashed, made RGB

    (folder / cs.imagenet_r_name(listed[7])).unlink()
    with pytest.raises(ValueError, match=r"1 of the 25 listed images are missing, e\.g\. "
                                         + cs.imagenet_r_name(listed[7])):
        cs.load_cifar10r(folder, n=25)


# ------------------------------------------------------------------------ ImageNet variants

def test_image_folder(tmp_path):
    jpegs = sorted(FOOLBOX_DATA.glob("imagenet_*.jpg"))
    for name, files in {"n01": jpegs[:2], "n03": jpegs[2:3]}.items():
        (tmp_path / name).mkdir()
        for f in files:
            shutil.copy(f, tmp_path / name / f.name)
    classes = ["n01", "n02", "n03"]
    with pytest.raises(ValueError, match="missing class folders.*: n02$"):
        cs.load_image_folder(tmp_path, classes, image_size=32, resize=36)

    x, y = cs.load_image_folder(tmp_path, classes, required=["n01", "n03"], image_size=32,
                                resize=36)
    assert x.shape == (3, 3, 32, 32) and x.dtype == np.uint8 and x.flags.c_contiguous
    assert y.dtype == np.int64 and list(y) == [0, 0, 2]
    x2, y2 = cs.load_image_folder(tmp_path, classes, required=[], n=2, seed=1, image_size=32,
                                  resize=36)
    rows = [next(i for i, b in enumerate(x) if (a == b).all()) for a in x2]  # a file-order subset
    assert len(set(rows)) == 2 and rows == sorted(rows) and list(y2) == list(y[rows])

    (tmp_path / "zebra").mkdir()
    with pytest.raises(ValueError, match="not among the given classes: zebra"):
        cs.load_image_folder(tmp_path, classes, required=[])


# ------------------------------------------------------------------------ frost photographs

def test_frost_photos_download_by_name_and_checksum(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    sums = {}
    for k, name in enumerate(cs.FROST_SHA256):
        Image.new("RGB", (200 + k, 180), (k, 2 * k, 3 * k)).save(src / name)
        sums[name] = sha256((src / name).read_bytes())
    url = src.as_uri() + "/{name}"
    assert set(sums) == {"frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg"}
    with pytest.raises(ValueError, match=r"frost3\.png: checksum mismatch"):
        cs.download_frost_photos(tmp_path / "bad", url, {**sums, "frost3.png": "0" * 64})
    assert kept(tmp_path / "bad" / "frost") == ["frost1.png", "frost2.png"]
    folder = cs.download_frost_photos(tmp_path / "data", url, sums)
    assert folder == tmp_path / "data" / "frost" and kept(folder) == sorted(sums)
    assert cs.FROST_URL.startswith("https://raw.githubusercontent.com/hendrycks/robustness/")
    assert all(len(v) == 64 for v in cs.FROST_SHA256.values())
