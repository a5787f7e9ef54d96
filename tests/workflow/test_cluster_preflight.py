"""The SLURM profile's pre-flight check wired into Snakemake (the Snakefile's onstart handler),
without a Slurm: fake Slurm commands first on PATH; `sbatch` leaves a mark if it is ever called.
With a real Slurm: tests/slurm/test_slurm.py (make test-slurm)."""
import os
import stat

import pytest

from conftest import TEST, run_snakemake

pytest.importorskip("snakemake_executor_plugin_slurm", reason="pip install -e '.[slurm]'")
pytestmark = pytest.mark.workflow

FAKES = {
    "sinfo": "echo 'slurm_load_partitions: Unable to contact slurm controller (connect failure)' >&2; exit 1",
    "scontrol": "exit 1",
    "squeue": "exit 1",
    "sacct": "exit 1",
    "sacctmgr": "exit 1",
    "sshare": "exit 1",
    "sbatch": 'touch "$FAKE_SLURM_MARK"; echo 1',
}


def test_unreachable_slurm_stops_the_run_before_any_submission(workdir, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in FAKES.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    mark = tmp_path / "sbatch-called"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM_MARK": str(mark),
           "PABENCH_SLURM_ACCOUNT": "", "PABENCH_SLURM_PARTITION": "",
           "PABENCH_WANDB_SERVER": "0"}
    # Targets before --configfile, which takes every argument after it.
    proc = run_snakemake(workdir, "--profile", "profiles/slurm", "data/results/toy/gaussian.csv", *TEST,
                         "--set-resources", "toy_gaussian:slurm_partiton=cpu", env=env, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert ("pabench: not submitting any job to SLURM:\n"
            "  - Slurm is not reachable: `sinfo` failed: slurm_load_partitions: Unable to contact slurm "
            "controller (connect failure)\n"
            "  - unknown resource 'slurm_partiton' (rules: toy_gaussian)") in out, out[-3000:]
    assert not mark.exists() and not (workdir / "data/results/toy/gaussian.csv").exists()
