"""The run's timing: Snakemake's benchmark files (data/benchmarks/<rule>/<job>.tsv) per rule."""
from __future__ import annotations

from pathlib import Path

import pandas as pd


def summarise(directory) -> pd.DataFrame:
    """Jobs, wall-clock seconds (total, mean, max) and peak memory per rule, slowest first, and
    a total row.  Unreadable benchmark files are skipped with their count in the total row."""
    rows, bad = [], 0
    for path in sorted(Path(directory).glob("*/*.tsv")):
        try:
            bench = pd.read_csv(path, sep="\t")
            rows.append({"rule": path.parent.name, "s": float(bench["s"].mean()),
                         "max_rss_mb": float(pd.to_numeric(bench["max_rss"], errors="coerce").max())})
        except (OSError, ValueError, KeyError, pd.errors.ParserError):
            bad += 1
    if not rows:
        raise FileNotFoundError(f"{directory}: no benchmark files (run the workflow first)")
    jobs = pd.DataFrame(rows)
    table = (jobs.groupby("rule")
             .agg(jobs=("s", "size"), total_s=("s", "sum"), mean_s=("s", "mean"), max_s=("s", "max"),
                  max_rss_mb=("max_rss_mb", "max"))
             .sort_values("total_s", ascending=False).reset_index())
    table["share"] = table.total_s / table.total_s.sum()
    total = {"rule": "total", "jobs": int(table.jobs.sum()), "total_s": table.total_s.sum(),
             "mean_s": jobs.s.mean(), "max_s": jobs.s.max(), "max_rss_mb": jobs.max_rss_mb.max(),
             "share": 1.0}
    table = pd.concat([table, pd.DataFrame([total])], ignore_index=True)
    table["unreadable_files"] = [0] * (len(table) - 1) + [bad]
    return table.round({"total_s": 2, "mean_s": 2, "max_s": 2, "max_rss_mb": 1, "share": 4})
