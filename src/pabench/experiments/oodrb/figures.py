"""Figures of the OODRobustBench reproduction (so far: the corruption sample grid)."""
from __future__ import annotations

import numpy as np
import pandas as pd



def corruption_grid(images: np.ndarray, path, names=None, seed: int = 0,
                    per_row: int = 2) -> pd.DataFrame:
    """One row per corruption: `per_row` images, each at severities 1..5 after its clean original.
    Written as a PNG (nearest-neighbour upscaled, no interpolation blur); returns the mean absolute
    change per corruption and severity (the CSV beside the figure)."""
    import matplotlib.pyplot as plt

    from pabench.datasets.corruptions import ALL_CORRUPTIONS, SEVERITIES, corrupt  # imports torch

    names = ALL_CORRUPTIONS if names is None else names
    picks = images[:per_row]
    cols = per_row * (1 + len(SEVERITIES))
    fig, axes = plt.subplots(len(names), cols, figsize=(cols * 0.75, len(names) * 0.8))
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
    for i in range(per_row):
        axes[0, i * (1 + len(SEVERITIES))].set_title("clean", fontsize=7)
        for s in SEVERITIES:
            axes[0, i * (1 + len(SEVERITIES)) + s].set_title(f"s{s}", fontsize=7)
    fig.subplots_adjust(wspace=0.05, hspace=0.05, left=0.16, right=0.99, top=0.97, bottom=0.01)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return pd.DataFrame(rows)
