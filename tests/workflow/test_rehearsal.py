"""The paper-scale rehearsal: its stand-in inputs load through the paper-scale loaders, and its
dry run plans every paper-scale rule (the run itself: `make rehearsal`, docs/cluster.md)."""
import re
import subprocess
import sys

import numpy as np
import pytest

from pabench.tools import rehearsal


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    work = tmp_path_factory.mktemp("rehearsal")
    rehearsal.write_inputs(work)
    return work


def test_stand_ins_load_through_the_paper_scale_loaders(inputs):
    from pabench.attacks import datasets as adv
    from pabench.datasets import cifar_shifts as cs
    from pabench.datasets.mnist import load_source

    x, y = adv.cifar10(inputs / "data/cifar10", "train", download=False)
    assert x.shape == (rehearsal.SIZES["cifar_train"], 3, 32, 32) and set(y) <= set(range(10))
    x, y = adv.cifar100(inputs / "data/cifar100", "test", download=False)
    assert x.shape == (rehearsal.SIZES["cifar_test"], 3, 32, 32) and y.max() < 100
    assert len(set(y)) > 10                       # foolbox's CIFAR-100 images: many classes
    pools = load_source("idx", inputs / "data/rehearsal/mnist")
    assert pools.images.shape == (5000, 28, 28) and len(pools.pools["test"]) == 1000
    for pool in ("train", "val", "test"):                 # every digit in every pool
        assert set(pools.labels[pools.pools[pool]]) == set(range(10)), pool
    natural = inputs / "data/rehearsal/natural"
    n = rehearsal.SIZES["natural"]
    for x, y in (cs.load_cifar101(natural / "cifar-10.1"), cs.load_cifar102(natural / "cifar-10.2")):
        assert x.shape == (n, 3, 32, 32) and x.dtype == np.uint8 and y.max() <= 9
    x, y = cs.load_cinic10(natural / "CINIC-10")        # the benchmark's 10,000 listed images
    assert x.shape == (10_000, 3, 32, 32) and len(set(y)) == 10
    x, y = cs.load_cifar10r(natural / "imagenet-r")     # all 6,837 listed renditions
    assert x.shape == (6_837, 3, 32, 32) and len(set(y)) == 8 and y.max() <= 9
    test_x, test_y = adv.cifar10(inputs / "data/cifar10", "test", download=False)
    c10c = inputs / "data/rehearsal/cifar10c/CIFAR-10-C"   # the published layout, test set in order
    assert cs.download_cifar10c(c10c.parent, url="https://unreachable.invalid/x.tar", md5="0" * 32) \
        == c10c                                          # an unpacked folder is read as it is
    n = rehearsal.SIZES["cifar10c"]
    for corruption in ("fog", "jpeg_compression"):
        x, y = cs.load_cifar10c(c10c, corruption, 5)
        assert x.shape == test_x[:n].shape and (y == test_y[:n]).all()
    x, y = adv.imagenet(inputs / "data/rehearsal/imagenet", n=4, seed=0)
    assert x.shape == (4, 3, 224, 224)
    # OODRobustBench's ImageNet setup: the first ids of the authors' lists, in the published layouts
    from pabench.datasets import imagenet_shifts as ims

    listed, n = inputs / "data/rehearsal/imagenet-oodrb", rehearsal.SIZES["imagenet_listed"]
    x, y = ims.load_test(listed / "val", n)
    assert x.shape == (n, 3, 224, 224) and len(set(y)) > 1
    for shift in ("imagenet-v2", "imagenet-a", "imagenet-r", "objectnet"):
        assert ims.load_natural(shift, listed / shift, n=n)[0].shape == (n, 3, 224, 224)
    ids = cs.image_ids("imagenet_test")[:n]
    assert ims.load_corruption(listed / "imagenet-c", "frost", 5, ids)[0].shape == (n, 3, 224, 224)
    # the flipped and shifted variants are not copies of the 20 originals
    x, _ = adv.cifar10(inputs / "data/cifar10", "test", download=False)
    assert len(np.unique(x.reshape(len(x), -1), axis=0)) > 100


def test_dry_run_plans_every_paper_scale_rule(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pabench.tools.rehearsal",
                           "--dir", str(tmp_path / "r"), "--dry-run", "--quiet", "rules"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, re.M))
    # the paper-scale-only parts: RobustBench models, the ImageNet figures, CIFAR-100, the
    # published natural shifts, 128 px DiagViB-6
    for rule in ("adv_attack", "pa_models_imagenet", "pa_fig7", "oodrb_shifts", "oodrb_table3",
                 "avgcase_table1", "train_ms", "claims", "oodrb_table4", "oodrb_fig11",
                 "oodrb_table5", "oodrb_fig12", "oodrb_setup_table"):
        assert int(counts.get(rule, 0)) >= 1, (rule, counts)
    # CIFAR-10 L-inf: three RobustBench and three ST models; L2: two RobustBench L2 models and the
    # same three ST models; ImageNet L-inf: two RobustBench models
    assert int(counts["oodrb_shifts"]) == 3 + 3 + 2 + 3 + 2
    assert int(counts["oodrb_published"]) == 3 + 3 and "oodrb_train" not in counts
    # Table 3: one of them, and one of the paper's Table 3 models outside the list (attacks alone)
    assert int(counts["oodrb_attacks"]) == 2
    # per dataset (CIFAR-10, shared by its two setups; ImageNet): 15 corruptions + 4 natural shifts
    assert int(counts["oodrb_shift"]) == 2 * (15 + 4)
    assert int(counts["oodrb_data"]) == 2
    # the appendix figures; Figure 17 and the scatter plots of the L2 and ImageNet setups
    for rule in ("oodrb_fig8", "oodrb_fig13", "oodrb_fig14", "oodrb_fig16", "oodrb_fig18",
                 "oodrb_fig19_21", "oodrb_fig28", "oodrb_fig17", "oodrb_fig22_24", "oodrb_fig29",
                 "oodrb_fig25_27", "oodrb_fig30"):
        assert int(counts.get(rule, 0)) == 1, (rule, counts)
