"""The corruption generator: each vectorised corruption against a per-image computation of the
reference formula with scipy / Pillow / colorsys, determinism per image, bad input, and the
CIFAR-10-C layout writer."""
import colorsys
import io
from pathlib import Path

import foolbox
import numpy as np
import pytest
import torch
from PIL import Image
from scipy import ndimage

from pabench.datasets.corruptions import ALL_CORRUPTIONS, CORRUPTIONS, SEVERITIES, corrupt
from pabench.datasets.corruptions import blur, digital, noise, weather
from pabench.datasets.corruptions.filters import bilinear
from pabench.datasets.corruptions.rng import Streams
from pabench.datasets.corruptions.write import write_cifar_c


@pytest.fixture(scope="module")
def cifar():
    """The 20 real CIFAR-10 test images that ship with foolbox, (20, 32, 32, 3) uint8."""
    files = sorted((Path(foolbox.__file__).parent / "data").glob("cifar10_*.png"))
    return np.stack([np.asarray(Image.open(f).convert("RGB")) for f in files])


def planar(images):
    return torch.from_numpy(np.ascontiguousarray(images.transpose(0, 3, 1, 2)))


def streams(n, name="t", severity=1):
    return Streams(0, name, severity, np.arange(n))


# --- determinism and bad input ----------------------------------------------------------------

@pytest.mark.parametrize("name", ALL_CORRUPTIONS)
def test_every_corruption_is_deterministic_per_image_whatever_the_batching(cifar, name):
    for severity in (1, 5):
        whole = corrupt(cifar[:8], name, severity, seed=3)
        parts = np.concatenate([corrupt(cifar[:3], name, severity, seed=3),
                                corrupt(cifar[3:8], name, severity, seed=3, start=3)])
        assert whole.dtype == np.uint8 and whole.shape == cifar[:8].shape
        np.testing.assert_array_equal(whole, parts)
        assert (whole != cifar[:8]).any(), "a corruption that changes nothing"


def test_seeds_and_severities_give_different_draws(cifar):
    a = corrupt(cifar[:4], "gaussian_noise", 3, seed=0)
    assert (a != corrupt(cifar[:4], "gaussian_noise", 3, seed=1)).any()
    noise_std = [(corrupt(cifar, "gaussian_noise", s).astype(float) - cifar).std() for s in SEVERITIES]
    assert noise_std == sorted(noise_std)


@pytest.mark.parametrize("kwargs, match", [
    ({"name": "fros"}, "unknown corruption 'fros'"),
    ({"severity": 0}, "severity must be one of"),
    ({"severity": 6}, "severity must be one of"),
    ({"severity": True}, "severity must be one of"),
])
def test_bad_names_and_severities_are_refused(cifar, kwargs, match):
    args = {"name": "fog", "severity": 2} | kwargs
    with pytest.raises(ValueError, match=match):
        corrupt(cifar[:2], **args)


def test_bad_images_are_refused(cifar):
    with pytest.raises(ValueError, match="uint8"):
        corrupt(cifar[:2].astype(np.float32), "fog", 1)
    with pytest.raises(ValueError, match=r"\(N, H, W, 3\)"):
        corrupt(cifar[:2].transpose(0, 3, 1, 2), "fog", 1)


# --- against per-image computations of the reference formulas --------------------------------

def test_gaussian_blur_is_scipys_gaussian_filter_with_nearest_borders(cifar):
    for severity, sigma in zip(SEVERITIES, blur.GAUSSIAN_BLUR):
        ours = blur.gaussian_blur(planar(cifar), severity, None).numpy().transpose(0, 2, 3, 1)
        ref = np.stack([np.clip(ndimage.gaussian_filter(im / 255.0, (sigma, sigma, 0), mode="nearest"),
                                0, 1) * 255 for im in cifar])
        np.testing.assert_allclose(ours, ref, atol=1e-6)


def test_defocus_blur_is_a_mirrored_correlation_with_the_antialiased_disk(cifar):
    k = blur.disk_kernel(0.3, 0.4)                       # radius < 1: only the 3x3 Gaussian
    g = np.exp(-np.arange(-1, 2) ** 2 / (2 * 0.4 ** 2))
    np.testing.assert_allclose(k, np.outer(g, g) / np.outer(g, g).sum(), rtol=1e-6)
    for severity, (radius, alias) in zip(SEVERITIES, blur.DEFOCUS):
        kernel = blur.disk_kernel(radius, alias).astype(np.float64)
        assert abs(kernel.sum() - 1) < 1e-6
        ours = blur.defocus_blur(planar(cifar), severity, None).numpy().transpose(0, 2, 3, 1)
        ref = np.stack([np.clip(np.stack([ndimage.correlate(im[..., c] / 255.0, kernel, mode="mirror")
                                          for c in range(3)], -1), 0, 1) * 255 for im in cifar])
        np.testing.assert_allclose(ours, ref, atol=1e-4)


