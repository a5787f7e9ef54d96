"""Domain-generalisation figures of the PA paper: Figure 7 (PA and AFR_T vs shift factors),
Figure 8 (predictive confidence and final beta) and Figure 11 (feature PCA)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.core import paths
from pabench.core.io import read_table
from pabench.reporting import degenerate
from pabench.reporting.degenerate import COLUMN as DEGENERATE
from pabench.reporting.plotting import plt, save_figure

METRICS = (("logpa_adam", "log PA (adam)"), ("logpa_exact", "log PA (exact)"), ("afr_true", "AFR_T"))


def fig7_data(table: pd.DataFrame) -> pd.DataFrame:
    """Mean, std and number of seeds per point, and how many of those seeds are degenerate."""
    long = table.melt(id_vars=["algorithm", "seed", "n_shift_factors", "shift_ratio", DEGENERATE],
                      value_vars=[m for m, _ in METRICS], var_name="metric")
    g = long.groupby(["metric", "shift_ratio", "algorithm", "n_shift_factors"])
    out = g["value"].agg(["mean", "std", "count"]).rename(columns={"count": "n_seeds"})
    out["n_degenerate"] = g[DEGENERATE].sum().astype(int)
    out = out.reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out


def fig7(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    table = read_table(inputs["table"])
    data = fig7_data(table)
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
    meta = degenerate.annotate(meta, table, ["algorithm", "seed"])
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


def fig8(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    """Confidence on env0 vs env k per algorithm (left) and the final adam beta at #SF = 5,
    SR = 1 (right); means over seeds."""
    from pabench.experiments.dg.compute import confidence, load_scores
    pa = read_table(inputs["pa"])
    rows = []
    for path in inputs["scores"]:
        run = paths.parse_dg_scores(path)
        algorithm, seed = run.algorithm, run.seed
        scores, _ = load_scores(path)
        envs = sorted(e for e in scores if "/" not in e)
        conf = confidence(scores, envs)
        for k, env in enumerate(envs[1:], start=1):
            for where, e in (("env0", "env0"), ("env k", env)):
                c = conf[conf.env == e].iloc[0]
                rows.append({"panel": "confidence", "algorithm": algorithm, "seed": int(seed),
                             "n_shift_factors": k, "data": where, "value": c.confidence,
                             "stderr": c.stderr})
    last = pa[(pa.shift_ratio == 1.0) & (pa.n_shift_factors == pa.n_shift_factors.max())]
    rows += [{"panel": "beta", "algorithm": r.algorithm, "seed": int(r.seed),
              "n_shift_factors": int(r.n_shift_factors), "data": "adam", "value": r.beta_adam,
              "stderr": 0.0} for r in last.itertuples()]
    data = (pd.DataFrame(rows).groupby(["panel", "algorithm", "n_shift_factors", "data"])
            .agg(value=("value", "mean"), stderr=("stderr", "mean"), n_seeds=("seed", "nunique"))
            .reset_index())
    algorithms = list(dict.fromkeys(pa.algorithm))
    fig, axes = plt.subplots(1, len(algorithms) + 1, figsize=(2.4 * (len(algorithms) + 1), 2.8),
                             gridspec_kw={"width_ratios": [2] * len(algorithms) + [1.2]})
    for ax, alg in zip(axes, algorithms):
        for shift, (where, colour) in enumerate((("env0", "C0"), ("env k", "C3"))):
            d = data[(data.panel == "confidence") & (data.algorithm == alg) & (data.data == where)]
            ax.bar(d.n_shift_factors + (shift - 0.5) * 0.38, d.value, width=0.38, yerr=d.stderr,
                   color=colour, alpha=0.8 if shift == 0 else 0.5, hatch=None if shift == 0 else "//",
                   label=where, capsize=2)
        ax.set(title=alg.upper(), xlabel="# shift factors", ylim=(0, 1.05))
    axes[0].set_ylabel("predictive confidence")
    axes[0].legend(loc="lower left")
    b = data[data.panel == "beta"]
    axes[-1].bar([a.upper() for a in b.algorithm], b.value, color=[f"C{i}" for i in range(len(b))])
    axes[-1].set(title="final beta (#SF = 5)")  # linear: a beta of 0 (no agreement) must show
    meta = degenerate.annotate(meta, pa, ["algorithm", "seed"])
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


def fig11(inputs: dict, outputs, meta: dict, algorithms, samples: int, device) -> pd.DataFrame:
    """First principal component of penultimate features of paired validation samples."""
    from pabench.datasets.splits import load_split
    from pabench.experiments.dg.compute import principal_component
    from pabench.training.loop import load_checkpoint, predict, resolve_device

    device = resolve_device(device)
    val = load_split(inputs["val"])
    env0, env1 = list(val.values())[:2]
    n = min(samples, len(env0))
    rows = []
    for path in inputs["stages"]:
        model, state = load_checkpoint(path, device)
        f0 = predict(model, env0.images[:n], device, features=True)
        f1 = predict(model, env1.images[:n], device, features=True)
        p0, p1 = principal_component(f0, f1)
        algorithm = paths.parse_checkpoint(path)[0].algorithm
        for env, pc in (("env0", p0), ("env1", p1)):
            rows += [{"algorithm": algorithm, "epoch": int(state["epoch"]), "env": env, "sample": i,
                      "label": int(env0.labels[i]), "pc1": float(pc[i])} for i in range(n)]
    data = pd.DataFrame(rows)
    epochs = sorted(data.epoch.unique())
    fig, axes = plt.subplots(len(algorithms), len(epochs), figsize=(2.4 * len(epochs), 1.6 * len(algorithms)),
                             sharex=True, squeeze=False)
    rng = np.random.default_rng(0)
    for r, alg in enumerate(algorithms):
        for c, epoch in enumerate(epochs):
            ax = axes[r, c]
            d = data[(data.algorithm == alg) & (data.epoch == epoch)]
            for row_y, (env, edge) in enumerate((("env0", "red"), ("env1", "blue"))):
                e = d[d.env == env]
                for k, label in enumerate(sorted(e.label.unique())):
                    sel = e[e.label == label]
                    ax.scatter(sel.pc1, row_y + rng.uniform(-0.15, 0.15, len(sel)), s=9,
                               c=f"C{k + 2}", edgecolors=edge, linewidths=0.5,
                               label=f"class {label}" if (r, c, row_y) == (0, 0, 0) else None)
            ax.set_yticks([0, 1], ["env0 (red)", "env1 (blue)"] if c == 0 else ["", ""])
            ax.set_title(f"{alg.upper()}, epoch {epoch}")
            if r == len(algorithms) - 1:
                ax.set_xlabel("PC 1 (scaled)")
    axes[0, 0].legend(loc="upper left", fontsize=6)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data
