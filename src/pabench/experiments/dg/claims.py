"""Claims of the PA paper's domain-generalisation and model-selection experiments (Section 4.2, Table 1).

Each check receives the tidy tables it names (see pabench.reporting.claims)."""
from __future__ import annotations

import pandas as pd

from pabench.reporting.claims import _f, _need, claim

def _dg_at(dg: pd.DataFrame, column: str, sr: float = 1.0) -> pd.DataFrame:
    """column at one shift ratio, mean over seeds: index #SF, one column per algorithm."""
    rows = dg[(dg.shift_ratio - sr).abs() < 1e-9]
    _need(len(rows) > 0, f"no SR = {sr:g} rows")
    return rows.pivot_table(index="n_shift_factors", columns="algorithm", values=column, aggfunc="mean")


def _algorithms(table: pd.DataFrame, needed) -> None:
    missing = [a for a in needed if a not in table.columns]
    _need(not missing, f"no {', '.join(missing)} runs")


@claim("dg-erm-irm-lisa", "PA paper, Section 4.2 and Figure 7",
       "At #SF = 5 and SR = 1, PA (adam) orders the algorithms ERM < IRM < LISA (ERM the weakest, "
       "LISA the most robust).", "dg")
def _(dg):
    pa = _dg_at(dg, "logpa_adam")
    _algorithms(pa, ["erm", "irm", "lisa"])
    _need(5 in pa.index, "no #SF = 5")
    v = pa.loc[5]
    return bool(v.erm < v.irm < v.lisa), f"ERM {_f(v.erm)}, IRM {_f(v.irm)}, LISA {_f(v.lisa)}"


@claim("dg-erm-above-irm-mild", "PA paper, Section 4.2",
       "At #SF = 1 and SR = 1, ERM has a higher PA (adam) than IRM.", "dg")
def _(dg):
    pa = _dg_at(dg, "logpa_adam")
    _algorithms(pa, ["erm", "irm"])
    v = pa.loc[1]
    return bool(v.erm > v.irm), f"ERM {_f(v.erm)}, IRM {_f(v.irm)}"


@claim("dg-accuracy-falls", "PA paper, Section 4.2",
       "AFR_T at SR = 1 is lower at #SF = 5 than at #SF = 1, for every algorithm.", "dg")
def _(dg):
    afr = _dg_at(dg, "afr_true")
    _need({1, 5} <= set(afr.index), "needs #SF = 1 and 5")
    return bool((afr.loc[5] < afr.loc[1]).all()), ", ".join(
        f"{a}: {_f(afr.loc[1, a])} -> {_f(afr.loc[5, a])}" for a in afr.columns)


@claim("dg-pa-stable-at-5", "PA paper, Section 4.2",
       "PA (adam, SR = 1) stays comparable from #SF = 4 to #SF = 5: it drops by at most 5% of "
       "|PA at #SF = 4| (or rises), for every algorithm.", "dg")
def _(dg):
    pa = _dg_at(dg, "logpa_adam")
    _need({4, 5} <= set(pa.index), "needs #SF = 4 and 5")
    ok = pa.loc[5] >= pa.loc[4] - 0.05 * pa.loc[4].abs()
    return bool(ok.all()), ", ".join(f"{a}: {_f(pa.loc[4, a])} -> {_f(pa.loc[5, a])}" for a in pa.columns)


@claim("dg-lisa-highest-beta", "PA paper, Figure 8 (right)",
       "At #SF = 5 and SR = 1, LISA (the most confident model) has the highest final beta (adam).",
       "dg")
def _(dg):
    beta = _dg_at(dg, "beta_adam")
    _algorithms(beta, ["lisa"])
    _need(len(beta.columns) > 1 and 5 in beta.index, "needs another algorithm and #SF = 5")
    v = beta.loc[5]
    return v.idxmax() == "lisa", ", ".join(f"{a} {_f(b)}" for a, b in v.items())


# ------------------------------------------------------------------ model selection (Table 1)
def _delta(ms: pd.DataFrame) -> pd.Series:
    """PA-selected minus accuracy-selected test accuracy, mean over seeds, per (setting, alg, env)."""
    d = ms.assign(delta=ms.acc_best_pa - ms.acc_best_acc)
    return d.groupby(["setting", "algorithm", "env"]).delta.mean()


@claim("ms-pa-selects-better", "PA paper, Table 1",
       "PA-based epoch selection gives a higher test accuracy than accuracy-based selection in "
       "more (setting, algorithm, test set) cells than it gives a lower one.", "model_selection")
def _(ms):
    d = _delta(ms)
    up, down = int((d > 1e-12).sum()), int((d < -1e-12).sum())
    return up > down, f"higher in {up}, lower in {down}, equal in {len(d) - up - down} of {len(d)} cells"


@claim("ms-partial-go-gain", "PA paper, Section 4.2 (Model Selection)",
       "In the partial generalisation-opportunity settings 1-CGO and 3-CGO, PA-based selection "
       "improves test accuracy on average (mean difference > 0).", "model_selection")
def _(ms):
    d = _delta(ms).reset_index()
    d = d[d.setting.isin(["1-CGO", "3-CGO"])]
    _need(len(d) > 0, "no 1-CGO / 3-CGO runs")
    mean = float(d.delta.mean())
    return mean > 0, f"mean difference {_f(100 * mean)} points over {len(d)} cells"


@claim("ms-irm-benefits-more", "PA paper, Section 4.2 (Model Selection)",
       "IRM benefits more from PA-based selection than ERM: its mean test-accuracy difference "
       "(PA- minus accuracy-selected) is larger.", "model_selection")
def _(ms):
    d = _delta(ms).groupby(level="algorithm").mean()
    _need({"erm", "irm"} <= set(d.index), "needs both ERM and IRM runs")
    return bool(d["irm"] > d["erm"]), f"IRM {_f(100 * d['irm'])}, ERM {_f(100 * d['erm'])} points"
