"""The analysis of OODRobustBench (Li et al. 2024) on the tidy result tables (pandas, numpy and
scipy only): the per-model aggregates of Section 3 (R_c, R_n, OOD_d, OOD_t, OOD, degradation,
ranks), the ID -> OOD linear fits of Sections 4 and 5 (R^2, slope, upper limit, the paper's
filter of inferior models), effective robustness (Section 6), agreement on the line (Section 4.3),
Table 3's attack comparison, and PA under dataset shift (new, not in the paper).

Inputs (stacked over models, see the compute side):
- `shifts`: one row per (model, shift, severity); family id | corruption | natural | threat;
  accuracy and robustness in [0, 1] (accuracy NaN on threat rows), log_pa / log_pa_adam (clean vs
  shifted logits for corruption rows, NaN for natural rows; clean vs adversarial for id and threat
  rows); optional clean_accuracy / clean_robustness: on a corruption row, those of exactly the
  clean images it corrupts.

The ID side of every shift (its degradation, and x in its ID -> OOD fit) is the clean accuracy and
robustness of the images the shift was made from: a corruption row's own originals where the
table has them, else the model's ID row (natural shifts have no originals and are compared with
the ID test set, as in the paper; threat shifts attack the ID test images themselves).  At the
paper scale every corruption corrupts the whole ID test set, and the two are the same.
- `predictions`: one row per (model, shift, image index): label, pred_clean, pred_adv.
- `attacks`: one row per (model, attack, shift, severity): robustness, grad_evals, seconds.

Every accuracy and robustness these functions return is in percent (0-100), as in the paper;
log PA stays in nats.  Degenerate inputs (fewer than two models, a constant column) give NaN, not
an error."""
from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from pabench.core.io import read_table
from pabench.reporting.degenerate import COLUMN as DEGENERATE

FAMILIES = ("id", "corruption", "natural", "threat")
# The paper's corruption order (Noise, Blur, Weather, Digital), then the generator's extras.
CORRUPTION_ORDER = ("gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur",
                    "motion_blur", "zoom_blur", "snow", "frost", "fog", "brightness", "contrast",
                    "elastic_transform", "pixelate", "jpeg_compression", "speckle_noise",
                    "gaussian_blur", "spatter", "saturate")
NATURAL_ORDER = ("cifar10.1", "cifar10.2", "cinic10", "cifar10r", "sklearn_digits", "font_digits")
# Threat shifts: L-p (same norm at a larger eps, another norm) and non-L-p (Section 3.1).
LP_THREATS = ("linf_1.5x", "l2")
NON_LP_THREATS = ("ppgd", "lpa", "stadv", "recolor")
THREAT_ORDER = LP_THREATS + NON_LP_THREATS
LABELS = {
    "gaussian_noise": "Gaussian noise", "shot_noise": "shot noise", "impulse_noise": "impulse noise",
    "defocus_blur": "defocus blur", "glass_blur": "glass blur", "motion_blur": "motion blur",
    "zoom_blur": "zoom blur", "elastic_transform": "elastic", "jpeg_compression": "JPEG",
    "speckle_noise": "speckle noise", "gaussian_blur": "Gaussian blur",
    "cifar10.1": "CIFAR-10.1", "cifar10.2": "CIFAR-10.2", "cinic10": "CINIC-10",
    "cifar10r": "CIFAR-10-R", "sklearn_digits": "sklearn digits", "font_digits": "font digits",
    "imagenet-v2": "ImageNet-V2", "imagenet-a": "ImageNet-A", "imagenet-r": "ImageNet-R",
    "objectnet": "ObjectNet", "imagenet-s": "ImageNet-Sketch",
    "linf": "L-inf", "linf_2x": "L-inf 2x eps", "l2_2x": "L2 2x eps",
    "linf_1.5x": "L-inf 1.5x eps", "l2": "L2", "ppgd": "PPGD", "lpa": "LPA", "stadv": "StAdv",
    "recolor": "ReColor", "R_c": "corruptions (R_c)", "R_n": "natural (R_n)", "OOD_d": "OOD_d",
    "OOD_t": "OOD_t"}
# Appendix C.2: "we filter out all models with an overall performance (accuracy + robustness)
# below 110" (ID, percent) before every ID -> OOD fit of adversarially trained models.
MIN_TOTAL = 110.0
# Fewer models than this left by that filter: fit all of the group instead (flagged
# filtered = False).  At quick scale (MNIST-like digits, small CNNs) the rule can keep nearly
# every model (digit accuracy is high) or, on harder data, almost none.
MIN_FIT_MODELS = 3
# (ID column of `aggregate`, OOD column of the targets) of each fitted pair of metrics.
PAIRS = {"acc-acc": ("id_acc", "accuracy"), "rob-rob": ("id_rob", "robustness"),
         "acc-rob": ("id_acc", "robustness"), "rob-acc": ("id_rob", "accuracy")}
# Aggregate targets of the fits: (name, family, accuracy column, robustness column of aggregate).
# The ID side of each (`aggregate`'s {name}_clean_acc / _rob): the same mean over the clean
# counterparts of its rows.
AGGREGATES = (("OOD_d", "dataset", "oodd_acc", "oodd_rob"), ("R_n", "natural", "rn_acc", "rn_rob"),
              ("R_c", "corruption", "rc_acc", "rc_rob"), ("OOD_t", "threat", None, "oodt_rob"))
