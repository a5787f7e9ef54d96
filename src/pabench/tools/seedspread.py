"""Judge a run against a reference run by the spread over seeds:

    python -m pabench.tools.compare REF_RUN CAND_RUN --seed-spread [--also data/results]
                              [--tolerances FILE] [--alpha 0.01]

A run that trains its models on another device (a GPU against a CPU) gets other models, which
differ from the reference's like another seed's: per-value tolerances (pabench.tools.tolerances) do
not hold for them.  This mode asks instead whether the candidate's seeds look like more seeds of
the reference run.

Seed-resolved tables.  A CSV is seed-resolved when it has a `seed` column and each run has >= 2
seeds with the same number of rows each (the runs may have other seeds, and other numbers of
them).  The i-th row of every seed is one *cell* (a model, attack, eps, ...); a cell's text
columns must be the same for every seed, else the file is not seed-resolved.  Cells are paired
between the runs as pabench.tools.compare pairs rows (by their text columns where those name every
cell once, otherwise by position).  True/False counts as 1/0.  A numeric column is
- a *parameter* when each cell has one value for all its seeds in both runs (eps, n, lambda):
  compared per value, exactly or within its tolerance rule, like the text columns;
- *categorical* (CATEGORICAL, e.g. a predicted class) and varying over seeds: not judged, as a
  mean of class indices means nothing (its effect is in the accuracies, which are judged);
- otherwise *tested*, on its cells where every seed of both runs is finite, and where it has NaN
  or infinite values (beta* = inf) the share of seeds at each of them per cell is tested too.
  With a tolerance file, cells whose values over all seeds of both runs are within the column's
  rule of each other are left out (settled by the rule): float rounding that differs between
  devices has no seed spread to compare with.

The test (Läuter 1996; Läuter, Glimm and Kropf 1998) is exact for normal data whatever the
correlation between cells, and that correlation is strong: one seed's cells come from one
trained model.  Each cell is standardised by its spread over all seeds of both runs; the seeds'
standardised vectors are reduced to their first principal component, the direction in which the
seeds differ most (a systematic difference between the runs makes it separate them); and a
Student t-test with n_ref + n_cand - 2 degrees of freedom compares the candidate seeds' scores
with the reference seeds'.  The direction is found without knowing which run a seed is from,
which keeps the t-test exact (nearly so where settled cells are left out).  A column agrees when
p >= alpha / (number of tests) (Bonferroni), or when every cell's difference of seed means is
within the column's tolerance rule.  With 3 seeds per run the t-test has 4 degrees of freedom,
so only large differences are found (docs/cluster.md says how large).  The F test
that treats cells as independent (mean squared difference of seed means over its variance) gave
false alarms hundreds of times more often than its alpha in simulations with a seed effect
shared by the cells; its square root is printed as `rms`, the cells' differences of seed means in
units of their standard errors, to read, not to judge.

Files that are not seed-resolved (no seed column, one seed: tables aggregated over seeds, models
without a seed, claims) have no seed replicate to be judged by.  They are compared per value and
listed with their counts, but do not change the exit status; claims verdict changes are notes.
A one-seed file whose every row is in a seed-resolved file of its run is judged there: the
workflow writes each seed's results to a file named by the seed, then merges them (with other
seeds, those files are in one run only).  Any other file in one run only, and a difference in
the structure, text or parameters of a seed-resolved file, is a difference, as in
pabench.tools.compare.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from pabench.tools.csvdiff import (CLAIMS, FIGURES, KEY_COLUMNS, Report, check_column, compare_claims,
                                   compare_csv, csv_files, match_rows, number, read_cells)
from pabench.tools.tolerances import EXACT, TIMING_COLUMNS, Rule, Tolerances, is_timing

SEED = "seed"
# Class indices (globs on the lower-case column name): their mean over seeds means nothing.
CATEGORICAL = ("label", "*_label", "class", "pred_*", "predicted*")
# Without a tolerance file: every value exactly, except the columns that time the run.
EXACT_BUT_TIMINGS = Tolerances(Path("(exact)"), (Rule(TIMING_COLUMNS, ignore=True, index=0),))
WORST = 3                     # cells shown per failing column
_POS = "\x00cell"             # the candidate's cell positions, carried through match_rows


class SeedSpreadError(ValueError):
    """Input this mode cannot judge (exit status 2)."""


@dataclass
class Seeded:
    """One run's seed-resolved table."""
    seeds: list[str]
    cells: pd.DataFrame               # the first seed's rows as text, seed column left out
    values: dict[str, np.ndarray]     # the numeric columns, (cells, seeds)
    text: list[str]                   # the other columns, the same for every seed


