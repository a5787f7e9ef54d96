"""OODRobustBench by technique (Section 6: Table 2, Figure 7, Appendix G Tables 6-10): which
defence techniques generalise their robustness under distribution shift, measured by OOD
robustness and adversarial effective robustness (AER, Eq. 5: OOD robustness minus the AT fit's
prediction from ID robustness; `analysis.effective_robustness`).

The paper compares models that differ in one technique only (its comparison sets): extra data
(Table 6), augmentation (Table 7), architecture (Table 8), model size (Table 9), AT method
(Table 10); Figure 7 draws, per technique and level, the mean over its sets.  The sets come from
model metadata:
- the self-trained zoo (quick scale): models whose training settings (method and TRADES beta,
  width, epochs, augmentation) agree in everything but the technique's form a set
  (`zoo_sets`); only adversarially trained models enter, as in the paper;
- RobustBench models (paper scale): the paper's own sets, with per-model metadata and the
  paper's values, in techniques.yaml (package data; its header cites each value's source).
Accuracy and robustness in percent."""
from __future__ import annotations

import functools
import re
from importlib import resources

import numpy as np
import pandas as pd
import yaml

from pabench.experiments.oodrb import analysis as A

# (technique, the paper's table, Figure 7's panel title)
TECHNIQUES = (("extra_data", "Table 6", "(a) extra training data"),
              ("augmentation", "Table 7", "(b) data augmentation"),
              ("architecture", "Table 8", "(c) architecture"),
              ("model_size", "Table 9", "(d) model size"),
              ("at_method", "Table 10", "(e) AT method"),
              ("epochs", None, "(f) training length (zoo only; not in the paper)"))
TECHNIQUE_NAMES = tuple(t for t, _, _ in TECHNIQUES)
# The zoo setting each technique varies; a set holds the models equal in all the other settings.
ZOO_FACTORS = {"augmentation": "augment", "model_size": "arch", "at_method": "method",
               "epochs": "epochs"}
ZOO_SETTINGS = ("method", "trades_beta", "arch", "epochs", "augment")
NOT_IN_ZOO = {
    "extra_data": "every zoo model trains on the same oodrb.n_train stand-in images; extra real "
                  "or synthetic data needs the paper scale's RobustBench models",
    "architecture": "the zoo has one architecture family (smallcnn, three conv layers; only its "
                    "width varies, which is (d) model size)"}
# Table 2 prints AER as "-" for StAdv AT (ID / OOD_d robustness 0.1 / 0.0), PLAT (0.1 / 0.0) and
# CARD-Deck (1.0 / 0.5), "because of their (nearly) 0 ID/OOD robustness", and keeps ReColor AT's
# (8.5 / 3.4): AER is left undefined where the ID or the OOD robustness is below this (percent).
NEAR_ZERO = 1.0
PAPER_COLUMNS = ("id_acc", "id_rob", "oodd_acc", "oodd_rob", "er_d", "aer_d", "oodt_rob", "aer_t")
TABLE2_PAPER_COLUMNS = ("id_acc", "id_rob", "oodd_acc", "oodd_rob", "er_d", "aer_d",
                        "oodt_nonlp", "oodt_lp", "oodt_rob")
SETUP = "cifar10_linf"          # the setup this pipeline runs
DEFENCE = {"undefended": "none (standard training)", "madry": "supervised L-p defence (PGD-AT)",
           "trades": "supervised L-p defence (TRADES)",
           "fast_fgsm": "supervised L-p defence (fast FGSM-AT)"}


@functools.lru_cache(maxsize=1)
def metadata() -> dict:
    """techniques.yaml: `models` (RobustBench id -> metadata), `comparisons` (technique -> the
    paper's sets), `table2` (the paper's Table 2 rows)."""
    text = resources.files("pabench.experiments.oodrb").joinpath("techniques.yaml").read_text()
    return yaml.safe_load(text)


