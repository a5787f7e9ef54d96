"""Claims of the PA paper's domain-generalisation and model-selection experiments (Section 4.2, Table 1).

Each check receives the tidy tables it names (see pabench.reporting.claims)."""
from __future__ import annotations

import pandas as pd

from pabench.reporting.claims import SOLVERS, fmt, need, claim

def _dg_at(dg: pd.DataFrame, column: str, sr: float = 1.0) -> pd.DataFrame:
    """column at one shift ratio, mean over seeds: index #SF, one column per algorithm."""
    need(column in dg.columns, f"no {column} column")
    rows = dg[(dg.shift_ratio - sr).abs() < 1e-9]
    need(len(rows) > 0, f"no SR = {sr:g} rows")
    return rows.pivot_table(index="n_shift_factors", columns="algorithm", values=column, aggfunc="mean")


def _algorithms(table: pd.DataFrame, needed) -> None:
    missing = [a for a in needed if a not in table.columns]
    need(not missing, f"no {', '.join(missing)} runs")


@claim("dg-erm-irm-lisa", "PA paper, Section 4.2 and Figure 7",
       "At #SF = 5 and SR = 1, PA ({solver}) orders the algorithms ERM < IRM < LISA (ERM the "
       "weakest, LISA the most robust).", "dg", solvers=SOLVERS)
def _(dg, solver):
    pa = _dg_at(dg, f"logpa_{solver}")
    _algorithms(pa, ["erm", "irm", "lisa"])
    need(5 in pa.index, "no #SF = 5")
    v = pa.loc[5]
    return bool(v.erm < v.irm < v.lisa), f"ERM {fmt(v.erm)}, IRM {fmt(v.irm)}, LISA {fmt(v.lisa)}"


@claim("dg-erm-above-irm-mild", "PA paper, Section 4.2",
       "At #SF = 1 and SR = 1, ERM has a higher PA ({solver}) than IRM.", "dg", solvers=SOLVERS)
def _(dg, solver):
    pa = _dg_at(dg, f"logpa_{solver}")
    _algorithms(pa, ["erm", "irm"])
    v = pa.loc[1]
    return bool(v.erm > v.irm), f"ERM {fmt(v.erm)}, IRM {fmt(v.irm)}"


@claim("dg-accuracy-falls", "PA paper, Section 4.2",
       "AFR_T at SR = 1 is lower at #SF = 5 than at #SF = 1, for every algorithm.", "dg")
def _(dg):
    afr = _dg_at(dg, "afr_true")
    need({1, 5} <= set(afr.index), "needs #SF = 1 and 5")
    return bool((afr.loc[5] < afr.loc[1]).all()), ", ".join(
        f"{a}: {fmt(afr.loc[1, a])} -> {fmt(afr.loc[5, a])}" for a in afr.columns)


@claim("dg-pa-stable-at-5", "PA paper, Section 4.2",
       "PA ({solver}, SR = 1) stays comparable from #SF = 4 to #SF = 5: it drops by at most 5% "
       "of |PA at #SF = 4| (or rises), for every algorithm.", "dg", solvers=SOLVERS)
def _(dg, solver):
    pa = _dg_at(dg, f"logpa_{solver}")
    need({4, 5} <= set(pa.index), "needs #SF = 4 and 5")
    ok = pa.loc[5] >= pa.loc[4] - 0.05 * pa.loc[4].abs()
    return bool(ok.all()), ", ".join(f"{a}: {fmt(pa.loc[4, a])} -> {fmt(pa.loc[5, a])}" for a in pa.columns)


@claim("dg-lisa-highest-beta", "PA paper, Figure 8 (right)",
       "At #SF = 5 and SR = 1, LISA (the most confident model) has the highest final beta "
       "({solver}).", "dg", solvers=SOLVERS)
def _(dg, solver):
    beta = _dg_at(dg, f"beta_{solver}")
    _algorithms(beta, ["lisa"])
    need(len(beta.columns) > 1 and 5 in beta.index, "needs another algorithm and #SF = 5")
    v = beta.loc[5]
    return v.idxmax() == "lisa", ", ".join(f"{a} {fmt(b)}" for a, b in v.items())


@claim("dg-lisa-most-confident", "PA paper, Section 4.2 and Figure 8",
       "LISA is the most confident of the three algorithms: its mean predictive confidence (max "
       "softmax) is the highest on env0 and on every env k, #SF = 1..5.", "dg")
def _(dg):
    rows = dg[(dg.shift_ratio - 1.0).abs() < 1e-9]
    need(len(rows) > 0 and "confidence" in rows.columns, "no confidence at SR = 1")
    conf = rows.pivot_table(index="n_shift_factors", columns="algorithm", values="confidence", aggfunc="mean")
    env0 = rows.pivot_table(index="n_shift_factors", columns="algorithm", values="confidence_env0",
                            aggfunc="mean").mean()
    _algorithms(conf, ["erm", "irm", "lisa"])
    panels = {"env0": env0, **{f"env{k}": conf.loc[k] for k in conf.index}}
    ranks = {name: int(v.rank(ascending=False)["lisa"]) for name, v in panels.items()}
    n = len(conf.columns)
    summary = (f"LISA the most confident in {sum(r == 1 for r in ranks.values())} and the least "
               f"in {sum(r == n for r in ranks.values())} of {len(panels)}")
    return all(r == 1 for r in ranks.values()), summary + ": " + "; ".join(
        f"{name}: " + ", ".join(f"{a.upper()} {fmt(v[a])}" for a in v.sort_values(ascending=False).index)
        for name, v in panels.items())