def test_clipped_zoom_is_scipys_zoom_of_the_centre(cifar):
    x = planar(cifar).double() / 255
    for factor in (1.01, 1.05, 1.13, 1.26, 1.75, 2.25):
        ours = blur.clipped_zoom(x, factor).numpy()
        ch = int(np.ceil(32 / factor))
        top = (32 - ch) // 2
        for i in (0, 7):
            z = ndimage.zoom(x[i, :, top:top + ch, top:top + ch].numpy(), (1, factor, factor), order=1)
            trim = (z.shape[1] - 32) // 2
            np.testing.assert_allclose(ours[i], z[:, trim:trim + 32, trim:trim + 32], atol=1e-9)


def test_glass_displacement_matches_the_reference_loop_of_view_swaps():
    rng = np.random.default_rng(0)
    y = torch.from_numpy(rng.integers(0, 256, (2, 3, 32, 32)).astype(np.float64))
    d = rng.integers(-1, 1, (2, 2, 30, 30))
    ours = blur.displace(y, torch.from_numpy(d[:, 1]), torch.from_numpy(d[:, 0]), 1).numpy()
    for b in range(2):
        img = y[b].numpy().transpose(1, 2, 0).copy()          # the reference works on (H, W, C)
        for h in range(31, 1, -1):
            for w in range(31, 1, -1):
                dx, dy = d[b, 0, h - 2, w - 2], d[b, 1, h - 2, w - 2]
                img[h, w], img[h + dy, w + dx] = img[h + dy, w + dx], img[h, w]
        np.testing.assert_array_equal(ours[b], img.transpose(2, 0, 1))


def test_motion_blur_at_angle_zero_trails_along_the_row_with_edges_repeated():
    rng = np.random.default_rng(1)
    x = torch.from_numpy(rng.integers(0, 256, (1, 3, 8, 12)).astype(np.uint8))
    k = blur.motion_kernel(6, 2)
    assert len(k) == 13 and abs(k.sum() - 1) < 1e-12
    out = blur.motion_blur_u8(x, 6, 2, np.array([0.0])).numpy()[0]
    xi = x.numpy()[0].astype(float)
    cols = np.minimum(np.arange(12)[:, None] + np.arange(13)[None, :], 11)      # (col, tap)
    ref = np.floor((xi[:, :, cols] * k).sum(-1) + 0.5)
    np.testing.assert_array_equal(out, ref)
    flat = torch.full((1, 3, 8, 8), 77, dtype=torch.uint8)
    assert (blur.motion_blur_u8(flat, 9, 2.5, np.array([33.0])) == 77).all()


@pytest.mark.parametrize("mode, scipy_mode", [("nearest", "nearest"), ("mirror", "mirror"),
                                              ("reflect", "reflect")])
def test_bilinear_sampling_matches_scipy_map_coordinates(mode, scipy_mode):
    rng = np.random.default_rng(2)
    img = rng.random((2, 3, 9, 11))
    rows, cols = rng.uniform(-4, 13, (2, 5, 6)), rng.uniform(-4, 15, (2, 5, 6))
    ours = bilinear(torch.from_numpy(img), torch.from_numpy(rows), torch.from_numpy(cols), mode)
    for b in range(2):
        for c in range(3):
            ref = ndimage.map_coordinates(img[b, c], [rows[b], cols[b]], order=1, mode=scipy_mode)
            np.testing.assert_allclose(ours[b, c].numpy(), ref, atol=1e-12)


def test_pixelate_is_pillows_box_resize_down_and_up(cifar):
    for severity, c in zip(SEVERITIES, digital.PIXELATE):
        ours = corrupt(cifar, "pixelate", severity)
        side = int(32 * c)
        ref = np.stack([np.asarray(Image.fromarray(im).resize((side, side), Image.BOX)
                                   .resize((32, 32), Image.BOX)) for im in cifar])
        diff = np.abs(ours.astype(int) - ref)
        assert diff.max() <= 1 and (diff > 0).mean() < 0.01


def test_jpeg_is_close_to_libjpeg_through_pillow(cifar):
    for severity, quality in zip(SEVERITIES, digital.JPEG):
        ours = corrupt(cifar, "jpeg_compression", severity).astype(int)
        ref = []
        for im in cifar:
            buf = io.BytesIO()
            Image.fromarray(im).save(buf, "JPEG", quality=quality)
            ref.append(np.asarray(Image.open(buf)))
        diff = np.abs(ours - np.stack(ref))
        # Our float DCT against libjpeg's integer one: a coefficient near a rounding boundary
        # may quantise the other way (measured: mean 0.18-0.38 levels, 99th percentile 4-7).
        assert diff.mean() < 0.5 and np.percentile(diff, 99) <= 8, (quality, diff.mean())
        assert np.abs(ours - cifar).mean() > 10 * diff.mean()


