"""Frost from the reference generator's photographs (paper scale, our generator): small generated
images stand in for the photographs, which are not ours to ship."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from pabench.core.io import file_digest
from pabench.datasets import cifar_shifts as cs
from pabench.datasets.corruptions import corrupt, frost, native, weather
from pabench.datasets.corruptions.rng import Streams
from pabench.experiments.oodrb import compute

pytestmark = pytest.mark.usefixtures("one_thread")   # small tensors

# Stand-ins (H, W), smaller than the photographs (600x900 ... 315x560), large enough for a crop
SMALL = {"frost1.png": (200, 300), "frost2.png": (180, 320), "frost3.png": (190, 263),
         "frost4.jpg": (175, 263), "frost5.jpg": (247, 330)}


def write_photos(folder, sizes=SMALL, seed=0):
    """Stand-in photographs: random RGBA PNGs (varying alpha) and RGB JPEGs, at `sizes`."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, (h, w) in sizes.items():
        if name.endswith(".png"):
            Image.fromarray(rng.integers(0, 256, (h, w, 4), dtype=np.uint8), "RGBA").save(folder / name)
        else:
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(folder / name)
    return folder


def test_photo_texture_is_the_references_bilinear_shrink_by_five(tmp_path):
    rng = np.random.default_rng(1)
    rgba = rng.integers(0, 256, (323, 527, 4), dtype=np.uint8)
    Image.fromarray(rgba, "RGBA").save(tmp_path / "p.png")
    texture = frost.photo_texture(tmp_path / "p.png")
    assert texture.shape == (3, 65, 105) and texture.dtype == np.uint8   # cv2: round(0.2 n)
    # cv2.resize(fx=fy=0.2, INTER_LINEAR): half-pixel centres at scale 5, as torch's bilinear
    # with that scale factor (whose own output size floors: 64 rows, not 65); alpha dropped
    ref = F.interpolate(torch.from_numpy(rgba[..., :3].transpose(2, 0, 1)[None]).double(),
                        scale_factor=0.2, mode="bilinear", align_corners=False,
                        recompute_scale_factor=False)[0].numpy()
    assert ref.shape == (3, 64, 105)
    np.testing.assert_array_equal(texture[:, :64], ref)
    np.testing.assert_array_equal(texture[:, 64], rgba[322, 2::5, :3].T)   # the last row: 5 * 64 + 2


def test_frost_within_photos_blends_crops_of_the_photographs(tmp_path, monkeypatch):
    folder = write_photos(tmp_path / "frost")
    images = np.random.default_rng(2).integers(0, 256, (64, 32, 32, 3), dtype=np.uint8)
    before = corrupt(images, "frost", 3, seed=5)
    index = np.arange(64) + 1000
    with frost.photos(folder):
        textures = [frost.photo_texture(folder / name) for name in frost.PHOTOS]
        sizes = frost.frost_sizes()
        assert [tuple(s) for s in sizes] == [t.shape[1:] for t in textures]
        pick, top, left = weather.frost_draws(Streams(5, "frost", 3, index), 32, 32)
        assert (top <= sizes[pick, 0] - 33).all() and (left <= sizes[pick, 1] - 33).all()
        assert len(set(pick)) == 5                         # all five photographs drawn
        out = corrupt(images, "frost", 3, seed=5, index=index)
        monkeypatch.setattr(native, "load", lambda: None)  # the torch fallback: the same bytes
        np.testing.assert_array_equal(corrupt(images, "frost", 3, seed=5, index=index), out)
        monkeypatch.undo()
    for i in range(64):   # each image: 0.9 x image + 0.4 x its crop, clipped, truncated
        crop = textures[pick[i]][:, top[i]:top[i] + 32, left[i]:left[i] + 32].transpose(1, 2, 0)
        want = np.clip(0.9 * images[i].astype(float) + 0.4 * crop, 0, 255).astype(np.uint8)
        np.testing.assert_array_equal(out[i], want)
    # outside the block the procedural textures are back, and the result with them is unchanged
    np.testing.assert_array_equal(corrupt(images, "frost", 3, seed=5), before)
    assert not np.array_equal(corrupt(images, "frost", 3, seed=5, index=index), out)


def test_missing_or_too_small_photographs_are_refused(tmp_path):
    folder = write_photos(tmp_path / "small", {**SMALL, "frost4.jpg": (150, 160)})
    with pytest.raises(ValueError, match=r"too small for a 32x32 crop.*: frost4\.jpg"):
        with frost.photos(folder):
            pass
    (tmp_path / "none").mkdir()
    with pytest.raises(ValueError, match=r"frost1\.png: cannot be read as an image"):
        with frost.photos(tmp_path / "none"):
            pass
    assert frost.frost_sizes().tolist() == [[frost.SIDE, frost.SIDE]] * 5   # procedural again


def test_the_frost_job_downloads_and_uses_the_photographs_with_frost_photos(tmp_path, monkeypatch):
    src = write_photos(tmp_path / "src", seed=3)
    sums = {name: file_digest(src / name) for name in frost.PHOTOS}
    monkeypatch.setattr(cs, "FROST_URL", src.as_uri() + "/{name}")
    monkeypatch.setattr(cs, "FROST_SHA256", sums)
    o = {"corruption_source": "generator", "frost": "photos", "frost_root": str(tmp_path / "d")}
    with compute.frost_textures(o, "fog"):          # only the frost job fetches them
        assert not (tmp_path / "d").exists()
    with compute.frost_textures(o, "frost"):
        assert frost.frost_sizes()[0].tolist() == [40, 60]   # frost1.png's 200x300 stand-in / 5
    assert sorted(p.name for p in (tmp_path / "d" / "frost").glob("frost*")) == sorted(sums)
    for other in ({**o, "frost": "procedural"}, {**o, "corruption_source": "published"}):
        with compute.frost_textures(other, "frost"):
            assert frost.frost_sizes()[0].tolist() == [frost.SIDE, frost.SIDE]
