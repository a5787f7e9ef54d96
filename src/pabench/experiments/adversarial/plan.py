"""What the adversarial experiments run, from the config: datasets, models, attack runs and the
settings each job reads.  Used by the rules (workflow/rules/adversarial.smk) and the PA paper's
registry; no PyTorch here, so planning the workflow stays fast."""
from __future__ import annotations

from pabench.attacks.records import ATTACKS
from pabench.core import paths
from pabench.core.paths import UNBOUNDED, Eps
from pabench.metrics.settings import PASettings

DATASET_LABEL = {"mnist32": "MNIST digits padded to 32x32x3 (offline stand-in for CIFAR-10)",
                 "cifar10": "CIFAR-10 test set", "imagenet": "ImageNet validation images"}


def main_dataset(config: dict) -> str:
    """mnist32 (the offline stand-in) or cifar10."""
    return config["adversarial"]["dataset"]


def zoo(config: dict) -> list[str]:
    return list(config["adversarial"]["zoo"]["models"])


def seeds(config: dict) -> list[int]:
    """The training seeds of the zoo: every zoo model is trained (and attacked) once per seed."""
    return list(config["adversarial"]["zoo"]["seeds"])


def instances(config: dict, dataset: str) -> list[tuple[str, int | None]]:
    """(model, seed) of every model of a dataset: a zoo model once per seed, a pretrained
    (RobustBench) model once, with seed None."""
    return [(m, s) for m in models(config, dataset)
            for s in (seeds(config) if m in zoo(config) else [None])]


def imagenet_on(config: dict) -> bool:
    return bool(config["adversarial"]["imagenet"].get("folder"))


def datasets(config: dict) -> list[str]:
    return [main_dataset(config)] + (["imagenet"] if imagenet_on(config) else [])


def models(config: dict, dataset: str) -> list[str]:
    adv = config["adversarial"]
    if dataset == "imagenet":
        return list(adv["imagenet"]["models"])
    return [*adv["zoo"]["models"], *adv.get("robustbench", [])]


def attack_settings(config: dict, dataset: str) -> dict:
    """The settings of the attacks that run on a dataset, by name: ImageNet's own, or those of
    `attacks` that `use_attacks` names (in the order of `attacks`)."""
    adv = config["adversarial"]
    if dataset == "imagenet":
        return adv["imagenet"]["attacks"]
    return {a: s for a, s in adv["attacks"].items() if a in adv["use_attacks"]}


def eps_grid(config: dict, attack: str, dataset: str) -> list[Eps]:
    """The eps of an attack's runs: the config's grid, or unbounded for a minimum-norm attack."""
    if not ATTACKS[attack][1]:
        return [UNBOUNDED]
    adv = config["adversarial"]
    return [Eps.of(e) for e in (adv["imagenet"]["eps"] if dataset == "imagenet" else adv["eps"])]


def split_attacks(config: dict) -> bool:
    """Whether each attack run is a job of its own (adv_attack) or each model's runs are one
    job (adv_attacks)."""
    return bool(config["adversarial"]["split_attacks"])


def model_runs(config: dict, dataset: str) -> list[tuple[str, Eps]]:
    """(attack, eps) of every attack run of one model on a dataset."""
    return [(a, e) for a in attack_settings(config, dataset) for e in eps_grid(config, a, dataset)]


def attack_jobs(config: dict, dataset: str, attacks: list[tuple[str, Eps]]) -> list[dict]:
    """What an attack job runs, per (attack, eps) in order: the attack, its eps and settings."""
    settings = attack_settings(config, dataset)
    return [{"attack": a, "eps": e, "settings": dict(settings[a])} for a, e in attacks]


def attack_rule_params(config: dict) -> dict:
    """The params every attack rule (adv_attack, adv_attacks_<dataset>) shares."""
    adv = config["adversarial"]
    return dict(experiment="adversarial",
                jpeg_rs=lambda wc: jpeg_rs_params(config, wc.adv_model),
                from_zoo=lambda wc: from_zoo(config, wc.adv_model),
                device=adv["device"], batch_size=adv["batch_size"],
                robustbench_dir=adv["robustbench_dir"],
                robustbench_weights=adv.get("robustbench_weights", "download"))


def score_rule_params(config: dict) -> dict:
    """The params every scoring rule (adv_score, adv_scores_<dataset>) shares."""
    return dict(experiment="adversarial", ratios=config["adversarial"]["adversarial_ratios"],
                pa=pa_settings(config))


