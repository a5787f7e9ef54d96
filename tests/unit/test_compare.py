"""pabench.tools.compare on two small hand-made run directories."""
from pathlib import Path

import pandas as pd
import pytest

from pabench.tools.compare import main
from pabench.tools.tolerances import load

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


def test_timing_columns_and_timed_claims_are_notes_unless_asked(runs, capsys):
    """Seconds, images per second and speed-ups differ between any two runs: listed, not
    compared (--timings compares them); so is a timed claim's measured text, not its verdict."""
    for run, speed in zip(runs, (1.0, 2.5)):
        TABLE.assign(seconds=speed, images_per_s=100 * speed).to_csv(
            run / "figures" / "pa" / "table1.csv", index=False)
        CLAIMS.assign(timed=[False, True], measured=["peak at 0.5", f"{speed}x faster"]).to_csv(
            run / "figures" / "claims.csv", index=False)
    assert compare(runs) == 0
    out = capsys.readouterr().out
    assert "columns that time the run, not compared (--timings compares them): images_per_s, " \
           "seconds" in out
    assert "note: claim adv-jpeg: measured changed (timed: a measurement of speed)" in out
    assert compare(runs, "--timings") == 1
    out = capsys.readouterr().out
    assert "column 'seconds': 3 of 3 rows differ" in out and "DIFF: claim adv-jpeg: measured" in out
    # an untimed claim's measured text, and its other columns, are still compared
    claims = CLAIMS.assign(timed=[False, True], measured=["peak at 0.6", "2.5x faster"])
    claims.loc[0, "source"] = "PA Fig. 2"
    claims.to_csv(runs[1] / "figures" / "claims.csv", index=False)
    assert compare(runs) == 1
    out = capsys.readouterr().out
    assert "DIFF: claim fig1-peak: measured changed: 'peak at 0.5' -> 'peak at 0.6'" in out
    assert "DIFF: claim fig1-peak: source changed: 'PA Fig. 1' -> 'PA Fig. 2'" in out
    # a run from before claims had the `timed` column: the shared columns compared, a note
    CLAIMS.to_csv(runs[0] / "figures" / "claims.csv", index=False)
    CLAIMS.assign(timed=False).to_csv(runs[1] / "figures" / "claims.csv", index=False)
    assert compare(runs) == 0
    assert "columns differ, the shared ones compared (only before: [], only after: ['timed'])" \
        in capsys.readouterr().out


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


# --- with tolerances (a CPU run against a GPU run) --------------------------------------------

TOLERANCES = """
columns:
  - {match: acc, abs: 0.01}
  - {match: "P*", rel: 0.02, abs: 0.01}       # globs are case-insensitive: matches 'pa'
  - {match: seconds, ignore: true}
ignore_claims: [fig1-peak]
"""


@pytest.fixture
def tol(tmp_path):
    path = tmp_path / "tol.yaml"
    path.write_text(TOLERANCES)
    return path


def perturb(runs, **cells):
    """Rewrite the after run's table1.csv with {column: {row: value}} changed."""
    changed = TABLE.copy()
    for col, rows in cells.items():
        for row, value in rows.items():
            changed.loc[row, col] = value
    changed.to_csv(runs[1] / "figures" / "pa" / "table1.csv", index=False)


@pytest.mark.parametrize("cells, summary", [
    ({"acc": {2: 0.509}}, "'acc' [rule 0: abs 0.01] in 1 file(s): 0.009, 0.0177, 0 / 3"),
    # on the limit: 0.51 - 0.5 is 0.010000000000000009 in binary floating point
    ({"acc": {2: 0.51}}, "'acc' [rule 0: abs 0.01] in 1 file(s): 0.01, 0.0196, 0 / 3"),
    # rel 0.02 of 1.529 is 0.0306
    ({"pa": {2: -1.529}}, "'pa' [rule 1: abs 0.01 or rel 0.02] in 1 file(s): 0.029, 0.019, 0 / 3"),
    # abs 0.01 (rel 0.02 of 0.134 is only 0.0027)
    ({"pa": {0: 0.134}}, "'pa' [rule 1: abs 0.01 or rel 0.02] in 1 file(s): 0.009, 0.0672, 0 / 3"),
])
def test_within_tolerances(runs, tol, cells, summary, capsys):
    perturb(runs, **cells)
    assert compare(runs) == 1                        # exact mode is unchanged
    capsys.readouterr()
    assert compare(runs, "--tolerances", str(tol)) == 0
    out = capsys.readouterr().out
    assert "WITHIN TOLERANCES" in out and "DIFF" not in out
    assert summary in out


