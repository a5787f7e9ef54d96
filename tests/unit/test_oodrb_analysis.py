"""The OODRobustBench analysis, figures, tables and claims on small synthetic tidy tables built
here with known relations (OOD = 0.5 ID + 10 and the like): the fits recover them, the
aggregates match hand-computed numbers, degenerate inputs give NaN instead of errors, every
figure and table is written, and each claim's verdict follows the numbers (it flips when the
data are built to violate it)."""
import numpy as np
import pandas as pd
from PIL import Image
import pytest

from pabench.core.io import read_table, write_csv
from pabench.experiments.oodrb import analysis as A
from pabench.experiments.oodrb import figures, tables
from pabench.reporting import claims

CORRUPTIONS = ("gaussian_noise", "fog", "contrast")
NATURALS = ("sklearn_digits", "font_digits")
THREATS = {"linf_1.5x": "linf", "l2": "l2", "stadv": "stadv", "recolor": "recolor"}
SEVERITIES = (1, 2, 3, 4, 5)
# Adversarially trained models k = 0..7 (ID robustness 40..75 %, accuracy 95..88 %), one
# inferior AT model (accuracy + robustness = 90 < 110: left out of fits), four standard ones.
AT_ROB = 40.0 + 5 * np.arange(8)
AT_ACC = 95.0 - 0.2 * (AT_ROB - 40)
INFERIOR = ("pgd-bad", 60.0, 30.0)
ST_ACC = (96.0, 97.0, 98.0, 95.0)
ST_ROB = (1.0, 0.5, 2.0, 1.5)
METHODS = ("madry", "trades", "fast_fgsm")


def _zigzag(base, amp):
    """Unrelated to ID: alternates with the model's index (R^2 against ID about 0.05)."""
    return lambda x, k, u: base + amp * (-1) ** k


# OOD value (percent) of a model as a function of its ID value x, its index k and a noise u in
# [-1, 1] drawn per row.  Dataset shifts (every corruption severity and natural shift, corruption
# severity s shifted by 2 (3 - s), which averages out) and each threat shift.
GOOD = {"at_rob": lambda x, k, u: 0.5 * x + 10 + 0.3 * u,
        "at_acc": lambda x, k, u: 0.8 * x + 5 + 0.3 * u,
        "st_acc": _zigzag(60, 15),
        "st_rob": lambda x, k, u: 0.5 * x,
        "linf_1.5x": lambda x, k, u: 0.6 * x + 0.5 * u,
        "l2": lambda x, k, u: 0.7 * x + 2 + 0.5 * u,
        "stadv": _zigzag(20, 8),
        "recolor": lambda x, k, u: 0.5 * x + 3 * u}
# Each claim's violation: the relations that replace GOOD's.
VIOLATIONS = {
    "oodrb-degradation-dataset-shift": {"at_rob": lambda x, k, u: x + 5},
    "oodrb-degradation-threat-shift": {t: (lambda x, k, u: x + 5) for t in THREATS},
    "oodrb-higher-id-more-degradation": {name: (lambda x, k, u: 1.5 * x - 20)
                                         for name in ("at_rob", *THREATS)},
    "oodrb-linear-dataset-shift": {"at_rob": _zigzag(40, 10)},
    "oodrb-at-more-linear-corruptions": {"at_acc": _zigzag(60, 15),
                                         "st_acc": lambda x, k, u: 0.8 * x + 5 + 0.3 * u},
    "oodrb-lp-threats-linear": {"linf_1.5x": _zigzag(30, 10)},
    "oodrb-stadv-less-linear": {"stadv": lambda x, k, u: 0.4 * x},
    "oodrb-upper-limit-below-100": {"at_rob": lambda x, k, u: 1.2 * x - 15 + 0.3 * u},
    "oodrb-robustness-converts-worse": {"at_rob": lambda x, k, u: 0.9 * x + 0.3 * u,
                                       "at_acc": lambda x, k, u: 0.5 * x + 45 + 0.3 * u},
}


def zoo():
    """(model, method, ID accuracy, ID robustness, index k) of every synthetic model."""
    at = [(f"at{k}", METHODS[k % 3], AT_ACC[k], AT_ROB[k], k) for k in range(8)]
    st = [(f"st{k}", "undefended", ST_ACC[k], ST_ROB[k], k) for k in range(4)]
    return at + [(INFERIOR[0], "madry", INFERIOR[1], INFERIOR[2], 8)] + st


def _pa(rob_pct: float, u: float = 0.0) -> float:
    return (rob_pct - 100) / 20 + 0.01 * u


def make_shifts(changes=None, naturals=NATURALS, threats=tuple(THREATS), seed=0) -> pd.DataFrame:
    rel = {**GOOD, **(changes or {})}
    rng = np.random.default_rng(seed)
    rows = []
    for model, method, acc, rob, k in zoo():
        at = method != "undefended"
        base = {"model": model, "method": method, "adversarial": at, "arch": "smallcnn8",
                "epochs": 3, "augment": "none",
                "trades_beta": 6.0 if method == "trades" else np.nan, "n": 40, "beta": 1.0,
                "afr_pred": 0.9, "afr_true": 0.8}

        def add(shift, family, severity, a, r, pa, base=base):
            r = float(np.clip(r, 0, 100))
            rows.append({**base, "shift": shift, "family": family, "severity": severity,
                         "accuracy": np.nan if a is None else float(np.clip(a, 0, 100)) / 100,
                         "robustness": r / 100, "log_pa": pa,
                         "log_pa_adam": np.nan if pa is None else 1.01 * pa})

        add("id", "id", 0, acc, rob, _pa(rob))
        f_acc = rel["at_acc"] if at else rel["st_acc"]
        f_rob = rel["at_rob"] if at else rel["st_rob"]
        for shift in CORRUPTIONS:
            for s in SEVERITIES:
                u = rng.uniform(-1, 1, 3)
                # the inferior model's corrupted accuracy is far off the line (the 110 filter's point)
                a = 85.0 if model == INFERIOR[0] else f_acc(acc, k, u[0]) + 2 * (3 - s)
                r = f_rob(rob, k, u[1]) + (2 * (3 - s) if at else 0)
                add(shift, "corruption", s, a, r, _pa(np.clip(r, 0, 100), u[2]))
        for shift in naturals:
            u = rng.uniform(-1, 1, 2)
            add(shift, "natural", 0, f_acc(acc, k, u[0]), f_rob(rob, k, u[1]), np.nan)
        for shift in threats:
            r = rel[shift](rob, k, rng.uniform(-1, 1)) if at else 0.0
            add(shift, "threat", 0, None, r, _pa(np.clip(r, 0, 100)))
    frame = pd.DataFrame(rows)
    frame["log_pa"] = frame.log_pa.astype(float)
    frame["kind"] = frame["shift"].map(THREATS)
    return frame


