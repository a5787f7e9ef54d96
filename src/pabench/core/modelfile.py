"""A user's model from a file, for the commands that evaluate one (`pabench oodrb`, `pabench
avgcase`): a torch.export archive (.pt2), TorchScript, a state_dict with its architecture named
(`arch`: "package.module:Class" or an architecture of pabench.attacks.models), or a pabench zoo
checkpoint.  The file's kind is read from its zip listing, so that no loader is tried on the
wrong kind.  Only `allow_pickle` loads a pickled nn.Module, which runs the file's code: trusted
files only.  Every failure is a ValueError (FileNotFoundError: no file) naming the file."""
from __future__ import annotations

import importlib
import pickle
import re
import warnings
import zipfile
from pathlib import Path

FORMS = ("a torch.export archive (.pt2), TorchScript, or a state_dict with --arch "
         "module:Class or a pabench architecture")


def file_kind(path) -> str:
    """"export" (torch.export.save), "torchscript" (torch.jit.save), "torch" (torch.save: a
    state_dict, a checkpoint, a pickled module) or "other" (not a zip: a plain or legacy pickle)."""
    if not zipfile.is_zipfile(path):
        return "other"
    with zipfile.ZipFile(path) as z:
        inner = {name.split("/", 1)[-1] for name in z.namelist()}
    if "archive_format" in inner:
        return "export"
    if "constants.pkl" in inner and any(name.startswith("code/") for name in inner):
        return "torchscript"
    return "torch" if "data.pkl" in inner else "other"


def _wrapped(inner, kind: str):
    """A loaded TorchScript or exported model in a plain nn.Module, on which the attacks can call
    requires_grad_() (a ScriptModule refuses it) and eval() (an exported program's module refuses
    it: there train() and eval() only set the flag, and the program runs as it was exported)."""
    from torch import nn

    class LoadedModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def train(self, mode: bool = True):
            if kind == "export":
                self.training = mode
                return self
            return super().train(mode)

        def forward(self, x):
            return self.inner(x)

        def extra_repr(self):
            return kind

    return LoadedModel()


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def reason(err: BaseException) -> str:
    """The line of a model's error that says what went wrong (TorchScript puts it last)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    return lines[-1] if "TorchScript" in lines[0] else lines[0]


def _torch_load(path: Path, allow_pickle: bool):
    import torch

    from pabench.core.io import PICKLE_MAGIC, ZIP_MAGIC, file_head

    if not file_head(path).startswith((ZIP_MAGIC, PICKLE_MAGIC)):
        raise ValueError(f"{path}: not a model file (neither a zip archive nor a pickle); "
                         f"save {FORMS}")
    try:
        with warnings.catch_warnings():  # (a note on the pickle protocol of plain pickles)
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=not allow_pickle)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        what = (f"it pickles {found.group(1)}, whose loading would run code" if found
                else "one that torch.load(weights_only=True) refuses")
        raise ValueError(f"{path}: a pickle that is not a model file ({what}); save {FORMS}") from None
    except Exception as err:  # noqa: BLE001 - a damaged file raises many kinds
        raise ValueError(f"{path}: not a model file ({type(err).__name__}: {_first_line(err)}); "
                         f"save {FORMS}") from None


def _state_dict(obj, path: Path) -> dict:
    """The weights of a state_dict file, or of a checkpoint that holds one under 'state_dict'."""
    import torch

    if isinstance(obj, dict) and isinstance(obj.get("state_dict"), dict):
        obj = obj["state_dict"]
    if (not isinstance(obj, dict) or not obj
            or not all(isinstance(v, torch.Tensor) for v in obj.values())):
        raise ValueError(f"{path}: not a state_dict (holds a {type(obj).__name__}, not a mapping "
                         "of parameter names to tensors)")
    return obj


def build_arch(arch: str, kwargs: dict | None = None, num_classes: int | None = None,
               image_size: int | None = None):
    """An untrained network: "package.module:Class" called with `kwargs`, or an architecture of
    pabench.attacks.models (num_classes and image_size from the data)."""
    if ":" in arch:
        module_name, _, class_name = arch.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ValueError(f"--arch {arch}: cannot import {module_name!r} ({err})") from None
        cls = getattr(module, class_name, None)
        if cls is None:
            raise ValueError(f"--arch {arch}: module {module_name!r} has no {class_name!r}")
        try:
            return cls(**(kwargs or {}))
        except TypeError as err:
            raise ValueError(f"--arch {arch}: cannot build it with arguments {kwargs or {}} "
                             f"({err})") from None
    from pabench.attacks.models import build

    extra = {k: v for k, v in (("num_classes", num_classes), ("image_size", image_size)) if v}
    return build(arch, **{**extra, **(kwargs or {})})


def load_model(path, arch: str | None = None, arch_kwargs: dict | None = None, device="cpu",
               allow_pickle: bool = False, num_classes: int | None = None,
               image_size: int | None = None):
    """The model in a file, in eval mode on `device` (see the module docstring).  With `arch`,
    the file holds its weights (torch.load with weights_only=True)."""
    import torch

    from pabench.core.io import check_file

    path = check_file(path, "model file")
    kind = file_kind(path)
    if arch is not None:
        if kind in ("export", "torchscript"):
            raise ValueError(f"{path}: a whole {kind} model, not a state_dict: leave out --arch")
        weights = _state_dict(_torch_load(path, False), path)
        model = build_arch(arch, arch_kwargs, num_classes, image_size)
        try:
            model.load_state_dict(weights)
        except RuntimeError as err:  # (its first line only names the class)
            detail = str(err).strip().splitlines()[1:2] or [str(err)]
            raise ValueError(f"{path}: weights do not match --arch {arch} "
                             f"({detail[0].strip()})") from None
    elif kind == "export":
        try:
            program = torch.export.load(path)
        except Exception as err:  # noqa: BLE001 - the deserialiser raises many kinds
            raise ValueError(f"{path}: not a readable torch.export archive "
                             f"({type(err).__name__}: {_first_line(err)})") from None
        model = _wrapped(program.module(), "export")
    elif kind == "torchscript":
        with warnings.catch_warnings():  # torch.jit.load's deprecation notice
            warnings.simplefilter("ignore", FutureWarning)
            try:
                model = _wrapped(torch.jit.load(str(path), map_location="cpu"), "torchscript")
            except RuntimeError as err:
                raise ValueError(f"{path}: not a readable TorchScript file "
                                 f"({_first_line(err)})") from None
    else:
        obj = _torch_load(path, allow_pickle)
        if isinstance(obj, dict) and "arch" in obj and isinstance(obj.get("state_dict"), dict):
            from pabench.attacks.models import load_zoo_model

            return load_zoo_model(path, device=device)[0]
        if isinstance(obj, torch.nn.Module):
            model = obj
        elif isinstance(obj, dict) and obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            raise ValueError(f"{path}: holds weights only (a state_dict): name the architecture "
                             "with --arch module:Class or a pabench architecture")
        else:
            raise ValueError(f"{path}: holds a {type(obj).__name__}, not a model; save {FORMS}")
    return model.to(device).eval()
