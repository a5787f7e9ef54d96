"""Compare the CSV outputs of two finished workflow runs, value by value.

    python -m pabench.tools.compare BEFORE_DIR AFTER_DIR [--also data/results ...] [--tolerances FILE]
    python -m pabench.tools.compare REF_DIR CAND_DIR --seed-spread [--also ...] [--tolerances FILE]
                              [--alpha 0.01]

Checks every `*.csv` under `figures/` (recursively; `figures/timings.*` left out, they measure
the run itself) plus those under each `--also` directory: the same files, the same columns (by
name; a different order is only a note), the same number of rows and every value identical.
Numbers must be exactly equal (NaN equals NaN, an empty cell counts as NaN, inf equals inf) and
are parsed with Python's `float`, so "0.10" and "0.1" are equal; anything else must match as text.
Columns that time the run (`pabench.tools.tolerances.TIMING_COLUMNS`: seconds, images per second,
speed-ups) differ between any two runs: they are listed in a note, not compared (`--timings`
compares them too).  `figures/claims.csv` is checked claim by claim: verdict, measured text and
the other columns; the measured text of a claim marked `timed` (a speed ratio) is only a note.

With `--tolerances FILE` (e.g. workflow/config/tolerances.yaml, for a CPU run against a GPU run;
format in pabench.tools.tolerances) two numbers agree when they are within the limits of the first rule
that matches their column (columns no rule matches: exactly, as above); every value outside is
listed with its file, row (0-based, named by the row's first exactly compared columns), column,
both values and the limit, and a summary gives the largest absolute and relative deviation per
column.  Verdicts must still match (except claims the file names); a different `measured` text is
only a note, its numbers are those of the CSVs.

With `--seed-spread` (runs whose models were trained apart, e.g. on a GPU and a CPU, or with other
seeds) the tables with a `seed` column are judged by the spread over seeds instead of value by
value: pabench.tools.seedspread.

Exit status: 0 identical (within tolerances, within the seed spread), 1 differences (listed), 2
bad arguments or a bad tolerance file.  Reads CSVs only (pandas and numpy, scipy for
--seed-spread); never imports torch or the workflow.
"""
from __future__ import annotations

import argparse
import fnmatch
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pabench.tools.tolerances import EXACT, Rule, ToleranceError, Tolerances, is_timing, load

FIGURES = "figures"
CLAIMS = "figures/claims.csv"
EXCLUDE = ("figures/timings.*",)   # relative to the run directory
KEY_COLUMNS = 5                    # columns compared exactly that name a row in messages


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: int = 0
    rows: int = 0
    values: int = 0
    claims: int = 0
    # Tolerance mode: {(column, rule): Deviation}, ignored columns, indices of rules that matched.
    deviations: dict[tuple[str, str], "Deviation"] = field(default_factory=dict)
    ignored: set[str] = field(default_factory=set)
    timing: set[str] = field(default_factory=set)   # exact mode: timing columns not compared
    used_rules: set[int] = field(default_factory=set)


@dataclass
class Deviation:
    """One column's deviations (over every file where it is compared under the same rule)."""
    values: int = 0
    files: int = 0
    outside: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0

    def add(self, other: Deviation) -> None:
        self.values, self.files = self.values + other.values, self.files + other.files
        self.outside += other.outside
        self.max_abs = max(self.max_abs, other.max_abs)
        self.max_rel = max(self.max_rel, other.max_rel)


def _float(text: str) -> float | None:
    """The cell as a number (empty -> NaN), or None when it is not one."""
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def _read(path: Path) -> pd.DataFrame:
    # Every cell as its exact text: numbers are parsed later with float(), NaN kept as written.
    return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False)


def csv_files(run: Path, rel_dir: str) -> set[str]:
    """CSV paths (relative to the run, POSIX style) under run/rel_dir, exclusions left out."""
    root = run / rel_dir
    found = {p.relative_to(run).as_posix() for p in root.rglob("*.csv")} if root.is_dir() else set()
    return {f for f in found if not any(fnmatch.fnmatch(f, pat) for pat in EXCLUDE)}


def _same(sa: str, sb: str) -> bool:
    if sa == sb:
        return True
    xa, xb = _float(sa), _float(sb)
    if xa is None or xb is None:
        return False
    return xa == xb or (math.isnan(xa) and math.isnan(xb))