def make_predictions(ood_rob=lambda x, k: 0.5 * x + 10, n_images: int = 200) -> pd.DataFrame:
    """Model k is right on the first q N images (a shared order of difficulty) and otherwise
    predicts label + 1: two models agree on 1 - |q_a - q_b| of the images, so OOD agreement is
    0.5 + 0.5 ID agreement when q_OOD = 0.5 q_ID + 0.1."""
    labels = np.arange(n_images) % 10
    rows = []
    for model, _, _, rob, k in zoo():
        for shift, q in (("id", rob), (NATURALS[0], ood_rob(rob, k))):
            right = np.arange(n_images) < round(q / 100 * n_images)
            rows.append(pd.DataFrame({"model": model, "shift": shift, "index": np.arange(n_images),
                                      "label": labels, "pred_clean": labels,
                                      "pred_adv": np.where(right, labels, (labels + 1) % 10)}))
    return pd.concat(rows, ignore_index=True)


TABLE3_MODELS = ("at1", "at3", "at5", "at7")
GAPS = {"pgd": 3.0, "cw": 2.0, "aa": 0.0, "mm5": 0.2}
EVALS = {"pgd": 20, "cw": 20, "aa": 600, "mm5": 100}


def make_attacks(mm5_gap: float = 0.2, mm5_evals: int = 100) -> pd.DataFrame:
    rows = []
    robs = {m: r for m, _, _, r, _ in zoo()}
    for model in TABLE3_MODELS:
        for attack in ("pgd", "cw", "aa", "mm5"):
            gap = mm5_gap if attack == "mm5" else GAPS[attack]
            evals = mm5_evals if attack == "mm5" else EVALS[attack]
            for shift, severity, rob in (("id", 0, robs[model]),
                                         ("corruptions", 3, 0.5 * robs[model] + 10)):
                rows.append({"model": model, "method": "madry", "adversarial": True,
                             "attack": attack, "shift": shift, "severity": severity, "n": 100,
                             "robustness": (rob + gap) / 100, "grad_evals": evals * 100,
                             "forward_evals": evals * 110, "seconds": evals / 100})
    return pd.DataFrame(rows)


def make_attack_images(models=TABLE3_MODELS, n: int = 200, broken=(4, 2)) -> pd.DataFrame:
    """Per model and set, n images robust to AutoAttack on the first half; MM5 breaks broken[k]
    of those for the k-th model (by turns), and keeps images AA breaks on none."""
    rows = []
    for k, model in enumerate(models):
        for shift in ("id", "corruptions"):
            aa = np.arange(n) < n // 2
            mm5 = aa.copy()
            start = 10 * k   # other images for each model
            mm5[start:start + broken[k % len(broken)]] = False
            rows.append(pd.DataFrame({"model": model, "shift": shift, "index": np.arange(n),
                                      "label": 0, "robust_pgd": aa, "robust_cw": aa,
                                      "robust_aa": aa, "robust_mm5": mm5}))
    return pd.concat(rows, ignore_index=True)


def make_history() -> pd.DataFrame:
    """One row per epoch, as oodrb_train writes it: model k trains 1 + k % 3 epochs, its loss
    after epoch e is 1 / e + k / 100."""
    return pd.DataFrame([{"epoch": e, "train_loss": 1 / e + k / 100, "model": m, "method": method,
                          "arch": "smallcnn8", "epochs": 1 + k % 3, "augment": "none",
                          "trades_beta": np.nan, "train_seconds": 12.0, "accuracy": acc / 100}
                         for k, (m, method, acc, _, _) in enumerate(zoo())
                         for e in range(1, 2 + k % 3)])


def write(root, **frames) -> dict:
    out = {}
    for name, frame in frames.items():
        out[name] = str(root / f"{name}.csv")
        write_csv(out[name], frame)
    return out


def outputs(root, name):
    return tuple(str(root / f"{name}.{ext}") for ext in ("pdf", "png", "csv"))


def drawn(root, name) -> pd.DataFrame:
    for ext in ("pdf", "png", "csv"):
        assert (root / f"{name}.{ext}").stat().st_size > 0, (name, ext)
    return read_table(outputs(root, name)[2])


META = {"caption": "test", "scale": "test"}


