"""pabench.tools.compare --seed-spread (pabench.tools.seedspread) on small runs drawn from numpy: per-cell
effects plus seed noise, and a per-seed effect shared by all cells of a seed (one trained model)."""
import numpy as np
import pandas as pd
import pytest

from pabench.tools.compare import main
from pabench.tools.seedspread import compare_seed_spread, pc_ttest

MODELS, EPS = ["erm", "irm", "lisa", "mixup"], [0.1, 0.2, 0.3]
SIGMA = 0.02                                   # seed noise of one cell
SE = SIGMA * np.sqrt(2 / 3)                    # standard error of a difference of 3-seed means


def table(seeds, draw=0, shift=0.0, shared=0.5):
    """One row per (seed, model, eps): acc and loss = a per-cell effect (the same in every run) +
    a seed effect shared by the seed's cells + cell noise; eps and n are parameters."""
    effects = np.random.default_rng(99).uniform(0.6, 0.9, size=(len(MODELS), len(EPS)))
    rows = []
    for seed in seeds:
        rng = np.random.default_rng([draw, seed])
        common = rng.normal()
        for i, model in enumerate(MODELS):
            for j, eps in enumerate(EPS):
                noise = SIGMA * (np.sqrt(shared) * common
                                 + np.sqrt(1 - shared) * rng.normal(size=2))
                rows.append({"model": model, "seed": seed, "eps": eps, "n": 100,
                             "acc": effects[i, j] + noise[0] + shift,
                             "loss": 1 - effects[i, j] + noise[1]})
    return pd.DataFrame(rows)


def make_run(root, results, summary=None):
    """A finished run: data/results/dg.csv (seed-resolved) and figures/summary.csv (no seed)."""
    (root / "figures").mkdir(parents=True, exist_ok=True)
    (root / "data" / "results").mkdir(parents=True, exist_ok=True)
    results.to_csv(root / "data" / "results" / "dg.csv", index=False)
    summary = results.groupby("model", sort=False)[["acc"]].mean().reset_index() \
        if summary is None else summary
    summary.to_csv(root / "figures" / "summary.csv", index=False)
    return root


@pytest.fixture
def runs(tmp_path):
    """Two runs of the same distribution: seeds 0, 1, 2 against 3, 4, 5 (a CPU-vs-CPU control)."""
    return (make_run(tmp_path / "ref", table([0, 1, 2])),
            make_run(tmp_path / "cand", table([3, 4, 5])))


def spread(runs, *extra):
    return main([str(runs[0]), str(runs[1]), "--also", "data/results", "--seed-spread", *extra])


def test_runs_of_the_same_distribution_agree(runs, capsys):
    assert spread(runs) == 0
    out = capsys.readouterr().out
    assert "seed-resolved: 1 CSV files, 12 cells; 2 tests" in out
    assert "ok   data/results/dg.csv column 'acc': 12 cells, seeds 3 vs 3" in out
    # eps and n: parameters, compared per value (the model column too)
    assert "36 text and parameter values compared per value" in out
    # the figure's table has no seed column: compared per value, listed, not in the exit status
    assert "figures/summary.csv (no seed column): 4 difference(s) in 8 values" in out
    assert "WITHIN SEED SPREAD" in out


def test_a_shift_of_a_few_standard_errors_is_reported(runs, capsys):
    make_run(runs[1], table([3, 4, 5], shift=4 * SE))
    assert spread(runs) == 1
    out = capsys.readouterr().out
    assert "DIFF: data/results/dg.csv column 'acc': 12 cells, seeds 3 vs 3" in out
    assert "ok   data/results/dg.csv column 'loss'" in out
    assert "DIFFERENT: 1 of 2 tested column(s) beyond the seed spread, 0 other difference(s)" in out
    # the worst cells are named by the columns that tell them apart
    assert "cells differing most: cell " in out and "(model=" in out and ", eps=" in out


