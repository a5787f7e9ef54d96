"""Model-selection tables (pandas only): Table 1 of the PA paper (selection by validation
accuracy vs by PA), selection on each validation split of Appendix E, and the thesis's average
and worst-case accuracy over the target domains."""
from __future__ import annotations

import pandas as pd

from pabench.core.io import read_table
from pabench.reporting.degenerate import COLUMN as DEGENERATE

SOLVER_ORDER = ("adam", "exact")  # the paper's solver first


def table1(inputs: dict, settings, tests, validation: str | None = None) -> pd.DataFrame:
    """Table 1: per algorithm, co-occurrence setting and PA solver, the test accuracy (%) of the
    epoch selected by validation accuracy and the difference PA-selected minus
    accuracy-selected, as mean over seeds with their spread (std); selected on the `validation`
    split.  A seed whose criterion had no preference (its best validation value tied across
    epochs: log PA at its beta* = 0 floor in every epoch, say) is counted, not compared: the
    accuracy column averages the seeds with an accuracy preference, the difference the seeds
    where both criteria chose an epoch ("n/a" where none did)."""
    results = selected_on(read_table(inputs["results"]), validation)
    results = results.assign(diff=results.acc_best_pa - results.acc_best_acc)
    rows = []
    for algorithm, setting, solver, d in _groups(results, settings):
        compared = d[d["diff"].notna()]
        row = {"algorithm": algorithm.upper(), "setting": setting, **solver, "seeds": d.seed.nunique(),
               **_near_chance(d), **_no_preference(d), "compared": compared.seed.nunique()}
        for k, env in enumerate(tests, start=1):
            acc, diff = d[d.env == env].acc_best_acc.dropna(), compared[compared.env == env]["diff"]
            row[f"Test {k} acc"] = f"{100 * acc.mean():.1f}" if len(acc) else "n/a"
            row[f"Test {k} diff"] = f"{100 * diff.mean():+.1f}" if len(diff) else "n/a"
            row[f"Test {k} std"] = f"{100 * diff.std(ddof=0):.1f}" if len(diff) else "n/a"
        rows.append(row)
    return pd.DataFrame(rows)


def target_accuracy(inputs: dict, settings, tests, validation: str | None = None) -> pd.DataFrame:
    """The thesis's report of model selection (Section 3.1.4): per algorithm, co-occurrence
    setting and selection criterion (validation accuracy, or PA by each solver), the average
    and the worst-case test accuracy (%) over the target domains `tests`, as mean and std over
    the seeds whose criterion chose an epoch (`no preference`: the seeds whose best validation
    value was tied).  The worst case is taken per seed (the selected model's lowest accuracy
    over the domains), then averaged."""
    results = selected_on(read_table(inputs["results"]), validation)
    results = results[results.env.isin(tests)]
    keys = ["algorithm", "setting", "seed", "env"] + (["solver"] if "solver" in results.columns else [])
    if results.duplicated(keys).any():  # e.g. several validation splits in one table: never mix
        raise ValueError(f"{inputs['results']}: more than one row per {', '.join(keys)}")
    rows = []
    for algorithm, setting, d in _settings(results, settings):
        if (d.groupby(keys[4:] + ["seed"]).env.nunique() != len(tests)).any():
            raise ValueError(f"{algorithm} {setting}: a seed lacks some of the domains {list(tests)}")
        # Accuracy selects the same epoch whatever the PA solver: its rows once.
        criteria = [("accuracy", d.drop_duplicates(["seed", "env"]), "acc_best_acc")] + [
            ("PA" + (f" ({solver['PA solver']})" if solver else ""), rows_of, "acc_best_pa")
            for solver, rows_of in _solvers(d)]
        for criterion, rows_of, column in criteria:
            chosen = rows_of.dropna(subset=[column]).groupby("seed")[column]
            average, worst = 100 * chosen.mean(), 100 * chosen.min()
            rows.append({"algorithm": algorithm.upper(), "setting": setting, "selected by": criterion,
                         "seeds": d.seed.nunique(), **_near_chance(d),
                         "no preference": d.seed.nunique() - len(average),
                         **{name: round(v, 1) if len(average) else "n/a" for name, v in
                            (("average acc", average.mean()), ("average std", average.std(ddof=0)),
                             ("worst-case acc", worst.mean()), ("worst-case std", worst.std(ddof=0)))}})
    return pd.DataFrame(rows)


