"""Scores of the adversarial-ratio datasets (PA paper, Section 4.1; the views are in
records.py).  Each view is scored by PA against the clean set (the authors' adam solver, stacked
over the views, and the exact solver), AFR_T (accuracy on the view) and AFR_P (agreement with the
clean predictions).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..metrics import afr_pred, afr_true, posterior_agreement
from .records import MIN_NORM, ar_mask, ar_scores, tag_eps


def score_records(records: dict, ratios, pa_epochs: int, adam: dict, seed: int = 0) -> pd.DataFrame:
    """For every attack run (records: {(attack, eps tag): attack record}) and AR: PA (adam,
    stacked over all the views, and exact), beta, AFR_T, AFR_P, clean accuracy and the largest
    perturbation kept."""
    cases, a_stack, b_stack = [], [], []
    for (attack, eps), record in records.items():
        a = record["clean_scores"].astype(np.float64)
        labels = record["labels"]
        for ratio in ratios:
            mask = ar_mask(record["linf"], float(ratio))
            b = ar_scores(record, mask).astype(np.float64)
            cases.append({"attack": attack, "eps": eps, "eps_value": tag_eps(eps) if eps != MIN_NORM else np.nan,
                          "ar": float(ratio), "afr_true": afr_true(b, labels), "afr_pred": afr_pred(a, b),
                          "clean_accuracy": afr_true(a, labels),
                          "max_linf": float(record["linf"][mask].max()) if mask.any() else 0.0,
                          "attack_success_rate": float(record["success"].mean()), "n": len(a)})
            a_stack.append(a)
            b_stack.append(b)
    if len({len(a) for a in a_stack}) > 1:
        raise ValueError(f"attack records of different sizes: {sorted({len(a) for a in a_stack})}")
    a_stack, b_stack = np.stack(a_stack), np.stack(b_stack)
    exact = posterior_agreement(a_stack, b_stack, solver="exact")
    fitted = posterior_agreement(a_stack, b_stack, solver="adam", epochs=pa_epochs, lr=adam["lr"],
                                 batch_size=adam["batch_size"], beta0=adam["beta0"], seed=seed)
    for j, case in enumerate(cases):
        case.update({"logpa_adam": float(fitted.logpa[j]), "beta_adam": float(fitted.beta[j]),
                     "adam_epoch": int(fitted.epoch[j]), "logpa_exact": float(exact.logpa[j]),
                     "beta_exact": float(exact.beta[j])})
    return pd.DataFrame(cases)
