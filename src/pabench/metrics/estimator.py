"""A small estimator interface beside the functional API, in the style of torchmetrics: feed
batches with `update`, get the result with `compute`, start over with `reset`.

    pa = PosteriorAgreement(solver="exact")
    for logits_a, logits_b in batches:
        pa.update(logits_a, logits_b)
    result = pa.compute()                       # the same as posterior_agreement(all_a, all_b)

An estimator is its functional form plus settings: subclasses name the function (`function`) and
how many aligned arrays a batch has (`arity`).  Batches are concatenated along the first axis, so
estimators that are not sums over samples (PA's beta is fitted to the whole set) stay exact.
The average-case robustness estimators plug in the same way.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar

import numpy as np

from pabench.metrics.afr import afr_pred, afr_true
from pabench.metrics.pa import posterior_agreement


def _concat(parts: list):
    if not parts:
        raise ValueError("compute() before any update()")
    try:
        import torch
        if isinstance(parts[0], torch.Tensor):
            return torch.cat(parts)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    return np.concatenate([np.asarray(p) for p in parts])


class Estimator:
    """Accumulates batches of `arity` aligned arrays; compute() applies `function` to them all."""
    function: ClassVar[Callable[..., Any]]
    arity: ClassVar[int]

    def __init__(self, **settings):
        self.settings = settings
        self.reset()

    def reset(self) -> None:
        self._parts: list[list] = [[] for _ in range(self.arity)]

    def update(self, *arrays) -> Estimator:
        if len(arrays) != self.arity:
            raise TypeError(f"{type(self).__name__}.update takes {self.arity} arrays, got {len(arrays)}")
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ValueError(f"{type(self).__name__}.update: arrays of different lengths {sorted(lengths)}")
        for part, array in zip(self._parts, arrays):
            part.append(array)
        return self

    @property
    def n(self) -> int:
        return sum(len(a) for a in self._parts[0])

    def compute(self):
        return type(self).function(*(_concat(p) for p in self._parts), **self.settings)

    def __call__(self, *arrays):
        """One batch, functional style: the estimate of these arrays alone (state untouched)."""
        return type(self).function(*arrays, **self.settings)


class PosteriorAgreement(Estimator):
    """PA between two sets of scores (settings as `posterior_agreement`: solver, inputs, ...)."""
    function = staticmethod(posterior_agreement)
    arity = 2


class AFRTrue(Estimator):
    """Accuracy of scores against labels (AFR_T)."""
    function = staticmethod(afr_true)
    arity = 2


class AFRPred(Estimator):
    """Agreement of two sets of predictions (AFR_P)."""
    function = staticmethod(afr_pred)
    arity = 2
