"""The model table of an adversarial experiment (models-<dataset>): source, training method,
architecture and clean accuracy on the attacked test images (pandas only)."""
from __future__ import annotations

import pandas as pd

from pabench.core import paths
from pabench.core.io import read_table

UNTRAINED_METHODS = ("undefended", "jpeg_rs")  # zoo models trained without adversarial examples


def models(inputs: dict, models: list, zoo: dict) -> pd.DataFrame:
    """One row per model; inputs: the experiment's tidy table and the zoo training histories."""
    table = read_table(inputs["table"])
    histories = {paths.parse_zoo_history(p): read_table(p) for p in inputs["histories"]}
    rows = []
    for model in models:
        hist = histories.get(model)
        trained = hist is not None
        adversarial = trained and model not in UNTRAINED_METHODS
        rows.append({"model": model, "source": "self-trained" if trained else "RobustBench",
                     "method": model if trained else "(RobustBench)",
                     "architecture": hist.arch.iloc[0] if trained else "(RobustBench)",
                     "train epochs": int(hist.epoch.max()) if trained else "",
                     "train eps": str(zoo["eps"]) if adversarial else "",
                     "clean accuracy": round(float(table[table.model == model].clean_accuracy.iloc[0]), 4),
                     "n": int(table[table.model == model].n.iloc[0])})
    return pd.DataFrame(rows)
