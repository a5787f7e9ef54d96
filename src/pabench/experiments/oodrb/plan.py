"""Jobs of the OODRobustBench experiment, from the config (no PyTorch): the zoo, the dataset
shifts, the threat shifts, and the per-model files each stacked table reads."""
from __future__ import annotations

import math
from fractions import Fraction

from pabench.core import paths

# Kinds of per-model results, one rule each: `shifts` (ID, every dataset shift and every threat
# shift: accuracy, robustness, PA; it also writes `threats` and `predictions`, one job per model
# saves a process start and a model load), `attacks` (Table 3's attack comparison).
RESULTS = ("shifts", "attacks")
# Stacked tables (rule oodrb_table): `shifts` holds every model's dataset-shift and threat-shift
# rows (the ID-OOD analysis needs both), then Table 3's attacks and their per-image robust flags
# (oodrb_attacks writes both), the per-image predictions of Figure 5 and the zoo's training
# histories.
TABLES = ("shifts", "attacks", "attack_images", "predictions", "history")
THREAT_KINDS = ("linf", "l2", "stadv", "recolor", "ppgd", "lpa")
LPIPS_KINDS = ("ppgd", "lpa")  # bounded by an LPIPS network: skipped where oodrb.lpips.weights is none
# How a threat's `paper_eps` (the paper's CIFAR-10 budget) becomes this scale's radius, and why,
# as the captions state it.
THREAT_RULES = {
    "id_ratio": "the paper's budget x eps / paper_id_eps (its ratio to the ID eps) where it is in "
                "pixel intensity (L-inf, L2, and ReColor's colour bound: CIE L*u*v* scaled to "
                "[0, 1], L*/100 tracking the pixel value)",
    "same": "the paper's budget unchanged where it is not in pixel intensity (StAdv's flow bound: "
            "a displacement, 0.78 pixel on both 32 x 32 grids; PPGD and LPA's: an LPIPS "
            "distance)"}
# Attacks that take Adam steps: `lr_scale` x the reference's step relative to the bound
ADAM_KINDS = ("stadv", "recolor")
# Iterations of the threat attacks that are not MM5 when the config gives none (the paper's)
DEFAULT_STEPS = {"stadv": 100, "recolor": 100, "ppgd": 40, "lpa": 40}
NATURAL = {"mnist32": ("sklearn_digits", "font_digits"),
           "cifar10": ("cifar10.1", "cifar10.2", "cinic10", "cifar10r"),
           "imagenet": ("imagenet-v2", "imagenet-a", "imagenet-r", "objectnet", "imagenet-s")}


def _o(config: dict) -> dict:
    return config["oodrb"]


def dataset(config: dict) -> str:
    return _o(config)["dataset"]


# ------------------------------------------------------------------ setups
# The paper's three setups (CIFAR-10 L-inf, CIFAR-10 L2, ImageNet L-inf): the `oodrb` block is the
# base setup, BASE; each entry of oodrb.setups is another, its keys merged over the base block
# (dicts merged, lists replaced, as a scale overlay).  Every function of this module takes a
# config whose `oodrb` is one setup's (for_setup).  A setup's per-model files and tables sit
# under its tag: the dataset's name for the base setup (today's paths), the setup's name for the
# others; its images under its dataset's name, shared by the setups of one dataset.
BASE = "linf"
# The settings that make a dataset's image files: setups sharing a dataset must agree on them.
DATA_KEYS = ("cifar10", "imagenet", "n_train", "n_test", "n_shift", "n_natural", "test_seed",
             "corruptions", "severities", "corruption_seed", "corruption_source", "cifar10c_root",
             "frost", "frost_root", "natural", "natural_root", "natural_folders")


def setup_names(config: dict) -> list[str]:
    """The setups this config runs: the base one, then oodrb.setups in order."""
    return [BASE, *config["oodrb"].get("setups", {})]


def for_setup(config: dict, setup: str) -> dict:
    """The config with `oodrb` replaced by one setup's settings (the base block, or the base
    block with oodrb.setups[setup] merged over it) and oodrb.setup naming it."""
    from pabench.core.config import merge

    base = {k: v for k, v in config["oodrb"].items() if k != "setups"}
    if setup == BASE:
        return {**config, "oodrb": {**base, "setup": BASE}}
    overlays = config["oodrb"].get("setups", {})
    if setup not in overlays:
        raise ValueError(f"unknown oodrb setup {setup!r} (configured: {setup_names(config)})")
    return {**config, "oodrb": {**merge(base, overlays[setup]), "setup": setup}}


def setup_of(config: dict) -> str:
    return _o(config).get("setup", BASE)


def tag(config: dict) -> str:
    """The path component of this setup's per-model files and tables: the dataset for the
    base setup, the setup's name otherwise."""
    return dataset(config) if setup_of(config) == BASE else setup_of(config)


