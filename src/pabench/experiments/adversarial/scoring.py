"""Scores of the adversarial-ratio datasets (PA paper, Section 4.1; the views are in
pabench.attacks.records).  Each view is scored against the clean set by the shared scoring
core (PA of both solvers, beta, AFR_T, AFR_P), beside the attack's own numbers.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.attacks.records import ar_mask, ar_scores
from pabench.core.paths import AttackRun
from pabench.metrics import afr_true
from pabench.metrics.settings import PASettings
from pabench.metrics.views import score_views
from pabench.reporting import degenerate


def score_records(records: dict[AttackRun, dict], ratios, settings: PASettings) -> pd.DataFrame:
    """For every attack run (records: {AttackRun: attack record}) and AR: PA (adam, stacked over
    all the views, and exact), beta, AFR_T, AFR_P, clean accuracy and the largest perturbation
    kept.  The records are one model's: `degenerate` flags it (pabench.reporting.degenerate)
    when its clean accuracy is near chance or PA is at beta* = 0 in every view of these runs."""
    keys, extras, a_stack, b_stack, labels = [], [], [], [], []
    for run, record in records.items():
        a = record["clean_scores"].astype(np.float64)
        clean_accuracy = afr_true(a, record["labels"])  # per record, the same at every AR
        success_rate = float(record["success"].mean())
        for ratio in ratios:
            mask = ar_mask(record["linf"], float(ratio))
            keys.append({"attack": run.attack, "eps": run.eps.tag,
                         "eps_value": np.nan if run.eps.value is None else run.eps.value,
                         "ar": float(ratio)})
            extras.append({"clean_accuracy": clean_accuracy,
                           "max_linf": float(record["linf"][mask].max()) if mask.any() else 0.0,
                           "attack_success_rate": success_rate, "n": len(a)})
            a_stack.append(a)
            b_stack.append(ar_scores(record, mask).astype(np.float64))
            labels.append(record["labels"])
    if len({len(a) for a in a_stack}) > 1:
        raise ValueError(f"attack records of different sizes: {sorted({len(a) for a in a_stack})}")
    scores = score_views(np.stack(a_stack), np.stack(b_stack), np.stack(labels), settings)
    flagged = any(degenerate.near_chance(e["clean_accuracy"], e["n"], a_stack[0].shape[1])
                  for e in extras) or degenerate.pa_collapsed(scores.beta_exact)
    table = pd.concat([pd.DataFrame(keys), scores, pd.DataFrame(extras)], axis=1)
    return table.assign(**{degenerate.COLUMN: flagged})
