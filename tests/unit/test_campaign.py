"""The kill campaign's view of a run's progress (pabench.campaign), on hand-made run folders."""
from pabench.campaign import running


def _touch(root, *rels):
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")


def test_running_jobs_have_a_log_and_no_benchmark(tmp_path):
    _touch(tmp_path, "data/logs/avg_data/mnist32.log", "data/benchmarks/avg_data/mnist32.tsv",
           "data/logs/avg_train/mnist32-cnn-lam0-s0.log", "data/logs/oodrb_fits/oodrb_fits.log")
    assert running(tmp_path) == ["avg_train/mnist32-cnn-lam0-s0", "oodrb_fits/oodrb_fits"]
