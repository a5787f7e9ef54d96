"""Figures of the average-case robustness paper (Han, Srinivas & Lakkaraju), drawn from the
per-model estimate files and the stacked result tables (pandas, scipy and matplotlib only):
estimator errors against MC (Figure 2a/b), mv-sigmoid against mvn-cdf (Figure 10), the most and
least robust images per class (Figure 3), per-class distributions of p_robust (Figure 4), the
convergence of the sampling estimators with n, the linear models' MMSE against the exact answer
with n, and PA under Gaussian noise (new)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.core.io import load_npz, read_table
from pabench.experiments.avgcase.tables import (ESTIMATORS, FEWEST_TIES, errors_of,
                                                fewest_ties_sigma, read_estimates)
from pabench.reporting import degenerate
from pabench.reporting.plotting import plt, save_figure

LABEL = {"mc": "MC", "mmse": "MMSE", "mmse_mvs": "MMSE (mv-sigmoid)", "taylor": "Taylor",
         "taylor_mvs": "Taylor (mv-sigmoid)", "softmax": "softmax", "linear": "exact (linear)"}
# The mv-sigmoid variant shares its estimator's colour, dashed.
STYLE = {"mc": ("C2", "-"), "mmse": ("C0", "-"), "mmse_mvs": ("C0", "--"), "taylor": ("C1", "-"),
         "taylor_mvs": ("C1", "--"), "softmax": ("C3", "-"), "linear": ("k", ":")}
SIGMA_LABEL = "noise std sigma (inputs in [0, 1])"
ERROR_METRICS = (("mean_abs_error", "mean |p - p_MC|"),
                 ("mean_rel_error", "mean |p - p_MC| / p_MC"))

FMNIST = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker",
          "Bag", "Ankle boot")
CIFAR10 = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
CIFAR100 = (
    "apple", "aquarium_fish", "baby", "bear", "beaver", "bed", "bee", "beetle", "bicycle", "bottle",
    "bowl", "boy", "bridge", "bus", "butterfly", "camel", "can", "castle", "caterpillar", "cattle",
    "chair", "chimpanzee", "clock", "cloud", "cockroach", "couch", "crab", "crocodile", "cup",
    "dinosaur", "dolphin", "elephant", "flatfish", "forest", "fox", "girl", "hamster", "house",
    "kangaroo", "keyboard", "lamp", "lawn_mower", "leopard", "lion", "lizard", "lobster", "man",
    "maple_tree", "motorcycle", "mountain", "mouse", "mushroom", "oak_tree", "orange", "orchid",
    "otter", "palm_tree", "pear", "pickup_truck", "pine_tree", "plain", "plate", "poppy",
    "porcupine", "possum", "rabbit", "raccoon", "ray", "road", "rocket", "rose", "sea", "seal",
    "shark", "shrew", "skunk", "skyscraper", "snail", "snake", "spider", "squirrel", "streetcar",
    "sunflower", "sweet_pepper", "table", "tank", "telephone", "television", "tiger", "tractor",
    "train", "trout", "tulip", "turtle", "wardrobe", "whale", "willow_tree", "wolf", "woman", "worm")
CLASS_NAMES = {"mnist": tuple("0123456789"), "mnist32": tuple("0123456789"), "fmnist": FMNIST,
               "cifar10": CIFAR10, "cifar100": CIFAR100}


def class_name(dataset: str, label: int) -> str:
    names = CLASS_NAMES.get(dataset, ())
    return names[label] if 0 <= label < len(names) else str(label)


def nearest_sigma(frame: pd.DataFrame, sigma: float) -> float:
    """The sigma of the table closest to the one asked for (on a log scale: the grid is log-spaced)."""
    sigmas = np.array(sorted(frame.sigma.unique()), dtype=float)
    return float(sigmas[np.argmin(np.abs(np.log(sigmas) - np.log(sigma)))])


def _models(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """(dataset, model) in the order the table lists them."""
    return list(dict.fromkeys(zip(frame.dataset, frame.model)))


def _seed_mean(err: pd.DataFrame, keys) -> pd.DataFrame:
    """The errors averaged over the training seeds (what Figure 2 plots; its CSV keeps every seed)."""
    return err.groupby(keys, sort=False)[[m for m, _ in ERROR_METRICS]].mean().reset_index()


def _flagged(meta: dict, frame: pd.DataFrame) -> dict:
    return degenerate.annotate(meta, frame, ["dataset", "model", "seed"])


def _estimator_order(names) -> list[str]:
    return [e for e in ESTIMATORS if e in set(names)]


def _sigma_axis(ax, sigmas=None) -> None:
    """Log sigma axis labelled at the grid's own values (log minor labels would overlap)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.set_xlabel(SIGMA_LABEL)
    ax.xaxis.set_minor_formatter(NullFormatter())
    if sigmas is None:
        sigmas = sorted({x for line in ax.get_lines() for x in np.atleast_1d(line.get_xdata())})
    if len(sigmas):
        ax.set_xticks(sigmas, [f"{s:g}" for s in sigmas])


