"""Claims of the PA paper's adversarial experiments (Section 4.1, Appendix F).

Each check receives the tidy tables it names (see pabench.reporting.claims)."""
from __future__ import annotations

import math

import pandas as pd

from pabench.core.paths import Eps
from pabench.reporting.claims import SOLVERS, discordant, fmt, need, claim

UNDEFENDED = ("undefended", "Standard")   # the zoo's and RobustBench's undefended model
JPEG_RS = "jpeg_rs"
ADDEPALLI, WANG = "Addepalli2022Efficient_RN18", "Wang2023Better_WRN-28-10"


def _models(adv: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(adv.model))


def _undefended(adv: pd.DataFrame) -> str:
    found = [m for m in _models(adv) if m in UNDEFENDED]
    need(bool(found), "no undefended model")
    need(len(_models(adv)) > 1, "a single model: nothing to rank")
    return found[0]


def _attack(adv: pd.DataFrame, attack: str) -> pd.DataFrame:
    rows = adv[adv.attack == attack]
    need(len(rows) > 0, f"no {attack} attack runs")
    return rows


def _at(rows: pd.DataFrame, ar: float, column: str) -> pd.DataFrame:
    """column at one AR: index eps tag, one column per model."""
    need(column in rows.columns, f"no {column} column")
    sel = rows[(rows.ar - ar).abs() < 1e-9]
    return sel.pivot_table(index="eps", columns="model", values=column, aggfunc="mean")


def _eps_order(tags) -> list[str]:
    return sorted(tags, key=lambda t: Eps(t).value or 0.0)  # eps tags in increasing order


def _undefended_lowest(adv, column: str):
    """Whether the undefended model has the lowest `column` under PGD at AR = 1, every eps."""
    und = _undefended(adv)
    value = _at(_attack(adv, "pgd"), 1.0, column)
    others = value.drop(columns=und).min(axis=1)
    return bool((value[und] < others).all()), "; ".join(
        f"eps {e}: undefended {fmt(value[und][e])} vs others' min {fmt(others[e])}"
        for e in _eps_order(value.index))


@claim("adv-pgd-undefended-lowest", "PA paper, Section 4.1 and Figure 3",
       "Under PGD at AR = 1, the undefended model has the lowest PA ({solver}) of all models, at "
       "every eps.", "adversarial", solvers=SOLVERS)
def _(adv, solver):
    return _undefended_lowest(adv, f"logpa_{solver}")


@claim("adv-pgd-undefended-decreasing", "PA paper, Section 4.1 (PGD)",
       "Under PGD, the undefended model's PA ({solver}) falls as AR grows: Spearman correlation "
       "of PA with AR at most -0.9, at every eps.", "adversarial", solvers=SOLVERS)
def _(adv, solver):
    und = _undefended(adv)
    rows = _attack(adv, "pgd")
    rows = rows[rows.model == und]
    rho = {e: g.ar.rank().corr(g[f"logpa_{solver}"].rank()) for e, g in rows.groupby("eps")}
    return all(r <= -0.9 for r in rho.values()), "; ".join(
        f"eps {e}: rho = {fmt(rho[e])}" for e in _eps_order(rho))


@claim("adv-pgd-stronger-eps-lower", "PA paper, Section 4.1 (PGD)",
       "Under PGD at AR = 1, the undefended model's PA ({solver}) is lower at every larger eps.",
       "adversarial", solvers=SOLVERS)
def _(adv, solver):
    und = _undefended(adv)
    pa = _at(_attack(adv, "pgd"), 1.0, f"logpa_{solver}")[und]
    order = _eps_order(pa.index)
    need(len(order) > 1, "a single eps")
    values = [pa[e] for e in order]
    holds = all(b < a for a, b in zip(values, values[1:]))
    return holds, ", ".join(f"eps {e}: {fmt(pa[e])}" for e in order)


def _afr_overestimates(adv, attack: str, max_ar: float, solver: str):
    """Some (eps, 0 < AR <= max_ar) where AFR_T ranks the undefended model above a defended one
    while PA ranks it below all of them."""
    und = _undefended(adv)
    rows = _attack(adv, attack)
    found = []
    for (eps, ar), g in rows[(rows.ar > 0) & (rows.ar <= max_ar + 1e-9)].groupby(["eps", "ar"]):
        g = g.set_index("model")
        others = g.drop(index=und)
        pa = g[f"logpa_{solver}"]
        if (g.afr_true[und] > others.afr_true).any() and (pa[und] < pa.drop(index=und)).all():
            found.append(f"eps {eps}, AR {ar:g}")
    return bool(found), ("at " + ", ".join(found)) if found else "at no (eps, AR)"


