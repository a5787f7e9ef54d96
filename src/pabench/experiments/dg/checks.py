"""Config checks of the domain-generalisation experiments: batches that fit the training splits,
and model-selection validation splits that exist and are pairs."""
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
    if ms and study is not None:
        splits = study.get("splits", {})
        named = [("validation", ms["validation"])] + [("also_validate", v) for v in ms.get("also_validate", [])]
        for key, name in named:
            if name not in splits:
                errors.append(f"dg.model_selection.{key}: no split {name!r} in "
                              f"diagvib.studies.model_selection.splits ({list(splits)})")
            elif len(splits[name].get("envs", [])) != 2 or not splits[name].get("paired"):
                errors.append(f"dg.model_selection.{key}: {name!r} is not a paired split of two "
                              f"environments (validation needs a pair)")
        if ms["validation"] in ms.get("also_validate", []):
            errors.append(f"dg.model_selection.also_validate: {ms['validation']!r} is already "
                          f"dg.model_selection.validation")
    return errors