# ------------------------------------------------------------------ per-model values
def model_values(shifts: pd.DataFrame, min_total: float | None = A.MIN_TOTAL) -> pd.DataFrame:
    """Per model (index), percent: ID accuracy and robustness, OOD_d accuracy and robustness,
    effective accuracy (er_d) and AER (aer_d) under OOD_d, OOD_t robustness and its AER (aer_t),
    against the lines fitted on the AT models (analysis.effective_robustness), the OOD_t means
    over L-p and non-L-p threats, and `in_fit`.  AER is NaN where the ID or that OOD robustness
    is below NEAR_ZERO (Table 2's rule)."""
    agg = A.aggregate(shifts).set_index("model")
    e = A.effective_robustness(shifts, ("OOD_d", "OOD_t"), "AT", min_total)
    columns = ["method", "adversarial", "arch", "id_acc", "id_rob", "oodd_acc", "oodd_rob",
               "oodt_rob"]
    out = agg[[c for c in columns if c in agg.columns]].copy()

    def effective(target: str, metric: str) -> pd.Series:
        d = e[(e.target == target) & (e.metric == metric)].set_index("model")
        return d.effective.reindex(out.index).astype(float)

    out["er_d"] = effective("OOD_d", "accuracy")
    out["aer_d"] = effective("OOD_d", "robustness")
    out["aer_t"] = effective("OOD_t", "robustness")
    for aer, ood in (("aer_d", "oodd_rob"), ("aer_t", "oodt_rob")):
        out.loc[(out.id_rob < NEAR_ZERO) | (out[ood] < NEAR_ZERO), aer] = np.nan
    kinds = A.threat_kinds(shifts)
    threats = A.check_shifts(shifts)
    threats = threats[threats.family == "threat"]
    for column, kind in (("oodt_lp", "L-p"), ("oodt_nonlp", "non-L-p")):
        rows = threats[threats["shift"].map(kinds) == kind]
        out[column] = 100 * rows.groupby("model").robustness.mean().reindex(out.index)
    fitted = set(e[e.in_fit].model)
    out["in_fit"] = out.index.isin(fitted)
    return out


# ------------------------------------------------------------------ comparison sets
def _natural_key(value) -> tuple:
    """Levels in a readable order: numbers by value (smallcnn4 < smallcnn16), then text."""
    text = str(value)
    numbers = tuple(float(n) for n in re.findall(r"\d+(?:\.\d+)?", text))
    return (re.sub(r"\d+(?:\.\d+)?", "#", text), numbers)


AUGMENT_ORDER = ("none", "crop", "crop_flip")
METHOD_ORDER = ("madry", "trades", "fast_fgsm")


def _zoo_level(row: pd.Series, technique: str) -> str:
    if technique == "at_method":
        if row.method == "trades" and pd.notna(row.trades_beta):
            return f"trades (beta {row.trades_beta:g})"
        return str(row.method)
    if technique == "epochs":
        return f"{int(row.epochs)} epoch{'' if int(row.epochs) == 1 else 's'}"
    return str(row[ZOO_FACTORS[technique]])


def _zoo_rank(row: pd.Series, technique: str) -> tuple:
    if technique == "augmentation":
        a = str(row.augment)
        return (AUGMENT_ORDER.index(a) if a in AUGMENT_ORDER else len(AUGMENT_ORDER), a)
    if technique == "at_method":
        m = str(row.method)
        beta = row.trades_beta if pd.notna(row.trades_beta) else 0.0
        return (METHOD_ORDER.index(m) if m in METHOD_ORDER else len(METHOD_ORDER), m, beta)
    if technique == "epochs":
        return (float(row.epochs),)
    return _natural_key(row[ZOO_FACTORS[technique]])


