"""The PA paper's two illustrations, computed for real (Figures 1 and 2)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pabench.metrics import accuracy, afr_pred, pa_curve, posterior_agreement

CLASSIFIERS = ("perfect", "constant", "random")


def bernoulli_predictions(p: float, n: int, rng: np.random.Generator):
    """Targets y_i ~ Bernoulli(p) and each classifier's predictions on two evaluations (X', X'').

    perfect: f(y) = y; constant: f(y) = 0; random: an independent random permutation of the
    targets at each evaluation, so mismatches depend on p (Figure 1 of the paper)."""
    y = (rng.random(n) < p).astype(np.int64)
    preds = {
        "perfect": (y, y),
        "constant": (np.zeros_like(y), np.zeros_like(y)),
        "random": (rng.permutation(y), rng.permutation(y)),
    }
    return y, preds


def one_hot_logits(pred: np.ndarray, k: int = 2) -> np.ndarray:
    """Hard predictions as scores: 1 for the predicted class, 0 elsewhere."""
    return np.eye(k)[pred]


def bernoulli_table(n_samples: int, n_probabilities: int, seeds, solvers, adam_epochs: int,
                    adam: dict, progress: bool = False) -> pd.DataFrame:
    """Accuracy (on X'), AFR_P and PA of the three classifiers for every p and seed."""
    cases, a_scores, b_scores = [], [], []
    for seed in seeds:
        for i, p in enumerate(np.linspace(0.0, 1.0, n_probabilities)):
            rng = np.random.default_rng([seed, i])
            y, preds = bernoulli_predictions(float(p), n_samples, rng)
            for name in CLASSIFIERS:
                pa_, pb_ = preds[name]
                cases.append({"p": float(p), "seed": seed, "classifier": name,
                              "accuracy": accuracy(one_hot_logits(pa_), y),
                              "afr_pred": afr_pred(one_hot_logits(pa_), one_hot_logits(pb_))})
                a_scores.append(one_hot_logits(pa_))
                b_scores.append(one_hot_logits(pb_))
    a_stack, b_stack = np.stack(a_scores), np.stack(b_scores)
    rows = []
    for solver in solvers:
        kwargs = dict(epochs=adam_epochs, lr=adam["lr"], batch_size=adam["batch_size"],
                      beta0=adam["beta0"], seed=0, progress=progress) if solver == "adam" else {}
        res = posterior_agreement(a_stack, b_stack, solver=solver, **kwargs)
        for j, case in enumerate(cases):
            rows.append({**case, "solver": solver, "logpa": float(res.logpa[j]),
                         "pa": float(res.pa[j]), "beta": float(res.beta[j])})
    return pd.DataFrame(rows)


def random_classifier_closed_form(agree: int, disagree: int) -> tuple[float, float]:
    """(beta*, logpa) for one-hot binary scores with `agree` matching and `disagree`
    mismatching samples: with u = p(1-p), p = sigmoid(beta), the objective is
    agree*log(1-2u) + disagree*log(2u), maximised at u = disagree / (2 (agree + disagree))."""
    if disagree == 0:
        return math.inf, 0.0
    if disagree >= agree:
        return 0.0, -(agree + disagree) * math.log(2)
    u = disagree / (2 * (agree + disagree))
    q = (1 + math.sqrt(1 - 4 * u)) / 2
    return math.log(q / (1 - q)), agree * math.log(1 - 2 * u) + disagree * math.log(2 * u)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = np.exp(x - x.max())
    return z / z.sum()


def gaussian_illustration(n_observations: int, noise_std: float, grid_size: int, grid_limit: float,
                          beta_factor: float, curve_points: int, seed: int) -> dict:
    """Two noisy samples of a mean-zero Gaussian; hypotheses c on a grid with score
    S(c, X) = -mean_i (x_i - c)^2; Gibbs posteriors p(c | X) ~ exp(beta S(c, X)).
    Returns the optimal beta, the posteriors at beta*/f, beta*, beta*·f, and PA(beta)."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(0.0, noise_std, n_observations)
    x2 = rng.normal(0.0, noise_std, n_observations)
    grid = np.linspace(-grid_limit, grid_limit, grid_size)
    s1 = -((x1[:, None] - grid[None, :]) ** 2).mean(0)
    s2 = -((x2[:, None] - grid[None, :]) ** 2).mean(0)
    res = posterior_agreement(s1[None], s2[None])
    if not 0 < res.beta < math.inf:
        raise ValueError(f"seed {seed}: the optimal beta is {res.beta} (both samples pick the same "
                         "grid point); use another seed or a finer grid")
    betas = {"too low": res.beta / beta_factor, "optimal": res.beta, "too high": res.beta * beta_factor}
    posteriors = {name: (_softmax(b * s1), _softmax(b * s2)) for name, b in betas.items()}
    curve_beta = np.geomspace(res.beta / beta_factor**2, res.beta * beta_factor**1.5, curve_points)
    curve_pa = pa_curve(s1[None], s2[None], curve_beta) + math.log(grid_size)  # normalised
    return {"x1": x1, "x2": x2, "grid": grid, "beta_star": res.beta, "pa_star": res.pa,
            "betas": betas, "posteriors": posteriors, "curve_beta": curve_beta,
            "curve_pa": curve_pa, "pa_at": {k: float(pa_curve(s1[None], s2[None], [b])[0]
                                                     + math.log(grid_size))
                                            for k, b in betas.items()}}
