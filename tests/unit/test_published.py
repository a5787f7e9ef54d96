"""Published standardly trained CIFAR-10 models (OODRobustBench's ST group at paper scale): the
architectures against their publisher's numbers and names, the download into a zoo checkpoint
(stand-in weights in the real format: a torch.save'd state dict), and the workflow's plan."""
import hashlib

import numpy as np
import pytest
import torch
from conftest import REPO

from pabench.attacks import published
from pabench.attacks.models import CIFAR10_MEAN, CIFAR10_STD, build, load_zoo_model, \
    save_zoo_model
from pabench.core import config as pabench_config
from pabench.experiments.oodrb import compute, plan

pytestmark = pytest.mark.usefixtures("one_thread")   # small tensors

# chenyaofo/pytorch-cifar-models' README: CIFAR-10 parameters (millions), and names its state
# dicts hold (torchvision's naming)
PARAMS = {"resnet20": 0.27, "resnet32": 0.47, "resnet44": 0.66, "resnet56": 0.86,
          "vgg11_bn": 9.76, "vgg13_bn": 9.94, "vgg16_bn": 15.25, "vgg19_bn": 20.57}
KEYS = {"resnet20": {"conv1.weight": (16, 3, 3, 3), "layer1.2.bn2.running_var": (16,),
                     "layer2.0.downsample.0.weight": (32, 16, 1, 1),
                     "layer3.0.downsample.1.num_batches_tracked": (), "fc.weight": (10, 64)},
        "vgg11_bn": {"features.0.weight": (64, 3, 3, 3), "features.1.running_mean": (64,),
                     "features.4.weight": (128, 64, 3, 3), "features.25.weight": (512, 512, 3, 3),
                     "classifier.3.weight": (512, 512), "classifier.6.bias": (10,)}}


@pytest.mark.parametrize("arch", sorted(PARAMS))
def test_architectures_have_the_publishers_sizes(arch):
    net = build(arch)
    assert round(sum(p.numel() for p in net.parameters()) / 1e6, 2) == PARAMS[arch]
    assert net(torch.rand(2, 3, 32, 32)).shape == (2, 10)
    state = net.net.state_dict()          # what the published file holds
    for key, shape in KEYS.get(arch, {}).items():
        assert tuple(state[key].shape) == shape, key
    assert set(net.state_dict()) == {f"net.{k}" for k in state}   # mean and std are no weights


