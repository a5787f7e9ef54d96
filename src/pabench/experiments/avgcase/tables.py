"""Tables of the average-case robustness paper (pandas and scipy only): Table 1's runtimes, the
case study, the models, the rank correlation of PA with p_robust, and the estimators' errors
against MC (the table the error claims read; Figure 2 plots the same `errors_frame`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.core.io import read_table
from pabench.reporting.degenerate import COLUMN as DEGENERATE

# Every estimator compared with MC, in the order legends and tables list them; "linear" is the
# closed form of a linear model (exact), present only for linear models.
ESTIMATORS = ("mmse", "mmse_mvs", "taylor", "taylor_mvs", "softmax", "linear")
# The paper's Table 1 (CIFAR-10 ResNet-18, 50 points, sigma = 0.1), in seconds: CPU and V100.
PAPER_TABLE1 = {"mc": (6071, 1196), "taylor": (8, 2), "mmse": (41, 6)}
# The paper's case study (Section 4.3, CIFAR-10): test accuracy of the CNN per score.
PAPER_CASE_STUDY = {"mmse": 0.92, "softmax": 0.58}
# The case study's sigma rule (config avgcase.case_study.sigma).
FEWEST_TIES = "fewest_ties"


def tied(p, tie: float) -> np.ndarray:
    """p within `tie` of 0 or 1: values no ranking can order (the normal CDF's error and MMSE's
    sampling noise exceed their differences, and many points sit there at once)."""
    p = np.asarray(p, dtype=float)
    return (p <= tie) | (p >= 1 - tie)


def fewest_ties_sigma(estimates: pd.DataFrame, tie: float, estimator: str = "mmse") -> float:
    """The sigma of the grid at which the fewest points' p (of `estimator`) are tied at 0 or 1;
    of equal counts the smaller sigma."""
    e = estimates[estimates.estimator == estimator]
    if e.empty:
        raise ValueError(f"no {estimator} estimates to choose the sigma from")
    counts = e.assign(tied=tied(e.p, tie)).groupby("sigma").tied.sum().sort_index()
    return float(counts.idxmin())   # the first of equal minima: the smaller sigma


def read_estimates(paths_) -> pd.DataFrame:
    """One or several per-model estimate files, stacked."""
    paths_ = [paths_] if isinstance(paths_, str) else list(paths_)
    return pd.concat([read_table(p) for p in paths_], ignore_index=True)


def errors_frame(estimates: pd.DataFrame) -> pd.DataFrame:
    """Per model, training seed, sigma and estimator: the mean over points of |p - p_mc| and of
    |p - p_mc| / p_mc (the latter over the points with p_mc > 0), with the points each mean is
    taken over, and the model's `degenerate` flag."""
    keys = ["dataset", "model", "seed", "point", "sigma"]
    mc = estimates[estimates.estimator == "mc"][keys + ["p"]].rename(columns={"p": "p_mc"})
    if mc.empty:
        raise ValueError("no MC estimates: nothing to measure the errors against")
    rows = estimates[estimates.estimator != "mc"].merge(mc, on=keys, how="inner")
    rows = rows.assign(abs_error=(rows.p - rows.p_mc).abs())
    rows = rows.assign(rel_error=rows.abs_error / rows.p_mc.where(rows.p_mc > 0))
    out = rows.groupby(["dataset", "model", "arch", "lam", "seed", DEGENERATE, "sigma", "estimator"]).agg(
        mean_abs_error=("abs_error", "mean"), mean_rel_error=("rel_error", "mean"),
        n_points=("abs_error", "size"), n_rel_points=("rel_error", "count"),
        mean_p=("p", "mean"), mean_p_mc=("p_mc", "mean")).reset_index()
    order = {e: k for k, e in enumerate(ESTIMATORS)}
    out = out.assign(_order=out.estimator.map(order).fillna(len(order)))
    return out.sort_values(["dataset", "model", "seed", "_order", "sigma"]).drop(columns="_order").reset_index(drop=True)


def errors_of(paths_) -> pd.DataFrame:
    """errors_frame of estimate files, one file at a time (at paper scale each holds millions of
    rows: stacking them all first would need gigabytes)."""
    paths_ = [paths_] if isinstance(paths_, str) else list(paths_)
    return pd.concat([errors_frame(read_table(p)) for p in paths_], ignore_index=True)


def speedups(runtime: pd.DataFrame) -> pd.DataFrame:
    """The runtime table with each estimator's speed-up per point over MC (same dataset, model
    and device; NaN where that group has no MC run)."""
    keys = ["dataset", "model", "device"]
    mc = runtime[runtime.estimator == "mc"].groupby(keys).seconds_per_point.mean().rename("mc_spp")
    out = runtime.merge(mc.reset_index(), on=keys, how="left")
    return out.assign(speedup=out.mc_spp / out.seconds_per_point)


