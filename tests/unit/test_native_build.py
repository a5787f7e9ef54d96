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


# ---- every exported kernel has declared argument and result types matching its C prototype

_C_TYPES = {"long": ctypes.c_long, "int": ctypes.c_int, "float": ctypes.c_float,
            "double": ctypes.c_double, "uint64_t": ctypes.c_uint64}
_RESULT = {"void": None, "int": ctypes.c_int}


def _prototypes(source):
    """{name: (result type, [ctypes of the arguments])} of the non-static functions of a C file."""
    import re

    text = re.sub(r"/\*.*?\*/", "", source.read_text(), flags=re.S)
    found = {}
    for result, name, args in re.findall(r"^(void|int)\s+(\w+)\(([^)]*)\)\s*\{", text, flags=re.M):
        types = []
        for arg in args.split(","):
            words = arg.replace("*", " * ").split()
            words = [w for w in words if w not in ("const", "restrict")]
            types.append(ctypes.c_void_p if "*" in words else _C_TYPES[words[0]])
        found[name] = (_RESULT[result], types)
    return found


def _libraries():
    from pabench.datasets.corruptions import native as corruptions
    from pabench.metrics import native as pa_native
    from pabench.metrics.avgcase import mvn

    return [(pa_native.SOURCE, pa_native.load), (mvn.SOURCE, mvn._native),
            (corruptions.SOURCE, corruptions.load)]


@pytest.mark.parametrize("source, load", _libraries(), ids=lambda v: getattr(v, "name", ""))
def test_every_binding_declares_the_c_prototype_types(source, load):
    lib = load()
    if lib is None:
        pytest.skip("no C compiler here")
    prototypes = _prototypes(source)
    assert prototypes
    for name, (result, args) in prototypes.items():
        fn = getattr(lib, name)
        assert fn.argtypes == args, name
        assert fn.restype is result, name
        with pytest.raises(ctypes.ArgumentError):      # ctypes refuses a wrong type: no call made
            fn(*(["not a number"] * len(args)))
