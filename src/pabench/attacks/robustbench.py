"""RobustBench models (paper scale; L-inf, and CIFAR-10's L2 for OODRobustBench's L2 setup),
through the optional `robustbench` package.

`weights="download"` fetches the published weights into `model_dir` (internet needed once) and
loads them with torch.load (weights_only=True in the PyTorch versions we support).  The files
come through pabench.core.download, not robustbench's own downloader (gdown, which neither
resumes nor checks): from Google Drive by the ids of RobustBench's model zoo, into the paths its
`load_model` reads, where it finds them.  RobustBench publishes no checksums, so a file is kept
only once torch.load reads it (not a cut file or an HTML page) and its SHA-256 is logged.  The
torchvision weights some ImageNet constructors start from come through pabench.core.download
too, checked against the SHA-256 prefix in their names.
`weights="random"` builds the same architecture with its initial random weights and downloads
nothing: the paper-scale rehearsal runs every RobustBench code path that way, offline.
"""
from __future__ import annotations

import importlib
import logging
import re
import sys
import urllib.parse
from pathlib import Path

import torch.nn as nn

from pabench.core.download import download_file

log = logging.getLogger("pabench.robustbench")
WEIGHTS = ("download", "random")
INSTALL = "pip install 'pabench[robustbench]'"
# Google Drive's direct download of a file by id (what gdown reaches after Drive's confirmation
# page for large files).
GDRIVE_URL = "https://drive.usercontent.google.com/download?id={id}&export=download&confirm=t"
_HASH_IN_NAME = re.compile(r"-([a-f0-9]{8,})\.")   # torchvision's files: name-<sha256 prefix>.pth


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


THREAT_MODELS = ("Linf", "L2")


def architectures(dataset: str, threat_model: str = "Linf") -> dict:
    """RobustBench's entries for `dataset` ("cifar10" | "imagenet") and `threat_model` ("Linf" |
    "L2"): id -> entry whose "model" builds the architecture."""
    _package()
    from robustbench.model_zoo import model_dicts
    from robustbench.model_zoo.enums import BenchmarkDataset, ThreatModel

    if threat_model not in THREAT_MODELS:
        raise ValueError(f"RobustBench threat model must be one of {THREAT_MODELS}, got "
                         f"{threat_model!r}")
    zoo = model_dicts[BenchmarkDataset(dataset)]
    if ThreatModel(threat_model) not in zoo:
        raise ValueError(f"RobustBench has no {dataset} {threat_model} models")
    return zoo[ThreatModel(threat_model)]


def _known(model_id: str, dataset: str, threat_model: str) -> dict:
    zoo = architectures(dataset, threat_model)
    if model_id not in zoo:
        raise ValueError(f"{model_id!r} is not a RobustBench {dataset} {threat_model} model id "
                         f"(robustbench 1.1.1 knows {len(zoo)}, e.g. {sorted(zoo)[:5]})")
    return zoo


def architecture(model_id: str, dataset: str, threat_model: str = "Linf") -> nn.Module:
    """The architecture of a RobustBench model, with its initial weights."""
    return _known(model_id, dataset, threat_model)[model_id]["model"]()


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


def _readable(path: Path) -> None:
    """The check of a RobustBench file (no checksum is published): torch.load reads it."""
    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file gets the same message
        raise ValueError(f"{path}: not a readable PyTorch checkpoint ({type(err).__name__}: "
                         f"{str(err).splitlines()[0] if str(err) else ''})") from None


def weight_files(model_id: str, dataset: str, model_dir, threat_model: str = "Linf"
                 ) -> list[tuple[str, Path]]:
    """(Google Drive id, path) of each file robustbench's `load_model` reads for `model_id`:
    <model_dir>/<dataset>/<threat_model>/<id>.pt, or <id>.pt_m<i>.pt for each member of an
    ensemble.  Nothing for models it takes from timm or builds without a file (ImageNet's
    Standard_R50)."""
    import timm

    ids = architectures(dataset, threat_model)[model_id].get("gdrive_id")
    if not ids or timm.is_model(_timm_name(model_id, dataset, threat_model)):
        return []
    path = Path(model_dir) / dataset / threat_model / f"{model_id}.pt"
    if isinstance(ids, list):
        return [(g, Path(f"{path}_m{i}.pt")) for i, g in enumerate(ids)]
    return [(ids, path)]


def _timm_name(model_id: str, dataset: str, threat_model: str) -> str:
    """The timm model `load_model` builds for `model_id` where timm knows it (robustbench's rule)."""
    return f"{model_id.lower().replace('-', '_')}_{dataset}_{threat_model.lower()}"


def _random_build(model_id: str, dataset: str, threat_model: str, zoo: dict):
    """What builds the architecture as `load_model` does: the timm model where timm knows the
    id's timm name (robustbench 1.1.1's own zoo entries of the ImageNet XCiTs name a timm model
    that its xcit module registers under another name), else the zoo entry's constructor."""
    import timm

    name = _timm_name(model_id, dataset, threat_model)
    if timm.is_model(name):
        return lambda: timm.create_model(name, pretrained=False)
    return zoo[model_id]["model"]


def download_weights(model_id: str, dataset: str, model_dir, threat_model: str = "Linf"
                     ) -> list[Path]:
    """The files of `weight_files`, downloaded (see the module docstring)."""
    return [download_file(GDRIVE_URL.format(id=urllib.parse.quote(g)), path, None, _readable)
            for g, path in weight_files(model_id, dataset, model_dir, threat_model)]


def _hub_state_dict(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                    file_name=None, weights_only=True):
    """torch.hub.load_state_dict_from_url through pabench.core.download: the file goes where
    torch.hub puts it, checked against the SHA-256 prefix in its name, and is read with
    weights_only."""
    import torch

    name = file_name or Path(urllib.parse.urlparse(url).path).name
    prefix = _HASH_IN_NAME.search(name)
    if prefix is None:
        raise ValueError(f"{url}: no SHA-256 prefix in the file name to check the download by")
    folder = Path(model_dir or Path(torch.hub.get_dir()) / "checkpoints")
    path = download_file(url, folder / name, f"sha256:{prefix.group(1)}")
    return torch.load(path, map_location=map_location, weights_only=True)


def load(model_id: str, dataset: str, model_dir, device="cpu", weights: str = "download",
         threat_model: str = "Linf") -> nn.Module:
    """A RobustBench model (`threat_model`: its leaderboard, "Linf" or "L2") in eval mode on
    `device` (see the module docstring)."""
    if weights not in WEIGHTS:
        raise ValueError(f"robustbench weights must be one of {WEIGHTS}, got {weights!r}")
    zoo = _known(model_id, dataset, threat_model)
    if weights == "random":
        log.warning("%s: RobustBench architecture with RANDOM weights (rehearsal, no download)",
                    model_id)
        model = _untrained(_random_build(model_id, dataset, threat_model, zoo))
    else:
        from unittest import mock

        import torch
        import torchvision.models._api as weights_api
        from robustbench.utils import load_model

        download_weights(model_id, dataset, model_dir, threat_model)
        with mock.patch.object(torch.hub, "load_state_dict_from_url", _hub_state_dict), \
                mock.patch.object(weights_api, "load_state_dict_from_url", _hub_state_dict):
            model = load_model(model_name=model_id, model_dir=str(model_dir), dataset=dataset,
                               threat_model=threat_model)
    return model.to(device).eval()