@dataclass
class ColumnTest:
    rel: str
    column: str
    cells: int
    seeds: tuple[int, int]            # (reference, candidate)
    t: float
    p: float
    rms: float
    worst: list[str]                  # the cells that differ most, described
    within_rule: str = ""             # the rule every cell's mean difference is within, if any
    settled: int = 0                  # cells left out: all their values within the rule

    def line(self, threshold: float) -> str:
        settled = f" (+{self.settled} within the rule)" if self.settled else ""
        return (f"{self.rel} column {self.column!r}: {self.cells} cells{settled}, seeds "
                f"{self.seeds[0]} vs {self.seeds[1]}: t {self.t:.3g} ({sum(self.seeds) - 2} df), "
                f"p {self.p:.2g} {'<' if self.p < threshold else '>='} {threshold:.2g}, "
                f"rms {self.rms:.3g} SE")


@dataclass
class SeedReport:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tests: list[ColumnTest] = field(default_factory=list)
    judged: list[str] = field(default_factory=list)               # the seed-resolved files
    cells: int = 0
    parameters: int = 0                 # text and parameter values compared per value
    unjudged: list[tuple[str, str, Report]] = field(default_factory=list)  # file, why, report
    merged: dict[str, list[str]] = field(default_factory=dict)    # merged file -> its pieces
    claims: int = 0
    threshold: float = 0.0

    @property
    def failed(self) -> list[ColumnTest]:
        return [t for t in self.tests if t.p < self.threshold and not t.within_rule]


def _numbers(column: pd.Series) -> np.ndarray | None:
    """The column as floats (True/False as 1/0, empty as NaN), or None if a cell is text."""
    out = []
    for text in column:
        x = {"True": 1.0, "False": 0.0}.get(text, number(text))
        if x is None:
            return None
        out.append(x)
    return np.array(out, dtype=float)


def resolve(table: pd.DataFrame) -> Seeded | str:
    """The table split into cells and seeds, or why it cannot be."""
    if SEED not in table.columns:
        return "no seed column"
    seeds = list(dict.fromkeys(table[SEED]))
    if len(seeds) < 2:
        return f"one seed ({seeds[0]})" if seeds else "no rows"
    groups = [table[table[SEED] == s].reset_index(drop=True) for s in seeds]
    if len({len(g) for g in groups}) > 1:
        sizes = ", ".join(f"seed {s}: {len(g)}" for s, g in zip(seeds, groups))
        return f"unequal rows per seed ({sizes})"
    values, text = {}, []
    for col in table.columns.drop(SEED):
        per_seed = [_numbers(g[col]) for g in groups]
        if any(x is None for x in per_seed):
            text.append(col)
            if any(not g[col].equals(groups[0][col]) for g in groups[1:]):
                return f"text column {col!r} differs between seeds"
        else:
            values[col] = np.column_stack(per_seed)
    return Seeded(seeds, groups[0].drop(columns=SEED), values, text)


