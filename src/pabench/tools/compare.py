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
import sys
from pathlib import Path

from pabench.tools.csvdiff import CLAIMS, FIGURES, Report, compare_claims, compare_csv, csv_files
from pabench.tools.tolerances import ToleranceError, Tolerances, load


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
    from pabench.tools import seedspread   # imported here: it imports scipy

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
