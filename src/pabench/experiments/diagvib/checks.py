"""Config checks of the DiagViB-6 studies that the schema cannot express: factor values,
environment names and each split's environments."""
from __future__ import annotations

import re

from pabench.core.config import checks


@checks
def studies(config: dict) -> list[str]:
    from pabench.datasets.diagvib import Environment
    from pabench.datasets.splits import SplitSpec

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
    return errors