def test_per_value_tolerances_reject_what_the_seed_spread_accepts(runs, tmp_path, capsys):
    """The motivating case: another seed's values are outside per-value limits."""
    tol = tmp_path / "tol.yaml"
    tol.write_text("columns:\n  - {match: [acc, loss], abs: 0.005}\n")
    per_value = [str(runs[0]), str(runs[1]), "--also", "data/results", "--tolerances", str(tol)]
    assert main(per_value) == 1
    capsys.readouterr()
    assert spread(runs, "--tolerances", str(tol)) == 0


def test_parameters_are_compared_per_value_with_their_rule(runs, tmp_path, capsys):
    cand = table([3, 4, 5])
    cand.loc[cand["eps"] == 0.2, "eps"] = 0.21     # every seed: still a parameter
    make_run(runs[1], cand)
    assert spread(runs) == 1
    out = capsys.readouterr().out
    assert "DIFF: data/results/dg.csv cell 1 (model=erm, eps=0.2): column 'eps': 0.2 vs 0.21" \
           ", |diff| 0.01 > limit 0 (exact (no rule))" in out
    assert out.count("column 'eps'") == 4          # one per model
    tol = tmp_path / "tol.yaml"
    tol.write_text("columns:\n  - {match: eps, abs: 0.02}\n")
    assert spread(runs, "--tolerances", str(tol)) == 0


def test_cells_are_paired_by_their_text_columns(runs, capsys):
    """Cells listed in another order (the same order for every seed) are paired by their text
    columns where those name each cell once, as pabench.tools.compare pairs rows."""
    for root, seeds in zip(runs, ([0, 1, 2], [3, 4, 5])):
        t = table(seeds)
        t["cell"] = t["model"] + "@" + t["eps"].astype(str)
        if seeds[0] == 3:                          # the candidate lists its cells backwards
            t = t.iloc[::-1].sort_values("seed", kind="stable")
        make_run(root, t)
    assert spread(runs) == 0
    assert "data/results/dg.csv: rows matched by model, cell (their order differs)" \
        in capsys.readouterr().out


def test_unequal_rows_per_seed_fall_back_with_a_note(runs, capsys):
    make_run(runs[1], table([3, 4, 5]).drop(index=30))             # a row of seed 5
    # Another table, seed-resolved, with 5 seeds in one run and 3 in the other.
    table([0, 1, 2, 6, 7]).to_csv(runs[0] / "figures" / "extra.csv", index=False)
    table([3, 4, 5]).to_csv(runs[1] / "figures" / "extra.csv", index=False)
    assert spread(runs) == 0
    out = capsys.readouterr().out
    assert "note: data/results/dg.csv: not seed-resolved (reference: seed-resolved; candidate: " \
           "unequal rows per seed (seed 3: 12, seed 4: 12, seed 5: 11)): compared per value" in out
    assert "    data/results/dg.csv (reference: seed-resolved; candidate: unequal rows per seed " \
           "(seed 3: 12, seed 4: 12, seed 5: 11)): 1 difference(s) in 0 values" in out
    assert "ok   figures/extra.csv column 'acc': 12 cells, seeds 5 vs 3: t " in out


def test_a_table_without_seed_column_is_listed_not_judged(runs, capsys):
    summary = table([3, 4, 5]).groupby("model", sort=False)[["acc"]].mean().reset_index()
    make_run(runs[1], table([3, 4, 5]), summary=summary.assign(acc=summary["acc"] + 0.5))
    assert spread(runs) == 0
    out = capsys.readouterr().out
    assert "not judged by seed spread (no seed replicate; not in the exit status), compared per " \
           "value exactly: 1 file(s), 4 difference(s) in 8 values" in out
    assert "    figures/summary.csv (no seed column): 4 difference(s) in 8 values" in out


