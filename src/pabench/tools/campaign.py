"""Kill campaign: a workflow killed with SIGKILL at a random moment and rerun with
`--rerun-incomplete` must end with exactly the outputs of an uninterrupted run.

    python -m pabench.tools.campaign --trials 10 [--targets figures/pa/fig3.pdf ...] [--json out.json]
    python -m pabench.tools.campaign --trials 3 --targets pa --configfile workflow/config/arxiv-v1.yaml

Each trial copies the workflow into a fresh directory, starts Snakemake in its own session, kills
the whole process tree (Snakemake and its jobs) after a random delay, unlocks, reruns to the end and
compares every output with the reference run: byte for byte where the bytes are the content (see
`digest` for the formats compared by content, and what measures the run itself).  W&B runs, logs, benchmark files and the
timing summary are left out (`NOT_COMPARED`).
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from pabench.tools.tolerances import is_timing

REPO = Path(__file__).resolve().parents[3]   # the checkout above src/pabench/tools/
WORKFLOW_FILES = ("Snakefile", "config.yaml", "workflow", "envs", "profiles")
# Not compared: W&B runs, logs and benchmark files are not results; the timing summary measures
# the run itself.
NOT_COMPARED = ("data/wandb", "data/logs", "data/benchmarks", "figures/timings.")
TEST = ("--configfile", "workflow/config/test.yaml")


def prepare(repo: Path, workdir: Path) -> Path:
    """A fresh copy of the workflow (no data) in workdir."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    for name in WORKFLOW_FILES:
        src = repo / name
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, workdir / name)
    return workdir


def snakemake_cmd(*args) -> list[str]:
    exe = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    return [exe, *args]


def run(workdir: Path, *args, timeout: float | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_cmd(*args), cwd=workdir, capture_output=True, text=True,
                          timeout=timeout)


def _feed(h, obj) -> None:
    """Hash a loaded checkpoint: tensors by dtype, shape and bytes, the rest by repr."""
    import torch

    if isinstance(obj, dict):
        for key in sorted(obj, key=str):
            h.update(f"{key!r}:".encode())
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _feed(h, item)
    elif isinstance(obj, torch.Tensor):
        h.update(f"{obj.dtype}|{tuple(obj.shape)}|".encode())
        h.update(obj.detach().cpu().reshape(-1).contiguous().view(torch.uint8).numpy().tobytes())
    else:
        h.update(repr(obj).encode())


# Formats written from the same table as the CSV beside them, in the same job
# (pabench.reporting.tables.write_table, the claims check).
RENDERINGS = (".md", ".html", ".tex")


def _untimed(path: Path):
    """A CSV without what measures the run (its timing columns, pabench.tools.tolerances.is_timing;
    a timed claim's measured text), as text; None when it holds none of that."""
    import pandas as pd

    with path.open(newline="") as f:
        header = next(csv.reader(f), [])
    claims = {"timed", "measured"} <= set(header)
    if not (claims or any(is_timing(c) for c in header)):
        return None
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    if claims:
        frame.loc[frame["timed"].str.lower() == "true", "measured"] = ""
    return frame.drop(columns=[c for c in frame if is_timing(c)]).to_csv()


def digest(path: Path) -> str:
    """Content digest: the bytes, except where the bytes carry more than the content: .npz
    archives (zip entries carry a write time) by array; PyTorch checkpoints (a random
    serialization id and the temporary file's name in the archive) by tensor; CSVs without what
    measures the run (`_untimed`), and their renderings beside them (RENDERINGS) as that CSV."""
    h = hashlib.sha256()
    csv_beside = path.with_suffix(".csv")
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            for name in sorted(data.files):
                arr = np.ascontiguousarray(data[name])
                h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
                h.update(arr.tobytes())
    elif path.suffix == ".pt":
        import torch
        _feed(h, torch.load(path, map_location="cpu", weights_only=True))
    elif path.suffix == ".csv" and (text := _untimed(path)) is not None:
        h.update(text.encode())
    elif path.suffix in RENDERINGS and csv_beside.is_file() and (text := _untimed(csv_beside)) is not None:
        h.update(f"{path.suffix} of ".encode() + text.encode())
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def snapshot(root: Path) -> dict[str, str]:
    """{relative path: digest} of every output under figures/ and data/."""
    out = {}
    for sub in ("figures", "data"):
        for path in sorted((root / sub).rglob("*")):
            rel = path.relative_to(root).as_posix()
            if path.is_file() and not rel.startswith(NOT_COMPARED) and path.name != "README.md":
                out[rel] = digest(path)
    return out


def compare(reference: dict, other: dict) -> dict:
    return {"missing": sorted(set(reference) - set(other)),
            "extra": sorted(set(other) - set(reference)),
            "differ": sorted(k for k in set(reference) & set(other) if reference[k] != other[k])}


FINISHED = "data/benchmarks/*/*.tsv"  # Snakemake writes a job's benchmark file when it ends
STARTED = "data/logs/{rule}/*.log"      # a job opens its log when it starts (runtime.workflow.job)


def _count(workdir: Path, pattern: str = FINISHED) -> int:
    return sum(1 for _ in workdir.glob(pattern))


