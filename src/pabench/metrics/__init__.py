"""Robustness measures: Posterior Agreement and the accuracy-based measures beside it.

Names are loaded on first use, so that importing a light submodule (e.g. `metrics.settings`,
which the workflow's planning reads) does not import PyTorch.
"""
import importlib

_NAMES = {"PAResult": "pa", "pa_curve": "pa", "posterior_agreement": "pa",
          "accuracy": "afr", "afr_pred": "afr", "afr_true": "afr",
          "PASettings": "settings", "score_views": "views",
          "Estimator": "estimator", "PosteriorAgreement": "estimator"}
__all__ = sorted(_NAMES)


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module(f"pabench.metrics.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'pabench.metrics' has no attribute {name!r}")
