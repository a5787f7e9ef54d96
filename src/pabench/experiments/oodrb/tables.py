"""Tables of the OODRobustBench reproduction (Li et al. 2024) from the stacked tidy tables (pandas,
numpy and scipy only): the leaderboard (Table 1), the attack comparison (Table 3), the ID -> OOD
fits behind Figures 3, 4 and 6, effective robustness (Section 6), the zoo's training, and PA under
dataset shift (new).  Accuracy and robustness in percent, 1 decimal."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.experiments.oodrb import analysis as A
from pabench.experiments.oodrb.analysis import read_shifts, read_tables
from pabench.reporting.degenerate import COLUMN as DEGENERATE

# The paper's Table 3, CIFAR-10 L-inf rows (five RobustBench models), robust accuracy in percent:
# attack -> (ID, corruptions at severity 3) per model; the tables print their mean beside ours.
PAPER_TABLE3 = {"pgd": ((46.6, 52.3, 56.2, 58.7, 62.6), (27.6, 31.7, 34.4, 37.8, 40.3)),
                "cw": ((46.3, 52.6, 54.0, 57.2, 58.7), (27.3, 31.8, 32.9, 36.5, 37.1)),
                "aa": ((43.2, 49.3, 52.9, 55.6, 56.3), (24.8, 29.1, 31.7, 34.6, 34.7)),
                "mm5": ((43.3, 49.7, 53.0, 55.7, 56.8), (25.0, 29.3, 31.8, 34.8, 35.1))}


def _pct(values) -> pd.Series:
    return pd.Series(values, dtype=float).round(1)


def table1(inputs: dict) -> pd.DataFrame:
    """The leaderboard: per model, ID and OOD_d accuracy, ID, OOD_d, OOD_t and OOD robustness,
    the ranks by ID and by OOD robustness (1 = best) and the change (> 0: higher under shift);
    sorted by ID robustness.  Degenerate models are listed, marked (column degenerate); every
    fit and figure leaves them out."""
    shifts = read_shifts(inputs, keep_degenerate=True)
    agg = A.aggregate(shifts).sort_values(["rank_id", "model"], na_position="last")
    flagged = shifts.groupby("model")[DEGENERATE].any()
    return pd.DataFrame({
        "model": agg.model.to_numpy(), "method": agg.method.to_numpy(),
        "architecture": agg.arch.to_numpy() if "arch" in agg else "",
        "ID accuracy (%)": _pct(agg.id_acc.to_numpy()),
        "OOD_d accuracy (%)": _pct(agg.oodd_acc.to_numpy()),
        "ID robustness (%)": _pct(agg.id_rob.to_numpy()),
        "OOD_d robustness (%)": _pct(agg.oodd_rob.to_numpy()),
        "OOD_t robustness (%)": _pct(agg.oodt_rob.to_numpy()),
        "OOD robustness (%)": _pct(agg.ood_rob.to_numpy()),
        "rank ID": agg.rank_id.to_numpy(), "rank OOD": agg.rank_ood.to_numpy(),
        "rank change": agg.rank_change.to_numpy(),
        "OOD_d from": agg.oodd_basis.to_numpy(), "OOD from": agg.ood_basis.to_numpy(),
        DEGENERATE: agg.model.map(flagged).to_numpy()})


def table3(inputs: dict) -> pd.DataFrame:
    """Per attack (PGD, CW, AutoAttack, MM5), averaged over the Table-3 models: robustness on the
    ID images and on the corrupted images, gradient evaluations per image, the gap to AutoAttack
    (this attack - AA, mean over the models, percentage points), beside the paper's CIFAR-10
    means."""
    s = A.attack_summary(read_tables(inputs["attacks"]))
    return pd.DataFrame({
        "attack": s.label, "models": s.models,
        "ID robustness (%)": _pct(s.id_robustness),
        "OOD_d robustness (%)": _pct(s.ood_robustness),
        "OOD severities": [", ".join(map(str, v)) for v in s.severities],
        "grad evals per image (ID)": s.grad_evals_id.round(1),
        "grad evals per image (OOD)": s.grad_evals_ood.round(1),
        "seconds per model (ID)": s.seconds_id.round(2),
        "minus AA, ID (points)": s.gap_id.round(2),
        "minus AA, OOD (points)": s.gap_ood.round(2),
        "paper ID (%)": [round(float(np.mean(PAPER_TABLE3[a][0])), 2) if a in PAPER_TABLE3 else np.nan
                         for a in s.attack],
        "paper OOD_d, severity 3 (%)": [round(float(np.mean(PAPER_TABLE3[a][1])), 2)
                                        if a in PAPER_TABLE3 else np.nan for a in s.attack]})


def fits(inputs: dict, pairs=("acc-acc", "rob-rob"), groups=("ST", "AT"),
         min_total: float | None = A.MIN_TOTAL) -> pd.DataFrame:
    """Every linear fit ID -> OOD (per shift and aggregate, model group, pair of metrics): n,
    slope, intercept, R^2, the upper limit, how many models the 110 filter left out and whether
    it was applied."""
    f = A.fits(read_shifts(inputs), pairs=tuple(pairs), groups=tuple(groups), min_total=min_total)
    return pd.DataFrame({
        "shift": f.label, "family": f.family, "group": f.group, "pair": f.pair, "n": f.n,
        "slope": f.slope.round(3), "intercept": f.intercept.round(1), "R^2": f.r2.round(3),
        "upper limit (%)": f.upper_limit.round(1), "left out (acc + rob < 110)": f.left_out,
        "filtered": f.filtered})


def effective(inputs: dict, group: str = "AT",
              min_total: float | None = A.MIN_TOTAL) -> pd.DataFrame:
    """Effective accuracy and adversarial effective robustness (Eq. 5) of every model under
    OOD_d and OOD_t, against the line fitted on the group's models."""
    e = A.effective_robustness(read_shifts(inputs), group=group, min_total=min_total)
    return pd.DataFrame({
        "model": e.model, "method": e.method, "target": e.target, "metric": e.metric,
        "ID (%)": _pct(e["id"]), "OOD (%)": _pct(e.ood), "predicted (%)": _pct(e.predicted),
        "effective (points)": _pct(e.effective), "in fit": e.in_fit, "fit n": e.fit_n,
        "fit R^2": e.fit_r2.astype(float).round(3)})