def zoo_sets(models: pd.DataFrame, technique: str) -> pd.DataFrame:
    """The self-trained zoo's comparison sets for a technique: adversarially trained models
    (`models`: one row per model with `adversarial` and the ZOO_SETTINGS columns) equal in every
    setting but the technique's (for the AT method, method and TRADES beta together; for the
    others TRADES beta is a setting held fixed), at least two levels per set.  One row per member:
    technique, set (the fixed settings), model, level, rank (the level's place in its order)."""
    columns = ["technique", "set", "model", "level", "rank"]
    if technique not in ZOO_FACTORS or models.empty:
        return pd.DataFrame(columns=columns)
    m = models[models.adversarial.astype(bool)].copy()
    m = m[m.method != "robustbench"]
    if m.empty:
        return pd.DataFrame(columns=columns)
    varied = ("method", "trades_beta") if technique == "at_method" else (ZOO_FACTORS[technique],)
    fixed = [c for c in ZOO_SETTINGS if c not in varied]
    m["level"] = [_zoo_level(r, technique) for _, r in m.iterrows()]
    m["_rank"] = [_zoo_rank(r, technique) for _, r in m.iterrows()]
    m["set"] = [", ".join(f"{c} {r[c]:g}" if isinstance(r[c], float) else f"{c} {r[c]}"
                          for c in fixed if not (isinstance(r[c], float) and np.isnan(r[c])))
                for _, r in m.iterrows()]
    order = sorted(dict.fromkeys(m._rank))  # one order of the levels over every set
    rows = []
    for name, d in m.groupby("set", sort=False):
        if d.level.nunique() < 2:
            continue
        rows.append(pd.DataFrame({"technique": technique, "set": name, "model": d.model,
                                  "level": d.level, "rank": [order.index(k) for k in d._rank]}))
    return (pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=columns))


def paper_sets(technique: str) -> pd.DataFrame:
    """The paper's comparison sets for a technique (techniques.yaml): one row per member with
    technique, set, setup, model (RobustBench id or None), level, rank (its place in the paper's
    order), architecture, params_m and the paper's values (paper_<column>)."""
    specs = metadata()["comparisons"].get(technique, [])
    levels = list(dict.fromkeys(m["level"] for spec in specs for m in spec["members"]))
    rows = []
    for spec in specs:
        for member in spec["members"]:
            paper = member.get("paper") or [np.nan] * len(PAPER_COLUMNS)
            rows.append({"technique": technique, "set": spec["set"], "setup": spec["setup"],
                         "model": member.get("model"), "level": str(member["level"]),
                         "rank": levels.index(member["level"]),
                         "architecture": member.get("architecture") or metadata()["models"].get(
                             member.get("model"), {}).get("architecture", ""),
                         "params_m": member.get("params_m", np.nan),
                         **{f"paper_{c}": v for c, v in zip(PAPER_COLUMNS, paper)}})
    return pd.DataFrame(rows)


def _not_evaluated(row: pd.Series, evaluated: set) -> str:
    if row.model is None or (isinstance(row.model, float) and np.isnan(row.model)):
        return "not on RobustBench (the authors' own weights): not loadable here"
    if row.setup != SETUP:
        return f"{row.setup.replace('_', ' ')} setup: not run by this CIFAR-10 L-inf pipeline"
    if row.model not in evaluated:
        return "not evaluated at this scale (not in oodrb.robustbench, or flagged degenerate)"
    return ""


