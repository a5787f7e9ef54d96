"""Figure 10 of the PA paper (Appendix C, "PA is not accuracy"): PA and accuracy of the sentiment
classifier against the shift power W, one column per shift strategy."""
from __future__ import annotations

import pandas as pd

from pabench.core.io import read_table
from pabench.reporting import degenerate
from pabench.reporting.plotting import plt, save_figure

LABELS = {"levenshtein": "Levenshtein", "amplification": "Amplification",
          "contradiction": "Contradiction"}
PLOTTED = ("model", "strategy", "power", "replacements", "mean_replacements_made", "capped", "n",
           "logpa_adam", "logpa_exact", "beta_adam", "afr_true", "afr_pred", "clean_accuracy", degenerate.COLUMN)


def fig10(inputs: dict, outputs, meta: dict, strategies) -> pd.DataFrame:
    """Top row: log PA (adam, solid; exact, dashed) against W; bottom row: accuracy on the
    shifted reviews (AFR_T) against W, the clean accuracy dotted.  One column per strategy."""
    table = read_table(inputs["table"])
    data = table[table.strategy.isin(strategies)]
    missing = [s for s in strategies if s not in set(data.strategy)]
    if missing:
        raise ValueError(f"{inputs['table']}: no rows for strategies {missing}")
    data = pd.concat([data[data.strategy == s].sort_values("power") for s in strategies],
                     ignore_index=True)[list(PLOTTED)]
    fig, axes = plt.subplots(2, len(strategies), figsize=(3.0 * len(strategies) + 0.6, 5.0),
                             squeeze=False, sharex=True, sharey="row")
    for c, strategy in enumerate(strategies):
        d = data[data.strategy == strategy]
        top, bottom = axes[0, c], axes[1, c]
        top.plot(d.power, d.logpa_adam, marker="o", color="C0", label="adam")
        top.plot(d.power, d.logpa_exact, marker=".", ls="--", color="C0", alpha=0.6, label="exact")
        top.set_title(LABELS.get(strategy, strategy))
        bottom.plot(d.power, d.afr_true, marker="o", color="C1", label="shifted")
        bottom.axhline(float(d.clean_accuracy.iloc[0]), ls=":", color="0.4", label="clean")
        bottom.set_xlabel("shift power W (2^W replacements)")
        bottom.set_xticks(sorted(d.power.unique()))
    axes[0, 0].set_ylabel("log PA")
    axes[1, 0].set_ylabel("accuracy")
    axes[0, 0].legend(fontsize=7)
    axes[1, 0].legend(fontsize=7)
    fig.tight_layout()
    meta = degenerate.annotate(meta, data, ["model"])
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data
