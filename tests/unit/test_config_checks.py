"""Configuration checks, in process: the schema's messages and the experiments' own checks each
name the offending key (the workflow tests check once that Snakemake stops on them)."""
import pytest

from conftest import REPO
from pabench.core import config as pabench_config


@pytest.mark.parametrize("overlay,message", [
    ("toy:\n  bernoulli:\n    n_samples: -3\n", "key 'toy.bernoulli.n_samples': -3 is less than the minimum of 2"),
    ("toy:\n  bernoulli:\n    typo_key: 1\n", "unknown key 'toy.bernoulli.typo_key'"),
    ("wandb:\n  mode: sometimes\n", "key 'wandb.mode': 'sometimes' is not one of"),
    ("toy:\n  bernoulli:\n    solvers: [newton]\n", "key 'toy.bernoulli.solvers.0': 'newton' is not one of"),
    ("toy:\n  bernoulli:\n    seeds: []\n", "key 'toy.bernoulli.seeds'"),
    ("scale: huge\n", "key 'scale'"),
    ("diagvib:\n  shift_ratios: [0.5, 1.5]\n", "key 'diagvib.shift_ratios.1': 1.5 is greater than the maximum of 1"),
    ("diagvib:\n  studies:\n    shift_factor:\n      environments:\n        env3: {hue: purple, lightness: dark,"
     " position: CC, scale: normal, texture: blank}\n",
     "diagvib.studies.shift_factor.environments.env3.hue: environment 'env3', factor 'hue': unknown hue value 'purple'"),
    ("diagvib:\n  studies:\n    shift_factor:\n      splits:\n        val: {pool: val, envs: [env0, env7], n: 4,"
     " paired: true, seed: 1}\n", "diagvib.studies.shift_factor.splits.val: diagvib.studies.shift_factor.splits.val.envs:"
     " unknown environment 'env7'"),
    ("data:\n  mnist:\n    source: kaggle\n", "key 'data.mnist.source': 'kaggle' is not one of"),
    ("dg:\n  algorithms: [erm, dro]\n", "key 'dg.algorithms.1': 'dro' is not one of"),
    ("dg:\n  backbone: vgg16\n", "key 'dg.backbone': 'vgg16' is not one of"),
    ("dg:\n  model_selection:\n    also_validate: [val_sd, val_xx]\n",
     "dg.model_selection.also_validate: no split 'val_xx' in diagvib.studies.model_selection.splits"),
    ("dg:\n  model_selection:\n    also_validate: [train_zgo]\n",
     "dg.model_selection.also_validate: 'train_zgo' is not a paired split of two environments"),
    ("dg:\n  model_selection:\n    also_validate: [val_id]\n",
     "dg.model_selection.also_validate: 'val_id' is already dg.model_selection.validation"),
    ("dg:\n  fig11: {backbone: resnet18, lr: 0.0, epochs: 3}\n", "key 'dg.fig11.lr': 0.0 is less than or equal to the minimum of 0"),
    ("dg:\n  evaluate: best_pa\n", "key 'dg.evaluate': 'best_pa' is not one of ['last', 'best_acc']"),
    ("adversarial:\n  attacks:\n    cw: {steps: 3}\n", "key 'adversarial.attacks': 'cw' is not one of ['pgd', 'fmn'"),
    ("adversarial:\n  zoo:\n    models: [undefended, mart]\n", "key 'adversarial.zoo.models.1': 'mart' is not one of"),
    ("adversarial:\n  eps: [0.1, 1.5]\n", "adversarial.eps: eps 1.5 is outside (0, 1]"),
    ("adversarial:\n  eps: [0]\n", "adversarial.eps: eps 0 is outside (0, 1]"),
    ("adversarial:\n  eps: [8/0]\n", "adversarial.eps: eps '8/0' is not a number"),
    ("adversarial:\n  dataset: cifar10\n  robustbench: [Carmon2019Unlabeled]\n",
     "adversarial.robustbench: unknown model id 'Carmon2019Unlabeled'; valid: Addepalli2021Towards_RN18"),
    ("adversarial:\n  imagenet:\n    models: [Standard_R50, jpeg_rs+Standard_R5]\n",
     "adversarial.imagenet.models: unknown model id 'jpeg_rs+Standard_R5'; valid: Engstrom2019Robustness"),
    ("adversarial:\n  imagenet:\n    models: [jpeg_rs+jpeg_rs]\n",
     "or jpeg_rs+<one of the RobustBench ids>"),
    ("adversarial:\n  figures:\n    examples: [trades2]\n", "adversarial.figures.examples: 'trades2' is not among"),
    ("adversarial:\n  use_attacks: [pgd, apgd-dlr-t]\n",
     "adversarial.use_attacks: 'apgd-dlr-t' has no settings in adversarial.attacks (pgd, fmn,"),
    ("dg:\n  batch_size: 1000\n", "diagvib.studies.shift_factor.splits.train.n: 320 samples per training "
     "environment, fewer than one batch (dg.batch_size = 1000)"),
    ("avgcase:\n  models:\n    mnist32: {resnet18_w8: [0, -0.1]}\n",
     "key 'avgcase.models.mnist32.resnet18_w8.1': -0.1 is less than the minimum of 0"),
    ("avgcase:\n  sigmas: [0.1, 0]\n", "key 'avgcase.sigmas.1': 0 is less than or equal to the minimum of 0"),
    ("avgcase:\n  mmse: {n: 0}\n", "key 'avgcase.mmse.n': 0 is less than the minimum of 1"),
    ("avgcase:\n  main: mnist32/resnet18_w8-lam0.5\n",
     "avgcase.main: model 'mnist32/resnet18_w8-lam0.5' is not trained"),
    ("avgcase:\n  models:\n    mnist: {resnet18: [0]}\n",
     "avgcase.models.mnist.resnet18: ResNets take 3-channel images; mnist has one"),
])
def test_bad_config_is_rejected_by_name(tmp_path, overlay, message):
    (tmp_path / "bad.yaml").write_text(overlay)
    with pytest.raises(pabench_config.ConfigError) as err:
        pabench_config.check(pabench_config.load([REPO / "config.yaml", tmp_path / "bad.yaml"]),
                             REPO / "workflow/schemas/config.schema.yaml")
    assert message in str(err.value)