def test_brightness_and_saturate_are_the_hsv_round_trips(cifar):
    pixels = cifar[:2].reshape(-1, 3) / 255.0
    pixels[:5] = [0, 0, 0]                                 # black and grey pixels: edge cases
    pixels[5:10] = 0.5
    images = np.round(pixels * 255).astype(np.uint8).reshape(2, 32, 32, 3)
    hsv = [colorsys.rgb_to_hsv(*p) for p in images.reshape(-1, 3) / 255.0]
    for severity in (1, 5):
        c = digital.BRIGHTNESS[severity - 1]
        ref = [colorsys.hsv_to_rgb(h, s, min(v + c, 1)) for h, s, v in hsv]
        ours = digital.brightness(planar(images), severity, None).numpy().transpose(0, 2, 3, 1)
        np.testing.assert_allclose(ours.reshape(-1, 3), np.array(ref) * 255, atol=1e-6)
    for severity, (f, shift) in zip(SEVERITIES, digital.SATURATE):   # 4, 5: greys turn red
        ref = [colorsys.hsv_to_rgb(h, min(max(s * f + shift, 0), 1), v) for h, s, v in hsv]
        ours = digital.saturate(planar(images), severity, None).numpy().transpose(0, 2, 3, 1)
        np.testing.assert_allclose(ours.reshape(-1, 3), np.array(ref) * 255, atol=1e-6)


def test_contrast_scales_each_channel_around_its_mean(cifar):
    ours = digital.contrast(planar(cifar), 2, None).numpy().transpose(0, 2, 3, 1)
    x = cifar / 255.0
    m = x.mean((1, 2), keepdims=True)
    np.testing.assert_allclose(ours, np.clip((x - m) * 0.5 + m, 0, 1) * 255, atol=1e-9)


def test_noise_draws_have_the_stated_distributions():
    grey = torch.full((400, 3, 32, 32), 128, dtype=torch.uint8)
    g = noise.gaussian_noise(grey, 5, streams(400)).numpy() / 255 - 128 / 255
    # N(0, 0.1^2) truncated to whole levels: the mean drops by half a level, the variance grows
    # by a uniform's 1/12 level^2
    assert abs(g.mean() + 0.5 / 255) < 0.0005
    assert abs(g.std() - np.sqrt(0.1 ** 2 + 1 / 12 / 255 ** 2)) < 0.001
    for level in (3, 128):
        x = torch.full((200, 3, 32, 32), level, dtype=torch.uint8)
        k = (noise.shot_noise(x, 4, streams(200)).numpy() / 255 * 75).round()   # 75 photons
        lam = level / 255 * 75
        assert abs(k.mean() - lam) < 0.02 * lam + 0.01 and abs(k.var() - lam) < 0.05 * lam + 0.01
    out = noise.impulse_noise(grey, 5, streams(400)).numpy()
    changed = out != 128
    assert abs(changed.mean() - 0.07) < 0.002
    assert abs((out[changed] == 255).mean() - 0.5) < 0.02 and set(np.unique(out)) == {0, 128, 255}


def test_fog_plasma_is_normalised_and_frost_blends_the_textures(cifar):
    maps = weather.plasma_fractal(streams(5), 5, 32, 2.0)
    assert maps.shape == (5, 32, 32)
    assert (maps.amin((1, 2)) == 0).all() and (maps.amax((1, 2)) == 1).all()
    assert not torch.equal(maps[0], maps[1])
    out = weather.frost(planar(cifar), 5, streams(20)).numpy()
    residual = (out - 0.75 * planar(cifar).numpy()) / 0.45   # the crop of a texture, where unclipped
    ok = out < 255
    assert residual[ok].min() >= -1e-9 and residual[ok].max() <= 255 + 1e-9


def _canny_per_pixel(u8):
    """OpenCV's Canny (3x3 Sobel with repeated borders, L1 magnitude, thresholds 50 and 150) of
    one image: a pixel above 50 is a peak if its magnitude beats the neighbour before it along the
    gradient's 45-degree sector and is at least the one after (both strictly on diagonals);
    peaks 8-connected to a peak above 150 are edges."""
    g = u8.astype(np.int64)
    dx, dy = ndimage.sobel(g, axis=1, mode="nearest"), ndimage.sobel(g, axis=0, mode="nearest")
    mag = np.abs(dx) + np.abs(dy)
    padded = np.pad(mag, 1)
    peak = np.zeros(mag.shape, bool)
    for i, j in zip(*np.nonzero(mag > 50)):
        ax, ay, m = abs(dx[i, j]), abs(dy[i, j]), mag[i, j]
        if ay < np.tan(np.pi / 8) * ax:
            before, after, tie = (0, -1), (0, 1), True
        elif ay > np.tan(3 * np.pi / 8) * ax:
            before, after, tie = (-1, 0), (1, 0), True
        else:
            s = 1 if dx[i, j] * dy[i, j] > 0 else -1
            before, after, tie = (-1, -s), (1, s), False
        b, a = padded[i + 1 + before[0], j + 1 + before[1]], padded[i + 1 + after[0], j + 1 + after[1]]
        peak[i, j] = m > b and (m >= a if tie else m > a)
    labels, _ = ndimage.label(peak, structure=np.ones((3, 3)))
    return peak & np.isin(labels, labels[peak & (mag > 150)])


