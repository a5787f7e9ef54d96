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

# The paper's Table 3, CIFAR-10 L-inf rows: per RobustBench model, robust accuracy in percent
# under each attack, (ID, corruptions at severity 3).  Printed only beside the same model ids.
PAPER_TABLE3 = {
    "Wong2020Fast": {"pgd": (46.6, 27.6), "cw": (46.3, 27.3), "aa": (43.2, 24.8),
                     "mm5": (43.3, 25.0)},
    "Engstrom2019Robustness": {"pgd": (52.3, 31.7), "cw": (52.6, 31.8), "aa": (49.3, 29.1),
                               "mm5": (49.7, 29.3)},
    "Huang2020Self": {"pgd": (56.2, 34.4), "cw": (54.0, 32.9), "aa": (52.9, 31.7),
                      "mm5": (53.0, 31.8)},
    "Sehwag2021Proxy_R18": {"pgd": (58.7, 37.8), "cw": (57.2, 36.5), "aa": (55.6, 34.6),
                            "mm5": (55.7, 34.8)},
    "Wang2020Improving": {"pgd": (62.6, 40.3), "cw": (58.7, 37.1), "aa": (56.3, 34.7),
                          "mm5": (56.8, 35.1)}}


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
    """Per model and attack (PGD, CW, AutoAttack, MM5), then per attack the mean over the models
    (model "mean"): what ran, robustness on the ID images and on the corrupted images, the gap to
    AutoAttack (this attack - AA, percentage points) with its standard error from the per-image
    flags (paired; for the mean, the difference averaged over the models image by image),
    gradient evaluations per image and seconds.  The paper's values stand only beside the same
    RobustBench model ids (and the mean only when every model is one of them)."""
    attacks = read_tables(inputs["attacks"])
    images = read_tables(inputs["attack_images"]) if inputs.get("attack_images") else None
    per = A.attack_models(attacks, images=images)
    mean = A.attack_summary(attacks, images=images)
    rows = [per.assign(models=1), mean.rename(columns={
        "id_robustness": "robustness_id", "ood_robustness": "robustness_ood", "grad_evals_id":
        "evals_id", "grad_evals_ood": "evals_ood"}).assign(model="mean")]
    t = pd.concat(rows, ignore_index=True)
    out = pd.DataFrame({
        "model": t.model, "attack": t.label, "setting": t.setting, "models": t.models,
        "ID images": t.n_id, "ID robustness (%)": _pct(t.robustness_id),
        "minus AA, ID (points)": t.gap_id.round(2), "SE, ID (points)": t.se_id.round(2),
        "corrupted images": t.n_ood, "corrupted robustness (%)": _pct(t.robustness_ood),
        "minus AA, corrupted (points)": t.gap_ood.round(2),
        "SE, corrupted (points)": t.se_ood.round(2),
        "grad evals per image (ID)": t.evals_id.round(1),
        "grad evals per image (corrupted)": t.evals_ood.round(1),
        "seconds (ID)": t.seconds_id.round(2)})
    models = list(dict.fromkeys(attacks.model))
    if any(m in PAPER_TABLE3 for m in models):
        paper = {(m, a): v for m in models if m in PAPER_TABLE3 for a, v in PAPER_TABLE3[m].items()}
        every = all(m in PAPER_TABLE3 for m in models)
        for k, side in enumerate(("ID", "corrupted, severity 3")):
            values = []
            for m, a in zip(t.model, t.attack):
                if m == "mean":
                    own = [paper.get((x, a), (np.nan, np.nan))[k] for x in models]
                    values.append(round(float(np.mean(own)), 2) if every else np.nan)
                else:
                    values.append(paper.get((m, a), (np.nan, np.nan))[k])
            out[f"paper {side} (%)"] = values
    return out


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