@pytest.mark.parametrize("cells, message", [
    ({"acc": {2: 0.511}}, "row 2 (model=irm): column 'acc': 0.5 vs 0.511, |diff| 0.011 > limit "
                          "0.01 (rule 0: abs 0.01)"),
    ({"pa": {2: -1.531}}, "row 2 (model=irm): column 'pa': -1.5 vs -1.531, |diff| 0.031 > limit "
                          "0.03062 (rule 1: abs 0.01 or rel 0.02)"),
    ({"pa": {0: 0.136}}, "row 0 (model=erm): column 'pa': 0.125 vs 0.136, |diff| 0.011 > limit "
                         "0.01 (rule 1"),
    ({"pa": {1: 0.0}}, "row 1 (model=irm): column 'pa': '' vs 0.0, not two finite numbers"),  # NaN
    ({"acc": {1: 1e308}}, "row 1 (model=irm): column 'acc': inf vs 1e+308, not two finite numbers"),
    ({"model": {0: "ERM"}}, "row 0 (model=erm): column 'model': 'erm' vs 'ERM', not two finite "
                            "numbers (exact (no rule))"),
])
def test_outside_tolerances(runs, tol, cells, message, capsys):
    perturb(runs, **cells)
    assert compare(runs, "--tolerances", str(tol)) == 1
    out = capsys.readouterr().out
    assert f"DIFF: figures/pa/table1.csv {message}" in out
    assert "DIFFERENT: 1 difference(s) outside the tolerances" in out


def test_every_value_listed_and_summarised(runs, tol, capsys):
    # Two values outside in one column, one inside in another; the --also table too.
    perturb(runs, acc={0: 0.85, 2: 0.6}, pa={2: -1.52})
    TABLE.assign(acc=[0.92, float("inf"), 0.5]).to_csv(runs[1] / "data" / "results" / "dg.csv",
                                                       index=False)
    assert compare(runs, "--also", "data/results", "--tolerances", str(tol)) == 1
    out = capsys.readouterr().out
    assert "figures/pa/table1.csv row 0 (model=erm): column 'acc': 0.9 vs 0.85" in out
    assert "figures/pa/table1.csv row 2 (model=irm): column 'acc': 0.5 vs 0.6" in out
    assert "data/results/dg.csv row 0 (model=erm): column 'acc': 0.9 vs 0.92" in out
    assert "DIFFERENT: 3 difference(s)" in out
    # max |diff| 0.1 (0.5 -> 0.6), max relative 0.1 / 0.6; 3 of 6 values outside, 2 files
    assert "'acc' [rule 0: abs 0.01] in 2 file(s): 0.1, 0.167, 3 / 6" in out
    assert "'pa' [rule 1: abs 0.01 or rel 0.02] in 2 file(s): 0.02, 0.0132, 0 / 6" in out


def test_ignored_columns_and_unused_rules(runs, tmp_path, capsys):
    for root, seconds in zip(runs, ([1.0, 2.0, 3.0], [9.0, 8.0, 7.0])):
        TABLE.assign(seconds=seconds).to_csv(root / "figures" / "pa" / "table1.csv", index=False)
    path = tmp_path / "tol.yaml"
    path.write_text("columns:\n  - {match: '*seconds*', ignore: true}\n"
                    "  - {match: [acc, beta*], files: 'data/*', abs: 0.5}\n")
    assert compare(runs, "--tolerances", str(path)) == 0
    out = capsys.readouterr().out
    assert "ignored: seconds" in out
    # acc exists, but only in figures/ here; the rule's files glob keeps it out
    assert f"note: {path}: columns[1] (match ['acc', 'beta*']) matches no column" in out
    assert "note: claim fig1-peak" not in out


