"""Claims of OODRobustBench (Li et al. 2024; Sections 3-5 and Appendix B.2).

Each check receives the stacked tidy tables it names (see pabench.reporting.claims): oodrb_shifts
(one row per model, shift and severity: ID, corruption, natural and threat rows; the workflow
stacks each model's threat rows into it), oodrb_attacks (Table 3's attack comparison)
and oodrb_predictions (per-image clean and adversarial predictions on the ID set and the natural
shifts).  No derived table is needed: every check computes what it compares with
pabench.experiments.oodrb.analysis, the same functions the figures and tables use (percent units,
the paper's filter of AT models with ID accuracy + robustness < 110 before every fit).

A claim about a mean needs one model with the values; a correlation, fit or rank needs at least
MIN_MODELS models of the kind it is about (else: not evaluated).  Thresholds come from the
paper's wording, fixed before any result was seen."""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from pabench.experiments.oodrb import analysis as A
from pabench.reporting.claims import fmt, need, claim

SOURCE = "OODRobustBench (Li et al.)"
MIN_MODELS = 3          # fewer models than this: no correlation, fit or ranking to read
# Section 4.1: "the regression of Acc-Acc and Rob-Rob for most shifts achieve very high R^2
# (> 0.9)"; OOD_d, the average over the dataset shifts, is among the highest in Figure 3.
R2_DATASET = 0.9
# Section 4.2: L-p robustness against another eps or p-norm: "R^2 of their regression is higher
# than 0.7 across all assessed set-ups".
R2_LP_THREAT = 0.7
# Section 4.3: agreement on the line, "R^2 is 0.99 for CIFAR-10.1 shift and 0.95 for Impulse
# noise shift": the lower of the two reported values.
R2_AGREEMENT = 0.95
# Appendix B.2: MM5 is "comparable" to AutoAttack; mean gap 0.16 points (sd 0.32) over
# RobustBench, 0.24 (ID) and 0.22 (severity 3) over Table 3's CIFAR-10 models.  One point is three
# of the paper's standard deviations: a larger mean gap is not "comparable".
MM5_AA_MAX_GAP = 1.0
# Section 5: the upper limit of OOD_d robustness, slope x 100 + intercept, is 66% / 71% / 43%:
# well below perfect robustness.
UPPER_LIMIT = 100.0
# Every claim here is a statement over the zoo (a mean, fit, correlation or ranking across its
# models), so the zoo's spread in method, width, epochs and augmentation is the sample the claim is
# checked on, each claim's n in its measured text; training every model on three seeds would triple
# the experiment's time (about 630 s of jobs at quick scale) without a new kind of variation.
ZOO = "a statement over the zoo's models: their variety is the sample, no training seeds"


def _at(shifts: pd.DataFrame) -> pd.DataFrame:
    agg = A.aggregate(shifts)
    return agg[agg.adversarial.astype(bool)]


def _fit_row(f: pd.DataFrame, target: str, group: str, pair: str) -> pd.Series:
    rows = f[(f.target == target) & (f.group == group) & (f.pair == pair)]
    need(len(rows) > 0, f"no {group} {pair} fit for {target}")
    row = rows.iloc[0]
    need(row.n >= MIN_MODELS, f"{group} {pair} fit for {target} on {row.n} models "
                               f"(needs {MIN_MODELS})")
    return row


def _fit_text(row: pd.Series) -> str:
    how = (f"{row.left_out} left out by the 110 filter" if row.filtered
           else "no filter (too few would remain)" if row.group == "AT" else "no filter")
    return f"n = {row.n}, {how}"


def _r2_of(row: pd.Series, what: str) -> float:
    need(np.isfinite(row.r2), f"R^2 of {what} undefined (a constant side)")
    return float(row.r2)


