"""The model table of an adversarial experiment (models_<dataset>): source, training method,
architecture and clean accuracy on the attacked test images (pandas only)."""
from __future__ import annotations

import pandas as pd

from pabench.core import paths
from pabench.core.io import read_table
from pabench.reporting import degenerate

UNTRAINED_METHODS = ("undefended", "jpeg_rs")  # zoo models trained without adversarial examples


def models(inputs: dict, models: list, zoo: dict) -> pd.DataFrame:
    """One row per model run (a zoo model once per training seed); inputs: the experiment's tidy
    table and the zoo training histories."""
    table = read_table(inputs["table"])
    histories = {paths.parse_zoo_history(p): read_table(p) for p in inputs["histories"]}
    rows = []
    for model in models:
        seeds = [s for m, s in histories if m == model] or [None]
        for seed in seeds:
            hist = histories.get((model, seed))
            trained = hist is not None
            adversarial = trained and model not in UNTRAINED_METHODS
            runs = table[(table.model == model)
                         & (table.seed.isna() if seed is None else table.seed == seed)]
            rows.append({"model": model, "seed": "" if seed is None else int(seed),
                         "source": "self-trained" if trained else "RobustBench",
                         "method": model if trained else "(RobustBench)",
                         "architecture": hist.arch.iloc[0] if trained else "(RobustBench)",
                         "train epochs": int(hist.epoch.max()) if trained else "",
                         "train eps": str(zoo["eps"]) if adversarial else "",
                         "clean accuracy": round(float(runs.clean_accuracy.iloc[0]), 4),
                         "n": int(runs.n.iloc[0]), degenerate.COLUMN: bool(runs[degenerate.COLUMN].any())})
    return pd.DataFrame(rows)