def _chamfer_per_pixel(edges):
    """OpenCV's 5x5 chamfer distance (float32 steps 1, 1.4, 2.1969) to the nearest edge in closed
    form: a move (big, small) costs small knight moves and big - 2 small unit steps when
    big >= 2 small, else big - small knight moves and 2 small - big diagonals."""
    a, b, c = (float(np.float32(v)) for v in (1, 1.4, 2.1969))
    ei, ej = np.nonzero(edges)
    if len(ei) == 0:
        return np.full(edges.shape, np.float32(1e6))
    ii, jj = np.mgrid[:edges.shape[0], :edges.shape[1]]
    di, dj = np.abs(ii[..., None] - ei), np.abs(jj[..., None] - ej)
    big, small = np.maximum(di, dj), np.minimum(di, dj)
    cost = np.where(big >= 2 * small, small * c + (big - 2 * small) * a, (big - small) * c + (2 * small - big) * b)
    return cost.min(-1).astype(np.float32)          # exact in float64, rounded once


def _equalize_per_image(u8):
    """OpenCV's equalizeHist: level v -> round(255 #(min < pixel <= v) / #(pixel > min)), float32."""
    values, counts = np.unique(u8, return_counts=True)
    if len(values) == 1:
        return u8
    scale = np.float32(255) / np.float32(u8.size - counts[0])
    lut = np.rint((np.cumsum(counts) - counts[0]).astype(np.float32) * scale).astype(np.uint8)
    return lut[np.searchsorted(values, u8)]


def _spatter_per_image(img, severity, z):
    """The reference generator's spatter of one image from its standard normal draws z (32, 32),
    step by step with scipy: liquid (1-3) shades pale turquoise by the layer times its embossed,
    equalised distance to the layer's Canny edges; mud (4-5) pastes brown."""
    mean, std, sigma, threshold, intensity, mud = weather.SPATTER[severity - 1]
    x = img.astype(np.float32) / np.float32(255)
    layer = ndimage.gaussian_filter((np.float32(mean) + np.float32(std) * z).astype(np.float64), sigma,
                                    mode="nearest")
    layer[layer < threshold] = 0
    if mud:
        m = ndimage.gaussian_filter((layer > threshold).astype(np.float32), intensity, mode="nearest")
        m[m < 0.8] = 0
        brown = np.array([63, 42, 20], np.float32) / np.float32(255)
        return np.uint8(np.clip(x * (1 - m[..., None]) + brown * m[..., None], 0, 1) * np.float32(255))
    u8 = (np.floor(layer * 255).astype(np.int64) % 256).astype(np.uint8)     # np.uint8 on x86
    dist = np.minimum(_chamfer_per_pixel(_canny_per_pixel(u8)), np.float32(20)).astype(np.float64)
    ones = np.ones((3, 3))
    dist = (ndimage.correlate(dist, ones, mode="mirror") * (1 / 9)).astype(np.float32).astype(np.uint8)
    dist = _equalize_per_image(dist).astype(np.int64)
    dist = ndimage.correlate(dist, np.array([[-2, -1, 0], [-1, 1, 1], [0, 1, 2]]), mode="mirror")
    dist = np.rint(ndimage.correlate(dist.clip(0, 255), ones.astype(np.int64), mode="mirror") / 9)
    m = u8.astype(np.float32) * dist.astype(np.float32)
    m = m / m.max() * np.float32(intensity)
    turquoise = np.array([175, 238, 238], np.float32) / np.float32(255)
    return np.uint8(np.clip(x + m[..., None] * turquoise, 0, 1) * np.float32(255))


def test_spatter_is_the_reference_steps_redone_per_image(cifar):
    """Every severity's bytes against the reference's steps redone image by image with scipy
    (independent algorithms: per-pixel suppression, labelled hysteresis, closed-form chamfer
    distance) from the same normal draws."""
    for severity in SEVERITIES:
        ours = corrupt(cifar, "spatter", severity, seed=4)
        z = Streams(4, "spatter", severity, np.arange(20)).normal(32, 32).numpy()
        for i in range(20):
            np.testing.assert_array_equal(ours[i], _spatter_per_image(cifar[i], severity, z[i]),
                                          err_msg=f"severity {severity}, image {i}")


def test_spatter_opencv_steps_on_known_inputs():
    from pabench.datasets.corruptions import liquid

    one = np.zeros((1, 9, 9), bool)
    one[0, 4, 4] = True
    d = liquid.chamfer_distance(one)[0]
    f = np.float32
    for (i, j), v in {(4, 5): 1, (5, 5): f(1.4), (5, 6): f(2.1969), (6, 6): f(2.8), (4, 8): 4,
                      (0, 0): f(5.6)}.items():
        assert d[i, j] == v, (i, j, d[i, j], v)
    assert (liquid.chamfer_distance(np.zeros((1, 5, 5), bool)) > 20).all()   # no edge: far
    img = np.array([[[10, 10], [20, 30]], [[7, 7], [7, 7]]], np.uint8)
    # (20 - 10): one of two pixels above the minimum, 127.5, rounds half to even; one level: kept
    np.testing.assert_array_equal(liquid.equalize_hist(img), [[[0, 0], [128, 255]], [[7, 7], [7, 7]]])
    square = np.zeros((1, 8, 8), np.uint8)
    square[0, 2:6, 2:6] = 200
    np.testing.assert_array_equal(liquid.canny(square, 50, 150)[0], _canny_per_pixel(square[0]))
    assert liquid.canny(square, 50, 150).sum() > 0


