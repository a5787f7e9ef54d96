"""The papers the workflow reproduces: one registry each (pabench.reporting.registry), and what
the workflow asks of all of them (targets, claims tables and modules)."""
import os

from pabench.papers.avgcase import PAPER as AVGCASE
from pabench.papers.oodrb import PAPER as OODRB
from pabench.papers.pa import PAPER as PA
from pabench.papers.thesis import PAPER as THESIS

PAPERS = {p.key: p for p in (PA, AVGCASE, OODRB, THESIS)}


def all_targets(config: dict) -> list[str]:
    """Every paper's files at this config's scale."""
    return [p for paper in PAPERS.values() for p in paper.targets(config)]


def unbuildable(config: dict, targets) -> str:
    """One message for the targets of a command line (`targets`: its words; a rule's name or one
    of its files, `./` or absolute allowed) that name a result this config cannot build for want
    of a setting (Entry.requires), grouped by what to set; "" when there are none."""
    words = {os.path.relpath(t) if os.path.isabs(t) else os.path.normpath(t) for t in targets}
    asked: dict[str, list[str]] = {}
    for paper in PAPERS.values():
        for e in paper.entries:
            named = [t for t in (e.rule, *e.outputs().values()) if t in words]
            need = named and e.requires(config)
            if need:
                asked.setdefault(need, []).extend(named)
    return "; ".join(f"{', '.join(names)}: cannot be built with this configuration: {need}"
                     for need, names in asked.items())


def claim_tables(config: dict) -> dict:
    """The tidy tables every paper's claims read, by name."""
    tables = {}
    for paper in PAPERS.values():
        for name, path in paper.claim_tables(config).items():
            if tables.setdefault(name, path) != path:
                raise ValueError(f"claims table {name!r} means two files: {tables[name]} and {path}")
    return tables


def claim_modules() -> list[str]:
    return [m for paper in PAPERS.values() for m in paper.claim_modules]