def test_claims_with_tolerances(runs, tol, capsys):
    claims = CLAIMS.copy()
    claims.loc[0, ["measured", "verdict"]] = ["peak at 0.51", "not reproduced"]  # ignore_claims
    claims.loc[1, "measured"] = "jpeg_rs lowest (2 seeds)"
    claims.to_csv(runs[1] / "figures" / "claims.csv", index=False)
    assert compare(runs, "--tolerances", str(tol)) == 0
    out = capsys.readouterr().out
    assert f"note: claim fig1-peak: not compared (ignore_claims in {tol})" in out
    assert ("note: claim adv-jpeg: measured changed: 'jpeg_rs lowest' -> "
            "'jpeg_rs lowest (2 seeds)'") in out
    claims.loc[1, "verdict"] = "reproduced"
    claims.to_csv(runs[1] / "figures" / "claims.csv", index=False)
    assert compare(runs, "--tolerances", str(tol)) == 1
    out = capsys.readouterr().out
    assert "DIFF: claim adv-jpeg: verdict changed: 'not evaluated' -> 'reproduced'" in out


@pytest.mark.parametrize("text, message", [
    ("columns:\n  - {match: acc, abss: 0.01}",
     "columns[0]: unknown key(s) ['abss'] (known: ['abs', 'files', 'ignore', 'match', 'rel'])"),
    ("columns:\n  - {match: acc, abs: -0.01}",
     "columns[0] (match ['acc']): abs must be a number >= 0, got -0.01"),
    ("columns:\n  - {match: acc, rel: 2%}",
     "columns[0] (match ['acc']): rel must be a number >= 0, got '2%'"),
    ("columns:\n  - {match: acc, abs: .nan}", "abs must be a number >= 0, got nan"),
    ("columns:\n  - {match: acc, abs: true}", "abs must be a number >= 0, got True"),
    ("columns:\n  - {match: acc}",
     "columns[0] (match ['acc']): states no limit (abs, rel) and is not ignore: true"),
    ("columns:\n  - {match: acc, ignore: true, abs: 1}",
     "ignore: true with limits ['abs']: choose one"),
    ("columns:\n  - {match: acc, ignore: 'yes'}", "ignore must be true or false, got 'yes'"),
    ("columns:\n  - {abs: 0.01}", "columns[0]: no 'match' (the column-name globs)"),
    ("columns:\n  - {match: [], abs: 0.01}",
     "match must be a glob or a non-empty list of globs, got []"),
    ("columns:\n  - {match: acc, files: [3], abs: 0.01}",
     "files must be a glob or a non-empty list"),
    ("columns:\n  - [acc, 0.01]", "columns[0]: a rule must be a mapping, got ['acc', 0.01]"),
    ("columns: []", "'columns' must be a non-empty list of rules"),
    ("colums:\n  - {match: acc, abs: 0.01}", "expected a mapping with a 'columns' list of rules"),
    ("columns:\n  - {match: acc, abs: 0.01}\nignore_claim: [x]", "unknown key(s) ['ignore_claim']"),
    ("columns:\n  - {match: acc, abs: 0.01}\nignore_claims: x",
     "ignore_claims must be a list of claim ids"),
    ("columns: [", "cannot read"),
])
def test_bad_tolerance_file(runs, tmp_path, text, message, capsys):
    path = tmp_path / "tol.yaml"
    path.write_text(text)
    assert compare(runs, "--tolerances", str(path)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"pabench.tools.compare: --tolerances {path}: ") and message in err, err