# ------------------------------------------------------------------ fit
def test_fit_recovers_the_line_r2_and_upper_limit():
    x = np.linspace(20, 80, 12)
    noise = 0.05 * np.sin(np.arange(12))
    got = A.fit(x, 0.5 * x + 10 + noise)
    assert got["slope"] == pytest.approx(0.5, abs=2e-3)
    assert got["intercept"] == pytest.approx(10, abs=0.1)
    assert got["r2"] > 0.999 and got["n"] == 12
    assert got["upper_limit"] == pytest.approx(got["slope"] * 100 + got["intercept"])
    assert got["upper_limit"] == pytest.approx(60, abs=0.2)
    assert A.fit(x, 1.2 * x)["upper_limit"] == 100.0                # capped
    y = 0.5 * x + 10
    y[3] = np.nan
    assert A.fit(np.append(x, np.nan), np.append(y, 5.0))["n"] == 11  # NaN pairs dropped
    # R^2 is the squared Pearson correlation for a least-squares line with intercept
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=30), rng.normal(size=30)
    assert A.fit(a, a + b)["r2"] == pytest.approx(np.corrcoef(a, a + b)[0, 1] ** 2)


def test_fit_of_degenerate_inputs_is_nan_not_an_error():
    const_x = A.fit([50, 50, 50, 50], [1, 2, 3, 4])
    assert np.isnan(const_x["slope"]) and np.isnan(const_x["r2"]) and np.isnan(const_x["upper_limit"])
    const_y = A.fit([1, 2, 3, 4], [7, 7, 7, 7])
    assert const_y["slope"] == 0 and const_y["intercept"] == 7 and np.isnan(const_y["r2"])
    two = A.fit([1, 2], [3, 5])
    assert two["slope"] == pytest.approx(2) and np.isnan(two["r2"])   # two points: no R^2
    assert A.fit([], [])["n"] == 0 and np.isnan(A.fit([1], [2])["slope"])
    assert np.isnan(A.kendall([1, 2, 3], [4, 4, 4])[0]) and np.isnan(A.kendall([1, 2], [1, 2])[0])


# ------------------------------------------------------------------ aggregates
def _row(model, shift, family, severity, acc, rob, method="madry", log_pa=-1.0):
    return {"model": model, "method": method, "shift": shift, "family": family,
            "severity": severity, "accuracy": acc, "robustness": rob, "log_pa": log_pa}


def hand_table() -> pd.DataFrame:
    rows = [_row("m", "id", "id", 0, 0.9, 0.6, log_pa=-0.5),
            _row("m", "gaussian_noise", "corruption", 1, 0.8, 0.5, log_pa=-1.0),
            _row("m", "gaussian_noise", "corruption", 2, 0.6, 0.3, log_pa=-3.0),
            _row("m", "fog", "corruption", 1, 0.7, 0.4, log_pa=-2.0),
            _row("m", "sklearn_digits", "natural", 0, 0.5, 0.2, log_pa=np.nan),
            _row("m", "font_digits", "natural", 0, 0.7, 0.4, log_pa=np.nan),
            _row("m", "linf_1.5x", "threat", 0, np.nan, 0.3),
            _row("m", "stadv", "threat", 0, np.nan, 0.1),
            # two more models for the ranks: b better ID, worse OOD; c undefended
            _row("b", "id", "id", 0, 0.9, 0.7), _row("b", "fog", "corruption", 1, 0.5, 0.1),
            _row("b", "linf_1.5x", "threat", 0, np.nan, 0.1),
            _row("c", "id", "id", 0, 0.99, 0.0, method="undefended"),
            _row("c", "fog", "corruption", 1, 0.6, 0.0, method="undefended")]
    return pd.DataFrame(rows)


def test_aggregate_matches_the_papers_formulas_on_hand_computed_numbers():
    agg = A.aggregate(hand_table()).set_index("model")
    m = agg.loc["m"]
    assert m.id_acc == pytest.approx(90) and m.id_rob == pytest.approx(60)
    assert m.rc_rob == pytest.approx(40)          # (50 + 30 + 40) / 3: corruption x severity rows
    assert m.rc_acc == pytest.approx(70)          # (80 + 60 + 70) / 3
    assert m.rn_rob == pytest.approx(30) and m.rn_acc == pytest.approx(60)
    assert m.oodd_rob == pytest.approx(35) and m.oodd_acc == pytest.approx(65)
    assert m.oodt_rob == pytest.approx(20)
    assert m.ood_rob == pytest.approx(27.5) and m.ood_acc == pytest.approx(65)
    assert m.deg_rob == pytest.approx(32.5) and m.deg_d_rob == pytest.approx(25)
    assert m.deg_t_rob == pytest.approx(40) and m.deg_acc == pytest.approx(25)
    assert m.oodd_basis == "corruptions and natural shifts" and m.ood_basis == "OOD_d and OOD_t"
    assert m.corruption_log_pa == pytest.approx(-2.0) and m.id_log_pa == pytest.approx(-0.5)
    assert (m.n_corruption, m.n_natural, m.n_threat) == (2, 2, 2)
    # b: no natural shift -> OOD_d = R_c, said so; ranks 1 = best
    b = agg.loc["b"]
    assert b.oodd_rob == pytest.approx(10) and b.oodd_basis == "corruptions only"
    assert b.ood_rob == pytest.approx(10)
    assert (agg.rank_id.to_dict(), agg.rank_ood.to_dict()) == ({"m": 2, "b": 1, "c": 3},
                                                              {"m": 1, "b": 2, "c": 3})
    assert agg.rank_change.to_dict() == {"m": 1, "b": -1, "c": 0}
    assert agg.adversarial.to_dict() == {"m": True, "b": True, "c": False}
    assert np.isnan(agg.loc["c", "oodt_rob"]) and agg.loc["c", "ood_basis"] == "OOD_d only"