CLEAN = ("clean_accuracy", "clean_robustness")
REQUIRED = ("model", "method", "shift", "family", "severity", "accuracy", "robustness")
MODEL_COLUMNS = ("model", "method", "adversarial", "arch", "epochs", "augment", "trades_beta")
PA_MEASURES = {"log_pa": "log PA (exact)", "log_pa_adam": "log PA (adam)"}


def label(name: str) -> str:
    """A shift's (or aggregate's) display name."""
    return LABELS.get(name, str(name).replace("_", " "))


def threat_kind(name: str, kind=None) -> str:
    """"L-p" for threats bounded by an L-p norm (the attack `kind` linf or l2 where known, else
    a name starting with linf or l2), else "non-L-p"."""
    if isinstance(kind, str) and kind:
        return "L-p" if kind in ("linf", "l2") else "non-L-p"
    return "L-p" if str(name).startswith(("linf", "l2")) else "non-L-p"


def threat_kinds(shifts: pd.DataFrame) -> dict[str, str]:
    """Every threat shift of the table -> "L-p" or "non-L-p" (table order)."""
    rows = shifts[shifts.family == "threat"]
    kinds = rows["kind"] if "kind" in rows.columns else pd.Series(None, index=rows.index, dtype=object)
    return {name: threat_kind(name, kind) for name, kind in zip(rows["shift"], kinds)}


def attack_of(shifts: pd.DataFrame, name: str) -> list[str]:
    """The threat shifts whose attack is `name` (the `kind` column where present, else the
    shift's own name): "stadv" -> ["stadv"]."""
    rows = shifts[shifts.family == "threat"].drop_duplicates("shift")
    if "kind" in rows.columns:
        return [s for s, k in zip(rows["shift"], rows["kind"])
                if k == name or (not isinstance(k, str) and s == name)]
    return [s for s in rows["shift"] if s == name]


def _as_bool(values: pd.Series, column: str = "adversarial") -> pd.Series:
    if values.dtype == bool:
        return values
    text = values.astype(str).str.strip().str.lower()
    bad = ~text.isin(["true", "false", "1", "0", "1.0", "0.0"])
    if bad.any():
        raise ValueError(f"{column}: not a boolean: {values[bad].iloc[0]!r}")
    return text.isin(["true", "1", "1.0"])


def check_shifts(shifts: pd.DataFrame) -> pd.DataFrame:
    """The shifts table checked and normalised: required columns present, known families, one row
    per (model, shift, severity), `adversarial` a bool (method != "undefended" when absent)."""
    missing = [c for c in REQUIRED if c not in shifts.columns]
    if missing:
        raise ValueError(f"shifts table: missing columns {missing}")
    s = shifts.copy()
    unknown = sorted(set(s.family) - set(FAMILIES))
    if unknown:
        raise ValueError(f"shifts table: unknown families {unknown} (use {', '.join(FAMILIES)})")
    dup = s.duplicated(["model", "shift", "severity"])
    if dup.any():
        r = s[dup].iloc[0]
        raise ValueError(f"shifts table: (model, shift, severity) = ({r.model}, {r['shift']}, "
                         f"{r.severity}) appears more than once")
    derived = s.method != "undefended"
    if "adversarial" in s.columns:  # rows without the flag (a table that lacks it) get the rule
        known = s.adversarial.notna()
        derived[known] = _as_bool(s.adversarial[known])
    s["adversarial"] = derived.astype(bool)
    s["severity"] = s.severity.astype(int)
    for column in ("log_pa", "log_pa_adam", *CLEAN):
        if column not in s.columns:
            s[column] = np.nan
    # one flag per model (a table written before the flag existed: none flagged)
    flags = (_as_bool(s[DEGENERATE].fillna(False), DEGENERATE) if DEGENERATE in s.columns
             else pd.Series(False, index=s.index))
    s[DEGENERATE] = s.model.map(flags.groupby(s.model).any()).astype(bool)
    return s


def read_tables(paths_) -> pd.DataFrame:
    """One stacked table from one path or several."""
    paths_ = [paths_] if isinstance(paths_, (str, Path)) else list(paths_)
    return pd.concat([read_table(p) for p in paths_], ignore_index=True)


def read_shifts(inputs: dict, keep_degenerate: bool = False) -> pd.DataFrame:
    """The shifts table of a rule's inputs (one file or several), with the rows of a separate
    `threats` table when one is given, checked (check_shifts).  Models flagged degenerate
    (pabench.reporting.degenerate: near chance, or PA at beta* = 0 in every view) are left out
    of every fit and figure unless keep_degenerate (the leaderboard lists them, marked), or
    unless every model is flagged (then there is nothing else to show: the captions say that
    none is evidence, and the claims check, which drops flagged rows itself, evaluates nothing)."""
    frames = [read_tables(inputs["shifts"])]
    if inputs.get("threats"):
        frames.append(read_tables(inputs["threats"]))
    s = check_shifts(pd.concat(frames, ignore_index=True))
    return s if keep_degenerate else without_degenerate(s)


def without_degenerate(shifts: pd.DataFrame) -> pd.DataFrame:
    """The rows of models not flagged degenerate; all rows when every model is flagged."""
    flagged = shifts[DEGENERATE]
    return shifts if flagged.all() else shifts[~flagged].reset_index(drop=True)


