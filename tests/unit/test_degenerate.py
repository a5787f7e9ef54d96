"""Degenerate models: the near-chance rule, PA at beta* = 0 everywhere, and the flag the
adversarial and domain-generalisation scoring write into their tidy tables."""
import math

import numpy as np
import pandas as pd
import pytest

from pabench.core.paths import AttackRun, Eps
from pabench.experiments.adversarial.scoring import score_records
from pabench.experiments.dg.compute import shift_ratio_pa
from pabench.metrics.settings import PASettings
from pabench.reporting import degenerate

pytestmark = pytest.mark.usefixtures("one_thread")


def test_chance_bar_is_the_exact_binomial_tail_of_a_guesser():
    from scipy.stats import binom, norm

    alpha = norm.sf(3)
    for n, k in [(320, 2), (100, 10), (400, 4), (12, 1000), (50, 3)]:
        hits = round(degenerate.chance_bar(n, k) * n)
        # a random guesser reaches the bar at most as often as a 3-sigma normal draw, one hit less
        # more often
        assert binom.sf(hits - 1, n, 1 / k) <= alpha < binom.sf(hits - 2, n, 1 / k)
    assert degenerate.chance_bar(320, 2) == pytest.approx(188 / 320)   # 0.5875
    assert degenerate.chance_bar(100, 10) == pytest.approx(0.21)
    assert degenerate.near_chance(0.5, 320, 2) and degenerate.near_chance(187 / 320, 320, 2)
    assert not degenerate.near_chance(188 / 320, 320, 2) and not degenerate.near_chance(0.6, 320, 2)
    assert degenerate.near_chance(0.25, 400, 4) and not degenerate.near_chance(0.35, 400, 4)
    assert degenerate.near_chance(0.0, 100, 10)  # worse than chance is no evidence either
    # one lucky hit in 12 images of 1,000 classes (a guesser scores it 1.2% of the time) is not
    # learning; the normal approximation, 1/K + 3 standard errors = 0.028, took it for learning
    assert degenerate.near_chance(1 / 12, 12, 1000) and not degenerate.near_chance(2 / 12, 12, 1000)
    with pytest.raises(ValueError, match="K >= 2"):
        degenerate.chance_bar(100, 1)


def test_pa_collapse_needs_beta_zero_in_every_differing_view():
    inf = math.inf
    assert degenerate.pa_collapsed([inf, 0.0, 0.0])        # AR = 0 (identical sets) left out
    assert not degenerate.pa_collapsed([inf, 0.0, 0.3])
    assert not degenerate.pa_collapsed([inf, inf]) and not degenerate.pa_collapsed([])
    assert degenerate.flag(0.95, 320, 2, [0.0, 0.0]) and not degenerate.flag(0.95, 320, 2, [0.0, 1.0])


def _record(clean, labels, flip_all: bool, rng):
    adv = np.roll(clean, 1, axis=1) if flip_all else clean + 0.01 * rng.normal(size=clean.shape)
    return {"clean_scores": clean, "adv_scores": adv, "linf": rng.uniform(0, 0.1, len(labels)),
            "labels": labels, "success": adv.argmax(1) != labels}


def test_adversarial_scores_flag_a_model_at_chance():
    rng = np.random.default_rng(0)
    n, k = 200, 5
    labels = rng.integers(0, k, n)
    learned = np.eye(k)[labels] * 4 + rng.normal(size=(n, k))
    guessing = rng.normal(size=(n, k))                  # ignores the image: about 1/K correct
    run = AttackRun("mnist32", "m", "pgd", Eps.of(0.1), 0)
    settings = PASettings(epochs=20)
    good = score_records({run: _record(learned, labels, True, rng)}, [0.0, 0.5, 1.0], settings)
    bad = score_records({run: _record(guessing, labels, True, rng)}, [0.0, 0.5, 1.0], settings)
    assert good.clean_accuracy.iloc[0] > 0.9 and not good.degenerate.any()
    assert bad.clean_accuracy.iloc[0] < degenerate.chance_bar(n, k) and bad.degenerate.all()