def test_per_shift_averages_corruption_severities_and_orders_shifts():
    ps = A.per_shift(hand_table())
    m = ps[ps.model == "m"].set_index("shift")
    assert list(m.index) == ["gaussian_noise", "fog", "sklearn_digits", "font_digits",
                             "linf_1.5x", "stadv"]
    assert m.loc["gaussian_noise", "robustness"] == pytest.approx(40)
    assert m.loc["gaussian_noise", "severities"] == 2
    assert m.loc["gaussian_noise", "deg_rob"] == pytest.approx(20)
    assert m.loc["gaussian_noise", "log_pa"] == pytest.approx(-2.0)
    assert np.isnan(m.loc["stadv", "accuracy"]) and m.loc["stadv", "deg_rob"] == pytest.approx(50)


def test_corruption_rows_are_compared_with_the_clean_images_they_corrupt():
    """A corrupted row's ID side is the clean accuracy and robustness of its own originals
    (clean_accuracy / clean_robustness); natural and threat rows, and tables without the
    columns, fall back to the model's ID row."""
    t = hand_table()
    mine = (t.model == "m") & (t.family == "corruption")
    t.loc[mine, "clean_accuracy"], t.loc[mine, "clean_robustness"] = 0.95, 0.7
    ps = A.per_shift(t)
    m = ps[ps.model == "m"].set_index("shift")
    assert m.loc["gaussian_noise", "id_acc"] == pytest.approx(95)
    assert m.loc["gaussian_noise", "deg_rob"] == pytest.approx(70 - 40)
    assert m.loc["gaussian_noise", "matched"] and not m.loc["sklearn_digits", "matched"]
    assert m.loc["sklearn_digits", "id_rob"] == pytest.approx(60)      # the ID row
    assert m.loc["stadv", "deg_rob"] == pytest.approx(50)
    b = ps[ps.model == "b"].set_index("shift")
    assert b.loc["fog", "id_rob"] == pytest.approx(70) and not b.loc["fog", "matched"]
    agg = A.aggregate(t).set_index("model").loc["m"]
    assert agg.rc_clean_rob == pytest.approx(70) and agg.oodd_clean_rob == pytest.approx(65)
    assert agg.deg_d_rob == pytest.approx(65 - 35) and agg.deg_d_acc == pytest.approx(92.5 - 65)
    assert agg.deg_t_rob == pytest.approx(60 - 20)
    assert agg.deg_rob == pytest.approx((65 + 60) / 2 - 27.5)
    assert agg.id_rob == pytest.approx(60)                          # the ID row itself
    targets = A.targets(t).set_index(["model", "target"])
    assert targets.loc[("m", "R_c"), "id_rob"] == pytest.approx(70)
    assert targets.loc[("m", "OOD_d"), "id_acc"] == pytest.approx(92.5)
    assert targets.loc[("m", "OOD_t"), "id_rob"] == pytest.approx(60)
    assert targets.loc[("b", "R_c"), "id_rob"] == pytest.approx(70)  # b's ID robustness


def test_fits_of_corruptions_use_the_matched_clean_accuracy():
    """Each AT model's corrupted accuracy is its originals' clean accuracy - 10 points, and that
    clean accuracy is unrelated to its accuracy on the whole ID set: the fit ID -> corruption
    recovers slope 1 and R^2 1 only when its x is the matched clean accuracy."""
    t = make_shifts()
    rng = np.random.default_rng(1)
    clean = {m: rng.uniform(0.5, 0.99) for m in t.model.unique()}
    rows = t.family == "corruption"
    t.loc[rows, "clean_accuracy"] = t.loc[rows, "model"].map(clean)
    t.loc[rows, "clean_robustness"] = t.loc[rows, "model"].map(clean) / 2
    t.loc[rows, "accuracy"] = t.loc[rows, "clean_accuracy"] - 0.1
    f = A.fits(t, pairs=("acc-acc",), groups=("AT",)).set_index("target")
    for name in (*CORRUPTIONS, "R_c"):
        assert f.loc[name, "slope"] == pytest.approx(1) and f.loc[name, "r2"] == pytest.approx(1)
    e = A.effective_robustness(t, targets_=("R_c",))
    assert np.allclose(e[e.metric == "accuracy"].effective, 0, atol=1e-9)


def test_bad_tables_are_refused_with_their_reason():
    t = hand_table()
    with pytest.raises(ValueError, match="appears more than once"):
        A.check_shifts(pd.concat([t, t.iloc[:1]]))
    with pytest.raises(ValueError, match="unknown families"):
        A.check_shifts(t.assign(family="weather"))
    with pytest.raises(ValueError, match="missing columns"):
        A.check_shifts(t.drop(columns="robustness"))


# ------------------------------------------------------------------ fits
def _pick(f, target, group, pair):
    rows = f[(f.target == target) & (f.group == group) & (f.pair == pair)]
    assert len(rows) == 1, (target, group, pair)
    return rows.iloc[0]


def test_fits_recover_the_built_relations_and_apply_the_110_filter():
    shifts = make_shifts()
    f = A.fits(shifts)
    rob = _pick(f, "OOD_d", "AT", "rob-rob")
    assert rob.slope == pytest.approx(0.5, abs=0.02) and rob.intercept == pytest.approx(10, abs=1)
    assert rob.r2 > 0.99 and rob.n == 8 and rob.left_out == 1 and rob.filtered
    assert rob.upper_limit == pytest.approx(60, abs=1.5)
    acc = _pick(f, "fog", "AT", "acc-acc")
    assert acc.slope == pytest.approx(0.8, abs=0.05) and acc.r2 > 0.95
    # the left-out model's accuracy is far off the line: without the filter the fit breaks
    unfiltered = _pick(A.fits(shifts, min_total=None), "fog", "AT", "acc-acc")
    assert unfiltered.n == 9 and not unfiltered.filtered and unfiltered.r2 < 0.5
    # a filter that would keep fewer than 3 models falls back to every AT model
    strict = _pick(A.fits(shifts, min_total=160), "OOD_d", "AT", "rob-rob")
    assert strict.n == 9 and strict.left_out == 0 and not strict.filtered
    # threat shifts: robustness only; ST fits unfiltered
    assert set(f[f.target == "stadv"].pair) == {"rob-rob"}
    st = _pick(f, "fog", "ST", "acc-acc")
    assert st.n == 4 and not st.filtered and st.r2 < 0.5
    assert _pick(f, "linf_1.5x", "AT", "rob-rob").slope == pytest.approx(0.6, abs=0.02)
    assert list(f.target.unique()[:4]) == ["OOD_d", "R_n", "sklearn_digits", "font_digits"]


