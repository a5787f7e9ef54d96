"""The bridge between a Snakemake `script:` and the package: logging and one W&B run per job.

    with job(snakemake) as run:     # in workflow/scripts/<rule>.py
        ...compute, write outputs atomically...
        run.log({...}); run.log_table("table", frame)

On success the job's outputs are logged to W&B as an artifact; on failure the run is marked
failed and the exception propagates, so Snakemake removes the outputs.  The run is kept by the
W&B run server of the Snakemake process where one can be used (`tracking.open_run`), so that the
job's process never imports wandb; this module imports nothing heavy either (no torch, pandas,
matplotlib): a job pays only for what its own script imports.
"""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path

from .tracking import open_run

log = logging.getLogger("pabench")


def setup_logging(logfile=None) -> None:
    """Log to stderr and, when given, to the job's log file."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if logfile:
        Path(logfile).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(logfile, mode="w"))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s",
                        handlers=handlers, force=True)


def _plain(value):
    """Snakemake params as plain JSON-able values for the W&B config."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def run_name(rule: str, wildcards: dict) -> str:
    return "-".join([rule, *(f"{k}={v}" for k, v in wildcards.items())])


@contextmanager
def job(smk, experiment: str | None = None):
    """Set up logging and a W&B run for the Snakemake job `smk` (the `snakemake` object)."""
    setup_logging(smk.log[0] if len(smk.log) else None)
    params = {k: _plain(v) for k, v in smk.params.items()}
    wildcards = {k: str(v) for k, v in smk.wildcards.items()}
    group = experiment or params.get("experiment") or smk.rule
    wb = smk.config.get("wandb", {})
    inputs = [str(p) for p in smk.input]
    tracker = open_run(mode=wb.get("mode", "offline"), project=wb.get("project", "pabench"),
                       entity=wb.get("entity"), directory=wb.get("dir", "data/wandb"),
                       group=group, job_type=smk.rule, name=run_name(smk.rule, wildcards),
                       config={**params, **wildcards, "scale": smk.config.get("scale"),
                               "inputs": inputs},
                       tags=[str(smk.config.get("scale"))])
    for path in inputs:  # lineage (online only): the artifacts a producing job logged
        tracker.use_artifact(path, artifact_type(path), [path])
    log.info("job %s (%s) started", run_name(smk.rule, wildcards), group)
    try:
        yield tracker
    except BaseException:
        log.exception("job %s failed", smk.rule)
        tracker.finish(exit_code=1)
        raise
    for path in smk.output:  # one artifact per output file, named by its path
        tracker.log_artifact(str(path), artifact_type(str(path)), [path])
    tracker.finish()
    log.info("job %s done (%s %.1f MiB)", smk.rule, PEAK, peak_rss_mib())


PEAK = "peak memory"  # how a job's log states its peak memory (read by reporting.timings)


def peak_rss_mib() -> float:
    """The job's peak resident memory (its process or a child's, whichever is larger): Snakemake's
    benchmark measures the process it started, which under the job server only waits."""
    import resource

    return max(resource.getrusage(who).ru_maxrss for who in
               (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) / 1024


def artifact_type(path: str) -> str:
    """W&B artifact type of a workflow file, by where it lives."""
    for prefix, kind in (("figures/", "figure"), ("data/results/", "result"),
                         ("data/models/", "model"), ("data/adversarial/", "dataset"),
                         ("data/diagvib/", "dataset"), ("data/mnist/", "dataset")):
        if path.startswith(prefix):
            return "model" if path.endswith(".pt") else kind
    return "file"