def comparisons(shifts: pd.DataFrame, technique: str,
                values: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every comparison set of a technique with each member's values (model_values): the zoo's
    sets (source "zoo") and the paper's (source "paper sets"; members not evaluated here keep
    the paper's values and say why in `note`).  Degenerate models are already left out by
    read_shifts.  `values`: the table's model_values, when already computed."""
    values = model_values(shifts) if values is None else values
    evaluated = set(values.index)
    zoo = zoo_sets(A.models_of(shifts), technique).assign(source="zoo", setup=SETUP,
                                                         architecture="", params_m=np.nan)
    paper = paper_sets(technique)
    if not paper.empty:
        paper = paper.assign(source="paper sets",
                             note=[_not_evaluated(r, evaluated) for _, r in paper.iterrows()])
    parts = [f for f in (zoo, paper) if not f.empty]
    frame = (pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=[
        "technique", "set", "setup", "model", "level", "rank", "architecture", "params_m",
        "source", "note"]))
    if "note" not in frame:
        frame["note"] = ""
    frame["note"] = frame.note.fillna("")
    frame["evaluated"] = frame.model.isin(evaluated)
    ours = values.reindex(frame.model.where(frame.evaluated)).reset_index(drop=True)
    for column in ("id_acc", "id_rob", "oodd_acc", "oodd_rob", "er_d", "aer_d", "oodt_rob",
                   "aer_t", "in_fit"):
        frame[column] = ours[column].to_numpy()
    if "arch" in ours:  # the zoo's width (smallcnn8); the paper's members name their own
        named = frame.architecture.fillna("").astype(str) != ""
        frame["architecture"] = frame.architecture.where(named, ours.arch.fillna("").to_numpy())
    return frame


def level_means(frame: pd.DataFrame) -> pd.DataFrame:
    """Figure 7's numbers from a `comparisons` frame: per level (in rank order), each value
    averaged over the members of a set at that level, then over the sets that have the level;
    only evaluated members count, and only sets with two or more levels evaluated (a comparison).
    Columns: technique, level, rank, sets, models and the means."""
    value_columns = ["id_rob", "oodd_rob", "oodt_rob", "aer_d", "aer_t"]
    d = frame[frame.evaluated]
    d = d[d.groupby(["source", "set"])["level"].transform("nunique") >= 2]
    if d.empty:
        return pd.DataFrame(columns=["technique", "level", "rank", "sets", "models",
                                     *value_columns])
    d = d.assign(**{c: d[c].astype(float) for c in value_columns})
    per_set = d.groupby(["technique", "source", "set", "level"], sort=False).agg(
        rank=("rank", "min"), models=("model", "nunique"),
        **{c: (c, "mean") for c in value_columns}).reset_index()
    out = per_set.groupby(["technique", "level"], sort=False).agg(
        rank=("rank", "mean"), sets=("set", "nunique"), models=("models", "sum"),
        **{c: (c, "mean") for c in value_columns}).reset_index()
    return out.sort_values(["technique", "rank", "level"]).reset_index(drop=True)


def has_zoo(values: pd.DataFrame) -> bool:
    """Whether the results (model_values) hold self-trained AT models."""
    return bool((values.adversarial.astype(bool) & (values.method != "robustbench")).any())


def why_missing(frame: pd.DataFrame, technique: str, zoo: bool = True) -> str:
    """Why a technique has nothing evaluated: the zoo's reason (NOT_IN_ZOO; `zoo`: whether the
    results hold self-trained AT models) and the paper sets' notes, in one line; "" when
    something was evaluated."""
    if frame.evaluated.any():
        return ""
    if not zoo:
        reasons = ["no self-trained zoo at this scale"]
    elif technique in NOT_IN_ZOO:
        reasons = [NOT_IN_ZOO[technique]]
    else:
        reasons = ["no two AT models of the zoo differ in this setting alone"]
    if technique == "epochs":
        reasons = ["zoo models only (the paper has no such comparison)"] + reasons[:zoo]
    notes = sorted(set(frame.note) - {""}) if "note" in frame else []
    return "; ".join(reasons + [f"paper's sets: {n}" for n in notes])


def technique_rows(shifts: pd.DataFrame, technique: str) -> pd.DataFrame:
    """Tables 6-10: a technique's comparison sets, one row per member, ours beside the paper's."""
    return comparisons(shifts, technique).sort_values(
        ["source", "set", "rank"], ascending=[False, True, True], kind="stable"
    ).reset_index(drop=True)