def test_effective_robustness_is_the_distance_to_the_line():
    e = A.effective_robustness(make_shifts())
    rob = e[(e.target == "OOD_d") & (e.metric == "robustness")].set_index("model")
    assert rob.loc[rob.in_fit, "effective"].abs().max() < 1.0
    at3 = rob.loc["at3"]
    assert at3.predicted == pytest.approx(at3.ood - at3.effective)
    acc = e[(e.target == "OOD_d") & (e.metric == "accuracy")].set_index("model")
    assert not acc.loc[INFERIOR[0], "in_fit"] and acc.loc[INFERIOR[0], "effective"] > 10
    assert set(e[e.target == "OOD_t"].metric) == {"robustness"}


def test_degenerate_tables_give_nan_not_errors():
    shifts = make_shifts()
    same = shifts.copy()
    same.loc[same["shift"] == "id", "robustness"] = 0.5   # every model: ID robustness 50 %
    f = A.fits(same, min_total=None)
    assert f[f.pair == "rob-rob"].r2.isna().all() and f[f.pair == "rob-rob"].slope.isna().all()
    flat = shifts.assign(log_pa=-1.0)
    r = A.pa_ranking(flat)
    assert r[r.measure == "log_pa"].tau.isna().all()
    one = shifts[shifts.model == "at0"]
    assert A.fits(one).r2.isna().all() and A.agreement(make_predictions(), NATURALS[0], ["at0"]).empty


def test_missing_natural_shifts_fall_back_to_corruptions():
    shifts = make_shifts(naturals=())
    agg = A.aggregate(shifts)
    assert (agg.oodd_basis == "corruptions only").all()
    assert agg.oodd_rob.tolist() == pytest.approx(agg.rc_rob.tolist())
    f = A.fits(shifts)
    assert "R_n" not in set(f.target) and _pick(f, "OOD_d", "AT", "rob-rob").r2 > 0.99


# ------------------------------------------------------------------ agreement
def test_agreement_on_a_constructed_case():
    # 10 images; a and b agree on ID images 0-7, a and c on 0-4; on the OOD set on 0-5 and 0-2
    lab = np.arange(10) % 10
    rows = []
    for model, id_same, ood_same in (("a", 10, 10), ("b", 8, 6), ("c", 5, 3)):
        for shift, same in (("id", id_same), ("nat", ood_same)):
            pred = np.where(np.arange(10) < same, lab, (lab + 1 + (model == "c")) % 10)
            rows.append(pd.DataFrame({"model": model, "shift": shift, "index": np.arange(10),
                                      "label": lab, "pred_adv": pred}))
    preds = pd.concat(rows, ignore_index=True)
    got = A.agreement(preds, "nat").set_index(["model_a", "model_b"])
    assert got.loc[("a", "b"), "id_agreement"] == pytest.approx(80)
    assert got.loc[("a", "c"), "id_agreement"] == pytest.approx(50)
    assert got.loc[("b", "c"), "id_agreement"] == pytest.approx(50)   # b, c wrong differently
    assert got.loc[("a", "b"), "ood_agreement"] == pytest.approx(60)
    assert got.loc[("b", "c"), "ood_agreement"] == pytest.approx(30)
    assert (got.n_id == 10).all() and (got.n_ood == 10).all()
    line = A.fit(got.id_agreement, got.ood_agreement)
    assert got.fit_slope.iloc[0] == pytest.approx(line["slope"])
    rob = A.prediction_robustness(preds, "nat").set_index("model")
    assert rob.loc["b", "id_robustness"] == pytest.approx(80)
    assert rob.loc["c", "ood_robustness"] == pytest.approx(30)
    # images only one model has are not counted
    short = preds[~((preds.model == "b") & (preds["index"] >= 8))]
    assert A.agreement(short, "nat").set_index(["model_a", "model_b"]).loc[("a", "b"), "n_id"] == 8


def test_agreement_of_the_synthetic_zoo_is_on_the_line():
    at = [m for m, method, *_ in zoo() if method != "undefended"]
    pairs = A.agreement(make_predictions(), NATURALS[0], at)
    assert len(pairs) == len(at) * (len(at) - 1) // 2
    assert pairs.fit_r2.iloc[0] == pytest.approx(1.0) and pairs.fit_slope.iloc[0] == pytest.approx(0.5)


# ------------------------------------------------------------------ PA under shift, Table 3
def test_pa_ranking_sign_and_prediction():
    shifts = make_shifts()
    r = A.pa_ranking(shifts)
    assert (r.tau > 0.5).all(), r
    assert set(r.target) == set(CORRUPTIONS) | {"overall"} and set(r.group) == {"all", "AT"}
    flipped = shifts.assign(log_pa=-shifts.log_pa, log_pa_adam=-shifts.log_pa_adam)
    assert (A.pa_ranking(flipped).tau < -0.5).all()
    p = A.pa_prediction(shifts).set_index(["group", "target", "predictor"]).r2
    # ID log PA is a linear function of ID robustness here: the same R^2
    assert p[("AT", "OOD_d", "id_log_pa")] == pytest.approx(p[("AT", "OOD_d", "id_rob")])
    assert p[("AT", "OOD_d", "id_rob")] > 0.95
    ranking, prediction = A.pa_vs_ood(shifts)
    assert len(ranking) == len(r) and len(prediction) == len(p)