def _jobs(workdir: Path, sub: str, suffix: str) -> set[str]:
    return {p.relative_to(workdir / sub).with_suffix("").as_posix()
            for p in (workdir / sub).glob(f"*/*{suffix}")}


def running(workdir: Path) -> list[str]:
    """Jobs started and not finished ("<rule>/<name>"): with a log (STARTED), no benchmark
    file (FINISHED)."""
    return sorted(_jobs(workdir, "data/logs", ".log") - _jobs(workdir, "data/benchmarks", ".tsv"))


def _files(workdir: Path) -> list[str]:
    return sorted(p.relative_to(workdir).as_posix() for sub in ("figures", "data")
                  for p in (workdir / sub).rglob("*") if p.is_file())


def kill_trial(repo: Path, workdir: Path, targets, kill_after: float | None = None,
               after_jobs: int | None = None, after: str = FINISHED, cores: int = 2,
               config: tuple = TEST) -> dict:
    """Start the workflow and SIGKILL its whole process tree after kill_after seconds (or
    kill_after seconds after `after_jobs` files match the glob `after`, relative to workdir:
    by default jobs finished; STARTED.format(rule=...): jobs of a rule started), then unlock and
    rerun to the end. `at_kill`: every file under figures/ and data/ at the kill;
    `running_at_kill`: the jobs it interrupted."""
    prepare(repo, workdir)
    args = ["--cores", str(cores), *targets, *config]
    proc = subprocess.Popen(snakemake_cmd(*args), cwd=workdir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.monotonic()
    while proc.poll() is None and after_jobs is not None and _count(workdir, after) < after_jobs:
        time.sleep(0.1)
    try:
        proc.wait(timeout=kill_after or 0)
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # Snakemake and every job it started
        killed = True
    at_kill, interrupted = _files(workdir), running(workdir)
    proc.wait()
    killed_at, done_before = time.monotonic() - t0, _count(workdir)
    unlock = run(workdir, "--unlock", *config)
    t1 = time.monotonic()
    rerun = run(workdir, *args, "--rerun-incomplete")
    return {"killed": killed, "killed_at_s": round(killed_at, 1), "jobs_done_before_kill": done_before,
            "running_at_kill": interrupted if killed else [], "at_kill": at_kill,
            "unlock_rc": unlock.returncode, "rerun_rc": rerun.returncode,
            "rerun_s": round(time.monotonic() - t1, 1),
            "rerun_tail": (rerun.stdout + rerun.stderr)[-2000:] if rerun.returncode else ""}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0, help="seed of the kill times")
    parser.add_argument("--targets", nargs="*", default=[], help="default: the whole workflow")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/pabench-campaign"))
    parser.add_argument("--configfile", nargs="*", default=[], metavar="OVERLAY",
                        help="configuration overlays on top of the test scale, e.g. "
                             "workflow/config/arxiv-v1.yaml")
    parser.add_argument("--no-second-run", action="store_true",
                        help="skip the second clean run (the determinism check)")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--json", type=Path, help="write the summary here")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    config = (*TEST, *args.configfile)
    summary: dict = {"targets": args.targets or ["(all)"], "config": config[1:], "trials": []}

    def clean_run(name):
        work = prepare(REPO, args.workdir / name)
        t0 = time.monotonic()
        proc = run(work, "--cores", str(args.cores), *args.targets, *config)
        if proc.returncode:
            sys.exit(f"{name} run failed:\n{proc.stderr[-3000:]}")
        return work, time.monotonic() - t0

    ref_dir, ref_s = clean_run("reference")
    reference = snapshot(ref_dir)
    summary.update(reference_s=round(ref_s, 1), outputs=len(reference))
    print(f"reference run: {ref_s:.0f} s, {len(reference)} outputs", flush=True)
    if not args.no_second_run:
        second_dir, _ = clean_run("second")
        summary["second_clean_run"] = compare(reference, snapshot(second_dir))
        print(f"second clean run: {summary['second_clean_run']}", flush=True)
    for k in range(args.trials):
        work = args.workdir / f"trial{k}"
        trial = kill_trial(REPO, work, args.targets, kill_after=rng.uniform(2.0, 0.9 * ref_s),
                           cores=args.cores, config=config)
        trial.update(compare(reference, snapshot(work)), files_at_kill=len(trial.pop("at_kill")))
        summary["trials"].append(trial)
        ok = trial["rerun_rc"] == 0 and not (trial["missing"] or trial["extra"] or trial["differ"])
        when = (f"killed at {trial['killed_at_s']} s after {trial['jobs_done_before_kill']} jobs, "
                f"{len(trial['running_at_kill'])} running" if trial["killed"] else "finished before the kill")
        print(f"trial {k}: {when}, rerun {trial['rerun_s']} s, "
              f"{'identical' if ok else 'DIFFERENT: ' + json.dumps(trial)}", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    bad = [t for t in summary["trials"] if t["rerun_rc"] or t["missing"] or t["extra"] or t["differ"]]
    second = summary.get("second_clean_run", {})
    return 1 if bad or any(second.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