def compare_column(a: pd.Series, b: pd.Series) -> tuple[int, int, float | None]:
    """(number of differing rows, first differing row, max |a - b|) for one column of strings;
    the max is None unless every cell on both sides is a number."""
    same = np.array([_same(sa, sb) for sa, sb in zip(a, b)], dtype=bool)
    n_diff = int((~same).sum())
    first = int(np.argmin(same)) if n_diff else -1
    xa, xb = [_float(s) for s in a], [_float(s) for s in b]
    if any(x is None for x in xa + xb):
        return n_diff, first, None
    with np.errstate(invalid="ignore"):
        d = np.abs(np.array(xa, dtype=float) - np.array(xb, dtype=float))
    d[same] = 0.0          # equal infinities and NaN pairs give nan here, not a difference
    return n_diff, first, float(d.max()) if len(d) else 0.0


def _shown(text: str) -> str:
    return text if _float(text) is not None and text else repr(text)


def check_column(a: pd.Series, b: pd.Series, rule: Rule) -> tuple[list[tuple[int, str]], Deviation]:
    """Tolerance mode: the rows outside the rule's limits as (row, why) and the column's
    deviations; text, NaN and infinities must match exactly."""
    outside, dev = [], Deviation(values=len(a), files=1)
    for i, (sa, sb) in enumerate(zip(a, b)):
        if _same(sa, sb):
            continue
        xa, xb = _float(sa), _float(sb)
        if xa is None or xb is None or not (math.isfinite(xa) and math.isfinite(xb)):
            outside.append((i, f"{_shown(sa)} vs {_shown(sb)}, not two finite numbers"))
            continue
        diff = abs(xa - xb)
        dev.max_abs = max(dev.max_abs, diff)
        dev.max_rel = max(dev.max_rel, diff / max(abs(xa), abs(xb)))
        if not rule.within(xa, xb):
            outside.append((i, f"{sa} vs {sb}, |diff| {diff:.6g} > limit {rule.limit(xa, xb):.6g}"))
    dev.outside = len(outside)
    return outside, dev


def compare_within(a: pd.DataFrame, b: pd.DataFrame, rel: str, cols: list[str], tol: Tolerances,
                   rep: Report) -> None:
    """Tolerance mode for one table: every value outside its column's limits is a problem."""
    rules = {col: tol.rule_for(rel, col) for col in cols}
    rep.used_rules |= {r.index for r in rules.values() if r.index is not None}
    keys = [col for col in cols if rules[col] is EXACT][:KEY_COLUMNS]
    for col, rule in rules.items():
        if rule.ignore:
            rep.ignored.add(col)
            continue
        rep.values += len(a)
        outside, dev = check_column(a[col], b[col], rule)
        rep.deviations.setdefault((col, rule.describe()), Deviation()).add(dev)
        for i, why in outside:
            key = ", ".join(f"{k}={a[k].iloc[i]}" for k in keys)
            rep.problems.append(f"{rel} row {i}{f' ({key})' if key else ''}: column {col!r}: "
                                f"{why} ({rule.describe()})")


def match_rows(a: pd.DataFrame, b: pd.DataFrame, rel: str, rep: Report) -> pd.DataFrame:
    """b's rows in a's order, matched on the columns that hold text only (e.g. model, method),
    where together they name every row once and the same rows in both runs; otherwise b as it is
    (rows compared by position).  Tables sorted by a measured value (a rank, an accuracy) list
    their rows in another order when a value moves within its tolerance."""
    keys = [c for c in a.columns if c in b.columns
            and all(_float(v) is None for v in a[c]) and all(_float(v) is None for v in b[c])]
    if not keys or len(a) < 2:
        return b
    ka, kb = (t[keys].agg("\x1f".join, axis=1) for t in (a, b))
    if not (ka.is_unique and kb.is_unique) or set(ka) != set(kb) or list(ka) == list(kb):
        return b
    rep.notes.append(f"{rel}: rows matched by {', '.join(keys)} (their order differs)")
    return b.set_index(pd.Index(kb)).loc[list(ka)].reset_index(drop=True)


