"""OODRobustBench's three setups (CIFAR-10 L-inf, CIFAR-10 L2, ImageNet L-inf): the merged
settings and their paths, the checks, the L2 attack, the ImageNet sets and the registry entries."""
import numpy as np
import pytest
import torch
from conftest import REPO
from PIL import Image

from pabench.core import config as pabench_config
from pabench.experiments.oodrb import compute, plan, tables
from pabench.metrics.settings import PASettings

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
PAPER = [REPO / "config.yaml", REPO / "workflow/config/paper.yaml"]


def _quick(tmp_path, overlay: str = "") -> dict:
    (tmp_path / "o.yaml").write_text(overlay)
    return pabench_config.load([REPO / "config.yaml", tmp_path / "o.yaml"])


def test_setups_merge_over_the_base_and_keep_its_paths():
    cfg = pabench_config.load(PAPER)
    assert plan.setup_names(cfg) == ["linf", "l2", "imagenet"]
    base, l2, imnet = (plan.for_setup(cfg, s) for s in ("linf", "l2", "imagenet"))
    # the base setup: today's tag and paths
    assert plan.tag(base) == "cifar10" and plan.norm(base) == "Linf"
    assert plan.table(base, "shifts") == "data/results/oodrb/shifts.csv"
    assert plan.table_inputs(base, "shifts")[0].startswith("data/oodrb/shifts/cifar10/")
    # L2: the same images, its own models, radius, threats, files and tables
    assert plan.norm(l2) == "L2" and plan.eps_of(l2) == 0.5 and plan.dataset(l2) == "cifar10"
    assert plan.data_file(l2, "id") == plan.data_file(base, "id")
    assert plan.shift_files(l2) == plan.shift_files(base)
    assert plan.tag(l2) == "l2" and plan.table(l2, "shifts") == "data/results/oodrb/l2/shifts.csv"
    assert all(p.startswith("data/oodrb/") and "/l2/" in p for p in plan.table_inputs(l2, "shifts"))
    assert plan.zoo(l2) == plan.zoo(base)            # dicts merge: the ST models stay
    assert len(plan.robustbench(l2)) == 19 and not plan.table3_models(l2)
    threats = {t["kind"]: t["eps"] for t in plan.threats(l2).values()}   # Section 3.1's L2 budgets
    assert threats == pytest.approx({"linf": 8 / 255, "l2": 1.0, "ppgd": 0.5, "lpa": 0.5,
                                     "stadv": 0.05, "recolor": 0.06})
    # ImageNet: its own images
    assert plan.dataset(imnet) == "imagenet" and plan.eps_of(imnet) == pytest.approx(4 / 255)
    assert plan.tag(imnet) == "imagenet" and plan.data_file(imnet, "id") == "data/oodrb/data/imagenet/id.npz"
    assert set(imnet["oodrb"]["natural"]) == {"imagenet-v2", "imagenet-a", "imagenet-r", "objectnet"}
    assert {t["kind"]: t["eps"] for t in plan.threats(imnet).values()}["l2"] == 1.0
    assert plan.setup_config(cfg, "l2")["oodrb"]["norm"] == "L2"
    assert sorted(plan.setups_by_tag(cfg)) == ["cifar10", "imagenet", "l2"]
    pabench_config.check(cfg, SCHEMA)               # every setup passes the checks merged


def test_quick_scale_runs_the_base_setup_alone():
    cfg = pabench_config.load([REPO / "config.yaml"])
    assert plan.setup_names(cfg) == ["linf"] and list(plan.setups_by_tag(cfg)) == ["mnist32"]
    assert plan.table(plan.for_setup(cfg, "linf"), "shifts") == "data/results/oodrb/shifts.csv"


