"""Adversarial figures of the PA paper: PA and AFR_T against the adversarial ratio per eps
(Figures 3, 5, 14-18) and predictive-confidence distributions with the final betas (Figures 4,
6 and 9)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.attacks.records import confidence_groups, load_record
from pabench.core import paths
from pabench.core.io import read_table
from pabench.core.paths import Eps
from pabench.reporting import degenerate
from pabench.reporting.plotting import plt, save_figure

AR_METRICS = (("logpa_adam", "log PA (adam)"), ("afr_true", "AFR_T"))


def score_table(paths_) -> pd.DataFrame:
    """The adv_score tables stacked."""
    return pd.concat([read_table(p) for p in paths_], ignore_index=True)


def _over_seeds(data: pd.DataFrame) -> pd.DataFrame:
    """Per model, attack, eps and AR: the mean over the zoo's seeds (a pretrained model has one
    row), the standard deviation of the plotted metrics, the seeds and how many are degenerate."""
    keys = ["model", "attack", "eps", "eps_value", "ar"]
    values = ["logpa_adam", "logpa_exact", "beta_adam", "afr_true", "afr_pred", "max_linf"]
    g = data.assign(seed=data.seed.fillna(-1)).groupby(keys, dropna=False, sort=False)
    out = g[values].mean()
    for metric, _ in AR_METRICS:
        out[f"{metric}_std"] = g[metric].std(ddof=0)
    out["n_seeds"] = g.seed.nunique()
    out["n_degenerate"] = g[degenerate.COLUMN].sum().astype(int)
    return out.reset_index()


def ar_figure(inputs: dict, outputs, meta: dict, attack: str, models,
              main_ar_max: float | None = None) -> pd.DataFrame:
    """One row per eps: log PA (adam; exact dashed) and AFR_T against AR, a line per model (the
    mean over the zoo's seeds, shaded +- their standard deviation).  With main_ar_max (FMN), the
    main panels stop at that AR and an extra row shows all ARs."""
    table = score_table(inputs["tables"])
    runs = table[(table.attack == attack) & table.model.isin(models)]
    if runs.empty:
        raise ValueError(f"no results for attack {attack!r} and models {list(models)}")
    data = _over_seeds(runs)
    eps_tags = list(dict.fromkeys(data.sort_values("eps_value", na_position="last").eps))
    rows = [(e, main_ar_max) for e in eps_tags]
    if main_ar_max is not None:
        rows += [(e, None) for e in eps_tags]
    fig, axes = plt.subplots(len(rows), 2, figsize=(7.5, 2.4 * len(rows) + 0.4), squeeze=False)
    for r, (eps, ar_max) in enumerate(rows):
        d = data[data.eps == eps]
        if ar_max is not None:
            d = d[d.ar <= ar_max + 1e-9]
        for c, (metric, label) in enumerate(AR_METRICS):
            ax = axes[r, c]
            for k, model in enumerate(models):
                m = d[d.model == model].sort_values("ar")
                line, = ax.plot(m.ar, m[metric], marker="o", ms=3, label=model)
                ax.fill_between(m.ar, m[metric] - m[f"{metric}_std"], m[metric] + m[f"{metric}_std"],
                                color=line.get_color(), alpha=0.2, lw=0)
                if metric == "logpa_adam":
                    ax.plot(m.ar, m.logpa_exact, ls="--", lw=0.8, color=line.get_color())
            ax.set_ylabel(label)
            span = "all ARs" if ar_max is None and main_ar_max is not None else Eps(eps).label
            ax.set_title(f"{attack.upper()}, {span}", fontsize=8)
            if r == len(rows) - 1:
                ax.set_xlabel("adversarial ratio AR")
    axes[0, 0].legend(fontsize=6, loc="lower left")
    axes[0, 0].text(0.99, 0.98, "dashed: exact solver", transform=axes[0, 0].transAxes,
                    fontsize=6, ha="right", va="top", color="0.3")
    fig.tight_layout()
    out = data.sort_values(["eps_value", "model", "ar"], na_position="last").reset_index(drop=True)
    meta = degenerate.annotate(meta, runs, ["model", "seed"])
    save_figure(fig, *outputs, out, meta.pop("caption"), meta)
    return out


def _mean_se(values: np.ndarray) -> tuple[float, float]:
    if len(values) == 0:
        return float("nan"), float("nan")
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else 0.0
    return float(values.mean()), float(se)


def confidence_figure(inputs: dict, outputs, meta: dict, panels, models) -> pd.DataFrame:
    """Per panel (attack, eps, AR): for every model, the distribution of the predictive
    confidence of samples predicted correctly before the attack (plain) and of the successfully
    attacked ones (hatched), mean +- standard error; below, the final adam beta per model.
    panels: [(attack, Eps, AR)]; inputs: the attack records and the adv_score tables of one
    run per model (the zoo's first seed)."""
    records = {}
    for path in inputs["records"]:
        run = paths.parse_attack_record(path)
        records[(run.model, run.attack, run.eps)] = path
    table = score_table(inputs["tables"])
    bins = np.linspace(0, 1, 21)
    rows = []
    fig, axes = plt.subplots(len(panels) + 1, len(models), figsize=(max(2.1 * len(models), 4.5),
                             2.4 * (len(panels) + 1)), squeeze=False)
    for p, (attack, eps, ratio) in enumerate(panels):
        for c, model in enumerate(models):
            record = load_record(records[(model, attack, eps)],
                                 ("clean_scores", "adv_scores", "linf", "labels", "success"))
            groups = confidence_groups(record, ratio)
            ax = axes[p, c]
            for g, (name, hatch) in enumerate((("clean_correct", None), ("attacked", "////"))):
                values = groups[name]
                weights = np.full(len(values), 1 / max(len(values), 1))
                ax.hist(values, bins=bins, weights=weights, alpha=0.55, hatch=hatch,
                        color=f"C{c}", edgecolor="k" if hatch else None, lw=0.3,
                        label="correct before" if g == 0 else "attacked")
                mean, se = _mean_se(values)
                ax.errorbar([mean], [0.9 - 0.08 * g], xerr=[se], fmt="|" if g else "o", color="k",
                            ms=4, capsize=2, transform=ax.get_xaxis_transform())
                rows.append({"panel": f"{attack} {eps} AR={ratio:g}", "attack": attack, "eps": eps.tag,
                             "ar": ratio, "model": model, "group": name, "n": len(values),
                             "mean_confidence": mean, "stderr": se,
                             **{f"bin_{b:.2f}": float(v) for b, v in
                                zip(bins[:-1], np.histogram(values, bins)[0] / max(len(values), 1))}})
            ax.set_title(f"{model}: {attack.upper()}, AR = {ratio:g}", fontsize=7)
            if c == 0:
                ax.set_ylabel("fraction")
            ax.set_xlabel("confidence")
    axes[0, 0].legend(fontsize=5)
    # Final betas of the first panel's setting, one bar per model.
    attack, eps, ratio = panels[0]
    sel = table[(table.attack == attack) & (table.eps == eps.tag) & np.isclose(table.ar, ratio)]
    betas = [float(sel[sel.model == m].beta_adam.iloc[0]) if (sel.model == m).any() else np.nan
             for m in models]
    gs = axes[-1, 0].get_gridspec()
    for ax in axes[-1]:
        ax.remove()
    bax = fig.add_subplot(gs[-1, :])
    bax.bar(range(len(models)), betas, color=[f"C{c}" for c in range(len(models))])
    bax.set_xticks(range(len(models)), models, fontsize=7)
    bax.set_ylabel(f"beta (adam)\n{attack.upper()} AR={ratio:g}")
    for m, b in zip(models, betas):
        rows.append({"panel": "beta", "attack": attack, "eps": eps.tag, "ar": ratio, "model": m,
                     "group": "beta_adam", "mean_confidence": np.nan, "beta_adam": b})
    fig.tight_layout()
    data = pd.DataFrame(rows)
    meta = degenerate.annotate(meta, table[table.model.isin(models)], ["model", "seed"])
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data
