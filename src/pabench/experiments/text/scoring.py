"""PA and accuracy of the text shifts (PA paper, Appendix C, Figure 10): every shifted view scored
against the clean reviews by the shared scoring core (PA of both solvers, beta, AFR_T = accuracy
on the shifted reviews, AFR_P = agreement with the clean predictions)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.core.paths import TextView
from pabench.metrics import afr_true
from pabench.metrics.settings import PASettings
from pabench.metrics.views import score_views
from pabench.reporting import degenerate


def score_text_views(clean: dict, views: dict[TextView, dict], settings: PASettings,
                     model: str = "") -> pd.DataFrame:
    """One row per shifted view (views: {TextView: logits record}, records as
    compute.load_logits returns them), in their order: the model's name, strategy, W, 2^W, the
    mean replacements made, the share of reviews whose shift was capped (fewer characters or
    words than 2^W), n, clean accuracy and the scores.  The model is flagged `degenerate`
    when its clean accuracy is near chance or PA is at beta* = 0 in every view."""
    if not views:
        raise ValueError("no shifted views to score")
    for view, record in views.items():
        if view.strategy is None:
            raise ValueError("the clean view is the reference, not a view to score")
        if not (np.array_equal(record["ids"], clean["ids"])
                and np.array_equal(record["labels"], clean["labels"])):
            raise ValueError(f"view {view.tag}: its reviews are not the clean reviews, in order")
    labels = clean["labels"]
    clean_accuracy = afr_true(clean["logits"].astype(np.float64), labels)
    order = list(views)
    stack = np.stack([views[v]["logits"].astype(np.float64) for v in order])
    reference = np.repeat(clean["logits"].astype(np.float64)[None], len(order), axis=0)
    scores = score_views(reference, stack, labels, settings)
    keys = pd.DataFrame({"model": model, "strategy": [v.strategy for v in order],
                         "power": [v.power for v in order],
                         "replacements": [int(views[v]["replacements"]) for v in order],
                         "mean_replacements_made": [float(views[v]["made"].mean()) for v in order],
                         "capped": [float((views[v]["made"] < views[v]["replacements"]).mean())
                                    for v in order],
                         "n": len(labels), "clean_accuracy": clean_accuracy})
    flagged = degenerate.flag(clean_accuracy, len(labels), 2, scores.beta_exact)
    return pd.concat([keys, scores], axis=1).assign(**{degenerate.COLUMN: flagged})
