"""Figures 1 and 2 of the PA paper: the Bernoulli classifiers and the PA illustration."""
from __future__ import annotations

import math

import pandas as pd

from pabench.core.io import read_table
from pabench.reporting.plotting import plt, save_figure

SOLVER_STYLE = {"exact": "-", "adam": "--"}


def fig1_data(table: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over seeds of accuracy and PA (normalised), per p."""
    acc = (table[table.solver == table.solver.iloc[0]]
           .groupby(["classifier", "p"])["accuracy"].agg(["mean", "std", "count"]).reset_index())
    acc.insert(0, "panel", "accuracy")
    acc.insert(2, "solver", "")
    pa = table.groupby(["classifier", "solver", "p"])["pa"].agg(["mean", "std", "count"]).reset_index()
    pa.insert(0, "panel", "pa")
    out = pd.concat([acc, pa], ignore_index=True).rename(columns={"count": "n_seeds"})
    out["std"] = out["std"].fillna(0.0)
    return out[["panel", "classifier", "solver", "p", "mean", "std", "n_seeds"]]


def fig1(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    table = read_table(inputs["table"])
    data = fig1_data(table)
    fig, (ax_acc, ax_pa) = plt.subplots(1, 2, sharex=True)
    classifiers = list(dict.fromkeys(table.classifier))  # in the order the table was computed
    colours = dict(zip(classifiers, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for name in classifiers:
        d = data[(data.panel == "accuracy") & (data.classifier == name)]
        ax_acc.plot(d.p, d["mean"], color=colours[name], label=name)
        ax_acc.fill_between(d.p, d["mean"] - d["std"], d["mean"] + d["std"], color=colours[name], alpha=0.2)
        for solver, ls in SOLVER_STYLE.items():
            d = data[(data.panel == "pa") & (data.classifier == name) & (data.solver == solver)]
            if len(d):
                ax_pa.plot(d.p, d["mean"], ls, color=colours[name], label=f"{name} ({solver})")
                ax_pa.fill_between(d.p, d["mean"] - d["std"], d["mean"] + d["std"],
                                   color=colours[name], alpha=0.15)
    ax_acc.set(xlabel="p = P(Y = 1)", ylabel="accuracy", title="Accuracy", ylim=(-0.02, 1.02))
    ax_pa.axhline(math.log(2), color="0.5", lw=0.8, ls=":")
    ax_pa.set(xlabel="p = P(Y = 1)", ylabel="PA (normalised, nats)", title="Posterior agreement",
              ylim=(-0.02, math.log(2) + 0.03))
    ax_acc.legend(loc="lower left")
    ax_pa.legend(loc="lower left", ncol=1)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


def fig2_data(result: dict) -> pd.DataFrame:
    rows = []
    for name, beta in result["betas"].items():
        p1, p2 = result["posteriors"][name]
        for series, post in (("p(c|X')", p1), ("p(c|X'')", p2)):
            rows.append(pd.DataFrame({"panel": name, "series": series, "beta": beta,
                                      "x": result["grid"], "y": post}))
    rows.append(pd.DataFrame({"panel": "curve", "series": "PA", "beta": result["curve_beta"],
                              "x": result["curve_beta"], "y": result["curve_pa"]}))
    rows.append(pd.DataFrame({"panel": "curve", "series": list(result["betas"]),
                              "beta": list(result["betas"].values()),
                              "x": list(result["betas"].values()),
                              "y": [result["pa_at"][k] for k in result["betas"]]}))
    return pd.concat(rows, ignore_index=True)


def fig2(inputs: dict, outputs, meta: dict) -> None:
    data = read_table(inputs["table"])
    fig = plt.figure(figsize=(7.0, 4.6))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 1.1], hspace=0.45)
    names = ["too low", "optimal", "too high"]
    for i, name in enumerate(names):
        ax = fig.add_subplot(grid[0, i])
        d = data[data.panel == name]
        for series, colour in (("p(c|X')", "C0"), ("p(c|X'')", "C1")):
            s = d[d.series == series]
            ax.plot(s.x, s.y, color=colour, label=series)
            ax.fill_between(s.x, 0, s.y, color=colour, alpha=0.2)
        ax.set(title=f"beta {name} ({d.beta.iloc[0]:.3g})", xlabel="c", yticks=[])
        if i == 0:
            ax.legend(loc="upper left")
    ax = fig.add_subplot(grid[1, :])
    curve = data[(data.panel == "curve") & (data.series == "PA")]
    ax.plot(curve.x, curve.y, color="k")
    for name, marker in zip(names, "o*s"):
        pt = data[(data.panel == "curve") & (data.series == name)]
        ax.plot(pt.x, pt.y, marker, ms=8, label=name)
    ax.set(xscale="log", xlabel="inverse temperature beta", ylabel="PA (normalised, nats)")
    ax.legend(loc="lower center")
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)


def gaussian_table(result: dict) -> pd.DataFrame:
    """The computed illustration as one tidy table (input of the figure rule)."""
    data = fig2_data(result)
    data["beta_star"] = result["beta_star"]
    data["pa_star"] = result["pa_star"]
    return data
