"""Argument checks shared by the estimators, the CLI and the workflow's config check: every bad
value is named before any work starts. No PyTorch here."""
from __future__ import annotations

import math

import numpy as np

# Estimator names: what `estimate` accepts and what result tables call them.
ESTIMATORS = ("mc", "taylor", "taylor_mvs", "mmse", "mmse_mvs", "softmax", "linear")
# Those that take `return_error` (the normal CDF's error estimates; 0 for the mv-sigmoid ones).
LINEARISED = ("taylor", "taylor_mvs", "mmse", "mmse_mvs", "linear")


def check_estimator(name: str) -> str:
    if name not in ESTIMATORS:
        raise ValueError(f"unknown estimator {name!r}; choose one of {', '.join(ESTIMATORS)}")
    return name


def check_sigma(sigma) -> float:
    """sigma > 0 and finite (the noise standard deviation in input space)."""
    try:
        value = float(sigma)
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a number, got {sigma!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    return value


def check_n(n, what: str = "n") -> int:
    """A sample count >= 1."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{what} must be an integer >= 1, got {n!r}")
    return int(n)


def check_temperature(temperature) -> float:
    value = float(temperature)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"softmax temperature must be a finite number > 0, got {temperature!r}")
    return value


def check_finite(values, what: str) -> None:
    """Raise if an array (numpy or torch) holds NaN or infinity, saying where."""
    arr = values.detach().cpu().numpy() if hasattr(values, "detach") else np.asarray(values)
    bad = ~np.isfinite(arr)
    if bad.any():
        first = np.argwhere(bad)[0]
        raise ValueError(f"{what} holds {int(bad.sum())} non-finite value(s), the first "
                         f"{arr[tuple(first)]!r} at index {tuple(int(i) for i in first)}")


def check_classes(num_classes: int) -> None:
    if num_classes < 2:
        raise ValueError(f"the model returns {num_classes} class score(s); average-case "
                         "robustness needs at least 2 classes")
