"""The estimators of p_robust(x) = P[argmax f(x + eps) = t], eps ~ N(0, sigma^2 I), t = the clean
prediction (Han, Srinivas & Lakkaraju, Section 3).  Inputs are taken as they are (the noisy input
is not clipped, as in the authors' code); `model` maps a batch to logits and is put in eval mode.

Every estimator checks its arguments and the model's clean logits before sampling anything.
"""
from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass

import numpy as np
import torch
from scipy import stats

from pabench.core.threads import limit_threads, size_of
from pabench.metrics.avgcase.checks import (check_classes, check_estimator, check_finite,
                                            check_n, check_sigma, check_temperature)
from pabench.metrics.avgcase.gradients import decision_functions, others
from pabench.metrics.avgcase.mvn import ABSEPS, mv_sigmoid, mvn_cdf

log = logging.getLogger("pabench.avgcase")

JITTER = 1e-5  # added to UU^T, as the authors do: U is rank-deficient when d < C-1 or rows align


@dataclass
class Linearisation:
    """A linear stand-in for the model around each point: decision-function values g (B, k),
    their gradient norms (B, k) and the covariance UU^T + 1e-5 I of the unit gradients (B, k, k),
    k = C-1.  z = g / (sigma * norm) for any sigma, so one gradient pass serves every sigma.
    `device`: where the gradients were taken; the normal CDF runs there too."""
    g: np.ndarray
    norm: np.ndarray
    cov: np.ndarray
    device: str = "cpu"

    def z(self, sigma: float) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = self.g / (check_sigma(sigma) * self.norm)
        # A flat decision function (zero gradient) is never crossed (g > 0) or always (g < 0).
        return np.where(self.norm > 0, z, np.sign(self.g) * np.inf)

    @classmethod
    def of(cls, g: torch.Tensor, grad: torch.Tensor) -> Linearisation:
        grad = grad.double()
        norm = grad.norm(dim=-1)
        unit = grad / norm.clamp_min(torch.finfo(torch.float64).tiny)[..., None]
        cov = unit @ unit.transpose(1, 2)
        cov += JITTER * torch.eye(cov.shape[-1], dtype=cov.dtype, device=cov.device)
        return cls(g.double().cpu().numpy(), norm.cpu().numpy(), cov.cpu().numpy(), str(g.device))


def from_linearisation(lin: Linearisation, sigma: float, mvs: bool = False, seed: int = 0,
                       return_error: bool = False):
    """p_robust of the linearised model: the mvn-cdf Phi_{UU^T}(z) (on the device the gradients
    were taken on), or the mv-sigmoid of z.  With `return_error` also the normal CDF's error
    estimate per point (0 for the mv-sigmoid, a closed form).  Points whose estimate exceeds the
    CDF's tolerance `mvn.ABSEPS` (where it stopped at its sample cap: near-singular UU^T) are
    logged as a warning either way; callers count them with `cdf_over_tolerance`."""
    z = lin.z(sigma)
    if mvs:
        p, err = mv_sigmoid(z), np.zeros(len(z))
    else:
        p, err = mvn_cdf(z, lin.cov, seed=seed, device=lin.device, return_error=True)
        over = cdf_over_tolerance(err)
        if over:
            log.warning("normal CDF at sigma %g: %d of %d points ended with error estimates above "
                        "%g (the largest %.2g)", sigma, over, len(err), ABSEPS, err.max())
    return (p, err) if return_error else p


def cdf_over_tolerance(err: np.ndarray) -> int:
    """Points whose normal-CDF error estimate (from_linearisation's) exceeds the tolerance."""
    return int((np.asarray(err) > ABSEPS).sum())


def _device(model) -> torch.device:
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


