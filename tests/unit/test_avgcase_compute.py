"""The average-case experiment's computations that choose what they compare: the linear models'
MMSE against the exact answer with n, and the case study's sigma and pool."""
import numpy as np
import pandas as pd
import pytest
import torch

from pabench.core.paths import AvgModel
from pabench.experiments.avgcase import compute, tables, training


def test_linear_mmse_approaches_the_exact_answer_with_n():
    """For a linear model the averaged g carries noise of standard deviation 1/sqrt(n) in z:
    MMSE's distance to the exact answer falls with n, Taylor's is ~0, and each row's errors
    against MC are those of the estimates it was given."""
    torch.manual_seed(0)
    model = training.build("linear", (1, 8, 8), 3).eval()
    images = np.random.default_rng(0).integers(0, 256, (20, 1, 8, 8), dtype=np.uint8)
    m = AvgModel("toy", "linear", 0.0, 1)
    settings = {"mc": {"n": 200, "adaptive": False, "confidence": 0.99}, "mmse": {"n": 2},
                "softmax": {"temperature": 1.0}}
    sigmas = (0.2, 0.8)
    estimates = compute.estimates(model, m, images, np.zeros(20, int), sigmas, settings, "cpu")
    table = compute.linear_convergence(model, m, images, [1, 400], estimates, "cpu", seed=1)
    assert set(zip(table.estimator, table.n)) == {("taylor", 0), ("mmse", 1), ("mmse", 400)}
    got = table.set_index(["sigma", "estimator", "n"])
    for s in sigmas:
        e = estimates[estimates.sigma == s].pivot(index="point", columns="estimator", values="p")
        assert 0.05 < e["linear"].mean() < 0.95   # p spread: a real test of the distance
        assert got.loc[(s, "taylor", 0), "mean_abs_diff_exact"] < 1e-4
        assert got.loc[(s, "mmse", 400), "mean_abs_diff_exact"] < 0.25 * got.loc[(s, "mmse", 1), "mean_abs_diff_exact"]
        assert got.loc[(s, "mmse", 1), "exact_abs_error"] == pytest.approx(np.abs(e["linear"] - e["mc"]).mean())
        assert got.loc[(s, "taylor", 0), "mean_abs_error"] == pytest.approx(np.abs(e["taylor"] - e["mc"]).mean())
    assert (table.seed == 1).all() and (table.n_points == 20).all()
    with pytest.raises(ValueError, match="linear"):
        compute.linear_convergence(training.build("cnn_w8", (1, 8, 8), 3).eval(), m, images,
                                   [1], estimates, "cpu")


def test_the_fewest_ties_sigma_and_the_untied_pool():
    p = pd.DataFrame({"estimator": "mmse", "sigma": np.repeat([0.1, 0.2, 0.4, 0.8], 4),
                      "p": [1, 1, 1, 0.5,   0.0005, 0.3, 0.6, 0.9995,   0.2, 0.3, 0.4, 0.9999,
                            0.1, 0.2, 0.5, 1.0]})
    # 3, 2, 1 and 1 tied: 0.4 and 0.8 tie on the fewest, the smaller wins
    assert tables.fewest_ties_sigma(p, tie=1e-3) == 0.4
    assert tables.fewest_ties_sigma(p, tie=1e-5) == 0.2   # 0.9995, 0.9999 no longer tied at 0.2, 0.4
    scores = {"mmse": np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.0, 0.9999]),
              "softmax": np.array([0.5, 0.51, 0.52, 0.53, 0.54, 0.55, 0.56, 0.57, 0.58, 0.59])}
    pool, splits = compute.untied_split(scores, 1e-3, 0.25)
    assert pool.tolist() == [1, 2, 3, 4, 5, 6, 7]   # 0, 8 and 9 tied in p_mmse
    assert [s.tolist() for s in splits["mmse"]] == [[7], [1]]
    assert [s.tolist() for s in splits["softmax"]] == [[1], [7]]


def test_case_study_splits_untied_images_at_the_fewest_ties_sigma(monkeypatch):
    """Most p_mmse at 1 (as at small sigma): the high and low images the CNN is trained on are
    drawn only from the untied pool, at the sigma the rule picks, and the row says how many of
    the images each score has tied."""
    images = np.arange(200, dtype=np.uint8).reshape(200, 1, 1, 1).repeat(8, 2).repeat(8, 3)
    mmse = np.where(np.arange(200) < 120, 1.0, np.linspace(0.2, 0.9, 200))   # 60% tied at 1
    softmax = np.where(np.arange(200) % 10 == 0, 1.0, 0.6)                   # 10% tied at 1
    seen = {}

    def p_mmse(model, x, sigma, n, **kw):
        seen["sigma"] = sigma
        return mmse

    def train(arch, lam, train_x, train_y, test_x, test_y, **kw):
        seen.setdefault("images", []).append(np.concatenate([train_x, test_x])[:, 0, 0, 0])
        return None, [{"train_accuracy": 1.0, "test_accuracy": 0.75}]

    monkeypatch.setattr(compute.est, "predict", lambda model, x: (None, torch.zeros(len(x))))
    monkeypatch.setattr(compute.est, "p_mmse", p_mmse)
    monkeypatch.setattr(compute.est, "p_softmax", lambda *a, **kw: softmax)
    monkeypatch.setattr(training, "train", train)
    estimates = pd.DataFrame({"estimator": "mmse", "sigma": np.repeat([0.1, 0.2], 4),
                              "p": [1, 1, 1, 0.5, 1, 0.2, 0.3, 0.6]})
    cfg = {"sigma": "fewest_ties", "tie": 1e-3, "mmse_n": 5, "quantile": 0.25, "epochs": 1,
           "test_fraction": 0.2, "seed": 0}
    table = compute.case_study(None, AvgModel("mnist32", "resnet18_w8", 0.0, 2), images, cfg,
                               1.0, {"batch_size": 16, "lr": 0.01}, "cpu", estimates)
    assert seen["sigma"] == 0.2
    rows = table.set_index("score")
    assert rows.tied_share.to_dict() == pytest.approx({"mmse": 0.6, "softmax": 0.1})
    untied = set(np.flatnonzero((np.arange(200) >= 120) & (np.arange(200) % 10 != 0)))
    assert (rows.pool == len(untied)).all() and (rows.per_class == len(untied) // 4).all()
    for used in seen["images"]:
        assert set(used) <= untied and len(used) == 2 * (len(untied) // 4)
    assert (table.seed == 2).all() and (table.sigma == 0.2).all()
    assert (table.test_accuracy == 0.75).all()
