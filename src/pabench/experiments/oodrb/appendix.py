"""The appendix figures of OODRobustBench (Li et al. 2024), drawn from the same stacked tidy tables
as the main figures (pabench.experiments.oodrb.figures) with the same fits, aggregates and
agreement code (pabench.experiments.oodrb.analysis): MM5 against AutoAttack per model
(Figure 8), R^2 of the misaligned fits Acc-Rob and Rob-Acc (Figure 13), agreement on the line on
every OOD set of the predictions table (Figure 14), the change of R^2 as inferior models are
removed (Figures 16-18), and the scatter plots behind the fits: ID against OOD accuracy and
robustness per dataset shift (Figures 19-21) and seen (ID L-p) against unforeseen robustness per
threat shift (Figure 28).  Accuracy and robustness in percent."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.experiments.oodrb import analysis as A
from pabench.experiments.oodrb import figures as F
from pabench.experiments.oodrb.analysis import read_tables
from pabench.reporting.plotting import plt, save_figure


def _dataset(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame.family != "threat"]


def _threat(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame.family == "threat"]


FAMILY = {"dataset": _dataset, "threat": _threat}


def _family(name: str):
    if name not in FAMILY:
        raise ValueError(f"unknown shift family {name!r} (use {', '.join(FAMILY)})")
    return FAMILY[name]


# ------------------------------------------------------------------ Figure 8
def mm5_vs_aa(attacks: pd.DataFrame) -> pd.DataFrame:
    """Per model and set (ID, and the corrupted images of Table 3), robust accuracy under
    AutoAttack and under MM5 (percent) and the gap MM5 - AA (attack_models, Table 3's)."""
    per = A.attack_models(attacks)
    rows = []
    for side in ("id", "ood"):
        wide = per.pivot_table(index="model", columns="attack", values=f"robustness_{side}",
                               sort=False)
        if not {"aa", "mm5"} <= set(wide.columns):
            raise ValueError("attacks table: needs both AutoAttack (aa) and MM5 (mm5) rows")
        wide = wide[["aa", "mm5"]].dropna()
        rows.append(pd.DataFrame({"model": wide.index, "set": "ID" if side == "id" else "OOD_d",
                                  "aa": wide.aa.to_numpy(), "mm5": wide.mm5.to_numpy()}))
    out = pd.concat(rows, ignore_index=True)
    return out.assign(gap=out.mm5 - out.aa)


def fig8(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    """MM5 against AutoAttack robust accuracy, one point per model (and set: ID, and Table 3's
    corrupted images), y = x; the title gives the mean and SD over the models of the gap."""
    data = mm5_vs_aa(read_tables(inputs["attacks"]))
    fig, ax = plt.subplots(figsize=(4.0, 4.0))
    lo, hi = F.square_limits(ax, pd.concat([data.aa, data.mm5]))
    ax.plot([lo, hi], [lo, hi], color="0.6", ls="--", lw=0.8, label="y = x")
    parts = []
    for (name, d), (marker, color) in zip(data.groupby("set", sort=False),
                                         (("o", "C0"), ("^", "C1"))):
        ax.scatter(d.aa, d.mm5, s=22, marker=marker, color=color, alpha=0.8, clip_on=False,
                   label=f"{name} ({len(d)} models)")
        sd = d.gap.std(ddof=1) if len(d) > 1 else np.nan
        parts.append(f"{name} gap {d.gap.mean():+.2f} (SD {sd:.2f})")
    ax.set(xlabel="AutoAttack robust accuracy (%)", ylabel="MM5 robust accuracy (%)",
           aspect="equal")
    ax.set_title("MM5 against AutoAttack, one point per model\n" + "; ".join(parts), fontsize=7)
    ax.legend(fontsize=6, loc="upper left")
    fig.tight_layout()
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 13
MISALIGNED = ("acc-rob", "rob-acc")


def fig13(inputs: dict, outputs, meta: dict, min_total: float | None = A.MIN_TOTAL) -> pd.DataFrame:
    """R^2 of the fits whose ID and OOD metrics differ, AT models, per dataset shift and
    aggregate: ID accuracy -> OOD robustness (acc-rob) and ID robustness -> OOD accuracy
    (rob-acc); the title gives the ID trade-off (R^2 and slope of ID robustness on ID accuracy)."""
    shifts, meta = F.read_kept_shifts(inputs, meta)
    f = _dataset(A.fits(shifts, pairs=MISALIGNED, groups=("AT",), min_total=min_total))
    order = A.target_order(f)
    matrix = np.array([[f[(f.pair == p) & (f.target == t)].r2.iloc[0]
                        if ((f.pair == p) & (f.target == t)).any() else np.nan for t in order]
                       for p in MISALIGNED]).reshape(len(MISALIGNED), len(order))
    agg = A.aggregate(shifts)
    kept, _, _ = A.fit_models(agg, "AT", min_total)
    at = agg[agg.model.isin(kept)]
    trade = A.fit(at.id_acc, at.id_rob)
    n = int(f.models.iloc[0]) if len(f) else 0
    fig, ax = plt.subplots(figsize=(max(6.0, 0.34 * len(order) + 2.5), 2.2))
    if order:
        F.heatmap(ax, matrix, [f"AT {p} (n = {n})" for p in MISALIGNED], order)
    else:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, **F.NO_DATA)
    ax.set_title("R^2 when ID and OOD metrics misalign, dataset shifts (grey: undefined); ID "
                 f"robustness on ID accuracy: slope {trade['slope']:.2f}, R^2 {F.format_r2(trade['r2'])}",
                 fontsize=8)
    fig.tight_layout()
    data = f.reset_index(drop=True).assign(id_tradeoff_slope=trade["slope"],
                                           id_tradeoff_r2=trade["r2"])
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 14
def fig14(inputs: dict, outputs, meta: dict, columns: int = 4) -> pd.DataFrame:
    """Figure 5 on every OOD set of the predictions table, one panel each."""
    preds, models, meta = F.agreement_inputs(inputs, meta)
    names = A.ood_sets(preds)
    if not names:
        raise ValueError("predictions table: no OOD set besides the ID one")
    columns = min(columns, len(names))
    rows = int(np.ceil(len(names) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns, 3.5 * rows), squeeze=False)
    data = []
    for ax, shift in zip(axes.flat, names):
        d = F.agreement_data(preds, shift, models)
        F.agreement_panel(ax, d, legend_size=5)
        ax.set_title(A.label(shift), fontsize=8)
        data.append(d)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    who = "AT models" if models is not None else "all models"
    fig.suptitle(f"ID against OOD agreement of adversarial predictions ({who})", fontsize=8)
    fig.tight_layout()
    data = pd.concat(data, ignore_index=True)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figures 16-18
def r2_thresholds(inputs: dict, outputs, meta: dict, family: str = "dataset",
                  thresholds=A.THRESHOLDS["linf"]) -> pd.DataFrame:
    """The change of R^2 as the AT models below each overall-performance threshold are removed
    (analysis.threshold_fits): one heatmap per pair of metrics (dataset shifts: acc-acc and
    rob-rob, Figures 16 and 17; threat shifts: rob-rob, Figure 18), rows the zoos (All, >= each
    threshold, NC: no model of ours) with the models each keeps, columns the shifts."""
    shifts, meta = F.read_kept_shifts(inputs, meta)
    pairs = ("acc-acc", "rob-rob") if family == "dataset" else ("rob-rob",)
    data = _family(family)(A.threshold_fits(shifts, thresholds, pairs)).reset_index(drop=True)
    order = A.target_order(data)
    zoos = list(dict.fromkeys(data.zoo))
    sizes = data.drop_duplicates("zoo").set_index("zoo").zoo_models
    fig, axes = plt.subplots(len(pairs), 1, squeeze=False,
                             figsize=(max(6.0, 0.34 * len(order) + 2.5),
                                      (0.25 * len(zoos) + 1.6) * len(pairs)))
    for ax, pair in zip(axes[:, 0], pairs):
        d = data[data.pair == pair].set_index(["zoo", "target"]).r2
        matrix = np.array([[d.get((z, t), np.nan) for t in order] for z in zoos]
                          ).reshape(len(zoos), len(order))
        if order:
            F.heatmap(ax, matrix, [f"{z} (n = {sizes[z]})" for z in zoos], order)
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, **F.NO_DATA)
        ax.set_title(f"R^2 of {pair}, AT models, as models with ID accuracy + robustness below\n"
                     "the threshold are removed (NC: no model of ours; grey: undefined)",
                     fontsize=7)
    fig.tight_layout()
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figures 19-21, 28
def fit_scatter(inputs: dict, outputs, meta: dict, family: str = "dataset",
                min_total: float | None = A.MIN_TOTAL, columns: int = 6) -> pd.DataFrame:
    """The scatter plots behind the fits of Figures 3 and 4 (AT models): per shift and aggregate
    of the family, ID against OOD accuracy (acc-acc) above ID against OOD robustness (rob-rob;
    threat shifts: robustness only, Figure 28), markers by training method (hollow: left out of
    the fit by the 110 filter), the fitted line with its R^2, y = x."""
    shifts, meta = F.read_kept_shifts(inputs, meta)
    pairs = ("acc-acc", "rob-rob") if family == "dataset" else ("rob-rob",)
    lines = _family(family)(A.fits(shifts, pairs=pairs, groups=("AT",), min_total=min_total))
    t = A.in_group(A.targets(shifts), "AT")
    kept, _, _ = A.fit_models(A.aggregate(shifts), "AT", min_total)
    order = A.target_order(lines)
    if not order:
        raise ValueError(f"no {family} shift in the shifts table")
    columns = min(columns, len(order))
    blocks = int(np.ceil(len(order) / columns))
    fig, axes = plt.subplots(blocks * len(pairs), columns, squeeze=False,
                             figsize=(2.1 * columns, 2.2 * blocks * len(pairs)))
    rows = []
    for k, target in enumerate(order):
        for j, pair in enumerate(pairs):
            ax = axes[(k // columns) * len(pairs) + j, k % columns]
            x_col, y_col = A.PAIRS[pair]
            d = t[t.target == target][["model", "method", x_col, y_col]].dropna()
            d = d.rename(columns={x_col: "id", y_col: "ood"})
            line = lines[(lines.target == target) & (lines.pair == pair)].iloc[0]
            lo, hi = F.square_limits(ax, pd.concat([d.id, d.ood]))
            ax.plot([lo, hi], [lo, hi], color="0.6", ls="--", lw=0.6)
            F.draw_line(ax, line, lo, hi)
            F.scatter_methods(ax, d, "id", "ood", legend=k == 0 and j == 0,
                               fitted=d.model.isin(kept))
            metric = "acc" if pair == "acc-acc" else "rob"
            ax.set_title(f"{A.label(target)} {metric}: R^2 {F.format_r2(line.r2)}", fontsize=6)
            ax.tick_params(labelsize=5)
            rows.append(d.assign(target=target, pair=pair, in_fit=d.model.isin(kept),
                                 slope=line.slope, intercept=line.intercept, r2=line.r2,
                                 n_fit=line.n))
    for ax in axes.flat:
        if not ax.has_data():
            ax.axis("off")
    seen = "ID accuracy / robustness" if family == "dataset" else "ID (seen) robustness"
    fig.supxlabel(f"{seen} (%)", fontsize=7)
    fig.supylabel("OOD (%)" if family == "dataset" else "unforeseen (threat-shift) robustness (%)",
                  fontsize=7)
    # the legend on top, in a strip kept free of panels
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="upper center", fontsize=6, ncol=6,
               bbox_to_anchor=(0.5, 1.0))
    data = pd.concat(rows, ignore_index=True)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data
