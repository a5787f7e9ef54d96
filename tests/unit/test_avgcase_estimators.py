"""Average-case robustness estimators: the linear model is the built-in check (Lemma 1 is exact
for it), gradients against autograd's full Jacobian, adaptive MC, bad inputs, the CLI."""
import logging

import numpy as np
import pytest
import torch
from torch import nn

from pabench import cli
from pabench.metrics.avgcase import estimators as est
from pabench.metrics.avgcase.gradients import decision_functions

SIGMAS = (0.05, 0.2, 0.5, 1.0, 2.0)


def linear_model(d=30, c=6, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Flatten(), nn.Linear(d, c)).double().eval()
    x = torch.randn(40, d, dtype=torch.float64) * 0.5
    return model, x


def exact(model, x, sigma):
    layer = model[1]
    return est.p_linear(layer.weight.detach(), layer.bias.detach(), x, sigma)


@pytest.mark.parametrize("sigma", SIGMAS)
def test_taylor_equals_the_exact_linear_answer(sigma):
    model, x = linear_model()
    p = exact(model, x, sigma)
    assert 0.05 < p.min() and p.max() <= 1.0 and p.std() > 0.02  # spread, not all 0 or 1
    np.testing.assert_allclose(est.p_taylor(model, x, sigma), p, atol=1e-6)
    np.testing.assert_allclose(est.estimate("linear", model, x, sigma), p, atol=1e-6)


@pytest.mark.parametrize("sigma", (0.2, 1.0))
def test_mc_agrees_within_its_binomial_error(sigma):
    model, x = linear_model()
    n = 2000
    p = exact(model, x, sigma)
    mc = est.p_mc(model, x, sigma, n, seed=1)
    assert (mc.n == n).all()
    bound = 4.5 * np.sqrt(p * (1 - p) / n) + 1e-3  # 4.5 standard errors: a false alarm ~1e-5
    assert (np.abs(mc.p - p) <= bound).all(), np.max(np.abs(mc.p - p) / bound)


def test_mmse_converges_to_the_exact_answer_as_n_grows():
    model, x = linear_model()
    x, sigma = x[:20], 1.0
    p = exact(model, x, sigma)
    errors = [np.mean([np.abs(est.p_mmse(model, x, sigma, n, seed=s) - p).mean() for s in range(2)])
              for n in (2, 20, 200)]
    assert errors[0] > errors[1] > errors[2]  # noise of order 1/sqrt(n) in z
    assert errors[2] < 0.3 * errors[0]


def test_mvs_variants_use_the_multivariate_sigmoid():
    model, x = linear_model()
    lin = est.linearised(model, x)
    z = lin.z(0.3)
    expected = 1.0 / (1.0 + np.exp(-z).sum(1))
    np.testing.assert_allclose(est.p_taylor(model, x, 0.3, mvs=True), expected, rtol=1e-9)


def test_points_over_the_cdf_tolerance_are_counted_and_logged(caplog, tmp_path, capsys):
    """A linear model on 2 features with 10 classes: its 9 decision-function gradients span 2
    dimensions, so UU^T + 1e-5 I is near-singular and the normal CDF stops some points at its
    sample cap above its tolerance.  The estimators return those error estimates and log how
    many points exceed it (it was silent)."""
    model, x = linear_model(d=2, c=10, seed=3)
    with caplog.at_level(logging.WARNING, logger="pabench.avgcase"):
        p, err = est.p_taylor(model, x, 1.0, return_error=True)
    over = est.cdf_over_tolerance(err)
    assert 0 < over < len(x) and over == (err > est.ABSEPS).sum()
    assert f"sigma 1: {over} of {len(x)} points ended with error estimates above" in caplog.text
    np.testing.assert_array_equal(est.p_taylor(model, x, 1.0), p)   # the same p without errors
    layer = model[1]
    p_lin, err_lin = est.p_linear(layer.weight.detach(), layer.bias.detach(), x, 1.0,
                                  return_error=True)
    assert est.cdf_over_tolerance(err_lin) == over
    _, err_mvs = est.p_mmse(model, x, 1.0, 2, mvs=True, return_error=True)
    assert (err_mvs == 0).all()                     # the mv-sigmoid is a closed form
    torch.jit.script(model.float()).save(str(tmp_path / "model.pt"))
    np.save(tmp_path / "x.npy", x.float().numpy())
    assert cli.main(["avgcase", str(tmp_path / "model.pt"), str(tmp_path / "x.npy"), "--sigma",
                     "1", "--estimators", "taylor,taylor_mvs"]) == 0
    assert "linearised estimates have normal-CDF error estimates above" in capsys.readouterr().out