@claim("oodrb-degradation-dataset-shift", f"{SOURCE}, Section 3.2 and Figure 2",
       "Robustness degrades under dataset shift: the mean over the adversarially trained models "
       "of clean robustness - OOD_d robustness (MM5 at the training eps; OOD_d = (R_c + R_n) / 2; "
       "clean: each corruption's own original images, the ID test set for natural shifts) is "
       "above 0 (paper: 18 points on CIFAR-10 L-inf).", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    at = _at(shifts)
    d = at[["oodd_clean_rob", "oodd_rob"]].dropna()
    need(len(d) > 0, "no adversarially trained model with ID and OOD_d robustness")
    gap = float((d.oodd_clean_rob - d.oodd_rob).mean())
    basis = ", ".join(sorted(set(at.loc[d.index, "oodd_basis"])))
    return gap > 0, (f"mean clean - OOD_d robustness {gap:.1f} points over {len(d)} AT models "
                     f"(clean {d.oodd_clean_rob.mean():.1f}%, OOD_d {d.oodd_rob.mean():.1f}%; "
                     f"OOD_d from {basis})")


@claim("oodrb-degradation-threat-shift", f"{SOURCE}, Section 3.2 and Figure 2",
       "Robustness degrades under threat shift: the mean over the adversarially trained models of "
       "ID robustness - OOD_t robustness (the mean over the unforeseen threat shifts) is above 0 "
       "(paper: 18 points on CIFAR-10 L-inf).", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    d = _at(shifts)[["id_rob", "oodt_rob"]].dropna()
    need(len(d) > 0, "no adversarially trained model with ID and threat-shift robustness")
    gap = float((d.id_rob - d.oodt_rob).mean())
    threats = ", ".join(A.threat_kinds(shifts))
    return gap > 0, (f"mean ID - OOD_t robustness {gap:.1f} points over {len(d)} AT models "
                     f"(ID {d.id_rob.mean():.1f}%, OOD_t {d.oodt_rob.mean():.1f}%; threats: {threats})")


@claim("oodrb-higher-id-more-degradation", f"{SOURCE}, Section 3.2 and Table 1",
       "The higher the ID robustness, the more robustness degrades: across the adversarially "
       "trained models, Spearman's rank correlation of ID robustness with the degradation clean - "
       "OOD (OOD = mean of OOD_d and OOD_t robustness; clean: the shifted images' originals, as "
       "in the dataset-shift claim) is above 0.", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    d = _at(shifts)[["id_rob", "deg_rob"]].dropna()
    need(len(d) >= MIN_MODELS, f"{len(d)} AT models with ID and OOD robustness (needs {MIN_MODELS})")
    need(d.id_rob.nunique() > 1 and d.deg_rob.nunique() > 1, "a constant side: no ranking")
    rho = stats.spearmanr(d.id_rob, d.deg_rob)
    return bool(rho.statistic > 0), (f"Spearman rho = {fmt(rho.statistic)} (p = {rho.pvalue:.2g}) "
                                     f"over {len(d)} AT models; degradation {d.deg_rob.min():.1f} "
                                     f"to {d.deg_rob.max():.1f} points")


@claim("oodrb-linear-dataset-shift", f"{SOURCE}, Section 4.1 and Figure 3",
       "ID robustness predicts OOD_d robustness linearly among adversarially trained models: the "
       "least-squares line ID -> OOD_d robustness has R^2 > 0.9 (\"very high R^2 (> 0.9)\"; models "
       "with ID accuracy + robustness < 110% left out as in the paper).", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    f = A.fits(shifts, pairs=("rob-rob",), groups=("AT",))
    row = _fit_row(f, "OOD_d", "AT", "rob-rob")
    r2 = _r2_of(row, "ID -> OOD_d robustness")
    return r2 > R2_DATASET, (f"R^2 = {r2:.3f}, slope {row.slope:.3f}, intercept "
                             f"{row.intercept:.1f} ({_fit_text(row)})")


@claim("oodrb-at-more-linear-corruptions", f"{SOURCE}, Section 4.1 and Figure 3",
       "Adversarial training strengthens the linear trend of accuracy under corruption shifts: the "
       "median over the corruptions of R^2 (ID accuracy -> accuracy on the corruption, averaged "
       "over severities) is higher for adversarially trained than for standardly trained models.",
       "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    f = A.fits(shifts, pairs=("acc-acc",), groups=("ST", "AT"))
    c = f[(f.family == "corruption") & ~f["aggregate"].astype(bool)]
    need(len(c) > 0, "no corruption shift")
    medians, found = {}, []
    for group in ("ST", "AT"):
        g = c[c.group == group]
        need(len(g) > 0 and g.n.max() >= MIN_MODELS,
              f"fewer than {MIN_MODELS} {group} models with corruption accuracy")
        r2 = g.r2.dropna()
        need(len(r2) > 0, f"R^2 undefined for every corruption ({group} models)")
        medians[group] = float(r2.median())
        found.append(f"{group}: median R^2 {medians[group]:.3f} over {len(r2)} corruptions "
                     f"(n = {int(g.n.max())})")
    return medians["AT"] > medians["ST"], "; ".join(found)


def _threat_r2(shifts: pd.DataFrame, names) -> dict:
    f = A.fits(shifts, pairs=("rob-rob",), groups=("AT",))
    return {name: _r2_of(_fit_row(f, name, "AT", "rob-rob"), f"ID -> {name} robustness")
            for name in names}


@claim("oodrb-lp-threats-linear", f"{SOURCE}, Section 4.2 and Figure 4",
       "ID L-p robustness predicts robustness under L-p threat shifts (a larger eps, linf_1.5x; "
       "another norm, l2) linearly among adversarially trained models: R^2 > 0.7 for each "
       "(\"higher than 0.7 across all assessed set-ups\").", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    lp = [n for n, k in A.threat_kinds(shifts).items() if k == "L-p"]
    need(bool(lp), "no L-p threat shift")
    r2 = _threat_r2(shifts, lp)
    return all(v > R2_LP_THREAT for v in r2.values()), ", ".join(
        f"{n}: R^2 = {v:.3f}" for n, v in r2.items()) + " (AT models)"


@claim("oodrb-stadv-less-linear", f"{SOURCE}, Section 4.2 and Figure 4",
       "L-p robustness correlates poorly with non-L-p robustness: among adversarially trained "
       "models, R^2 of ID robustness -> StAdv robustness is lower than R^2 for every L-p threat "
       "shift (linf_1.5x, l2).", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    lp = [n for n, k in A.threat_kinds(shifts).items() if k == "L-p"]
    stadv = A.attack_of(shifts, "stadv")
    need(bool(stadv), "no StAdv threat shift")
    need(bool(lp), "no L-p threat shift")
    r2 = _threat_r2(shifts, stadv + lp)
    worst_lp = min(r2[n] for n in lp)
    return all(r2[s] < worst_lp for s in stadv), ", ".join(
        f"{n}: R^2 = {v:.3f}" for n, v in r2.items())


@claim("oodrb-upper-limit-below-100", f"{SOURCE}, Section 5 and Figure 6",
       "Extrapolating the linear trend of adversarially trained models to perfect ID robustness "
       "predicts OOD_d robustness below 100%: slope x 100 + intercept of the line ID -> OOD_d "
       "robustness is below 100 (paper: 66% on CIFAR-10 L-inf).", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    f = A.fits(shifts, pairs=("rob-rob",), groups=("AT",))
    row = _fit_row(f, "OOD_d", "AT", "rob-rob")
    need(np.isfinite(row.slope), "no line: ID robustness is the same for every AT model")
    limit = float(row.slope * 100 + row.intercept)
    return limit < UPPER_LIMIT, (f"upper limit {limit:.1f}% (slope {row.slope:.3f}, intercept "
                                 f"{row.intercept:.1f}, R^2 {fmt(row.r2)}; {_fit_text(row)})")


@claim("oodrb-robustness-converts-worse", f"{SOURCE}, Section 5 and Figure 15",
       "Robustness converts to OOD worse than accuracy: for adversarially trained models, the "
       "slope of the line ID -> OOD_d robustness is below the slope of the line ID -> OOD_d "
       "accuracy.", "oodrb_shifts", unseeded=ZOO)
def _(shifts):
    f = A.fits(shifts, pairs=("acc-acc", "rob-rob"), groups=("AT",))
    rob = _fit_row(f, "OOD_d", "AT", "rob-rob")
    acc = _fit_row(f, "OOD_d", "AT", "acc-acc")
    need(np.isfinite(rob.slope) and np.isfinite(acc.slope), "a constant ID side: no slope")
    return bool(rob.slope < acc.slope), (f"slope robustness {rob.slope:.3f} (R^2 {fmt(rob.r2)}), "
                                         f"accuracy {acc.slope:.3f} (R^2 {fmt(acc.r2)}); "
                                         f"{_fit_text(rob)}")


@claim("oodrb-mm5-comparable-to-autoattack", f"{SOURCE}, Appendix B.2, Figure 8 and Table 3",
       "MM5 is as strong as AutoAttack at a lower cost: averaged over the Table-3 models, MM5's "
       "robust accuracy is within 1 point of AutoAttack's on the ID images and on the corrupted "
       "images (paper: mean gap 0.16, sd 0.32), with fewer gradient evaluations per ID image.",
       "oodrb_attacks", "oodrb_attack_images", unseeded=ZOO)
def _(attacks, images):
    s = A.attack_summary(attacks, images=images).set_index("attack")
    need({"aa", "mm5"} <= set(s.index), "needs AutoAttack and MM5 runs")
    mm5, aa = s.loc["mm5"], s.loc["aa"]
    need(mm5.gap_models > 0, "no model ran both AutoAttack and MM5")
    need(np.isfinite(mm5.grad_evals_id) and np.isfinite(aa.grad_evals_id),
          "no gradient evaluation counts")
    holds = abs(mm5.gap_id) <= MM5_AA_MAX_GAP + 1e-9 and mm5.grad_evals_id < aa.grad_evals_id
    text = f"MM5 - AA: ID {mm5.gap_id:+.2f} (SE {fmt(mm5.se_id)}) points"
    if np.isfinite(mm5.gap_ood):
        holds = holds and abs(mm5.gap_ood) <= MM5_AA_MAX_GAP + 1e-9  # percent differences of floats
        text += f", corrupted {mm5.gap_ood:+.2f} (SE {fmt(mm5.se_ood)}) points"
    return bool(holds), (f"{text} over {int(mm5.gap_models)} models x {mm5.n_id:.0f} ID images; "
                         f"AutoAttack {aa.setting}; gradient evaluations per ID image: MM5 "
                         f"{mm5.grad_evals_id:.0f}, AA {aa.grad_evals_id:.0f}")


@claim("oodrb-agreement-on-the-line", f"{SOURCE}, Section 4.3 and Figure 5",
       "Agreement on the line holds for adversarial predictions: over the pairs of adversarially "
       "trained models, the line ID agreement -> OOD agreement (share of images where both "
       "models' predictions on their own MM5 examples agree) has R^2 >= 0.95 on every OOD set "
       "with per-image predictions: the natural shifts and oodrb.agreement_corruptions, all "
       "severities pooled (paper: 0.99 for CIFAR-10.1, 0.95 for impulse noise).",
       "oodrb_predictions", "oodrb_shifts", unseeded=ZOO)
def _(predictions, shifts):
    at = [m for m in A.models_of(shifts).query("adversarial").model if m in set(predictions.model)]
    need(len(at) >= MIN_MODELS, f"{len(at)} AT models with predictions (needs {MIN_MODELS})")
    sets = A.ood_sets(predictions)
    need(bool(sets), "no OOD set in the predictions")
    found, holds = [], True
    for shift in sets:
        pairs = A.agreement(predictions, shift, at)
        r2 = float(pairs.fit_r2.iloc[0]) if len(pairs) else np.nan
        need(np.isfinite(r2), f"{shift}: R^2 undefined (agreement constant over the pairs)")
        holds &= r2 >= R2_AGREEMENT
        found.append(f"{shift}: R^2 = {r2:.3f}, slope {pairs.fit_slope.iloc[0]:.3f}")
    return bool(holds), "; ".join(found) + f" ({len(at)} AT models, {len(pairs)} pairs)"