# ------------------------------------------------------------------ Figure 2
def fig2a(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    """Absolute and relative error of every estimator against MC vs sigma (mean over points)."""
    err = errors_of(inputs["estimates"])
    mean = _seed_mean(err, ["estimator", "sigma"])
    fig, axes = plt.subplots(1, 2, figsize=(7.5, 3.0))
    for ax, (metric, label) in zip(axes, ERROR_METRICS):
        for name in _estimator_order(err.estimator):
            d = mean[mean.estimator == name]
            color, ls = STYLE[name]
            ax.plot(d.sigma, d[metric], marker="o", color=color, ls=ls, label=LABEL[name])
        _sigma_axis(ax)
        ax.set_ylabel(label)
    dataset, model = _models(err)[0]
    axes[0].set_title(f"(a) absolute error, {dataset}/{model}", fontsize=8)
    axes[1].set_title("relative error (points with p_MC > 0)", fontsize=8)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    meta = _flagged(meta, err)
    save_figure(fig, *outputs, err, meta.pop("caption"), meta)
    return err


def fig2b(inputs: dict, outputs, meta: dict, estimator: str = "mmse") -> pd.DataFrame:
    """The estimator's (MMSE) absolute error against MC vs sigma, one line per lambda."""
    err = errors_of(inputs["estimates"])
    err = err[err.estimator == estimator].sort_values(["lam", "sigma"]).reset_index(drop=True)
    if err.empty:
        raise ValueError(f"no {estimator} estimates")
    fig, ax = plt.subplots(figsize=(4.2, 3.0))
    lams = sorted(err.lam.unique())
    mean = _seed_mean(err, ["lam", "sigma"])
    colors = plt.cm.viridis(np.linspace(0, 0.85, len(lams)))
    for lam, color in zip(lams, colors):
        d = mean[mean.lam == lam]
        ax.plot(d.sigma, d.mean_abs_error, marker="o", color=color, label=f"lambda = {lam:g}")
    _sigma_axis(ax)
    ax.set_ylabel(f"mean |p_{LABEL[estimator]} - p_MC|")
    ax.set_title(f"(b) {LABEL[estimator]} error by robust-training weight, "
                 f"{err.dataset.iloc[0]}/{err.arch.iloc[0]}", fontsize=8)
    ax.legend(fontsize=6)
    fig.tight_layout()
    meta = _flagged(meta, err)
    save_figure(fig, *outputs, err, meta.pop("caption"), meta)
    return err


def errors_by_model(inputs: dict, outputs, meta: dict, columns: int = 4) -> pd.DataFrame:
    """Figure 2a's absolute error against MC for every model, a panel each (mean over the
    training seeds; a model near chance is named so in its title)."""
    err = errors_of(inputs["estimates"])
    models = _models(err)
    rows = -(-len(models) // columns)
    cols = min(columns, len(models))
    fig, axes = plt.subplots(rows, cols, figsize=(2.9 * cols, 2.4 * rows + 0.4), squeeze=False)
    for ax, (dataset, model) in zip(axes.flat, models):
        d = err[(err.dataset == dataset) & (err.model == model)]
        mean = _seed_mean(d, ["estimator", "sigma"])
        for name in _estimator_order(d.estimator):
            e = mean[mean.estimator == name]
            color, ls = STYLE[name]
            ax.plot(e.sigma, e.mean_abs_error, marker="o", ms=3, color=color, ls=ls, label=LABEL[name])
        _sigma_axis(ax)
        ax.set_ylabel("mean |p - p_MC|", fontsize=7)
        flag = " (near chance)" if d[degenerate.COLUMN].any() else ""
        ax.set_title(f"{dataset}/{model}{flag}", fontsize=7)
    for ax in axes.flat[len(models):]:
        ax.set_visible(False)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    for ax in axes.flat[1:len(models)]:   # a linear model adds the exact answer's line
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(h)
                labels.append(label)
    fig.legend(handles, labels, fontsize=6, loc="upper center", ncol=len(labels), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.3 / fig.get_figheight()))
    meta = _flagged(meta, err)
    save_figure(fig, *outputs, err, meta.pop("caption"), meta)
    return err


# ------------------------------------------------------------------ noisy images
def example_points(labels: np.ndarray, k: int) -> list[int]:
    """The first test image of each of the first k classes met in the test order."""
    first = {}
    for i, label in enumerate(labels):
        first.setdefault(int(label), i)
        if len(first) == k:
            break
    return list(first.values())


def noisy_images(inputs: dict, outputs, meta: dict, datasets, sigmas, per_dataset: int = 2,
                 seed: int = 0) -> pd.DataFrame:
    """Test images of each dataset (a row each) clean and with Gaussian noise at every sigma of
    the grid: x + sigma * eps with one eps per image (the same direction at every sigma), shown
    clipped to [0, 1] (the models see the unclipped input); the CSV gives the share of pixel
    values outside [0, 1] and the noise's L2 norm."""
    gen = np.random.default_rng(seed)
    sigmas = sorted(sigmas)
    shown = []
    for dataset, path in zip(datasets, inputs["data"]):
        d = load_npz(path, ("test_x", "test_y"), only=True)
        for point in example_points(d["test_y"], per_dataset):
            image = d["test_x"][point].astype(np.float64) / 255.0
            shown.append((dataset, point, int(d["test_y"][point]), image,
                          gen.standard_normal(image.shape)))
    fig, axes = plt.subplots(len(shown), 1 + len(sigmas), squeeze=False,
                             figsize=(0.95 * (1 + len(sigmas)) + 0.6, 0.95 * len(shown) + 0.4))
    rows = []
    for r, (dataset, point, label, image, eps) in enumerate(shown):
        for c, sigma in enumerate([0.0] + sigmas):
            noisy = image + sigma * eps
            ax = axes[r, c]
            _show(ax, np.round(255 * np.clip(noisy, 0, 1)).astype(np.uint8))
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            if r == 0:
                ax.set_title("clean" if c == 0 else f"sigma = {sigma:g}", fontsize=7)
            if c == 0:
                ax.set_ylabel(f"{dataset}\n{class_name(dataset, label)}", fontsize=6)
            rows.append({"dataset": dataset, "point": point, "label": label,
                         "class": class_name(dataset, label), "sigma": sigma,
                         "clipped_share": float(((noisy < 0) | (noisy > 1)).mean()),
                         "noise_l2": float(sigma * np.linalg.norm(eps)), "noise_seed": seed})
    fig.tight_layout()
    data = pd.DataFrame(rows)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 10
# Where mvn-cdf(z) is spread: most points sit at 1 at small sigma, where any two functions that
# saturate there agree.  The claim measures the agreement on these points, over the whole grid.
SPREAD = (0.01, 0.99)


def _agreement(d: pd.DataFrame) -> tuple[float, float]:
    """Pearson r (NaN when a side is constant or fewer than 3 points) and mean |difference|."""
    r = d.mvn_cdf.corr(d.mv_sigmoid) if len(d) > 2 else np.nan
    return r, (d.mv_sigmoid - d.mvn_cdf).abs().mean()


def fig10(inputs: dict, outputs, meta: dict, sigma: float) -> pd.DataFrame:
    """mv-sigmoid (taylor_mvs) against mvn-cdf (taylor) per point: both take the same Taylor z.
    Left: every point at the paper's sigma (the grid's nearest); right: every sigma of the grid,
    the points whose mvn-cdf is within SPREAD (the CSV marks them `spread`)."""
    est = read_estimates(inputs["estimates"])
    s = nearest_sigma(est, sigma)
    d = est[est.estimator.isin(["taylor", "taylor_mvs"])]
    wide = d.pivot_table(index=["dataset", "model", "seed", degenerate.COLUMN, "sigma", "point"],
                         columns="estimator", values="p").dropna()
    data = pd.DataFrame({"mvn_cdf": wide["taylor"], "mv_sigmoid": wide["taylor_mvs"]}).reset_index()
    data = data.assign(paper_sigma=data.sigma == s,
                       spread=data.mvn_cdf.between(*SPREAD))
    fig, axes = plt.subplots(1, 2, figsize=(7.2, 3.5))
    sigmas = sorted(data.sigma.unique())
    colors = dict(zip(sigmas, plt.cm.viridis(np.linspace(0, 0.9, len(sigmas)))))
    panels = ((axes[0], data[data.paper_sigma], f"sigma = {s:g}, every point"),
              (axes[1], data[data.spread],
               f"every sigma, {SPREAD[0]:g} <= mvn-cdf <= {SPREAD[1]:g}"))
    for ax, part, what in panels:
        ax.plot([0, 1], [0, 1], color="0.5", lw=0.8, ls="--", label="y = x")
        for sig, g in part.groupby("sigma"):
            ax.scatter(g.mvn_cdf, g.mv_sigmoid, s=6, alpha=0.6, color=colors[sig],
                       label=f"sigma {sig:g}: {len(g)} points")
        r, mae = _agreement(part)
        ax.set(xlabel="mvn-cdf(z)  (Taylor)", ylabel="mv-sigmoid(z)  (Taylor_mvs)",
               xlim=(-0.02, 1.02), ylim=(-0.02, 1.02), aspect="equal")
        ax.set_title(f"{what}\nPearson r = {r:.3f}, MAE = {mae:.3g} ({len(part)} points)",
                     fontsize=7)
        ax.legend(fontsize=5, loc="upper left")
    fig.tight_layout()
    data = data[["dataset", "model", "seed", degenerate.COLUMN, "sigma", "point", "mvn_cdf",
                 "mv_sigmoid", "paper_sigma", "spread"]]
    meta = _flagged(meta, data)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 3
def _show(ax, image: np.ndarray) -> None:
    """An image (C, H, W) uint8: grey for one channel, RGB for three."""
    if image.shape[0] == 1:
        ax.imshow(image[0], cmap="gray", vmin=0, vmax=255)
    else:
        ax.imshow(np.transpose(image, (1, 2, 0)))


def fig3(inputs: dict, outputs, meta: dict, sigma: float | str = 0.1, tie: float = 1e-3,
         per_class: int = 1, max_classes: int = 10) -> pd.DataFrame:
    """Per class (the true label), the test images with the highest and lowest p_mmse beside
    those with the highest and lowest softmax; the value under each image.  sigma "fewest_ties":
    the case study's rule (tables.fewest_ties_sigma)."""
    est = read_estimates(inputs["estimates"])
    images = load_npz(inputs["data"], ("test_x",), only=True)["test_x"]
    s = fewest_ties_sigma(est, tie) if sigma == FEWEST_TIES else nearest_sigma(est, sigma)
    sel = est[(est.sigma == s) & est.estimator.isin(["mmse", "softmax"])]
    dataset, model = _models(sel)[0]
    classes = sorted(sel.label.unique())[:max_classes]
    panels = [("mmse", "highest"), ("mmse", "lowest"), ("softmax", "highest"), ("softmax", "lowest")]
    cols = len(panels) * per_class
    fig, axes = plt.subplots(len(classes), cols, figsize=(0.95 * cols + 1.0, 0.95 * len(classes) + 0.6),
                             squeeze=False)
    rows = []
    for r, label in enumerate(classes):
        for j, (score, end) in enumerate(panels):
            d = sel[(sel.label == label) & (sel.estimator == score)]
            # Ties (many softmax values near 1) are broken by the point's index, for repeatability.
            d = d.sort_values(["p", "point"], ascending=[end == "lowest", True])
            for k in range(per_class):
                ax = axes[r, j * per_class + k]
                ax.set_xticks([])
                ax.set_yticks([])
                ax.grid(False)
                ax.spines[:].set_visible(False)
                if r == 0 and k == 0:
                    name = "p_mmse" if score == "mmse" else "softmax"
                    ax.set_title(f"{end}\n{name}", fontsize=7)
                if j == 0 and k == 0:
                    ax.set_ylabel(class_name(dataset, int(label)), fontsize=7)
                if k >= len(d):
                    continue
                row = d.iloc[k]
                _show(ax, images[int(row.point)])
                ax.set_xlabel(f"{row.p:.3f}", fontsize=6, labelpad=1)
                rows.append({"dataset": dataset, "model": model, "sigma": s, "label": int(label),
                             "class": class_name(dataset, int(label)), "score": score, "end": end,
                             "rank": k + 1, "point": int(row.point), "target": int(row.target),
                             "p": float(row.p)})
    fig.suptitle(f"{dataset}/{model}: p_mmse at sigma = {s:g} vs softmax", fontsize=8)
    fig.tight_layout()
    data = pd.DataFrame(rows)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ Figure 4
# More classes than this (CIFAR-100) are drawn ranked, a median and quartiles each: 100 box
# pairs in a panel would be unreadable.
MANY_CLASSES = 20


def class_quartiles(e: pd.DataFrame) -> pd.DataFrame:
    """Per class (true label) of one model, sigma and estimator: the quartiles of p, the classes
    ranked by median (ascending; equal medians by label)."""
    q = e.groupby("label").p.quantile([0.25, 0.5, 0.75]).unstack()
    q.columns = ["q1", "median", "q3"]
    q = q.reset_index().sort_values(["median", "label"], kind="stable").reset_index(drop=True)
    return q.assign(rank=np.arange(len(q)))


def _ranked_classes(ax, d: pd.DataFrame, sigma: float, estimators) -> None:
    """Median and quartiles of p per class, the classes ranked by their median p of the first
    estimator (MC); the others at the same class positions."""
    order = class_quartiles(d[(d.sigma == sigma) & (d.estimator == estimators[0])]).label
    rank = pd.Series(np.arange(len(order)), index=order.to_numpy())
    for k, name in enumerate(estimators):
        q = class_quartiles(d[(d.sigma == sigma) & (d.estimator == name)])
        x = rank.loc[q.label].to_numpy() + (k - (len(estimators) - 1) / 2) * 0.3
        ax.errorbar(x, q["median"], yerr=[q["median"] - q.q1, q.q3 - q["median"]], fmt="o",
                    ms=1.5, lw=0.4, color=STYLE[name][0], alpha=0.8)
    ax.set_xlabel(f"{len(order)} classes, ranked by median p_{LABEL[estimators[0]]}", fontsize=6)


def fig4(inputs: dict, outputs, meta: dict, estimators=("mc", "mmse")) -> pd.DataFrame:
    """Per model (a row) and sigma (a column): box plots of p_robust per class (true label),
    MC beside MMSE; with more than MANY_CLASSES classes, each class's median and quartiles, the
    classes ranked by their MC median.  The CSV holds every point's value (what the boxes
    summarise)."""
    est = read_estimates(inputs["estimates"])
    est = est[est.estimator.isin(estimators)]
    models, sigmas = _models(est), sorted(est.sigma.unique())
    fig, axes = plt.subplots(len(models), len(sigmas), sharey=True, squeeze=False,
                             figsize=(max(1.9 * len(sigmas), 6.0), 2.6 * len(models) + 0.3))
    width = 0.8 / len(estimators)
    for r, (dataset, model) in enumerate(models):
        d = est[(est.dataset == dataset) & (est.model == model)]
        classes = sorted(d.label.unique())
        for c, s in enumerate(sigmas):
            ax = axes[r, c]
            ax.set_title(f"{dataset}/{model}\nsigma = {s:g}", fontsize=7)
            if c == 0:
                ax.set_ylabel("p_robust")
            if len(classes) > MANY_CLASSES:
                _ranked_classes(ax, d, s, list(estimators))
                continue
            for k, name in enumerate(estimators):
                e = d[(d.sigma == s) & (d.estimator == name)]
                values = [e.p[e.label == label].to_numpy() for label in classes]
                pos = np.arange(len(classes)) + (k - (len(estimators) - 1) / 2) * width
                color = STYLE[name][0]
                ax.boxplot(values, positions=pos, widths=width * 0.9, patch_artist=True,
                           boxprops={"facecolor": color, "alpha": 0.5, "lw": 0.5},
                           medianprops={"color": "k", "lw": 0.8}, whiskerprops={"lw": 0.5},
                           capprops={"lw": 0.5}, flierprops={"ms": 1.5, "mec": color})
            names = [class_name(dataset, int(label)) for label in classes]
            ax.set_xticks(np.arange(len(classes)), names, fontsize=6,
                          rotation=90 if max(map(len, names)) > 2 else 0)
    handles = [plt.Rectangle((0, 0), 1, 1, color=STYLE[n][0], alpha=0.5) for n in estimators]
    # Above the panels: inside one, the legend covered boxes wherever the data happened to be.
    fig.legend(handles, [LABEL[n] for n in estimators], fontsize=7, loc="upper center",
               ncol=len(estimators), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 / fig.get_figheight()))
    data = est[["dataset", "model", "seed", degenerate.COLUMN, "sigma", "estimator", "point", "label",
                "p"]].assign(**{"class": lambda f: [class_name(ds, int(y)) for ds, y in zip(f.dataset, f.label)]})
    data = data.sort_values(["dataset", "model", "seed", "sigma", "estimator", "point"]).reset_index(drop=True)
    meta = _flagged(meta, data)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ convergence with n