# ------------------------------------------------------------------ Table 2
def table2_rows(shifts: pd.DataFrame) -> pd.DataFrame:
    """Table 2's columns for every model evaluated here (its defence: the zoo's method, or
    "supervised L-p defence (<Table 1 method>)" for a RobustBench model), then the paper's rows
    with the paper's values and why each is not evaluated."""
    values = model_values(shifts)
    meta = metadata()["models"]
    ours = values.reset_index().rename(columns={"index": "model"})
    ours["defence"] = [DEFENCE.get(m, f"supervised L-p defence ({meta.get(n, {}).get('method', m)})"
                                   if m == "robustbench" else m)
                       for n, m in zip(ours.model, ours.method)]
    arch = ours.arch if "arch" in ours else pd.Series("", index=ours.index)
    ours["architecture"] = [meta[n]["architecture"] if n in meta else a
                            for n, a in zip(ours.model, arch.fillna(""))]
    ours["source"] = "ours"
    ours["note"] = ""
    paper = []
    for row in metadata()["table2"]:
        rb = row.get("robustbench")
        note = (f"on RobustBench's {rb.rsplit('/', 1)[0].replace('/', ' ')} leaderboard "
                f"({rb.rsplit('/', 1)[1]}); this pipeline loads CIFAR-10 L-inf ids only" if rb else
                "not on RobustBench (the authors' own weights): not loadable here")
        paper.append({"model": "", "method": row["method"], "defence": row["defence"],
                      "architecture": row["architecture"], "source": "paper (Table 2)",
                      "note": note, **dict(zip(TABLE2_PAPER_COLUMNS, row["paper"]))})
    return pd.concat([ours, pd.DataFrame(paper)], ignore_index=True)


# ------------------------------------------------------------------ registry outputs
LABELS = {"id_acc": "ID acc (%)", "id_rob": "ID rob (%)", "oodd_acc": "OOD_d acc (%)",
          "oodd_rob": "OOD_d rob (%)", "er_d": "OOD_d effective acc", "aer_d": "OOD_d AER",
          "oodt_rob": "OOD_t rob (%)", "aer_t": "OOD_t AER", "oodt_nonlp": "OOD_t non-L-p (%)",
          "oodt_lp": "OOD_t L-p (%)"}


def _round(values, digits: int = 2) -> pd.Series:
    return pd.Series(values, dtype=float).round(digits).to_numpy() + 0.0   # no "-0"


def technique_table(inputs: dict, technique: str) -> pd.DataFrame:
    """Tables 6-10 (and the zoo's training length): per comparison set and member, our ID and
    OOD values, effective accuracy and AER (OOD_d, OOD_t), beside the paper's; `note` says why a
    paper member is not evaluated here."""
    from pabench.experiments.oodrb.analysis import read_shifts

    if technique not in TECHNIQUE_NAMES:
        raise ValueError(f"unknown technique {technique!r} (use {', '.join(TECHNIQUE_NAMES)})")
    shifts = read_shifts(inputs)
    f = technique_rows(shifts, technique)
    out = pd.DataFrame({"source": f.source, "set": f.set, "level": f.level,
                        "model": f.model.fillna("-").replace("", "-"),
                        "architecture": f.architecture.fillna("")})
    if technique in ("architecture", "model_size"):
        out["size (M params)"] = _round(f.params_m)
    for column in PAPER_COLUMNS:
        out[LABELS[column]] = _round(f[column])
    out["in AT fit"] = f.in_fit
    for column in PAPER_COLUMNS:
        out[f"paper {LABELS[column]}"] = _round(f.get(f"paper_{column}", np.nan))
    out["note"] = f.note.fillna("")
    if out.empty:
        out.loc[0, "note"] = "not at this scale: " + why_missing(f.assign(evaluated=False),
                                                                 technique,
                                                                 has_zoo(model_values(shifts)))
    return out