# --- the CIFAR-10-C layout --------------------------------------------------------------------

def test_writer_makes_the_published_layout_the_same_for_any_split(cifar, tmp_path):
    labels = np.arange(20) % 10
    names = ["fog", "glass_blur"]
    write_cifar_c(cifar, labels, tmp_path / "a", names, workers=1, chunk=7, progress=False)
    write_cifar_c(cifar, labels, tmp_path / "b", names, workers=2, chunk=20, progress=False)
    for name in names:
        a = np.load(tmp_path / "a" / f"{name}.npy")
        assert a.shape == (100, 32, 32, 3) and a.dtype == np.uint8
        np.testing.assert_array_equal(a, np.load(tmp_path / "b" / f"{name}.npy"))
        for s in SEVERITIES:                            # severity s is block s - 1
            np.testing.assert_array_equal(a[(s - 1) * 20:s * 20], corrupt(cifar, name, s))
    np.testing.assert_array_equal(np.load(tmp_path / "a" / "labels.npy"), np.tile(labels, 5))
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["fog.npy", "glass_blur.npy", "labels.npy"]


def test_writer_refuses_bad_input_and_leaves_nothing_half_written(cifar, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown corruption 'smog'"):
        write_cifar_c(cifar, np.zeros(20), tmp_path, ["fog", "smog"], progress=False)
    with pytest.raises(ValueError, match="labels must have shape"):
        write_cifar_c(cifar, np.zeros(3), tmp_path, ["fog"], progress=False)
    import pabench.datasets.corruptions.write as write

    def broken(images, name, severity, seed, start):
        if name == "contrast" and severity == 4:
            raise RuntimeError("killed")
        return corrupt(images, name, severity, seed, start=start)

    monkeypatch.setattr(write, "corrupt", broken)
    with pytest.raises(RuntimeError, match="killed"):   # fog complete, contrast not: neither
        write_cifar_c(cifar, np.zeros(20), tmp_path / "c", ["fog", "contrast"], workers=1,
                      progress=False)
    assert not (tmp_path / "c").exists()         # nothing published, the folder it made removed
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "mine.txt").write_text("kept")
    with pytest.raises(RuntimeError, match="killed"):
        write_cifar_c(cifar, np.zeros(20), tmp_path / "d", ["fog", "contrast"], workers=1,
                      progress=False)
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["mine.txt"]


def test_cli_writes_the_layout_and_names_a_bad_corruption(cifar, tmp_path, capsys):
    from pabench.cli import main

    np.save(tmp_path / "images.npy", cifar[:4].transpose(0, 3, 1, 2))      # the project's layout
    np.save(tmp_path / "labels.npy", np.arange(4))
    assert main(["corrupt", str(tmp_path / "images.npy"), str(tmp_path / "out"), "--labels",
                 str(tmp_path / "labels.npy"), "--corruptions", "contrast,fog", "--workers", "1"]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "fog.npy")[8:12], corrupt(cifar[:4], "fog", 3))
    assert main(["corrupt", str(tmp_path / "images.npy"), str(tmp_path / "bad"),
                 "--corruptions", "fog,hail"]) != 0
    assert "unknown corruption 'hail'" in capsys.readouterr().err
    assert not (tmp_path / "bad" / "fog.npy").exists()


def test_sample_grid_shows_every_corruption_and_severity(cifar, tmp_path):
    from pabench.experiments.oodrb.figures import corruption_grid

    table = corruption_grid(cifar, tmp_path / "grid.png", names=["fog", "pixelate"], per_row=1)
    assert Image.open(tmp_path / "grid.png").size[0] > 100
    assert list(table.corruption) == ["fog"] * 5 + ["pixelate"] * 5 and list(table.severity) == [1, 2, 3, 4, 5] * 2
    fog = table[table.corruption == "fog"].mean_abs_change.to_numpy()
    assert (fog > 0).all() and fog[-1] > fog[0]


# --- the fused C kernels against their numpy / PyTorch fallbacks ------------------------------

def test_native_kernels_give_the_fallbacks_bytes(cifar, monkeypatch):
    from pabench.datasets.corruptions import native

    if native.load() is None:
        pytest.skip("no C compiler: only the numpy / PyTorch path exists here")
    images = np.concatenate([cifar, np.zeros_like(cifar[:1]), np.full_like(cifar[:1], 255)])
    fast = {(n, s): corrupt(images, n, s, seed=5, start=7) for n in native.FUSED for s in SEVERITIES}
    monkeypatch.setattr(native, "load", lambda: None)
    for (name, severity), out in fast.items():
        slow = corrupt(images, name, severity, seed=5, start=7)
        # the same float operations in the same order: identical bytes, not just close
        np.testing.assert_array_equal(out, slow, err_msg=f"{name} {severity}")