def models(inputs: dict) -> pd.DataFrame:
    """The self-trained zoo, one row per model: training settings, the loss of its last epoch,
    seconds and ID test accuracy (the history has a row per epoch)."""
    h = read_tables(inputs["history"])
    if "epoch" in h.columns:  # each model's last epoch, models in table order
        h = h[h.epoch == h.groupby("model", sort=False).epoch.transform("max")]
    h = h.drop_duplicates("model", keep="last")
    columns = {"model": "model", "method": "method", "arch": "architecture", "epochs": "epochs",
               "augment": "augmentation", "trades_beta": "TRADES beta", "train_loss": "final loss",
               "train_seconds": "training seconds", "accuracy": "ID test accuracy (%)"}
    out = h[[c for c in columns if c in h.columns]].rename(columns=columns)
    if "ID test accuracy (%)" in out:
        out["ID test accuracy (%)"] = (100 * out["ID test accuracy (%)"].astype(float)).round(1)
    return out.reset_index(drop=True)


def pa_correlation(inputs: dict, groups=("all", "AT")) -> pd.DataFrame:
    """Kendall's tau (with p) across models between log PA (exact, adam) and robustness, per
    corruption and overall (mean log PA over every corruption row vs OOD_d robustness)."""
    r = A.pa_ranking(read_shifts(inputs), groups=tuple(groups))
    return pd.DataFrame({
        "models": r.group, "measure": r.measure.map(A.PA_MEASURES), "shift": r.label,
        "against": r.against, "n": r.n, "Kendall tau": r.tau.round(3), "p": r.p})


def pa_prediction(inputs: dict, groups=("all", "AT")) -> pd.DataFrame:
    """R^2 across models of OOD robustness (R_c, R_n, OOD_t, OOD_d) predicted by a line from ID
    log PA, ID accuracy or ID robustness."""
    p = A.pa_prediction(read_shifts(inputs), groups=tuple(groups))
    return pd.DataFrame({
        "models": p.group, "target": p.label, "predictor": p.predictor_label, "n": p.n,
        "R^2": p.r2.round(3), "slope": p.slope.round(3), "intercept": p.intercept.round(2)})
