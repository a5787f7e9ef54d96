"""The CSV files of two finished runs compared value by value: the pieces pabench.tools.compare
(exactly, or within tolerances) and pabench.tools.seedspread (by the spread over seeds) share.
Every cell is read as its exact text; the rules are in pabench.tools.compare's docstring."""
from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pabench.tools.tolerances import EXACT, Rule, Tolerances, is_timing

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


def number(text: str) -> float | None:
    """The cell as a number (empty -> NaN), or None when it is not one."""
    if text == "":
        return math.nan
    try:
        return float(text)
    except ValueError:
        return None


def read_cells(path: Path) -> pd.DataFrame:
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
    xa, xb = number(sa), number(sb)
    if xa is None or xb is None:
        return False
    return xa == xb or (math.isnan(xa) and math.isnan(xb))


def compare_column(a: pd.Series, b: pd.Series) -> tuple[int, int, float | None]:
    """(number of differing rows, first differing row, max |a - b|) for one column of strings;
    the max is None unless every cell on both sides is a number."""
    same = np.array([_same(sa, sb) for sa, sb in zip(a, b)], dtype=bool)
    n_diff = int((~same).sum())
    first = int(np.argmin(same)) if n_diff else -1
    xa, xb = [number(s) for s in a], [number(s) for s in b]
    if any(x is None for x in xa + xb):
        return n_diff, first, None
    with np.errstate(invalid="ignore"):
        d = np.abs(np.array(xa, dtype=float) - np.array(xb, dtype=float))
    d[same] = 0.0          # equal infinities and NaN pairs give nan here, not a difference
    return n_diff, first, float(d.max()) if len(d) else 0.0


def _shown(text: str) -> str:
    return text if number(text) is not None and text else repr(text)


def check_column(a: pd.Series, b: pd.Series, rule: Rule) -> tuple[list[tuple[int, str]], Deviation]:
    """Tolerance mode: the rows outside the rule's limits as (row, why) and the column's
    deviations; text, NaN and infinities must match exactly."""
    outside, dev = [], Deviation(values=len(a), files=1)
    for i, (sa, sb) in enumerate(zip(a, b)):
        if _same(sa, sb):
            continue
        xa, xb = number(sa), number(sb)
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
            and all(number(v) is None for v in a[c]) and all(number(v) is None for v in b[c])]
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
        a, b = read_cells(before / rel), read_cells(after / rel)
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
    a, b = read_cells(before / CLAIMS), read_cells(after / CLAIMS)
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