@claim("adv-pgd-afr-overestimates", "PA paper, Section 4.1 and Figure 3",
       "Under PGD, at some eps and some 0 < AR <= 0.3, AFR_T ranks the undefended model above at "
       "least one defended model while PA ({solver}) ranks it below all of them.", "adversarial",
       solvers=SOLVERS)
def _(adv, solver):
    return _afr_overestimates(adv, "pgd", 0.3, solver)


@claim("adv-fmn-afr-overestimates", "PA paper, Section 4.1 and Figure 5",
       "Under FMN, at some 0 < AR <= 0.5, AFR_T ranks the undefended model above at least one "
       "defended model while PA ({solver}) ranks it below all of them.", "adversarial",
       solvers=SOLVERS)
def _(adv, solver):
    return _afr_overestimates(adv, "fmn", 0.5, solver)


def _trained(adv) -> list[str]:
    """Adversarially trained models: all but the undefended and the JPEG + RS one."""
    return [m for m in _models(adv) if m not in UNDEFENDED and m != JPEG_RS]


@claim("adv-pgd-jpeg-rs-weak", "PA paper, Section 4.1 (PGD)",
       "Under PGD at the smallest eps and AR = 1, JPEG + RS has a lower PA ({solver}) than every "
       "adversarially trained model.", "adversarial", solvers=SOLVERS)
def _(adv, solver):
    trained = _trained(adv)
    need(JPEG_RS in _models(adv) and bool(trained), "needs JPEG + RS and an adversarially trained model")
    pa = _at(_attack(adv, "pgd"), 1.0, f"logpa_{solver}")
    eps = _eps_order(pa.index)[0]
    best = pa.loc[eps, trained]
    return bool((pa.loc[eps, JPEG_RS] < best).all()), (
        f"eps {eps}: JPEG + RS {fmt(pa.loc[eps, JPEG_RS])}, trained models min {fmt(best.min())}")


@claim("adv-pgd-undefended-lowest-beta", "PA paper, Figure 4 (bottom)",
       "Under PGD at AR = 1, the undefended model's final beta ({solver}) is the lowest of all "
       "models, at every eps.", "adversarial", solvers=SOLVERS)
def _(adv, solver):
    return _undefended_lowest(adv, f"beta_{solver}")


@claim("adv-pgd-jpeg-rs-highest-beta", "PA paper, Figure 4 and Section 4.1",
       "Under PGD at AR = 1, JPEG + RS's final beta ({solver}) is the highest of all models, at "
       "every eps.", "adversarial", solvers=SOLVERS)
def _(adv, solver):
    need(JPEG_RS in _models(adv) and len(_models(adv)) > 1, "needs JPEG + RS and another model")
    beta = _at(_attack(adv, "pgd"), 1.0, f"beta_{solver}")
    others = beta.drop(columns=JPEG_RS).max(axis=1)
    return bool((beta[JPEG_RS] > others).all()), "; ".join(
        f"eps {e}: JPEG + RS {fmt(beta[JPEG_RS][e])} vs others' max {fmt(others[e])}"
        for e in _eps_order(beta.index))


def _same_order(adv, attack: str, ar: float, solver: str):
    """Whether PA (of `solver`) and AFR_T order the models alike (no discordant pair) at every eps."""
    need(len(_models(adv)) > 1, "a single model: nothing to rank")
    rows = _attack(adv, attack)
    pa, afr = _at(rows, ar, f"logpa_{solver}"), _at(rows, ar, "afr_true")
    bad = {e: discordant(pa.loc[e], afr.loc[e]) for e in pa.index}
    return all(v == 0 for v in bad.values()), "; ".join(
        f"eps {e}: {bad[e]} discordant pairs" for e in _eps_order(bad))


@claim("adv-ar0-ranking", "PA paper, Section 4.1 (AR = 0 with Adam)",
       "At AR = 0, PA (adam) orders the models as AFR_T (their clean accuracy) does: no pair of "
       "models is ordered oppositely (PGD, every eps).", "adversarial", solver="adam")
def _(adv):  # adam only: the exact solver gives log PA = 0 to every model at AR = 0 (adv-exact-no-shift)
    return _same_order(adv, "pgd", 0.0, "adam")


@claim("adv-exact-no-shift", "PA paper, Theorem 3 and Section 4.1",
       "With the exact solver, at AR = 0 (X' = X'') beta* is infinite and log PA is 0, for every "
       "model, attack and eps.", "adversarial", solver="exact")
def _(adv):
    rows = adv[adv.ar == 0]
    need(len(rows) > 0, "no AR = 0 rows")
    finite = int((~(rows.beta_exact == math.inf)).sum())
    worst = float(rows.logpa_exact.abs().max())
    return finite == 0 and worst < 1e-9, f"{finite} of {len(rows)} runs with finite beta; max |log PA| = {worst:.2g}"


