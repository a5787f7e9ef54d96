"""Accuracy-based robustness measures beside PA (Section 4 of the PA paper)."""
from __future__ import annotations

import torch

from pabench.metrics.pa import as_float64


def _predictions(scores, name: str) -> torch.Tensor:
    s = as_float64(scores, name)
    if s.dim() < 2 or s.shape[-2] == 0:
        raise ValueError(f"{name}: need scores of shape (..., N, K) with N >= 1, got {tuple(s.shape)}")
    if bool(torch.isnan(s).any()):
        raise ValueError(f"{name} contains {int(torch.isnan(s).sum())} NaN values")
    return s.argmax(-1)


def _labels(labels, n: int) -> torch.Tensor:
    y = torch.as_tensor(labels).long()
    if y.shape[-1:] != (n,):
        raise ValueError(f"labels have shape {tuple(y.shape)}, scores have {n} samples")
    return y


def accuracy(scores, labels) -> float:
    """Fraction of argmax predictions equal to the labels (clean accuracy on X')."""
    pred = _predictions(scores, "scores")
    return float((pred == _labels(labels, pred.shape[-1])).double().mean())


def afr_true(scores_b, labels) -> float:
    """AFR_T: accuracy of the predictions on X'' against the true labels (1 - attack success rate)."""
    return accuracy(scores_b, labels)


def afr_pred(scores_a, scores_b) -> float:
    """AFR_P: agreement of the predictions on X'' with those on X' (no labels needed)."""
    pa, pb = _predictions(scores_a, "scores_a"), _predictions(scores_b, "scores_b")
    if pa.shape != pb.shape:
        raise ValueError(f"shapes differ: {tuple(pa.shape)} vs {tuple(pb.shape)}")
    return float((pa == pb).double().mean())