def test_attack_summary_is_table3():
    s = A.attack_summary(make_attacks()).set_index("attack")
    assert list(s.index) == ["pgd", "cw", "aa", "mm5"]
    mean_rob = np.mean([r for m, _, _, r, _ in zoo() if m in TABLE3_MODELS])
    assert s.loc["aa", "id_robustness"] == pytest.approx(mean_rob)
    assert s.loc["mm5", "gap_id"] == pytest.approx(0.2) and s.loc["pgd", "gap_ood"] == pytest.approx(3)
    assert s.loc["mm5", "grad_evals_id"] == pytest.approx(100)        # grad_evals / n
    assert s.loc["mm5", "ood_robustness"] == pytest.approx(0.5 * mean_rob + 10.2)
    assert s.loc["aa", "severities"] == [3] and s.loc["mm5", "models"] == 4


def test_the_mm5_aa_gap_and_its_paired_standard_error():
    """On 200 images, MM5 breaks 4 (model a) or 2 (model b) that AutoAttack leaves robust: per
    model the gap is the mean per-image difference and its SE sd / sqrt(n); over the models the
    differences are averaged image by image first."""
    images = make_attack_images(("a", "b"))
    g = A.attack_gaps(images).set_index(["attack", "model", "ood"])
    se = lambda broken, n=200: 100 * np.sqrt((broken - n * (broken / n) ** 2) / (n - 1) / n)  # noqa: E731
    assert g.loc[("mm5", "a", False), "gap"] == pytest.approx(-2.0)
    assert g.loc[("mm5", "a", False), "se"] == pytest.approx(se(4))
    assert g.loc[("mm5", "b", True), "se"] == pytest.approx(se(2))
    # the mean: -1/2 on images 0-3 (a) and 10-11 (b): sum of squares 1.5, mean -0.015
    d = np.zeros(200)
    d[[0, 1, 2, 3, 10, 11]] = -0.5
    assert 100 * d.std(ddof=1) / np.sqrt(200) == pytest.approx(
        100 * np.sqrt((1.5 - 200 * 0.015 ** 2) / 199 / 200))
    assert g.loc[("mm5", "mean", False), "gap"] == pytest.approx(-1.5)
    assert g.loc[("mm5", "mean", False), "se"] == pytest.approx(100 * d.std(ddof=1) / np.sqrt(200))
    assert g.loc[("aa", "mean", False), "gap"] == 0 and g.loc[("aa", "mean", False), "se"] == 0
    attacks = make_attacks().replace({"model": {"at1": "a", "at3": "b"}}).query("model in ['a', 'b']")
    s = A.attack_summary(attacks, images=images).set_index("attack")
    assert s.loc["mm5", "se_id"] == pytest.approx(g.loc[("mm5", "mean", False), "se"])
    m = A.attack_models(attacks, images=images).set_index(["attack", "model"])
    assert m.loc[("mm5", "b"), "se_ood"] == pytest.approx(se(2))
    assert np.isnan(A.attack_summary(attacks).se_id).all()      # no flags: no SE


# ------------------------------------------------------------------ figures and tables
def test_every_figure_is_written(tmp_path):
    files = write(tmp_path, shifts=make_shifts(), predictions=make_predictions())
    calls = {"fig1": {}, "fig2": {}, "fig3": {}, "fig4": {}, "fig5": {}, "fig6": {},
             "pa_severity": {}, "pa_ranking": {}, "pa_predicts": {}}
    data = {}
    for name, args in calls.items():
        returned = getattr(figures, name)(dict(files), outputs(tmp_path, name), dict(META), **args)
        data[name] = drawn(tmp_path, name)
        assert len(returned) == len(data[name]) > 0, name
    fig1 = data["fig1"]
    assert set(fig1.panel) == {"corruptions (R_c)", "natural shifts (R_n)", "L-p threats",
                               "non-L-p threats"}
    lp = fig1[fig1.panel == "L-p threats"]
    assert lp.r2.iloc[0] > 0.99 and lp.n_fit.iloc[0] == 8
    assert set(data["fig2"].metric) == {"accuracy", "robustness"}
    assert set(data["fig2"].model) == {m for m, method, *_ in zoo() if method != "undefended"}
    setups = set(zip(data["fig3"].group, data["fig3"].pair))
    assert setups == {("ST", "acc-acc"), ("AT", "acc-acc"), ("AT", "rob-rob")}
    assert set(data["fig4"].target) == set(THREATS) | {"OOD_t"}
    fig5 = data["fig5"]
    assert (fig5[fig5.kind == "agreement"].fit_r2 > 0.999).all()
    assert fig5[fig5.kind == "robustness"].model_a.nunique() == 9          # the AT models only
    assert len(data["pa_severity"]) == 13 * len(CORRUPTIONS) * len(SEVERITIES)
    assert set(data["pa_predicts"].predictor) == {"id_log_pa", "id_acc", "id_rob"}
    # Figure 5 on another shift, or one that is not there
    with pytest.raises(ValueError, match="no shift"):
        figures.fig5(dict(files), outputs(tmp_path, "x"), dict(META), shift="cifar10.1")


