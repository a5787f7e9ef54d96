"""Files in and out: atomic writes, checksums, and safe loading of score arrays."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import tempfile
import warnings
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np

NPY_MAGIC, ZIP_MAGIC, PICKLE_MAGIC = b"\x93NUMPY", b"PK\x03\x04", b"\x80"


def file_digest(path, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes ("md5", "sha256", ...), read in 1 MiB blocks."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path`; it replaces `path` only if the block succeeds,
    so a killed job never leaves a file that looks complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.*.tmp{path.suffix}"):  # left by a killed job
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=True, allow_nan=True) + "\n")


def write_csv(path, frame) -> None:
    """Write a DataFrame as CSV with a fixed float format (repeatable bytes)."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, float_format="%.10g")


def check_file(path, what: str = "file") -> Path:
    """`path` as a Path if it is a regular, non-empty file; else an error saying what it is."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: a directory, not a {what}")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path}: an empty file (0 bytes)")
    return path


def file_head(path, n: int = 8) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(n)


def load_npz(path, keys=(), only: bool = False) -> dict:
    """The arrays of an .npz file (no pickles): all of them, or with `only` just `keys` (the
    others are never read); `keys` must be present.  A missing, truncated or corrupted file,
    or a zip member that is not an array, raises an error naming it."""
    path = check_file(path)
    head = file_head(path)
    if not head.startswith(ZIP_MAGIC):
        kind = " (it is a .npy file)" if head.startswith(NPY_MAGIC) else " (not a zip archive)"
        raise ValueError(f"{path}: not a .npz file{kind}")
    try:
        # our own handle: np.load leaves its own open when the zip directory is damaged
        with open(path, "rb") as fh, np.load(fh, allow_pickle=False) as z:
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise ValueError(f"{path}: missing arrays {missing} (has {sorted(z.files)})")
            arrays = {k: z[k] for k in (keys if only else z.files)}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable .npz file ({type(err).__name__}: {err})") from None
    for k, v in arrays.items():
        if not isinstance(v, np.ndarray):       # np.load hands other members over as bytes
            raise ValueError(f"{path}: member {k!r} is not a .npy array")
    return arrays


def read_table(path, rows_optional: bool = False, **kwargs):
    """A CSV result table; a missing, empty or malformed file raises an error naming it.
    An `eps` column holds eps tags ("0.1", "8-255", "min"): names, always read as strings.
    rows_optional: a header without rows is a valid (empty) table."""
    import pandas as pd

    kwargs["dtype"] = {"eps": str, **(kwargs.get("dtype") or {})}

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, "rb") as fh:  # every table the workflow writes ends with a newline
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(size - 1, 0))
        if size and fh.read(1) != b"\n":
            raise ValueError(f"{path}: truncated (the last line is incomplete)")
    try:
        frame = pd.read_csv(path, **kwargs)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path}: not a readable CSV table ({type(err).__name__}: {err})") from None
    if frame.empty and not (rows_optional and len(frame.columns)):
        raise ValueError(f"{path}: an empty table")
    return frame


def torch_load(path, what: str = ".pt file"):
    """torch.load(weights_only=True) of a file, so that no pickled code can run; a file that is
    neither torch.save's zip archive nor a pickle, a pickle of anything but tensors and plain
    containers, or a damaged file raises one line naming it."""
    import torch  # here, not at the top: most jobs that write files never need PyTorch

    path = check_file(path, what)
    if not file_head(path).startswith((ZIP_MAGIC, PICKLE_MAGIC)):
        raise ValueError(f"{path}: not a {what} (neither torch.save's zip archive nor a pickle)")
    try:
        with warnings.catch_warnings():  # (a note on the pickle protocol of plain pickles)
            warnings.simplefilter("ignore", UserWarning)
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        found = re.search(r"GLOBAL ([\w.]+)", str(err))
        if found:
            raise ValueError(f"{path}: pickles {found.group(1)}, whose loading would run code; "
                             "not loaded") from None
        raise ValueError(f"{path}: not a {what} (a pickle that torch.load(weights_only=True) "
                         "cannot read)") from None
    except Exception as err:  # noqa: BLE001 - a damaged archive raises many kinds
        first = (str(err).strip().splitlines() or [""])[0]
        raise ValueError(f"{path}: not a {what} ({type(err).__name__}: {first})") from None


def check_real(array, name: str) -> np.ndarray:
    """`array` if it holds real numbers (integers or floats): not bool, complex, strings,
    records or objects."""
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "iuf":
        what = array.dtype if isinstance(array, np.ndarray) else type(array).__name__
        raise ValueError(f"{name}: holds {what} values, not real numbers (integers or floats)")
    return array


def _load_npy(path: Path) -> np.ndarray:
    head = file_head(path)
    if not head.startswith(NPY_MAGIC):
        kind = " (it is a zip archive: an .npz file?)" if head.startswith(ZIP_MAGIC) else ""
        raise ValueError(f"{path}: not a .npy file{kind}")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as err:
        if "allow_pickle" in str(err):
            raise ValueError(f"{path}: holds pickled objects (dtype object), not numbers; not "
                             "loaded, as loading them could run code") from None
        raise ValueError(f"{path}: a damaged .npy file ({err})") from None
    except (OSError, EOFError) as err:
        raise ValueError(f"{path}: a damaged .npy file ({type(err).__name__}: {err})") from None


def _load_pt(path: Path, key: str | None) -> np.ndarray:
    import torch

    obj = torch_load(path)
    if isinstance(obj, dict):
        tensors = [k for k, v in obj.items() if isinstance(v, torch.Tensor)]
        if key is None:
            raise ValueError(f"{path}: holds a dict, not a tensor; name one of its tensors with "
                             f"--key (has {tensors})")
        if key not in obj:
            raise ValueError(f"{path}: no tensor {key!r} (has {tensors})")
        obj = obj[key]
    if not isinstance(obj, torch.Tensor):
        raise ValueError(f"{path}: holds a {type(obj).__name__}, not a tensor")
    obj = obj.detach().cpu()
    if obj.layout != torch.strided:
        obj = obj.to_dense()
    if obj.dtype == torch.bfloat16:  # numpy has none; float32 holds every bfloat16 exactly
        obj = obj.float()
    return obj.numpy()


def load_array(path, key: str | None = None) -> np.ndarray:
    """A real-valued array (integers or floats) from .npy, .npz (the only array, or `key`) or
    .pt (a tensor, or `key` of a dict of tensors; loaded with weights_only=True so that no
    pickled code can run).  Every failure names the file and the problem."""
    path = check_file(path)
    suffix = path.suffix.lower()
    if suffix == ".npy":
        array = _load_npy(path)
    elif suffix == ".npz":
        arrays = load_npz(path)
        if key is None and len(arrays) != 1:
            raise ValueError(f"{path}: holds arrays {list(arrays)}; name one with --key")
        key = next(iter(arrays)) if key is None else key
        if key not in arrays:
            raise ValueError(f"{path}: no array {key!r} (has {list(arrays)})")
        array = arrays[key]
    elif suffix == ".pt":
        array = _load_pt(path, key)
    else:
        raise ValueError(f"{path}: unsupported file type {suffix!r} (use .npy, .npz or .pt)")
    return check_real(array, str(path))
