"""The papers' checkable claims, each evaluated on the workflow's tidy result tables.

Every claim names its source and states, before any result is seen, exactly what is compared and
with which threshold; `evaluate` returns one row per claim with what was measured and a verdict:
reproduced, not reproduced, or not evaluated (the tables at this scale lack what the claim needs,
e.g. the RobustBench models or a second eps).  Nothing here is tuned to make a claim pass.

Tables (names as passed to `evaluate`): toy_bernoulli, toy_gaussian (Figures 1-2), dg
(data/results/dg/pa.csv), model_selection (data/results/model_selection.csv), adversarial (the
main adversarial dataset's tidy table) and imagenet (when the ImageNet experiment runs).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import pandas as pd

REPRODUCED, NOT_REPRODUCED, NOT_EVALUATED = "reproduced", "not reproduced", "not evaluated"
UNDEFENDED = ("undefended", "Standard")   # the zoo's and RobustBench's undefended model
JPEG_RS = "jpeg_rs"
ADDEPALLI, WANG = "Addepalli2022Efficient_RN18", "Wang2023Better_WRN-28-10"


class NotEvaluated(Exception):
    """The tables lack what the claim needs at this scale."""


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    statement: str
    tables: tuple[str, ...]
    check: Callable  # (*tables) -> (holds: bool, measured: str)


CLAIMS: list[Claim] = []


def claim(id: str, source: str, statement: str, *tables: str):
    def register(check):
        CLAIMS.append(Claim(id, source, statement, tables, check))
        return check
    return register


def evaluate(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    rows = []
    for c in CLAIMS:
        missing = [t for t in c.tables if t not in tables]
        if missing:
            verdict, measured = NOT_EVALUATED, f"no {' / '.join(missing)} results at this scale"
        else:
            try:
                holds, measured = c.check(*(tables[t] for t in c.tables))
                verdict = REPRODUCED if holds else NOT_REPRODUCED
            except NotEvaluated as why:
                verdict, measured = NOT_EVALUATED, str(why)
        rows.append({"id": c.id, "source": c.source, "claim": c.statement, "measured": measured,
                     "verdict": verdict})
    return pd.DataFrame(rows)


def _f(x: float) -> str:
    return f"{x:.4g}"


def _need(condition: bool, why: str) -> None:
    if not condition:
        raise NotEvaluated(why)


def _discordant(a: pd.Series, b: pd.Series) -> int:
    """Pairs that a and b order strictly oppositely (0: the two rankings agree, ties allowed)."""
    keys = list(a.index)
    return sum(1 for i, x in enumerate(keys) for y in keys[i + 1:]
               if (a[x] - a[y]) * (b[x] - b[y]) < 0)


# ------------------------------------------------------------------ toy examples (Figures 1, 2)
def _bernoulli(table: pd.DataFrame) -> pd.DataFrame:
    """Exact-solver PA and accuracy, mean over seeds, one row per p, one column per classifier."""
    exact = table[table.solver == "exact"]
    _need(len(exact) > 0, "no exact-solver rows")
    return exact.groupby(["p", "classifier"])[["pa", "accuracy"]].mean().unstack("classifier")


@claim("toy-constant-is-robust", "PA paper, Section 1 and Figure 1",
       "The perfect and the constant classifier both get the maximal PA (log 2, exact solver) at "
       "every p, although the constant one's accuracy is lower whenever p > 0.",
       "toy_bernoulli")
def _(table):
    t = _bernoulli(table)
    top = math.log(2)
    gap = max((t.pa.perfect - top).abs().max(), (t.pa.constant - top).abs().max())
    lower = (t.accuracy.constant[t.index > 0] < t.accuracy.perfect[t.index > 0]).all()
    return gap < 1e-6 and lower, f"max |PA - log 2| = {gap:.2g}; constant less accurate at p > 0: {lower}"


@claim("toy-random-is-not", "PA paper, Figure 1",
       "The random classifier (a permutation of the targets) has a lower PA than the constant "
       "classifier at every p strictly between 0 and 1.", "toy_bernoulli")
def _(table):
    t = _bernoulli(table)
    inner = t[(t.index > 0) & (t.index < 1)]
    _need(len(inner) > 0, "no p strictly between 0 and 1")
    gaps = inner.pa.constant - inner.pa.random
    return bool((gaps > 0).all()), f"min PA(constant) - PA(random) = {_f(gaps.min())} over {len(gaps)} p"


@claim("toy-accuracy-inconsistent", "PA paper, Figure 1 (left)",
       "Accuracy ranks the random classifier above the constant one at some p > 0.5, while PA "
       "ranks the constant one above the random one at every p strictly between 0 and 1.",
       "toy_bernoulli")
def _(table):
    t = _bernoulli(table)
    high = t[(t.index > 0.5) & (t.index < 1)]
    inner = t[(t.index > 0) & (t.index < 1)]
    _need(len(high) > 0, "no p in (0.5, 1)")
    acc = bool((high.accuracy.random > high.accuracy.constant).any())
    pa = bool((inner.pa.constant > inner.pa.random).all())
    return acc and pa, f"accuracy prefers random at some p > 0.5: {acc}; PA prefers constant everywhere: {pa}"


@claim("toy-optimal-beta", "PA paper, Figure 2",
       "PA at the optimal beta (exact solver) is the maximum of the PA-versus-beta curve and "
       "exceeds PA at the too-low and the too-high beta.", "toy_gaussian")
def _(table):
    curve = table[table.panel == "curve"]
    pts = curve.set_index("series").y
    _need({"PA", "optimal", "too low", "too high"} <= set(pts.index), "curve points missing")
    best, top = float(pts["optimal"]), float(curve[curve.series == "PA"].y.max())
    holds = best >= top - 1e-9 and best > float(pts["too low"]) and best > float(pts["too high"])
    return holds, (f"PA(beta*) = {_f(best)}, curve max = {_f(top)}, too low {_f(pts['too low'])}, "
                   f"too high {_f(pts['too high'])}")


# ------------------------------------------------------------------ adversarial (Section 4.1)
def _models(adv: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(adv.model))


def _undefended(adv: pd.DataFrame) -> str:
    found = [m for m in _models(adv) if m in UNDEFENDED]
    _need(bool(found), "no undefended model")
    _need(len(_models(adv)) > 1, "a single model: nothing to rank")
    return found[0]


def _attack(adv: pd.DataFrame, attack: str) -> pd.DataFrame:
    rows = adv[adv.attack == attack]
    _need(len(rows) > 0, f"no {attack} attack runs")
    return rows


def _at(rows: pd.DataFrame, ar: float, column: str) -> pd.DataFrame:
    """column at one AR: index eps tag, one column per model."""
    sel = rows[(rows.ar - ar).abs() < 1e-9]
    return sel.pivot_table(index="eps", columns="model", values=column, aggfunc="mean")


def _eps_order(tags) -> list[str]:
    from .adversarial.records import tag_eps  # eps tags ("0.1", "8-255") in increasing order
    return sorted(tags, key=lambda t: tag_eps(t) or 0.0)


def _undefended_lowest(adv, column: str):
    """Whether the undefended model has the lowest `column` under PGD at AR = 1, every eps."""
    und = _undefended(adv)
    value = _at(_attack(adv, "pgd"), 1.0, column)
    others = value.drop(columns=und).min(axis=1)
    return bool((value[und] < others).all()), "; ".join(
        f"eps {e}: undefended {_f(value[und][e])} vs others' min {_f(others[e])}"
        for e in _eps_order(value.index))


@claim("adv-pgd-undefended-lowest", "PA paper, Section 4.1 and Figure 3",
       "Under PGD at AR = 1, the undefended model has the lowest PA (adam) of all models, at every "
       "eps.", "adversarial")
def _(adv):
    return _undefended_lowest(adv, "logpa_adam")


@claim("adv-pgd-undefended-decreasing", "PA paper, Section 4.1 (PGD)",
       "Under PGD, the undefended model's PA (adam) falls as AR grows: Spearman correlation of PA "
       "with AR at most -0.9, at every eps.", "adversarial")
def _(adv):
    und = _undefended(adv)
    rows = _attack(adv, "pgd")
    rows = rows[rows.model == und]
    rho = {e: g.ar.rank().corr(g.logpa_adam.rank()) for e, g in rows.groupby("eps")}
    return all(r <= -0.9 for r in rho.values()), "; ".join(
        f"eps {e}: rho = {_f(rho[e])}" for e in _eps_order(rho))


@claim("adv-pgd-stronger-eps-lower", "PA paper, Section 4.1 (PGD)",
       "Under PGD at AR = 1, the undefended model's PA (adam) is lower at every larger eps.",
       "adversarial")
def _(adv):
    und = _undefended(adv)
    pa = _at(_attack(adv, "pgd"), 1.0, "logpa_adam")[und]
    order = _eps_order(pa.index)
    _need(len(order) > 1, "a single eps")
    values = [pa[e] for e in order]
    holds = all(b < a for a, b in zip(values, values[1:]))
    return holds, ", ".join(f"eps {e}: {_f(pa[e])}" for e in order)


def _afr_overestimates(adv, attack: str, max_ar: float):
    """Some (eps, 0 < AR <= max_ar) where AFR_T ranks the undefended model above a defended one
    while PA ranks it below all of them."""
    und = _undefended(adv)
    rows = _attack(adv, attack)
    found = []
    for (eps, ar), g in rows[(rows.ar > 0) & (rows.ar <= max_ar + 1e-9)].groupby(["eps", "ar"]):
        g = g.set_index("model")
        others = g.drop(index=und)
        if (g.afr_true[und] > others.afr_true).any() and (g.logpa_adam[und] < others.logpa_adam).all():
            found.append(f"eps {eps}, AR {ar:g}")
    return bool(found), ("at " + ", ".join(found)) if found else "at no (eps, AR)"


@claim("adv-pgd-afr-overestimates", "PA paper, Section 4.1 and Figure 3",
       "Under PGD, at some eps and some 0 < AR <= 0.3, AFR_T ranks the undefended model above at "
       "least one defended model while PA (adam) ranks it below all of them.", "adversarial")
def _(adv):
    return _afr_overestimates(adv, "pgd", 0.3)


@claim("adv-fmn-afr-overestimates", "PA paper, Section 4.1 and Figure 5",
       "Under FMN, at some 0 < AR <= 0.5, AFR_T ranks the undefended model above at least one "
       "defended model while PA (adam) ranks it below all of them.", "adversarial")
def _(adv):
    return _afr_overestimates(adv, "fmn", 0.5)


def _trained(adv) -> list[str]:
    """Adversarially trained models: all but the undefended and the JPEG + RS one."""
    return [m for m in _models(adv) if m not in UNDEFENDED and m != JPEG_RS]


@claim("adv-pgd-jpeg-rs-weak", "PA paper, Section 4.1 (PGD)",
       "Under PGD at the smallest eps and AR = 1, JPEG + RS has a lower PA (adam) than every "
       "adversarially trained model.", "adversarial")
def _(adv):
    trained = _trained(adv)
    _need(JPEG_RS in _models(adv) and bool(trained), "needs JPEG + RS and an adversarially trained model")
    pa = _at(_attack(adv, "pgd"), 1.0, "logpa_adam")
    eps = _eps_order(pa.index)[0]
    best = pa.loc[eps, trained]
    return bool((pa.loc[eps, JPEG_RS] < best).all()), (
        f"eps {eps}: JPEG + RS {_f(pa.loc[eps, JPEG_RS])}, trained models min {_f(best.min())}")


@claim("adv-pgd-undefended-lowest-beta", "PA paper, Figure 4 (bottom)",
       "Under PGD at AR = 1, the undefended model's final beta (adam) is the lowest of all models, "
       "at every eps.", "adversarial")
def _(adv):
    return _undefended_lowest(adv, "beta_adam")


@claim("adv-pgd-jpeg-rs-highest-beta", "PA paper, Figure 4 and Section 4.1",
       "Under PGD at AR = 1, JPEG + RS's final beta (adam) is the highest of all models, at every "
       "eps.", "adversarial")
def _(adv):
    _need(JPEG_RS in _models(adv) and len(_models(adv)) > 1, "needs JPEG + RS and another model")
    beta = _at(_attack(adv, "pgd"), 1.0, "beta_adam")
    others = beta.drop(columns=JPEG_RS).max(axis=1)
    return bool((beta[JPEG_RS] > others).all()), "; ".join(
        f"eps {e}: JPEG + RS {_f(beta[JPEG_RS][e])} vs others' max {_f(others[e])}"
        for e in _eps_order(beta.index))


def _same_order(adv, attack: str, ar: float):
    """Whether PA (adam) and AFR_T order the models alike (no discordant pair) at every eps."""
    _need(len(_models(adv)) > 1, "a single model: nothing to rank")
    rows = _attack(adv, attack)
    pa, afr = _at(rows, ar, "logpa_adam"), _at(rows, ar, "afr_true")
    bad = {e: _discordant(pa.loc[e], afr.loc[e]) for e in pa.index}
    return all(v == 0 for v in bad.values()), "; ".join(
        f"eps {e}: {bad[e]} discordant pairs" for e in _eps_order(bad))


@claim("adv-ar0-ranking", "PA paper, Section 4.1 (AR = 0 with Adam)",
       "At AR = 0, PA (adam) orders the models as AFR_T (their clean accuracy) does: no pair of "
       "models is ordered oppositely (PGD, every eps).", "adversarial")
def _(adv):
    return _same_order(adv, "pgd", 0.0)


@claim("adv-exact-no-shift", "PA paper, Theorem 3 and Section 4.1",
       "With the exact solver, at AR = 0 (X' = X'') beta* is infinite and log PA is 0, for every "
       "model, attack and eps.", "adversarial")
def _(adv):
    rows = adv[adv.ar == 0]
    _need(len(rows) > 0, "no AR = 0 rows")
    finite = int((~(rows.beta_exact == math.inf)).sum())
    worst = float(rows.logpa_exact.abs().max())
    return finite == 0 and worst < 1e-9, f"{finite} of {len(rows)} runs with finite beta; max |log PA| = {worst:.2g}"


@claim("adv-fmn-jpeg-rs-best", "PA paper, Figure 5 and Section 4.1 (FMN)",
       "Under FMN, at some AR in [0.3, 0.6], JPEG + RS has the highest PA (adam) of all models.",
       "adversarial")
def _(adv):
    _need(JPEG_RS in _models(adv) and len(_models(adv)) > 1, "needs JPEG + RS and another model")
    rows = _attack(adv, "fmn")
    rows = rows[(rows.ar >= 0.3 - 1e-9) & (rows.ar <= 0.6 + 1e-9)]
    pa = rows.pivot_table(index="ar", columns="model", values="logpa_adam")
    best = pa.idxmax(axis=1)
    wins = [f"{ar:g}" for ar, m in best.items() if m == JPEG_RS]
    return bool(wins), ("best at AR " + ", ".join(wins)) if wins else (
        "best models: " + ", ".join(f"AR {ar:g}: {m}" for ar, m in best.items()))


@claim("adv-apgd-top-defenses", "PA paper, Section 4.1 (AutoAttack) and Appendix F",
       "Under APGD-CE and APGD-DLR, Addepalli et al. (2022) and Wang et al. (2023) have the two "
       "highest PAs (adam) at every eps and every AR > 0.", "adversarial")
def _(adv):
    _need({ADDEPALLI, WANG} <= set(_models(adv)), "needs the RobustBench models (paper scale)")
    misses = []
    for attack in ("apgd-ce", "apgd-dlr"):
        rows = _attack(adv, attack)
        for (eps, ar), g in rows[rows.ar > 0].groupby(["eps", "ar"]):
            top = set(g.nlargest(2, "logpa_adam").model)
            if top != {ADDEPALLI, WANG}:
                misses.append(f"{attack} eps {eps} AR {ar:g}")
    return not misses, f"{len(misses)} (attack, eps, AR) where they are not the top two" + (
        f", e.g. {misses[0]}" if misses else "")


@claim("adv-imagenet-same-ranking", "PA paper, Section 4.1 and Appendix F.2",
       "On ImageNet under APGD-CE at AR = 1, PA (adam) and AFR_T order the models the same way "
       "(no discordant pair) at every eps.", "imagenet")
def _(adv):
    return _same_order(adv, "apgd-ce", 1.0)


# ------------------------------------------------------------------ domain generalisation (4.2)
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


def to_markdown(results: pd.DataFrame, scale: str) -> str:
    counts = results.verdict.value_counts()
    lines = [f"# Claims check ({scale} scale)", "",
             ", ".join(f"{counts.get(v, 0)} {v}" for v in (REPRODUCED, NOT_REPRODUCED, NOT_EVALUATED)),
             "", "| claim | source | measured | verdict |", "| --- | --- | --- | --- |"]
    cell = lambda text: str(text).replace("|", "\\|")  # noqa: E731 - a pipe would end the cell
    for r in results.itertuples():
        lines.append(f"| **{r.id}**: {cell(r.claim)} | {cell(r.source)} | {cell(r.measured)} | {r.verdict} |")
    return "\n".join(lines) + "\n"