def convergence(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    """Mean |p_n - p_MC(reference n)| against the copies n, per estimator (log-log), per model."""
    table = read_table(inputs["table"])
    models = _models(table)
    fig, axes = plt.subplots(1, len(models), figsize=(max(3.8 * len(models), 4.2), 3.0), squeeze=False)
    for ax, (dataset, model) in zip(axes[0], models):
        d = table[(table.dataset == dataset) & (table.model == model)]
        for name in [e for e in ("mc", "mmse", "softmax") if e in set(d.estimator)]:
            e = d[d.estimator == name].sort_values("n")
            color, ls = STYLE[name]
            label = "softmax (noise-averaged)" if name == "softmax" else LABEL[name]
            ax.plot(e.n, e.mean_abs_diff, marker="o", color=color, ls=ls, label=label)
        ax.set_xscale("log")
        ax.set_yscale("log", nonpositive="mask")  # a difference of exactly 0 cannot be drawn
        ax.set(xlabel="noisy copies n",
               ylabel=f"mean |p_n - p_MC(n = {int(d.reference_n.iloc[0])})|")
        ax.set_title(f"{dataset}/{model}, sigma = {d.sigma.iloc[0]:g}", fontsize=8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    data = table.sort_values(["dataset", "model", "estimator", "n"]).reset_index(drop=True)
    meta = _flagged(meta, data)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ linear models: MMSE vs exact
def linear_convergence(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    """Per linear model: mean |p_MMSE(n) - p_exact| against n, one line per sigma (mean over the
    training seeds), beside the 1/sqrt(n) its noise in z predicts (through the first n's mean);
    Taylor's largest distance (exact for a linear model) in the title."""
    table = read_table(inputs["table"])
    models = _models(table)
    fig, axes = plt.subplots(1, len(models), figsize=(max(3.8 * len(models), 4.2), 3.2),
                             squeeze=False)
    for ax, (dataset, model) in zip(axes[0], models):
        d = table[(table.dataset == dataset) & (table.model == model)]
        mean = d.groupby(["estimator", "sigma", "n"]).mean_abs_diff_exact.mean().reset_index()
        mmse = mean[mean.estimator == "mmse"]
        sigmas = sorted(mmse.sigma.unique())
        colors = plt.cm.viridis(np.linspace(0, 0.9, len(sigmas)))
        for sig, color in zip(sigmas, colors):
            e = mmse[mmse.sigma == sig].sort_values("n")
            ax.plot(e.n, e.mean_abs_diff_exact, marker="o", color=color, label=f"sigma {sig:g}")
        ns = np.array(sorted(mmse.n.unique()), dtype=float)
        first = mmse[mmse.n == ns[0]].mean_abs_diff_exact.mean()
        ax.plot(ns, first * np.sqrt(ns[0] / ns), color="0.4", ls="--", lw=0.8, label="1/sqrt(n)")
        # Taylor, exact up to rounding, is named rather than drawn: a line at ~1e-8 would
        # squeeze MMSE's curves into a corner of the log axis.
        taylor = mean[mean.estimator == "taylor"].mean_abs_diff_exact.max()
        ax.set_xscale("log")
        ax.set_yscale("log", nonpositive="mask")   # a distance of exactly 0 cannot be drawn
        ax.set(xlabel="MMSE copies n", ylabel="mean |p_MMSE - p_exact|")
        ax.set_title(f"{dataset}/{model} (Taylor: at most {taylor:.1g})", fontsize=8)
        ax.legend(fontsize=5)
    fig.tight_layout()
    data = table.sort_values(["dataset", "model", "seed", "estimator", "sigma", "n"]).reset_index(drop=True)
    meta = _flagged(meta, data)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


# ------------------------------------------------------------------ PA under Gaussian noise
def noise_pa(inputs: dict, outputs, meta: dict) -> pd.DataFrame:
    """Per model: log PA (exact solver) of clean vs noisy logits and the mean p_robust (MC)
    against sigma; and log PA against mean p_robust over every model and sigma."""
    table = read_table(inputs["table"]).sort_values(["dataset", "model", "sigma"])
    from scipy import stats  # here: the registries import this module at every workflow start

    rho = stats.spearmanr(table.logpa, table.p_mc_mean).statistic if len(table) > 2 else np.nan
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.2))
    for k, (dataset, model) in enumerate(_models(table)):
        d = table[(table.dataset == dataset) & (table.model == model)]
        color = f"C{k % 10}"
        axes[0].plot(d.sigma, d.logpa, marker="o", color=color, label=f"{dataset}/{model}")
        axes[1].plot(d.sigma, d.p_mc_mean, marker="o", color=color)
        axes[2].scatter(d.p_mc_mean, d.logpa, s=12, color=color)
    for ax in axes[:2]:
        _sigma_axis(ax)
    axes[0].set_ylabel(f"log PA (exact), clean vs noisy, {int(table.n_points.iloc[0])} points")
    axes[1].set_ylabel("mean p_robust (MC)")
    axes[2].set(xlabel="mean p_robust (MC)", ylabel="log PA (exact)")
    axes[2].set_title(f"all models and sigmas: Spearman rho = {rho:.3f} (n = {len(table)})", fontsize=8)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    data = table.reset_index(drop=True)
    meta = _flagged(meta, data)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data
