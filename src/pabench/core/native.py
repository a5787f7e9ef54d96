"""Build-and-load for the project's small C kernels: a source file is compiled with the system C
compiler on first use, cached under ~/.cache/pabench/native (or $PABENCH_CACHE/native) and
loaded with ctypes.

Without a compiler (or with PABENCH_NATIVE=0) `compile_library` returns None and callers use their
numpy / PyTorch path.  Builds use -march=native, so the cache key includes this CPU's model and
flags as well as the source text, the shared headers' text, the flags and the compiler.
Sources include the shared headers of this directory (giles_erfinv.h) by name.
docs/architecture.md ("Native kernels") describes the kernels, their build and the fallback.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import tempfile
from functools import lru_cache
from pathlib import Path

log = logging.getLogger("pabench.native")

INCLUDE = Path(__file__).parent     # the shared headers (*.h) every kernel may include


def _cpu_identity() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor()
    keep = [ln for ln in lines if ln.startswith(("model name", "flags"))][:2]
    return "\n".join(keep)


def cache_dir() -> Path:
    root = os.environ.get("PABENCH_CACHE") or Path.home() / ".cache" / "pabench"
    return Path(root) / "native"


def _build(compiler: str, source: Path, flags: tuple[str, ...], target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    try:
        subprocess.run([compiler, *flags, f"-I{INCLUDE}", str(source), "-o", tmp, "-lm"],
                       check=True, capture_output=True, text=True, timeout=300)
        os.replace(tmp, target)  # atomic: concurrent jobs never load a half-written library
    finally:
        Path(tmp).unlink(missing_ok=True)


@lru_cache(maxsize=None)
def compile_library(source: Path, flags: tuple[str, ...]) -> ctypes.CDLL | None:
    """The shared library built from `source` with `flags` (-shared -fPIC included by the
    caller), or None when it cannot be built here.  One build per process and source."""
    if os.environ.get("PABENCH_NATIVE", "1") == "0":
        return None
    source = Path(source)
    compiler = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not compiler:
        log.info("no C compiler found: %s is not used (numpy / PyTorch path instead)", source.name)
        return None
    headers = [h.read_text() for h in sorted(INCLUDE.glob("*.h"))]
    key = hashlib.sha256("\n".join([source.read_text(), *headers, " ".join(flags), compiler,
                                    platform.machine(), _cpu_identity()]).encode()).hexdigest()[:16]
    target = cache_dir() / f"{source.stem}-{key}.so"
    try:
        if not target.exists():
            _build(compiler, source, flags, target)
        return ctypes.CDLL(str(target))
    except (OSError, subprocess.SubprocessError) as err:
        detail = getattr(err, "stderr", "") or err
        log.warning("could not build %s (%s); using the numpy / PyTorch path", source.name, detail)
        return None
