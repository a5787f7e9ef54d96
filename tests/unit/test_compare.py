"""pabench.compare on two small hand-made run directories."""
import pandas as pd
import pytest

from pabench.compare import main

TABLE = pd.DataFrame({"model": ["erm", "irm", "irm"], "pa": [0.125, float("nan"), -1.5],
                      "acc": [0.9, float("inf"), 0.5]})
CLAIMS = pd.DataFrame({"id": ["fig1-peak", "adv-jpeg"], "source": ["PA Fig. 1", "PA Fig. 4"],
                       "claim": ["...", "..."], "measured": ["peak at 0.5", "jpeg_rs lowest"],
                       "verdict": ["reproduced", "not evaluated"]})


def write_timings(root, seconds):
    pd.DataFrame({"rule": ["a"], "seconds": [seconds]}).to_csv(root / "figures" / "timings.csv",
                                                              index=False)


def make_run(root):
    (root / "figures" / "pa").mkdir(parents=True)
    TABLE.to_csv(root / "figures" / "pa" / "table1.csv", index=False)
    CLAIMS.to_csv(root / "figures" / "claims.csv", index=False)
    write_timings(root, 1.0)
    (root / "data" / "results").mkdir(parents=True)
    TABLE.to_csv(root / "data" / "results" / "dg.csv", index=False)
    return root


@pytest.fixture
def runs(tmp_path):
    return make_run(tmp_path / "before"), make_run(tmp_path / "after")


def compare(runs, *extra):
    return main([str(runs[0]), str(runs[1]), *extra])


def test_identical(runs, capsys):
    # timings differ between runs and are left out
    write_timings(runs[1], 2.0)
    assert compare(runs, "--also", "data/results") == 0
    out = capsys.readouterr().out
    assert "IDENTICAL" in out and "3 CSV files" in out and "2 claims" in out


def test_changed_number(runs, capsys):
    changed = TABLE.copy()
    changed.loc[2, "pa"] = -1.25
    changed.to_csv(runs[1] / "figures" / "pa" / "table1.csv", index=False)
    assert compare(runs) == 1
    out = capsys.readouterr().out
    assert "figures/pa/table1.csv: column 'pa': 1 of 3 rows differ, max |diff| 0.25" in out
    assert "row 2" in out and "'-1.5' before, '-1.25' after" in out


def test_nan_written_differently_is_equal(runs, capsys):
    # NaN as an empty cell on one side and as "nan" on the other; inf as "inf" / "Infinity"
    path = runs[1] / "figures" / "pa" / "table1.csv"
    path.write_text("model,pa,acc\nerm,0.1250,0.9\nirm,nan,Infinity\nirm,-1.5,0.5\n")
    assert compare(runs) == 0, capsys.readouterr().out


def test_changed_only_in_also_dir(runs, capsys):
    TABLE.assign(acc=0.0).to_csv(runs[1] / "data" / "results" / "dg.csv", index=False)
    assert compare(runs) == 0                       # not looked at without --also
    assert compare(runs, "--also", "data/results") == 1
    assert "data/results/dg.csv: column 'acc'" in capsys.readouterr().out


def test_changed_verdict(runs, capsys):
    claims = CLAIMS.copy()
    claims.loc[1, "verdict"] = "reproduced"
    claims.to_csv(runs[1] / "figures" / "claims.csv", index=False)
    assert compare(runs) == 1
    out = capsys.readouterr().out
    assert "claim adv-jpeg: verdict changed: 'not evaluated' -> 'reproduced'" in out


def test_column_order_is_a_note(runs, capsys):
    TABLE[["acc", "model", "pa"]].to_csv(runs[1] / "figures" / "pa" / "table1.csv", index=False)
    assert compare(runs) == 0
    out = capsys.readouterr().out
    assert "note: figures/pa/table1.csv: same columns in a different order" in out


def test_missing_file_and_extra_row(runs, capsys):
    (runs[1] / "figures" / "claims.csv").unlink()
    pd.concat([TABLE, TABLE.tail(1)]).to_csv(runs[1] / "figures" / "pa" / "table1.csv", index=False)
    assert compare(runs) == 1
    out = capsys.readouterr().out
    assert "figures/claims.csv: only in" in out and "3 rows before, 4 after" in out


def test_missing_directory(runs, tmp_path, capsys):
    assert main([str(runs[0]), str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
    assert compare(runs, "--also", "data/nope") == 2