def test_inputs_are_standardised_with_the_training_mean_and_std():
    net = build("resnet20").eval()
    x = torch.rand(3, 3, 32, 32)
    mean, std = torch.tensor(CIFAR10_MEAN).view(1, 3, 1, 1), torch.tensor(CIFAR10_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(net(x), net.net((x - mean) / std))


def _stand_in(tmp_path, arch="resnet20", seed=1):
    """A published-format checkpoint (the bare network's state dict) and its catalogue entry."""
    torch.manual_seed(seed)
    net = build(arch).eval()
    path = tmp_path / "src" / f"cifar10_{arch}-x.pt"
    path.parent.mkdir(exist_ok=True)
    torch.save(net.net.state_dict(), path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return net, path, published.Published(arch, path.as_uri(), f"sha256:{digest[:8]}", 90.0, "test")


def test_a_published_model_is_downloaded_checked_and_saved_as_a_zoo_checkpoint(tmp_path, monkeypatch):
    net, path, entry = _stand_in(tmp_path)
    monkeypatch.setitem(published.CATALOGUE, "test/resnet20", entry)
    model, info = published.load("test/resnet20", tmp_path / "dl")
    x = torch.rand(4, 3, 32, 32)
    torch.testing.assert_close(model(x), net(x))
    assert info["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert (tmp_path / "dl" / path.name).is_file()
    # the rule's checkpoint loads like a trained zoo model's
    save_zoo_model(model, tmp_path / "m.pt", "resnet20", "undefended", 10, 32, extra=info)
    loaded, meta = load_zoo_model(tmp_path / "m.pt")
    torch.testing.assert_close(loaded(x), net(x))
    assert meta["method"] == "undefended" and meta["published"] == "test/resnet20"


def test_wrong_checksums_and_weights_are_refused(tmp_path, monkeypatch):
    _, path, entry = _stand_in(tmp_path)
    monkeypatch.setitem(published.CATALOGUE, "test/bad", published.Published(
        "resnet20", entry.url, "sha256:00000000", 90.0, "test"))
    with pytest.raises(ValueError, match="checksum mismatch"):
        published.load("test/bad", tmp_path / "dl")
    assert not (tmp_path / "dl" / path.name).exists()
    monkeypatch.setitem(published.CATALOGUE, "test/vgg", published.Published(   # wrong network
        "vgg11_bn", entry.url, entry.checksum, 90.0, "test"))
    with pytest.raises(ValueError, match=r"weights do not match architecture 'vgg11_bn'"):
        published.load("test/vgg", tmp_path / "dl")
    with pytest.raises(ValueError, match="unknown published model 'chenyaofo/resnet99'"):
        published.load("chenyaofo/resnet99", tmp_path)


def test_random_weights_download_nothing_and_are_seeded(tmp_path):
    a, info = published.load("chenyaofo/vgg11_bn", tmp_path / "dl", weights="random")
    b, _ = published.load("chenyaofo/vgg11_bn", tmp_path / "dl", weights="random")
    x = torch.rand(2, 3, 32, 32)
    torch.testing.assert_close(a(x), b(x))
    assert info["sha256"] is None and not (tmp_path / "dl").exists()


def test_catalogue_urls_carry_their_checksum_prefix():
    for name, e in published.CATALOGUE.items():
        if e.url is None:
            assert e.arch == "robustbench/Standard" and e.checksum is None
            continue
        prefix = e.checksum.removeprefix("sha256:")
        assert e.url.endswith(f"-{prefix}.pt") and len(prefix) == 8, name
        assert e.url.startswith("https://github.com/chenyaofo/pytorch-cifar-models/releases/")


def test_paper_scale_st_models_are_undefended_zoo_entries():
    paper = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    pabench_config.check(paper, REPO / "workflow/schemas/config.schema.yaml")
    names = plan.published(paper)
    assert len(names) >= 5 and plan.trained(paper) == []
    assert plan.table_inputs(paper, "history") == []               # nothing is trained
    for name in names:
        spec = plan.zoo(paper)[name]
        assert compute.describe(spec)["adversarial"] is False and spec["method"] == "undefended"
        assert np.isnan(compute.describe(spec)["epochs"])
        assert plan.model_input(paper, "cifar10", name)            # a checkpoint the rule writes
    archs = {plan.zoo(paper)[n]["arch"] for n in names}
    assert "robustbench/Standard" in archs and {"resnet20", "vgg16_bn"} <= archs
    assert plan.describe_zoo(paper) == ""


# OODRobustBench Table 1 (CIFAR-10 L-inf): method (citation), model, ID accuracy / robustness ->
# the RobustBench id whose leaderboard entry has that architecture and clean accuracy
TABLE1 = [("BDM WRN-70-16 93.2/70.7", "Wang2023Better_WRN-70-16"),
          ("AS WRN-70-16 + ResNet-152 95.2/69.5", "Bai2023Improving_edm"),
          ("DKL WRN-28-10 92.1/67.7", "Cui2023Decoupled_WRN-28-10"),
          ("BDM WRN-28-10 92.4/67.3", "Wang2023Better_WRN-28-10"),
          ("FDA WRN-70-16 92.2/66.7", "Rebuffi2021Fixing_70_16_cutmix_extra"),
          ("DDPM WRN-70-16 88.7/66.2", "Gowal2021Improving_70_16_ddpm_100m"),
          ("Uncovering WRN-70-16 91.1/66.0", "Gowal2020Uncovering_70_16_extra"),
          ("RobustResNet WRN-A4 91.5/65.8", "Huang2022Revisiting_WRN-A4"),
          ("FDA WRN-106-16 88.5/64.8", "Rebuffi2021Fixing_106_16_cutmix_ddpm"),
          ("DyART WRN-28-10 93.6/64.7", "Xu2023Exploring_WRN-28-10"),
          ("PORT ResNet-152 87.2/62.7", "Sehwag2021Proxy_ResNest152"),
          ("HAT WRN-28-10 88.1/60.9", "Rade2021Helper_ddpm"),   # not _extra (WRN-34-10, 91.5)
          ("AWP WRN-28-10 88.2/60.1", "Wu2020Adversarial_extra"),
          ("RST WRN-28-10 89.6/59.8", "Carmon2019Unlabeled"),
          ("MART WRN-28-10 87.5/56.7", "Wang2020Improving"),
          ("HE WRN-34-20 85.1/53.8", "Pang2020Boosting"),
          ("FAT WRN-34-10 84.5/53.6", "Zhang2020Attacks"),
          ("Overfitting WRN-34-20 85.3/53.5", "Rice2020Overfitting"),
          ("TRADES WRN-34-10 84.9/52.6", "Zhang2019Theoretically"),
          ("FBF PreActResNet-18 83.3/43.3", "Wong2020Fast")]


def test_paper_scale_robustbench_models_are_table_1s_rows():
    paper = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    # Table 1's rows in its order, then the models only Tables 6-10 compare (techniques.yaml)
    assert paper["oodrb"]["robustbench"][:len(TABLE1)] == [model for _, model in TABLE1]
