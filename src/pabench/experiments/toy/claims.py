"""Claims of the PA paper's toy examples (Figures 1 and 2).

Each check receives the tidy tables it names (see pabench.reporting.claims)."""
from __future__ import annotations

import math

import pandas as pd

from pabench.reporting.claims import SOLVERS, fmt, need, claim

def _bernoulli(table: pd.DataFrame, solver: str = "exact") -> pd.DataFrame:
    """PA of one solver and accuracy, mean over seeds, one row per p, one column per classifier."""
    rows = table[table.solver == solver]
    need(len(rows) > 0, f"no {solver}-solver rows")
    return rows.groupby(["p", "classifier"])[["pa", "accuracy"]].mean().unstack("classifier")


@claim("toy-constant-is-robust", "PA paper, Section 1 and Figure 1",
       "The perfect and the constant classifier both get the maximal PA (log 2, exact solver) at "
       "every p, although the constant one's accuracy is lower whenever p > 0.",
       "toy_bernoulli", solver="exact")  # log 2 is the exact optimum; adam only approaches it
def _(table):
    t = _bernoulli(table)
    top = math.log(2)
    gap = max((t.pa.perfect - top).abs().max(), (t.pa.constant - top).abs().max())
    lower = (t.accuracy.constant[t.index > 0] < t.accuracy.perfect[t.index > 0]).all()
    return gap < 1e-6 and lower, f"max |PA - log 2| = {gap:.2g}; constant less accurate at p > 0: {lower}"


@claim("toy-random-is-not", "PA paper, Figure 1",
       "The random classifier (a permutation of the targets) has a lower PA ({solver}) than the "
       "constant classifier at every p strictly between 0 and 1.", "toy_bernoulli",
       solvers=("exact", "adam"))
def _(table, solver):
    t = _bernoulli(table, solver)
    inner = t[(t.index > 0) & (t.index < 1)]
    need(len(inner) > 0, "no p strictly between 0 and 1")
    gaps = inner.pa.constant - inner.pa.random
    return bool((gaps > 0).all()), f"min PA(constant) - PA(random) = {fmt(gaps.min())} over {len(gaps)} p"


@claim("toy-accuracy-inconsistent", "PA paper, Figure 1 (left)",
       "Accuracy ranks the random classifier above the constant one at some p > 0.5, while PA "
       "({solver}) ranks the constant one above the random one at every p strictly between 0 and "
       "1.", "toy_bernoulli", solvers=("exact", "adam"))
def _(table, solver):
    t = _bernoulli(table, solver)
    high = t[(t.index > 0.5) & (t.index < 1)]
    inner = t[(t.index > 0) & (t.index < 1)]
    need(len(high) > 0, "no p in (0.5, 1)")
    acc = bool((high.accuracy.random > high.accuracy.constant).any())
    pa = bool((inner.pa.constant > inner.pa.random).all())
    return acc and pa, f"accuracy prefers random at some p > 0.5: {acc}; PA prefers constant everywhere: {pa}"


@claim("toy-optimal-beta", "PA paper, Figure 2",
       "PA at the optimal beta (exact solver) is the maximum of the PA-versus-beta curve and "
       "exceeds PA at the too-low and the too-high beta.", "toy_gaussian", solver="exact",
       unseeded="one simulated example (Figure 2): the exact solver's optimum holds for any draw")
def _(table):
    curve = table[table.panel == "curve"]
    pts = curve.set_index("series").y
    need({"PA", "optimal", "too low", "too high"} <= set(pts.index), "curve points missing")
    best, top = float(pts["optimal"]), float(curve[curve.series == "PA"].y.max())
    holds = best >= top - 1e-9 and best > float(pts["too low"]) and best > float(pts["too high"])
    return holds, (f"PA(beta*) = {fmt(best)}, curve max = {fmt(top)}, too low {fmt(pts['too low'])}, "
                   f"too high {fmt(pts['too high'])}")
