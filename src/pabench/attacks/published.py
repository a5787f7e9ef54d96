"""Standardly trained CIFAR-10 models with published weights: the ST group of OODRobustBench's
Figure 3 at the paper scale, as zoo entries (`oodrb.zoo.models: {name, published: <id>}`).

The catalogue names each model's architecture (`pabench.attacks.models.build`), where its
weights are published and how they are checked: RobustBench's `Standard` (WideResNet-28-10,
fetched by pabench.attacks.robustbench from RobustBench's Google Drive id; no checksum is
published: the file must load, and the job logs its SHA-256), and the CIFAR-10 ResNets and VGGs of github.com/chenyaofo/pytorch-cifar-models
(release files whose names carry the first 8 hex digits of their SHA-256, which torch.hub checks;
we check the same digits and log the whole digest).  No PyTorch at import: the workflow's
planning reads the catalogue.
"""
from __future__ import annotations

import logging
import pickle
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("pabench.published")
WEIGHTS = ("download", "random")


@dataclass(frozen=True)
class Published:
    arch: str              # pabench.attacks.models.build; "robustbench/<id>": RobustBench's
    url: str | None        # None: pabench.attacks.robustbench downloads it
    checksum: str | None   # what pabench.core.download.download_file checks
    accuracy: float        # the publisher's CIFAR-10 test accuracy, percent
    source: str


_CHENYAOFO = "https://github.com/chenyaofo/pytorch-cifar-models/releases/download/"


def _chenyaofo(family: str, arch: str, prefix: str, accuracy: float) -> Published:
    return Published(arch, f"{_CHENYAOFO}{family}/cifar10_{arch}-{prefix}.pt", f"sha256:{prefix}",
                     accuracy, "chenyaofo/pytorch-cifar-models (BSD-3-Clause)")


CATALOGUE = {
    "robustbench/Standard": Published("robustbench/Standard", None, None, 94.78,
                                      "RobustBench model zoo, CIFAR-10 L-inf `Standard`"),
    "chenyaofo/resnet20": _chenyaofo("resnet", "resnet20", "4118986f", 92.60),
    "chenyaofo/resnet32": _chenyaofo("resnet", "resnet32", "ef93fc4d", 93.53),
    "chenyaofo/resnet44": _chenyaofo("resnet", "resnet44", "2a3cabcb", 94.01),
    "chenyaofo/resnet56": _chenyaofo("resnet", "resnet56", "187c023a", 94.37),
    "chenyaofo/vgg11_bn": _chenyaofo("vgg", "vgg11_bn", "eaeebf42", 92.79),
    "chenyaofo/vgg13_bn": _chenyaofo("vgg", "vgg13_bn", "c01e4a43", 94.00),
    "chenyaofo/vgg16_bn": _chenyaofo("vgg", "vgg16_bn", "6ee7ea24", 94.16),
    "chenyaofo/vgg19_bn": _chenyaofo("vgg", "vgg19_bn", "57191229", 93.91),
}


def entry(name: str) -> Published:
    if name not in CATALOGUE:
        raise ValueError(f"unknown published model {name!r}; the catalogue has "
                         f"{', '.join(CATALOGUE)}")
    return CATALOGUE[name]


def _state_dict(path: Path) -> dict:
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path}: not a readable checkpoint ({type(err).__name__}: {err})") \
            from None
    if not isinstance(state, dict) or not all(hasattr(v, "shape") for v in state.values()):
        raise ValueError(f"{path}: not a state dict (names -> tensors)")
    return state


def load(name: str, directory, weights: str = "download", robustbench_dir=None):
    """The published model `name` in eval mode on the CPU, and what identifies its weights
    ({"published": name, "file": path, "sha256": digest}; None with `weights="random"`, which
    builds the architecture with seeded random weights and downloads nothing: the rehearsal)."""
    import torch

    from pabench.attacks import robustbench
    from pabench.attacks.models import build
    from pabench.core.io import file_digest
    from pabench.core.download import download_file

    e = entry(name)
    if weights not in WEIGHTS:
        raise ValueError(f"published weights must be one of {WEIGHTS}, got {weights!r}")
    info = {"published": name, "file": None, "sha256": None}
    if weights == "random":
        log.warning("%s: published architecture with RANDOM weights (rehearsal, no download)",
                    name)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return build(e.arch).eval(), info
    if e.url is None:   # into RobustBench's model folder, where its package reads it
        model_id = e.arch.split("/", 1)[1]
        net = robustbench.load(model_id, "cifar10", robustbench_dir, "cpu", "download")
        path = Path(robustbench_dir) / "cifar10" / "Linf" / f"{model_id}.pt"
        digest = file_digest(path) if path.is_file() else None
        log.info("%s: %s (SHA-256 %s; RobustBench publishes no checksum)", name, path, digest)
        return net.eval(), {**info, "file": str(path), "sha256": digest}
    path = download_file(e.url, Path(directory) / Path(e.url).name, e.checksum)
    net = build(e.arch)
    try:
        net.net.load_state_dict(_state_dict(path))
    except RuntimeError as err:
        raise ValueError(f"{path}: weights do not match architecture {e.arch!r} "
                         f"({str(err).splitlines()[0]})") from None
    return net.eval(), {**info, "file": str(path), "sha256": file_digest(path)}
