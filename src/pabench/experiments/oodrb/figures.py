"""Figures of the OODRobustBench reproduction (Li et al. 2024), drawn from the stacked tidy tables
(pandas, numpy, scipy and matplotlib only; the corruption sample grid alone imports the corruption
generator, hence PyTorch): ID against OOD robustness per shift family (Figure 1), degradation per
shift (Figure 2), R^2 of the ID -> OOD fits under dataset shifts (Figure 3) and threat shifts
(Figure 4), agreement on the line (Figure 5), upper limit and slope (Figure 6), and PA under
dataset shift (new): log PA against severity, its rank correlation with robustness, and how well
ID log PA predicts OOD robustness.  Accuracy and robustness are drawn in percent.

Inputs: `shifts` (the stacked shifts table; a separate stacked `threats` table, when given, is
added to it), `predictions` (Figure 5)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pabench.experiments.oodrb import analysis as A
from pabench.experiments.oodrb.analysis import read_shifts, read_tables
from pabench.reporting import degenerate
from pabench.reporting.plotting import plt, save_figure

METHOD_LABEL = {"undefended": "ST (undefended)", "madry": "PGD-AT (Madry)", "trades": "TRADES",
                "fast_fgsm": "fast FGSM-AT", "robustbench": "RobustBench"}
METHOD_STYLE = {"undefended": ("0.45", "o"), "madry": ("C0", "s"), "trades": ("C1", "^"),
                "fast_fgsm": ("C2", "D"), "robustbench": ("C3", "*")}
FAMILY_COLOR = {"dataset": "k", "natural": "C2", "corruption": "C0", "threat": "C3",
                "L-p": "C3", "non-L-p": "C4"}
NO_DATA = {"ha": "center", "va": "center", "fontsize": 8, "color": "0.4"}


def _style(method: str, k: int = 0) -> tuple[str, str]:
    return METHOD_STYLE.get(method, (f"C{(k + 5) % 10}", "v"))


def _methods(frame: pd.DataFrame) -> list[str]:
    known = [m for m in METHOD_STYLE if m in set(frame.method)]
    return known + [m for m in dict.fromkeys(frame.method) if m not in METHOD_STYLE]


def scatter_methods(ax, frame: pd.DataFrame, x: str, y: str, legend: bool,
                     fitted: pd.Series | None = None) -> None:
    """One marker style per training method; with `fitted` (a mask over `frame`), the models the
    line was not fitted on are drawn hollow."""
    if fitted is None:
        fitted = pd.Series(True, index=frame.index)
    for k, method in enumerate(_methods(frame)):
        mine = frame.method == method
        color, marker = _style(method, k)
        label = METHOD_LABEL.get(method, method) if legend else None
        for filled in (True, False):
            d = frame[mine & (fitted == filled)]
            if filled or len(d):
                ax.scatter(d[x], d[y], s=16, marker=marker, alpha=0.85, label=label,
                           color=color if filled else "none", edgecolors=color, linewidths=0.8)
                label = None


def square_limits(ax, values) -> tuple[float, float]:
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    lo, hi = (0.0, 100.0) if not len(v) else (float(v.min()), float(v.max()))
    pad = max(3.0, 0.08 * (hi - lo))
    lo, hi = max(lo - pad, 0.0), min(hi + pad, 100.0)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    return lo, hi


def draw_line(ax, line: dict, lo: float, hi: float, color="C0", label=None) -> None:
    if np.isfinite(line["slope"]):
        xs = np.array([lo, hi])
        ax.plot(xs, line["slope"] * xs + line["intercept"], color=color, lw=1.2, label=label)


def format_r2(value) -> str:
    return "n/a" if not np.isfinite(value) else f"{value:.2f}"


def _ticks(ax, names, rotation=90) -> None:
    ax.set_xticks(np.arange(len(names)), [A.label(n) for n in names], rotation=rotation,
                  fontsize=7)


# ------------------------------------------------------------------ Figure 1
def read_kept_shifts(inputs: dict, meta: dict) -> tuple[pd.DataFrame, dict]:
    """The shifts table without degenerate models, and meta whose caption says how many were
    left out (pabench.reporting.degenerate)."""
    every = read_shifts(inputs, keep_degenerate=True)
    meta = degenerate.annotate(meta, every, ["model"])
    if degenerate.COLUMN in meta:
        meta[degenerate.COLUMN] += ("; every model is flagged: drawn, none of it is evidence"
                                    if every[degenerate.COLUMN].all() else "; left out of this figure")
    return A.without_degenerate(every), meta


def fig1(inputs: dict, outputs, meta: dict, min_total: float | None = A.MIN_TOTAL) -> pd.DataFrame:
    """ID against OOD robustness, one panel per shift family: corruptions (R_c), natural shifts
    (R_n), L-p threats and non-L-p threats (each the mean over the family's shifts per model);
    markers by training method, the line fitted on the AT models (the 110 filter), y = x."""
    shifts, meta = read_kept_shifts(inputs, meta)
    agg = A.aggregate(shifts)
    ps = A.per_shift(shifts, agg)
    kinds = A.threat_kinds(shifts)
    kept, left_out, filtered = A.fit_models(agg, "AT", min_total)
    panels = [("corruptions (R_c)", [n for n in dict.fromkeys(ps[ps.family == "corruption"]["shift"])]),
              ("natural shifts (R_n)", [n for n in dict.fromkeys(ps[ps.family == "natural"]["shift"])]),
              ("L-p threats", [n for n, k in kinds.items() if k == "L-p"]),
              ("non-L-p threats", [n for n, k in kinds.items() if k == "non-L-p"])]
    fig, axes = plt.subplots(1, 4, figsize=(12.0, 3.4))
    rows = []
    for ax, (title, names) in zip(axes, panels):
        # ID side: the clean robustness of the shifts' own originals (see analysis)
        d = (ps[ps["shift"].isin(names)].groupby("model", sort=False)[["id_rob", "robustness"]]
             .mean())
        d = agg[["model", "method", "adversarial"]].assign(id_rob=agg.model.map(d.id_rob),
                                                          ood_rob=agg.model.map(d.robustness))
        d = d[d.ood_rob.notna() & d.id_rob.notna()]
        if d.empty:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, **NO_DATA)
            ax.set_title(title, fontsize=8)
            ax.set(xlabel="ID robustness (%)")
            continue
        line = A.fit(d[d.model.isin(kept)].id_rob, d[d.model.isin(kept)].ood_rob)
        lo, hi = square_limits(ax, pd.concat([d.id_rob, d.ood_rob]))
        ax.plot([lo, hi], [lo, hi], color="0.6", ls="--", lw=0.8, label="y = x")
        draw_line(ax, line, lo, hi, label="fit (AT models)")
        scatter_methods(ax, d, "id_rob", "ood_rob", legend=True, fitted=d.model.isin(kept))
        shown = ", ".join(A.label(n) for n in names) if len(names) <= 4 else f"{len(names)} shifts"
        ax.set_title(f"{title}\n{shown}; R^2 = {format_r2(line['r2'])} (n = {line['n']}; hollow: not "
                     "fitted)", fontsize=7)
        ax.set(xlabel="ID robustness (%)", aspect="equal")
        rows.append(d.assign(panel=title, shifts=";".join(names), in_fit=d.model.isin(kept),
                             slope=line["slope"], intercept=line["intercept"], r2=line["r2"],
                             n_fit=line["n"], left_out=left_out, filtered=filtered))
    axes[0].set_ylabel("OOD robustness (%)")
    handles, labels = axes[0].get_legend_handles_labels()
    for ax in axes[1:]:
        h, lab = ax.get_legend_handles_labels()
        handles += [x for x, y in zip(h, lab) if y not in labels]
        labels += [y for y in lab if y not in labels]
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 7), fontsize=7,
               bbox_to_anchor=(0.5, -0.06))
    fig.tight_layout()
    data = (pd.concat(rows, ignore_index=True) if rows else
            pd.DataFrame(columns=["model", "method", "adversarial", "id_rob", "ood_rob", "panel"]))
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 2
def _boxes(ax, values: list, positions, color) -> None:
    keep = [(v, p) for v, p in zip(values, positions) if len(v)]
    if not keep:
        return
    ax.boxplot([v for v, _ in keep], positions=[p for _, p in keep], widths=0.6, patch_artist=True,
               boxprops={"facecolor": color, "alpha": 0.45, "lw": 0.5},
               medianprops={"color": "k", "lw": 0.8}, whiskerprops={"lw": 0.5},
               capprops={"lw": 0.5}, flierprops={"ms": 2, "mec": color})


def fig2(inputs: dict, outputs, meta: dict, group: str = "AT") -> pd.DataFrame:
    """Degradation (the shift's clean ID side - OOD, see analysis) of accuracy (top) and
    robustness (bottom), percentage points, per shift and aggregate: box plots over the group's
    models (quartiles, whiskers 1.5 IQR)."""
    shifts, meta = read_kept_shifts(inputs, meta)
    t = A.targets(shifts)
    t = A.in_group(t, group)
    order = A.target_order(t)
    long = []
    for metric, (x, y) in (("accuracy", ("id_acc", "accuracy")),
                           ("robustness", ("id_rob", "robustness"))):
        long.append(t.assign(metric=metric, id_value=t[x], ood_value=t[y],
                             degradation=t[x] - t[y])[
            ["model", "method", "target", "label", "family", "aggregate", "metric", "id_value",
             "ood_value", "degradation"]])
    data = pd.concat(long, ignore_index=True).dropna(subset=["degradation"])
    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 0.32 * len(order) + 1.5), 5.6), sharex=True)
    for ax, metric in zip(axes, ("accuracy", "robustness")):
        d = data[data.metric == metric]
        values = [d[d.target == n].degradation.to_numpy() for n in order]
        colors = {n: FAMILY_COLOR.get(t[t.target == n].family.iloc[0], "0.5") for n in order}
        for n, v, p in zip(order, values, range(len(order))):
            _boxes(ax, [v], [p], colors[n])
        ax.axhline(0, color="0.5", lw=0.6)
        ax.set_ylabel(f"{metric} degradation\nclean - OOD (points)")
        if d.empty:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, **NO_DATA)
    _ticks(axes[1], order)
    axes[0].set_title(f"Degradation under distribution shift, {group} models "
                      f"(n = {t.model.nunique()}); clean: a corruption's or threat's own "
                      "originals, else the ID test set; threat shifts have no accuracy", fontsize=8)
    fig.tight_layout()
    save_figure(fig, *outputs, data.reset_index(drop=True), meta.pop("caption"), meta)
    return data.reset_index(drop=True)


# ------------------------------------------------------------------ Figure 3
DATASET_SETUPS = (("ST", "acc-acc"), ("AT", "acc-acc"), ("AT", "rob-rob"))


def heatmap(ax, matrix: np.ndarray, rows, cols) -> None:
    cmap = plt.get_cmap("viridis").with_extremes(bad="0.9")
    image = ax.imshow(np.ma.masked_invalid(matrix), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for (i, j), v in np.ndenumerate(matrix):
        text = "-" if not np.isfinite(v) else f"{v:.2f}".lstrip("0") if v < 1 else "1.0"
        ax.text(j, i, text, ha="center", va="center", fontsize=6,
                color="k" if np.isfinite(v) and v > 0.6 else ("0.3" if not np.isfinite(v) else "w"))
    ax.set_yticks(np.arange(len(rows)), rows, fontsize=7)
    _ticks(ax, cols)
    ax.grid(False)
    plt.colorbar(image, ax=ax, fraction=0.025, pad=0.01, label="R^2")


def fig3(inputs: dict, outputs, meta: dict, min_total: float | None = A.MIN_TOTAL) -> pd.DataFrame:
    """R^2 of the linear fits ID -> OOD under every dataset shift and aggregate: ST and AT
    models' accuracy (acc-acc) and AT models' robustness (rob-rob)."""
    shifts, meta = read_kept_shifts(inputs, meta)
    f = A.fits(shifts, pairs=("acc-acc", "rob-rob"), min_total=min_total)
    f = f[f.family != "threat"]
    data = pd.concat([f[(f.group == g) & (f.pair == p)] for g, p in DATASET_SETUPS],
                     ignore_index=True)
    order = [n for n in A.target_order(f) if n in set(data.target)]
    rows, matrix = [], np.full((len(DATASET_SETUPS), len(order)), np.nan)
    for i, (g, p) in enumerate(DATASET_SETUPS):
        d = data[(data.group == g) & (data.pair == p)].set_index("target")
        n = int(d.models.iloc[0]) if len(d) else 0
        rows.append(f"{g} {p} (n = {n})")
        for j, name in enumerate(order):
            if name in d.index:
                matrix[i, j] = d.loc[name, "r2"]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.34 * len(order) + 2.5), 2.6))
    if order:
        heatmap(ax, matrix, rows, order)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, **NO_DATA)
    ax.set_title("R^2 of the linear fit ID -> OOD under dataset shifts (grey: undefined)", fontsize=8)
    fig.tight_layout()
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 4
def fig4(inputs: dict, outputs, meta: dict, min_total: float | None = A.MIN_TOTAL,
         reference: float = 0.7) -> pd.DataFrame:
    """R^2 of the fits ID robustness -> robustness under each threat shift (and OOD_t), AT
    models; the dashed line at `reference` (the paper: L-p shifts "higher than 0.7")."""
    shifts, meta = read_kept_shifts(inputs, meta)
    kinds = A.threat_kinds(shifts)
    f = A.fits(shifts, pairs=("rob-rob",), groups=("AT",), min_total=min_total)
    data = f[f.family == "threat"].reset_index(drop=True)
    data = data.assign(kind=[kinds.get(n, "aggregate") for n in data.target])
    if data.empty:
        raise ValueError("no threat shift in the shifts table")
    fig, ax = plt.subplots(figsize=(max(3.6, 0.55 * len(data) + 1.5), 3.0))
    colors = [FAMILY_COLOR.get(k, "k") for k in data.kind]
    values = data.r2.fillna(0).to_numpy()
    ax.bar(np.arange(len(data)), values, color=colors, alpha=0.8)
    for k, v in enumerate(data.r2):
        ax.text(k, (0 if not np.isfinite(v) else v) + 0.02, format_r2(v), ha="center", fontsize=7)
    ax.axhline(reference, color="0.4", ls="--", lw=0.8)
    _ticks(ax, data.target, rotation=30)
    ax.set(ylim=(0, 1.15), ylabel="R^2 (ID robustness -> threat robustness)")
    kinds_shown = list(dict.fromkeys(data.kind))
    ax.legend([plt.Rectangle((0, 0), 1, 1, color=FAMILY_COLOR.get(k, "k"), alpha=0.8)
               for k in kinds_shown],
              ["OOD_t (mean)" if k == "aggregate" else f"{k} threat" for k in kinds_shown],
              fontsize=6, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3)
    ax.set_title(f"Threat shifts, AT models (n = {int(data.models.iloc[0])})", fontsize=8,
                 pad=16)
    fig.tight_layout()
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 5
def at_models(shifts: pd.DataFrame) -> list[str]:
    return A.models_of(shifts).query("adversarial").model.tolist()


def agreement_data(preds: pd.DataFrame, shift: str, models=None) -> pd.DataFrame:
    """Figure 5's numbers for one OOD set: per pair of models the ID and OOD agreement of their
    adversarial predictions (kind "agreement"), per model its ID and OOD robustness on the same
    images (kind "robustness"), each with its fitted line (fit_* columns)."""
    pairs = A.agreement(preds, shift, models)
    used = models if models is not None else list(dict.fromkeys([*pairs.model_a, *pairs.model_b]))
    rob = A.prediction_robustness(preds, shift, used)
    rob_line = A.fit(rob.id_robustness, rob.ood_robustness)
    return pd.concat([
        pd.DataFrame({"kind": "agreement", "model_a": pairs.model_a, "model_b": pairs.model_b,
                      "shift": shift, "id_value": pairs.id_agreement, "ood_value": pairs.ood_agreement,
                      "n_id": pairs.n_id, "n_ood": pairs.n_ood, "fit_slope": pairs.fit_slope,
                      "fit_intercept": pairs.fit_intercept, "fit_r2": pairs.fit_r2}),
        pd.DataFrame({"kind": "robustness", "model_a": rob.model, "model_b": "", "shift": shift,
                      "id_value": rob.id_robustness, "ood_value": rob.ood_robustness,
                      "fit_slope": rob_line["slope"], "fit_intercept": rob_line["intercept"],
                      "fit_r2": rob_line["r2"]})], ignore_index=True)


def agreement_panel(ax, data: pd.DataFrame, legend_size: int = 6) -> None:
    """One OOD set's agreement_data: pairs (agreement) and models (robustness), each with its
    line and R^2, and y = x."""
    lo, hi = square_limits(ax, pd.concat([data.id_value, data.ood_value]))
    ax.plot([lo, hi], [lo, hi], color="0.6", ls="--", lw=0.8, label="y = x")
    for kind, marker, size, color, who in (("agreement", "o", 10, "C0", "pairs"),
                                           ("robustness", "^", 18, "C1", "models")):
        d = data[data.kind == kind]
        line = A.fit(d.id_value, d.ood_value)
        ax.scatter(d.id_value, d.ood_value, s=size, marker=marker, color=color, alpha=0.7,
                   label=f"{kind}, {len(d)} {who}: R^2 = {format_r2(line['r2'])}")
        draw_line(ax, line, lo, hi, color=color)
    ax.set(xlabel="ID (%)", ylabel=f"OOD: {A.label(data['shift'].iloc[0])} (%)", aspect="equal")
    ax.legend(fontsize=legend_size, loc="upper left")


def agreement_inputs(inputs: dict, meta: dict) -> tuple[pd.DataFrame, list | None, dict]:
    """The predictions table, the AT models (None without a shifts table: every model) and the
    meta of Figures 5 and 14."""
    preds = read_tables(inputs["predictions"])
    if not inputs.get("shifts"):
        return preds, None, meta
    shifts, meta = read_kept_shifts(inputs, meta)
    return preds, at_models(shifts), meta


def fig5(inputs: dict, outputs, meta: dict, shift: str | None = None) -> pd.DataFrame:
    """Agreement on the line: per pair of AT models, the share of images where their predictions
    on their own adversarial examples agree, ID against OOD (`shift`, default the first natural
    shift of the table), with the fitted line and R^2; beside it each model's robustness ID
    against OOD on the same images (the line agreement should follow)."""
    preds, models, meta = agreement_inputs(inputs, meta)
    available = A.ood_sets(preds)
    if shift is None:
        if not available:
            raise ValueError("predictions table: no OOD set besides the ID one")
        shift = available[0]
    elif shift not in available:
        raise ValueError(f"predictions table: no shift {shift!r} (has {available})")
    data = agreement_data(preds, shift, models)
    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    agreement_panel(ax, data)
    who = "AT models" if models is not None else "all models"
    ax.set_title(f"Agreement on the line ({who}), adversarial predictions", fontsize=8)
    fig.tight_layout()
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 6
def fig6(inputs: dict, outputs, meta: dict, min_total: float | None = A.MIN_TOTAL) -> pd.DataFrame:
    """Per shift and aggregate, the AT fits' upper limit (slope x 100 + intercept, capped at 100)
    and slope: robustness (rob-rob) beside accuracy (acc-acc, dataset shifts only)."""
    shifts, meta = read_kept_shifts(inputs, meta)
    f = A.fits(shifts, pairs=("rob-rob", "acc-acc"), groups=("AT",), min_total=min_total)
    order = A.target_order(f)
    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 0.36 * len(order) + 1.5), 5.4), sharex=True)
    width = 0.4
    for ax, column, name in ((axes[0], "upper_limit", "upper limit of OOD (%)"),
                             (axes[1], "slope", "slope (OOD per ID point)")):
        for k, (pair, color) in enumerate((("rob-rob", "C3"), ("acc-acc", "C0"))):
            d = f[f.pair == pair].set_index("target").reindex(order)
            legend = "robustness (rob-rob)" if pair == "rob-rob" else "accuracy (acc-acc)"
            ax.bar(np.arange(len(order)) + (k - 0.5) * width, d[column], width, color=color,
                   alpha=0.8, label=legend)
        ax.set_ylabel(name)
    axes[0].axhline(100, color="0.5", lw=0.6, ls="--")
    axes[1].axhline(1, color="0.5", lw=0.6, ls="--")
    axes[0].legend(fontsize=7)
    n = int(f.models.iloc[0]) if len(f) else 0
    axes[0].set_title(f"Predicted upper limit and conversion rate, AT models (n = {n})", fontsize=8)
    _ticks(axes[1], order)
    fig.tight_layout()
    data = f.reset_index(drop=True)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ PA under dataset shift (new)
def pa_severity(inputs: dict, outputs, meta: dict, measure: str = "log_pa",
                columns: int = 5) -> pd.DataFrame:
    """log PA between the clean and the corrupted logits against severity, one panel per
    corruption, one line per model coloured by training method (shared y axis)."""
    shifts, meta = read_kept_shifts(inputs, meta)
    data = shifts[shifts.family == "corruption"][
        ["model", "method", "adversarial", "shift", "severity", measure, "robustness"]]
    data = data.assign(robustness=100 * data.robustness).sort_values(["shift", "model", "severity"])
    names = A.shift_order(shifts[shifts.family == "corruption"])
    rows = max(1, int(np.ceil(len(names) / columns)))
    fig, axes = plt.subplots(rows, columns, figsize=(2.0 * columns, 1.7 * rows + 0.6), sharex=True,
                             sharey=True, squeeze=False)
    methods = _methods(data) if len(data) else []
    for ax, name in zip(axes.flat, names):
        d = data[data["shift"] == name]
        for model, m in d.groupby("model", sort=False):
            color, _ = _style(m.method.iloc[0], methods.index(m.method.iloc[0]))
            ax.plot(m.severity, m[measure], color=color, lw=0.8, alpha=0.8, marker=".", ms=3)
        ax.set_title(A.label(name), fontsize=7)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    if not names:
        axes[0, 0].text(0.5, 0.5, "no corruption rows", transform=axes[0, 0].transAxes, **NO_DATA)
    for ax in axes[-1]:
        ax.set_xlabel("severity")
    for ax in axes[:, 0]:
        ax.set_ylabel(A.PA_MEASURES.get(measure, measure), fontsize=7)
    handles = [plt.Line2D([], [], color=_style(m, k)[0], lw=1.2) for k, m in enumerate(methods)]
    fig.legend(handles, [METHOD_LABEL.get(m, m) for m in methods], loc="lower center",
               ncol=max(1, len(methods)), fontsize=7, bbox_to_anchor=(0.5, -0.04))
    fig.suptitle("PA between clean and corrupted logits against severity (higher = more robust)",
                 fontsize=8)
    fig.tight_layout()
    data = data.reset_index(drop=True)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


def pa_ranking(inputs: dict, outputs, meta: dict, group: str = "all",
               measure: str = "log_pa") -> pd.DataFrame:
    """Kendall's tau across models between log PA and robustness per corruption (each averaged
    over severities) and overall (mean log PA over every corruption row against OOD_d
    robustness); * marks p < 0.05."""
    shifts, meta = read_kept_shifts(inputs, meta)
    r = A.pa_ranking(shifts, measures=(measure,), groups=(group,))
    r = r.reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.4 * len(r) + 1.5), 3.0))
    colors = ["k" if t == "overall" else "C0" for t in r.target]
    ax.bar(np.arange(len(r)), r.tau.fillna(0), color=colors, alpha=0.8)
    for k, (tau, p) in enumerate(zip(r.tau, r.p)):
        if np.isfinite(tau):
            ax.text(k, tau + (0.03 if tau >= 0 else -0.09), f"{tau:.2f}{'*' if p < 0.05 else ''}",
                    ha="center", fontsize=6)
        else:
            ax.text(k, 0.03, "n/a", ha="center", fontsize=6, color="0.4")
    ax.axhline(0, color="0.5", lw=0.6)
    _ticks(ax, r.target)
    n = int(r.n.max()) if len(r) else 0
    ax.set(ylim=(-1.15, 1.2), ylabel="Kendall tau (log PA vs robustness)")
    ax.set_title(f"Rank agreement of {A.PA_MEASURES.get(measure, measure)} with robustness, "
                 f"{group} models (n = {n})", fontsize=8)
    fig.tight_layout()
    save_figure(fig, *outputs, r, meta.pop("caption"), meta)
    return r


def pa_predicts(inputs: dict, outputs, meta: dict, group: str = "all",
                measure: str = "log_pa") -> pd.DataFrame:
    """R^2 of the linear fit across models predicting OOD robustness (R_c, R_n, OOD_t, and
    OOD_d overall) from ID log PA, from ID accuracy and from ID robustness."""
    shifts, meta = read_kept_shifts(inputs, meta)
    p = A.pa_prediction(shifts, groups=(group,))
    predictors = (f"id_{measure}", "id_acc", "id_rob")
    data = p[p.predictor.isin(predictors)].reset_index(drop=True)
    order = [t for t in ("R_c", "R_n", "OOD_t", "OOD_d") if t in set(data.target)]
    fig, ax = plt.subplots(figsize=(5.6, 3.0))
    width = 0.8 / len(predictors)
    for k, (predictor, color) in enumerate(zip(predictors, ("C4", "C0", "C3"))):
        d = data[data.predictor == predictor].set_index("target").reindex(order)
        pos = np.arange(len(order)) + (k - (len(predictors) - 1) / 2) * width
        name = d.predictor_label.dropna().iloc[0] if d.predictor_label.notna().any() else predictor
        ax.bar(pos, d.r2.fillna(0), width, color=color, alpha=0.8, label=name)
        for x, v in zip(pos, d.r2):
            ax.text(x, (v if np.isfinite(v) else 0) + 0.02, format_r2(v), ha="center", fontsize=6)
    ax.set_xticks(np.arange(len(order)),
                  [("OOD_d (overall)" if t == "OOD_d" else A.label(t)) for t in order], fontsize=7)
    ax.set(ylim=(0, 1.15), ylabel="R^2 (predicting OOD robustness)")
    n = int(data.n.max()) if len(data) else 0
    ax.set_title(f"What predicts OOD robustness across models? {group} models (n = {n})", fontsize=8)
    ax.legend(fontsize=6, ncol=3, loc="upper left")
    fig.tight_layout()
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ corruption samples
def cifar10_samples() -> tuple[np.ndarray, np.ndarray]:
    """The 20 real CIFAR-10 test images that ship with foolbox (package data, no network):
    (20, 32, 32, 3) uint8 and their labels (the last field of each file name)."""
    from importlib.util import find_spec

    from PIL import Image

    spec = find_spec("foolbox")  # its package folder only: importing foolbox is not needed
    if spec is None or spec.origin is None:
        raise FileNotFoundError("foolbox is not installed: no CIFAR-10 sample images")
    files = sorted((Path(spec.origin).parent / "data").glob("cifar10_*.png"))
    if not files:
        raise FileNotFoundError("foolbox ships no cifar10_*.png sample images")
    images = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in files])
    labels = np.array([int(f.stem.rsplit("_", 1)[1]) for f in files])
    return images, labels


def _corruption_figure(images: np.ndarray, names=None, seed: int = 0, per_row: int = 2):
    """The grid's figure and its table (see corruption_grid)."""
    # the corruption generator imports PyTorch: here, not at the top
    from pabench.datasets.corruptions import ALL_CORRUPTIONS, SEVERITIES, corrupt

    names = ALL_CORRUPTIONS if names is None else names
    picks = images[:per_row]
    cols = per_row * (1 + len(SEVERITIES))
    fig, axes = plt.subplots(len(names), cols, figsize=(cols * 0.75, len(names) * 0.8), squeeze=False)
    rows = []
    for r, name in enumerate(names):
        for s in SEVERITIES:
            out = corrupt(images, name, s, seed)
            rows.append({"corruption": name, "severity": s,
                         "mean_abs_change": float(np.abs(out.astype(int) - images).mean())})
            for i in range(per_row):
                axes[r, i * (1 + len(SEVERITIES)) + s].imshow(out[i], interpolation="nearest")
        for i in range(per_row):
            axes[r, i * (1 + len(SEVERITIES))].imshow(picks[i], interpolation="nearest")
        axes[r, 0].set_ylabel(name, rotation=0, ha="right", va="center", fontsize=7)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
        ax.spines[:].set_visible(False)
    for i in range(per_row):
        axes[0, i * (1 + len(SEVERITIES))].set_title("clean", fontsize=7)
        for s in SEVERITIES:
            axes[0, i * (1 + len(SEVERITIES)) + s].set_title(f"s{s}", fontsize=7)
    fig.subplots_adjust(wspace=0.05, hspace=0.05, left=0.16, right=0.99, top=0.97, bottom=0.01)
    return fig, pd.DataFrame(rows)


def corruption_grid(images: np.ndarray, path, names=None, seed: int = 0,
                    per_row: int = 2) -> pd.DataFrame:
    """One row per corruption: `per_row` images, each at severities 1..5 after its clean original.
    Written as a PNG (nearest-neighbour upscaled, no interpolation blur); returns the mean absolute
    change per corruption and severity (the CSV beside the figure)."""
    fig, table = _corruption_figure(images, names, seed, per_row)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return table


def grid(inputs: dict, outputs, meta: dict, seed: int = 0, per_row: int = 2,
         names=None) -> pd.DataFrame:
    """corruption_grid on the 20 CIFAR-10 test images that ship with foolbox, written as the
    registry's pdf/png/csv; the CSV holds the mean absolute change (0-255) per corruption and
    severity over the 20 images."""
    images, _ = cifar10_samples()
    fig, table = _corruption_figure(images, names, seed, per_row)
    save_figure(fig, *outputs, table, meta.pop("caption"), meta)
    return table
