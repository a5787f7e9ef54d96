"""Figures 1 and 2 of the PA paper, checked against what they must show."""
import math

import numpy as np
import pytest

from pabench.experiments.toy.compute import bernoulli_predictions, bernoulli_table, gaussian_illustration, \
    random_classifier_closed_form

ADAM = {"lr": 0.1, "batch_size": 64, "beta0": 1.0}


@pytest.fixture(scope="module")
def table():
    return bernoulli_table(n_samples=300, n_probabilities=5, seeds=[0, 1], solvers=["exact", "adam"],
                           adam_epochs=20, adam=ADAM)


def test_robust_classifiers_get_maximal_pa(table):
    exact = table[(table.solver == "exact") & table.classifier.isin(["perfect", "constant"])]
    assert np.all(np.isinf(exact.beta))
    np.testing.assert_allclose(exact.pa, math.log(2))


def test_accuracy_is_driven_by_task_performance(table):
    t = table[table.solver == "exact"]
    assert np.all(t[t.classifier == "perfect"].accuracy == 1.0)
    const = t[t.classifier == "constant"]
    rng_free = 1 - const.p  # fraction of zeros among the targets, up to sampling noise
    assert np.all(np.abs(const.accuracy - rng_free) < 0.1)


def test_random_classifier_matches_the_closed_form(table):
    """Bernoulli example: one-hot scores with m agreeing and d disagreeing samples."""
    for _, row in table[(table.solver == "exact") & (table.classifier == "random")].iterrows():
        rng = np.random.default_rng([row.seed, int(round(row.p * 4))])
        _, preds = bernoulli_predictions(row.p, 300, rng)
        a, b = preds["random"]
        agree = int((a == b).sum())
        beta, logpa = random_classifier_closed_form(agree, 300 - agree)
        assert row.beta == pytest.approx(beta, rel=1e-9, abs=1e-12)
        assert row.logpa == pytest.approx(logpa, rel=1e-10, abs=1e-12)


def test_random_classifier_is_least_robust_at_p_half(table):
    rand = table[(table.solver == "exact") & (table.classifier == "random")]
    by_p = rand.groupby("p").pa.mean()
    assert by_p.loc[0.5] < by_p.loc[0.25] < by_p.loc[0.0]
    assert by_p.loc[0.5] < 0.05


def test_adam_never_beats_exact(table):
    pivot = table.pivot_table(index=["p", "seed", "classifier"], columns="solver", values="logpa")
    assert np.all(pivot["exact"] >= pivot["adam"] - 1e-9)


def test_gaussian_illustration_has_an_interior_optimum():
    r = gaussian_illustration(n_observations=20, noise_std=1.0, grid_size=301, grid_limit=3.0,
                              beta_factor=10.0, curve_points=61, seed=0)
    assert 0 < r["beta_star"] < math.inf
    assert r["pa_at"]["optimal"] > r["pa_at"]["too low"]
    assert r["pa_at"]["optimal"] > r["pa_at"]["too high"]
    assert r["curve_pa"].max() <= r["pa_star"] + 1e-9
    assert 0 <= r["pa_star"] <= math.log(301)
