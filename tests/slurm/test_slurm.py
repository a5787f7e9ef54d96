"""The test-scale workflow on a real Slurm, through Snakemake's SLURM executor plugin and
profiles/slurm: `make test-slurm` starts a single-node Slurm (tests/slurm/cluster.sh), runs these
tests with PABENCH_SLURM=1 and stops Slurm afterwards; without PABENCH_SLURM=1 they are skipped.
`make test-slurm-ci` runs the same tests on a few jobs only (PABENCH_SLURM_TARGETS: the toy
figures), sized for every CI run.

Compared with a local run of the same workflow (`results`): every file under data/ and figures/
by content (pabench.tools.campaign.snapshot: the bytes, except .npz by array, .pt by tensor), except
what measures the run rather than its results, which differs between any two runs, local or not:
- W&B runs (run ids, times), job logs, benchmark files (seconds, memory) and figures/timings.*
  (pabench.tools.campaign.NOT_COMPARED);
- timing columns of CSV tables (`pabench.tools.tolerances.is_timing`: training and attack seconds,
  images per second, speed-ups), compared without them; a table's renderings (.md, .html, .tex)
  then only through its CSV;
- the measured speed ratios of the claims marked `timed` in claims.csv: their verdicts are
  compared.
"""
import os
import re
import subprocess
import time

import pandas as pd
import pytest

from conftest import REPO, TEST, run_snakemake
from pabench.tools.campaign import compare, prepare, snakemake_cmd, snapshot
from pabench.tools.tolerances import is_timing

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(os.environ.get("PABENCH_SLURM") != "1",
                                 reason="needs a running Slurm: make test-slurm")]

# Without slurmdbd, `sacct` never sees a job end: status checks with squeue (MinJobAge=300 in
# cluster.sh keeps finished jobs listed); the first check after 2 s, not the default 40 s.
SLURM = ("--profile", "profiles/slurm", "--slurm-status-command", "squeue",
         "--slurm-init-seconds-before-status-checks", "2")
# cluster.sh's one partition; no accounts on this cluster (the plugin's guess fails harmlessly).
ENV = {"PABENCH_SLURM_ACCOUNT": "", "PABENCH_SLURM_PARTITION": "cpu"}
# A run the plugin cannot follow hangs deaf to SIGTERM: always under `timeout -s KILL`.
WORKFLOW_TIMEOUT = 60 * 60
# What the workflow test runs: the whole test scale, or the targets named here (space-separated).
TARGETS = os.environ.get("PABENCH_SLURM_TARGETS", "").split()


def slurm_snakemake(workdir, *args, timeout=300, env=None):
    cmd = ["timeout", "-s", "KILL", str(timeout), *snakemake_cmd(*SLURM, *args)]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, **ENV, **(env or {})})


def results(root) -> dict[str, str]:
    """{file: digest} of a finished run, timings left out (see the module docstring): the
    columns that time the run, and the measured text of timed claims (speed ratios)."""
    out = snapshot(root)
    for rel in [rel for rel in out if rel.endswith(".csv")]:
        table = pd.read_csv(root / rel)
        timed = [col for col in table.columns if is_timing(col)]
        timed_claims = rel == "figures/claims.csv" and table.timed.any()
        if timed or timed_claims:
            if timed_claims:
                table.loc[table.timed, "measured"] = ""
            out[rel] = table.drop(columns=timed).to_csv()
            for ext in (".md", ".html", ".tex"):
                out.pop(rel[:-len(".csv")] + ext, None)
    return out


def _tail(proc):
    return f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"


@pytest.mark.parametrize("args, env, message", [
    (("--set-resources", "toy_gaussian:gpus=1"), {}, "unknown resource 'gpus' (rules: toy_gaussian)"),
    (("--set-resources", "toy_gaussian:gpu=1"), {},
     "rule toy_gaussian asks for GPUs (gpu=1) but partition 'cpu' has no GPUs"),
    ((), {"PABENCH_SLURM_PARTITION": "gpu"},
     "rule toy_gaussian: partition 'gpu' does not exist (partitions: cpu)"),
    ((), {"SLURM_CONF": "unreachable.conf"},
     "Slurm is not reachable: `sinfo` failed: slurm_load_partitions: Unable to contact slurm controller"),
], ids=["unknown-resource", "gpu-on-cpu-partition", "no-such-partition", "unreachable"])
def test_bad_input_stops_before_any_submission(tmp_path, args, env, message):
    workdir = prepare(REPO, tmp_path / "wf")
    if "SLURM_CONF" in env:
        # The same cluster, asked on a port where no controller listens.
        conf = open("/etc/slurm/slurm.conf").read()
        conf = re.sub(r"(?m)^SlurmctldHost=.*$", "SlurmctldHost=localhost\nSlurmctldPort=1", conf)
        (workdir / env["SLURM_CONF"]).write_text(conf)
        env = {"SLURM_CONF": str(workdir / env["SLURM_CONF"])}
    proc = slurm_snakemake(workdir, "data/results/toy/gaussian.csv", *TEST, *args, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "pabench: not submitting any job to SLURM:" in out, _tail(proc)
    assert message in out, _tail(proc)
    assert "has been submitted" not in out and not (workdir / ".snakemake/slurm_logs").exists()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The test-scale workflow run locally and on Slurm, one after the other (2 cores)."""
    local = prepare(REPO, tmp_path_factory.mktemp("local"))
    start = time.monotonic()
    run_snakemake(local, *TARGETS, "--cores", "2", *TEST)
    local_s = time.monotonic() - start
    cluster = prepare(REPO, tmp_path_factory.mktemp("slurm"))
    start = time.monotonic()
    proc = slurm_snakemake(cluster, *TARGETS, *TEST, timeout=WORKFLOW_TIMEOUT)
    slurm_s = time.monotonic() - start
    print(f"\ntest-scale workflow ({' '.join(TARGETS) or 'everything'}): local {local_s:.0f} s, "
          f"on Slurm {slurm_s:.0f} s")
    assert proc.returncode == 0, _tail(proc)
    return local, cluster, proc.stdout + proc.stderr


def test_every_job_ran_on_slurm_and_outputs_equal_a_local_run(runs):
    local, cluster, output = runs
    submitted = len(re.findall(r"has been submitted with SLURM jobid \d+", output))
    total = int(re.findall(r"^total\s+(\d+)\s*$", output, flags=re.M)[0])
    # every job but `all` (no command: Snakemake runs it itself), which runs without targets
    assert submitted == total - (0 if TARGETS else 1) and submitted > 0
    ours, theirs = results(local), results(cluster)
    assert len(ours) > (5 if TARGETS else 300)
    assert compare(ours, theirs) == {"missing": [], "extra": [], "differ": []}


def test_a_failing_job_is_reported_as_failed(runs):
    _, cluster, _ = runs
    # pa_fig1 reads the Bernoulli toy table; a broken table makes its job fail on the node.
    (cluster / "data/results/toy/bernoulli.csv").write_text("not,a\ntable\n")
    for path in (cluster / "figures/pa").glob("fig1.*"):
        path.unlink()
    start = time.monotonic()
    proc = slurm_snakemake(cluster, "figures/pa/fig1.pdf", *TEST)  # targets before --configfile
    print(f"\nfailing job reported in {time.monotonic() - start:.0f} s")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, _tail(proc)
    assert "has been submitted with SLURM jobid" in out
    assert "Error in rule pa_fig1" in out and re.search(r"SLURM-job '\d+' failed", out), _tail(proc)