def test_shot_noise_thresholds_decide_like_the_double_cdf():
    """The kernel compares float32 uniforms with float32 thresholds (the smallest float32 above
    each CDF value): `threshold <= u` must be `cdf < u` exactly, for CDF values that are and are
    not float32 numbers, and for u right at, below and above them.  The uniforms are
    (k + 0.5) 2^-24, never below 2^-25, so smaller CDF values only need thresholds that every
    uniform passes; comparisons near them are not tested: inside the full test run they
    disagreed exactly where the thresholds are float32 denormals (CDF values from about 1e-38
    down, e.g. e^-88 at k = 0), as when denormals are flushed to zero; no uniform falls there."""
    from pabench.datasets.corruptions import native

    cdf, _, _ = noise.poisson_tables(noise.SHOT[0])
    thr, _, _ = native._shot_tables(noise.SHOT[0])
    smallest_u = np.float32(2.0 ** -25)
    assert (thr[cdf < smallest_u] <= smallest_u).all()
    exact = np.float32([0.25, 0.5, 0.75]).astype(np.float64)     # float32 numbers themselves
    keep = cdf >= smallest_u
    values = np.concatenate([cdf[keep], exact])
    limits = np.concatenate([thr[keep], np.nextafter(exact.astype(np.float32), np.float32(2))])
    near = values.astype(np.float32)
    for u in (near, np.nextafter(near, np.float32(0)), np.nextafter(near, np.float32(2))):
        np.testing.assert_array_equal(limits <= u, values < u.astype(np.float64))


def test_uniform_draws_do_not_depend_on_the_hashing_chunk(monkeypatch):
    from pabench.datasets.corruptions import rng

    def draws():
        s = Streams(3, "frost", 2, np.arange(50))
        return [s.uniform(1), s.uniform(7, 5), s.uniform(3)]

    big = draws()
    monkeypatch.setattr(rng, "_CHUNK", 3)
    for a, b in zip(big, draws()):
        np.testing.assert_array_equal(a, b)


def test_zoom_blur_sums_every_factor_in_the_references_order(cifar):
    """Each distinct zoom is computed once and added as often as the reference adds it: the
    same bytes as adding clipped_zoom at every factor."""
    x = torch.from_numpy(np.ascontiguousarray(cifar.transpose(0, 3, 1, 2)))
    for severity in SEVERITIES:
        factors = np.arange(1, blur.ZOOM_END[severity - 1], 0.01)
        xf = x.float() / 255
        total = torch.zeros_like(xf)
        for f in factors:
            total += blur.clipped_zoom(xf, f)
        expected = ((xf + total) / (len(factors) + 1)).clamp_(0, 1) * 255
        assert torch.equal(blur.zoom_blur(x, severity, None), expected), severity


NEW_KERNELS = ("jpeg_compression", "elastic_transform", "snow")


def test_native_kernels_give_the_fallbacks_bytes_at_other_image_sizes(monkeypatch):
    """Non-square, small (narrower than the snow streaks and the elastic padding) and larger
    images: the kernels' border and tail paths (Gaussian noise: the 5 x 37 images have 555
    values, an odd count, whose last 11 go through the scalar loop after the groups of 16)."""
    from pabench.datasets.corruptions import native

    if native.load() is None:
        pytest.skip("no C compiler: only the numpy / PyTorch path exists here")
    rng = np.random.default_rng(4)
    shapes = [(9, 20, 28, 3), (2, 8, 8, 3), (2, 48, 32, 3), (2, 5, 37, 3)]  # 9: 8 lanes + 1
    cases = [(rng.integers(0, 256, shape, dtype=np.uint8), name, s)
             for shape in shapes
             for name in NEW_KERNELS + ("motion_blur", "defocus_blur", "pixelate", "frost", "fog",
                                        "gaussian_noise")
             for s in SEVERITIES
             if name != "jpeg_compression" or (shape[1] % 16 == 0 and shape[2] % 16 == 0)]
    fast = [corrupt(im, name, s, seed=1) for im, name, s in cases]
    monkeypatch.setattr(native, "load", lambda: None)
    for (im, name, s), out in zip(cases, fast):
        np.testing.assert_array_equal(out, corrupt(im, name, s, seed=1), err_msg=f"{name} {s} {im.shape}")