def _as_batch(x, model) -> torch.Tensor:
    x = torch.as_tensor(x)
    if not x.is_floating_point():
        raise ValueError(f"inputs must be floating point (the model's input space), got {x.dtype}")
    if x.ndim < 2 or len(x) == 0:
        raise ValueError(f"inputs must be a non-empty batch (N, ...), got shape {tuple(x.shape)}")
    check_finite(x, "the inputs")
    return x.to(_device(model))


@torch.inference_mode()
def _logits(model, x: torch.Tensor, batch_size: int) -> torch.Tensor:
    return torch.cat([model(x[i:i + batch_size]) for i in range(0, len(x), batch_size)])


def predict(model, x, batch_size: int = 512) -> tuple[torch.Tensor, torch.Tensor]:
    """Clean logits and predictions t, checked: finite, at least 2 classes."""
    model.eval()
    x = _as_batch(x, model)
    logits = _logits(model, x, batch_size)
    if logits.ndim != 2:
        raise ValueError(f"the model must return logits of shape (N, C), got {tuple(logits.shape)}")
    check_classes(logits.shape[1])
    check_finite(logits, "the model's logits")
    return logits, logits.argmax(1)


def _targets(model, x, target, batch_size):
    x = _as_batch(x, model)
    if target is None:
        _, target = predict(model, x, batch_size)
    return x, torch.as_tensor(target, device=x.device)


# ---------------------------------------------------------------------------------------------
# Monte Carlo

@dataclass
class MCResult:
    """p_mc per point and the number of noisy copies each point used."""
    p: np.ndarray
    n: np.ndarray


def _mc_half_width(hits: np.ndarray, n: np.ndarray, confidence: float) -> np.ndarray:
    """Half-width of the Clopper-Pearson interval (exact, valid at 0 and n hits too)."""
    alpha = 1.0 - confidence
    lo = np.where(hits > 0, stats.beta.ppf(alpha / 2, hits, n - hits + 1), 0.0)
    hi = np.where(hits < n, stats.beta.ppf(1 - alpha / 2, hits + 1, n - hits), 1.0)
    p = hits / n
    return np.maximum(p - lo, hi - p)


def equal_accuracy_tol(n: int, confidence: float = 0.99) -> float:
    """The worst-case half-width of n fixed samples (p = 1/2, normal approximation): adaptive
    sampling stopped at this width is as accurate as n samples for every point."""
    return float(stats.norm.ppf(0.5 + confidence / 2) * 0.5 / np.sqrt(n))


def _pixels(copies: str | None = None):
    """Decorator: the estimator runs under pabench.core.threads' bound for its work, counted per
    point and noisy copy (the argument `copies`) as the larger of the point's input values and
    the model's parameters (a floor on its multiply-adds), so that a large network on a few
    points keeps every thread while a small one on a busy machine does not fan out.  An invalid
    count counts as 1: the estimator's checks name it."""
    def wrap(fn):
        signature = inspect.signature(fn)

        def work(*args, **kwargs):
            given = signature.bind(*args, **kwargs)
            given.apply_defaults()
            n = given.arguments.get(copies, 1)
            valid = isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0
            x, model = given.arguments["x"], given.arguments["model"]
            points = len(x) if size_of(x) else 0
            per_point = size_of(x) // max(points, 1)
            params = sum(p.numel() for p in model.parameters()) if hasattr(model, "parameters") else 0
            return points * max(per_point, params) * (int(n) if valid else 1)
        return limit_threads(work)(fn)
    return wrap