def _dg_scores(rng, n: int, kind: str) -> dict:
    """Logits of env0..env2 of paired images: a model that is "robust" (its posteriors agree
    across the environments), "fragile" (confident, but independent noise under every shift)
    or "dead" (the same zero logits for every image: uniform posteriors)."""
    labels = rng.integers(0, 2, n)
    base = np.eye(2)[labels] * 3 + rng.normal(size=(n, 2))
    scores = {}
    for env in ("env0", "env1", "env2"):
        scores[env] = {"robust": base + 0.3 * rng.normal(size=(n, 2)), "dead": np.zeros((n, 2)),
                       "fragile": base if env == "env0" else rng.normal(size=(n, 2))}[kind]
        scores[f"{env}/labels"] = labels
    return scores


def test_dg_pa_collapse_flags_a_dead_model_not_a_fragile_one():
    """beta* = 0 in every view flags a model whatever its validation accuracy; a model that only
    loses all agreement on the fully shifted views (SR = 1) is the non-robustness the experiment
    measures, not a degenerate model: the partly shifted views still agree."""
    rng = np.random.default_rng(1)
    settings = PASettings(epochs=10)
    classes = np.array([0, 1])
    scored = {kind: shift_ratio_pa(_dg_scores(rng, 200, kind), classes, [0.5, 1.0], settings)
              for kind in ("robust", "fragile", "dead")}
    assert (scored["dead"].beta_exact == 0).all() and (scored["robust"].beta_exact > 0).all()
    fragile = scored["fragile"].set_index("shift_ratio").beta_exact
    assert (fragile[1.0] == 0).any() and (fragile[0.5] > 0).all()
    assert degenerate.flag(0.95, 320, 2, scored["dead"].beta_exact)
    assert not degenerate.flag(0.95, 320, 2, scored["fragile"].beta_exact)
    assert not degenerate.flag(0.95, 320, 2, scored["robust"].beta_exact)
    assert degenerate.flag(0.52, 320, 2, scored["robust"].beta_exact)   # near chance on validation


def test_caption_note_counts_flagged_model_instances():
    table = pd.DataFrame({"model": ["a", "a", "a", "b", "b", "b"], "seed": [0, 0, 1, 0, 1, 2],
                          "degenerate": [True, True, False, False, False, True]})
    assert degenerate.note(table, ["model", "seed"]).startswith("2 of 5 models near chance")
    meta = degenerate.annotate({"caption": "c"}, table, ["model", "seed"])
    assert "not evidence" in meta["degenerate"]
    clean = table.assign(degenerate=False)
    assert degenerate.note(clean, ["model", "seed"]) is None
    assert degenerate.annotate({"caption": "c"}, clean, ["model"]) == {"caption": "c"}


def _scores_file(tmp_path, model: str, seed, learned: bool) -> str:
    """One model run's adv_score table (real scoring), written where the rule writes it."""
    from pabench.core import paths
    from pabench.core.io import write_csv

    rng = np.random.default_rng([0 if seed is None else seed, len(model)])
    n, k = 100, 5
    labels = rng.integers(0, k, n)
    clean = (np.eye(k)[labels] * 4 if learned else 0) + rng.normal(size=(n, k))
    run = AttackRun("mnist32", model, "pgd", Eps.of(0.1), seed)
    table = score_records({run: _record(clean, labels, True, rng)}, [0.0, 0.5, 1.0], PASettings(epochs=10))
    table.insert(0, "seed", seed)
    table.insert(0, "model", model)
    table.insert(0, "dataset", "mnist32")
    path = tmp_path / paths.adv_scores("mnist32", paths.adv_run(model, seed), "pgd")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_csv(path, table)
    return str(path)