@claim("adv-fmn-jpeg-rs-best", "PA paper, Figure 5 and Section 4.1 (FMN)",
       "Under FMN, at some AR in [0.3, 0.6], JPEG + RS has the highest PA ({solver}) of all "
       "models.", "adversarial", solvers=SOLVERS)
def _(adv, solver):
    need(JPEG_RS in _models(adv) and len(_models(adv)) > 1, "needs JPEG + RS and another model")
    rows = _attack(adv, "fmn")
    rows = rows[(rows.ar >= 0.3 - 1e-9) & (rows.ar <= 0.6 + 1e-9)]
    pa = rows.pivot_table(index="ar", columns="model", values=f"logpa_{solver}")
    best = pa.idxmax(axis=1)
    wins = [f"{ar:g}" for ar, m in best.items() if m == JPEG_RS]
    return bool(wins), ("best at AR " + ", ".join(wins)) if wins else (
        "best models: " + ", ".join(f"AR {ar:g}: {m}" for ar, m in best.items()))


@claim("adv-apgd-top-defenses", "PA paper, Section 4.1 (AutoAttack) and Appendix F",
       "Under APGD-CE and APGD-DLR, Addepalli et al. (2022) and Wang et al. (2023) have the two "
       "highest PAs ({solver}) at every eps and every AR > 0.", "adversarial", solvers=SOLVERS)
def _(adv, solver):
    need({ADDEPALLI, WANG} <= set(_models(adv)), "needs the RobustBench models (paper scale)")
    misses = []
    for attack in ("apgd-ce", "apgd-dlr"):
        rows = _attack(adv, attack)
        for (eps, ar), g in rows[rows.ar > 0].groupby(["eps", "ar"]):
            top = set(g.nlargest(2, f"logpa_{solver}").model)
            if top != {ADDEPALLI, WANG}:
                misses.append(f"{attack} eps {eps} AR {ar:g}")
    return not misses, f"{len(misses)} (attack, eps, AR) where they are not the top two" + (
        f", e.g. {misses[0]}" if misses else "")


@claim("adv-imagenet-same-ranking", "PA paper, Section 4.1 and Appendix F.2",
       "On ImageNet under APGD-CE at AR = 1, PA ({solver}) and AFR_T order the models the same "
       "way (no discordant pair) at every eps.", "imagenet", solvers=SOLVERS)
def _(adv, solver):
    return _same_order(adv, "apgd-ce", 1.0, solver)


@claim("adv-imagenet-afr-needs-large-ar", "PA paper, Section 4.1 (ImageNet) and Figure 17",
       "On ImageNet under APGD-CE, at every eps, PA ({solver}) ranks the models as AFR_T does at "
       "AR = 1 (no discordant pair) at every AR > 0, whereas AFR_T itself does so only from "
       "AR >= 0.8: it orders some pair oppositely at some 0 < AR < 0.8 and none at AR >= 0.8.",
       "imagenet", solvers=SOLVERS)
def _(adv, solver):
    need(len(_models(adv)) > 1, "a single model: nothing to rank")
    rows = _attack(adv, "apgd-ce")
    pa, afr = _by_ar(rows, f"logpa_{solver}"), _by_ar(rows, "afr_true")
    holds, measured = True, []
    for eps in _eps_order({e for e, _ in afr.index}):
        ars = sorted(ar for e, ar in afr.index if e == eps and ar > 0)
        full = [ar for ar in ars if abs(ar - 1.0) < 1e-9]
        need(bool(full), f"no AR = 1 rows at eps {eps}")
        ref = afr.loc[(eps, full[0])]
        pa_bad = [ar for ar in ars if discordant(pa.loc[(eps, ar)], ref)]
        afr_bad = [ar for ar in ars if discordant(afr.loc[(eps, ar)], ref)]
        early = [ar for ar in afr_bad if ar < 0.8 - 1e-9]
        holds &= not pa_bad and bool(early) and len(early) == len(afr_bad)
        measured.append(f"eps {eps}: PA discordant with AFR_T(AR = 1) at AR "
                        f"{_ars(pa_bad)}, AFR_T at AR {_ars(afr_bad)}")
    return holds, "; ".join(measured)


def _by_ar(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """column per (eps, AR): one column per model."""
    need(column in rows.columns, f"no {column} column")
    return rows.pivot_table(index=["eps", "ar"], columns="model", values=column, aggfunc="mean")


def _ars(ars) -> str:
    return ", ".join(f"{a:g}" for a in ars) if ars else "none"
