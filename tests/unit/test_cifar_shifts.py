"""OODRobustBench's CIFAR-10 dataset shifts: the real downloaders run on small files in the real
formats (file:// URLs, right and wrong checksums), and the loaders on good and bad files."""
import hashlib
import importlib.util
import io
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pabench.datasets import cifar_shifts as cs

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
    assert list(root.iterdir()) == []
    with pytest.raises(ValueError, match="checksum is required"):
        cs.download_cifar10c(root, url=archive.as_uri(), md5="")
    assert list(root.iterdir()) == []

    # A corrupted archive already in place is refused before anything is unpacked.
    (root / "CIFAR-10-C.tar").write_bytes(b"not the archive")
    with pytest.raises(ValueError, match="delete it and download again"):
        cs.download_cifar10c(root, url=archive.as_uri(), md5=md5(archive))
    assert sorted(p.name for p in root.iterdir()) == ["CIFAR-10-C.tar"]


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
    assert sorted(p.name for p in root.iterdir()) == ["CIFAR-10-C.tar"]  # no half-unpacked folder


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
    assert list((root / "cifar-10.1").iterdir()) == []

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
    assert list((root / "cifar-10.2").iterdir()) == []

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


# ---------------------------------------------------------------------------------- CINIC-10

def test_cinic10(tmp_path, cifar):
    images, _ = cifar
    test = tmp_path / "src" / "test"
    expected = {}
    for label, name in enumerate(cs.CIFAR10_CLASSES):
        (test / name).mkdir(parents=True)
        for k in range(2):  # ImageNet-derived: <synset>_<number>.png
            image = images[(label + 7 * k) % 20]
            Image.fromarray(image).save(test / name / f"n0{label}_{k}.png")
            expected[(label, k)] = image
        Image.fromarray(255 - images[label]).save(test / name / f"cifar10-test-{label}.png")
    (tmp_path / "src" / "README.md").write_text("CINIC-10")
    archive = make_tar(tmp_path / "CINIC-10.tar.gz", tmp_path / "src")  # no top folder

    root = tmp_path / "data"
    with pytest.raises(ValueError, match=r"CINIC-10\.tar\.gz: checksum mismatch"):
        cs.download_cinic10(root, url=archive.as_uri(), md5="1" * 32)
    assert list(root.iterdir()) == []
    folder = cs.download_cinic10(root, url=archive.as_uri(), md5=md5(archive))
    assert folder == root / "CINIC-10"

    x, y = cs.load_cinic10(folder, n=None)
    assert x.shape == (20, 3, 32, 32) and x.dtype == np.uint8 and y.dtype == np.int64
    assert list(y) == list(range(10)) * 2  # classes interleaved: every prefix is balanced
    want = np.stack([expected[(label, k)] for k in range(2) for label in range(10)])
    np.testing.assert_array_equal(x, chw(want))  # and no CIFAR-10 image among them
    assert list(cs.load_cinic10(folder, n=12)[1]) == list(range(10)) + [0, 1]

    Image.new("RGB", (40, 32)).save(folder / "test" / "frog" / "n06_9.png")
    with pytest.raises(ValueError, match=r"n06_9\.png: expected a 32x32 image"):
        cs.load_cinic10(folder)
    shutil.rmtree(folder / "test" / "ship")
    with pytest.raises(ValueError, match="missing class folders.*: ship$"):
        cs.load_cinic10(folder)


# -------------------------------------------------------------------------------- CIFAR-10-R

def test_cifar10r(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "src" / "imagenet-r"
    sources = {}
    for wnid in list(cs.CIFAR10R_CLASSES) + ["n01443537"]:  # goldfish: not a CIFAR-10 class
        (src / wnid).mkdir(parents=True)
        sources[wnid] = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
        Image.fromarray(sources[wnid]).save(src / wnid / "art_0.png")
    Image.fromarray(rng.integers(0, 256, (48, 96), dtype=np.uint8)).save(  # grayscale, 96x48
        src / "n02410509" / "sketch_1.jpg")
    archive = make_tar(tmp_path / "imagenet-r.tar", tmp_path / "src")

    root = tmp_path / "data"
    with pytest.raises(ValueError, match=r"imagenet-r\.tar: checksum mismatch"):
        cs.download_imagenet_r(root, url=archive.as_uri(), md5="2" * 32)
    assert list(root.iterdir()) == []
    folder = cs.download_imagenet_r(root, url=archive.as_uri(), md5=md5(archive))

    x, y = cs.load_cifar10r(folder)
    assert x.shape == (45, 3, 32, 32) and x.dtype == np.uint8 and x.flags.c_contiguous
    assert list(np.bincount(y, minlength=10)) == [0, 2, 17, 6, 2, 14, 1, 0, 1, 2]
    assert list(y) == sorted(y)
    # 64x64 -> 32x32 with a box filter: each pixel is the mean of a 2x2 block.
    tabby = x[list(y).index(3)]  # the first cat class is n02123045
    box = sources["n02123045"].reshape(32, 2, 32, 2, 3).mean(axis=(1, 3))
    np.testing.assert_allclose(tabby.transpose(1, 2, 0), box, atol=1)
    bison = x[y == 4]  # the 96x48 grayscale sketch, squashed (not cropped) and made RGB
    assert (bison[1, 0] == bison[1, 1]).all() and (bison[1, 1] == bison[1, 2]).all()

    shutil.rmtree(folder / "n02410509")
    with pytest.raises(ValueError, match="missing class folders.*: n02410509$"):
        cs.load_cifar10r(folder)


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
