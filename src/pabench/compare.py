"""Compare the CSV outputs of two finished workflow runs, value by value.

    python -m pabench.compare BEFORE_DIR AFTER_DIR [--also data/results ...]

Checks every `*.csv` under `figures/` (recursively; `figures/timings.*` left out, they measure
the run itself) plus those under each `--also` directory: the same files, the same columns (by
name; a different order is only a note), the same number of rows and every value identical.
Numbers must be exactly equal (NaN equals NaN, an empty cell counts as NaN, inf equals inf) and
are parsed with Python's `float`, so "0.10" and "0.1" are equal; anything else must match as text.
`figures/claims.csv` is also checked claim by claim (verdict and measured text).

Exit status: 0 identical, 1 differences (listed), 2 bad arguments.  Reads CSVs only (pandas and
numpy); never imports torch or the workflow.
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

FIGURES = "figures"
CLAIMS = "figures/claims.csv"
EXCLUDE = ("figures/timings.*",)   # relative to the run directory


@dataclass
class Report:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    files: int = 0
    rows: int = 0
    values: int = 0
    claims: int = 0


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


def compare_csv(before: Path, after: Path, rel: str, rep: Report) -> None:
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
    for col in [c for c in ca if c in cb]:
        rep.values += len(a)
        n, first, max_abs = compare_column(a[col], b[col])
        if n:
            delta = f", max |diff| {max_abs:.6g}" if max_abs is not None else ""
            va, vb = a[col].iloc[first], b[col].iloc[first]
            rep.problems.append(f"{rel}: column {col!r}: {n} of {len(a)} rows differ{delta}; "
                                f"first at row {first} (0-based): {va!r} before, {vb!r} after")


def compare_claims(before: Path, after: Path, rep: Report) -> int:
    """Claim by claim: the same ids, verdicts and measured text.  Returns the number of claims."""
    if not ((before / CLAIMS).is_file() and (after / CLAIMS).is_file()):
        return 0                       # already reported as a missing file
    a, b = _read(before / CLAIMS), _read(after / CLAIMS)
    for t in (a, b):
        if not {"id", "verdict", "measured"} <= set(t.columns) or t["id"].duplicated().any():
            rep.problems.append(f"{CLAIMS}: no unique id / verdict / measured columns")
            return 0
    a, b = a.set_index("id"), b.set_index("id")
    for cid in a.index.difference(b.index):
        rep.problems.append(f"claim {cid}: only before ({a.at[cid, 'verdict']})")
    for cid in b.index.difference(a.index):
        rep.problems.append(f"claim {cid}: only after ({b.at[cid, 'verdict']})")
    for cid in a.index.intersection(b.index):
        va, vb = a.at[cid, "verdict"], b.at[cid, "verdict"]
        if va != vb:
            rep.problems.append(f"claim {cid}: verdict changed: {va!r} -> {vb!r}")
        if a.at[cid, "measured"] != b.at[cid, "measured"]:
            rep.problems.append(f"claim {cid}: measured changed: {a.at[cid, 'measured']!r} -> "
                                f"{b.at[cid, 'measured']!r}")
    return len(a.index.union(b.index))


def compare_runs(before: Path, after: Path, also: list[str] = ()) -> Report:
    rep = Report()
    for rel_dir in [FIGURES, *also]:
        fa, fb = csv_files(before, rel_dir), csv_files(after, rel_dir)
        for rel in sorted(fa - fb):
            rep.problems.append(f"{rel}: only in {before}")
        for rel in sorted(fb - fa):
            rep.problems.append(f"{rel}: only in {after}")
        for rel in sorted(fa & fb):
            compare_csv(before, after, rel, rep)
    rep.claims = compare_claims(before, after, rep)
    return rep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m pabench.compare",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path, help="finished run (e.g. a worktree of the old commit)")
    ap.add_argument("after", type=Path, help="finished run to compare with")
    ap.add_argument("--also", action="append", default=[], metavar="DIR",
                    help="more CSVs under DIR, relative to both runs (repeatable): data/results")
    args = ap.parse_args(argv)

    for run in (args.before, args.after):
        if not (run / FIGURES).is_dir():
            what = (f"no {FIGURES}/ (not a finished run?)" if run.is_dir()
                    else "no such directory")
            print(f"pabench.compare: {run}: {what}", file=sys.stderr)
            return 2
    for rel_dir in args.also:
        if not ((args.before / rel_dir).is_dir() or (args.after / rel_dir).is_dir()):
            print(f"pabench.compare: --also {rel_dir}: in neither run", file=sys.stderr)
            return 2

    rep = compare_runs(args.before, args.after, args.also)
    print(f"compared {args.before} (before) with {args.after} (after), "
          f"dirs: {', '.join([FIGURES, *args.also])}")
    print(f"  {rep.files} CSV files, {rep.rows} rows, {rep.values} values; {rep.claims} claims")
    for note in rep.notes:
        print(f"  note: {note}")
    for problem in rep.problems:
        print(f"  DIFF: {problem}")
    if rep.problems:
        print(f"DIFFERENT: {len(rep.problems)} difference(s)")
        return 1
    print("IDENTICAL: every value and every claims verdict")
    return 0


if __name__ == "__main__":
    sys.exit(main())
