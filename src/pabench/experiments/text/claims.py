"""Claims of the PA paper's text shifts (Appendix C, Figure 10), checked on the tidy table of
rule text_score (`text`): one classifier, one draw of the reviews and the shifts.  The quick
scale (IMDB sentences, MiniLM with a logistic head) and the paper scale (IMDB reviews,
DistilBERT) build that table; the test scale does not, and there these claims are not
evaluated."""
from __future__ import annotations

import pandas as pd

from pabench.reporting.claims import SOLVERS, fmt, need, claim

ONE_RUN = ("one classifier and one seeded draw of the reviews and shifts (text.seed): "
           "no training seeds to repeat over")
MIN_POWERS = 3   # a correlation with W over fewer points says little


def _strategy(text: pd.DataFrame, strategy: str) -> pd.DataFrame:
    rows = text[text.strategy == strategy].sort_values("power")
    need(len(rows) > 0, f"no {strategy} views")
    need(rows.power.nunique() >= MIN_POWERS,
          f"{strategy}: {rows.power.nunique()} values of W (need {MIN_POWERS})")
    return rows


def _pa_trend(rows: pd.DataFrame, solver: str) -> tuple[float, str]:
    """Spearman correlation of log PA (of `solver`) with W, and a note on saturation.  A view
    whose PA sits at its floor (beta* = 0: the two posteriors share nothing the model is sure of)
    cannot fall further; the views after the first such one are ties by construction, not
    evidence against a fall, so the correlation is taken up to the first floor view."""
    floor = rows.index[rows.beta_exact.to_numpy() == 0]
    note = ""
    if len(floor):
        first = rows.index.get_loc(floor[0])
        note = f" (PA at its floor, beta* = 0, from W = {int(rows.power.iloc[first])} on)"
        rows = rows.iloc[:first + 1]
    if len(rows) < 2:
        return float("nan"), note
    return float(rows.power.rank().corr(rows[f"logpa_{solver}"].rank())), note


@claim("text-amplification-pa-not-accuracy", "PA paper, Appendix C and Figure 10",
       "Under Amplification, accuracy does not fall while PA falls as W grows: the accuracy on "
       "the shifted reviews at the largest W is at least the clean accuracy, and the Spearman "
       "correlation of PA ({solver}) with W is at most -0.9 (up to the first W at which PA reaches "
       "its floor, beta* = 0, if it does).", "text", unseeded=ONE_RUN, solvers=SOLVERS)
def _(text, solver):
    rows = _strategy(text, "amplification")
    last, clean = float(rows.afr_true.iloc[-1]), float(rows.clean_accuracy.iloc[0])
    rho, note = _pa_trend(rows, solver)
    return last >= clean and rho <= -0.9, (
        f"accuracy clean {fmt(clean)}, at W = {int(rows.power.iloc[-1])} {fmt(last)}; "
        f"rho(PA, W) = {fmt(rho)}{note}")


@claim("text-levenshtein-contradiction-both-fall", "PA paper, Appendix C and Figure 10",
       "Under Levenshtein and under Contradiction, PA and accuracy both fall as W grows: for each, "
       "the accuracy at the largest W is below the clean accuracy and the Spearman correlation "
       "of PA ({solver}) with W is at most -0.9 (up to the first W at which PA reaches its "
       "floor, beta* = 0, if it does).", "text", unseeded=ONE_RUN, solvers=SOLVERS)
def _(text, solver):
    holds, measured = True, []
    for strategy in ("levenshtein", "contradiction"):
        rows = _strategy(text, strategy)
        last, clean = float(rows.afr_true.iloc[-1]), float(rows.clean_accuracy.iloc[0])
        rho, note = _pa_trend(rows, solver)
        holds &= last < clean and rho <= -0.9
        measured.append(f"{strategy}: accuracy clean {fmt(clean)}, at W = "
                        f"{int(rows.power.iloc[-1])} {fmt(last)}; rho(PA, W) = {fmt(rho)}{note}")
    return holds, "; ".join(measured)