def setups_by_tag(config: dict) -> dict[str, dict]:
    """{tag: that setup's config} for every configured setup."""
    out = {}
    for name in setup_names(config):
        c = for_setup(config, name)
        out[tag(c)] = c
    return out


def setup_config(config: dict, tag_: str) -> dict:
    """The setup config of a path's tag (a rule's `dataset` wildcard)."""
    by_tag = setups_by_tag(config)
    if tag_ not in by_tag:
        raise ValueError(f"{tag_!r} is no oodrb setup's tag ({sorted(by_tag)})")
    return by_tag[tag_]


def data_config(config: dict, dataset_: str) -> dict:
    """The setup config that makes a dataset's images (the first setup on it)."""
    for name in setup_names(config):
        c = for_setup(config, name)
        if dataset(c) == dataset_:
            return c
    raise ValueError(f"no oodrb setup uses dataset {dataset_!r}")


# ImageNet's natural shifts downloaded (checksummed) where no folder is given
# (pabench.datasets.imagenet_shifts.DOWNLOADS); the others need the user's folder.
IMAGENET_DOWNLOADED = ("imagenet-r",)


def missing_folders(config: dict) -> str:
    """What an ImageNet setup lacks before it can run, in words ("" when nothing, and for the
    datasets that download or ship everything)."""
    o = _o(config)
    if dataset(config) != "imagenet":
        return ""
    key = f"oodrb.setups.{setup_of(config)}"
    im = o.get("imagenet", {})
    need = []
    if im.get("folder") is None:
        need.append(f"{key}.imagenet.folder (ImageNet validation images, wnid folders)")
    if o["corruptions"] and im.get("c_folder") is None:
        need.append(f"{key}.imagenet.c_folder (ImageNet-C: <corruption>/<severity>/<wnid>/...)")
    need += [f"{key}.natural_folders.{n}" for n in o["natural"]
             if n not in o.get("natural_folders", {}) and n not in IMAGENET_DOWNLOADED]
    return ("ImageNet's images come from your folders; set " + ", ".join(need)) if need else ""


def norm(config: dict) -> str:
    """The ID (training) threat model: "Linf" or "L2" (MM5's norm in distribution and under
    every dataset shift)."""
    return _o(config).get("norm", "Linf")


def zoo(config: dict) -> dict[str, dict]:
    """Every zoo model's settings ({name: settings}): a self-trained one's with the defaults
    filled in; a published one's (`published: <catalogue id>`, standardly trained, downloaded)
    method undefended and the catalogue's architecture."""
    z = _o(config)["zoo"]
    return {spec["name"]: (_published_spec(spec["published"]) if "published" in spec else
                           {**z["defaults"], **{k: v for k, v in spec.items() if k != "name"}})
            for spec in z["models"]}


def _published_spec(name: str) -> dict:
    from pabench.attacks.published import CATALOGUE

    arch = CATALOGUE[name].arch if name in CATALOGUE else "unknown"   # checks.py names it
    return {"method": "undefended", "arch": arch, "published": name}


def published(config: dict) -> list[str]:
    """The zoo models whose weights are downloaded, not trained."""
    return [name for name, spec in zoo(config).items() if "published" in spec]


def describe_zoo(config: dict) -> str:
    """The self-trained zoo's variety in a caption: "arch smallcnn4, smallcnn8; epochs 1, 3; ..."."""
    specs = [zoo(config)[name] for name in trained(config)]
    parts = []
    for key in ("arch", "epochs", "augment", "trades_beta"):
        values = sorted({s[key] for s in specs if key != "trades_beta" or s["method"] == "trades"},
                        key=str)
        if values:
            parts.append(f"{key} {', '.join(map(str, values))}")
    return "; ".join(parts)


def robustbench(config: dict) -> list[str]:
    return list(_o(config)["robustbench"])


def models(config: dict) -> list[str]:
    """Every model evaluated: the self-trained zoo, then the RobustBench ids."""
    return list(zoo(config)) + robustbench(config)


def trained(config: dict) -> list[str]:
    """The zoo models trained here (oodrb_train)."""
    return [name for name, spec in zoo(config).items() if "published" not in spec]


def shifts(config: dict) -> list[str]:
    """The dataset shifts, corruptions first (one data file each)."""
    return list(_o(config)["corruptions"]) + list(_o(config)["natural"])


def agreement_corruptions(config: dict) -> list[str]:
    """The corruptions whose per-image predictions are recorded (pooled over their severities)
    beside the natural shifts': Figure 14's agreement panels (the paper: impulse noise); those of
    oodrb.agreement_corruptions that oodrb.corruptions runs."""
    return [c for c in _o(config).get("agreement_corruptions", []) if c in _o(config)["corruptions"]]


