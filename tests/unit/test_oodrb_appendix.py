"""The OODRobustBench appendix figures (pabench.experiments.oodrb.appendix) on small synthetic
tables: each R^2, gap and zoo is checked against a number computed here by hand (numpy's
correlation, not the package's fit), and every figure is written."""
import numpy as np
import pandas as pd
import pytest

from pabench.experiments.oodrb import analysis as A
from pabench.experiments.oodrb import appendix
from test_oodrb_analysis import (META, NATURALS, THREATS, drawn, make_attacks, make_predictions,
                                 make_shifts, outputs, write, zoo)


def r2(x, y) -> float:
    """R^2 of the least-squares line = the squared correlation (by hand)."""
    return float(np.corrcoef(x, y)[0, 1] ** 2)


# (model, method, ID accuracy, ID robustness, OOD accuracy, OOD robustness), percent.  The three
# inferior models (accuracy + robustness < 120) lie off the line OOD = 0.5 ID of the others, so
# removing them raises R^2; the two RobustBench models alone are the NC zoo.
HAND = [("a1", "madry", 70.0, 30.0, 50.0, 5.0),      # total 100
        ("a2", "trades", 75.0, 40.0, 20.0, 30.0),    # total 115
        ("a3", "madry", 80.0, 35.0, 60.0, 4.0),      # total 115
        ("a4", "trades", 85.0, 45.0, 42.0, 23.0),    # total 130
        ("a5", "madry", 88.0, 50.0, 44.5, 24.0),     # total 138
        ("r1", "robustbench", 90.0, 55.0, 45.0, 28.5),  # total 145
        ("r2", "robustbench", 92.0, 60.0, 46.5, 30.0),  # total 152
        ("st", "undefended", 95.0, 0.0, 60.0, 0.0)]     # never in an AT zoo


def hand_shifts() -> pd.DataFrame:
    rows = []
    for model, method, acc, rob, o_acc, o_rob in HAND:
        base = {"model": model, "method": method, "severity": 0}
        rows.append({**base, "shift": "id", "family": "id", "accuracy": acc / 100,
                     "robustness": rob / 100})
        rows.append({**base, "shift": "fog", "family": "natural", "accuracy": o_acc / 100,
                     "robustness": o_rob / 100})
        rows.append({**base, "shift": "l2", "family": "threat", "accuracy": np.nan,
                     "robustness": (0.8 * rob if method != "undefended" else 0) / 100})
    return pd.DataFrame(rows)


def test_threshold_fits_give_the_hand_computed_r2_of_each_zoo():
    f = A.threshold_fits(hand_shifts(), thresholds=(110, 120, 140, 150))
    fog = f[f.target == "fog"].set_index(["zoo", "pair"])
    at = [h for h in HAND if h[1] != "undefended"]

    def expected(keep, pair):
        rows = [h for h in at if keep(h)]
        x = [h[2] if pair == "acc-acc" else h[3] for h in rows]
        y = [h[4] if pair == "acc-acc" else h[5] for h in rows]
        return len(rows), (r2(x, y) if len(rows) > 2 else np.nan)

    zoos = {"All": lambda h: True, ">= 110": lambda h: h[2] + h[3] >= 110,
            ">= 120": lambda h: h[2] + h[3] >= 120, ">= 140": lambda h: h[2] + h[3] >= 140,
            ">= 150": lambda h: h[2] + h[3] >= 150, "NC": lambda h: h[1] == "robustbench"}
    assert list(dict.fromkeys(f.zoo)) == list(zoos)
    for zoo_, keep in zoos.items():
        for pair in ("acc-acc", "rob-rob"):
            n, want = expected(keep, pair)
            row = fog.loc[(zoo_, pair)]
            assert row.zoo_models == n and row.n == n, (zoo_, pair)
            if np.isnan(want):
                assert np.isnan(row.r2), (zoo_, pair)     # two models: no R^2, no fallback
            else:
                assert row.r2 == pytest.approx(want, abs=1e-9), (zoo_, pair)
    # removing the inferior models changes R^2: up from All to >= 120
    assert fog.loc[(">= 120", "rob-rob")].r2 > fog.loc[("All", "rob-rob")].r2 + 0.2
    assert fog.loc[(">= 120", "acc-acc")].r2 > fog.loc[("All", "acc-acc")].r2 + 0.3
    # threat shifts: robustness only, ID robustness -> 0.8 x: R^2 1 in every zoo of 3+
    l2 = f[(f.target == "l2") & f.r2.notna()]
    assert set(l2.pair) == {"rob-rob"} and np.allclose(l2.r2, 1.0)


def test_threshold_zoos_without_models_of_ours_and_empty_zoos():
    agg = A.aggregate(hand_shifts())
    zoos = {name: models for name, _, models in A.threshold_zoos(agg, (200,))}
    assert zoos[">= 200"] == [] and zoos["NC"] == ["r1", "r2"] and "st" not in zoos["All"]
    f = A.threshold_fits(hand_shifts(), thresholds=(200,))
    empty = f[f.zoo == ">= 200"]
    assert len(empty) and empty.r2.isna().all() and (empty.n == 0).all()