def test_degenerate_models_are_listed_marked_and_left_out_of_fits_and_figures(tmp_path):
    """A model flagged degenerate on one of its rows (oodrb_shifts writes the flag on all of
    them; the threat rows may come from a separate table) stays on the leaderboard, marked, and
    is left out of every fit and figure, whose caption says so."""
    shifts = make_shifts().assign(degenerate=False)
    shifts.loc[(shifts.model == "at7") & (shifts["shift"] == "id"), "degenerate"] = True
    files = write(tmp_path, shifts=shifts, predictions=make_predictions())
    t1 = tables.table1(files).set_index("model")
    assert len(t1) == 13 and t1.degenerate.sum() == 1 and t1.loc["at7", "degenerate"]
    assert "at7" not in set(A.read_shifts(files).model)
    assert A.read_shifts(files, keep_degenerate=True).groupby("model").degenerate.all()["at7"]
    f = tables.fits(files)
    every = tables.fits(write(tmp_path / "all", shifts=make_shifts()))
    n = {name: t[(t.group == "AT") & (t["shift"] == "OOD_d") & (t.pair == "rob-rob")].n.iloc[0]
         for name, t in (("flagged", f), ("every", every))}
    assert n["flagged"] == n["every"] - 1
    figures.fig1(dict(files), outputs(tmp_path, "fig1"), dict(META))
    assert "at7" not in set(drawn(tmp_path, "fig1").model)
    with Image.open(tmp_path / "fig1.png") as png:   # the caption is in the PNG's metadata
        caption = png.text["Description"]
    assert "1 of 13 models" in caption and "left out of this figure" in caption
    # every model flagged (the test scale's one-epoch zoo): drawn, and the caption says so
    files = write(tmp_path / "none", shifts=shifts.assign(degenerate=True))
    assert len(A.read_shifts(files)) == len(shifts)
    figures.fig2(dict(files), outputs(tmp_path, "fig2"), dict(META))
    with Image.open(tmp_path / "fig2.png") as png:
        assert "13 of 13 models" in png.text["Description"]
        assert "every model is flagged" in png.text["Description"]
    with pytest.raises(ValueError, match="degenerate: not a boolean"):
        A.read_shifts(write(tmp_path / "bad", shifts=shifts.assign(degenerate="maybe")))


def test_figures_survive_missing_families_and_separate_threat_tables(tmp_path):
    shifts = make_shifts(naturals=())
    files = write(tmp_path, shifts=shifts[shifts.family != "threat"],
                  threats=shifts[shifts.family == "threat"])
    fig1 = figures.fig1(dict(files), outputs(tmp_path, "fig1"), dict(META))
    assert "natural shifts (R_n)" not in set(fig1.panel) and "L-p threats" in set(fig1.panel)
    for name in ("fig2", "fig3", "fig4", "fig6", "pa_predicts"):
        getattr(figures, name)(dict(files), outputs(tmp_path, name), dict(META))
        drawn(tmp_path, name)
    none = write(tmp_path, shifts=shifts[shifts.family != "threat"])
    with pytest.raises(ValueError, match="no threat shift"):
        figures.fig4(dict(none), outputs(tmp_path, "empty"), dict(META))


def test_the_corruption_grid_of_the_foolbox_images(tmp_path):
    images, labels = figures.cifar10_samples()
    assert images.shape == (20, 32, 32, 3) and images.dtype == np.uint8 and labels[0] == 3
    table = figures.grid({}, outputs(tmp_path, "grid"), dict(META), per_row=1, names=["contrast"])
    got = drawn(tmp_path, "grid")
    assert list(got.severity) == list(SEVERITIES) and len(table) == 5
    assert (got.mean_abs_change > 0).all()


def test_table3_prints_the_papers_values_only_beside_the_same_models(tmp_path):
    paper = list(tables.PAPER_TABLE3)[:4]
    rename = dict(zip(TABLE3_MODELS, paper))
    files = write(tmp_path, attacks=make_attacks().replace({"model": rename}),
                  attack_images=make_attack_images(paper))
    t3 = tables.table3(files).set_index(["model", "attack"])
    assert t3.loc[("Wong2020Fast", "MM5"), "paper ID (%)"] == 43.3
    assert t3.loc[("Huang2020Self", "AutoAttack"), "paper corrupted, severity 3 (%)"] == 31.7
    means = np.mean([tables.PAPER_TABLE3[m]["mm5"][0] for m in paper])
    assert t3.loc[("mean", "MM5"), "paper ID (%)"] == pytest.approx(means, abs=0.01)
    # one model that is not the paper's: no mean of the paper's other models beside ours
    mixed = write(tmp_path / "mixed", attacks=make_attacks().replace(
        {"model": {**rename, "at7": "ours"}}), attack_images=make_attack_images(paper))
    t3 = tables.table3(mixed).set_index(["model", "attack"])
    assert np.isnan(t3.loc[("mean", "MM5"), "paper ID (%)"])
    assert np.isnan(t3.loc[("ours", "MM5"), "paper ID (%)"])
    # none of them: no paper column at all
    ours = tables.table3(write(tmp_path / "ours", attacks=make_attacks(),
                               attack_images=make_attack_images()))
    assert not [c for c in ours.columns if c.startswith("paper")]