def test_missing_tolerance_file(runs, tmp_path, capsys):
    assert compare(runs, "--tolerances", str(tmp_path / "nope.yaml")) == 2
    assert "nope.yaml: cannot read" in capsys.readouterr().err


def test_shipped_tolerances():
    """workflow/config/tolerances.yaml loads, and its rules fall on the columns they are for."""
    tol = load(Path(__file__).parents[2] / "workflow" / "config" / "tolerances.yaml")

    def rule(rel, col):
        return tol.rule_for(rel, col).describe().split(": ", 1)[-1]

    assert rule("figures/avgcase/table1.csv", "seconds per point") == "ignored"
    assert rule("data/results/oodrb/history.csv", "images_per_s") == "ignored"
    assert rule("figures/oodrb/table1.csv", "ID accuracy (%)") == "abs 1"
    assert rule("figures/pa/table1.csv", "Test 3 acc") == "abs 1"
    assert rule("figures/oodrb/effective.csv", "effective (points)") == "abs 2"
    assert rule("data/results/dg/pa.csv", "accuracy_env0") == "abs 0.01"
    assert rule("data/results/oodrb/shifts.csv", "clean_robustness") == "abs 0.01"
    assert rule("figures/oodrb/table3.csv", "SE, ID (points)") == "abs 2"
    assert rule("data/results/dg/pa.csv", "logpa_exact") == "abs 0.1 or rel 0.02"
    assert rule("data/results/dg/pa.csv", "beta_exact") == "rel 0.05"
    assert rule("figures/avgcase/fig4.csv", "p") == "abs 0.1"
    assert rule("figures/oodrb/pa_correlation.csv", "p") == "exact (no rule)"   # a p-value
    assert rule("data/results/oodrb/history.csv", "trades_beta") == "exact (no rule)"
    assert tol.ignore_claims == {"avg-analytical-faster"}


def test_rows_in_another_order_are_matched_by_their_text_columns(runs, tol, capsys):
    """A table sorted by a measured value lists its rows in another order when a value moves
    within its tolerance: with tolerances the rows are paired by their text columns."""
    table = pd.DataFrame({"model": ["a", "b", "c"], "acc": [0.9, 0.8, 0.7]})
    table.to_csv(runs[0] / "figures" / "pa" / "ranked.csv", index=False)
    table.iloc[[1, 0, 2]].assign(acc=[0.8, 0.905, 0.7]).to_csv(
        runs[1] / "figures" / "pa" / "ranked.csv", index=False)
    assert compare(runs, "--tolerances", str(tol)) == 0
    out = capsys.readouterr().out
    assert "figures/pa/ranked.csv: rows matched by model (their order differs)" in out
    assert compare(runs) == 1                        # exact mode still compares by position
    capsys.readouterr()
    # Outside a limit after matching: the row is named by its own key.
    table.iloc[[1, 0, 2]].assign(acc=[0.8, 0.95, 0.7]).to_csv(
        runs[1] / "figures" / "pa" / "ranked.csv", index=False)
    assert compare(runs, "--tolerances", str(tol)) == 1
    assert "ranked.csv row 0 (model=a): column 'acc': 0.9 vs 0.95" in capsys.readouterr().out


def test_an_empty_table_compares_with_tolerances(runs, tol, capsys):
    for run in runs:
        pd.DataFrame(columns=["model", "acc"]).to_csv(run / "figures" / "pa" / "empty.csv",
                                                      index=False)
    assert compare(runs, "--tolerances", str(tol)) == 0


def test_rows_without_a_unique_text_key_stay_by_position(runs, tol, capsys):
    # TABLE's model column names irm twice: no key, so row 1 and row 2 are compared in place.
    TABLE.iloc[[0, 2, 1]].to_csv(runs[1] / "figures" / "pa" / "table1.csv", index=False)
    assert compare(runs, "--tolerances", str(tol)) == 1
    out = capsys.readouterr().out
    assert "rows matched" not in out
    assert "table1.csv row 1 (model=irm): column 'pa': '' vs -1.5" in out