def test_setup_models_are_ids_of_their_robustbench_leaderboards(tmp_path):
    from pabench.attacks import robustbench

    cfg = pabench_config.load(PAPER)
    l2 = plan.robustbench(plan.for_setup(cfg, "l2"))
    assert sorted(set(l2) - set(robustbench.architectures("cifar10", "L2"))) == []
    # the threat model matters: some of Table 4's ids are on RobustBench's L2 board alone
    assert set(l2) - set(robustbench.architectures("cifar10", "Linf"))
    imnet = plan.robustbench(plan.for_setup(cfg, "imagenet"))
    assert sorted(set(imnet) - set(robustbench.architectures("imagenet", "Linf"))) == []
    net = robustbench.load("Rice2020Overfitting", "cifar10", tmp_path, "cpu", "random", "L2")
    assert net(torch.zeros(1, 3, 32, 32)).shape == (1, 10)
    # robustbench 1.1.1's ImageNet XCiT entries name an unregistered timm model: built as its
    # load_model builds them (the timm model of the id)
    net = robustbench.load("Debenedetti2022Light_XCiT-M12", "imagenet", tmp_path, "cpu", "random")
    assert net(torch.zeros(1, 3, 224, 224)).shape == (1, 1000)
    with pytest.raises(ValueError, match="is not a RobustBench cifar10 L2 model id"):
        robustbench.load("Carmon2019Unlabeled", "cifar10", tmp_path, "cpu", "random", "L2")


@pytest.mark.parametrize("overlay,message", [
    ("oodrb:\n  setups:\n    l2: {norm: L3}\n",
     "oodrb.setups.l2 (merged over oodrb): key 'oodrb.norm': 'L3' is not one of"),
    ("oodrb:\n  setups:\n    l2: {norm: L2, eps: 0.5}\n",
     "oodrb.setups.l2 (merged over oodrb): oodrb.norm: L2, but the zoo trains under L-inf only"),
    ("oodrb:\n  setups:\n    linf: {}\n", "oodrb.setups.linf: 'linf' is the base setup's name"),
    ("oodrb:\n  setups:\n    mnist32: {}\n", "oodrb.setups.mnist32: 'mnist32' is the base setup's"),
    ("oodrb:\n  setups:\n    more: {n_test: 50}\n",
     "oodrb.setups.more: shares dataset mnist32 (and its image files) with setup 'linf' but "
     "sets ['n_test'] otherwise"),
    ("oodrb:\n  setups:\n    Big: {}\n", "does not match"),
    ("oodrb:\n  setups:\n    im: {dataset: imagenet, natural: [imagenet-a]}\n",
     "oodrb.zoo.models: ImageNet's models are RobustBench ids"),
    ("oodrb:\n  setups:\n    im: {dataset: imagenet, natural: [imagenet-a], zoo: {models: []}, "
     "robustbench: [Wong2020Fast], corruption_source: published, imagenet: {folder: /no/such}}\n",
     "oodrb.imagenet.folder: /no/such: no such folder"),
])
def test_bad_setup_is_rejected_by_name(tmp_path, overlay, message):
    with pytest.raises(pabench_config.ConfigError) as err:
        pabench_config.check(_quick(tmp_path, overlay), SCHEMA)
    assert message in str(err.value)


def test_an_l2_setup_attacks_under_l2_in_distribution_and_under_dataset_shift(tmp_path,
                                                                               monkeypatch):
    cfg = _quick(tmp_path, "oodrb:\n  setups:\n    l2:\n      norm: L2\n      eps: 1.5\n"
                           "      zoo: {models: [{name: st, published: chenyaofo/resnet20}]}\n")
    c = plan.for_setup(cfg, "l2")
    calls = []
    real = compute.mm_attack

    def spy(model, x, y, eps, norm, *args, **kwargs):
        calls.append((norm, eps))
        return real(model, x, y, eps, norm, *args, **kwargs)

    monkeypatch.setattr(compute, "mm_attack", spy)
    rng = np.random.default_rng(0)
    data = {"test_x": rng.integers(0, 256, (6, 3, 32, 32), dtype=np.uint8),
            "test_y": rng.integers(0, 10, 6)}
    path = tmp_path / "font_digits.npz"
    np.savez(path, x=data["test_x"][None], y=data["test_y"], severities=np.array([0]),
             source=np.full(6, -1))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10)).eval()
    pa = PASettings.from_config(cfg["pa"]["adam"], 2)
    rows, _ = compute.shifts(c, "st", net, data, {"font_digits": str(path)}, pa, "cpu")
    assert len(rows) == 2 and calls == [("L2", 1.5), ("L2", 1.5)]


def _image(path, size=(40, 30)):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size[1], size[0], 3), 100, np.uint8)).save(
        path, "PNG" if path.suffix == ".png" else "JPEG")