def test_brightness_table_holds_every_byte_the_formula_gives(monkeypatch):
    """Every (pixel maximum m, byte x <= m) pair, in every channel position, black pixels
    included: the native look-up table gives the fallback's bytes at every severity."""
    from pabench.datasets.corruptions import native

    if native.load() is None:
        pytest.skip("no C compiler")
    m, x = np.array([(m, x) for m in range(256) for x in range(m + 1)]).T
    pixels = np.concatenate([np.stack([m, x, x // 2], 1), np.stack([x, x // 3, m], 1),
                             np.stack([x // 2, m, x], 1)]).astype(np.uint8)
    images = pixels[: len(pixels) // 64 * 64].reshape(-1, 8, 8, 3)
    fast = [corrupt(images, "brightness", s) for s in SEVERITIES]
    monkeypatch.setattr(native, "load", lambda: None)
    for s, out in zip(SEVERITIES, fast):
        np.testing.assert_array_equal(out, corrupt(images, "brightness", s), err_msg=str(s))


def test_defocus_on_images_smaller_than_its_kernel(monkeypatch):
    """The padded layout mirrors borders as the fallback does even where the 5 x 5 kernel is
    wider than the image (the mirror wraps more than once) and rows are not a multiple of 8."""
    from pabench.datasets.corruptions import native

    if native.load() is None:
        pytest.skip("no C compiler")
    rng = np.random.default_rng(8)
    cases = [(rng.integers(0, 256, shape, dtype=np.uint8), s)
             for shape in [(1, 2, 3, 3), (3, 1, 1, 3), (2, 3, 9, 3)] for s in SEVERITIES]
    fast = [corrupt(im, "defocus_blur", s) for im, s in cases]
    monkeypatch.setattr(native, "load", lambda: None)
    for (im, s), out in zip(cases, fast):
        np.testing.assert_array_equal(out, corrupt(im, "defocus_blur", s), err_msg=f"{s} {im.shape}")


def test_pixelate_block_transposes_match_the_byte_by_byte_moves(monkeypatch):
    """The AVX-512 byte-block transposes between images and lanes move the same bytes as the
    portable loops (a build without VBMI), tails and partial groups of 8 included."""
    from pabench.core.native import compile_library
    from pabench.datasets.corruptions import native

    if native.load() is None:
        pytest.skip("no C compiler")
    portable = compile_library(native.SOURCE, native.FLAGS + ("-mno-avx512vbmi",))
    if portable is None:
        pytest.skip("this compiler has no -mno-avx512vbmi (not x86): only the byte loop exists")
    portable.cc_pixelate.argtypes = native._SIGNATURES["cc_pixelate"]
    rng = np.random.default_rng(7)
    shapes = [(20, 32, 32, 3), (9, 20, 28, 3), (3, 5, 37, 3), (11, 33, 31, 3)]  # n % 8: 0, 0, 3, 1
    cases = [(rng.integers(0, 256, shape, dtype=np.uint8), s) for shape in shapes for s in SEVERITIES]
    fast = [corrupt(im, "pixelate", s) for im, s in cases]
    monkeypatch.setattr(native, "load", lambda: portable)
    for (im, s), out in zip(cases, fast):
        np.testing.assert_array_equal(out, corrupt(im, "pixelate", s), err_msg=f"{s} {im.shape}")


@pytest.mark.parametrize("native_path", [True, False])
def test_new_kernels_depend_only_on_seed_severity_and_image_index(cifar, monkeypatch, native_path):
    """Any batch composition: images shuffled with their indices, or one at a time, give each
    image the same bytes."""
    from pabench.datasets.corruptions import native

    if not native_path:
        monkeypatch.setattr(native, "load", lambda: None)
    elif native.load() is None:
        pytest.skip("no C compiler")
    perm = np.random.default_rng(0).permutation(20)
    for name in NEW_KERNELS:
        for severity in SEVERITIES:
            whole = corrupt(cifar, name, severity, seed=9)
            np.testing.assert_array_equal(corrupt(cifar[perm], name, severity, seed=9, index=perm),
                                          whole[perm], err_msg=f"{name} {severity}")
            one = corrupt(cifar[perm[:1]], name, severity, seed=9, index=perm[:1])
            np.testing.assert_array_equal(one[0], whole[perm[0]])
            assert (whole != corrupt(cifar, name, severity, seed=10)).any() or name == "jpeg_compression"


def test_fixed_order_filters_match_the_library_ones(cifar):
    """The fixed summation orders that native.c repeats compute the usual operations: the 8x8
    DCT (d X d^T and back), the elastic field's Gaussian (scipy's gaussian_filter, reflected
    borders, truncate 3) and the snow layer's zoom (scipy.ndimage.zoom of the centre)."""
    from pabench.datasets.corruptions.filters import gaussian_kernel, gaussian_taps

    x = torch.from_numpy(np.random.default_rng(3).uniform(-128, 128, (6, 8, 8)))
    d = torch.from_numpy(digital.DCT)
    coef = digital._along(digital._along(x, d, -2), d, -1)
    np.testing.assert_allclose(coef.numpy(), (d @ x @ d.T).numpy(), atol=1e-10)
    np.testing.assert_allclose(digital._along(digital._along(coef, d.T, -2), d.T, -1).numpy(),
                               x.numpy(), atol=1e-10)
    field = np.random.default_rng(5).uniform(-1, 1, (2, 2, 32, 32))
    for sigma in (0.96, 1.92, 6.4):
        ours = gaussian_taps(torch.from_numpy(field), gaussian_kernel(sigma, 3), "reflect").numpy()
        ref = ndimage.gaussian_filter(field, (0, 0, sigma, sigma), mode="reflect", truncate=3)
        np.testing.assert_allclose(ours, ref, atol=1e-12)
    layer = torch.from_numpy(cifar[:3, :, :, 0].astype(np.float32) / 255)
    for factor in (1.0, 1.25, 1.75, 2.25):
        ours = weather.zoom_layer(layer, factor).numpy()
        ch = int(np.ceil(32 / factor))
        top = (32 - ch) // 2
        for i in range(3):
            z = ndimage.zoom(layer[i, top:top + ch, top:top + ch].double().numpy(), factor, order=1)
            trim = (z.shape[0] - 32) // 2
            np.testing.assert_allclose(ours[i], z[trim:trim + 32, trim:trim + 32], atol=1e-6)


def test_the_inverse_normal_cdf_is_erfinv_to_float_precision():
    from pabench.datasets.corruptions.rng import normal_from_uniform

    u = np.concatenate([(np.arange(2 ** 16, dtype=np.float64) + 0.5) / 2 ** 16,
                        (np.arange(1, 4096) + 0.5) * 2.0 ** -24]).astype(np.float32)  # deep tail too
    u = np.concatenate([u, np.float32(1) - u])
    exact = torch.erfinv(torch.from_numpy(2 * u.astype(np.float64) - 1)).numpy() * np.sqrt(2)
    np.testing.assert_allclose(normal_from_uniform(u), exact, rtol=2e-6, atol=2e-7)


def test_a_kept_value_survives_the_float32_unit_round_trip():
    """Impulse noise's native kernel copies kept values: (x / 255) * 255 is x in float32."""
    x = np.arange(256, dtype=np.float32)
    np.testing.assert_array_equal((x / np.float32(255) * np.float32(255)).astype(np.uint8), x)


def test_gaussian_noise_is_the_truncated_formula_at_the_exact_quantile():
    """The fallback's byte is trunc(clip(x/255 + c z, 0, 1) * 255) with z the exact normal
    quantile of the draw's (k + 0.5) 2^-24, computed here in float64 for every level x."""
    from scipy.special import ndtri

    rs = streams(6)
    k = rs.bits(32, 32, 3)
    z = ndtri((k.astype(np.float64) + 0.5) * 2.0 ** -24)
    levels = np.tile(np.arange(256, dtype=np.uint8), 72).reshape(6, 32, 32, 3)   # each level 72 times
    for severity in SEVERITIES:
        ours = noise.gaussian_noise(torch.from_numpy(levels.transpose(0, 3, 1, 2)), severity, streams(6))
        c = noise.GAUSSIAN[severity - 1]
        expected = np.floor(np.clip(levels / 255 + c * z, 0, 1) * 255)
        np.testing.assert_array_equal(ours.numpy().transpose(0, 2, 3, 1), expected, err_msg=severity)


@pytest.mark.parametrize("portable", [False, True])
def test_gaussian_kernel_offsets_are_the_searchs_for_every_draw(portable):
    """All 2^24 draws at every severity: the kernel's fast path (polynomial quantile, trusted
    away from whole numbers) and its exact search give the thresholds' offset, with AVX-512 and in
    the portable scalar loop (a build without it)."""
    from pabench.core.native import compile_library
    from pabench.datasets.corruptions import native

    lib = native.load()
    if lib is None:
        pytest.skip("no C compiler")
    if portable:
        lib = compile_library(native.SOURCE, native.FLAGS + ("-mno-avx512f",))
        if lib is None:
            pytest.skip("this compiler has no -mno-avx512f (not x86): only the scalar loop exists")
        lib.cc_gaussian_offsets.argtypes = native._SIGNATURES["cc_gaussian_offsets"]
    k = np.arange(2 ** 24, dtype=np.uint32)
    d = np.empty(2 ** 24, np.int32)
    for severity in SEVERITIES:
        coef, thr, scale, guard = native.gaussian_tables(severity)
        lib.cc_gaussian_offsets(k.ctypes.data, d.ctypes.data, len(k), coef.ctypes.data,
                                thr.ctypes.data, scale, guard)
        expected = np.searchsorted(thr, k, side="right").astype(np.int32) - 256
        assert (d == expected).all(), (severity, np.flatnonzero(d != expected)[:5])


def test_gaussian_quantile_fit_is_within_its_stated_error():
    """The guard assumes the float32 polynomial is within GUARD_Z of Phi^-1 on every segment;
    checked on 2^20 points of q in [2^-13, 1/2), evaluated in float32 as the kernel does."""
    from scipy.special import ndtri

    from pabench.datasets.corruptions import native

    coef = native.gaussian_quantile_fit()
    kk = np.arange(2 ** 11, 2 ** 23, 8, dtype=np.uint32)           # q = (kk + 0.5) 2^-24
    q = ((kk.astype(np.float32) + np.float32(0.5)) * np.float32(2.0 ** -24)).astype(np.float32)
    bits = q.view(np.uint32)
    seg = (bits >> 22).astype(np.int64) - (127 - 13) * 2
    t = ((bits & 0x3FFFFF) | 0x3F800000).view(np.float32) * np.float32(4) - np.float32(5)
    p = coef[4, seg]
    for j in (3, 2, 1, 0):
        p = p * t + coef[j, seg]                        # float32 (the kernel fuses them)
    assert seg.min() == 0 and seg.max() == 23
    err = np.abs(p.astype(np.float64) - ndtri(q.astype(np.float64))).max()
    assert err < native.GUARD_Z / 1.5, err