def table1(inputs: dict) -> pd.DataFrame:
    """Runtimes of MC, Taylor and MMSE: measured, per point, extrapolated to the paper's 50 points,
    the speed-up over MC, and the paper's own times."""
    t = speedups(read_table(inputs["table"]))
    return pd.DataFrame({
        "dataset": t.dataset, "model": t.model, "estimator": t.estimator,
        "n": [int(n) if n > 0 else "N/A" for n in t.n], "points": t.points, "sigma": t.sigma,
        "seconds": t.seconds, "seconds per point": t.seconds_per_point,
        "seconds for 50 points (extrapolated)": t.seconds_per_point * 50,
        "speed-up vs MC (per point)": t.speedup,
        "paper CPU s (50 points)": [PAPER_TABLE1.get(e, (np.nan,))[0] for e in t.estimator],
        "paper V100 s (50 points)": [PAPER_TABLE1.get(e, (np.nan, np.nan))[1] for e in t.estimator],
        "device": t.device})


def runtimes(inputs: dict) -> pd.DataFrame:
    """Every model's runtimes of MC, Taylor and MMSE (Table 1's setting on each model's own
    points): seconds, per point, and the speed-up over MC per point."""
    t = speedups(read_table(inputs["table"]))
    return pd.DataFrame({
        "dataset": t.dataset, "model": t.model, "estimator": t.estimator,
        "n": [int(n) if n > 0 else "N/A" for n in t.n], "points": t.points, "sigma": t.sigma,
        "seconds": t.seconds, "seconds per point": t.seconds_per_point,
        "speed-up vs MC (per point)": t.speedup, "device": t.device,
        DEGENERATE: t[DEGENERATE] if DEGENERATE in t else False}).reset_index(drop=True)


def case_study(inputs: dict) -> pd.DataFrame:
    """Accuracy of the CNN telling apart the top and bottom quantile of each score's untied pool,
    per training seed of the model, with the share of images each score has tied at 0 or 1."""
    t = read_table(inputs["table"])
    return pd.DataFrame({
        "dataset": t.dataset, "model": t.model, "seed": t.seed,
        "score": ["p_mmse" if s == "mmse" else s for s in t.score], "sigma": t.sigma,
        "tied share (images)": t.tied_share, "pool (untied images)": t.pool,
        "quantile": t["quantile"], "per class": t.per_class, "test accuracy": t.test_accuracy,
        "train accuracy": t.train_accuracy, "n train": t.n_train, "n test": t.n_test,
        "paper test accuracy (CIFAR-10)": [PAPER_CASE_STUDY.get(s, np.nan) for s in t.score]})


def models(inputs: dict) -> pd.DataFrame:
    """Every model's final epoch per training seed: did it learn (accuracy; `degenerate`: near
    chance on the n_test test images), and how smooth is it (gradient norm)."""
    h = read_table(inputs["table"])
    last = h.sort_values("epoch").groupby(["dataset", "model", "seed"], sort=False).tail(1)
    last = last.sort_values(["dataset", "arch", "lam", "seed"])
    return pd.DataFrame({
        "dataset": last.dataset, "model": last.model, "seed": last.seed, "architecture": last.arch,
        "lambda": last.lam, "epochs": last.epoch, "final loss": last.loss,
        "train accuracy": last.train_accuracy, "test accuracy": last.test_accuracy,
        "input-gradient norm (final epoch)": last.grad_norm,
        DEGENERATE: last[DEGENERATE]}).reset_index(drop=True)


def _rank_correlations(x: pd.Series, y: pd.Series) -> dict:
    if len(x) < 3:  # a rank correlation of two points says nothing
        return {"spearman": np.nan, "spearman p": np.nan, "kendall": np.nan, "kendall p": np.nan}
    from scipy import stats  # here: the registries import this module at every workflow start

    rho, tau = stats.spearmanr(x, y), stats.kendalltau(x, y)
    return {"spearman": rho.statistic, "spearman p": rho.pvalue,
            "kendall": tau.statistic, "kendall p": tau.pvalue}


def noise_pa_correlation(inputs: dict) -> pd.DataFrame:
    """Rank correlations with the mean p_robust (MC) over every (model, sigma): of log PA (exact
    and adam) and of AFR_P (the agreement of noisy with clean predictions)."""
    t = read_table(inputs["table"])
    rows = []
    for column, name in (("logpa", "log PA (exact)"), ("logpa_adam", "log PA (adam)"),
                         ("afr_pred", "AFR_P")):
        pair = t[[column, "p_mc_mean"]].dropna()
        rows.append({"measure": name, "against": "mean p_robust (MC)", "n (model, sigma)": len(pair),
                     "models": len(t[["dataset", "model"]].drop_duplicates()), **_rank_correlations(pair[column], pair.p_mc_mean)})
    return pd.DataFrame(rows)


def errors(inputs: dict, main: str | None = None) -> pd.DataFrame:
    """Per model, sigma and estimator: mean absolute and relative error against MC over the
    points; `main` ("<dataset>/<model>") marks the main model's rows (the claims read them)."""
    err = errors_of(inputs["estimates"])
    return err.assign(main=(err.dataset + "/" + err.model) == main)
