"""Degenerate models: results of a model that learned nothing are not evidence either way.

A model is flagged `degenerate` when either
- its accuracy on in-distribution held-out data is near chance: below the fewest correct answers
  out of n that a classifier guessing at random (1/K per sample) reaches with probability at most
  that of a normal draw beyond Z_MARGIN standard deviations, 0.13% (the exact binomial tail: the
  normal approximation, 1/K + 3 standard errors, lets one lucky hit in 12 images of 1,000 classes
  count as learning, though a guesser scores it 1.2% of the time); or
- PA sits at beta* = 0 (exact solver) in every view that differs from its reference: the two
  posteriors never agree better than uniform ones, so PA carries no information.  Every view
  counts, the partly shifted ones too (SR < 1, AR < 1, which share samples with the reference):
  a model that loses all agreement only on the fully shifted views is the non-robustness the
  experiments measure, not a degenerate model.

The experiments write the flag into their tidy tables (a boolean `degenerate` column, one value
per model instance); the claims check leaves flagged rows out (pabench.reporting.claims) and the
figures say in their caption how many models were flagged (`note`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

Z_MARGIN = 3.0
COLUMN = "degenerate"


def _hits_needed(n: int, num_classes: int) -> int:
    """The fewest hits out of n that a random guesser reaches with probability <=
    norm.sf(Z_MARGIN)."""
    if n < 1 or num_classes < 2:
        raise ValueError(f"need n >= 1 samples and K >= 2 classes, got n = {n}, K = {num_classes}")
    from scipy.stats import binom, norm  # here: figure modules import this one at every workflow start

    # binom.isf: the smallest k with P(X > k) <= alpha, so a guesser reaches k + 1 hits that rarely
    return int(binom.isf(norm.sf(Z_MARGIN), n, 1.0 / num_classes)) + 1


def chance_bar(n: int, num_classes: int) -> float:
    """The accuracy a model must reach on n samples of K balanced classes not to be near chance."""
    return _hits_needed(n, num_classes) / n


def near_chance(accuracy: float, n: int, num_classes: int) -> bool:
    # accuracy * n counts hits; the tolerance keeps k/n computed elsewhere from falling below k/n
    return bool(accuracy * n < _hits_needed(n, num_classes) - 1e-6)


def pa_collapsed(beta_exact) -> bool:
    """beta* = 0 in every view, those with beta* = inf left out (perfect agreement: identical
    sets, such as AR = 0, or a constant prediction, which the near-chance rule catches)."""
    beta = np.asarray(beta_exact, dtype=float)
    differing = beta[np.isfinite(beta)]
    return bool(differing.size) and bool((differing == 0).all())


def flag(accuracy: float, n: int, num_classes: int, beta_exact=()) -> bool:
    return near_chance(accuracy, n, num_classes) or pa_collapsed(beta_exact)


def note(table: pd.DataFrame, keys) -> str | None:
    """The caption's note when some of the table's models (distinct `keys`, e.g. model and seed)
    are flagged; None when none is."""
    if COLUMN not in table.columns or table.empty:
        return None
    keys = [k for k in keys if k in table.columns]
    models = table.groupby(keys, dropna=False)[COLUMN].any()
    if not models.any():
        return None
    return (f"{int(models.sum())} of {len(models)} models near chance or with PA at beta* = 0 "
            "in every view: not evidence (column degenerate)")


def annotate(meta: dict, table: pd.DataFrame, keys) -> dict:
    """meta with the note under `degenerate` (drawn in the figure's footnote and written into
    its caption), when some model is flagged."""
    text = note(table, keys)
    return {**meta, COLUMN: text} if text else meta