def test_decision_function_gradients_match_the_full_jacobian():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Tanh(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5))
    model = model.double().eval()
    x = torch.randn(3, 1, 8, 8, dtype=torch.float64)
    target = model(x).argmax(1)
    g, grad = decision_functions(model, x, target)
    full = torch.autograd.functional.jacobian(model, x)  # (B, C, B, 1, 8, 8)
    logits = model(x).detach()
    for b in range(3):
        rest = [i for i in range(5) if i != target[b]]
        jb = full[b, :, b].reshape(5, -1)
        torch.testing.assert_close(g[b], logits[b, target[b]] - logits[b, rest])
        torch.testing.assert_close(grad[b], jb[target[b]] - jb[rest])


def test_adaptive_mc_stops_robust_points_early_at_equal_accuracy():
    model, x = linear_model()
    x = torch.cat([x, x * 20])  # far from the boundaries: p near 1, decided after few copies
    n = 4000
    fixed = est.p_mc(model, x, 0.2, n, seed=2)
    adaptive = est.p_mc(model, x, 0.2, n, seed=3, adaptive=True)
    assert adaptive.n.min() < n / 5 and adaptive.n.max() <= n
    # Each interval holds at 99%: of the ~40 points not sure either way, one or two may miss.
    tol = est.equal_accuracy_tol(n)
    err = np.abs(adaptive.p - exact(model, x, 0.2))
    assert (err > tol).sum() <= 2 and err.max() <= 1.5 * tol
    assert adaptive.n.sum() < 0.6 * fixed.n.sum()
    # A point always classified as t needs log(alpha/2) / log(1 - tol) copies for its interval
    # to be within tol, and none can stop with fewer: that is the first round, so such a point
    # stops right there.
    sure = adaptive.p == 1
    need = np.ceil(np.log(0.005) / np.log(1 - tol))
    assert sure.sum() >= 10 and (adaptive.n[sure] == need).all()
    # Later rounds are sized to what the estimate needs: in all, within 5% of the copies the
    # final estimates need (the fewest m whose interval at p * m hits would be within tol; n
    # where none is).
    m = np.arange(16, n + 1)
    fits = [est._mc_half_width(np.round(p * m), m, 0.99) <= tol for p in adaptive.p]
    needed = [m[f.argmax()] if f.any() else n for f in fits]
    assert adaptive.n.sum() <= 1.05 * np.sum(needed)


@pytest.mark.parametrize("n", [1, 2, 16, 17])
def test_adaptive_mc_with_few_copies_draws_at_most_n(n):
    """Below the first round's size (and at n = 1, where the equal-accuracy tolerance exceeds 1)
    adaptive sampling draws every point's n copies, or stops it early, but never draws more."""
    model, x = linear_model()
    result = est.p_mc(model, x, 0.2, n, seed=1, adaptive=True)
    assert result.n.max() == n and result.n.min() >= min(n, 16)


def test_bfloat16_mc_classifies_the_same_copies_almost_alike():
    model, x = linear_model()
    model, x = model.float(), x.float()
    fp32 = est.p_mc(model, x, 0.3, 2000, seed=4)
    seen = []
    model[-1].register_forward_hook(lambda module, inputs, out: seen.append(out.dtype))
    bf16 = est.p_mc(model, x, 0.3, 2000, seed=4, bfloat16=True)
    assert torch.bfloat16 in seen   # the copies ran under bfloat16 autocast
    gap = np.abs(bf16.p - fp32.p)   # the same noise: the share of copies whose class changed
    assert gap.max() <= 0.02 and gap.mean() <= 0.005


def test_softmax_is_the_confidence_in_the_clean_prediction():
    model, x = linear_model()
    probs = torch.softmax(model(x) / 2.0, 1).max(1).values.detach().numpy()
    np.testing.assert_allclose(est.p_softmax(model, x, 2.0), probs, rtol=1e-9)
    smoothed = est.p_softmax(model, x, 2.0, sigma=1e-6, n=3)  # tiny noise: the same
    np.testing.assert_allclose(smoothed, probs, atol=1e-5)


class NaNModel(nn.Module):
    def forward(self, x):
        out = x.flatten(1)[:, :3].clone()
        out[0, 0] = float("nan")
        return out


@pytest.mark.parametrize("call, message", [
    (lambda m, x: est.estimate("mc", m, x, 0.0), "sigma must be a finite number > 0, got 0.0"),
    (lambda m, x: est.estimate("mc", m, x, -1), "got -1"),
    (lambda m, x: est.p_mc(m, x, float("nan")), "got nan"),
    (lambda m, x: est.estimate("mmse", m, x, 0.1, n=0), "n must be an integer >= 1, got 0"),
    (lambda m, x: est.p_mc(m, x, 0.1, n=-3), "got -3"),
    (lambda m, x: est.estimate("tayler", m, x, 0.1), "unknown estimator 'tayler'"),
    (lambda m, x: est.estimate("taylor", m, x.clone().fill_(float("inf")), 0.1), "the inputs"),
    (lambda m, x: est.estimate("taylor", NaNModel(), x, 0.1), "the model's logits"),
    (lambda m, x: est.estimate("taylor", nn.Sequential(nn.Flatten(), nn.Linear(30, 1)).double(),
                               x, 0.1), "at least 2 classes"),
    (lambda m, x: est.p_softmax(m, x, 0.0), "temperature"),
    (lambda m, x: est.p_mc(m, x, 0.1, 100, adaptive=True, tol=0), "tol must be > 0, got 0.0"),
])
def test_bad_input_is_named_before_any_work(call, message):
    model, x = linear_model()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(model, x)


