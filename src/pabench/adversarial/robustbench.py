"""RobustBench L-inf models (paper scale), through the optional `robustbench` package.

`weights="download"` fetches the published weights into `model_dir` (internet needed once) and
loads them with torch.load (weights_only=True in the PyTorch versions we support).
`weights="random"` builds the same architecture with its initial random weights and downloads
nothing: the paper-scale rehearsal runs every RobustBench code path that way, offline.
"""
from __future__ import annotations

import importlib
import logging
import sys

import torch.nn as nn

log = logging.getLogger("pabench.robustbench")
WEIGHTS = ("download", "random")
INSTALL = "pip install 'pabench[robustbench]'"


def _package():
    """robustbench, imported.  It imports `autoattack` (the authors' package, installed from git,
    not on PyPI); `pyautoattack` is the same code on PyPI, so it stands in under that name."""
    if "autoattack" not in sys.modules:
        try:
            importlib.import_module("autoattack")
        except ImportError:
            sys.modules["autoattack"] = importlib.import_module("pyautoattack")
    try:
        return importlib.import_module("robustbench")
    except ImportError as err:
        raise RuntimeError(f"RobustBench models need the optional package ({INSTALL}; "
                           f"robustbench 1.1.1): {err}") from None


def architectures(dataset: str) -> dict:
    """RobustBench's L-inf entries for `dataset` ("cifar10" | "imagenet"): id -> entry whose
    "model" builds the architecture."""
    _package()
    from robustbench.model_zoo import model_dicts
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    return model_dicts[BenchmarkDataset(dataset)][ThreatModel.Linf]


def architecture(model_id: str, dataset: str) -> nn.Module:
    """The architecture of a RobustBench L-inf model, with its initial weights."""
    zoo = architectures(dataset)
    if model_id not in zoo:
        raise ValueError(f"{model_id!r} is not a RobustBench {dataset} L-inf model id "
                         f"(robustbench 1.1.1 knows {len(zoo)}, e.g. {sorted(zoo)[:5]})")
    return zoo[model_id]["model"]()


def _untrained(build):
    """`build()` with downloads of pretrained weights skipped: some RobustBench constructors
    (the ImageNet ones) start from torchvision's pretrained weights, fetched from the internet;
    here no state dict is fetched and none is loaded, so the initial random weights stay.  They
    are drawn from a fixed seed, so that two runs score the same model."""
    from unittest import mock

    import torch
    import torchvision.models._api as weights_api

    nothing = lambda *args, **kwargs: {}  # noqa: E731
    with mock.patch.object(torch.hub, "load_state_dict_from_url", nothing), \
            mock.patch.object(weights_api, "load_state_dict_from_url", nothing), \
            mock.patch.object(torch.nn.Module, "load_state_dict", lambda *a, **k: None), \
            torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return build()


def load(model_id: str, dataset: str, model_dir, device="cpu", weights: str = "download"
         ) -> nn.Module:
    """A RobustBench L-inf model in eval mode on `device` (see the module docstring)."""
    if weights not in WEIGHTS:
        raise ValueError(f"robustbench weights must be one of {WEIGHTS}, got {weights!r}")
    zoo = architectures(dataset)
    if model_id not in zoo:
        raise ValueError(f"{model_id!r} is not a RobustBench {dataset} L-inf model id "
                         f"(robustbench 1.1.1 knows {len(zoo)}, e.g. {sorted(zoo)[:5]})")
    if weights == "random":
        log.warning("%s: RobustBench architecture with RANDOM weights (rehearsal, no download)",
                    model_id)
        model = _untrained(zoo[model_id]["model"])
    else:
        from robustbench.utils import load_model

        model = load_model(model_name=model_id, model_dir=str(model_dir), dataset=dataset,
                           threat_model="Linf")
    return model.to(device).eval()