def is_corruption(config: dict, shift: str) -> bool:
    return shift in _o(config)["corruptions"]


def lpips_available(config: dict) -> bool:
    return _o(config)["lpips"]["weights"] != "none"


def alternation(names) -> str:
    """A wildcard constraint matching exactly these names (in order, once each; "^$" for none)."""
    import re

    return "|".join(map(re.escape, dict.fromkeys(names))) or "^$"


def threats(config: dict) -> dict[str, dict]:
    """The threat shifts this scale runs ({name: settings}: eps, the steps of the non-MM5
    attacks and StAdv / ReColor's lr_scale resolved; a budget derived from the paper's keeps
    `paper_eps` and `rule` beside its eps); PPGD and LPA are skipped where no LPIPS weights are
    configured (oodrb.lpips.weights: none)."""
    o = _o(config)
    out = {}
    for t in o["threats"]:
        if t["kind"] in LPIPS_KINDS and not lpips_available(config):
            continue
        if t["kind"] in DEFAULT_STEPS:   # MM5's steps are oodrb.mm5's
            t = {"steps": DEFAULT_STEPS[t["kind"]], **t}
        if t["kind"] in ADAM_KINDS:      # the reference's Adam step (relative to the bound)
            t = {"lr_scale": 1.0, **t}
        out[t["name"]] = {**t, "eps": threat_eps(config, t)}
    return out


def threat_eps(config: dict, t: dict) -> float:
    """One threat's radius: its `eps`, or the paper's budget `paper_eps` carried over by its
    `rule` (THREAT_RULES)."""
    if "eps" in t:
        return radius(t["eps"], t["kind"])
    paper = radius(t["paper_eps"], t["kind"])
    if t["rule"] == "same":
        return paper
    paper_id_eps(config), eps_of(config)   # refuse an invalid ID eps with its message
    o = _o(config)
    # in fractions of the config's numbers ("12/255", 0.2): 12/255 / (8/255) x 0.2 is 0.3 exactly
    eps = float(_fraction(t["paper_eps"]) / _fraction(o["paper_id_eps"]) * _fraction(o["eps"]))
    return paths.parse_eps(eps) if t["kind"] == "linf" else eps


def _fraction(value) -> Fraction:
    return Fraction(str(value).strip())


def paper_id_eps(config: dict) -> float:
    """The paper's ID (training) L-inf eps, 8/255 on CIFAR-10: the base of rule id_ratio."""
    return paths.parse_eps(_o(config)["paper_id_eps"])


def describe_threat(config: dict, t: dict) -> str:
    """One resolved threat for captions: "l2 3.19 = 0.5 x 0.2 / (8/255)", "stadv 0.05, the
    paper's, 20 steps of 5x the reference's Adam step", or "l2 0.5" where the config gives the
    radius itself."""
    text = f"{t['kind']} {t['eps']:.3g}"
    if t.get("rule") == "id_ratio":
        text += f" = {t['paper_eps']} x {_o(config)['eps']} / ({_o(config)['paper_id_eps']})"
    elif t.get("rule") == "same":
        text += ", the paper's"
    if t["kind"] in ("linf", "l2") and ("steps" in t or "restarts" in t):
        mm, restarts = _o(config)["mm5"], t.get("restarts", 1)
        text += (f", MM{mm['n_targets']} {t.get('steps', mm['steps'])} iterations per target, "
                 f"{restarts} restart{'s' if restarts > 1 else ''}")
    elif "steps" in t:
        text += f", {t['steps']} steps"
    if t.get("lr_scale", 1.0) != 1.0:
        text += f" of {t['lr_scale']:g}x the reference's Adam step"
    return text


def threat_rules(config: dict) -> str:
    """The rules the threat budgets of this scale follow, for captions ("" when none does)."""
    used = dict.fromkeys(t["rule"] for t in _o(config)["threats"] if "rule" in t)
    return ("budgets: " + "; ".join(THREAT_RULES[r] for r in used)) if used else ""


def skipped_threats(config: dict) -> list[str]:
    if lpips_available(config):
        return []
    return [t["name"] for t in _o(config)["threats"] if t["kind"] in LPIPS_KINDS]


def skip_note(config: dict) -> str:
    """Why the skipped threat shifts did not run, for captions and logs ("" when none was)."""
    skipped = skipped_threats(config)
    return (f"{', '.join(skipped)} skipped: PPGD and LPA need LPIPS weights, which do not install "
            "offline (oodrb.lpips.weights: none; paper scale only)") if skipped else ""


def lpips_note(config: dict) -> str:
    """The LPIPS network of PPGD and LPA, for captions ("" when neither runs)."""
    if not any(t["kind"] in LPIPS_KINDS for t in threats(config).values()):
        return ""
    lp = _o(config)["lpips"]
    return (f"LPIPS {lp['network']}" + (" with RANDOM weights (code path only: not a perceptual "
                                       "bound)" if lp["weights"] == "random" else ""))


