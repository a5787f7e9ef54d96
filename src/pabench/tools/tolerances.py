"""Tolerances for comparing two runs that cannot be bit-identical (a CPU run and a GPU run), read
from a small YAML file (`workflow/config/tolerances.yaml`; `python -m pabench.tools.compare
--tolerances FILE`):

    columns:                          # rules, the first one that matches a column wins
      - match: ["*accuracy*", "afr_*"]  # globs on the column name, case-insensitive
        files: ["figures/*"]          # optional: globs on the CSV's path in the run (default: all)
        abs: 0.01                     # |a - b| <= abs ...
        rel: 0.02                     # ... or |a - b| <= rel * max(|a|, |b|)
      - match: ["*seconds*"]
        ignore: true                  # not compared at all (measures the run, not its results)
    ignore_claims: [claim-id]         # claims whose verdict is not compared (optional)

A column no rule matches is compared exactly.  Every mistake in the file is an error naming the
rule and the value; a rule that matches no column of the two runs is only a note
(pabench.tools.compare).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import yaml

RULE_KEYS = {"match", "files", "abs", "rel", "ignore"}
TOP_KEYS = {"columns", "ignore_claims"}
# Slack for the decimal limits of the file: 0.51 - 0.5 is 0.010000000000000009 in binary.
SLACK = 1e-9
# Columns that measure how fast a run went, not what it computed: they differ between any two
# runs (pabench.tools.compare lists them instead of comparing them; the kill campaign and the Slurm
# test leave them out of their digests).
TIMING_COLUMNS = ("*seconds*", "*_per_s", "*speed-up*", "data_wait_fraction")


def is_timing(column: str) -> bool:
    return any(fnmatchcase(column.lower(), glob) for glob in TIMING_COLUMNS)


class ToleranceError(ValueError):
    pass


@dataclass(frozen=True)
class Rule:
    match: tuple[str, ...]
    files: tuple[str, ...] = ("*",)
    abs_tol: float = 0.0
    rel_tol: float = 0.0
    ignore: bool = False
    index: int | None = None          # position in the file; None: no rule, compared exactly

    def covers(self, rel_file: str, column: str) -> bool:
        return (any(fnmatchcase(rel_file, f) for f in self.files)
                and any(fnmatchcase(column.lower(), m.lower()) for m in self.match))

    def limit(self, a: float, b: float) -> float:
        return max(self.abs_tol, self.rel_tol * max(abs(a), abs(b)))

    def within(self, a: float, b: float) -> bool:
        return abs(a - b) <= self.limit(a, b) * (1 + SLACK)

    def describe(self) -> str:
        if self.index is None:
            return "exact (no rule)"
        limits = [f"{k} {v:g}" for k, v in (("abs", self.abs_tol), ("rel", self.rel_tol)) if v]
        what = "ignored" if self.ignore else " or ".join(limits) or "exact"
        return f"rule {self.index}: {what}"


EXACT = Rule(match=())


@dataclass(frozen=True)
class Tolerances:
    path: Path
    rules: tuple[Rule, ...]
    ignore_claims: frozenset[str] = frozenset()

    def rule_for(self, rel_file: str, column: str) -> Rule:
        return next((r for r in self.rules if r.covers(rel_file, column)), EXACT)


def _patterns(value, where: str, key: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(s, str) and s for s in items):
        raise ToleranceError(f"{where}: {key} must be a glob or a non-empty list of globs, "
                             f"got {value!r}")
    return tuple(items)


def _limit(value, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise ToleranceError(f"{where}: {key} must be a number >= 0, got {value!r}")
    return float(value)


def _rule(entry, i: int, path: Path) -> Rule:
    where = f"{path}: columns[{i}]"
    if not isinstance(entry, dict):
        raise ToleranceError(f"{where}: a rule must be a mapping, got {entry!r}")
    if unknown := sorted(set(entry) - RULE_KEYS):
        raise ToleranceError(f"{where}: unknown key(s) {unknown} (known: {sorted(RULE_KEYS)})")
    if "match" not in entry:
        raise ToleranceError(f"{where}: no 'match' (the column-name globs)")
    match = _patterns(entry["match"], where, "match")
    where = f"{path}: columns[{i}] (match {list(match)})"
    files = _patterns(entry.get("files", "*"), where, "files")
    ignore = entry.get("ignore", False)
    if not isinstance(ignore, bool):
        raise ToleranceError(f"{where}: ignore must be true or false, got {ignore!r}")
    limits = {k: _limit(entry[k], where, k) for k in ("abs", "rel") if k in entry}
    if ignore and limits:
        raise ToleranceError(f"{where}: ignore: true with limits {sorted(limits)}: choose one")
    if not ignore and not limits:
        raise ToleranceError(f"{where}: states no limit (abs, rel) and is not ignore: true")
    return Rule(match, files, limits.get("abs", 0.0), limits.get("rel", 0.0), ignore, index=i)


def load(path: Path) -> Tolerances:
    """The tolerance file, checked; ToleranceError names the first bad value."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ToleranceError(f"{path}: cannot read ({err})") from None
    if not isinstance(data, dict) or "columns" not in data:
        raise ToleranceError(f"{path}: expected a mapping with a 'columns' list of rules")
    if unknown := sorted(set(data) - TOP_KEYS):
        raise ToleranceError(f"{path}: unknown key(s) {unknown} (known: {sorted(TOP_KEYS)})")
    if not isinstance(data["columns"], list) or not data["columns"]:
        raise ToleranceError(f"{path}: 'columns' must be a non-empty list of rules")
    claims = data.get("ignore_claims") or []
    if not isinstance(claims, list) or not all(isinstance(c, str) for c in claims):
        raise ToleranceError(f"{path}: ignore_claims must be a list of claim ids, got {claims!r}")
    rules = tuple(_rule(entry, i, path) for i, entry in enumerate(data["columns"]))
    return Tolerances(Path(path), rules, frozenset(claims))
