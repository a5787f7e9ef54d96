"""Robustness measures: Posterior Agreement and the accuracy-based measures beside it."""
from .accuracy import accuracy, afr_pred, afr_true
from .pa import PAResult, pa_curve, posterior_agreement

__all__ = ["PAResult", "accuracy", "afr_pred", "afr_true", "pa_curve", "posterior_agreement"]
