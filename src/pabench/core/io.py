"""Files in and out: atomic writes, checksums, and safe loading of score arrays."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import tempfile
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path

import numpy as np


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


def load_npz(path, keys=(), only: bool = False) -> dict:
    """The arrays of an .npz file (no pickles): all of them, or with `only` just `keys` (the
    others are never read); `keys` must be present.  A missing, truncated or corrupted file
    raises an error naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise ValueError(f"{path}: missing arrays {missing} (has {sorted(z.files)})")
            arrays = {k: z[k] for k in (keys if only else z.files)}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, zlib.error) as err:
        if str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: not a readable .npz file ({type(err).__name__}: {err})") from None
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


def load_array(path, key: str | None = None) -> np.ndarray:
    """A numeric array from .npy, .npz (the only array, or `key`) or .pt (a tensor, loaded with
    weights_only=True so that no pickled code can run)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npy":
            return np.load(path, allow_pickle=False)
        if suffix == ".npz":
            arrays = load_npz(path)
            if key is None:
                if len(arrays) != 1:
                    raise ValueError(f"{path}: holds arrays {list(arrays)}; name one with a key")
                key = next(iter(arrays))
            if key not in arrays:
                raise ValueError(f"{path}: no array {key!r} (has {list(arrays)})")
            return arrays[key]
        if suffix == ".pt":
            import torch  # here, not at the top: most jobs that write files never need PyTorch

            obj = torch.load(path, map_location="cpu", weights_only=True)
            if isinstance(obj, dict) and key is not None:
                obj = obj[key]
            if not isinstance(obj, torch.Tensor):
                raise ValueError(f"{path}: expected a tensor, found {type(obj).__name__}")
            return obj.detach().cpu().numpy()
    except (OSError, EOFError, RuntimeError, ValueError, KeyError, pickle.UnpicklingError) as err:
        if isinstance(err, ValueError) and str(err).startswith(str(path)):
            raise
        raise ValueError(f"{path}: cannot be read as a {suffix} array ({err})") from None
    raise ValueError(f"{path}: unsupported file type {suffix!r} (use .npy, .npz or .pt)")