def models_of(shifts: pd.DataFrame) -> pd.DataFrame:
    """One row per model (table order) with its training settings."""
    s = check_shifts(shifts)
    columns = [c for c in MODEL_COLUMNS if c in s.columns]
    return s.drop_duplicates("model")[columns].reset_index(drop=True)


def _order_key(name: str, family: str, seen: dict) -> tuple:
    canon = {"corruption": CORRUPTION_ORDER, "natural": NATURAL_ORDER, "threat": THREAT_ORDER}
    order = canon.get(family, ())
    inside = order.index(name) if name in order else len(order) + seen.get(name, 0)
    return FAMILIES.index(family) if family in FAMILIES else len(FAMILIES), inside


def shift_order(frame: pd.DataFrame) -> list[str]:
    """The distinct shifts of a frame with `shift` and `family` columns: family by family (id,
    corruption, natural, threat), each in the paper's order, unknown names as they come."""
    pairs = list(dict.fromkeys(zip(frame["shift"], frame.family)))
    seen = {name: k for k, (name, _) in enumerate(pairs)}
    return [name for name, family in sorted(pairs, key=lambda p: _order_key(p[0], p[1], seen))]


def _both_or_one(a: pd.Series, b: pd.Series) -> pd.Series:
    """(a + b) / 2 where both are known, else whichever is."""
    return pd.concat([a, b], axis=1).mean(axis=1, skipna=True)


def _basis(a: pd.Series, b: pd.Series, names: tuple[str, str]) -> pd.Series:
    both, only_a, only_b = a.notna() & b.notna(), a.notna() & b.isna(), a.isna() & b.notna()
    text = np.select([both, only_a, only_b],
                     [f"{names[0]} and {names[1]}", f"{names[0]} only", f"{names[1]} only"], "none")
    return pd.Series(text, index=a.index)


def with_clean(s: pd.DataFrame) -> pd.DataFrame:
    """The checked table (percent or fractions alike) with `clean_acc` / `clean_rob`: each row's
    ID side, its clean_accuracy / clean_robustness where known, else its model's ID row's."""
    ids = s[s.family == "id"].groupby("model")[["accuracy", "robustness"]].mean()
    return s.assign(clean_acc=s.clean_accuracy.fillna(s.model.map(ids.accuracy)),
                    clean_rob=s.clean_robustness.fillna(s.model.map(ids.robustness)))


def aggregate(shifts: pd.DataFrame) -> pd.DataFrame:
    """Per model (percent): ID accuracy and robustness; R_c (mean over corruption x severity rows,
    Eq. 1), R_n (mean over natural shifts, Eq. 2), OOD_d = (R_c + R_n) / 2 (Eq. 3; R_c alone when
    no natural shift was run, said in `oodd_basis`), OOD_t (mean robustness over threat shifts),
    OOD = mean(OOD_d robustness, OOD_t) (either alone when the other is missing: `ood_basis`),
    for accuracy and robustness where defined (threat shifts have no accuracy: OOD accuracy is
    OOD_d accuracy); beside each, its ID side `*_clean_acc` / `*_clean_rob` (the same mean over
    the rows' clean counterparts: see the module docstring); degradation = that ID side - OOD;
    ranks (1 = best, ties share the best rank) by ID robustness and by OOD robustness,
    rank_change = rank_id - rank_ood (> 0: moves up); the mean log PA of the id, corruption and
    threat rows."""
    s = with_clean(check_shifts(shifts))
    s = s.assign(**{c: 100 * s[c].astype(float)
                    for c in ("accuracy", "robustness", "clean_acc", "clean_rob")})
    out = models_of(s).set_index("model")

    def mean(family: str, column: str) -> pd.Series:
        return s[s.family == family].groupby("model")[column].mean().reindex(out.index)

    for name, family in (("id", "id"), ("rc", "corruption"), ("rn", "natural")):
        out[f"{name}_acc"] = mean(family, "accuracy")
        out[f"{name}_rob"] = mean(family, "robustness")
    for name, family in (("rc", "corruption"), ("rn", "natural"), ("oodt", "threat")):
        out[f"{name}_clean_acc"] = mean(family, "clean_acc")
        out[f"{name}_clean_rob"] = mean(family, "clean_rob")
    for metric in ("acc", "rob"):
        out[f"oodd_{metric}"] = _both_or_one(out[f"rc_{metric}"], out[f"rn_{metric}"])
        out[f"oodd_clean_{metric}"] = _both_or_one(out[f"rc_clean_{metric}"],
                                                   out[f"rn_clean_{metric}"])
    out["oodd_basis"] = _basis(out.rc_rob, out.rn_rob, ("corruptions", "natural shifts"))
    out["oodt_rob"] = mean("threat", "robustness")
    out["ood_acc"] = out.oodd_acc
    out["ood_clean_acc"] = out.oodd_clean_acc
    out["ood_rob"] = _both_or_one(out.oodd_rob, out.oodt_rob)
    out["ood_clean_rob"] = _both_or_one(out.oodd_clean_rob.where(out.oodd_rob.notna()),
                                        out.oodt_clean_rob.where(out.oodt_rob.notna()))
    out["ood_basis"] = _basis(out.oodd_rob, out.oodt_rob, ("OOD_d", "OOD_t"))
    out["deg_d_acc"] = out.oodd_clean_acc - out.oodd_acc
    out["deg_d_rob"] = out.oodd_clean_rob - out.oodd_rob
    out["deg_t_rob"] = out.oodt_clean_rob - out.oodt_rob
    out["deg_acc"] = out.ood_clean_acc - out.ood_acc
    out["deg_rob"] = out.ood_clean_rob - out.ood_rob
    out["rank_id"] = out.id_rob.rank(ascending=False, method="min").astype("Int64")
    out["rank_ood"] = out.ood_rob.rank(ascending=False, method="min").astype("Int64")
    out["rank_change"] = out.rank_id - out.rank_ood
    for column in PA_MEASURES:
        for family in ("id", "corruption", "threat"):
            out[f"{family}_{column}"] = mean(family, column)
    for family in ("corruption", "natural", "threat"):
        out[f"n_{family}"] = (s[s.family == family].groupby("model")["shift"].nunique()
                              .reindex(out.index).fillna(0).astype(int))
    return out.reset_index()


