"""Domain-generalisation figures of the PA paper: Figure 7 (PA and AFR_T vs shift factors)."""
from __future__ import annotations

import pandas as pd

from .common import plt, save_figure

METRICS = (("logpa_adam", "log PA (adam)"), ("logpa_exact", "log PA (exact)"), ("afr_true", "AFR_T"))


def fig07_data(table: pd.DataFrame) -> pd.DataFrame:
    long = table.melt(id_vars=["algorithm", "seed", "n_shift_factors", "shift_ratio"],
                      value_vars=[m for m, _ in METRICS], var_name="metric")
    out = (long.groupby(["metric", "shift_ratio", "algorithm", "n_shift_factors"])["value"]
           .agg(["mean", "std", "count"]).reset_index().rename(columns={"count": "n_seeds"}))
    out["std"] = out["std"].fillna(0.0)
    return out


def fig07(table: pd.DataFrame, outputs, meta: dict) -> pd.DataFrame:
    data = fig07_data(table)
    ratios = sorted(data.shift_ratio.unique())
    algorithms = list(dict.fromkeys(table.algorithm))
    fig, axes = plt.subplots(len(METRICS), len(ratios), figsize=(2.1 * len(ratios), 5.6),
                             sharex=True, sharey="row", squeeze=False)
    for r, (metric, label) in enumerate(METRICS):
        for c, ratio in enumerate(ratios):
            ax = axes[r, c]
            for alg in algorithms:
                d = data[(data.metric == metric) & (data.shift_ratio == ratio) & (data.algorithm == alg)]
                ax.errorbar(d.n_shift_factors, d["mean"], yerr=d["std"], marker="o", capsize=2,
                            label=alg.upper())
            if r == 0:
                ax.set_title(f"SR = {ratio:g}")
            if c == 0:
                ax.set_ylabel(label)
            if r == len(METRICS) - 1:
                ax.set_xlabel("# shift factors")
    axes[0, 0].legend(loc="lower left")
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data
