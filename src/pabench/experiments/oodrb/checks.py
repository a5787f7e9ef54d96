"""Config checks of the OODRobustBench experiment that a schema cannot say: radii, natural shifts
that exist for the dataset, threat settings, models that figures and tables name."""
from __future__ import annotations

from pathlib import Path

from pabench.adversarial.published import CATALOGUE
from pabench.core.config import checks
from pabench.experiments.oodrb import plan


@checks
def oodrb(config: dict) -> list[str]:
    o = config.get("oodrb")
    if not o:
        return []
    errors = []
    radii_ok = True   # both ID eps parse, so the threat rules can be applied
    for key, read in (("eps", plan.eps_of), ("paper_id_eps", plan.paper_id_eps)):
        try:
            read(config)
        except ValueError as err:
            errors.append(f"oodrb.{key}: {err}")
            radii_ok = False
    d = o["dataset"]
    for name in o["natural"]:
        if name not in plan.NATURAL[d]:
            errors.append(f"oodrb.natural: {name!r} is not a natural shift of {d} (choose from "
                          f"{list(plan.NATURAL[d])})")
    if not o["corruptions"] and not o["natural"]:
        errors.append("oodrb: no dataset shift (oodrb.corruptions and oodrb.natural are empty)")
    names = [t["name"] for t in o["threats"]]
    errors += [f"oodrb.threats: {n!r} is named twice" for n in sorted(set(names)) if names.count(n) > 1]
    models = [m["name"] for m in o["zoo"]["models"]]
    errors += [f"oodrb.zoo.models: {n!r} is named twice" for n in sorted(set(models))
               if models.count(n) > 1]
    for i, t in enumerate(o["threats"]):
        key = f"oodrb.threats[{i}] ({t['name']})"
        if ("eps" in t) == ("paper_eps" in t):
            errors.append(f"{key}: give exactly one of eps (the radius) and paper_eps (the "
                          "paper's budget, carried over by `rule`)")
            continue
        if ("paper_eps" in t) != ("rule" in t):
            errors.append(f"{key}: paper_eps and rule go together (rule: "
                          f"{' or '.join(plan.THREAT_RULES)})")
            continue
        field = "eps" if "eps" in t else "paper_eps"
        try:
            plan.radius(t[field], t["kind"])
        except ValueError as err:
            errors.append(f"{key}.{field}: {err}")
            continue
        if field == "paper_eps" and radii_ok:
            try:
                plan.threat_eps(config, t)
            except ValueError as err:
                errors.append(f"{key}: by rule {t['rule']}, {err}")
        if "restarts" in t and t["kind"] not in ("linf", "l2"):
            errors.append(f"{key}: restarts are MM5's (linf, l2); a {t['kind']} threat has no "
                          "random start")
        if "lr_scale" in t and t["kind"] not in plan.ADAM_KINDS:
            errors.append(f"{key}: lr_scale scales the Adam step of StAdv and ReColor, not of "
                          f"a {t['kind']} threat")
    for i, m in enumerate(o["zoo"]["models"]):
        if "published" not in m:
            continue
        key = f"oodrb.zoo.models[{i}] ({m['name']})"
        if m["published"] not in CATALOGUE:
            errors.append(f"{key}.published: {m['published']!r} is not in the catalogue "
                          f"(pabench.adversarial.published: {', '.join(CATALOGUE)})")
        extra = sorted(set(m) - {"name", "published"})
        if extra:
            errors.append(f"{key}: a published model is downloaded, not trained: it takes only "
                          f"name and published, not {extra}")
        if o["dataset"] != "cifar10":
            errors.append(f"{key}: published models are CIFAR-10 models (oodrb.dataset: cifar10)")
    zoo = plan.zoo(config)
    if not zoo and not o["robustbench"]:
        errors.append("oodrb.zoo.models: no models to evaluate (and oodrb.robustbench is empty)")
    for name, spec in zoo.items():
        if "method" not in spec:
            errors.append(f"oodrb.zoo.models.{name}: no training method (undefended, madry, "
                          "trades or fast_fgsm)")
    clash = sorted(set(zoo) & set(o["robustbench"]))
    if clash:
        errors.append(f"oodrb.robustbench: {clash} are also zoo model names")
    # Table 3 runs on any RobustBench id with CIFAR-10 (the paper's are not all in Table 1's
    # subset; tests/unit/test_adversarial.py checks that the configured ids exist)
    known = set(plan.models(config))
    for i, model in enumerate(o["table3"]["models"]):
        if model not in known and (d != "cifar10" or model in zoo):
            errors.append(f"oodrb.table3.models[{i}]: model {model!r} is not in the zoo or "
                          f"oodrb.robustbench ({sorted(known)})")
    if o["table3"]["severity"] not in o["severities"]:
        errors.append(f"oodrb.table3.severity: {o['table3']['severity']} is not one of "
                      f"oodrb.severities {o['severities']}")
    if o["agreement_shift"] is not None and o["agreement_shift"] not in o["natural"]:
        errors.append(f"oodrb.agreement_shift: {o['agreement_shift']!r} is not one of "
                      f"oodrb.natural {o['natural']}")
    if o["dataset"] == "mnist32" and o["robustbench"]:
        errors.append("oodrb.robustbench: RobustBench models need oodrb.dataset: cifar10")
    if o["dataset"] == "mnist32" and o["corruption_source"] == "published":
        errors.append("oodrb.corruption_source: published (the CIFAR-10-C files) needs "
                      "oodrb.dataset: cifar10; the digit stand-in takes generator")
    for name, folder in o.get("natural_folders", {}).items():
        if name not in o["natural"]:
            errors.append(f"oodrb.natural_folders.{name}: {name!r} is not one of oodrb.natural "
                          f"{o['natural']}")
        elif not Path(folder).is_dir():
            errors.append(f"oodrb.natural_folders.{name}: {folder}: no such folder")
    return errors