def runs(config: dict, dataset: str, run: str, attack: str) -> list[paths.AttackRun]:
    """The attack runs of one model run (paths.adv_run's name) under one attack, every eps."""
    model, seed = paths.parse_adv_run(run)
    return [paths.AttackRun(dataset, model, attack, e, seed) for e in eps_grid(config, attack, dataset)]


def first_run(config: dict, model: str) -> str:
    """The run name of a model's first instance: the zoo's first seed, or the pretrained model."""
    return paths.adv_run(model, seeds(config)[0] if model in zoo(config) else None)


def from_zoo(config: dict, run: str) -> bool:
    model, seed = paths.parse_adv_run(run)
    return seed is not None and model in zoo(config)


def model_input(config: dict, run: str) -> list[str]:
    """A zoo model's checkpoint of the run's seed (trained on the main dataset); RobustBench
    models need none."""
    return [paths.zoo_model(main_dataset(config), *paths.parse_adv_run(run))] if from_zoo(config, run) else []


def zoo_params(config: dict, model: str) -> dict:
    """The zoo settings one model's training reads (its architecture resolved), so that adding
    a model or a seed, or changing another's override, does not retrain it."""
    z = config["adversarial"]["zoo"]
    shared = {k: v for k, v in z.items() if k not in ("models", "arch_overrides", "seeds")}
    return {**shared, "arch": z.get("arch_overrides", {}).get(model, z["arch"])}


JPEG_RS = "jpeg_rs"
DEFENDED = JPEG_RS + "+"  # "jpeg_rs+Standard_R50": a pretrained model inside JPEG + RS


def pretrained(model: str) -> tuple[str, bool]:
    """(RobustBench id, whether the JPEG + RS defence wraps it) of a pretrained model's name:
    the paper's ImageNet JPEG + RS model (Appendix F.2) is a RobustBench model with JPEG before
    it and Reverse Sigmoid after it, named "jpeg_rs+<id>"."""
    return (model[len(DEFENDED):], True) if model.startswith(DEFENDED) else (model, False)


def jpeg_rs_params(config: dict, run: str) -> dict:
    """The JPEG + RS settings, which only the JPEG + RS models' jobs depend on (run: a model or a
    model run's name)."""
    model = paths.parse_adv_run(run)[0]
    return config["adversarial"]["jpeg_rs"] if model == JPEG_RS or pretrained(model)[1] else {}


def dataset_params(config: dict, dataset: str) -> dict:
    adv = config["adversarial"]
    return adv["imagenet"] if dataset == "imagenet" else adv.get(dataset, {})


def pa_settings(config: dict) -> PASettings:
    return PASettings.from_config(config["pa"]["adam"], config["adversarial"]["pa_epochs"])


def score_tables(config: dict, dataset: str, attacks=None, first_seed: bool = False) -> list[str]:
    """The adv_score tables of every model run of a dataset for the given attacks (default:
    all), so that a figure of one attack needs only that attack's runs; first_seed: only the
    zoo's first seed."""
    return [paths.adv_scores(dataset, paths.adv_run(m, s), a) for m, s in instances(config, dataset)
            if not (first_seed and s not in (None, seeds(config)[0]))
            for a in (attacks or attack_settings(config, dataset))]


def histories(config: dict, dataset: str) -> list[str]:
    """Training histories of the dataset's zoo model runs (for the model table)."""
    return [paths.zoo_history(main_dataset(config), m, s) for m, s in instances(config, dataset)
            if s is not None]


def figure_meta(config: dict, attacks, dataset: str, first_seed: bool = False) -> dict:
    adv = config["adversarial"]
    n = adv["imagenet"]["n"] if dataset == "imagenet" else adv["n_test"]
    settings = attack_settings(config, dataset)
    return {"data": f"{DATASET_LABEL[dataset]}, n = {n}", "models": models(config, dataset),
            "attacks": {a: {**settings[a], "eps": [e.tag for e in eps_grid(config, a, dataset)]}
                        for a in attacks},
            "solver": f"adam ({adv['pa_epochs']} epochs, the paper's) and exact",
            "seeds": {"zoo": (seeds(config)[:1] if first_seed else seeds(config))
                      if set(models(config, dataset)) & set(zoo(config)) else "no zoo model",
                      "test_subset": adv["imagenet"]["seed"] if dataset == "imagenet"
                      else adv["test_seed"]}}
