"""Config checks of the average-case robustness experiment: every used dataset has models and
image counts, ResNets get 3-channel images, every model a figure names is trained."""
from __future__ import annotations

from pabench.core.config import checks
from pabench.experiments.avgcase import plan

ONE_CHANNEL = ("mnist", "fmnist")


@checks
def avgcase(config: dict) -> list[str]:
    a = config.get("avgcase")
    if not a:
        return []
    errors = []
    for d in a["use"]:
        archs = a["models"].get(d, {})
        if not any(archs.values()):   # none, or every architecture's lambda list empty ([])
            empty = ", ".join(f"avgcase.models.{d}.{arch} is []" for arch in archs)
            errors.append(f"avgcase.use: {d!r} has no models (avgcase.models.{d}"
                          + (f": {empty})" if empty else ")"))
    for dataset in a["use"]:
        archs = a["models"].get(dataset, {})
        if dataset not in a["datasets"]:
            errors.append(f"avgcase.models.{dataset}: no entry avgcase.datasets.{dataset} "
                          "(its image counts)")
        for arch in archs:  # lambda < 0 is the schema's error (minimum 0), named with its key
            if "resnet" in arch and dataset in ONE_CHANNEL:
                errors.append(f"avgcase.models.{dataset}.{arch}: ResNets take 3-channel images; "
                              f"{dataset} has one")
    known = set(plan.models(config))
    named = [("avgcase.main", a["main"]), ("avgcase.case_study.model", a["case_study"]["model"])]
    for key in ("class_bias", "class_bias_other"):
        named += [(f"avgcase.{key}[{i}]", ref) for i, ref in enumerate(a.get(key, []))]
    for key, ref in named:
        if ref not in known:  # spelled as avgcase.models names it: "mnist32/cnn-lam0"
            m = plan.model_of(ref)
            lams = a["models"].get(m.dataset, {}).get(m.arch)
            where = (f"avgcase.models.{m.dataset}.{m.arch} is {lams}; " if lams is not None
                     else "")
            errors.append(f"{key}: model {ref!r} is not trained ({where}avgcase.models gives "
                          f"{sorted(known)})")
    return errors