def test_per_seed_pieces_are_judged_in_their_merged_table(runs, capsys):
    """The workflow writes each seed's rows to a file named by the seed, then merges them: with
    other seeds, the pieces exist in one run only."""
    for root, seeds in zip(runs, ([0, 1, 2], [3, 4, 5])):
        t = table(seeds)
        (root / "data" / "results" / "dg").mkdir()
        for seed in seeds:
            t[t["seed"] == seed].to_csv(root / "data" / "results" / "dg" / f"s{seed}.csv",
                                        index=False)
    assert spread(runs) == 0
    out = capsys.readouterr().out
    assert "judged in the seed-resolved files that hold their rows: 6 single-seed file(s)" in out
    assert "only in" not in out
    # A piece whose rows are not in the merged table of its run is a difference.
    table([9]).to_csv(runs[1] / "data" / "results" / "dg" / "s9.csv", index=False)
    assert spread(runs) == 1
    assert f"DIFF: data/results/dg/s9.csv: only in {runs[1]}" in capsys.readouterr().out


def test_missing_file_is_a_difference(runs, capsys):
    (runs[1] / "figures" / "summary.csv").unlink()
    assert spread(runs) == 1
    out = capsys.readouterr().out
    assert f"DIFF: figures/summary.csv: only in {runs[0]}" in out
    assert "DIFFERENT: 0 of 2 tested column(s) beyond the seed spread, 1 other difference(s)" in out


def with_beta(t, inf_models=()):
    """beta = 10 acc; inf (a model agreeing perfectly) for a random third of mixup's rows, and
    for every row of inf_models."""
    inf = np.random.default_rng(list(t["seed"].unique())).random(len(t)) < 1 / 3
    inf = (inf & (t["model"] == "mixup")) | t["model"].isin(inf_models)
    return t.assign(beta=np.where(inf, np.inf, 10 * t["acc"]))


def test_non_finite_values_and_their_share(runs, capsys):
    ref, cand = with_beta(table([0, 1, 2])), with_beta(table([3, 4, 5]))
    make_run(runs[0], ref)
    make_run(runs[1], cand)
    assert spread(runs) == 0
    out = capsys.readouterr().out
    # the values are tested on the cells finite in every seed of both runs
    finite = [np.isfinite(t.pivot_table("beta", ["model", "eps"], "seed")).all(axis=1)
              for t in (ref, cand)]
    cells = int((finite[0] & finite[1]).sum())
    assert 9 <= cells < 12 and f"column 'beta': {cells} cells" in out
    assert "ok   data/results/dg.csv column 'beta [share inf]': 12 cells" in out
    make_run(runs[1], with_beta(table([3, 4, 5]), inf_models=["erm"]))   # inf in every seed
    assert spread(runs) == 1
    assert "DIFF: data/results/dg.csv column 'beta [share inf]'" in capsys.readouterr().out


def test_rounding_without_seed_spread_is_settled_by_the_rule(runs, tmp_path, capsys):
    """max_linf: eps 0.1 is 0.1000000089 on one device, 0.1000000238 on the other, in every seed
    (no spread to compare with); exactly, that is a difference, within a rule it is not."""
    ref, cand = table([0, 1, 2]), table([3, 4, 5])
    ref["max_linf"], cand["max_linf"] = 0.1000000089, 0.1000000238
    for t in (ref, cand):                          # minimal attacks: below eps, seed-dependent
        t.loc[t["eps"] == 0.3, "max_linf"] = t["acc"] / 10
    make_run(runs[0], ref)
    make_run(runs[1], cand)
    assert spread(runs) == 1
    assert "DIFF: data/results/dg.csv column 'max_linf': 12 cells" in capsys.readouterr().out
    tol = tmp_path / "tol.yaml"
    tol.write_text("columns:\n  - {match: max_linf, abs: 1.0e-5}\n")
    assert spread(runs, "--tolerances", str(tol)) == 0
    assert "column 'max_linf': 4 cells (+8 within the rule)" in capsys.readouterr().out


def test_a_shift_within_the_rule_is_a_note(runs, tmp_path, capsys):
    make_run(runs[0], table([0, 1, 2], shared=0))
    make_run(runs[1], table([3, 4, 5], shared=0, shift=5 * SE))
    assert spread(runs) == 1
    assert "DIFF: data/results/dg.csv column 'acc'" in capsys.readouterr().out
    tol = tmp_path / "tol.yaml"
    tol.write_text("columns:\n  - {match: acc, abs: 0.12}\n")
    assert spread(runs, "--tolerances", str(tol)) == 0
    out = capsys.readouterr().out
    assert "note: data/results/dg.csv column 'acc': p " in out
    assert "but every cell's difference of seed means is within rule 0: abs 0.12" in out


