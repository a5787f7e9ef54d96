"""Model-selection tables (pandas only): Table 1 of the PA paper (selection by validation
accuracy vs by PA), selection on each validation split of Appendix E, and the thesis's average
and worst-case accuracy over the target domains."""
from __future__ import annotations

import pandas as pd

from pabench.core.io import read_table
from pabench.reporting.degenerate import COLUMN as DEGENERATE


def table1(inputs: dict, settings, tests, validation: str | None = None) -> pd.DataFrame:
    """Table 1: per algorithm and co-occurrence setting, the test accuracy (%) of the epoch
    selected by validation accuracy and the difference PA-selected minus accuracy-selected, as
    mean over seeds with their spread (std); selected on the `validation` split."""
    results = selected_on(read_table(inputs["results"]), validation)
    results = results.assign(diff=results.acc_best_pa - results.acc_best_acc)
    rows = []
    for algorithm, setting, d in _groups(results, settings):
        row = {"algorithm": algorithm.upper(), "setting": setting, "seeds": d.seed.nunique(),
               **_near_chance(d)}
        for k, env in enumerate(tests, start=1):
            e = d[d.env == env]
            row[f"Test {k} acc"] = f"{100 * e.acc_best_acc.mean():.1f}"
            row[f"Test {k} diff"] = f"{100 * e['diff'].mean():+.1f}"
            row[f"Test {k} std"] = f"{100 * e['diff'].std(ddof=0):.1f}"
        rows.append(row)
    return pd.DataFrame(rows)


def target_accuracy(inputs: dict, settings, tests, validation: str | None = None) -> pd.DataFrame:
    """The thesis's report of model selection (Section 3.1.4): per algorithm, co-occurrence
    setting and selection criterion (validation accuracy or PA), the average and the worst-case
    test accuracy (%) over the target domains `tests`, as mean and std over seeds.  The worst case
    is taken per seed (the selected model's lowest accuracy over the domains), then averaged."""
    results = selected_on(read_table(inputs["results"]), validation)
    results = results[results.env.isin(tests)]
    keys = ["algorithm", "setting", "seed", "env"]
    if results.duplicated(keys).any():  # e.g. several validation splits in one table: never mix
        raise ValueError(f"{inputs['results']}: more than one row per {', '.join(keys)}")
    rows = []
    for algorithm, setting, d in _groups(results, settings):
        per_seed = d.groupby("seed")
        if (per_seed.env.nunique() != len(tests)).any():
            raise ValueError(f"{algorithm} {setting}: a seed lacks some of the domains {list(tests)}")
        for criterion, column in (("accuracy", "acc_best_acc"), ("PA", "acc_best_pa")):
            average, worst = 100 * per_seed[column].mean(), 100 * per_seed[column].min()
            rows.append({"algorithm": algorithm.upper(), "setting": setting, "selected by": criterion,
                         "seeds": len(average), **_near_chance(d),
                         "average acc": round(average.mean(), 1),
                         "average std": round(average.std(ddof=0), 1),
                         "worst-case acc": round(worst.mean(), 1),
                         "worst-case std": round(worst.std(ddof=0), 1)})
    return pd.DataFrame(rows)


def selection_by_validation(inputs: dict, settings, tests, validations) -> pd.DataFrame:
    """Model selection on each validation split of Table 3 (Appendix E): per algorithm,
    validation split and co-occurrence setting, the test accuracy (%) averaged over the target
    domains `tests` of the epoch selected by validation accuracy and of the one selected by PA,
    and their difference (mean and std over seeds)."""
    results = read_table(inputs["results"])
    results = results[results.env.isin(tests)]
    rows = []
    for validation in validations:
        chosen = selected_on(results, validation)
        for algorithm, setting, d in _groups(chosen, settings):
            per_seed = d.groupby("seed")[["acc_best_acc", "acc_best_pa"]].mean() * 100
            diff = per_seed.acc_best_pa - per_seed.acc_best_acc
            rows.append({"algorithm": algorithm.upper(), "validation": validation, "setting": setting,
                         "seeds": len(per_seed), **_near_chance(d),
                         "acc-selected": round(per_seed.acc_best_acc.mean(), 1),
                         "PA-selected": round(per_seed.acc_best_pa.mean(), 1),
                         "diff": round(diff.mean(), 1), "diff std": round(diff.std(ddof=0), 1)})
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


def _groups(results: pd.DataFrame, settings):
    """(algorithm, setting, its rows) of every algorithm and co-occurrence setting with results,
    in the order of the results' algorithms and of `settings`."""
    for algorithm in dict.fromkeys(results.algorithm):
        for setting in settings:
            d = results[(results.algorithm == algorithm) & (results.setting == setting)]
            if not d.empty:
                yield algorithm, setting, d


def _near_chance(d: pd.DataFrame) -> dict:
    """How many seeds the results flag degenerate (reporting.degenerate): not evidence."""
    if DEGENERATE not in d.columns:
        return {}
    return {"seeds near chance": d[d[DEGENERATE].astype(bool)].seed.nunique()}