def pc_ttest(ref: np.ndarray, cand: np.ndarray) -> tuple[float, float]:
    """Läuter's principal-component t-test of two (cells, seeds) arrays of finite values:
    (|t|, p)."""
    nr, nc = ref.shape[1], cand.shape[1]
    x = np.concatenate([ref, cand], axis=1)
    x = x - x.mean(axis=1, keepdims=True)
    spread = np.sqrt((x ** 2).sum(axis=1))
    z = x[spread > 0] / spread[spread > 0, None]
    if not len(z):
        return 0.0, 1.0                               # every value the same
    vals, vecs = np.linalg.eigh(z.T @ z)              # seeds x seeds: the same components
    top = math.sqrt(max(vals[-1], 0.0))
    scores = vecs[:, -1] * top                        # each seed's first principal component
    a, b = scores[:nr], scores[nr:]
    df = nr + nc - 2
    diff = b.mean() - a.mean()
    se = math.sqrt((((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()) / df
                   * (1 / nr + 1 / nc))
    tiny = 1e-9 * top                                 # rounding of the eigenvectors
    if abs(diff) <= tiny:
        return 0.0, 1.0
    if se <= tiny:           # each run's seeds the same along the component: a real difference
        return math.inf, 0.0
    t = abs(diff) / se
    return t, float(2 * stats.t.sf(t, df))


def cell_differences(ref: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell: the difference of seed means, and its variance from the seeds (pooled)."""
    nr, nc = ref.shape[1], cand.shape[1]
    pooled = (ref.var(axis=1, ddof=1) * (nr - 1) + cand.var(axis=1, ddof=1) * (nc - 1)) \
        / (nr + nc - 2)
    return cand.mean(axis=1) - ref.mean(axis=1), pooled * (1 / nr + 1 / nc)


def run_test(rel: str, column: str, ref: np.ndarray, cand: np.ndarray, names: list[str],
             rule: Rule | None, settled: int = 0) -> ColumnTest | None:
    """One column's test on its cells (rows of ref and cand, named by names); None when no cell
    varies (nothing to test)."""
    if not len(ref) or np.ptp(np.concatenate([ref, cand], axis=1), axis=1).max() == 0:
        return None
    t, p = pc_ttest(ref, cand)
    d, var = cell_differences(ref, cand)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(var > 0, d / np.sqrt(var), np.sign(d) * np.inf)
    worst = [f"{names[i]}: {ref[i].mean():.4g} vs {cand[i].mean():.4g} ({z[i]:+.3g} SE)"
             for i in np.argsort(-np.abs(np.nan_to_num(z)))[:WORST] if d[i] != 0]
    means = zip(ref.mean(axis=1), cand.mean(axis=1))
    within = rule.describe() if rule is not None and rule.index is not None \
        and all(rule.within(a, b) for a, b in means) else ""
    rms = math.sqrt(float((d ** 2).sum() / var.sum())) if var.sum() > 0 \
        else (math.inf if d.any() else 0.0)
    return ColumnTest(rel, column, len(d), (ref.shape[1], cand.shape[1]), t, p, rms, worst,
                      within, settled)


def cell_names(cells: pd.DataFrame, candidates: list[str]) -> list[str]:
    """'cell i (column=value, ...)' by up to KEY_COLUMNS candidate columns, each one that tells
    more cells apart than those before it (so not a column with one value in the whole file)."""
    keys, distinct = [], 1
    for col in candidates:
        if len(keys) < KEY_COLUMNS and len(cells[keys + [col]].drop_duplicates()) > distinct:
            keys.append(col)
            distinct = len(cells[keys].drop_duplicates())
    named = [", ".join(f"{k}={cells[k].iloc[i]}" for k in keys) for i in range(len(cells))]
    return [f"cell {i}" + (f" ({n})" if keys else "") for i, n in enumerate(named)]


def _constant(x: np.ndarray) -> bool:
    """Each cell has one value for all its seeds (NaN equal to NaN)."""
    return np.array_equal(x, np.repeat(x[:, :1], x.shape[1], axis=1), equal_nan=True)


def judge_file(rel: str, ref: Seeded, cand: Seeded, tol: Tolerances, rep: SeedReport) -> None:
    """Tests, and per-value comparisons of text and parameters, for one seed-resolved file."""
    rep.judged.append(rel)
    ca, cb = [*ref.text, *ref.values], [*cand.text, *cand.values]
    if set(ca) != set(cb):
        rep.problems.append(f"{rel}: columns differ (only reference: "
                            f"{[c for c in ca if c not in cb]}, only candidate: "
                            f"{[c for c in cb if c not in ca]})")
    m = len(ref.cells)
    if m != len(cand.cells):
        rep.problems.append(f"{rel}: {m} cells (rows per seed) in the reference, "
                            f"{len(cand.cells)} in the candidate")
        return
    rep.cells += m
    keyed = cand.cells[cand.text].assign(**{_POS: [str(i) for i in range(m)]})
    order = match_rows(ref.cells[ref.text], keyed, rel, rep)[_POS].astype(int).to_numpy()
    cand_cells = cand.cells.iloc[order].reset_index(drop=True)
    params = [c for c in ca if c in ref.values and c in cand.values
              and _constant(ref.values[c]) and _constant(cand.values[c])]
    names = cell_names(ref.cells, [c for c in ca if c in ref.text or c in params])
    for col in [c for c in ca if c in cb]:
        rule = tol.rule_for(rel, col)
        if rule.ignore or is_timing(col):
            continue
        if (col in ref.text) != (col in cand.text):
            rep.problems.append(f"{rel}: column {col!r} is text in one run, numbers in the other")
        elif col in ref.text or col in params:
            rule = EXACT if col in ref.text else rule
            rep.parameters += m
            outside, _ = check_column(ref.cells[col], cand_cells[col], rule)
            rep.problems += [f"{rel} {names[i]}: column {col!r}: {why} ({rule.describe()})"
                             for i, why in outside]
        elif any(fnmatchcase(col.lower(), glob) for glob in CATEGORICAL):
            rep.notes.append(f"{rel}: column {col!r} is categorical and varies over seeds: "
                             f"not judged")
        else:
            judge_column(rel, col, ref.values[col], cand.values[col][order], names, rule, rep)


def judge_column(rel: str, col: str, xr: np.ndarray, xc: np.ndarray, names: list[str],
                 rule: Rule, rep: SeedReport) -> None:
    """The test of the finite values, then of the share of each non-finite kind."""
    finite = np.isfinite(xr).all(axis=1) & np.isfinite(xc).all(axis=1)
    both = np.concatenate([xr, xc], axis=1)
    settled = np.array([rule.index is not None and bool(ok) and rule.within(lo, hi)
                        for ok, lo, hi in zip(finite, both.min(axis=1), both.max(axis=1))],
                       dtype=bool)
    keep = finite & ~settled
    tests = [run_test(rel, col, xr[keep], xc[keep], [n for n, k in zip(names, keep) if k], rule,
                      int(settled.sum()))]
    for label, kind in (("nan", np.isnan), ("inf", np.isposinf), ("-inf", np.isneginf)):
        if kind(xr).any() or kind(xc).any():
            tests.append(run_test(rel, f"{col} [share {label}]", kind(xr).astype(float),
                                  kind(xc).astype(float), names, None))
    rep.tests += [t for t in tests if t is not None]


def _rows(table: pd.DataFrame, cols: list[str]) -> set[tuple[str, ...]]:
    return set(map(tuple, table[cols].to_numpy().tolist()))


def merged_into(table: pd.DataFrame, run: int, seeded: dict, tables: dict) -> str | None:
    """The seed-resolved file that holds every row of a one-seed table of run 0 (the reference)
    or 1 (the candidate), on the table's columns, as text; None if there is none.  The workflow
    writes each seed's results to a file of its own (named by the seed), then merges them."""
    if SEED not in table.columns or table[SEED].nunique() != 1:
        return None
    cols = list(table.columns)
    return next((merged for merged in seeded
                 if set(cols) <= set(tables[merged][run].columns)
                 and _rows(table, cols) <= _rows(tables[merged][run], cols)), None)


def compare_seed_spread(ref: Path, cand: Path, also: list[str] = (),
                        tol: Tolerances | None = None, alpha: float = 0.01) -> SeedReport:
    rep, shared, alone = SeedReport(), [], []
    for rel_dir in [FIGURES, *also]:
        fa, fb = csv_files(ref, rel_dir), csv_files(cand, rel_dir)
        alone += [(rel, 0) for rel in sorted(fa - fb)] + [(rel, 1) for rel in sorted(fb - fa)]
        shared += sorted(rel for rel in fa & fb if rel != CLAIMS)
    tables, seeded, why = {}, {}, {}
    for rel in shared:
        try:
            tables[rel] = a, b = read_cells(ref / rel), read_cells(cand / rel)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
            why[rel] = "not readable as a table"
            continue
        ra, rb = resolve(a), resolve(b)
        if isinstance(ra, Seeded) and isinstance(rb, Seeded):
            seeded[rel] = ra, rb
            continue
        why[rel] = ra if ra == rb else "; ".join(
            f"{run}: {r if isinstance(r, str) else 'seed-resolved'}"
            for run, r in (("reference", ra), ("candidate", rb)))
        if not why[rel].startswith(("no seed column", "one seed")):
            rep.notes.append(f"{rel}: not seed-resolved ({why[rel]}): compared per value")
    if not seeded:
        raise SeedSpreadError(
            f"no CSV file is seed-resolved in both runs (a {SEED!r} column, >= 2 seeds with as "
            f"many rows each): {len(shared)} file(s) in both runs, none to judge")
    tol_used = tol or EXACT_BUT_TIMINGS
    for rel, (ra, rb) in seeded.items():
        judge_file(rel, ra, rb, tol_used, rep)
    for rel, reason in why.items():
        merged = {merged_into(t, run, seeded, tables) for run, t in enumerate(tables.get(rel, ()))}
        if len(merged) == 1 and None not in merged:
            rep.merged.setdefault(merged.pop(), []).append(rel)
            continue
        sub = Report()
        compare_csv(ref, cand, rel, sub, tol_used)
        rep.unjudged.append((rel, reason, sub))
    # A file of one run: a difference, unless it is a seed's piece of a seed-resolved file
    # (erm-s3.csv against erm-s0.csv when the runs have other seeds).
    for rel, run in alone:
        try:
            merged = merged_into(read_cells((ref, cand)[run] / rel), run, seeded, tables)
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
            merged = None
        if merged:
            rep.merged.setdefault(merged, []).append(rel)
        else:
            rep.problems.append(f"{rel}: only in {(ref, cand)[run]}")
    claims = Report()
    rep.claims = compare_claims(ref, cand, claims, tol)
    rep.notes += claims.notes + [f"{p} (claims are not judged by seed spread)"
                                 for p in claims.problems]
    rep.threshold = alpha / max(len(rep.tests), 1)
    rep.notes += [f"{t.rel} column {t.column!r}: p {t.p:.2g}, but every cell's difference of "
                  f"seed means is within {t.within_rule}"
                  for t in rep.tests if t.p < rep.threshold and t.within_rule]
    return rep


def print_report(rep: SeedReport, ref: Path, cand: Path, dirs: list[str],
                 tol_path: Path | None, alpha: float) -> int:
    """The report on stdout; the exit status."""
    print(f"compared {ref} (reference) with {cand} (candidate) by seed spread, dirs: "
          f"{', '.join(dirs)}" + (f"; tolerances: {tol_path}" if tol_path else ""))
    print(f"  seed-resolved: {len(rep.judged)} CSV files, {rep.cells} cells; {len(rep.tests)} "
          f"tests, each at p < alpha / tests = {alpha:g} / {len(rep.tests)} = "
          f"{rep.threshold:.2g}; {rep.parameters} text and parameter values compared per value")
    print("  tests (t: the runs' difference along the seeds' first principal component; rms: the "
          "cells' differences of seed means in their standard errors):")
    failed = rep.failed
    for t in sorted(rep.tests, key=lambda t: (t.rel, t.column)):
        print(f"    {'FAIL' if t in failed else 'ok  '} {t.line(rep.threshold)}")
    if rep.merged:
        print(f"  judged in the seed-resolved files that hold their rows: "
              f"{sum(map(len, rep.merged.values()))} single-seed file(s)")
        for merged, pieces in sorted(rep.merged.items()):
            print(f"    {merged}: {len(pieces)} ({pieces[0]}, ...)")
    if rep.unjudged:
        outside = sum(len(r.problems) for _, _, r in rep.unjudged)
        values = sum(r.values for _, _, r in rep.unjudged)
        how = f"within {tol_path}" if tol_path else "exactly"
        print(f"  not judged by seed spread (no seed replicate; not in the exit status), compared "
              f"per value {how}: {len(rep.unjudged)} file(s), {outside} difference(s) in "
              f"{values} values")
        for rel, why, r in rep.unjudged:
            print(f"    {rel} ({why}): {len(r.problems)} difference(s) in {r.values} values")
    print(f"  {rep.claims} claims compared (verdict changes are notes)")
    for note in rep.notes:
        print(f"  note: {note}")
    for t in failed:
        print(f"  DIFF: {t.line(rep.threshold)}; cells differing most: {'; '.join(t.worst)}")
    for problem in rep.problems:
        print(f"  DIFF: {problem}")
    if failed or rep.problems:
        print(f"DIFFERENT: {len(failed)} of {len(rep.tests)} tested column(s) beyond the seed "
              f"spread, {len(rep.problems)} other difference(s)")
        return 1
    print(f"WITHIN SEED SPREAD: every tested column ({len(rep.tests)}), and every text and "
          f"parameter value of the seed-resolved files; {len(rep.unjudged)} file(s) not judged")
    return 0
