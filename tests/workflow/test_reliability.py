"""Interrupted runs, damaged inputs inside a real run, and W&B failures, on the test scale."""

import pytest

from conftest import REPO, TEST, run_snakemake
from pabench.campaign import compare, kill_trial, snapshot

pytestmark = pytest.mark.workflow
# The kill trials run a part of the workflow that has every kind of rule (data, training,
# attacks, scoring, tables, figures) to keep the suite short; the campaign
# (python -m pabench.campaign) kills whole runs.
TRIAL_TARGETS = ["figures/pa/fig01.pdf", "figures/pa/fig03.pdf", "figures/pa/fig07.pdf"]


@pytest.mark.parametrize("after_jobs", [2, 9])
def test_a_killed_run_finishes_with_identical_outputs(ran, tmp_path, after_jobs):
    """SIGKILL the Snakemake process tree once `after_jobs` jobs have finished (mid-run), rerun
    with --rerun-incomplete: every output equals the uninterrupted run's."""
    root, _ = ran
    trial = kill_trial(REPO, tmp_path / "trial", TRIAL_TARGETS, kill_after=1.5, after_jobs=after_jobs)
    assert trial["killed"], "the run ended before the kill"
    assert trial["unlock_rc"] == 0, "snakemake --unlock failed"
    assert trial["rerun_rc"] == 0, trial["rerun_tail"]
    outputs = snapshot(tmp_path / "trial")
    assert {"figures/pa/fig03.pdf", "figures/pa/fig07.csv", "data/results/dg/pa.csv"} <= set(outputs)
    diff = compare(snapshot(root), outputs)
    assert diff["extra"] == [] and diff["differ"] == [], diff
    assert not list((tmp_path / "trial").rglob("*.partial")), "a resumable attack part was left behind"


def test_a_corrupted_checkpoint_stops_its_job_and_leaves_no_output(finished):
    checkpoint = finished / "data/models/shift_factor/erm-s0/best_acc.pt"  # the scored one (dg.evaluate)
    checkpoint.write_bytes(checkpoint.read_bytes()[:1000])
    scores = finished / "data/results/dg/scores/erm-s0.npz"
    proc = run_snakemake(finished, "--cores", "1", str(scores.relative_to(finished)), *TEST, check=False)
    assert proc.returncode != 0
    log = (finished / "data/logs/dg_scores/erm-s0.log").read_text()
    assert "data/models/shift_factor/erm-s0/best_acc.pt: not a pabench checkpoint" in log
    assert not scores.exists()


def test_wandb_unreachable_or_unwritable_never_fails_a_job(workdir):
    blocker = workdir / "not-a-directory"
    blocker.write_text("a file where the W&B directory should be")
    cases = [
        ("figures/pa/fig01.pdf", '{"mode": "online"}', "cannot be reached"),
        ("figures/pa/fig02.pdf", f'{{"dir": "{blocker}/wandb"}}', "could not start a run"),
    ]
    for target, wandb, message in cases:
        proc = run_snakemake(workdir, "--cores", "2", target, "--config", f"wandb={wandb}", *TEST,
                             env={"WANDB_API_KEY": "pabench-fake-key-0123456789abcdef01234567",
                                  "WANDB_BASE_URL": "http://127.0.0.1:9"})
        assert (workdir / target).is_file()
        assert message in proc.stderr, proc.stderr[-3000:]
