"""Configuration fuzzing: hundreds of malformed configurations, each rejected before any job
starts with a message naming the offending key (and, through Snakemake, without a traceback)."""
import copy

import pytest

from conftest import REPO, TEST
from pabench.core import config as pabench_config

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
BASE = pabench_config.load([REPO / "config.yaml", REPO / TEST[1]])

# Names the config refers to, replaced by unknown ones.
UNKNOWN_NAMES = {
    ("dg", "algorithms"): ["erm", "sgd"], ("dg", "backbone"): "vgg19",
    ("dg", "model_selection", "algorithms"): ["lisa2"], ("adversarial", "dataset"): "cifar100",
    ("adversarial", "zoo", "models"): ["undefended", "resnet9000"], ("adversarial", "zoo", "arch"): "vit",
    ("adversarial", "robustbench"): ["NotAModel2099"], ("adversarial", "imagenet", "models"): ["nope"],
    ("adversarial", "figures", "examples"): ["ghost"], ("data", "mnist", "source"): "emnist",
    ("wandb", "mode"): "onlnie", ("scale",): "huge", ("dg", "device"): "tpu",
    ("dg", "lisa", "mix"): "blend", ("dg", "model_selection", "validation"): "val_nowhere",
    ("diagvib", "studies", "shift_factor", "splits", "test", "envs"): ["env0", "env9"],
}
# Values out of their range.
OUT_OF_RANGE = {
    ("dg", "epochs"): 0, ("dg", "lr"): -0.001, ("dg", "batch_size"): 0, ("dg", "seeds"): [-1],
    ("dg", "pa_epochs"): 0, ("adversarial", "n_test"): 0, ("adversarial", "eps"): [1.5, "2/0"],
    ("adversarial", "zoo", "eps"): -0.1,
    ("adversarial", "adversarial_ratios"): [0.0, 1.2], ("adversarial", "batch_size"): -5,
    ("adversarial", "zoo", "epochs"): -1, ("adversarial", "pa_epochs"): -1,
    ("adversarial", "imagenet", "n"): 0, ("adversarial", "imagenet", "eps"): [0.0],
    ("diagvib", "image_size"): 4, ("diagvib", "shift_ratios"): [0.0, 2.0],
    ("toy", "bernoulli", "n_samples"): 0, ("toy", "bernoulli", "n_probabilities"): 1,
    ("pa", "adam", "lr"): 0, ("pa", "adam", "batch_size"): 0, ("dg", "irm", "weight"): -1.0,
    ("dg", "lisa", "p_same_label"): 1.5, ("adversarial", "figures", "confidence_eps"): 0.7,
    ("diagvib", "studies", "shift_factor", "splits", "train", "n"): 0,
}


def get(config, path):
    for key in path:
        config = config[key]
    return config


def mutated(path, value=None, delete=False):
    config = copy.deepcopy(BASE)
    parent = get(config, path[:-1])
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return config


def walk(node, path=()):
    """Every key path of the config (dict keys only; lists are leaves)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path + (key,)
            yield from walk(value, path + (key,))


def wrong_types(value):
    """Values of other JSON types than `value`."""
    if isinstance(value, bool):
        return ["yes please", 2]
    if isinstance(value, (int, float)):
        return [{"a": "mapping"}, "ten", [value]]
    if isinstance(value, str):
        return [{"a": "mapping"}, ["a", "list"]]
    if isinstance(value, list):
        return ["not a list", {"a": "mapping"}]
    if isinstance(value, dict):
        return [["not", "a", "mapping"], "text"]
    return [3.5]  # null -> a number where null (or a path) is expected


def cases():
    out = []
    for path in walk(BASE):
        value = get(BASE, path)
        out += [("wrong type", path, bad) for bad in wrong_types(value)]
        if isinstance(value, dict):
            out.append(("unknown key", path + ("bogus_key",), 1))
        if isinstance(value, list) and value:
            out.append(("empty list", path, []))
    for key in BASE:
        out.append(("missing section", (key,), None))
    out.append(("unknown key", ("bogus_section",), {}))
    out += [("unknown name", p, v) for p, v in UNKNOWN_NAMES.items()]
    out += [("out of range", p, v) for p, v in OUT_OF_RANGE.items()]
    return out


# Keys whose value may legitimately be another type or empty (documented in config.yaml).
ALLOWED = {
    ("empty list", ("adversarial", "robustbench")),  # no RobustBench models: the offline default
    ("empty list", ("dg", "model_selection", "also_validate")),  # Table 1's split only
    ("empty list", ("avgcase", "class_bias")),        # no Figure 4
    ("empty list", ("avgcase", "class_bias_other")),  # no appendix class-bias figure
    # []: no models of that architecture (an overlay dropping what config.yaml names); the main
    # model's and the class-bias models' architectures stay errors (they must be trained)
    ("empty list", ("avgcase", "models", "mnist", "linear")),
    ("empty list", ("avgcase", "models", "fmnist", "linear")),     # (fmnist: not used at the
    ("empty list", ("avgcase", "models", "fmnist", "cnn_w16")),    # test scale)
    ("empty list", ("oodrb", "corruptions")),         # natural shifts only
    ("empty list", ("oodrb", "natural")),             # corruptions only (no Figure 5)
    ("empty list", ("oodrb", "agreement_corruptions")),   # Figure 14: the natural shifts only
    ("empty list", ("oodrb", "threats")),             # no threat shifts (no Figure 4)
    ("empty list", ("oodrb", "table3", "models")),    # no Table 3
}
CASES = [c for c in cases() if (c[0], c[1]) not in ALLOWED]


def test_there_are_hundreds_of_cases():
    assert len(CASES) >= 100, len(CASES)


@pytest.mark.parametrize("kind,path,value", CASES, ids=lambda x: x if isinstance(x, str) else None)
def test_malformed_config_is_rejected_naming_the_key(kind, path, value):
    config = mutated(path, delete=kind == "missing section") if kind == "missing section" else mutated(path, value)
    with pytest.raises(pabench_config.ConfigError) as err:
        pabench_config.check(config, SCHEMA)
    name = ".".join(path[:-1] + (path[-1],)) if kind != "unknown key" else path[-1]
    assert name in str(err.value), f"{kind} {'.'.join(path)}: message does not name it:\n{err.value}"