def test_imagenet_sets_are_the_authors_lists_with_imagenet_labels(tmp_path):
    from pabench.datasets import imagenet_shifts as ims
    from pabench.datasets.cifar_shifts import image_ids

    test = image_ids("imagenet_test")[:5]
    assert len(image_ids("imagenet_test")) == 5000 and len(image_ids("imagenet-v2")) == 10_000
    for i in test:
        _image(tmp_path / "val" / i)
        for severity in (1, 2):
            _image(tmp_path / "c" / "fog" / str(severity) / i, (16, 16))
    x, y = ims.load_test(tmp_path / "val", 5, image_size=16, resize=16)
    assert x.shape == (5, 3, 16, 16) and x.dtype == np.uint8
    assert list(y) == [ims.wnids().index(i.split("/")[0]) for i in test]
    assert ims.wnids()[0] == "n01440764" and ims.label("n01440764") == 0
    v2 = image_ids("imagenet-v2")[:3]                  # ImageNet-V2's folders are class indices
    for i in v2:
        _image(tmp_path / "v2" / i)
    _, y = ims.load_natural("imagenet-v2", tmp_path / "v2", n=3, image_size=16, resize=16)
    assert list(y) == [int(i.split("/")[0]) for i in v2]
    with pytest.raises(ValueError, match="objectnet: no folder given"):
        ims.load_natural("objectnet", None, tmp_path)
    (tmp_path / "val" / test[2]).unlink()
    with pytest.raises(ValueError, match="1 of the 5 listed images are missing"):
        ims.load_test(tmp_path / "val", 5, image_size=16, resize=16)
    _image(tmp_path / "val" / test[2])
    # ImageNet-C: the files of the same names, each paired with its ID original
    o = {"dataset": "imagenet", "n_test": 5, "n_shift": 3, "test_seed": 0, "severities": [1, 2],
         "imagenet": {"folder": str(tmp_path / "val"), "c_folder": str(tmp_path / "c"),
                      "image_size": 16, "resize": 16}}
    d = compute.id_data(o)
    assert d["test_x"].shape == (5, 3, 16, 16) and len(d["train_x"]) == 0
    c = compute.corruption_data(o, "fog", d["test_x"], d["test_y"])
    assert c["x"].shape == (2, 3, 3, 16, 16) and len(c["source"]) == 3
    np.testing.assert_array_equal(c["y"], d["test_y"][c["source"]])


def test_setup_entries_are_built_where_their_setup_is_configured(tmp_path):
    from pabench.papers.oodrb import PAPER as REGISTRY

    entries = {e.name: e for e in REGISTRY.entries}
    paper = pabench_config.load(PAPER)
    on = {e.name for e in REGISTRY.enabled(paper)}
    assert {"table4", "fig9", "fig11", "fig4_l2", "fig15_l2", "table1", "fig2"} <= on
    assert entries["fig9"].inputs(paper) == {"shifts": "data/results/oodrb/l2/shifts.csv"}
    assert entries["table4"].function is tables.table1
    assert "eps (L2)" in entries["table4"].meta(paper)
    assert "eps (L-inf)" in entries["table1"].meta(paper)   # the base setup's caption as before
    assert entries["table1"].meta(paper)["models"] == "9 published standardly trained + 24 RobustBench"
    assert entries["table4"].meta(paper)["models"] == "9 published standardly trained + 19 RobustBench"
    assert "(published CIFAR-10-C)" in entries["table4"].meta(paper)["dataset shifts"]
    # ImageNet: not built until its folders are set, and asked for by name it says what to set
    assert not on & {"table5", "fig10", "fig12"}
    assert "oodrb.setups.imagenet.imagenet.folder" in entries["table5"].requires(paper)
    assert "oodrb.setups.imagenet.natural_folders.objectnet" in entries["table5"].requires(paper)
    rehearsal = pabench_config.load(PAPER + [REPO / "workflow/config/rehearsal.yaml"])
    assert {"table5", "fig10", "fig12"} <= {e.name for e in REGISTRY.enabled(rehearsal)}
    assert entries["fig12"].inputs(rehearsal) == {"shifts": "data/results/oodrb/imagenet/shifts.csv"}
    quick = pabench_config.load([REPO / "config.yaml"])
    assert not {e.name for e in REGISTRY.enabled(quick)} & {"table4", "table5", "fig9"}
    assert "not configured at this scale" in entries["table4"].requires(quick)
