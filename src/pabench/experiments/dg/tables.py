"""Table 1 of the PA paper: model selection by validation accuracy vs by PA (pandas only)."""
from __future__ import annotations

import pandas as pd

from pabench.core.io import read_table


def table1(inputs: dict, settings, tests) -> pd.DataFrame:
    """Table 1: per algorithm and co-occurrence setting, the test accuracy (%) of the epoch
    selected by validation accuracy and the difference PA-selected minus accuracy-selected, as
    mean over seeds with their spread (std)."""
    results = read_table(inputs["results"])
    results = results.assign(diff=results.acc_best_pa - results.acc_best_acc)
    rows = []
    for algorithm in dict.fromkeys(results.algorithm):
        for setting in settings:
            d = results[(results.algorithm == algorithm) & (results.setting == setting)]
            if d.empty:
                continue
            row = {"algorithm": algorithm.upper(), "setting": setting, "seeds": d.seed.nunique()}
            for k, env in enumerate(tests, start=1):
                e = d[d.env == env]
                row[f"Test {k} acc"] = f"{100 * e.acc_best_acc.mean():.1f}"
                row[f"Test {k} diff"] = f"{100 * e['diff'].mean():+.1f}"
                row[f"Test {k} std"] = f"{100 * e['diff'].std(ddof=0):.1f}"
            rows.append(row)
    return pd.DataFrame(rows)