def compare_csv(before: Path, after: Path, rel: str, rep: Report,
                tol: Tolerances | None = None, timings: bool = False) -> None:
    try:
        a, b = _read(before / rel), _read(after / rel)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        # Not parseable as a table (e.g. an empty file): fall back to the raw bytes.
        if (before / rel).read_bytes() != (after / rel).read_bytes():
            rep.problems.append(f"{rel}: cannot read as CSV ({err}) and the bytes differ")
        rep.files += 1
        return
    rep.files += 1
    ca, cb = list(a.columns), list(b.columns)
    if set(ca) != set(cb):
        only_a, only_b = [c for c in ca if c not in cb], [c for c in cb if c not in ca]
        rep.problems.append(f"{rel}: columns differ (only before: {only_a}, only after: {only_b})")
    elif ca != cb:
        rep.notes.append(f"{rel}: same columns in a different order ({ca} -> {cb})")
    if len(a) != len(b):
        rep.problems.append(f"{rel}: {len(a)} rows before, {len(b)} after")
        return
    rep.rows += len(a)
    if tol is not None:
        compare_within(a, match_rows(a, b, rel, rep), rel, [c for c in ca if c in cb], tol, rep)
        return
    for col in [c for c in ca if c in cb]:
        if not timings and is_timing(col):
            rep.timing.add(col)
            continue
        rep.values += len(a)
        n, first, max_abs = compare_column(a[col], b[col])
        if n:
            delta = f", max |diff| {max_abs:.6g}" if max_abs is not None else ""
            va, vb = a[col].iloc[first], b[col].iloc[first]
            rep.problems.append(f"{rel}: column {col!r}: {n} of {len(a)} rows differ{delta}; "
                                f"first at row {first} (0-based): {va!r} before, {vb!r} after")


def compare_claims(before: Path, after: Path, rep: Report, tol: Tolerances | None = None,
                   timings: bool = False) -> int:
    """Claim by claim: the same ids, verdicts, measured text and other columns (a timed claim's
    measured text, and with tolerances every measured text, is a note; with tolerances only
    verdicts are compared, and not those of the claims the file names).  Returns the number of
    claims."""
    if not ((before / CLAIMS).is_file() and (after / CLAIMS).is_file()):
        return 0                       # already reported as a missing file
    a, b = _read(before / CLAIMS), _read(after / CLAIMS)
    rep.files += 1
    for t in (a, b):
        if not {"id", "verdict", "measured"} <= set(t.columns) or t["id"].duplicated().any():
            rep.problems.append(f"{CLAIMS}: no unique id / verdict / measured columns")
            return 0
    if set(a.columns) != set(b.columns):   # e.g. a run from before a column was added
        rep.notes.append(f"{CLAIMS}: columns differ, the shared ones compared (only before: "
                         f"{sorted(set(a.columns) - set(b.columns))}, only after: "
                         f"{sorted(set(b.columns) - set(a.columns))})")
    a, b = a.set_index("id"), b.set_index("id")
    for cid in a.index.difference(b.index):
        rep.problems.append(f"claim {cid}: only before ({a.at[cid, 'verdict']})")
    for cid in b.index.difference(a.index):
        rep.problems.append(f"claim {cid}: only after ({b.at[cid, 'verdict']})")
    for cid in a.index.intersection(b.index):
        if tol is not None and cid in tol.ignore_claims:
            rep.notes.append(f"claim {cid}: not compared (ignore_claims in {tol.path})")
            continue
        va, vb = a.at[cid, "verdict"], b.at[cid, "verdict"]
        if va != vb:
            rep.problems.append(f"claim {cid}: verdict changed: {va!r} -> {vb!r}")
        timed = any(t.at[cid, "timed"].lower() == "true" for t in (a, b) if "timed" in t.columns)
        if a.at[cid, "measured"] != b.at[cid, "measured"]:
            serious = tol is None and (timings or not timed)
            (rep.problems if serious else rep.notes).append(
                f"claim {cid}: measured changed{' (timed: a measurement of speed)' if timed else ''}"
                f": {a.at[cid, 'measured']!r} -> {b.at[cid, 'measured']!r}")
        for col in ([] if tol is not None else
                    [c for c in a.columns if c in b.columns and c not in ("verdict", "measured")]):
            if a.at[cid, col] != b.at[cid, col]:
                rep.problems.append(f"claim {cid}: {col} changed: {a.at[cid, col]!r} -> "
                                    f"{b.at[cid, col]!r}")
    return len(a.index.union(b.index))


def compare_runs(before: Path, after: Path, also: list[str] = (),
                 tol: Tolerances | None = None, timings: bool = False) -> Report:
    rep = Report()
    for rel_dir in [FIGURES, *also]:
        fa, fb = csv_files(before, rel_dir), csv_files(after, rel_dir)
        for rel in sorted(fa - fb):
            rep.problems.append(f"{rel}: only in {before}")
        for rel in sorted(fb - fa):
            rep.problems.append(f"{rel}: only in {after}")
        for rel in sorted(fa & fb):
            if rel != CLAIMS:                  # claims: claim by claim, below
                compare_csv(before, after, rel, rep, tol, timings)
    rep.claims = compare_claims(before, after, rep, tol, timings)
    if rep.timing:
        rep.notes.append(f"columns that time the run, not compared (--timings compares them): "
                         f"{', '.join(sorted(rep.timing))}")
    for rule in tol.rules if tol is not None else ():
        if rule.index not in rep.used_rules:
            rep.notes.append(f"{tol.path}: columns[{rule.index}] (match {list(rule.match)}) "
                             f"matches no column of the compared files")
    return rep


