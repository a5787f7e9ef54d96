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
KEYS = ("mem_mb", "runtime", "gpu")


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
