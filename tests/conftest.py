import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKFLOW_FILES = ["Snakefile", "config.yaml", "workflow", "envs", "profiles"]


def snakemake_cmd(*args):
    exe = shutil.which("snakemake", path=str(Path(sys.executable).parent)) or "snakemake"
    return [exe, *args]


def run_snakemake(workdir, *args, env=None, check=True):
    proc = subprocess.run(snakemake_cmd(*args), cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture
def workdir(tmp_path):
    """A copy of the workflow in a fresh directory (outputs never touch the repository)."""
    for name in WORKFLOW_FILES:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name)
        else:
            shutil.copy2(src, tmp_path / name)
    return tmp_path
