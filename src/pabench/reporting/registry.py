"""Paper registries: every figure and table of a paper declared once.

An `Entry` says what a figure or table is (name, caption, report category, the claims it backs),
which function draws it and from which inputs.  The workflow makes one rule per entry
(`workflow/rules/papers.smk`), the report takes its category and caption from it, the claims check
and the tests read it.  Adding a figure is one entry here plus one function:

    Entry("pa", "fig5", adv_figures.ar_figure, "adversarial",
          caption="Figure 5: ...", inputs=lambda c: {...}, args=lambda c: {...})

A figure function is called as `fn(inputs, outputs, meta, **args)` and writes the pdf/png/csv
`outputs` (see pabench.reporting.plotting.save_figure); a table function as `fn(inputs, **args)`
and returns the table.  `inputs` maps names to paths (or lists of paths), as the rule declares.
Functions live in the experiment packages and import only what they need: a figure drawn from
CSVs never imports PyTorch, and a figure module imports pyplot and scipy only when it draws (the
registries import every figure module whenever the workflow starts).  The rule hands the job its
function as "module:name" (`Entry.spec`), and the job imports that module alone.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from pabench.core import paths

STYLE = "workflow/style/pabench.mplstyle"
CHECKS = "Reproduction checks"
# Report subcategories: one per experiment.
EXPERIMENTS = {"toy": "Toy examples", "diagvib": "DiagViB-6 datasets",
               "dg": "Domain generalisation", "model_selection": "Model selection",
               "adversarial": "Adversarial robustness", "avgcase": "Average-case robustness",
               "oodrb": "OOD adversarial robustness", "text": "Text shifts (PA is not accuracy)",
               "checks": "Claims and timings"}


def load_function(spec: str) -> Callable:
    """The function named "module:function", importing only its module."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _nothing(config: dict) -> dict:
    return {}


def _always(config: dict) -> bool:
    return True


def _ready(config: dict) -> str:
    return ""


@dataclass(frozen=True)
class Entry:
    paper: str
    name: str                     # file name under figures/<paper>/, e.g. "fig5"
    function: Callable            # a module-level function of an experiment package
    experiment: str               # key of EXPERIMENTS: the report's subcategory, the W&B group
    caption: str
    kind: str = "figure"          # figure | table
    inputs: Callable[[dict], dict] = _nothing     # config -> {name: path or [paths]}
    args: Callable[[dict], dict] = _nothing       # config -> keyword arguments of the function
    meta: Callable[[dict], dict] = _nothing       # config -> provenance for the caption
    claims: tuple[str, ...] = ()                  # ids of the claims this result backs
    enabled: Callable[[dict], bool] = _always     # config -> whether this scale builds it
    # config -> "" or, where a setting that only the user can give is missing (a data folder),
    # what to set: the run stops with it before any job when this result is asked for by name
    requires: Callable[[dict], str] = _ready

    def __post_init__(self):
        if self.kind not in ("figure", "table"):
            raise ValueError(f"{self.paper}.{self.name}: kind {self.kind!r} is not figure or table")
        if self.experiment not in EXPERIMENTS:
            raise ValueError(f"{self.paper}.{self.name}: unknown experiment {self.experiment!r}")
        name = getattr(self.function, "__name__", "")  # a nested function's qualname differs
        qualname = getattr(self.function, "__qualname__", None)
        if not callable(self.function) or name in ("", "<lambda>") or qualname != name:
            raise ValueError(f"{self.paper}.{self.name}: the function must be a module-level "
                             f"function (a job imports it by name), not {self.function!r}")

    @property
    def rule(self) -> str:
        """The rule's name, scoped by the paper: pa_fig5, pa_models_mnist32."""
        return f"{self.paper}_{self.name}".replace("-", "_")

    def outputs(self) -> dict:
        files = paths.figure_files if self.kind == "figure" else paths.table_files
        return files(self.paper, self.name)

    @property
    def spec(self) -> str:
        """The function as "module:name": what the rule passes to its job."""
        return f"{self.function.__module__}:{self.function.__name__}"

    def provenance(self, config: dict) -> dict:
        """The caption and its metadata (scale first), as the figure and the report show it."""
        return {"caption": self.caption, "scale": config["scale"], **self.meta(config)}


@dataclass(frozen=True)
class Paper:
    key: str                      # figures/<key>/, rule prefix, target rule name
    title: str                    # the report's category
    entries: tuple[Entry, ...]
    extra_targets: Callable[[dict], list] = field(default=lambda config: [])  # datasets etc.
    claim_modules: tuple[str, ...] = ()       # modules whose @claim checks belong to this paper
    claim_tables: Callable[[dict], dict] = _nothing  # config -> {table name the claims use: path}
    no_claims: str = ""  # why the paper has no checkable claims (a draft without results)

    def __post_init__(self):
        names = [e.name for e in self.entries]
        if len(set(names)) != len(names):
            raise ValueError(f"paper {self.key}: duplicate entries {sorted(n for n in names if names.count(n) > 1)}")
        for e in self.entries:
            if e.paper != self.key:
                raise ValueError(f"entry {e.name} belongs to {e.paper!r}, not {self.key!r}")

    def enabled(self, config: dict) -> list[Entry]:
        return [e for e in self.entries if e.enabled(config)]

    def targets(self, config: dict) -> list[str]:
        """Every file that building this paper makes."""
        return [p for e in self.enabled(config) for p in e.outputs().values()] + self.extra_targets(config)


def reported(path: str, category: str, experiment: str):
    """An output shown in Snakemake's report under its paper (category) and experiment, with the
    caption rendered from the rule's params.meta (workflow/report/caption.rst)."""
    from snakemake.io import report

    return report(path, caption="../report/caption.rst", category=category,
                  subcategory=EXPERIMENTS[experiment], labels={"result": path.rsplit("/", 1)[-1].split(".")[0]})


def rule_outputs(paper: Paper, entry: Entry) -> dict:
    """The outputs of an entry's rule: the png (figures) or html (tables) shown in the report."""
    out = entry.outputs()
    shown = "png" if entry.kind == "figure" else "html"
    out[shown] = reported(out[shown], paper.title, entry.experiment)
    return out