def test_fig8_gap_is_mm5_minus_autoattack_per_model_and_set(tmp_path):
    files = write(tmp_path, attacks=make_attacks(mm5_gap=0.2))
    data = appendix.fig8(files, outputs(tmp_path, "fig8"), dict(META))
    drawn(tmp_path, "fig8")
    assert len(data) == 2 * 4 and set(data.set) == {"ID", "OOD_d"}
    assert np.allclose(data.gap, 0.2) and np.allclose(data.mm5 - data.aa, data.gap)
    robs = {m: r for m, _, _, r, _ in zoo()}
    ident = data[data.set == "ID"].set_index("model")
    assert np.allclose(ident.aa, [robs[m] for m in ident.index])


def test_fig13_r2_of_misaligned_pairs_by_hand(tmp_path):
    shifts = make_shifts()
    files = write(tmp_path, shifts=shifts)
    data = appendix.fig13(files, outputs(tmp_path, "fig13"), dict(META))
    drawn(tmp_path, "fig13")
    assert set(data.pair) == {"acc-rob", "rob-acc"} and "threat" not in set(data.family)
    agg = A.aggregate(shifts).set_index("model")
    kept = [m for m in agg.index if agg.adversarial[m] and agg.id_acc[m] + agg.id_rob[m] >= 110]
    ps = A.per_shift(shifts).set_index(["shift", "model"])
    for pair, x, y in (("acc-rob", "id_acc", "robustness"), ("rob-acc", "id_rob", "accuracy")):
        row = data[(data.target == "fog") & (data.pair == pair)].iloc[0]
        want = r2([ps.loc[("fog", m), x] for m in kept], [ps.loc[("fog", m), y] for m in kept])
        assert row.r2 == pytest.approx(want, abs=1e-9) and row.n == len(kept) == 8


def test_fig14_one_panel_per_ood_set_on_the_line(tmp_path):
    first = make_predictions()
    second = make_predictions(ood_rob=lambda x, k: 0.8 * x)
    second = second[second["shift"] == NATURALS[0]].assign(shift=NATURALS[1])
    files = write(tmp_path, shifts=make_shifts(), predictions=pd.concat([first, second]))
    data = appendix.fig14(files, outputs(tmp_path, "fig14"), dict(META))
    drawn(tmp_path, "fig14")
    assert list(dict.fromkeys(data["shift"])) == list(NATURALS)
    agreement = data[data.kind == "agreement"]
    assert (agreement.fit_r2 > 0.999).all() and len(agreement) == 2 * 9 * 8 // 2
    # model k is right on the first q of the images: its OOD robustness on the second set is 0.8 q
    rob = data[(data.kind == "robustness") & (data["shift"] == NATURALS[1])]
    assert np.allclose(rob.ood_value, 0.8 * rob.id_value, atol=0.5)


@pytest.mark.parametrize("family,pairs,targets", [
    ("dataset", {"acc-acc", "rob-rob"}, {"OOD_d", "R_n", "R_c", "fog", *NATURALS}),
    ("threat", {"rob-rob"}, {"OOD_t", *THREATS})])
def test_fit_scatter_draws_the_fits_points_and_lines(tmp_path, family, pairs, targets):
    shifts = make_shifts()
    files = write(tmp_path, shifts=shifts)
    data = appendix.fit_scatter(files, outputs(tmp_path, family), dict(META), family=family)
    drawn(tmp_path, family)
    assert set(data.pair) == pairs and targets <= set(data.target)
    fits = A.fits(shifts, pairs=tuple(pairs), groups=("AT",)).set_index(["target", "pair"])
    for (target, pair), d in data.groupby(["target", "pair"]):
        assert d.r2.iloc[0] == pytest.approx(fits.loc[(target, pair)].r2, nan_ok=True)
        assert set(d.model) == {m for m, method, *_ in zoo() if method != "undefended"}
        assert not d[d.model == "pgd-bad"].in_fit.any() and d.in_fit.sum() == 8
        fitted = d[d.in_fit]
        if fitted.ood.std() > 0:
            assert d.r2.iloc[0] == pytest.approx(r2(fitted.id, fitted.ood), abs=1e-9)


def test_r2_threshold_figure_is_written(tmp_path, family="dataset"):
    files = write(tmp_path, shifts=make_shifts())
    data = appendix.r2_thresholds(files, outputs(tmp_path, family), dict(META), family=family)
    drawn(tmp_path, family)
    assert set(data.zoo) == {"All", ">= 90", ">= 100", ">= 110", ">= 120", ">= 130", ">= 140",
                             "NC"}
    assert (data.family == "threat").all() == (family == "threat")
    # the synthetic zoo: 9 AT models, one of them below 110 (90 in all), none from RobustBench
    sizes = data.drop_duplicates("zoo").set_index("zoo").zoo_models
    assert sizes["All"] == sizes[">= 90"] == 9 and sizes[">= 110"] == 8 and sizes["NC"] == 0
    with pytest.raises(ValueError, match="unknown shift family"):
        appendix.r2_thresholds(files, outputs(tmp_path, "x"), dict(META), family="natural")