def print_deviations(rep: Report) -> None:
    """Tolerance mode: the largest deviations per column, then the ignored columns."""
    moved = {k: d for k, d in rep.deviations.items() if d.max_abs or d.outside}
    if moved:
        print("  deviations per column (max |diff|, max relative diff, values outside / compared):")
    for (col, rule), d in sorted(moved.items()):
        print(f"    {col!r} [{rule}] in {d.files} file(s): {d.max_abs:.3g}, {d.max_rel:.3g}, "
              f"{d.outside} / {d.values}")
    print(f"  {len(rep.deviations) - len(moved)} other column(s) identical"
          + (f"; ignored: {', '.join(sorted(rep.ignored))}" if rep.ignored else ""))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pabench.tools.compare",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path, help="finished run (e.g. a worktree of the old commit)")
    ap.add_argument("after", type=Path, help="finished run to compare with")
    ap.add_argument("--also", action="append", default=[], metavar="DIR",
                    help="more CSVs under DIR, relative to both runs (repeatable): data/results")
    ap.add_argument("--tolerances", type=Path, metavar="FILE",
                    help="numbers agree within the limits of FILE (workflow/config/tolerances.yaml)"
                         " instead of exactly")
    ap.add_argument("--timings", action="store_true",
                    help="compare the columns that time the run too (seconds, images per second, "
                         "speed-ups) and timed claims' measured text")
    ap.add_argument("--seed-spread", action="store_true",
                    help="judge tables with a seed column by the spread over seeds (runs that "
                         "trained their models apart): pabench.tools.seedspread")
    ap.add_argument("--alpha", type=float, metavar="A",
                    help="--seed-spread: false-alarm rate over all tested columns (default 0.01)")
    args = ap.parse_args(argv)

    for run in (args.before, args.after):
        if not (run / FIGURES).is_dir():
            what = (f"no {FIGURES}/ (not a finished run?)" if run.is_dir()
                    else "no such directory")
            print(f"pabench.tools.compare: {run}: {what}", file=sys.stderr)
            return 2
    for rel_dir in args.also:
        if not ((args.before / rel_dir).is_dir() or (args.after / rel_dir).is_dir()):
            print(f"pabench.tools.compare: --also {rel_dir}: in neither run", file=sys.stderr)
            return 2

    try:
        tol = load(args.tolerances) if args.tolerances else None
    except ToleranceError as err:
        print(f"pabench.tools.compare: --tolerances {err}", file=sys.stderr)
        return 2

    if args.seed_spread or args.alpha is not None:
        return seed_spread(args, tol)
    rep = compare_runs(args.before, args.after, args.also, tol, args.timings)
    print(f"compared {args.before} (before) with {args.after} (after), "
          f"dirs: {', '.join([FIGURES, *args.also])}"
          + (f"; tolerances: {args.tolerances}" if tol else ""))
    print(f"  {rep.files} CSV files, {rep.rows} rows, {rep.values} values; {rep.claims} claims")
    if tol:
        print_deviations(rep)
    for note in rep.notes:
        print(f"  note: {note}")
    for problem in rep.problems:
        print(f"  DIFF: {problem}")
    if rep.problems:
        print(f"DIFFERENT: {len(rep.problems)} difference(s)"
              + (" outside the tolerances" if tol else ""))
        return 1
    print("WITHIN TOLERANCES: every value, and every claims verdict identical" if tol
          else "IDENTICAL: every value and every claims verdict")
    return 0


def seed_spread(args: argparse.Namespace, tol: Tolerances | None) -> int:
    """--seed-spread: pabench.tools.seedspread's report; the exit status."""
    from pabench.tools import seedspread   # imported here: it imports this module

    alpha = 0.01 if args.alpha is None else args.alpha
    error = ("--alpha needs --seed-spread" if not args.seed_spread
             else "--seed-spread does not judge the columns that time the run (--timings)"
             if args.timings else f"--alpha {alpha:g}: must be in (0, 1)"
             if not 0 < alpha < 1 else "")
    if not error:
        try:
            rep = seedspread.compare_seed_spread(args.before, args.after, args.also, tol, alpha)
        except seedspread.SeedSpreadError as err:
            error = f"--seed-spread: {err}"
    if error:
        print(f"pabench.tools.compare: {error}", file=sys.stderr)
        return 2
    return seedspread.print_report(rep, args.before, args.after, [FIGURES, *args.also],
                                   args.tolerances if tol else None, alpha)


if __name__ == "__main__":
    sys.exit(main())