def selection_by_validation(inputs: dict, settings, tests, validations) -> pd.DataFrame:
    """Model selection on each validation split of Table 3 (Appendix E): per algorithm,
    validation split, co-occurrence setting and PA solver, the test accuracy (%) averaged over
    the target domains `tests` of the epoch selected by validation accuracy and of the one
    selected by PA, and their difference (mean and std over the seeds where both criteria chose
    an epoch; the others are counted as without preference, as in Table 1)."""
    results = read_table(inputs["results"])
    results = results[results.env.isin(tests)]
    rows = []
    for validation in validations:
        chosen = selected_on(results, validation)
        for algorithm, setting, solver, d in _groups(chosen, settings):
            per_seed = d.groupby("seed")[["acc_best_acc", "acc_best_pa"]].mean() * 100
            both = per_seed.dropna()
            diff = both.acc_best_pa - both.acc_best_acc
            rows.append({"algorithm": algorithm.upper(), "validation": validation, "setting": setting,
                         **solver, "seeds": len(per_seed), **_near_chance(d), **_no_preference(d),
                         **{name: round(v, 1) if len(both) else "n/a" for name, v in
                            (("acc-selected", both.acc_best_acc.mean()), ("PA-selected", both.acc_best_pa.mean()),
                             ("diff", diff.mean()), ("diff std", diff.std(ddof=0)))}})
    return pd.DataFrame(rows)


def selected_on(results: pd.DataFrame, validation: str | None) -> pd.DataFrame:
    """The rows of models selected on one validation split (results of runs that selected on
    several carry a `validation` column); all rows when there is no such column."""
    if "validation" not in results.columns or validation is None:
        return results
    rows = results[results.validation == validation]
    if rows.empty:
        raise ValueError(f"no model-selection results on validation split {validation!r} "
                         f"(there are {sorted(results.validation.unique())})")
    return rows


def _settings(results: pd.DataFrame, settings):
    """(algorithm, setting, its rows) of every algorithm and co-occurrence setting with results,
    in the order of the results' algorithms and of `settings`."""
    for algorithm in dict.fromkeys(results.algorithm):
        for setting in settings:
            d = results[(results.algorithm == algorithm) & (results.setting == setting)]
            if not d.empty:
                yield algorithm, setting, d


def _solvers(d: pd.DataFrame):
    """({"PA solver": solver}, its rows) per PA solver, adam (the paper's) first; results
    without a solver column are one group with an empty dict."""
    if "solver" not in d.columns:
        yield {}, d
        return
    for solver in sorted(set(d.solver), key=lambda s: (s not in SOLVER_ORDER, SOLVER_ORDER.index(s)
                                                       if s in SOLVER_ORDER else 0, s)):
        yield {"PA solver": solver}, d[d.solver == solver]


def _groups(results: pd.DataFrame, settings):
    """(algorithm, setting, {"PA solver": solver}, its rows) for every algorithm, setting and
    PA solver with results."""
    for algorithm, setting, d in _settings(results, settings):
        for solver, rows in _solvers(d):
            yield algorithm, setting, solver, rows


def _no_preference(d: pd.DataFrame) -> dict:
    """How many seeds a criterion selected no epoch for (its best validation value tied)."""
    return {f"no {name} preference": int(d.groupby("seed")[column].apply(lambda v: v.isna().all()).sum())
            for name, column in (("PA", "acc_best_pa"), ("acc.", "acc_best_acc"))}


def _near_chance(d: pd.DataFrame) -> dict:
    """How many seeds the results flag degenerate (reporting.degenerate): not evidence."""
    if DEGENERATE not in d.columns:
        return {}
    return {"seeds near chance": d[d[DEGENERATE].astype(bool)].seed.nunique()}