def test_cli_prints_means_and_writes_every_point(tmp_path, capsys):
    model, x = linear_model()
    model = model.float()
    path = tmp_path / "model.pt"
    torch.jit.script(model).save(str(path))
    np.save(tmp_path / "x.npy", x.float().numpy())
    out = tmp_path / "p.csv"
    code = cli.main(["avgcase", str(path), str(tmp_path / "x.npy"), "--sigma", "0.2", "1",
                     "--estimators", "taylor,linear,mc", "--n-mc", "500", "--out", str(out)])
    assert code == 0
    import pandas as pd

    table = pd.read_csv(out)
    assert len(table) == 2 * 3 * len(x)
    wide = table.pivot_table(index=["sigma", "point"], columns="estimator", values="p")
    np.testing.assert_allclose(wide.taylor, wide.linear, atol=1e-5)
    assert table.cdf_error[table.estimator == "mc"].isna().all()
    assert (table.cdf_error[table.estimator != "mc"] <= est.ABSEPS).all()
    assert "taylor" in capsys.readouterr().out
    assert cli.main(["avgcase", str(path), str(tmp_path / "x.npy"), "--sigma", "0"]) == 2
    assert "sigma must be" in capsys.readouterr().err
    assert cli.main(["avgcase", str(path), str(tmp_path / "x.npy"), "--sigma", "1",
                     "--estimators", "magic"]) == 2
    assert "unknown estimator 'magic'" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_linear_weights_leave_a_cuda_model_where_it_is():
    """The exact linear answer reads W and b without moving the model: it once moved it to the
    CPU inside inference mode, and the MMSE linearisation after it failed on the GPU (seen in
    the rehearsal on an H200)."""
    model, x = linear_model()
    want = exact(model, x, 0.2)
    model, x = model.cuda(), x.cuda()
    weight, _ = est.linear_weights(model, x)
    assert torch.equal(weight, model[1].weight.detach().cpu())
    assert all(p.device.type == "cuda" and not p.is_inference() for p in model.parameters())
    assert np.abs(est.p_mmse(model, x, 0.2, 500, seed=0) - want).max() < 0.05


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_normal_cdf_runs_on_the_models_device():
    model, x = linear_model(c=12)
    lin = est.linearised(model.cuda(), x.cuda())
    assert lin.device.startswith("cuda")
    np.testing.assert_allclose(est.from_linearisation(lin, 0.5), exact(model.cpu(), x, 0.5),
                               atol=1e-4)


@pytest.mark.parametrize("arch", ["linear", "cnn"])
def test_one_job_per_sigma_stacks_to_the_rows_of_one_job(arch):
    """avgcase.split_sigmas: sigma number k draws with seed + k wherever it is computed, so the
    per-sigma tables stacked in order equal the table of all sigmas at once."""
    import pandas as pd

    from pabench.core.paths import AvgModel
    from pabench.experiments.avgcase import compute
    from pabench.experiments.avgcase.training import build

    torch.manual_seed(0)
    model = build(arch, (1, 8, 8), 3).eval()
    images = np.random.default_rng(0).integers(0, 256, (12, 1, 8, 8), dtype=np.uint8)
    labels = np.arange(12) % 3
    settings = {"mc": {"n": 64, "adaptive": True, "confidence": 0.99}, "mmse": {"n": 3},
                "softmax": {"temperature": 1.0}}
    m, sigmas = AvgModel("toy", arch, 0.0, 4), (0.1, 0.3, 0.6)

    def run(sigmas_, first=0):
        return compute.estimates(model, m, images, labels, sigmas_, settings, "cpu", seed=4,
                                 first=first)

    whole = run(sigmas)
    split = pd.concat([run(sigmas[k:k + 1], first=k) for k in range(len(sigmas))],
                      ignore_index=True)
    pd.testing.assert_frame_equal(split, whole)
    assert set(whole.estimator) >= {"mc", "mmse", "taylor", "softmax"}
    # numbered from 0 instead, the later sigmas would draw other noise
    assert not run(sigmas[2:]).equals(whole[whole.sigma == sigmas[2]].reset_index(drop=True))
