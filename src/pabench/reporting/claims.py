"""The papers' checkable claims, each evaluated on the workflow's tidy result tables.

Every claim names its source and states, before any result is seen, exactly what is compared and
with which threshold; `evaluate` returns one row per claim with what was measured and a verdict:
reproduced, not reproduced, or not evaluated (the tables at this scale lack what the claim needs,
e.g. the RobustBench models or a second eps).  Nothing here is tuned to make a claim pass.

Over seeds: a claim whose tables carry a `seed` column is checked once per seed, each table cut to
that seed's rows (rows without a seed, e.g. a pretrained model's, belong to every seed; a table
without the column is passed whole).  The verdict is reproduced when the claim holds in every
evaluated seed, not reproduced in none, mixed otherwise; `seeds_holding` says in how many
("2/3"), and fewer than MIN_SEEDS evaluated seeds are marked as not enough for a verdict over
seeds.  A claim that is a statement over a population of models or a property that no seed
changes says why with `unseeded` and is checked once on every row.

Degenerate models (pabench.reporting.degenerate: near chance, or PA at beta* = 0 everywhere) are
not evidence: rows flagged in a `degenerate` column are left out before the check, the measured
text names them, and a claim left with nothing to check is not evaluated.

PA solvers: a claim about PA says which solver its numbers come from (`solver`: the papers' adam
procedure or the exact maximiser; empty for claims on accuracy alone).  A claim whose verdict may
depend on the solver is registered once per solver (`solvers=`): the first keeps the claim's id,
each other one is `<id>-<solver>`, and its check receives `solver`, so both verdicts are reported.

The checks live beside their experiments (pabench.experiments.<name>.claims) and register here
with @claim; each paper's registry names its claim modules and the tidy tables they read
(`Paper.claim_modules`, `Paper.claim_tables`), and `load` imports them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import pandas as pd

from pabench.reporting.degenerate import COLUMN as DEGENERATE

REPRODUCED, MIXED, NOT_REPRODUCED, NOT_EVALUATED = "reproduced", "mixed", "not reproduced", "not evaluated"
VERDICTS = (REPRODUCED, MIXED, NOT_REPRODUCED, NOT_EVALUATED)
MIN_SEEDS = 3
# Columns that name a model instance, for saying which flagged rows were left out.
_MODEL_KEYS = ("dataset", "setting", "algorithm", "model", "seed")


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
    unseeded: str = ""  # why the claim is checked once on every row, not per seed
    timed: bool = False  # its measurement is a timing: it differs between any two runs
    solver: str = ""  # the PA solver its numbers come from (adam, exact); "" when no PA


CLAIMS: list[Claim] = []
SOLVERS = ("adam", "exact")  # the PA solvers a claim can be checked with, the papers' first


def claim(id: str, source: str, statement: str, *tables: str, unseeded: str = "",
          timed: bool = False, solver: str = "", solvers: tuple = ()):
    """Register a check.  `solver`: the one PA solver the claim is about; `solvers`: check it
    with each of them, the check called with `solver=` and "{solver}" in the statement filled
    in (ids: `id` for the first, `id-<solver>` for the others)."""
    for name in (solver, *solvers):
        if name and name not in SOLVERS:
            raise ValueError(f"claim {id}: unknown PA solver {name!r}; choose from {SOLVERS}")

    def register(check):
        if not solvers:
            CLAIMS.append(Claim(check.__module__, id, source, statement, tables, check, unseeded,
                                timed, solver))
        for k, name in enumerate(solvers):
            CLAIMS.append(Claim(check.__module__, id if k == 0 else f"{id}-{name}", source,
                                statement.format(solver=name), tables, partial(check, solver=name),
                                unseeded, timed, name))
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


def _seed_text(seed) -> str:
    return str(int(seed)) if float(seed).is_integer() else str(seed)


def seeds_of(frames) -> list:
    """The seeds of the tables that carry a `seed` column (empty: none does)."""
    return sorted({s for f in frames if "seed" in f.columns for s in f.seed.dropna().unique()})


def _of_seed(frame: pd.DataFrame, seed) -> pd.DataFrame:
    if seed is None or "seed" not in frame.columns:
        return frame
    return frame[(frame.seed == seed) | frame.seed.isna()]


def _flagged(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The rows that are evidence, and the flagged model instances left out."""
    if DEGENERATE not in frame.columns:
        return frame, []
    bad = frame[DEGENERATE].fillna(False).astype(bool)
    keys = [k for k in _MODEL_KEYS if k in frame.columns]
    names = [" ".join(f"s{_seed_text(v)}" if k == "seed" else str(v) for k, v in zip(keys, row))
             for row in frame.loc[bad, keys].drop_duplicates().itertuples(index=False)]
    return frame[~bad], names