def radius(value, kind: str) -> float:
    """A threat's radius: an L-inf eps lies in (0, 1] ("8/255" allowed); an L2 radius, a flow
    bound or a colour bound is any positive number."""
    if kind == "linf":
        return paths.parse_eps(value)
    eps = float(Fraction(str(value).strip())) if isinstance(value, str) else float(value)
    if not (eps > 0 and math.isfinite(eps)):
        raise ValueError(f"radius {value!r} of a {kind} threat must be a positive number")
    return eps


def eps_of(config: dict) -> float:
    """The training and ID threat radius as a number ("8/255" allowed in the config): an L-inf
    eps in (0, 1], an L2 radius any positive number."""
    return radius(_o(config)["eps"], "linf" if norm(config) == "Linf" else "l2")


def table3_models(config: dict) -> list[str]:
    return list(_o(config)["table3"]["models"])


def table3_only(config: dict) -> list[str]:
    """Table 3's RobustBench models that are not among the evaluated ones (the paper's Table 3
    models are not all in its Table 1 subset): only their attacks run."""
    return [m for m in table3_models(config) if m not in models(config)]


# Table 3's PGD and CW step, relative to eps, where the config gives none: the authors' eps/4.
TABLE3_STEP = 0.25


def table3_step(config: dict, attack: str) -> float:
    return float(_o(config)["table3"][attack].get("rel_stepsize", TABLE3_STEP))


# AutoAttack's standard version as pyautoattack runs it: APGD-CE and APGD-T iterations, FAB-T
# iterations, Square queries.
AA_DEFAULTS = {"apgd_steps": 100, "fab_steps": 100, "square_queries": 5000}


def attack_setting(config: dict, attack: str) -> str:
    """What Table 3's `attack` ran, in words (its caption and table rows)."""
    t3, o = _o(config)["table3"], _o(config)
    if attack in ("pgd", "cw"):
        rel = Fraction(table3_step(config, attack)).limit_denominator(1000)
        step = f"eps/{rel.denominator}" if rel.numerator == 1 else f"{float(rel):g} eps"
        return (f"{t3[attack]['steps']} steps of {step}"
                + (", no random start" if attack == "pgd" else ", CW margin loss"))
    if attack == "aa":
        a = t3["aa"]
        counts = (f"APGD {a['apgd_steps']} iterations, FAB-T {a['fab_steps']}, Square "
                  f"{a['square_queries']} queries")
        return (f"standard, default iterations ({counts})" if a == AA_DEFAULTS else
                f"standard, SHORTENED ({counts}; defaults {AA_DEFAULTS['apgd_steps']}, "
                f"{AA_DEFAULTS['fab_steps']}, {AA_DEFAULTS['square_queries']})")
    return f"MM{o['mm5']['n_targets']}, {o['mm5']['steps']} iterations per target"


def model_input(config: dict, dataset: str, model: str) -> list[str]:
    """A zoo model's checkpoint (trained, or published and converted); RobustBench models are
    fetched by the job itself (none)."""
    return [paths.oodrb_file("models", dataset, model)] if model in zoo(config) else []


def table(config: dict, kind: str) -> str:
    """This setup's stacked table of one kind (the base setup's: today's path)."""
    return paths.oodrb_table(kind, None if setup_of(config) == BASE else setup_of(config))


def data_file(config: dict, shift: str | None = None) -> str:
    return paths.oodrb_data(dataset(config), shift or "id")


def shift_files(config: dict) -> dict[str, str]:
    return {s: data_file(config, s) for s in shifts(config)}


def split_shifts(config: dict) -> bool:
    return bool(_o(config)["split_shifts"])


def shift_inputs(config: dict, dataset_: str, model: str) -> list[str]:
    """What a model's oodrb_shifts job reads besides the ID split: every shift's images, or (split)
    every shift's scores and predictions from its own oodrb_shift_scores job, in shift order."""
    if not split_shifts(config):
        return list(shift_files(config).values())
    return [paths.oodrb_shift_file(kind, dataset_, model, s)
            for s in shifts(config) for kind in ("shift_scores", "shift_predictions")]


def table_inputs(config: dict, kind: str) -> list[str]:
    """The per-model files stacked into oodrb_table(kind) (this setup's)."""
    d = tag(config)
    if kind == "history":
        return [paths.oodrb_file("history", d, m) for m in trained(config)]
    if kind == "predictions":
        return [paths.oodrb_file("predictions", d, m) for m in models(config)]
    if kind in ("attacks", "attack_images"):
        return [paths.oodrb_file(kind, d, m) for m in table3_models(config)]
    return [paths.oodrb_file(k, d, m) for m in models(config) for k in ("shifts", "threats")]
