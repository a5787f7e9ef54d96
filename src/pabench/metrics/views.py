"""One scoring core for every experiment that compares a reference set with shifted views of it
(shift-ratio datasets, adversarial-ratio datasets, noisy copies...): PA with both solvers (the
adam ones stacked, so all views are optimised at once), beta, and the accuracy-based AFR_T and
AFR_P, one row per view.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.metrics.afr import afr_pred, afr_true
from pabench.metrics.pa import posterior_agreement
from pabench.metrics.settings import PASettings

SCORE_COLUMNS = ("logpa_adam", "beta_adam", "adam_epoch", "logpa_exact", "beta_exact", "afr_true",
                 "afr_pred")


def score_views(reference: np.ndarray, views: np.ndarray, labels: np.ndarray,
                settings: PASettings) -> pd.DataFrame:
    """Score P views against their reference scores.

    reference: (N, K), shared by every view, or (P, N, K), one per view; views: (P, N, K);
    labels: (N,) or (P, N) class indices.  Returns one row per view with SCORE_COLUMNS: PA of
    both solvers (log scale, as the paper) and beta, AFR_T (accuracy on the view) and AFR_P
    (agreement of the view's predictions with the reference's).
    """
    views = np.asarray(views)
    if views.ndim != 3:
        raise ValueError(f"views must be a stack (P, N, K), got shape {views.shape}")
    reference = np.asarray(reference)
    if reference.shape not in (views.shape, views.shape[1:]):
        raise ValueError(f"reference {reference.shape} does not match the views {views.shape}")
    a = np.broadcast_to(reference, views.shape) if reference.ndim == 2 else reference
    labels = np.asarray(labels)
    label_of = (lambda j: labels) if labels.ndim == 1 else (lambda j: labels[j])
    exact = posterior_agreement(a, views, solver="exact")
    fitted = settings.solve(a, views)
    return pd.DataFrame({
        "logpa_adam": np.asarray(fitted.logpa, dtype=float), "beta_adam": np.asarray(fitted.beta, dtype=float),
        "adam_epoch": np.asarray(fitted.epoch, dtype=int), "logpa_exact": np.asarray(exact.logpa, dtype=float),
        "beta_exact": np.asarray(exact.beta, dtype=float),
        "afr_true": [afr_true(views[j], label_of(j)) for j in range(len(views))],
        "afr_pred": [afr_pred(a[j], views[j]) for j in range(len(views))],
    }, columns=list(SCORE_COLUMNS))
