"""Average-case robustness estimators (Han, Srinivas & Lakkaraju): the probability that a
model's prediction stays the clean prediction t under isotropic Gaussian input noise,

    p_robust(x) = P_{eps ~ N(0, sigma^2 I)} [argmax f(x + eps) = t],

by Monte Carlo (`p_mc`), the exact answer for a linear model (`p_linear`), the Taylor and MMSE
linearisations with the multivariate normal CDF or the multivariate sigmoid (`p_taylor`,
`p_mmse`, `mvs=True`), and the softmax baseline (`p_softmax`); `estimate` dispatches by name.

    from pabench.metrics.avgcase import estimate
    p = estimate("mmse", model, x, sigma=0.1, n=5)      # x: a batch in the model's input space

Names load on first use, so that the torch-free parts (`mvn`, `checks`) stay light.
"""
import importlib

_NAMES = {"mvn_cdf": "mvn", "mv_sigmoid": "mvn",
          "ESTIMATORS": "checks", "check_estimator": "checks", "check_sigma": "checks",
          "check_n": "checks",
          "decision_functions": "gradients",
          "MCResult": "estimators", "estimate": "estimators", "p_mc": "estimators",
          "p_linear": "estimators", "p_taylor": "estimators", "p_mmse": "estimators",
          "p_softmax": "estimators", "linearised": "estimators", "predict": "estimators",
          "linear_weights": "estimators",
          "from_linearisation": "estimators", "cdf_over_tolerance": "estimators"}
__all__ = sorted(_NAMES)


def __getattr__(name):
    if name in _NAMES:
        return getattr(importlib.import_module(f"pabench.metrics.avgcase.{_NAMES[name]}"), name)
    raise AttributeError(f"module 'pabench.metrics.avgcase' has no attribute {name!r}")
