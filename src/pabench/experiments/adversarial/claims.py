"""Claims of the PA paper's adversarial experiments (Section 4.1, Appendix F).

Each check receives the tidy tables it names (see pabench.reporting.claims)."""
from __future__ import annotations

import math

import pandas as pd

from pabench.core.paths import Eps
from pabench.reporting.claims import _discordant, _f, _need, claim

UNDEFENDED = ("undefended", "Standard")   # the zoo's and RobustBench's undefended model
JPEG_RS = "jpeg_rs"
ADDEPALLI, WANG = "Addepalli2022Efficient_RN18", "Wang2023Better_WRN-28-10"


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
    return sorted(tags, key=lambda t: Eps(t).value or 0.0)  # eps tags in increasing order


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
