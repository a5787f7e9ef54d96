"""The kill campaign's view of a run's progress (pabench.tools.campaign), on hand-made run folders."""
import pandas as pd

from pabench.tools.campaign import digest, running
from pabench.reporting.tables import write_table


def _touch(root, *rels):
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("")


def test_running_jobs_have_a_log_and_no_benchmark(tmp_path):
    _touch(tmp_path, "data/logs/avg_data/mnist32.log", "data/benchmarks/avg_data/mnist32.tsv",
           "data/logs/avg_train/mnist32-cnn-lam0-s0.log", "data/logs/oodrb_fits/oodrb_fits.log")
    assert running(tmp_path) == ["avg_train/mnist32-cnn-lam0-s0", "oodrb_fits/oodrb_fits"]


def _table(folder, seconds, accuracy):
    frame = pd.DataFrame({"model": ["a", "b"], "training seconds": seconds, "accuracy": accuracy})
    write_table(frame, "A table.", {}, "t", md=folder / "t.md", csv=folder / "t.csv",
                tex=folder / "t.tex", html_path=folder / "t.html")
    return {ext: digest(folder / f"t.{ext}") for ext in ("csv", "md", "tex", "html")}


def test_a_table_and_its_renderings_are_compared_without_timing_columns(tmp_path):
    for run in ("run1", "run2", "run3"):
        (tmp_path / run).mkdir()
    first = _table(tmp_path / "run1", [1.5, 2.25], [0.5, 0.75])
    assert _table(tmp_path / "run2", [3.0, 0.5], [0.5, 0.75]) == first   # another run's speed
    other = _table(tmp_path / "run3", [1.5, 2.25], [0.5, 0.8])            # another result
    assert all(other[ext] != first[ext] for ext in first)


def test_a_timed_claims_measured_text_is_not_compared(tmp_path):
    def claims(name, speed, accuracy):
        path = tmp_path / name
        pd.DataFrame({"id": ["fast", "acc"], "measured": [f"{speed}x", f"{accuracy} %"],
                      "verdict": ["reproduced"] * 2, "timed": [True, False]}).to_csv(path, index=False)
        return digest(path)

    assert claims("a.csv", 10.1, 50) == claims("b.csv", 12.7, 50)
    assert claims("c.csv", 10.1, 51) != claims("a.csv", 10.1, 50)