def test_inlined_schema_reports_what_the_referencing_one_does():
    """The validator with $refs inlined finds the same errors as jsonschema on the schema as
    written, including inside definitions used several times; a self-referential definition
    keeps its inner reference instead of recursing forever."""
    import copy

    import jsonschema
    import yaml

    schema_path = REPO / "workflow/schemas/config.schema.yaml"
    schema = yaml.safe_load(schema_path.read_text())
    plain = jsonschema.Draft202012Validator(schema)
    inlined = pabench_config.schema_validator(str(schema_path))
    assert "$ref" not in str(inlined.schema["properties"])
    base = pabench_config.load([REPO / "config.yaml"])
    bad = copy.deepcopy(base)
    bad["adversarial"]["eps"] = ["x"]                      # eps_list, a definition
    bad["adversarial"]["zoo"]["arch"] = 3                  # arch, used twice
    bad["avgcase"]["main"] = {"bogus": 1}                  # avg_model
    bad["toy"]["bernoulli"]["n_samples"] = -1
    for config in (base, bad):
        assert (sorted(pabench_config.describe_error(e) for e in plain.iter_errors(config))
                == sorted(pabench_config.describe_error(e) for e in inlined.iter_errors(config)))
    assert len(list(inlined.iter_errors(bad))) >= 4

    tree = {"$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
            "properties": {"root": {"$ref": "#/$defs/node"}}}
    flat = pabench_config._inline_refs(tree, tree["$defs"])
    assert flat["properties"]["root"]["properties"]["child"] == {"$ref": "#/$defs/node"}
    validator = jsonschema.Draft202012Validator(flat)
    assert not list(validator.iter_errors({"root": {"child": {"child": {}}}}))
    assert list(validator.iter_errors({"root": {"child": {"child": 5}}}))
