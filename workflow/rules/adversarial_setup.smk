# Settings and helpers of the adversarial rules (workflow/rules/adversarial.smk).
from pabench.adversarial.records import ATTACKS, MIN_NORM, eps_tag

ADV = config["adversarial"]
ADV_DATA = ADV["dataset"]                      # mnist32 (offline stand-in) | cifar10
ZOO = ADV["zoo"]["models"]
ADV_MODELS = [*ZOO, *ADV.get("robustbench", [])]
IMAGENET = ADV["imagenet"]
IMAGENET_ON = bool(IMAGENET.get("folder"))
DATASET_LABEL = {"mnist32": "MNIST digits padded to 32x32x3 (offline stand-in for CIFAR-10)",
                 "cifar10": "CIFAR-10 test set", "imagenet": "ImageNet validation images"}


def adv_eps(attack, dataset=ADV_DATA):
    """The eps tags of an attack: the config's grid, or 'min' for the minimum-norm FMN."""
    if not ATTACKS[attack][1]:
        return [MIN_NORM]
    grid = IMAGENET["eps"] if dataset == "imagenet" else ADV["eps"]
    return [eps_tag(e) for e in grid]


def adv_setup(dataset):
    """Models and attack settings of a dataset's experiment."""
    if dataset == "imagenet":
        return IMAGENET["models"], IMAGENET["attacks"]
    return ADV_MODELS, ADV["attacks"]


def adv_record(dataset, model, attack, eps):
    return f"data/adversarial/{dataset}/attacks/{model}/{attack}/{eps}.npz"


def adv_model_input(model):
    """A zoo model's checkpoint (trained on the main dataset); RobustBench models need none."""
    return [f"data/adversarial/{ADV_DATA}/models/{model}.pt"] if model in ZOO else []


def zoo_params(model):
    """The zoo settings one model's training reads (its architecture resolved), so that adding
    a model or changing another's override does not retrain it."""
    shared = {k: v for k, v in ADV["zoo"].items() if k not in ("models", "arch_overrides")}
    return {**shared, "arch": ADV["zoo"].get("arch_overrides", {}).get(model, ADV["zoo"]["arch"])}


def jpeg_rs_params(model):
    """The JPEG + RS settings, which only the jpeg_rs model's jobs depend on."""
    return ADV["jpeg_rs"] if model == "jpeg_rs" else {}


def adv_figure_meta(caption, attacks, dataset=ADV_DATA):
    models, settings = adv_setup(dataset)
    n = IMAGENET["n"] if dataset == "imagenet" else ADV["n_test"]
    return provenance(caption=caption, data=f"{DATASET_LABEL[dataset]}, n = {n}", models=models,
                      attacks={a: {**settings[a], "eps": adv_eps(a, dataset)} for a in attacks},
                      solver=f"adam ({ADV['pa_epochs']} epochs, the paper's) and exact",
                      seeds={"zoo": ADV["zoo"]["seed"], "test_subset": ADV["test_seed"]})


def adv_scores(dataset, model, attack):
    """PA / AFR of one model under one attack (every eps and AR): rule adv_score."""
    return f"data/results/adversarial/{dataset}/{model}/{attack}.csv"


def adv_score_tables(dataset, attacks=None):
    """The adv_score tables of every model of a dataset, for the given attacks (default: all),
    so that a figure of one attack needs only that attack's runs."""
    models, settings = adv_setup(dataset)
    return [adv_scores(dataset, m, a) for m in models for a in (attacks or settings)]


AR_FIGURES = {
    "fig03": (ADV_DATA, "pgd", "Figure 3: PA (left) and AFR_T (right) against the adversarial "
              "ratio AR, one row per eps, for the PGD attack"),
    "fig05": (ADV_DATA, "fmn", "Figure 5: PA (left) and AFR_T (right) against AR for the "
              "minimum-norm FMN attack: the main panel AR <= 0.5, the extra panel all ARs"),
    "fig14": (ADV_DATA, "apgd-ce", "Figure 14: PA and AFR_T against AR and eps, APGD-CE"),
    "fig15": (ADV_DATA, "apgd-dlr", "Figure 15: PA and AFR_T against AR and eps, APGD-DLR"),
    "fig16": (ADV_DATA, "fab", "Figure 16: PA and AFR_T against AR and eps, FAB"),
    "fig17": ("imagenet", "apgd-ce", "Figure 17: PA and AFR_T against AR and eps, APGD-CE on "
              "ImageNet"),
    "fig18": ("imagenet", "apgd-dlr-t", "Figure 18: PA and AFR_T against AR and eps, targeted "
              "APGD-DLR-T on ImageNet"),
}
ADV_FIGURES = [f for f, (d, a, _) in AR_FIGURES.items()
               if a in adv_setup(d)[1] and (d != "imagenet" or IMAGENET_ON)]


CONF = ADV["figures"]
CONF_EPS = eps_tag(CONF["confidence_eps"])
CONFIDENCE_FIGURES = {
    # name: (panels [(attack, eps tag, AR)], models, caption)
    "fig04": ([("pgd", CONF_EPS, 1.0)], CONF["examples"],
              "Figure 4: predictive confidence of the samples predicted correctly before the "
              "attack (plain) and of the successfully attacked ones (hatched), mean +- standard "
              "error, for three models under PGD at AR = 1; below, the final beta of every "
              "model"),
    "fig06": ([("fmn", MIN_NORM, 0.5)], CONF["examples"],
              "Figure 6: predictive confidence (as Figure 4) and final betas under FMN at AR = "
              "0.5"),
    "fig09": ([("pgd", CONF_EPS, 1.0), ("fmn", MIN_NORM, 0.5), ("fmn", MIN_NORM, 1.0)], ADV_MODELS,
              "Figure 9: predictive confidence of every model: PGD at AR = 1, FMN at AR = 0.5 "
              "and AR = 1"),
}

ADV_FIGURES += [f for f, (panels, _, _) in CONFIDENCE_FIGURES.items()
                if all(a in ADV["attacks"] for a, _, _ in panels)]