# One thread for small inputs: on a busy machine extra threads cost more than they save.
@_pixels("n")
def p_mc(model, x, sigma: float, n: int = 10_000, *, target=None, batch_size: int | None = None,
         seed: int = 0, adaptive: bool = False, tol: float | None = None,
         confidence: float = 0.99, bfloat16: bool = False, progress: bool = False) -> MCResult:
    """Fraction of n noisy copies classified as t, sampled without autograd in batches of
    `batch_size` copies (default: 1024 on a GPU, 256 on a CPU, where batches of 1024 ran 1.4-1.7x
    slower per copy: the quick scale's ResNet-18/8 and CNN).

    adaptive=True draws copies in rounds and stops a point once its Clopper-Pearson interval at
    `confidence` is within +-tol (default: as tight as n fixed samples guarantee at worst,
    `equal_accuracy_tol`), or at n copies.  The first round is the fewest copies any point can
    stop at (`_fewest`: a point at p = 1), each later one the fewest that would stop the point if
    its estimate stayed where it is (`_next_round`).  bfloat16=True classifies the copies under
    bfloat16 autocast: faster where the hardware has bfloat16 units, but the noisy logits carry
    ~3 significant digits, so a copy near a tie may change class (an approximation, off by
    default)."""
    sigma, n = check_sigma(sigma), check_n(n)
    model.eval()
    batch_size = batch_size or (1024 if torch.as_tensor(x).device.type == "cuda" else 256)
    x, target = _targets(model, x, target, batch_size)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    tol = equal_accuracy_tol(n, confidence) if tol is None else float(tol)
    if not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol!r}")
    gen = torch.Generator(device=x.device).manual_seed(seed)
    b = len(x)
    hits, used = np.zeros(b, np.int64), np.zeros(b, np.int64)
    step = np.full(b, min(n, _fewest(tol, confidence)) if adaptive else n)
    active = np.arange(b)
    bar = _bar(progress, b * n, "p_mc copies")
    with torch.inference_mode(), torch.autocast(x.device.type, torch.bfloat16, enabled=bfloat16):
        while len(active):
            want = np.minimum(step[active], n - used[active])
            # Flat (point, copy) pairs for this round, evaluated batch_size at a time.
            owners = np.repeat(active, want)
            for i in range(0, len(owners), batch_size):
                idx = torch.as_tensor(owners[i:i + batch_size], device=x.device)
                xs = x[idx]
                noise = torch.randn(xs.shape, generator=gen, device=x.device, dtype=xs.dtype)
                same = (model(xs + sigma * noise).argmax(1) == target[idx]).cpu().numpy()
                np.add.at(hits, owners[i:i + batch_size], same)
                bar.update(len(idx))
            used[active] += want
            done = used[active] >= n
            if adaptive:
                h, u = hits[active], used[active]
                done |= _mc_half_width(h, u, confidence) <= tol
                step[active] = _next_round(h, u, tol, confidence, n)
            active = active[~done]
    bar.update(bar.total - bar.n)   # points stopped early leave part of the total undrawn
    bar.close()
    return MCResult(hits / used, used)


_MIN_ROUND = 16


def _fewest(tol: float, confidence: float) -> int:
    """Copies below which no point can stop: the Clopper-Pearson interval is narrowest with all
    (or no) copies classified t, where its half-width is 1 - (alpha / 2)^(1 / m).  (tol >= 1,
    e.g. the equal-accuracy tol of n = 1: any copy will do.)"""
    if tol >= 1:
        return 1
    alpha = 1.0 - confidence
    return max(_MIN_ROUND, int(np.ceil(np.log(alpha / 2) / np.log1p(-tol))))


def _next_round(hits: np.ndarray, used: np.ndarray, tol: float, confidence: float,
                n: int) -> np.ndarray:
    """Copies to draw next per point: the fewest (at least _MIN_ROUND, at most up to n in all)
    whose interval would be within tol if the estimate stayed where it is, by bisection on the
    total.  (Rounds of fixed growth overshoot: doubling took a point at p = 1 that needs ~90
    copies to 192, and steps of 1.25x, 1.5x and 2x still drew ~10% more than needed.)"""
    p = hits / used
    lo = np.minimum(used + _MIN_ROUND, n)         # fits(lo) unknown, fits(hi) assumed
    hi = np.full_like(used, n)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        fits = _mc_half_width(np.round(p * mid), mid, confidence) <= tol
        hi = np.where(fits, mid, hi)
        lo = np.where(fits, lo, mid + 1)
    return (hi - used).astype(np.int64)


