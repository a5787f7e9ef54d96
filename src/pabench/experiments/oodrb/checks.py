"""Config checks of the OODRobustBench experiment that a schema cannot say: radii, natural shifts
that exist for the dataset, threat settings, models that figures and tables name."""
from __future__ import annotations

from pathlib import Path

from pabench.attacks.published import CATALOGUE
from pabench.core.config import checks
from pabench.experiments.oodrb import plan


SCHEMA = Path(__file__).resolve().parents[4] / "workflow" / "schemas" / "config.schema.yaml"


@checks
def oodrb(config: dict) -> list[str]:
    """The base setup's errors, then each further setup's (merged over it), then what setups
    sharing a dataset disagree on."""
    if not config.get("oodrb"):
        return []
    errors = setup_errors(plan.for_setup(config, plan.BASE))
    overlays = config["oodrb"].get("setups", {})
    for name, overlay in overlays.items():
        key = f"oodrb.setups.{name}"
        if name == plan.BASE or name == config["oodrb"]["dataset"]:
            errors.append(f"{key}: {name!r} is the base setup's name or tag (the oodrb block "
                          "itself); name this setup otherwise")
            continue
        if "setups" in overlay:
            errors.append(f"{key}.setups: a setup holds no setups of its own")
            continue
        merged = plan.for_setup(config, name)
        found = _schema_errors(merged) or setup_errors(merged)
        errors += [f"{key} (merged over oodrb): {e}" for e in found]
    return errors + _shared_data(config)


def _schema_errors(config: dict) -> list[str]:
    """The schema's errors of a merged setup's oodrb block."""
    from pabench.core.config import describe_error, schema_validator

    if not SCHEMA.is_file():   # an installed package without the workflow: the workflow checks
        return []
    o = {k: v for k, v in config["oodrb"].items() if k != "setup"}
    found = schema_validator(str(SCHEMA)).iter_errors({**config, "oodrb": o})
    return [describe_error(e) for e in found if list(e.absolute_path)[:1] == ["oodrb"]]


def _shared_data(config: dict) -> list[str]:
    """Setups of one dataset share its image files: the settings that make them must agree."""
    first: dict[str, dict] = {}
    errors = []
    for name in plan.setup_names(config):
        o = plan.for_setup(config, name)["oodrb"]
        base = first.setdefault(o["dataset"], {"setup": name, **o})
        differ = [k for k in plan.DATA_KEYS if o.get(k) != base.get(k)]
        if differ:
            errors.append(f"oodrb.setups.{name}: shares dataset {o['dataset']} (and its image "
                          f"files) with setup {base['setup']!r} but sets {differ} otherwise")
    return errors


def setup_errors(config: dict) -> list[str]:
    """The errors of one setup's settings (config["oodrb"], merged)."""
    o = config["oodrb"]
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
                          f"(pabench.attacks.published: {', '.join(CATALOGUE)})")
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
    from pabench.datasets.corruptions import ALL_CORRUPTIONS

    for c in o.get("agreement_corruptions", []):   # (those not in oodrb.corruptions are not run)
        if c not in ALL_CORRUPTIONS:
            errors.append(f"oodrb.agreement_corruptions: {c!r} is not a corruption "
                          f"({', '.join(ALL_CORRUPTIONS)})")
    if o["dataset"] == "mnist32" and o["robustbench"]:
        errors.append("oodrb.robustbench: RobustBench models need oodrb.dataset: cifar10 or "
                      "imagenet")
    errors += _norm_errors(config) + _imagenet_errors(config)
    if o["dataset"] == "mnist32" and o["corruption_source"] == "published":
        errors.append("oodrb.corruption_source: published (the CIFAR-10-C files) needs "
                      "oodrb.dataset: cifar10; the digit stand-in takes generator")
    for name, folder in o.get("natural_folders", {}).items():
        if name not in plan.NATURAL[d]:   # another dataset's (a setup inherits the base's)
            continue
        if name not in o["natural"]:
            errors.append(f"oodrb.natural_folders.{name}: {name!r} is not one of oodrb.natural "
                          f"{o['natural']}")
        elif not Path(folder).is_dir():
            errors.append(f"oodrb.natural_folders.{name}: {folder}: no such folder")
    return errors


def _norm_errors(config: dict) -> list[str]:
    """What an L2 setup cannot run: the zoo trains, and Table 3 attacks, under L-inf only."""
    o = config["oodrb"]
    if plan.norm(config) == "Linf":
        return []
    errors = []
    if plan.trained(config):
        errors.append(f"oodrb.norm: L2, but the zoo trains under L-inf only: "
                      f"{plan.trained(config)} would be trained (give only published or "
                      "RobustBench models)")
    if o["table3"]["models"]:
        errors.append("oodrb.table3.models: Table 3 compares L-inf attacks; an L2 setup takes "
                      "none ([])")
    if o["dataset"] == "imagenet":
        errors.append("oodrb.norm: RobustBench has no ImageNet L2 models (ImageNet takes Linf)")
    return errors


def _imagenet_errors(config: dict) -> list[str]:
    """ImageNet: test images only (nothing to train), the published ImageNet-C, folders that
    exist where given."""
    o = config["oodrb"]
    if o["dataset"] != "imagenet":
        return ["oodrb.imagenet: only a setup with dataset imagenet reads it"] \
            if "imagenet" in o else []
    errors = []
    if plan.trained(config) or plan.published(config):
        errors.append("oodrb.zoo.models: ImageNet's models are RobustBench ids (oodrb.robustbench); "
                      "the zoo trains and downloads CIFAR-10 models only")
    if o["corruptions"] and o["corruption_source"] != "published":
        errors.append("oodrb.corruption_source: ImageNet's corruptions are the published "
                      "ImageNet-C (published); our generator is CIFAR-10's")
    im = o.get("imagenet", {})
    for key in ("folder", "c_folder"):
        if im.get(key) is not None and not Path(im[key]).is_dir():
            errors.append(f"oodrb.imagenet.{key}: {im[key]}: no such folder")
    return errors
