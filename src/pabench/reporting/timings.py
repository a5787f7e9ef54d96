"""The run's timing: Snakemake's benchmark files (data/benchmarks/<rule>/<job>.tsv) per rule."""
from __future__ import annotations

import contextlib
import re
from pathlib import Path

import pandas as pd


def logged_peak(log: Path) -> float:
    """The peak memory (MiB) a job's log states (pabench.runtime.workflow.job), or 0."""
    from pabench.runtime.workflow import PEAK

    with contextlib.suppress(OSError):
        found = re.findall(rf"{PEAK} ([0-9.]+) MiB", log.read_text(errors="replace"))
        return float(found[-1]) if found else 0.0
    return 0.0


def summarise(directory) -> pd.DataFrame:
    """Jobs, wall-clock seconds (total, mean, max) and peak memory per rule, slowest first, and
    a total row.  Peak memory: the larger of the benchmark's max RSS and the one the job's log
    (data/logs/<rule>/<job>.log beside data/benchmarks/<rule>/<job>.tsv) states, which counts the
    job-server child that ran the job.  Unreadable benchmark files are skipped with their count
    in the total row."""
    rows, bad = [], 0
    for path in sorted(Path(directory).glob("*/*.tsv")):
        try:
            bench = pd.read_csv(path, sep="\t")
            rss = max(float(pd.to_numeric(bench["max_rss"], errors="coerce").max()),
                      logged_peak(Path(directory).parent / "logs" / path.parent.name / f"{path.stem}.log"))
            rows.append({"rule": path.parent.name, "s": float(bench["s"].mean()), "max_rss_mb": rss})
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