def _bar(enabled: bool, total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="copy", disable=not enabled, mininterval=2.0)


# ---------------------------------------------------------------------------------------------
# Linearisations: Taylor (at x) and MMSE (averaged over noisy copies)

@_pixels("n")
def linearised(model, x, *, target=None, sigma: float | None = None, n: int = 1,
               batch_size: int = 256, seed: int = 0) -> Linearisation:
    """Taylor linearisation at x (sigma None), or the MMSE one: g and grad g averaged over n
    copies x + eps, eps ~ N(0, sigma^2 I), with the clean target t."""
    model.eval()
    x, target = _targets(model, x, target, batch_size)
    if sigma is None:
        parts = [decision_functions(model, x[i:i + batch_size], target[i:i + batch_size])
                 for i in range(0, len(x), batch_size)]
        return Linearisation.of(torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts]))
    sigma, n = check_sigma(sigma), check_n(n)
    gen = torch.Generator(device=x.device).manual_seed(seed)
    b = len(x)
    gs, grads = [], []
    # Copies in blocks of whole points: (points, n) pairs flattened to batches of ~batch_size.
    per = max(1, batch_size // n)
    for i in range(0, b, per):
        xs = x[i:i + per].repeat_interleave(n, 0)
        ts = target[i:i + per].repeat_interleave(n, 0)
        noise = torch.randn(xs.shape, generator=gen, device=x.device, dtype=xs.dtype)
        g, grad = decision_functions(model, xs + sigma * noise, ts)
        gs.append(g.reshape(-1, n, g.shape[1]).mean(1))
        grads.append(grad.reshape(-1, n, *grad.shape[1:]).mean(1))
    return Linearisation.of(torch.cat(gs), torch.cat(grads))


@_pixels()
def p_taylor(model, x, sigma: float, *, mvs: bool = False, target=None, batch_size: int = 256,
             seed: int = 0, return_error: bool = False):
    """p_robust by the Taylor linearisation at x; with `return_error` also the normal CDF's
    error estimates (`from_linearisation`)."""
    sigma = check_sigma(sigma)
    lin = linearised(model, x, target=target, batch_size=batch_size)
    return from_linearisation(lin, sigma, mvs, seed, return_error)


@_pixels("n")
def p_mmse(model, x, sigma: float, n: int = 5, *, mvs: bool = False, target=None,
           batch_size: int = 256, seed: int = 0, return_error: bool = False):
    """p_robust by the MMSE linearisation (n noisy copies); `return_error` as for p_taylor."""
    sigma, n = check_sigma(sigma), check_n(n)
    lin = linearised(model, x, target=target, sigma=sigma, n=n, batch_size=batch_size, seed=seed)
    return from_linearisation(lin, sigma, mvs, seed, return_error)


def p_linear(weight, bias, x, sigma: float, seed: int = 0, return_error: bool = False):
    """The exact answer for a linear model f(x) = W x + b (Lemma 1), from its weights:
    u_i = w_t - w_i, c_i = u_i . x + b_t - b_i, p = Phi_{UU^T}(c_i / (sigma ||u_i||)), up to the
    normal CDF's error (`return_error` as for p_taylor)."""
    sigma = check_sigma(sigma)
    w = torch.as_tensor(weight, dtype=torch.float64)
    bias = torch.as_tensor(bias, dtype=torch.float64)
    x = torch.as_tensor(x, dtype=torch.float64).reshape(len(x), -1)
    check_classes(w.shape[0])
    check_finite(x, "the inputs")
    logits = x @ w.T + bias
    target = logits.argmax(1)
    rows = torch.arange(len(x))
    c = others(logits[rows, target][:, None] - logits, target)
    u = others(w[target][:, None, :] - w[None], target)
    return from_linearisation(Linearisation.of(c, u), sigma, False, seed, return_error)


# ---------------------------------------------------------------------------------------------
# Softmax baseline

@_pixels("n")
def p_softmax(model, x, temperature: float = 1.0, *, sigma: float | None = None, n: int = 1,
              target=None, batch_size: int = 512, seed: int = 0) -> np.ndarray:
    """softmax_t(f(x) / T): the model's confidence in t (independent of sigma).  With sigma and
    n > 1, the same averaged over n noisy copies (the smoothed softmax, for convergence plots)."""
    temperature = check_temperature(temperature)
    model.eval()
    x, target = _targets(model, x, target, batch_size)
    if sigma is None:
        probs = torch.softmax(_logits(model, x, batch_size) / temperature, 1)
        return probs[torch.arange(len(x)), target].double().cpu().numpy()
    sigma, n = check_sigma(sigma), check_n(n)
    gen = torch.Generator(device=x.device).manual_seed(seed)
    total = torch.zeros(len(x), dtype=torch.float64, device=x.device)
    with torch.inference_mode():
        for _ in range(n):
            noise = torch.randn(x.shape, generator=gen, device=x.device, dtype=x.dtype)
            probs = torch.softmax(_logits(model, x + sigma * noise, batch_size) / temperature, 1)
            total += probs[torch.arange(len(x)), target].double()
    return (total / n).cpu().numpy()


# ---------------------------------------------------------------------------------------------

def estimate(name: str, model, x, sigma: float, *, n: int | None = None,
             temperature: float = 1.0, **kwargs) -> np.ndarray:
    """p_robust per point by the named estimator (`checks.ESTIMATORS`); n = noisy copies for mc
    (default 10,000) and mmse (default 5).  "linear" needs a linear model (`linear_weights`):
    its weights give the exact answer.  `return_error=True` (the `checks.LINEARISED` ones) also
    returns the normal CDF's error estimates."""
    check_estimator(name)
    check_sigma(sigma)
    if n is not None:
        check_n(n)
    if name == "mc":
        return p_mc(model, x, sigma, n or 10_000, **kwargs).p
    if name in ("taylor", "taylor_mvs"):
        return p_taylor(model, x, sigma, mvs=name.endswith("_mvs"), **kwargs)
    if name in ("mmse", "mmse_mvs"):
        return p_mmse(model, x, sigma, n or 5, mvs=name.endswith("_mvs"), **kwargs)
    if name == "softmax":
        return p_softmax(model, x, temperature, **kwargs)
    weight, bias = linear_weights(model, x)
    return p_linear(weight, bias, torch.as_tensor(x).cpu(), sigma, kwargs.get("seed", 0),
                    kwargs.get("return_error", False))


def linear_weights(model, x) -> tuple[torch.Tensor, torch.Tensor]:
    """(W, b) of a model that is f(x) = W x.flatten() + b (one weight matrix and one bias, any
    module type, TorchScript too), checked against the model's own outputs on x."""
    params = [p.detach().cpu() for p in model.parameters()]
    shapes = [tuple(p.shape) for p in params]
    if len(params) != 2 or len(shapes[0]) != 2 or shapes[1] != shapes[0][:1]:
        raise ValueError("the 'linear' estimator needs a linear model (one weight matrix and one "
                         f"bias); this model has parameters of shapes {shapes}")
    weight, bias = params
    x = torch.as_tensor(x)
    # The model stays where it is: moving it inside inference mode would leave it on the CPU
    # with inference-tensor weights, which autograd (Taylor, MMSE) then refuses.
    with torch.inference_mode():
        got = model(x.to(_device(model))).double().cpu()
    x = x.cpu()
    want = x.reshape(len(x), -1).double() @ weight.double().T + bias.double()
    if not torch.allclose(got, want, rtol=1e-4, atol=1e-4 * float(want.abs().max()) + 1e-6):
        raise ValueError("the 'linear' estimator needs f(x) = W x + b; this model's outputs differ")
    return weight, bias
