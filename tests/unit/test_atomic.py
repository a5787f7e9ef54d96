"""Outputs are written atomically: a failure (or a kill) never leaves a file that looks complete,
and what a killed writer left behind is removed by the next write."""
import pytest

from pabench.core.io import atomic_path, write_csv, write_text


def test_a_failed_write_leaves_neither_output_nor_temporary(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half of a ta")
            raise RuntimeError("killed mid-write")
    assert list(tmp_path.iterdir()) == []


def test_an_existing_output_is_replaced_only_when_the_new_one_is_complete(tmp_path):
    target = tmp_path / "out.txt"
    write_text(target, "old\n")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("new but unfinished")
            raise RuntimeError
    assert target.read_text() == "old\n"


def test_temporaries_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    stale = tmp_path / ".out.csv.k1ll3d.tmp.csv"  # what SIGKILL leaves: no cleanup ran
    stale.write_text("partial")
    import pandas as pd
    write_csv(tmp_path / "out.csv", pd.DataFrame({"a": [1]}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]
