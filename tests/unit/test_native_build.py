"""pabench.core.native: build a C source once into the cache, load it, and step aside when
native code is switched off."""
import ctypes
import shutil

import pytest

from pabench.core import native


def test_a_source_is_built_once_into_the_cache_and_loaded(tmp_path, monkeypatch):
    if not (shutil.which("gcc") or shutil.which("cc")):
        pytest.skip("no C compiler here")
    monkeypatch.setenv("PABENCH_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "twice.c"
    source.write_text("long twice(long x) { return 2 * x; }\n")
    flags = ("-O2", "-fPIC", "-shared")
    lib = native.compile_library(source, flags)
    lib.twice.argtypes, lib.twice.restype = [ctypes.c_long], ctypes.c_long
    assert lib.twice(21) == 42
    built = list((tmp_path / "cache" / "native").glob("twice-*.so"))
    assert len(built) == 1
    native.compile_library.cache_clear()                       # a new process: reuses the file
    mtime = built[0].stat().st_mtime_ns
    assert native.compile_library(source, flags) is not None
    assert built[0].stat().st_mtime_ns == mtime
    source.write_text("long twice(long x) { return x + x; }\n")  # new source: a new build
    native.compile_library.cache_clear()
    assert native.compile_library(source, flags) is not None
    assert len(list((tmp_path / "cache" / "native").glob("twice-*.so"))) == 2


def test_native_code_can_be_switched_off(tmp_path, monkeypatch):
    monkeypatch.setenv("PABENCH_NATIVE", "0")
    source = tmp_path / "off.c"
    source.write_text("int f(void) { return 1; }\n")
    assert native.compile_library(source, ("-fPIC", "-shared")) is None


def test_a_source_that_does_not_compile_gives_none(tmp_path, monkeypatch):
    if not (shutil.which("gcc") or shutil.which("cc")):
        pytest.skip("no C compiler here")
    monkeypatch.setenv("PABENCH_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "broken.c"
    source.write_text("this is not C\n")
    assert native.compile_library(source, ("-fPIC", "-shared")) is None