@claim("dg-pa-separates-algorithms", "PA paper, Figure 7 (caption)",
       "At every shift ratio SR and every #SF, PA ({solver}) separates the algorithms: for every "
       "pair, the means over seeds differ by more than the sum of their standard deviations over "
       "seeds (Figure 7's error bars do not overlap).", "dg", solvers=SOLVERS,
       unseeded="separation is judged against the spread over seeds (Figure 7's error bars)")
def _(dg, solver):
    need(f"logpa_{solver}" in dg.columns, f"no logpa_{solver} column")
    stats = dg.groupby(["shift_ratio", "n_shift_factors", "algorithm"])[f"logpa_{solver}"].agg(["mean", "std", "count"])
    need(len(stats) > 0, "no PA rows")
    need(bool((stats["count"] >= 2).all()), "needs at least 2 seeds of every algorithm for a spread")
    algorithms = sorted(set(stats.index.get_level_values("algorithm")))
    need(len(algorithms) > 1, "a single algorithm: nothing to separate")
    apart, overlapping = {}, []
    for (sr, k), g in stats.groupby(level=["shift_ratio", "n_shift_factors"]):
        g = g.droplevel([0, 1])
        for i, a in enumerate(algorithms):
            for b in algorithms[i + 1:]:
                ok = abs(g.loc[a, "mean"] - g.loc[b, "mean"]) > g.loc[a, "std"] + g.loc[b, "std"]
                apart.setdefault(sr, []).append(ok)
                if not ok:
                    overlapping.append(f"SR {sr:g} #SF {k} {a.upper()}-{b.upper()}")
    total = sum(len(v) for v in apart.values())
    measured = f"separated at {total - len(overlapping)} of {total} (SR, #SF, pair) points (" + ", ".join(
        f"SR {sr:g}: {sum(v)}/{len(v)}" for sr, v in apart.items()) + ")"
    if overlapping:
        measured += "; overlapping e.g. " + ", ".join(overlapping[:4])
    return not overlapping, measured


# ------------------------------------------------------------------ model selection (Table 1)
# The claims read Table 1's selections: in-distribution validation.  A cell (setting, algorithm,
# test set) where a criterion had no preference in any seed (its best validation value tied:
# log PA at its beta* = 0 floor in every epoch, say) is counted apart, never as a win or a loss.
TABLE1_VALIDATION = "ID"


def _delta(ms: pd.DataFrame, solver: str) -> pd.Series:
    """PA-selected (by `solver`) minus accuracy-selected test accuracy per (setting, algorithm,
    env): the mean over the seeds where both criteria chose an epoch, NaN where none did."""
    if "validation" in ms.columns:
        ms = ms[ms.validation == TABLE1_VALIDATION]
        need(len(ms) > 0, f"no selection on the {TABLE1_VALIDATION} validation split")
    if "solver" in ms.columns:
        ms = ms[ms.solver == solver]
        need(len(ms) > 0, f"no selection by PA ({solver})")
    d = ms.assign(delta=ms.acc_best_pa - ms.acc_best_acc)
    return d.groupby(["setting", "algorithm", "env"]).delta.mean()


def _no_preference(d: pd.Series) -> str:
    return f", no preference in {int(d.isna().sum())}" if d.isna().any() else ""


@claim("ms-pa-selects-better", "PA paper, Table 1",
       "PA-based ({solver}) epoch selection gives a higher test accuracy than accuracy-based "
       "selection in more (setting, algorithm, test set) cells than it gives a lower one (cells "
       "without a preference of either criterion counted apart).", "model_selection",
       solvers=SOLVERS)
def _(ms, solver):
    d = _delta(ms, solver)
    need(bool(d.notna().any()), f"no cell where both criteria chose an epoch (of {len(d)})")
    up, down = int((d > 1e-12).sum()), int((d < -1e-12).sum())
    equal = int(d.notna().sum()) - up - down
    return up > down, f"higher in {up}, lower in {down}, equal in {equal}{_no_preference(d)} of {len(d)} cells"


@claim("ms-partial-go-gain", "PA paper, Section 4.2 (Model Selection)",
       "In the partial generalisation-opportunity settings 1-CGO and 3-CGO, PA-based ({solver}) "
       "selection improves test accuracy on average (mean difference > 0 over the cells where "
       "both criteria chose an epoch).", "model_selection", solvers=SOLVERS)
def _(ms, solver):
    d = _delta(ms, solver).reset_index()
    d = d[d.setting.isin(["1-CGO", "3-CGO"])]
    need(len(d) > 0, "no 1-CGO / 3-CGO runs")
    compared = d.delta.dropna()
    need(len(compared) > 0, f"no 1-CGO / 3-CGO cell where both criteria chose an epoch (of {len(d)})")
    mean = float(compared.mean())
    return mean > 0, f"mean difference {fmt(100 * mean)} points over {len(compared)} cells{_no_preference(d.delta)}"


@claim("ms-irm-benefits-more", "PA paper, Section 4.2 (Model Selection)",
       "IRM benefits more from PA-based ({solver}) selection than ERM: its mean test-accuracy "
       "difference (PA- minus accuracy-selected, over the cells where both criteria chose an "
       "epoch) is larger.", "model_selection", solvers=SOLVERS)
def _(ms, solver):
    d = _delta(ms, solver)
    means = d.groupby(level="algorithm").mean()  # NaN cells (no preference) left out
    need({"erm", "irm"} <= set(means.dropna().index),
          "needs ERM and IRM cells where both criteria chose an epoch")
    return bool(means["irm"] > means["erm"]), (f"IRM {fmt(100 * means['irm'])}, ERM {fmt(100 * means['erm'])} "
                                               f"points{_no_preference(d)}")
