"""Interrupted runs, damaged inputs inside a real run, and W&B failures, on the test scale."""

import pytest

from conftest import REPO, TEST, run_snakemake
from pabench.tools.campaign import FINISHED, STARTED, compare, kill_trial, prepare, snapshot

pytestmark = pytest.mark.workflow
# The kill trials run parts of the workflow that have every kind of rule (data, training,
# attacks, estimates, shift evaluations, scoring, fits, tables, figures) to keep the suite short;
# the campaign (python -m pabench.tools.campaign) kills whole runs.  Each trial's outputs are compared
# with an uninterrupted run of the same targets (not the session's `ran`, so that the trials need
# not wait for it: `make test` runs them on another worker).
PA_TARGETS = ["figures/pa/fig1.pdf", "figures/pa/fig3.pdf", "figures/pa/fig7.pdf"]
TRIALS = {
    # The PA paper's Figures 1, 3 and 7 (data, MNIST pools, DiagViB-6 rendering, ERM/IRM/LISA
    # training, scores, PA, the adversarial zoo, an attack): killed 1.5 s after the 2nd job
    # finished (later moments: the campaign's random kills).
    "pa-after-2-jobs": dict(targets=PA_TARGETS, after_jobs=2, kill_after=1.5,
                            expect=["figures/pa/fig7.csv", "data/results/dg/pa.csv"]),
    # Average case, Figure 2a (data, a model's training, the per-sigma estimates, the figure):
    # killed 0.5 s after the training started, while it trains.
    "avgcase-in-training": dict(targets=["figures/avgcase/fig2a.pdf"], kill_after=0.5,
                                after=STARTED.format(rule="avg_train"), after_jobs=1),
    # OODRobustBench, the fits table (the zoo's trainings, the corrupted and natural shift sets,
    # each model's shift evaluation, the fits): killed 0.5 s after the second zoo model's
    # training started, while it trains (and the first model's shifts are evaluated).
    "oodrb-in-training": dict(targets=["figures/oodrb/fits.csv"], kill_after=0.5,
                              after=STARTED.format(rule="oodrb_train"), after_jobs=2),
}


# Each trial in an xdist group of its own (besides its file's: tests/conftest.py), so that
# `make test` may run the trials side by side.
@pytest.mark.parametrize("case", [pytest.param(case, id=name, marks=pytest.mark.xdist_group(name))
                                  for name, case in TRIALS.items()])
def test_a_killed_run_finishes_with_identical_outputs(tmp_path, case):
    """SIGKILL the Snakemake process tree mid-run (the case's moment), rerun with
    --rerun-incomplete: the outputs are exactly an uninterrupted run's."""
    targets = case["targets"]
    reference = prepare(REPO, tmp_path / "reference")
    run_snakemake(reference, "--cores", "2", *targets, *TEST)
    trial = kill_trial(REPO, tmp_path / "trial", targets, kill_after=case["kill_after"],
                       after_jobs=case["after_jobs"], after=case.get("after", FINISHED))
    assert trial["killed"], "the run ended before the kill"
    unfinished = [t for t in targets if t not in trial["at_kill"]]
    assert unfinished, f"the kill came after the targets were built ({trial['running_at_kill']})"
    assert trial["unlock_rc"] == 0, "snakemake --unlock failed"
    assert trial["rerun_rc"] == 0, trial["rerun_tail"]
    outputs = snapshot(tmp_path / "trial")
    assert {*targets, *case.get("expect", [])} <= set(outputs)
    diff = compare(snapshot(reference), outputs)
    assert diff == {"missing": [], "extra": [], "differ": []}, diff
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
        ("figures/pa/fig1.pdf", '{"mode": "online"}', "cannot be reached"),
        ("figures/pa/fig2.pdf", f'{{"dir": "{blocker}/wandb"}}', "could not start a run"),
    ]
    for target, wandb, message in cases:
        proc = run_snakemake(workdir, "--cores", "2", target, "--config", f"wandb={wandb}", *TEST,
                             env={"WANDB_API_KEY": "pabench-fake-key-0123456789abcdef01234567",
                                  "WANDB_BASE_URL": "http://127.0.0.1:9"})
        assert (workdir / target).is_file()
        assert message in proc.stderr, proc.stderr[-3000:]
