"""Per-job overhead: the wall time of the cheapest jobs, W&B run included, as Snakemake runs them.

    python benchmarks/bench_job_overhead.py [--repeats 5] [--baseline-tree DIR] [--json out.json]

Two parts, for the tree under test (`--tree`, default this checkout) and, when given, a baseline
tree measured in the same run and interleaved with it (e.g. the last commit:
`mkdir /tmp/base && git archive HEAD | tar -x -C /tmp/base`):

1. Snakemake.  The workflow files are copied into a temporary directory with three extra rules
   appended to its Snakefile (`bench_noop`: a `script:` that only writes its output, Snakemake's
   floor; `bench_job`: the same inside `pabench.runtime.workflow.job`, i.e. one W&B offline run;
   `bench_warmup`: like `bench_job`, scheduled first) and the jobs are timed by Snakemake's own
   `benchmark:` file (column `s`, the job's wall time).  The real cheapest rule is the one that
   writes `figures/pa/table3.md` (it needs no inputs; its benchmark file is found by globbing
   `data/benchmarks/**/*table3*.tsv`, so a renamed rule is still found).  Outputs are deleted
   before each repetition instead of `--forcerun`, which needs rule names.
     cold: `table3` is the only job of its Snakemake invocation (`snakemake figures/pa/table3.md`).
     warm: the same after another W&B job of the same invocation (as in a whole workflow run).
   A separate, untimed run records which of torch / pandas / matplotlib / wandb each job imported
   (a `sitecustomize` on PYTHONPATH writes the job's `sys.modules` at exit).
2. Breakdown.  A fresh Python process does what a job's process does, timing each step:
   interpreter start, Snakemake's script preamble imports, `import pabench.runtime.workflow`, entering
   `job()` (the W&B run starts), logging, leaving `job()` (artifacts, finish) and interpreter exit;
   "in-process" logs W&B in the job's process (PABENCH_WANDB_SERVER=0, or a tree without a run
   server), "server cold/warm" through the W&B run server (started by the first of those
   processes, owned by this benchmark process).  Then the parts of an in-process W&B run alone:
   `import wandb`, `wandb.init` (offline), log, finish.

The medians are printed; with a baseline, also tree / baseline.
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ("Snakefile", "config.yaml", "workflow", "envs", "profiles")
TEST = ("--configfile", "workflow/config/test.yaml")
TABLE3 = "figures/pa/table3.md"
WATCHED = ("torch", "pandas", "matplotlib", "wandb")

BENCH_RULES = '''

# ---- appended by benchmarks/bench_job_overhead.py (a copy of the workflow only)
rule bench_warmup:
    output: "bench/warmup.txt"
    priority: 100
    log: "data/logs/bench/warmup.log"
    benchmark: "data/benchmarks/bench_overhead/warmup.tsv"
    script: "bench_scripts/bench_job.py"


rule bench_noop:
    output: "bench/noop.txt"
    benchmark: "data/benchmarks/bench_overhead/noop.tsv"
    script: "bench_scripts/bench_noop.py"


rule bench_job:
    output: "bench/job.txt"
    log: "data/logs/bench/job.log"
    benchmark: "data/benchmarks/bench_overhead/job.tsv"
    script: "bench_scripts/bench_job.py"
'''
NOOP_SCRIPT = 'open(snakemake.output[0], "w").write("ok\\n")  # noqa: F821\n'
JOB_SCRIPT = '''from pabench.runtime.workflow import job

with job(snakemake, experiment="bench") as run:  # noqa: F821
    open(snakemake.output[0], "w").write("ok\\n")  # noqa: F821
    run.log({"x": 1.0})
'''
# Records, at exit, which of the watched packages a job's process imported.
SITECUSTOMIZE = '''import atexit, os, sys
_out = os.environ.get("BENCH_MODULES_DIR")
if _out and ".snakemake" in (sys.argv[0] if sys.argv else ""):
    def _record():
        import json
        name = os.path.basename(sys.argv[0]).split(".", 1)[-1]
        mods = sorted(m for m in %r if m in sys.modules)
        with open(os.path.join(_out, name + "." + str(os.getpid()) + ".json"), "w") as f:
            json.dump({"script": name, "modules": mods}, f)
    atexit.register(_record)
''' % (WATCHED,)

# A job's process, step by step (run with a fresh interpreter; prints one JSON line).
PROBE = r'''
import json, os, sys, time
T = {"t0": time.time()}
stamp = time.perf_counter()
def lap(name):
    global stamp
    now = time.perf_counter(); T[name] = now - stamp; stamp = now
mode, workdir, owner = sys.argv[1], sys.argv[2], sys.argv[3]
os.chdir(workdir)
# Snakemake's preamble, as in the script it writes for a job
import pickle
smk = pickle.loads(open("bench/probe.pickle", "rb").read())
from snakemake.logging import logger
from snakemake.iocontainers import Snakemake
lap("snakemake preamble (imports, unpickle)")
import pabench.runtime.workflow as pw
lap("import pabench.runtime.workflow")
server = False
try:
    from pabench.runtime import tracking
    if mode != "in-process" and hasattr(tracking, "open_run"):
        pid, start = owner.split(":")
        tracking.snakemake_ancestor = lambda: (int(pid), start)
        server = True
except ImportError:
    pass
if mode == "in-process":
    os.environ["PABENCH_WANDB_SERVER"] = "0"
import pandas as pd
frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "z"]})
lap("import pandas (the script's own)")
os.makedirs("bench", exist_ok=True)
ctx = pw.job(smk)
run = ctx.__enter__()
lap("job(): start the W&B run")
open("bench/probe.txt", "w").write("ok\n")
run.log({"x": 1.0})
run.log_table("t", frame)
lap("log metrics + a table")
ctx.__exit__(None, None, None)
lap("job() exit: artifact + finish")
T["server"] = server
T["modules"] = sorted(m for m in ("torch", "pandas", "matplotlib", "wandb") if m in sys.modules)
T["t_end"] = time.time()
print("PROBE " + json.dumps(T), flush=True)
'''

# The parts of an in-process W&B run (wandb itself, no pabench code).
WANDB_PROBE = r'''
import json, sys, time, warnings
T = {}
stamp = time.perf_counter()
def lap(name):
    global stamp
    now = time.perf_counter(); T[name] = now - stamp; stamp = now
import wandb
lap("import wandb")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    run = wandb.init(project="pabench", dir=sys.argv[1], mode="offline", name="n", config={"a": 1},
                     settings=wandb.Settings(console="off", silent=True, x_disable_stats=True))
lap("wandb.init (offline; starts wandb-core)")
run.log({"x": 1.0})
lap("run.log")
run.finish()
lap("run.finish")
T["t_end"] = time.time()
print("PROBE " + json.dumps(T), flush=True)
'''


def proc_identity(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return f"{pid}:{stat[stat.rindex(')') + 2:].split()[19]}"


class Tree:
    """A source tree (workflow files + src/pabench) and its working copy."""

    def __init__(self, label: str, root: Path, scratch: Path):
        self.label, self.root = label, root.resolve()
        self.work = scratch / label
        self.env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(self.root / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
        self.env.pop("PABENCH_WANDB_SERVER", None)
        self.env.pop("WANDB_SERVICE", None)
        self.env.pop("WANDB_MODE", None)

    def prepare(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        for name in WORKFLOW_FILES:
            src = self.root / name
            if src.exists():
                (shutil.copytree if src.is_dir() else shutil.copy2)(src, self.work / name)
        with open(self.work / "Snakefile", "a") as f:
            f.write(BENCH_RULES)
        (self.work / "bench_scripts").mkdir()
        (self.work / "bench_scripts" / "bench_noop.py").write_text(NOOP_SCRIPT)
        (self.work / "bench_scripts" / "bench_job.py").write_text(JOB_SCRIPT)

    def snakemake(self, *targets, env=None) -> None:
        exe = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
        proc = subprocess.run([exe, *targets, "--cores", "1", *TEST], check=False, cwd=self.work,
                              capture_output=True, text=True, env={**self.env, **(env or {})})
        if proc.returncode:
            raise SystemExit(f"[{self.label}] snakemake {' '.join(targets)} failed:\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")

    def clean(self, *targets) -> None:
        for target in targets:
            for path in self.work.glob(str(Path(target).with_suffix(".*"))):
                path.unlink()

    def seconds(self, pattern: str) -> float:
        files = [p for p in self.work.glob(f"data/benchmarks/**/{pattern}") if p.is_file()]
        if len(files) != 1:
            raise SystemExit(f"[{self.label}] expected one benchmark file {pattern}, found {files}")
        lines = files[0].read_text().splitlines()
        return float(lines[-1].split("\t")[lines[0].split("\t").index("s")])

    def time_jobs(self) -> dict[str, float]:
        """One cold and one warm measurement of each job."""
        out = {}
        self.clean(TABLE3)
        self.snakemake(TABLE3)
        out["table3 cold (only job of its invocation)"] = self.seconds("*table3*.tsv")
        self.clean(TABLE3, "bench/warmup.txt", "bench/noop.txt", "bench/job.txt")
        self.snakemake("bench/warmup.txt", "bench/noop.txt", "bench/job.txt", TABLE3)
        out["table3 warm (after another W&B job)"] = self.seconds("*table3*.tsv")
        out["bench_job warm: job() + W&B run only"] = self.seconds("job.tsv")
        out["bench_noop: Snakemake floor (no W&B)"] = self.seconds("noop.tsv")
        return out

    def modules(self) -> dict[str, list[str]]:
        """Which watched packages each job's process imported (an untimed run)."""
        hook = self.work / "bench_hook"
        shutil.rmtree(hook, ignore_errors=True)
        (hook / "out").mkdir(parents=True)
        (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.clean(TABLE3, "bench/job.txt")
        self.snakemake("bench/job.txt", TABLE3, env={
            "BENCH_MODULES_DIR": str(hook / "out"),
            "PYTHONPATH": os.pathsep.join([str(hook), self.env["PYTHONPATH"]])})
        found = {}
        for f in (hook / "out").glob("*.json"):
            rec = json.loads(f.read_text())
            found[rec["script"]] = rec["modules"]
        return found

    def probe(self, mode: str) -> dict:
        (self.work / "data" / "logs" / "bench").mkdir(parents=True, exist_ok=True)
        (self.work / "bench").mkdir(exist_ok=True)
        if mode != "wandb" and not (self.work / "bench" / "probe.pickle").exists():
            (self.work / "bench" / "probe.pickle").write_bytes(probe_job(self.work))
        script = PROBE if mode != "wandb" else WANDB_PROBE
        args = [str(self.work), proc_identity(os.getpid())] if mode != "wandb" else \
            [str(self.work / "data" / "wandb-probe")]
        env = {**self.env}
        if mode == "wandb":
            (self.work / "data" / "wandb-probe").mkdir(parents=True, exist_ok=True)
        start = time.time()
        proc = subprocess.run([sys.executable, "-c", script, *([mode] if mode != "wandb" else []),
                               *args], check=False, capture_output=True, text=True, env=env,
                              cwd=self.work)
        end = time.time()
        line = [x for x in proc.stdout.splitlines() if x.startswith("PROBE ")]
        if proc.returncode or not line:
            raise SystemExit(f"[{self.label}] probe {mode} failed:\n{proc.stdout[-2000:]}\n"
                             f"{proc.stderr[-3000:]}")
        rec = json.loads(line[0][6:])
        rec["interpreter exit"] = end - rec.pop("t_end")
        rec.pop("t0", None)
        rec["process total"] = end - start
        return rec


def probe_job(workdir: Path) -> bytes:
    """The pickled `snakemake` object of a job like `bench_job`, as Snakemake's preamble holds it."""
    from snakemake.iocontainers import (InputFiles, Log, OutputFiles, Params, ResourceList,
                                        Snakemake, Wildcards)

    smk = Snakemake(InputFiles([]), OutputFiles(["bench/probe.txt"]),
                    Params(fromdict={"experiment": "bench"}), Wildcards(), 1, ResourceList(),
                    Log(["data/logs/bench/probe.log"]),
                    {"scale": "test", "wandb": {"mode": "offline", "project": "pabench",
                                                "dir": "data/wandb"}},
                    "bench_probe", 0, str(workdir))
    return pickle.dumps(smk, protocol=4)


def python_start(env) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
    return time.perf_counter() - start


def median_records(records: list[dict]) -> dict:
    keys = [k for k, v in records[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    out = {k: statistics.median(r[k] for r in records) for k in keys}
    for k, v in records[0].items():
        if k not in out:
            out[k] = v
    return out


def show(title: str, results: dict[str, dict], order: list[str]) -> None:
    labels = list(results)
    print(f"\n{title}")
    print(f"  {'':48s}" + "".join(f"{lab:>14s}" for lab in labels)
          + ("   ratio" if len(labels) == 2 else ""))
    for key in order:
        vals = [results[lab].get(key) for lab in labels]
        if all(v is None for v in vals):
            continue
        cells = "".join(f"{v:14.3f}" if isinstance(v, float) else f"{str(v):>14s}" for v in vals)
        ratio = ""
        if len(vals) == 2 and all(isinstance(v, float) for v in vals) and vals[0] > 0:
            ratio = f"   {vals[1] / vals[0]:.2f}x"
        print(f"  {key:48s}{cells}{ratio}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=REPO, help="tree under test (default: this one)")
    ap.add_argument("--baseline-tree", type=Path, help="a tree to compare with, in the same run")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", type=Path, help="write every measurement here")
    ap.add_argument("--keep", action="store_true", help="keep the working copies")
    args = ap.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="pabench-overhead-"))
    trees = ([Tree("baseline", args.baseline_tree, scratch)] if args.baseline_tree else []) + \
        [Tree("tree", args.tree, scratch)]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; scratch {scratch}")
    for tree in trees:
        print(f"  {tree.label}: {tree.root}")
    raw = {t.label: {"jobs": [], "probe": {}, "start": []} for t in trees}
    try:
        for tree in trees:
            tree.prepare()
            tree.snakemake(TABLE3, "bench/warmup.txt", "bench/noop.txt", "bench/job.txt")  # build
        for rep in range(args.repeats):  # interleaved, so that drift hits every tree alike
            for tree in trees:
                raw[tree.label]["jobs"].append(tree.time_jobs())
                raw[tree.label]["start"].append(python_start(tree.env))
                for mode in ("in-process", "server", "wandb"):
                    raw[tree.label]["probe"].setdefault(mode, []).append(tree.probe(mode))
            print(f"  repetition {rep + 1}/{args.repeats} done", flush=True)
        modules = {t.label: t.modules() for t in trees}
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)

    jobs = {lab: median_records(r["jobs"]) for lab, r in raw.items()}
    show(f"Snakemake benchmark `s` of the job, median of {args.repeats} (seconds)", jobs,
         list(jobs[trees[0].label]))
    for lab in jobs:
        for name in ("cold", "warm"):
            key = next(k for k in jobs[lab] if k.startswith(f"table3 {name}"))
            jobs[lab][f"table3 {name} minus Snakemake floor"] = \
                jobs[lab][key] - jobs[lab]["bench_noop: Snakemake floor (no W&B)"]
    show("Job overhead above Snakemake's floor (seconds)", jobs,
         ["table3 cold minus Snakemake floor", "table3 warm minus Snakemake floor"])
    print("\nPackages imported by the job's process:")
    for lab, found in modules.items():
        for script, mods in sorted(found.items()):
            print(f"  {lab:10s} {script:20s} {', '.join(mods) or '-'}")

    steps = ["snakemake preamble (imports, unpickle)", "import pabench.runtime.workflow",
             "import pandas (the script's own)", "job(): start the W&B run", "log metrics + a table",
             "job() exit: artifact + finish", "interpreter exit", "process total", "server"]
    for mode, title in (("in-process", "in-process W&B (PABENCH_WANDB_SERVER=0)"),
                        ("server", "through the W&B run server (first repetition cold)")):
        probes = {lab: median_records(r["probe"][mode]) for lab, r in raw.items()}
        for lab in probes:
            probes[lab]["interpreter start (python -c pass)"] = statistics.median(raw[lab]["start"])
        show(f"Breakdown of one job process, {title}, median (seconds)", probes,
             ["interpreter start (python -c pass)", *steps])
        print("  imported: " + "; ".join(f"{lab}: {', '.join(p['modules']) or '-'}"
                                         for lab, p in probes.items()))
    wb = {lab: median_records(r["probe"]["wandb"]) for lab, r in raw.items()}
    show("An in-process W&B offline run alone (wandb only), median (seconds)", wb,
         ["import wandb", "wandb.init (offline; starts wandb-core)", "run.log", "run.finish",
          "interpreter exit", "process total"])
    if args.json:
        args.json.write_text(json.dumps({"raw": raw, "modules": modules}, indent=1, default=str))


if __name__ == "__main__":
    main()
