"""The master thesis on PA-based model selection (papers/pa-model-selection-thesis.md).  The draft
has no results chapter yet; its Section 3.1.4 says how the selected models are reported: average
and worst-case accuracy over the target domains.  That table, from the model-selection runs of
the PA paper's Table 1 (no runs of its own)."""
from __future__ import annotations

from pabench.experiments.dg import tables as dg_tables
from pabench.papers.pa import ENTRIES as PA_ENTRIES
from pabench.reporting.registry import Entry, Paper

P = "thesis"
_PA_TABLE1 = next(e for e in PA_ENTRIES if e.name == "table1")

ENTRIES = (
    Entry(P, "target_accuracy", dg_tables.target_accuracy, "model_selection",
          "Model selection reported as the thesis plans (Section 3.1.4): average and worst-case "
          "test accuracy (%) over the target domains Test 1..5 of the epoch selected by "
          "validation accuracy and of the one selected by PA (adam solver, as the PA paper, and "
          "exact), per algorithm and co-occurrence setting; mean and std over the seeds whose "
          "criterion chose an epoch ('no preference': seeds whose best validation value was tied "
          "across epochs), the worst case taken per seed. The runs of the PA paper's Table 1",
          kind="table",
          inputs=_PA_TABLE1.inputs, args=_PA_TABLE1.args, meta=_PA_TABLE1.meta),
)

PAPER = Paper(P, "PA model-selection thesis", ENTRIES,
              no_claims="the draft's results chapter is empty: it states no result to check")
