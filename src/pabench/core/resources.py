"""What each rule asks a scheduler for (threads aside): memory, wall time and GPUs.

The numbers live in `workflow/resources.yaml`, one section per scale (the test scale uses the
quick one), one entry per rule: `mem_mb` and `runtime` (minutes) from the peaks measured in a
run of that scale (figures/timings.csv has max RSS and seconds per rule), with headroom; `gpu`
where the rule can use one.  Snakemake hands them to the executor (SLURM: --mem, --time, GPUs).
"""
from __future__ import annotations

import functools
from pathlib import Path

import yaml

TABLE = Path("workflow/resources.yaml")  # relative to the workflow directory, as Snakemake runs


@functools.lru_cache(maxsize=2)
def _table(path: str) -> dict:
    with open(path) as fh:
        return yaml.safe_load(fh)


def of(config: dict, rule: str, default: str | None = None, table=None) -> dict:
    """The resources of `rule` at the config's scale (or of the `default` entry, e.g. "figure",
    for rules that share one)."""
    scales = _table(str(table or TABLE))
    scale = "quick" if config["scale"] == "test" else config["scale"]
    section = scales[scale]
    entry = section.get(rule) if rule in section else section.get(default) if default else None
    if entry is None:
        raise KeyError(f"{table or TABLE}: no resources for rule {rule!r} at the {scale} scale")
    return {"mem_mb": int(entry["mem_mb"]), "runtime": int(entry["runtime"]),
            **({"gpu": int(entry["gpu"])} if entry.get("gpu") else {})}


def from_timings(timings, headroom: float = 1.5, min_mb: int = 512, min_minutes: int = 5) -> dict:
    """A resources section measured by a run: per rule, its peak memory (max RSS) and its longest
    job's wall time, times `headroom`, rounded up (memory to 256 MB, time to whole minutes); and
    the `figure` and `table` entries, for papers' rules not measured yet, as the largest of their
    kind."""
    import math

    import pandas as pd

    table = pd.read_csv(timings)
    table = table[table.rule != "total"]
    out: dict = {}
    for r in table.itertuples():
        mem = max(min_mb, 256 * math.ceil(r.max_rss_mb * headroom / 256))
        minutes = max(min_minutes, math.ceil(r.max_s * headroom / 60))
        out[r.rule] = {"mem_mb": mem, "runtime": minutes}
    from pabench.papers import PAPERS

    kinds = {e.rule: e.kind for paper in PAPERS.values() for e in paper.entries}
    for kind in ("figure", "table"):
        measured = [v for rule, v in out.items() if kinds.get(rule) == kind]
        if measured:
            out[kind] = {k: max(v[k] for v in measured) for k in ("mem_mb", "runtime")}
    return out


if __name__ == "__main__":  # python -m pabench.core.resources figures/timings.csv
    import sys

    print(yaml.safe_dump(from_timings(sys.argv[1]), default_flow_style=None, sort_keys=True), end="")
