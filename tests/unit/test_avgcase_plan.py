"""The average-case experiment's plan at each scale: the Transformers and the paper's ResNet-18,
per-architecture training settings, the appendix's entries (class bias of the other models,
per-model errors, noisy images, every model's runtimes) and what each reads."""
import pytest

from conftest import REPO
from pabench.tools import workload
from pabench.core import paths
from pabench.core.config import load
from pabench.experiments.avgcase import figures, plan
from pabench.papers.avgcase import ARCHS, PAPER

QUICK = load([REPO / "config.yaml"])
PAPER_SCALE = load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
REHEARSAL = load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml",
                  REPO / "workflow/config/rehearsal.yaml"])
ENTRIES = {e.name: e for e in PAPER.entries}


def test_the_transformers_and_the_papers_resnet_at_each_scale():
    assert "mnist32/vit_tiny-lam0" in plan.models(QUICK)
    for config in (PAPER_SCALE, REHEARSAL):
        models = plan.models(config)
        assert {"cifar10/vit-lam0", "cifar100/vit-lam0", "cifar10/resnet18-lam0",
                "cifar100/resnet18-lam0"} <= set(models)
        assert not any("vit_tiny" in m or "preact" in m for m in models)
    assert "post-activation" in ARCHS["resnet18"] and "ViT-Lite-7/4" in ARCHS["vit"]


def test_each_architecture_trains_with_its_own_settings():
    """avgcase.train_by_arch replaces train's settings for that architecture only; the ViT's
    training job (and the workload's count of it) runs its own epochs."""
    vit, resnet = plan.train_params(QUICK, "vit_tiny"), plan.train_params(QUICK, "resnet18_w8")
    assert vit == {**resnet, "epochs": 4} and resnet["epochs"] == QUICK["avgcase"]["train"]["epochs"]
    assert "seeds" not in vit and plan.train_params(QUICK) == resnet
    epochs = {w.job: w.units for w in workload.work(QUICK) if w.job.startswith("avg_train")}
    assert epochs["avg_train mnist32/vit_tiny-lam0/0"] == 4
    assert epochs["avg_train mnist32/resnet18_w8-lam0/0"] == 2
    # Keys no evaluation reads: changing them reruns no evaluation.
    assert not {"train_by_arch", "class_bias_other"} & set(plan.eval_settings(QUICK))


def test_table1_reads_the_main_model_and_the_runtimes_every_model():
    main = plan.main(QUICK)
    assert plan.table_inputs(QUICK, "runtime") == [paths.avg_file("runtime", *main.split("/"), 0)]
    every = plan.table_inputs(QUICK, "runtime_models")
    assert every == [paths.avg_file("runtime", *ref.split("/"), 0) for ref in plan.models(QUICK)]
    assert ENTRIES["runtimes"].inputs(QUICK) == {"table": paths.avg_table("runtime_models")}
    assert ENTRIES["table1"].inputs(QUICK) == {"table": paths.avg_table("runtime")}
    # The compute estimate counts one runtime job per model (the first seed).
    runtime = {w.job for w in workload.work(PAPER_SCALE) if w.job.startswith("avg_runtime")}
    assert runtime == {f"avg_runtime {ref}/0" for ref in plan.models(PAPER_SCALE)}


def test_the_appendix_entries_read_their_models():
    seeds = plan.seeds(QUICK)
    other = ENTRIES["class_bias_other"]
    assert other.function is figures.fig4 and other.claims == ("avg-class-bias-other",)
    assert other.inputs(QUICK) == {"estimates": plan.files("estimates", ["mnist/cnn_w16-lam0"], seeds)}
    assert other.enabled(QUICK)
    assert PAPER_SCALE["avgcase"]["class_bias_other"] == ["mnist/cnn-lam0", "cifar100/resnet18-lam0"]
    assert PAPER.claim_tables(QUICK)["avg_class_bias_other"] == paths.figure_files(
        "avgcase", "class_bias_other")["csv"]
    none = {**QUICK, "avgcase": {**QUICK["avgcase"], "class_bias_other": []}}
    assert not other.enabled(none) and "avg_class_bias_other" not in PAPER.claim_tables(none)
    assert ENTRIES["errors_by_model"].inputs(QUICK) == {
        "estimates": plan.files("estimates", plan.models(QUICK), seeds)}
    noisy = ENTRIES["noisy_images"]
    assert noisy.inputs(PAPER_SCALE) == {"data": [paths.avg_data(d) for d in
                                                  ("mnist", "fmnist", "cifar10", "cifar100")]}
    assert noisy.args(QUICK)["sigmas"] == QUICK["avgcase"]["sigmas"]
    assert noisy.args(QUICK)["datasets"] == ["mnist", "fmnist", "mnist32"]


def test_captions_state_an_architectures_own_training():
    from pabench.papers.avgcase import _meta

    assert _meta(QUICK, ["mnist32/vit_tiny-lam0"])["training by architecture"] == {
        "vit_tiny": {"epochs": 4}}
    assert "training by architecture" not in _meta(QUICK, ["mnist32/resnet18_w8-lam0"])
    assert ENTRIES["models"].meta(QUICK)["training by architecture"] == {"vit_tiny": {"epochs": 4}}


@pytest.mark.parametrize("overlay,message", [
    ("avgcase:\n  class_bias_other: [mnist/cnn-lam0]\n",
     "avgcase.class_bias_other[0]: model 'mnist/cnn-lam0' is not trained"),
    ("avgcase:\n  train_by_arch: {vit_small: {epochs: 3}}\n",
     "key 'avgcase.train_by_arch': 'vit_small' is not one of ['linear'"),
    ("avgcase:\n  train_by_arch: {vit_tiny: {epochs: 0}}\n",
     "key 'avgcase.train_by_arch.vit_tiny.epochs': 0 is less than the minimum of 1"),
    ("avgcase:\n  train_by_arch: {vit_tiny: {seeds: [1]}}\n",
     "unknown key 'avgcase.train_by_arch.vit_tiny.seeds'"),
    ("avgcase:\n  models:\n    fmnist: {preact_resnet18_w8: [0]}\n",
     "avgcase.models.fmnist.preact_resnet18_w8: ResNets take 3-channel images"),
])
def test_bad_avgcase_config_is_rejected_by_name(tmp_path, overlay, message):
    from pabench.core import config as pabench_config

    (tmp_path / "bad.yaml").write_text(overlay)
    with pytest.raises(pabench_config.ConfigError) as err:
        pabench_config.check(pabench_config.load([REPO / "config.yaml", tmp_path / "bad.yaml"]),
                             REPO / "workflow/schemas/config.schema.yaml")
    assert message in str(err.value)


def test_every_scale_config_is_valid():
    """The schema and the average-case checks pass at every scale (the rehearsal's other checks
    need its stand-in folders, written when it runs)."""
    from pabench.core import config as pabench_config
    from pabench.experiments.avgcase.checks import avgcase

    validator = pabench_config.schema_validator(str(REPO / "workflow/schemas/config.schema.yaml"))
    for config in (QUICK, PAPER_SCALE, REHEARSAL,
                   load([REPO / "config.yaml", REPO / "workflow/config/test.yaml"])):
        assert not list(validator.iter_errors(config)) and avgcase(config) == []
