"""Config checks of the domain-generalisation experiments: batches that fit the training splits,
and a model-selection validation split that exists."""
from __future__ import annotations

from pabench.core.config import checks


@checks
def training_splits(config: dict) -> list[str]:
    dg = config.get("dg", {})
    studies = config.get("diagvib", {}).get("studies", {})
    trained = [("shift_factor", "train")] + [("model_selection", name) for name, cfg in
                                            studies.get("model_selection", {}).get("splits", {}).items()
                                            if cfg.get("pool") == "train"]
    errors = []
    for study, split in trained:
        cfg = studies.get(study, {}).get("splits", {}).get(split)
        if cfg and dg and cfg["n"] < dg["batch_size"]:
            errors.append(f"diagvib.studies.{study}.splits.{split}.n: {cfg['n']} samples per training "
                          f"environment, fewer than one batch (dg.batch_size = {dg['batch_size']})")
    ms = dg.get("model_selection")
    study = studies.get("model_selection")
    if ms and study is not None and ms["validation"] not in study.get("splits", {}):
        errors.append(f"dg.model_selection.validation: no split {ms['validation']!r} in "
                      f"diagvib.studies.model_selection.splits ({list(study.get('splits', {}))})")
    return errors
