"""Typed solver settings, importable without PyTorch (the workflow plans with them)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PASettings:
    """The authors' adam procedure for beta (Adam, minibatches, projection to beta >= 0, best
    epoch on the full data): the one typed value every experiment passes around."""
    epochs: int
    lr: float = 0.1
    batch_size: int = 64
    beta0: float = 1.0
    seed: int = 0

    @classmethod
    def from_config(cls, adam: dict, epochs: int) -> PASettings:
        """From the config's `pa.adam` section and an experiment's number of epochs."""
        return cls(epochs=int(epochs), lr=float(adam["lr"]), batch_size=int(adam["batch_size"]),
                   beta0=float(adam["beta0"]))

    def solve(self, a, b):
        """PA of the pairs (a, b), stacked or single, with these settings."""
        from pabench.metrics.pa import posterior_agreement

        return posterior_agreement(a, b, solver="adam", epochs=self.epochs, lr=self.lr,
                                   batch_size=self.batch_size, beta0=self.beta0, seed=self.seed)
