"""Config checks of the adversarial experiments that the schema cannot express."""
from __future__ import annotations

from pabench.core.config import checks
from pabench.core.paths import parse_eps
from pabench.experiments.adversarial.plan import DEFENDED, pretrained

# RobustBench L-inf models the paper used (Section 4.1, Appendix F.2); others can be added here.
ROBUSTBENCH_MODELS = {
    "cifar10": ("Standard", "Addepalli2022Efficient_RN18", "Addepalli2021Towards_RN18",
                "Engstrom2019Robustness", "Wang2023Better_WRN-28-10", "Wong2020Fast"),
    "imagenet": ("Standard_R50", "Salman2020Do_R18", "Engstrom2019Robustness", "Wong2020Fast"),
}
TRAIN_SIZE = {"mnist32": 4000}  # training images of the offline dataset


@checks
def adversarial(config: dict) -> list[str]:
    """eps ranges, model names and the figures' references to them."""
    adv = config.get("adversarial")
    if not adv:
        return []

    errors = []
    eps_lists = {"adversarial.eps": adv["eps"], "adversarial.imagenet.eps": adv["imagenet"]["eps"],
                 "adversarial.zoo.eps": [adv["zoo"]["eps"]],
                 "adversarial.figures.confidence_eps": [adv["figures"]["confidence_eps"]]}
    for key, values in eps_lists.items():
        for value in values:
            try:
                parse_eps(value)
            except ValueError as err:
                errors.append(f"{key}: {err}")
    zoo = adv["zoo"]["models"]
    if adv["robustbench"] and adv["dataset"] != "cifar10":
        errors.append(f"adversarial.robustbench: RobustBench models need dataset cifar10, not "
                      f"{adv['dataset']!r}")
    for key, names, dataset in (("adversarial.robustbench", adv["robustbench"], "cifar10"),
                                ("adversarial.imagenet.models", adv["imagenet"]["models"], "imagenet")):
        for name in names:
            base, defended = pretrained(name) if dataset == "imagenet" else (name, False)
            if base not in ROBUSTBENCH_MODELS[dataset] and (key.endswith("robustbench") or defended
                                                            or name not in zoo):
                valid = sorted(ROBUSTBENCH_MODELS[dataset]) + ([] if key.endswith("robustbench") else zoo)
                extra = f", or {DEFENDED}<one of the RobustBench ids>" if dataset == "imagenet" else ""
                errors.append(f"{key}: unknown model id {name!r}; valid: {', '.join(valid)}{extra}")
    models = zoo + adv["robustbench"]
    if not models:
        errors.append("adversarial.zoo.models: no models (and no adversarial.robustbench ids)")
    for name in adv["figures"]["examples"]:
        if name not in models:
            errors.append(f"adversarial.figures.examples: {name!r} is not among the models {models}")
    for name in adv["use_attacks"]:
        if name not in adv["attacks"]:
            errors.append(f"adversarial.use_attacks: {name!r} has no settings in adversarial.attacks "
                          f"({', '.join(adv['attacks'])})")
    conf = adv["figures"]["confidence_eps"]
    if "pgd" in adv["use_attacks"] and str(conf) not in [str(e) for e in adv["eps"]]:
        errors.append(f"adversarial.figures.confidence_eps: {conf!r} is not in adversarial.eps {adv['eps']}")
    sizes = [n for n in (TRAIN_SIZE.get(adv["dataset"]), adv["zoo"].get("n_train")) if n]
    size = min(sizes) if sizes else None
    if size and zoo and adv["zoo"]["batch_size"] > size:
        errors.append(f"adversarial.zoo.batch_size: {adv['zoo']['batch_size']} exceeds the "
                      f"{size} training images")
    if adv["imagenet"]["resize"] < adv["imagenet"]["image_size"]:
        errors.append("adversarial.imagenet.resize: smaller than image_size (the crop would not fit)")
    return errors