def test_every_table_has_its_columns(tmp_path):
    files = write(tmp_path, shifts=make_shifts(), attacks=make_attacks(), history=make_history(),
                  attack_images=make_attack_images())
    t1 = tables.table1(files)
    assert list(t1.columns) == [
        "model", "method", "architecture", "ID accuracy (%)", "OOD_d accuracy (%)",
        "ID robustness (%)", "OOD_d robustness (%)", "OOD_t robustness (%)", "OOD robustness (%)",
        "rank ID", "rank OOD", "rank change", "OOD_d from", "OOD from", "degenerate"]
    assert len(t1) == 13 and not t1.degenerate.any() and t1["rank ID"].iloc[0] == 1 and t1.model.iloc[0] == "at7"
    assert (t1["ID robustness (%)"] == t1["ID robustness (%)"].round(1)).all()
    t3 = tables.table3(files)
    assert list(t3.model) == [m for m in (*TABLE3_MODELS, "mean") for _ in range(4)]
    assert list(t3.attack[:4]) == ["PGD", "CW", "AutoAttack", "MM5"]
    t3 = t3.set_index(["model", "attack"])
    assert t3.loc[("mean", "MM5"), "minus AA, ID (points)"] == pytest.approx(0.2)
    assert t3.loc[("at1", "MM5"), "SE, ID (points)"] > 0
    assert t3.loc[("mean", "AutoAttack"), "grad evals per image (ID)"] == 600
    assert t3.loc[("mean", "MM5"), "models"] == 4 and t3.loc[("at1", "MM5"), "ID images"] == 100
    f = tables.fits(files)
    assert {"shift", "group", "pair", "n", "slope", "intercept", "R^2", "upper limit (%)",
            "left out (acc + rob < 110)", "filtered"} <= set(f.columns)
    pc = tables.pa_correlation(files)
    assert {"models", "measure", "shift", "n", "Kendall tau", "p"} <= set(pc.columns)
    assert set(pc.measure) == {"log PA (exact)", "log PA (adam)"}
    pp = tables.pa_prediction(files)
    assert {"models", "target", "predictor", "n", "R^2"} <= set(pp.columns)
    eff = tables.effective(files)
    assert {"model", "target", "metric", "effective (points)", "in fit"} <= set(eff.columns)
    zoo_table = tables.models(files)
    assert zoo_table["ID test accuracy (%)"].iloc[0] == pytest.approx(95.0)


def test_models_table_has_one_row_per_model_with_its_last_epochs_loss(tmp_path):
    files = write(tmp_path, history=make_history())
    zoo_table = tables.models(files)
    assert list(zoo_table.model) == [m for m, *_ in zoo()]
    last = {m: 1 / (1 + k % 3) + k / 100 for k, (m, *_) in enumerate(zoo())}
    assert zoo_table.set_index("model")["final loss"].to_dict() == pytest.approx(last)


# ------------------------------------------------------------------ claims
OODRB_CLAIMS = claims.load(["pabench.experiments.oodrb.claims"])


def claim_tables(shift_changes=None, predictions=None, attacks=None) -> dict:
    return {"oodrb_shifts": make_shifts(shift_changes),
            "oodrb_predictions": make_predictions() if predictions is None else predictions,
            "oodrb_attacks": make_attacks() if attacks is None else attacks,
            "oodrb_attack_images": make_attack_images(broken=(0, 1))}


def verdicts(tables_: dict, only=None) -> pd.DataFrame:
    chosen = [c for c in OODRB_CLAIMS if only is None or c.id == only]
    return claims.evaluate(tables_, chosen).set_index("id")


def test_claims_are_registered_with_sources_and_reproduced_on_good_data():
    assert len(OODRB_CLAIMS) == 11 and all(c.id.startswith("oodrb-") for c in OODRB_CLAIMS)
    assert all(c.source.startswith("OODRobustBench (Li et al.), ") for c in OODRB_CLAIMS)
    got = verdicts(claim_tables())
    failed = got[got.verdict != claims.REPRODUCED]
    assert failed.empty, failed.measured.to_dict()


BROKEN = {cid: {"shift_changes": changes} for cid, changes in VIOLATIONS.items()}
BROKEN["oodrb-mm5-comparable-to-autoattack"] = {"attacks": make_attacks(mm5_gap=3.0)}
BROKEN["oodrb-agreement-on-the-line"] = {
    "predictions": make_predictions(ood_rob=lambda x, k: 40 + 10 * (-1) ** k)}


@pytest.mark.parametrize("cid", sorted(BROKEN))
def test_each_claim_flips_on_data_that_violate_it(cid):
    got = verdicts(claim_tables(**BROKEN[cid]), only=cid).loc[cid]
    assert got.verdict == claims.NOT_REPRODUCED, got.measured


def test_mm5_needs_fewer_gradient_evaluations():
    cid = "oodrb-mm5-comparable-to-autoattack"
    got = verdicts(claim_tables(attacks=make_attacks(mm5_evals=900)), only=cid)
    assert got.loc["oodrb-mm5-comparable-to-autoattack", "verdict"] == claims.NOT_REPRODUCED


def test_claims_without_enough_models_are_not_evaluated():
    few = make_shifts()
    few = few[few.model.isin(["at0", "at1", "st0"])]           # two AT models, one ST
    got = verdicts({"oodrb_shifts": few, "oodrb_predictions": make_predictions(),
                    "oodrb_attacks": make_attacks().query("attack != 'mm5'"),
                    "oodrb_attack_images": make_attack_images()})
    for cid in ("oodrb-higher-id-more-degradation", "oodrb-linear-dataset-shift",
                "oodrb-at-more-linear-corruptions", "oodrb-lp-threats-linear",
                "oodrb-stadv-less-linear", "oodrb-upper-limit-below-100",
                "oodrb-robustness-converts-worse", "oodrb-agreement-on-the-line",
                "oodrb-mm5-comparable-to-autoattack"):
        assert got.loc[cid, "verdict"] == claims.NOT_EVALUATED, (cid, got.loc[cid, "measured"])
    # a mean needs one model: still decided
    assert got.loc["oodrb-degradation-dataset-shift", "verdict"] == claims.REPRODUCED
    no_threats = make_shifts(threats=())
    got = verdicts({"oodrb_shifts": no_threats})
    assert got.loc["oodrb-degradation-threat-shift", "verdict"] == claims.NOT_EVALUATED
    assert got.loc["oodrb-agreement-on-the-line", "verdict"] == claims.NOT_EVALUATED  # no table
    assert got.loc["oodrb-linear-dataset-shift", "verdict"] == claims.REPRODUCED