def table2(inputs: dict) -> pd.DataFrame:
    """Table 2: defence, method, model, ID and OOD_d accuracy and robustness, effective accuracy
    (ER) and AER under OOD_d, OOD_t robustness over non-L-p, L-p and all threats: every model
    evaluated here, then the paper's rows (its values; `note`: why not evaluated here)."""
    from pabench.experiments.oodrb.analysis import read_shifts

    t = table2_rows(read_shifts(inputs))
    out = pd.DataFrame({"source": t.source, "defence": t.defence, "method": t.method,
                        "model": t.model.replace("", "-"), "architecture": t.architecture})
    for column in ("id_acc", "id_rob", "oodd_acc", "oodd_rob"):
        out[LABELS[column]] = _round(t[column], 1)
    out["OOD_d ER"] = _round(t.er_d, 1)
    out["OOD_d AER"] = _round(t.aer_d, 1)
    for column in ("oodt_nonlp", "oodt_lp"):
        out[LABELS[column]] = _round(t[column], 1)
    out["OOD_t avg (%)"] = _round(t.oodt_rob, 1)
    out["note"] = t.note.fillna("")
    return out


def fig7(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    """Figure 7: per technique (panels a-f), per level, the mean over its comparison sets of
    OOD robustness (OOD_d, OOD_t) and AER (OOD_d, OOD_t); an empty panel says why."""
    from pabench.experiments.oodrb.figures import read_kept_shifts
    from pabench.reporting.plotting import plt, save_figure

    shifts, meta = read_kept_shifts(inputs, meta)
    fig, axes = plt.subplots(2, len(TECHNIQUES), figsize=(3.0 * len(TECHNIQUES), 5.6),
                             squeeze=False)
    bars = (("oodd_rob", "aer_d", "OOD_d", "C0"), ("oodt_rob", "aer_t", "OOD_t", "C3"))
    rows = []
    values = model_values(shifts)
    zoo = has_zoo(values)
    for k, (technique, table, title) in enumerate(TECHNIQUES):
        frame = comparisons(shifts, technique, values)
        means = level_means(frame)
        top, bottom = axes[0, k], axes[1, k]
        top.set_title(title + (f"\n({table})" if table else ""), fontsize=8)
        if means.empty:
            for ax in (top, bottom):
                ax.set_xticks([])
                ax.set_yticks([])
            top.text(0.5, 0.5, "not at this scale:\n" + _wrap(why_missing(frame, technique, zoo)),
                     transform=top.transAxes, **{**_NO_DATA, "fontsize": 6})
            continue
        x = np.arange(len(means))
        for j, (rob, aer, name, color) in enumerate(bars):
            top.bar(x + (j - 0.5) * 0.4, means[rob], 0.4, color=color, alpha=0.85, label=name)
            bottom.bar(x + (j - 0.5) * 0.4, means[aer], 0.4, color=color, alpha=0.85, label=name)
        bottom.axhline(0, color="0.4", lw=0.6)
        for ax in (top, bottom):
            ax.set_xticks(x, [f"{lv}\n({s} set{'s' if s > 1 else ''})"
                              for lv, s in zip(means.level, means.sets)], fontsize=6,
                          rotation=30 if len(means) > 3 else 0)
            ax.tick_params(axis="y", labelsize=7)
        rows.append(means)
    axes[0, 0].set_ylabel("OOD robustness (%)")
    axes[1, 0].set_ylabel("AER (points)")
    for ax in axes[0]:  # the legend in the first drawn panel, above its bars
        if ax.get_legend_handles_labels()[0]:
            ax.set_ylim(top=1.3 * ax.get_ylim()[1])
            ax.legend(fontsize=6, ncol=2, loc="upper left")
            break
    fig.tight_layout()
    data = (pd.concat(rows, ignore_index=True) if rows else
            pd.DataFrame(columns=["technique", "level", "rank", "sets", "models", "id_rob",
                                  "oodd_rob", "oodt_rob", "aer_d", "aer_t"]))
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


_NO_DATA = {"ha": "center", "va": "center", "color": "0.4"}


def _wrap(text: str, width: int = 38) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))
