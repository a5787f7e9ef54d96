"""Workflow configuration: merging scale overlays and checking them against the JSON schema."""
from __future__ import annotations

import copy
import functools
import re
from pathlib import Path

import jsonschema
import yaml

REPO_SCHEMA = Path("workflow/schemas/config.schema.yaml")


class ConfigError(ValueError):
    """The configuration breaks the schema; the message names every offending key."""


def merge(base: dict, overlay: dict) -> dict:
    """Recursive dict update, as Snakemake applies --configfile overlays."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load(paths) -> dict:
    """The merged configuration of several YAML files (later files override earlier ones)."""
    config: dict = {}
    for path in paths:
        try:
            with open(path) as fh:
                data = yaml.safe_load(fh) or {}
        except yaml.YAMLError as err:
            raise ConfigError(f"{path}: not valid YAML ({err})") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping, found {type(data).__name__}")
        config = merge(config, data)
    return config


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _describe(err: jsonschema.ValidationError) -> str:
    where = _key(err.absolute_path)
    if err.validator == "additionalProperties":
        extra = sorted(set(err.instance) - set(err.schema.get("properties", {})))
        prefix = f"{where}." if err.absolute_path else ""
        known = ", ".join(sorted(err.schema.get("properties", {})))
        return "; ".join(f"unknown key '{prefix}{k}' (known here: {known})" for k in extra)
    if err.validator == "required":
        missing = err.message.split("'")[1] if "'" in err.message else err.message
        prefix = f"{where}." if err.absolute_path else ""
        return f"missing key '{prefix}{missing}'"
    return f"key '{where}': {err.message}"


@functools.lru_cache(maxsize=4)
def _validator(schema_path: str) -> jsonschema.Draft202012Validator:
    with open(schema_path) as fh:
        return jsonschema.Draft202012Validator(yaml.safe_load(fh))


def check(config: dict, schema_path=REPO_SCHEMA) -> None:
    """Raise ConfigError naming every key that breaks the schema."""
    validator = _validator(str(schema_path))
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    lines = [_describe(e) for e in errors]
    if not lines:
        lines = _semantic_errors(config)
    if lines:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(lines))


def _semantic_errors(config: dict) -> list[str]:
    """What the schema cannot say: factor values, environment names, shift ratios."""
    from .data.datasets import SplitSpec
    from .data.diagvib import Environment

    errors = []
    for study, cfg in config.get("diagvib", {}).get("studies", {}).items():
        where = f"diagvib.studies.{study}"
        bad_env = False
        for env, spec in cfg.get("environments", {}).items():
            try:
                Environment.from_config(env, spec, cfg.get("digits", []))
            except ValueError as err:
                factor = re.search(r"factor '(\w+)'", str(err))  # name the factor's own key
                key = f"{where}.environments.{env}" + (f".{factor.group(1)}" if factor else "")
                errors.append(f"{key}: {err}")
                bad_env = True
        if bad_env:
            continue
        for split in cfg.get("splits", {}):
            try:
                SplitSpec.from_config(study, cfg, split)
            except ValueError as err:
                errors.append(f"{where}.splits.{split}: {err}")
    dg = config.get("dg", {})
    studies = config.get("diagvib", {}).get("studies", {})
    trained = [("shift_factor", "train")] + [("model_selection", name) for name, cfg in
                                            studies.get("model_selection", {}).get("splits", {}).items()
                                            if cfg.get("pool") == "train"]
    for study, split in trained:
        cfg = studies.get(study, {}).get("splits", {}).get(split)
        if cfg and dg and cfg["n"] < dg["batch_size"]:
            errors.append(f"diagvib.studies.{study}.splits.{split}.n: {cfg['n']} samples per training "
                          f"environment, fewer than one batch (dg.batch_size = {dg['batch_size']})")
    errors += _adversarial_errors(config.get("adversarial"))
    ms = config.get("dg", {}).get("model_selection")
    study = config.get("diagvib", {}).get("studies", {}).get("model_selection")
    if ms and study is not None and ms["validation"] not in study.get("splits", {}):
        errors.append(f"dg.model_selection.validation: no split {ms['validation']!r} in "
                      f"diagvib.studies.model_selection.splits ({list(study.get('splits', {}))})")
    return errors


# RobustBench L-inf models the paper used (Section 4.1, Appendix F.2); others can be added here.
ROBUSTBENCH_MODELS = {
    "cifar10": ("Standard", "Addepalli2022Efficient_RN18", "Addepalli2021Towards_RN18",
                "Engstrom2019Robustness", "Wang2023Better_WRN-28-10", "Wong2020Fast"),
    "imagenet": ("Standard_R50", "Salman2020Do_R18", "Engstrom2019Robustness", "Wong2020Fast"),
}
TRAIN_SIZE = {"mnist32": 4000}  # training images of the offline dataset


def _adversarial_errors(adv: dict | None) -> list[str]:
    """eps ranges, model names and the figures' references to them."""
    if not adv:
        return []
    from .adversarial.records import parse_eps

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
            if name not in ROBUSTBENCH_MODELS[dataset] and (key.endswith("robustbench") or name not in zoo):
                valid = sorted(ROBUSTBENCH_MODELS[dataset]) + ([] if key.endswith("robustbench") else zoo)
                errors.append(f"{key}: unknown model id {name!r}; valid: {', '.join(valid)}")
    models = zoo + adv["robustbench"]
    if not models:
        errors.append("adversarial.zoo.models: no models (and no adversarial.robustbench ids)")
    for name in adv["figures"]["examples"]:
        if name not in models:
            errors.append(f"adversarial.figures.examples: {name!r} is not among the models {models}")
    conf = adv["figures"]["confidence_eps"]
    if "pgd" in adv["attacks"] and str(conf) not in [str(e) for e in adv["eps"]]:
        errors.append(f"adversarial.figures.confidence_eps: {conf!r} is not in adversarial.eps {adv['eps']}")
    sizes = [n for n in (TRAIN_SIZE.get(adv["dataset"]), adv["zoo"].get("n_train")) if n]
    size = min(sizes) if sizes else None
    if size and zoo and adv["zoo"]["batch_size"] > size:
        errors.append(f"adversarial.zoo.batch_size: {adv['zoo']['batch_size']} exceeds the "
                      f"{size} training images")
    if adv["imagenet"]["resize"] < adv["imagenet"]["image_size"]:
        errors.append("adversarial.imagenet.resize: smaller than image_size (the crop would not fit)")
    return errors
