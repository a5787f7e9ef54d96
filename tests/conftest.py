import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pabench.campaign import TEST, prepare, snakemake_cmd

REPO = Path(__file__).resolve().parents[1]
SECRET = "pabench-fake-api-key-0123456789abcdef"


def scale_config() -> dict:
    """The test scale's merged configuration."""
    from pabench.core import config

    return config.load([REPO / "config.yaml", REPO / TEST[1]])


def run_snakemake(workdir, *args, env=None, check=True):
    proc = subprocess.run(snakemake_cmd(*args), cwd=workdir, capture_output=True, text=True,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def planned(root, *args) -> list[tuple[str, str]]:
    """(rule, wildcards) of every job a dry run plans, rule `all` left out."""
    out = run_snakemake(root, "-n", *args).stdout
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        m = re.match(r"(?:local)?rule (\w+):", block)
        if m and m.group(1) != "all":
            wc = re.search(r"^\s+wildcards: (.*)$", block, flags=re.M)
            jobs.append((m.group(1), wc.group(1) if wc else ""))
    return jobs


@pytest.fixture
def workdir(tmp_path):
    """A copy of the workflow in a fresh directory (outputs never touch the repository)."""
    return prepare(REPO, tmp_path)


@pytest.fixture(scope="session")
def ran(tmp_path_factory):
    """One test-scale run of the default target, with a fake W&B key in the environment.
    Shared by every test that reads a finished run; tests that change files copy it first."""
    root = prepare(REPO, tmp_path_factory.mktemp("wf"))
    proc = run_snakemake(root, "--cores", "2", *TEST, env={"WANDB_API_KEY": SECRET})
    return root, proc


@pytest.fixture
def finished(ran, tmp_path):
    """A copy of the finished test-scale run (timestamps kept, W&B runs left out), free to change."""
    root, _ = ran
    dst = tmp_path / "run"
    shutil.copytree(root, dst, symlinks=True, ignore=shutil.ignore_patterns("wandb"))
    return dst


@pytest.fixture(scope="module")
def one_thread():
    """Small tensors: one thread is faster than two threads fighting other jobs for the cores.
    A module asks for it with `pytestmark = pytest.mark.usefixtures("one_thread")`."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