def per_shift(shifts: pd.DataFrame, agg: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model and non-ID shift (percent; corruptions averaged over their severities):
    accuracy, robustness, mean log PA (exact, adam), the severities averaged, the shift's ID side
    id_acc / id_rob (the clean accuracy and robustness of its own originals where known, else the
    model's ID values: `matched` says which), and the degradation ID side - shift of each.  `agg`:
    the table's `aggregate`, when already computed."""
    s = with_clean(check_shifts(shifts))
    ood = s[s.family != "id"]
    order = shift_order(ood)
    g = ood.groupby(["model", "shift"], sort=False).agg(
        family=("family", "first"), accuracy=("accuracy", "mean"), robustness=("robustness", "mean"),
        log_pa=("log_pa", "mean"), log_pa_adam=("log_pa_adam", "mean"),
        severities=("severity", "nunique"), id_acc=("clean_acc", "mean"),
        id_rob=("clean_rob", "mean"), matched=("clean_robustness", lambda v: v.notna().all())
    ).reset_index()
    for column in ("accuracy", "robustness", "id_acc", "id_rob"):
        g[column] *= 100
    agg = (aggregate(s) if agg is None else agg).set_index("model")
    g = models_of(s).merge(g, on="model", how="inner")
    g["label"] = g["shift"].map(label)
    g["deg_acc"] = g.id_acc - g.accuracy
    g["deg_rob"] = g.id_rob - g.robustness
    rank = {name: k for k, name in enumerate(order)}
    models = {m: k for k, m in enumerate(agg.index)}
    g = g.assign(_s=g["shift"].map(rank), _m=g.model.map(models)).sort_values(["_s", "_m"])
    return g.drop(columns=["_s", "_m"]).reset_index(drop=True)


def fit(x, y) -> dict:
    """Least-squares line y = slope * x + intercept over the pairs where both are finite, with
    R^2 (the share of y's variance the line explains), n, and the paper's upper limit
    min(slope * 100 + intercept, 100) (Eq. 4; x and y in percent).  Fewer than two pairs or a
    constant x: no line (all NaN); two pairs or a constant y: R^2 NaN (two points always lie on
    a line; a constant y has no variance to explain)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    out = {"slope": np.nan, "intercept": np.nan, "r2": np.nan, "n": len(x),
           "upper_limit": np.nan}
    if len(x) < 2 or np.ptp(x) == 0:
        return out
    dx, dy = x - x.mean(), y - y.mean()
    slope = float((dx * dy).sum() / (dx * dx).sum())
    intercept = float(y.mean() - slope * x.mean())
    out.update(slope=slope, intercept=intercept, upper_limit=min(slope * 100 + intercept, 100.0))
    ss_tot = float((dy * dy).sum())
    if len(x) > 2 and ss_tot > 0:
        residual = y - (slope * x + intercept)
        out["r2"] = float(min(max(1 - (residual * residual).sum() / ss_tot, 0.0), 1.0))
    return out


def in_group(frame: pd.DataFrame, group: str) -> pd.DataFrame:
    """The rows of a group of models: "AT" (adversarially trained), "ST" (standard), "all"."""
    if group == "all":
        return frame
    if group not in ("AT", "ST"):
        raise ValueError(f"unknown model group {group!r} (use AT, ST or all)")
    return frame[frame.adversarial.astype(bool) == (group == "AT")]


def fit_models(agg: pd.DataFrame, group: str, min_total: float | None = MIN_TOTAL,
               min_models: int = MIN_FIT_MODELS) -> tuple[list[str], int, bool]:
    """The models of a group (`aggregate` rows) that enter its fits, how many the filter left
    out, and whether it was applied.  AT: models with ID accuracy + robustness >= min_total
    (percent); when that leaves fewer than min_models, every AT model (filtered = False).
    ST and "all" are never filtered (the paper's rule is for its robust-model zoo)."""
    rows = in_group(agg, group)
    rows = rows[rows.id_acc.notna() | rows.id_rob.notna()]
    every = rows.model.tolist()
    if group != "AT" or min_total is None:
        return every, 0, False
    kept = rows[(rows.id_acc + rows.id_rob) >= min_total].model.tolist()
    if len(kept) < min_models:
        return every, 0, False
    return kept, len(every) - len(kept), True


def targets(shifts: pd.DataFrame, agg: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per model and OOD target (every non-ID shift and the aggregates OOD_d, R_n, R_c, OOD_t):
    accuracy and robustness in percent, the target's ID side id_acc / id_rob (see the module
    docstring) and the model's group."""
    agg = aggregate(shifts) if agg is None else agg
    ps = per_shift(shifts, agg)
    rows = [ps.assign(target=ps["shift"], aggregate=False)[
        ["model", "target", "family", "aggregate", "accuracy", "robustness", "id_acc", "id_rob"]]]
    for name, family, acc, rob in AGGREGATES:
        prefix = rob.removesuffix("_rob")
        rows.append(pd.DataFrame({"model": agg.model, "target": name, "family": family,
                                  "aggregate": True,
                                  "accuracy": agg[acc] if acc else np.nan, "robustness": agg[rob],
                                  "id_acc": agg[f"{prefix}_clean_acc"],
                                  "id_rob": agg[f"{prefix}_clean_rob"]}))
    t = pd.concat(rows, ignore_index=True)
    t = t.merge(agg[["model", "method", "adversarial"]], on="model", how="left")
    t["label"] = t.target.map(label)
    return t


def target_order(t: pd.DataFrame) -> list[str]:
    """Targets in the figures' order: OOD_d, R_n, natural shifts, R_c, corruptions, OOD_t,
    threats (only those present)."""
    present = set(t.target)
    single = t[~t["aggregate"].astype(bool)].rename(columns={"target": "shift"})
    by_family = {f: [n for n in shift_order(single) if (single[single["shift"] == n].family == f).any()]
                 for f in ("natural", "corruption", "threat")}
    order = (["OOD_d", "R_n"] + by_family["natural"] + ["R_c"] + by_family["corruption"]
             + ["OOD_t"] + by_family["threat"])
    return [n for n in order if n in present]


def fits(shifts: pd.DataFrame, pairs=("acc-acc", "rob-rob"), groups=("ST", "AT"),
         min_total: float | None = MIN_TOTAL) -> pd.DataFrame:
    """The linear fits ID -> OOD (percent) per target (every non-ID shift, corruptions averaged
    over severities, and the aggregates OOD_d, R_n, R_c, OOD_t), model group (ST = undefended,
    AT = adversarially trained) and pair of metrics ("acc-acc": ID accuracy -> OOD accuracy,
    "rob-rob", "acc-rob", "rob-acc"); AT models with ID accuracy + robustness < min_total left out
    (`left_out`; `filtered` False where too few would remain and every AT model is fitted).
    Pairs without an OOD value (accuracy of a threat shift) are not listed."""
    agg = aggregate(shifts)
    t = targets(shifts, agg)
    order = target_order(t)
    rows = []
    for group in groups:
        kept, left_out, filtered = fit_models(agg, group, min_total)
        g = t[t.model.isin(kept)]
        for target in order:
            d = g[g.target == target]
            if d.empty:
                continue
            for pair in pairs:
                x_col, y_col = PAIRS[pair]
                if not d[y_col].notna().any():
                    continue
                rows.append({"target": target, "label": label(target), "family": d.family.iloc[0],
                             "aggregate": bool(d["aggregate"].iloc[0]), "group": group, "pair": pair,
                             **fit(d[x_col], d[y_col]), "models": len(kept), "left_out": left_out,
                             "filtered": filtered})
    columns = ["target", "label", "family", "aggregate", "group", "pair", "n", "slope", "intercept",
               "r2", "upper_limit", "models", "left_out", "filtered"]
    return pd.DataFrame(rows, columns=columns)


def effective_robustness(shifts: pd.DataFrame, targets_=("OOD_d", "OOD_t"), group: str = "AT",
                         min_total: float | None = MIN_TOTAL) -> pd.DataFrame:
    """Effective accuracy and adversarial effective robustness (Eq. 5): R_ood(f) - beta(R_id(f))
    with beta the line fitted ID -> OOD on the group's models (after the filter), for every model
    (`in_fit` marks those the line was fitted on), per target and metric (percent)."""
    agg = aggregate(shifts)
    t = targets(shifts, agg)
    kept, _, filtered = fit_models(agg, group, min_total)
    rows = []
    for target in targets_:
        d = t[t.target == target]
        for metric, pair in (("accuracy", "acc-acc"), ("robustness", "rob-rob")):
            x_col, y_col = PAIRS[pair]
            if d.empty or not d[y_col].notna().any():
                continue
            line = fit(d[d.model.isin(kept)][x_col], d[d.model.isin(kept)][y_col])
            predicted = line["slope"] * d[x_col] + line["intercept"]
            rows.append(pd.DataFrame({
                "model": d.model, "method": d.method, "adversarial": d.adversarial,
                "target": target, "metric": metric, "id": d[x_col], "ood": d[y_col],
                "predicted": predicted, "effective": d[y_col] - predicted,
                "in_fit": d.model.isin(kept), "fit_group": group, "fit_n": line["n"],
                "fit_r2": line["r2"], "filtered": filtered}))
    if not rows:
        return pd.DataFrame(columns=["model", "method", "adversarial", "target", "metric", "id",
                                     "ood", "predicted", "effective", "in_fit", "fit_group",
                                     "fit_n", "fit_r2", "filtered"])
    return pd.concat(rows, ignore_index=True)


# ------------------------------------------------------------------ agreement on the line
def _check_predictions(predictions: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("model", "shift", "index", "label", "pred_adv") if c not in predictions]
    if missing:
        raise ValueError(f"predictions table: missing columns {missing}")
    dup = predictions.duplicated(["model", "shift", "index"])
    if dup.any():
        r = predictions[dup].iloc[0]
        raise ValueError(f"predictions table: image {r['index']} of {r['shift']} appears more than "
                         f"once for {r.model}")
    return predictions


def ood_sets(predictions: pd.DataFrame) -> list[str]:
    """The OOD sets of the predictions table (every shift but "id": the natural shifts and the
    recorded corruptions), in table order."""
    return [s for s in dict.fromkeys(predictions["shift"]) if s != "id"]


def agreement(predictions: pd.DataFrame, shift: str, models=None) -> pd.DataFrame:
    """Per pair of models (default: the adversarially trained ones where the table says which,
    else all): the percentage of images on which their predictions on their own adversarial
    examples agree, on the ID set and on `shift`, over the images both were evaluated on; with
    the line ID -> OOD agreement fitted over the pairs (fit_* columns, the same on every row)."""
    p = _check_predictions(predictions)
    if models is None:
        models = (p[_as_bool(p.adversarial)] if "adversarial" in p.columns else p).model.unique()
    models = [m for m in dict.fromkeys(models) if m in set(p.model)]

    def wide(name: str) -> pd.DataFrame:
        d = p[(p["shift"] == name) & p.model.isin(models)]
        return d.pivot(index="index", columns="model", values="pred_adv")

    id_w, ood_w = wide("id"), wide(shift)
    rows = []
    for a, b in itertools.combinations(models, 2):
        row = {"model_a": a, "model_b": b, "shift": shift}
        for name, w in (("id", id_w), ("ood", ood_w)):
            both = w[[a, b]].dropna() if {a, b} <= set(w.columns) else w.iloc[:0, :0]
            row[f"n_{name}"] = len(both)
            row[f"{name}_agreement"] = (100 * float((both[a] == both[b]).mean())
                                        if len(both) else np.nan)
        rows.append(row)
    out = pd.DataFrame(rows, columns=["model_a", "model_b", "shift", "n_id", "id_agreement",
                                      "n_ood", "ood_agreement"])
    line = fit(out.id_agreement, out.ood_agreement)
    return out.assign(fit_slope=line["slope"], fit_intercept=line["intercept"], fit_r2=line["r2"],
                      fit_n=line["n"])


def prediction_robustness(predictions: pd.DataFrame, shift: str, models=None) -> pd.DataFrame:
    """Per model: robustness (percent of images whose adversarial prediction is the label) on
    the ID set and on `shift`, from the predictions table (the images of the agreement)."""
    p = _check_predictions(predictions)
    if models is not None:
        p = p[p.model.isin(list(models))]
    p = p.assign(correct=(p.pred_adv == p.label).astype(float))
    r = p[p["shift"].isin(["id", shift])].pivot_table(index="model", columns="shift",
                                                       values="correct", aggfunc="mean", sort=False)
    missing = pd.Series(np.nan, index=r.index)
    return pd.DataFrame({"model": r.index, "shift": shift,
                         "id_robustness": 100 * r.get("id", missing).to_numpy(),
                         "ood_robustness": 100 * r.get(shift, missing).to_numpy()})


# ------------------------------------------------------------------ Table 3
ATTACKS = ("pgd", "cw", "aa", "mm5")
ATTACK_LABELS = {"pgd": "PGD", "cw": "CW", "aa": "AutoAttack", "mm5": "MM5"}


def _attack_order(names) -> list[str]:
    names = set(names)
    return [x for x in ATTACKS if x in names] + sorted(names - set(ATTACKS))


def attack_gaps(images: pd.DataFrame, reference: str = "aa") -> pd.DataFrame:
    """The paired gap (this attack - `reference`) in robust accuracy, percentage points, from the
    per-image robust flags (`robust_<attack>` columns; one row per model, set and image): per
    attack, set (ood: not the ID images) and model, the mean of the per-image differences and its
    standard error sd / sqrt(n); and per attack and set over the models (model "mean"), the
    difference averaged over the models image by image first (the models ran the same images),
    then the same two numbers over the images that every model ran."""
    attacks = [c.removeprefix("robust_") for c in images.columns if c.startswith("robust_")]
    if reference not in attacks:
        raise ValueError(f"attack images table: no robust_{reference} column")
    im = images.assign(ood=images["shift"] != "id")
    rows = []

    def add(attack, model, ood, d):
        d = np.asarray(d, dtype=float)
        rows.append({"attack": attack, "model": model, "ood": ood, "n": len(d),
                     "gap": 100 * d.mean() if len(d) else np.nan,
                     "se": 100 * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else np.nan})

    for attack in _attack_order(attacks):
        diff = im[f"robust_{attack}"].astype(float) - im[f"robust_{reference}"].astype(float)
        im = im.assign(d=diff)
        for ood, g in im.groupby("ood"):
            for model, m in g.groupby("model", sort=False):
                add(attack, model, ood, m.d)
            per_image = g.pivot_table(index=["shift", "index"], columns="model", values="d")
            add(attack, "mean", ood, per_image.dropna().mean(axis=1))
    return pd.DataFrame(rows, columns=["attack", "model", "ood", "n", "gap", "se"])


def attack_models(attacks: pd.DataFrame, reference: str = "aa",
                  images: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per attack and model (percent): ID robustness and the robustness under the corruptions
    (every non-ID row: Table 3 runs one severity), images, gradient evaluations per image
    (grad_evals / n when the table has an `n` column, else grad_evals as given), seconds, the
    attack's `setting`, and this attack - `reference` robustness, ID and OOD, with the paired
    per-image standard error of that gap where `images` (attack_gaps) is given."""
    missing = [c for c in ("model", "attack", "shift", "robustness") if c not in attacks.columns]
    if missing:
        raise ValueError(f"attacks table: missing columns {missing}")
    a = attacks.assign(robustness=100 * attacks.robustness.astype(float),
                       ood=attacks["shift"] != "id")
    evals = a.grad_evals.astype(float) if "grad_evals" in a else pd.Series(np.nan, index=a.index)
    a["evals"] = evals / a.n.astype(float) if "n" in a else evals
    for column in ("seconds", "n"):
        if column not in a:
            a[column] = np.nan
    if "setting" not in a:
        a["setting"] = ""
    # Per model and attack: ID, and the mean over the corruption rows.
    per = a.groupby(["attack", "model", "ood"], sort=False).agg(
        robustness=("robustness", "mean"), evals=("evals", "mean"), seconds=("seconds", "mean"),
        n=("n", "sum")).reset_index()
    wide = per.pivot_table(index=["attack", "model"], columns="ood",
                           values=["robustness", "evals", "seconds", "n"], sort=False)
    wide.columns = [f"{v}_{'ood' if o else 'id'}" for v, o in wide.columns]
    wide = wide.reset_index()
    for column in ("robustness", "evals", "seconds", "n"):
        for side in ("id", "ood"):
            if f"{column}_{side}" not in wide:
                wide[f"{column}_{side}"] = np.nan
    ref = wide[wide.attack == reference].set_index("model")
    for side in ("id", "ood"):
        wide[f"gap_{side}"] = wide[f"robustness_{side}"] - wide.model.map(ref[f"robustness_{side}"])
        wide[f"se_{side}"] = np.nan
    if images is not None and len(images):
        g = attack_gaps(images, reference)
        g = g[g.model != "mean"].set_index(["attack", "model", "ood"])
        for side, ood in (("id", False), ("ood", True)):
            keys = list(zip(wide.attack, wide.model, [ood] * len(wide)))
            wide[f"se_{side}"] = [g.se.get(k, np.nan) for k in keys]
    settings = a.drop_duplicates(["attack", "model"]).set_index(["attack", "model"]).setting
    wide["setting"] = [settings.get((x, m), "") for x, m in zip(wide.attack, wide.model)]
    wide["label"] = wide.attack.map(lambda x: ATTACK_LABELS.get(x, x))
    order = {x: k for k, x in enumerate(_attack_order(wide.attack))}
    models = {m: k for k, m in enumerate(dict.fromkeys(attacks.model))}
    return (wide.assign(_a=wide.attack.map(order), _m=wide.model.map(models))
            .sort_values(["_m", "_a"]).drop(columns=["_a", "_m"]).reset_index(drop=True))


def attack_summary(attacks: pd.DataFrame, reference: str = "aa",
                   images: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per attack, averaged over the models it ran on (percent): attack_models' columns (ID and
    OOD robustness, gradient evaluations per image, seconds) and the mean over models of (this
    attack - `reference`) robustness, ID and OOD (paired: only models that ran both), with its
    standard error from the per-image flags where `images` is given (attack_gaps, model
    "mean")."""
    wide = attack_models(attacks, reference)
    a = attacks
    severities = (sorted(int(s) for s in a[a["shift"] != "id"].severity.unique())
                  if "severity" in a else [])
    gaps = (attack_gaps(images, reference).query("model == 'mean'").set_index(["attack", "ood"])
            if images is not None and len(images) else None)
    rows = []
    for attack in _attack_order(wide.attack):
        w = wide[wide.attack == attack]
        se = {side: (gaps.se.get((attack, ood), np.nan) if gaps is not None else np.nan)
              for side, ood in (("id", False), ("ood", True))}
        rows.append({"attack": attack, "label": ATTACK_LABELS.get(attack, attack),
                     "models": w.model.nunique(), "setting": w.setting.iloc[0],
                     "id_robustness": w.robustness_id.mean(),
                     "ood_robustness": w.robustness_ood.mean(), "severities": severities,
                     "n_id": w.n_id.mean(), "n_ood": w.n_ood.mean(),
                     "grad_evals_id": w.evals_id.mean(), "grad_evals_ood": w.evals_ood.mean(),
                     "seconds_id": w.seconds_id.mean(), "seconds_ood": w.seconds_ood.mean(),
                     "gap_id": w.gap_id.mean(), "gap_ood": w.gap_ood.mean(),
                     "se_id": se["id"], "se_ood": se["ood"],
                     "gap_models": int(w.gap_id.notna().sum())})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ PA under dataset shift (new)
def kendall(x, y) -> tuple[float, float, int]:
    """Kendall's tau and its p-value over the finite pairs; NaN for fewer than three pairs or a
    constant side."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return np.nan, np.nan, len(x)
    from scipy import stats  # here: the registries import this module at every workflow start

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = stats.kendalltau(x, y)
    return float(result.statistic), float(result.pvalue), len(x)


def pa_ranking(shifts: pd.DataFrame, measures=("log_pa", "log_pa_adam"),
               groups=("all", "AT")) -> pd.DataFrame:
    """Kendall's tau across models between log PA and robustness: per corruption (log PA and
    robustness each averaged over the severities) and overall (the mean log PA over every
    corruption row against OOD_d robustness), per model group and PA solver."""
    agg = aggregate(shifts)
    ps = per_shift(shifts, agg)
    corr = ps[ps.family == "corruption"]
    rows = []
    for group in groups:
        c = in_group(corr, group)
        a = in_group(agg, group)
        for measure in measures:
            for name in dict.fromkeys(c["shift"]):
                d = c[c["shift"] == name]
                tau, p, n = kendall(d[measure], d.robustness)
                rows.append({"group": group, "measure": measure, "target": name,
                             "label": label(name), "against": "robustness on the corruption",
                             "n": n, "tau": tau, "p": p})
            tau, p, n = kendall(a[f"corruption_{measure}"], a.oodd_rob)
            rows.append({"group": group, "measure": measure, "target": "overall",
                         "label": "overall", "against": "OOD_d robustness "
                         "(mean log PA over every corruption row)", "n": n, "tau": tau, "p": p})
    return pd.DataFrame(rows, columns=["group", "measure", "target", "label", "against", "n",
                                       "tau", "p"])


PREDICTORS = (("id_log_pa", "ID log PA (exact)"), ("id_log_pa_adam", "ID log PA (adam)"),
              ("id_acc", "ID accuracy"), ("id_rob", "ID robustness"))


def pa_prediction(shifts: pd.DataFrame, groups=("all", "AT")) -> pd.DataFrame:
    """R^2 of the linear fit across models predicting each OOD robustness target (R_c, R_n,
    OOD_t, and OOD_d overall) from the model's ID log PA (clean vs adversarial logits; exact and
    adam solvers), from its ID accuracy and from its ID robustness, per model group."""
    agg = aggregate(shifts)
    rows = []
    for group in groups:
        a = in_group(agg, group)
        for target, column in (("R_c", "rc_rob"), ("R_n", "rn_rob"), ("OOD_t", "oodt_rob"),
                               ("OOD_d", "oodd_rob")):
            for predictor, name in PREDICTORS:
                line = fit(a[predictor], a[column])
                rows.append({"group": group, "target": target, "label": label(target),
                             "predictor": predictor, "predictor_label": name, "n": line["n"],
                             "r2": line["r2"], "slope": line["slope"],
                             "intercept": line["intercept"]})
    return pd.DataFrame(rows, columns=["group", "target", "label", "predictor", "predictor_label",
                                       "n", "r2", "slope", "intercept"])


def pa_vs_ood(shifts: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """PA under dataset shift: (pa_ranking, pa_prediction) of the table."""
    return pa_ranking(shifts), pa_prediction(shifts)


# ------------------------------------------------------------------ Appendix F: filter thresholds
# Methods of models that someone else trained (RobustBench's): the paper's "NC" (no custom) zoo
# keeps only these.  Every other AT method is one of our own training recipes.
PUBLIC_METHODS = ("robustbench",)
# The overall-performance thresholds (ID accuracy + robustness, percent) of Figures 16 and 17.
THRESHOLDS = {"linf": (90.0, 100.0, 110.0, 120.0, 130.0, 140.0),
              "l2": (110.0, 120.0, 130.0, 140.0, 145.0)}


def threshold_zoos(agg: pd.DataFrame, thresholds=THRESHOLDS["linf"],
                   no_custom: bool = True) -> list[tuple[str, float, list[str]]]:
    """Appendix F's model zoos of the AT models (`aggregate` rows): all of them, those with ID
    accuracy + robustness >= each threshold, and ("NC") those not trained by us (PUBLIC_METHODS):
    (name, threshold or NaN, models)."""
    at = in_group(agg, "AT")
    total = at.id_acc + at.id_rob
    zoos = [("All", np.nan, at.model.tolist())]
    zoos += [(f">= {t:g}", float(t), at.model[total >= t].tolist()) for t in thresholds]
    if no_custom:
        zoos.append(("NC", np.nan, at.model[at.method.isin(PUBLIC_METHODS)].tolist()))
    return zoos


def threshold_fits(shifts: pd.DataFrame, thresholds=THRESHOLDS["linf"],
                   pairs=("acc-acc", "rob-rob"), no_custom: bool = True) -> pd.DataFrame:
    """The fits of `fits` (AT models, percent) on each of threshold_zoos' zoos, exactly the
    models it holds (no fallback: a zoo of two models or fewer has R^2 NaN): the change of R^2
    as inferior models are removed (Figures 16-18).  One row per zoo, target and pair (targets
    of an empty zoo: NaN), with `zoo`, `threshold` and `zoo_models`."""
    s = check_shifts(shifts)
    agg = aggregate(s)
    every = fits(s, pairs=pairs, groups=("AT",), min_total=None)
    keys = every[["target", "label", "family", "aggregate", "pair"]]
    rows = []
    for name, threshold, models in threshold_zoos(agg, thresholds, no_custom):
        f = (fits(s[s.model.isin(models)], pairs=pairs, groups=("AT",), min_total=None)
             if models else every.iloc[:0])
        f = keys.merge(f.drop(columns=["label", "family", "aggregate"]), how="left",
                       on=["target", "pair"])
        rows.append(f.assign(group="AT", zoo=name, threshold=threshold, zoo_models=len(models),
                             n=f.n.fillna(0).astype(int)))
    return pd.concat(rows, ignore_index=True)[
        ["zoo", "threshold", "zoo_models", "target", "label", "family", "aggregate", "group", "pair",
         "n", "slope", "intercept", "r2", "upper_limit"]]
