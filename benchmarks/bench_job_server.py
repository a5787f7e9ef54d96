"""The job server's gain: the same Snakemake jobs with and without it, in one process.

    python benchmarks/bench_job_server.py [--repeats 2] [--cores 2] [--target figures/pa/fig3.pdf]

A scratch copy of the workflow (pabench.tools.campaign.prepare) builds `--target` at the test
scale from nothing, once with PABENCH_JOB_SERVER=0 (every job imports torch, pandas, ... itself: the
baseline) and once with the job server (pabench.runtime.jobserver), alternating, `--repeats` times.
Printed: the invocation's wall time and the sum of its jobs' wall times (Snakemake's benchmark
files, column `s`), medians over the repeats, and baseline / server.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from pabench.tools.campaign import prepare  # noqa: E402


def build(work: Path, target: str, cores: int, server: bool) -> tuple[float, float, int]:
    """(invocation seconds, sum of job seconds, jobs) of building `target` from nothing."""
    for name in ("data", "figures", ".snakemake"):
        shutil.rmtree(work / name, ignore_errors=True)
    exe = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    env = {**__import__("os").environ, "PABENCH_JOB_SERVER": "1" if server else "0"}
    start = time.perf_counter()
    proc = subprocess.run([exe, target, "--cores", str(cores), "--configfile",
                           "workflow/config/test.yaml"], cwd=work, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"snakemake failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    jobs = [float(p.read_text().splitlines()[-1].split("\t")[0])
            for p in (work / "data" / "benchmarks").glob("*/*.tsv")]
    return wall, sum(jobs), len(jobs)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--target", default="figures/pa/fig3.pdf")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="pabench-jobserver-")) / "w"
    prepare(REPO, work)
    runs: dict[bool, list[tuple[float, float, int]]] = {False: [], True: []}
    for _ in range(args.repeats):
        for server in (False, True):
            runs[server].append(build(work, args.target, args.cores, server))
    jobs = runs[True][0][2]
    print(f"{args.target} at the test scale from nothing: {jobs} jobs, --cores {args.cores}, "
          f"median of {args.repeats}")
    print(f"  {'':28s}{'own processes':>15s}{'job server':>12s}{'ratio':>8s}")
    for k, label in ((0, "invocation wall time (s)"), (1, "sum of job wall times (s)")):
        base, fast = (statistics.median(r[k] for r in runs[s]) for s in (False, True))
        print(f"  {label:28s}{base:15.1f}{fast:12.1f}{base / fast:7.2f}x")
    base, fast = (statistics.median(r[1] / r[2] for r in runs[s]) for s in (False, True))
    print(f"  {'mean job wall time (s)':28s}{base:15.2f}{fast:12.2f}{base / fast:7.2f}x")
    shutil.rmtree(work.parent, ignore_errors=True)


if __name__ == "__main__":
    main()