def test_adversarial_figure_averages_the_seeds_and_counts_the_degenerate_ones(tmp_path, monkeypatch):
    from PIL import Image

    from pabench.core import paths
    from pabench.core.io import read_table, write_csv
    from pabench.experiments.adversarial import figures, tables

    files = [_scores_file(tmp_path, "undefended", 0, True), _scores_file(tmp_path, "undefended", 1, False),
             _scores_file(tmp_path, "Standard", None, True)]
    out = tuple(str(tmp_path / f"fig3.{e}") for e in ("pdf", "png", "csv"))
    figures.ar_figure({"tables": files}, out, {"caption": "c", "scale": "test"}, "pgd",
                      ["undefended", "Standard"])
    data = read_table(out[2]).set_index(["model", "ar"])
    runs = pd.concat([read_table(f) for f in files])
    undefended = runs[runs.model == "undefended"].groupby("ar").logpa_adam
    assert data.loc["undefended"].logpa_adam.to_numpy() == pytest.approx(undefended.mean().to_numpy())
    assert data.loc["undefended"].logpa_adam_std.to_numpy() == pytest.approx(undefended.std(ddof=0).to_numpy())
    assert (data.loc["undefended"].n_seeds == 2).all() and (data.loc["undefended"].n_degenerate == 1).all()
    assert (data.loc["Standard"].n_seeds == 1).all() and (data.loc["Standard"].n_degenerate == 0).all()
    assert "degenerate: 1 of 3 models near chance" in Image.open(out[1]).info["Description"]

    # The model table lists every run with its flag; the pretrained model has no seed.
    monkeypatch.chdir(tmp_path)  # the histories' paths are the workflow's, relative
    runs.to_csv("adv.csv", index=False)
    histories = [paths.zoo_history("mnist32", "undefended", seed) for seed in (0, 1)]
    for path in histories:
        write_csv(path, pd.DataFrame({"epoch": [1, 2], "arch": "cnn"}))
    models = tables.models({"table": "adv.csv", "histories": histories}, ["undefended", "Standard"],
                           {"eps": 0.2})
    assert models[["model", "seed", "degenerate"]].values.tolist() == [
        ["undefended", 0, False], ["undefended", 1, True], ["Standard", "", False]]


def test_dg_figure7_and_table1_count_the_seeds_near_chance(tmp_path):
    from pabench.core.io import read_table
    from pabench.experiments.dg import figures, tables

    pa = pd.DataFrame([{"algorithm": a, "seed": s, "n_shift_factors": k, "shift_ratio": 1.0,
                        "logpa_adam": -k, "logpa_exact": -k, "afr_true": 0.9, "beta_exact": 1.0,
                        "degenerate": a == "erm" and s == 1}
                       for a in ("erm", "irm") for s in (0, 1) for k in (1, 2)])
    path = tmp_path / "pa.csv"
    pa.to_csv(path, index=False)
    out = tuple(str(tmp_path / f"fig7.{e}") for e in ("pdf", "png", "csv"))
    figures.fig7({"table": str(path)}, out, {"caption": "c", "scale": "test"})
    data = read_table(out[2])
    assert set(data[data.algorithm == "erm"].n_degenerate) == {1}
    assert set(data[data.algorithm == "irm"].n_degenerate) == {0} and set(data.n_seeds) == {2}
    ms = pd.DataFrame([{"setting": "ZGO", "algorithm": "irm", "seed": s, "env": f"test_{t}",
                        "acc_best_acc": 0.5, "acc_best_pa": 0.6, "degenerate": s == 2}
                       for s in (0, 1, 2) for t in (1, 2)])
    ms.to_csv(tmp_path / "ms.csv", index=False)
    t1 = tables.table1({"results": str(tmp_path / "ms.csv")}, ["ZGO"], ["test_1", "test_2"])
    assert t1["seeds"].tolist() == [3] and t1["seeds near chance"].tolist() == [1]