def test_categorical_columns_and_flags(runs, capsys):
    ref, cand = table([0, 1, 2]), table([3, 4, 5])
    for t in (ref, cand):
        t["pred_class"] = (t["acc"] * 1000).astype(int) % 10        # varies over seeds
        t["degenerate"] = t["seed"] % 2 == 0                          # True/False: a share
    make_run(runs[0], ref)
    make_run(runs[1], cand)
    spread(runs)
    out = capsys.readouterr().out
    assert "note: data/results/dg.csv: column 'pred_class' is categorical and varies over " \
           "seeds: not judged" in out
    assert "column 'degenerate'" in out


def test_claims_verdict_changes_are_notes(runs, capsys):
    for root, verdict in zip(runs, ("reproduced", "not reproduced")):
        pd.DataFrame({"id": ["c1"], "verdict": [verdict], "measured": ["x"]}).to_csv(
            root / "figures" / "claims.csv", index=False)
    assert spread(runs) == 0
    out = capsys.readouterr().out
    assert "1 claims compared" in out
    assert "note: claim c1: verdict changed: 'reproduced' -> 'not reproduced' (claims are not " \
           "judged by seed spread)" in out


@pytest.mark.parametrize("args, message", [
    (["--alpha", "0"], "--alpha 0: must be in (0, 1)"),
    (["--alpha", "1.5"], "--alpha 1.5: must be in (0, 1)"),
    (["--alpha", "nan"], "--alpha nan: must be in (0, 1)"),
    (["--timings"], "--seed-spread does not judge the columns that time the run (--timings)"),
])
def test_bad_arguments(runs, args, message, capsys):
    assert spread(runs, *args) == 2
    assert capsys.readouterr().err == f"pabench.tools.compare: {message}\n"


def test_alpha_needs_seed_spread(runs, capsys):
    assert main([str(runs[0]), str(runs[1]), "--alpha", "0.05"]) == 2
    assert "--alpha needs --seed-spread" in capsys.readouterr().err


def test_nothing_seed_resolved(runs, capsys):
    for root in runs:                              # one seed only in each run
        make_run(root, table([0]))
    assert spread(runs) == 2
    assert "pabench.tools.compare: --seed-spread: no CSV file is seed-resolved in both runs" \
        in capsys.readouterr().err


def test_false_alarms_are_rare(tmp_path):
    """50 comparisons of runs from one distribution at alpha 0.01: at most a few fail."""
    failed = 0
    for draw in range(50):
        ref = make_run(tmp_path / f"r{draw}", table([0, 1, 2], draw=draw))
        cand = make_run(tmp_path / f"c{draw}", table([3, 4, 5], draw=draw))
        failed += bool(compare_seed_spread(ref, cand, ["data/results"], alpha=0.01).failed)
    assert failed <= 3


def test_the_test_holds_its_level_when_cells_share_a_seed_effect():
    """A seed effect shared by all cells (one trained model) makes the cells' differences move
    together: the test still rejects about alpha of the time (a test that took the 40 cells for
    independent would reject far more often)."""
    rng = np.random.default_rng(0)
    p = np.array([pc_ttest(*(rng.normal(size=(1, 3)) + 0.3 * rng.normal(size=(40, 3))
                             for _ in range(2)))[1] for _ in range(2000)])
    assert 0.02 < (p < 0.05).mean() < 0.08
    # and it finds a shift of every cell by 3 standard errors of the noise
    shifted = [pc_ttest(rng.normal(size=(40, 3)), rng.normal(size=(40, 3)) + 3 * np.sqrt(2 / 3))[1]
               for _ in range(50)]
    assert np.mean(np.array(shifted) < 0.01) > 0.9