def _check(c: Claim, frames: list[pd.DataFrame]) -> tuple[str, str]:
    """One evaluation: (verdict, measured), flagged models left out first."""
    kept, dropped = zip(*(_flagged(f) for f in frames))
    dropped = sorted({name for names in dropped for name in names})
    left_out = f" [left out, not evidence (degenerate): {', '.join(dropped)}]" if dropped else ""
    if dropped and any(len(f) == 0 for f, full in zip(kept, frames) if len(full)):
        return NOT_EVALUATED, (f"not evidence: all {len(dropped)} models degenerate (near chance "
                               "or PA at beta* = 0)")
    try:
        holds, measured = c.check(*kept)
        return (REPRODUCED if holds else NOT_REPRODUCED), measured + left_out
    except NotEvaluated as why:
        return NOT_EVALUATED, str(why) + left_out


def _over_seeds(c: Claim, frames: list[pd.DataFrame]) -> dict:
    """The claim's row: per-seed verdicts combined into one."""
    seeds = [] if c.unseeded else seeds_of(frames)
    if not seeds:
        verdict, measured = _check(c, frames)
        note = c.unseeded or "no seeds in its tables: one run, not enough for a verdict over seeds"
        return {"measured": measured, "verdict": verdict, "seeds_holding": "", "seeds_note": note}
    runs = {s: _check(c, [_of_seed(f, s) for f in frames]) for s in seeds}
    done = [s for s, (v, _) in runs.items() if v != NOT_EVALUATED]
    holding = sum(runs[s][0] == REPRODUCED for s in done)
    if not done:
        verdict = NOT_EVALUATED
    else:
        verdict = REPRODUCED if holding == len(done) else NOT_REPRODUCED if holding == 0 else MIXED
    texts = list(dict.fromkeys(m for _, m in runs.values()))
    measured = texts[0] if len(texts) == 1 else "; ".join(
        f"seed {_seed_text(s)}: {m}" for s, (_, m) in runs.items())
    skipped = len(seeds) - len(done)
    note = f"{len(done)} of {len(seeds)} seeds evaluated" if skipped else ""
    if 0 < len(done) < MIN_SEEDS:
        few = f"{len(done)} seed{'s' if len(done) > 1 else ''}: not enough for a verdict over seeds"
        note = f"{note}; {few}" if note else few
    return {"measured": measured, "verdict": verdict,
            "seeds_holding": f"{holding}/{len(done)}" if done else "", "seeds_note": note}


def evaluate(tables: dict[str, pd.DataFrame], claims=None) -> pd.DataFrame:
    """One row per claim (default: every registered one) with its verdict on the tables."""
    rows = []
    for c in CLAIMS if claims is None else claims:
        row = {"id": c.id, "source": c.source, "claim": c.statement, "solver": c.solver,
               "timed": c.timed}
        missing = [t for t in c.tables if t not in tables]
        if missing:
            row.update(measured=f"no {' / '.join(missing)} results at this scale",
                       verdict=NOT_EVALUATED, seeds_holding="", seeds_note="")
        else:
            row.update(_over_seeds(c, [tables[t] for t in c.tables]))
        rows.append(row)
    return pd.DataFrame(rows, columns=["id", "source", "claim", "solver", "measured", "verdict",
                                       "seeds_holding", "seeds_note", "timed"])


def fmt(x: float) -> str:
    return f"{x:.4g}"


def need(condition: bool, why: str) -> None:
    if not condition:
        raise NotEvaluated(why)


def discordant(a: pd.Series, b: pd.Series) -> int:
    """Pairs that a and b order strictly oppositely (0: the two rankings agree, ties allowed)."""
    keys = list(a.index)
    return sum(1 for i, x in enumerate(keys) for y in keys[i + 1:]
               if (a[x] - a[y]) * (b[x] - b[y]) < 0)


def to_markdown(results: pd.DataFrame, scale: str) -> str:
    counts = results.verdict.value_counts()
    few = results.seeds_note.fillna("").str.contains("not enough") & (results.verdict != NOT_EVALUATED)
    lines = [f"# Claims check ({scale} scale)", "",
             ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS), "",
             f"Each claim is checked per seed (reproduced: in every seed; mixed: in some). "
             f"{int(few.sum())} verdicts rest on fewer than {MIN_SEEDS} seeds (marked *).", "",
             "PA solver: adam (the papers' procedure) or exact; a claim whose verdict may depend "
             "on it is checked with both, the second under its id with -exact (or -adam) added.", "",
             "| claim | source | PA solver | measured | verdict | seeds |",
             "| --- | --- | --- | --- | --- | --- |"]
    cell = lambda text: str(text).replace("|", "\\|")  # noqa: E731 - a pipe would end the cell
    for r, short in zip(results.itertuples(), few):
        verdict = f"{r.verdict} {r.seeds_holding}".strip() + (" *" if short else "")
        lines.append(f"| **{r.id}**: {cell(r.claim)} | {cell(r.source)} | {r.solver or '-'} | "
                     f"{cell(r.measured)} | {verdict} | {cell(r.seeds_note)} |")
    return "\n".join(lines) + "\n"
