"""Workflow configuration: merging scale overlays and checking them against the JSON schema."""
from __future__ import annotations

import copy
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


def check(config: dict, schema_path=REPO_SCHEMA) -> None:
    """Raise ConfigError naming every key that breaks the schema."""
    with open(schema_path) as fh:
        schema = yaml.safe_load(fh)
    validator = jsonschema.Draft202012Validator(schema)
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
                errors.append(f"{where}.environments.{env}: {err}")
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
    ms = config.get("dg", {}).get("model_selection")
    study = config.get("diagvib", {}).get("studies", {}).get("model_selection")
    if ms and study is not None and ms["validation"] not in study.get("splits", {}):
        errors.append(f"dg.model_selection.validation: no split {ms['validation']!r} in "
                      f"diagvib.studies.model_selection.splits ({list(study.get('splits', {}))})")
    return errors
