"""Workflow configuration: merging scale overlays, checking them against the JSON schema, and
the experiments' own checks of what a schema cannot say (registered with `@checks`)."""
from __future__ import annotations

import copy
import functools
import importlib
from pathlib import Path

import jsonschema
import yaml

REPO_SCHEMA = Path("workflow/schemas/config.schema.yaml")


# Experiments whose package has a `checks` module (pabench.experiments.<name>.checks).
CHECKED_EXPERIMENTS = ("diagvib", "dg", "adversarial", "avgcase", "oodrb", "text")
_CHECKS: list = []


class ConfigError(ValueError):
    """The configuration breaks the schema; the message names every offending key."""


def checks(function):
    """Register an experiment's check: config -> list of errors, each naming its key."""
    _CHECKS.append(function)
    return function


def semantic_errors(config: dict) -> list[str]:
    """Every registered experiment check's errors (run once the schema holds)."""
    for name in CHECKED_EXPERIMENTS:
        importlib.import_module(f"pabench.experiments.{name}.checks")
    return [error for check in _CHECKS for error in check(config)]


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
        except UnicodeDecodeError:
            raise ConfigError(f"{path}: not a text file") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be a mapping, found {type(data).__name__}")
        config = merge(config, data)
    return config


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def describe_error(err: jsonschema.ValidationError) -> str:
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


def _inline_refs(node, defs: dict, expanding: tuple = ()):
    """The schema with every local `{$ref: "#/$defs/<name>"}` replaced by its definition: the
    same errors, found 1.5x faster (jsonschema resolves each reference on every visit).  A
    definition that refers to itself keeps its inner reference ($defs stay in place for it)."""
    if isinstance(node, dict):
        name = node.get("$ref", "").removeprefix("#/$defs/")
        if len(node) == 1 and name in defs and name not in expanding:
            return _inline_refs(defs[name], defs, expanding + (name,))
        return {k: _inline_refs(v, defs, expanding) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs, expanding) for v in node]
    return node


@functools.lru_cache(maxsize=4)
def schema_validator(schema_path: str) -> jsonschema.Draft202012Validator:
    with open(schema_path) as fh:
        schema = yaml.safe_load(fh)
    return jsonschema.Draft202012Validator(_inline_refs(schema, schema.get("$defs", {})))


def check(config: dict, schema_path=REPO_SCHEMA) -> None:
    """Raise ConfigError naming every key that breaks the schema."""
    validator = schema_validator(str(schema_path))
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    lines = [describe_error(e) for e in errors]
    if not lines:
        lines = semantic_errors(config)
    if lines:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(lines))


