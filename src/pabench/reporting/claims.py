"""The papers' checkable claims, each evaluated on the workflow's tidy result tables.

Every claim names its source and states, before any result is seen, exactly what is compared and
with which threshold; `evaluate` returns one row per claim with what was measured and a verdict:
reproduced, not reproduced, or not evaluated (the tables at this scale lack what the claim needs,
e.g. the RobustBench models or a second eps).  Nothing here is tuned to make a claim pass.

The checks live beside their experiments (pabench.experiments.<name>.claims) and register here
with @claim; each paper's registry names its claim modules and the tidy tables they read
(`Paper.claim_modules`, `Paper.claim_tables`), and `load` imports them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pandas as pd

REPRODUCED, NOT_REPRODUCED, NOT_EVALUATED = "reproduced", "not reproduced", "not evaluated"


class NotEvaluated(Exception):
    """The tables lack what the claim needs at this scale."""


@dataclass(frozen=True)
class Claim:
    module: str
    id: str
    source: str
    statement: str
    tables: tuple[str, ...]
    check: Callable  # (*tables) -> (holds: bool, measured: str)


CLAIMS: list[Claim] = []


def claim(id: str, source: str, statement: str, *tables: str):
    def register(check):
        CLAIMS.append(Claim(check.__module__, id, source, statement, tables, check))
        return check
    return register


def load(modules) -> list[Claim]:
    """The claims registered by the given claim modules (a paper's `claim_modules`), in the
    order of the modules, whatever was imported before; a module registers nothing twice."""
    import importlib

    modules = list(modules)
    for module in modules:
        importlib.import_module(module)
    return [c for m in modules for c in CLAIMS if c.module == m]


def evaluate(tables: dict[str, pd.DataFrame], claims=None) -> pd.DataFrame:
    """One row per claim (default: every registered one) with its verdict on the tables."""
    rows = []
    for c in CLAIMS if claims is None else claims:
        missing = [t for t in c.tables if t not in tables]
        if missing:
            verdict, measured = NOT_EVALUATED, f"no {' / '.join(missing)} results at this scale"
        else:
            try:
                holds, measured = c.check(*(tables[t] for t in c.tables))
                verdict = REPRODUCED if holds else NOT_REPRODUCED
            except NotEvaluated as why:
                verdict, measured = NOT_EVALUATED, str(why)
        rows.append({"id": c.id, "source": c.source, "claim": c.statement, "measured": measured,
                     "verdict": verdict})
    return pd.DataFrame(rows)


def _f(x: float) -> str:
    return f"{x:.4g}"


def _need(condition: bool, why: str) -> None:
    if not condition:
        raise NotEvaluated(why)


def _discordant(a: pd.Series, b: pd.Series) -> int:
    """Pairs that a and b order strictly oppositely (0: the two rankings agree, ties allowed)."""
    keys = list(a.index)
    return sum(1 for i, x in enumerate(keys) for y in keys[i + 1:]
               if (a[x] - a[y]) * (b[x] - b[y]) < 0)


def to_markdown(results: pd.DataFrame, scale: str) -> str:
    counts = results.verdict.value_counts()
    lines = [f"# Claims check ({scale} scale)", "",
             ", ".join(f"{counts.get(v, 0)} {v}" for v in (REPRODUCED, NOT_REPRODUCED, NOT_EVALUATED)),
             "", "| claim | source | measured | verdict |", "| --- | --- | --- | --- |"]
    cell = lambda text: str(text).replace("|", "\\|")  # noqa: E731 - a pipe would end the cell
    for r in results.itertuples():
        lines.append(f"| **{r.id}**: {cell(r.claim)} | {cell(r.source)} | {cell(r.measured)} | {r.verdict} |")
    return "\n".join(lines) + "\n"
