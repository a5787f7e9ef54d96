"""Bad input to every `pabench` command that reads user files (pa, avgcase, corrupt, oodrb, and
the files and folders of check-config, wandb-runs, wandb-dashboard): hundreds of generated cases
across CATEGORIES, each run through the real entry point (`pabench.cli.main`; a few through a
subprocess).  Every case must exit non-zero with ONE line
on stderr that names the problem (the words each case lists), no traceback, no warning, nothing
on stdout and nothing written: the case's folder holds afterwards exactly what it held before.
docs/reliability.md records the counts (`test_the_documented_counts_are_the_cases`)."""
import contextlib
import io
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import traceback
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import REPO
from torch import nn

from pabench import cli

CATEGORIES = ("wrong shape", "wrong dtype", "NaN and inf", "empty", "class count",
              "not what it claims", "value range", "bad option")
SIGMA = ["--sigma", "0.5", "--estimators", "taylor,mc", "--n-mc", "20"]
LINEAR = ["--arch", "torch.nn:Linear", "--arch-kwargs"]
TINY_OODRB = """oodrb:
  n_test: 6
  n_shift: 3
  n_natural: 3
  corruptions: [contrast]
  severities: [3]
  natural: [sklearn_digits]
  threats: []
  lpips: {weights: none}
  mm5: {n_targets: 2, steps: 1}
  pa_epochs: 1
"""


@dataclass(frozen=True)
class Case:
    command: str
    category: str
    name: str
    argv: object          # (good, case_dir) -> the argument list; it writes the bad files
    words: tuple          # each must appear in the message


class RunsCode:
    """Unpickling this would create a file: proof that a load ran the file's code."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


class TupleOut(nn.Module):
    def forward(self, x):
        return x, x


class ThreeD(nn.Module):
    def forward(self, x):
        return x[:, :3, None]


class NaNOut(nn.Module):
    def forward(self, x):
        return x[:, :3] * float("nan")


class NoOut(nn.Module):
    def forward(self, x):
        return x[:, :0]


class Fails(nn.Module):
    def forward(self, x):
        if x.shape[0] > 0:
            raise ValueError("this model refuses every batch")
        return x


# ------------------------------------------------------------------ writing files
def script(module, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # torch.jit.script's deprecation notice
        torch.jit.script(module).save(str(path))


def save(path, array):
    """An array in the file format its suffix names (.npy, .npz under key 'x', .pt a tensor)."""
    path = Path(path)
    if path.suffix == ".npy":
        np.save(path, array, allow_pickle=True)
    elif path.suffix == ".npz":
        np.savez(path, x=array)
    else:
        torch.save(torch.as_tensor(array), path)
    return path


def truncated(src, dst):
    data = Path(src).read_bytes()
    Path(dst).write_bytes(data[: len(data) // 2])
    return dst


def zip_of_text(path):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "not an array")
    return path


# Damaged files of each format: (category, name, write(path, a readable array), words); the
# words may name {path}.
def _damages(suffix):
    text = "column a,column b\n1,2\n"

    def renamed(path, write):        # a file of another format under this name
        tmp = path.with_name("other" + (".npz" if suffix == ".npy" else ".npy"))
        write(tmp)
        tmp.rename(path)

    out = [
        ("empty", "zero-byte file", lambda p, a: p.write_bytes(b""), ("{path}", "empty file")),
        ("not what it claims", "text file", lambda p, a: p.write_text(text),
         ("{path}", f"not a {suffix} file")),
        ("not what it claims", "truncated", lambda p, a: truncated(save(p, a), p), ("{path}",)),
        ("not what it claims", "directory", lambda p, a: p.mkdir(), ("{path}", "a directory")),
        ("not what it claims", "missing", lambda p, a: None, ("{path}", "no such file")),
    ]
    if suffix == ".npy":
        out += [
            ("wrong dtype", "object array", lambda p, a: np.save(p, np.array([{"a": 1}, None]),
                                                                 allow_pickle=True),
             ("{path}", "pickled objects")),
            ("not what it claims", "an .npz named .npy",
             lambda p, a: renamed(p, lambda t: np.savez(t, x=a)), ("{path}", "not a .npy file")),
        ]
    if suffix == ".npz":
        out += [
            ("not what it claims", "zip of text", lambda p, a: zip_of_text(p),
             ("{path}", "readme.txt", "not a .npy array")),
            ("not what it claims", "an .npy named .npz",
             lambda p, a: renamed(p, lambda t: np.save(t, a)), ("{path}", "not a .npz file")),
            ("not what it claims", "two arrays, no key", lambda p, a: np.savez(p, x=a, y=a),
             ("{path}", "holds arrays", "--key")),
        ]
    if suffix == ".pt":
        out += [
            ("not what it claims", "a dict", lambda p, a: torch.save({"w": torch.as_tensor(a)}, p),
             ("{path}", "a dict", "--key")),
            ("not what it claims", "pickled code", lambda p, a: torch.save(RunsCode(p.parent / "RAN"), p),
             ("{path}", "would run code")),
            ("not what it claims", "a plain pickle", lambda p, a: p.write_bytes(
                pickle.dumps({"weights": [1, 2]})), ("{path}", "not a .pt file")),
        ]
    return out


def _file_cases(command, slot, argv, array):
    """Every damaged file format in the slot `slot` of a command: argv(good, dir, path)."""
    cases = []
    for suffix in (".npy", ".npz", ".pt"):
        for category, name, write, words in _damages(suffix):
            def make(good, d, suffix=suffix, write=write):
                path = d / f"bad{suffix}"
                write(path, array)
                return argv(good, d, str(path))
            cases.append(Case(command, category, f"{slot}: {suffix} {name}", make,
                              tuple(w.replace("{path}", "bad" + suffix) for w in words)))

    def csv(good, d):
        (d / "bad.csv").write_text("1,2\n")
        return argv(good, d, str(d / "bad.csv"))
    cases.append(Case(command, "not what it claims", f"{slot}: a .csv", csv,
                      ("bad.csv", "unsupported file type")))
    return cases


def _array_cases(command, slot, argv, arrays):
    """Bad contents in every format: arrays = [(category, name, array, words)]."""
    cases = []
    for category, name, array, words in arrays:
        for suffix in (".npy", ".npz", ".pt"):
            if suffix == ".pt" and np.asarray(array).dtype.kind in "USOV":
                continue                         # no tensor holds strings or records
            cases.append(Case(command, category, f"{slot}: {name} {suffix}",
                              lambda good, d, a=array, s=suffix: argv(good, d, str(save(d / f"bad{s}", a))),
                              words))
    return cases


# ------------------------------------------------------------------ the commands' cases
rng = np.random.default_rng(0)
SCORES = rng.normal(size=(8, 3))
POINTS = rng.normal(size=(6, 4)).astype(np.float32)
IMAGES = rng.integers(0, 256, (2, 16, 16, 3)).astype(np.uint8)


def with_nan(a, value=np.nan):
    a = a.astype(np.float64)
    a.flat[1] = value
    return a


def dtype_arrays(shape, extra=()):
    """Arrays of the right shape and the wrong kind of number."""
    n = int(np.prod(shape))
    return [
        ("wrong dtype", "strings", np.array(["a"] * n).reshape(shape), ("not real numbers", "<U1")),
        ("wrong dtype", "bool", np.ones(shape, bool), ("not real numbers", "bool")),
        ("wrong dtype", "complex", np.ones(shape, np.complex64), ("not real numbers", "complex64")),
        ("wrong dtype", "structured", np.zeros(shape, [("a", "f4"), ("b", "i4")]),
         ("not real numbers",)),
        *extra]


def nan_arrays(base, words=("NaN",), inf_words=("infinite",)):
    return [("NaN and inf", "NaN", with_nan(base), words),
            ("NaN and inf", "+inf", with_nan(base, np.inf), inf_words),
            ("NaN and inf", "-inf", with_nan(base, -np.inf), inf_words)]


def pa_cases():
    def argv_a(good, d, path):
        return ["pa", path, str(good / "b.npy")]

    def argv_b(good, d, path):
        return ["pa", str(good / "a.npy"), path]

    def argv_ab(good, d, path):
        return ["pa", path, path]

    shape = "shape (N, K) or (P, N, K)"
    arrays = [
        ("wrong shape", "1-D", SCORES[:, 0], (shape, "(8,)")),
        ("wrong shape", "4-D", np.stack([SCORES[None]] * 2), (shape, "(2, 1, 8, 3)")),
        ("wrong shape", "more rows than the other", np.vstack([SCORES, SCORES[:1]]),
         ("shapes differ", "(9, 3)", "(8, 3)")),
        ("wrong shape", "more classes than the other", np.hstack([SCORES, SCORES[:, :1]]),
         ("shapes differ", "(8, 4)", "(8, 3)")),
        *dtype_arrays(SCORES.shape),
        *nan_arrays(SCORES, ("NaN", "scores must be finite")),
        ("empty", "zero rows", SCORES[:0], ("empty input", "(0, 3)")),
    ]
    both = [  # the same file on both sides, so the shapes match
        ("empty", "zero classes", SCORES[:, :0], ("empty input", "(8, 0)")),
        ("class count", "one class", SCORES[:, :1], ("K >= 2 classes", "K = 1")),
        ("wrong shape", "scalar", np.float64(3.0), (shape, "()")),
    ]
    cases = (_file_cases("pa", "A", argv_a, SCORES)
             + _file_cases("pa", "B", argv_b, SCORES)
             + _array_cases("pa", "A", argv_a, arrays) + _array_cases("pa", "B", argv_b, arrays)
             + _array_cases("pa", "A and B", argv_ab, both))

    def pair(category, name, a, b, extra, words):
        """pa on the files a and b (written by a(g, d), b(g, d)) with options."""
        return Case("pa", category, name, lambda g, d: ["pa", str(a(g, d)), str(b(g, d)), *extra],
                    words)

    good_a, good_probs = (lambda g, d: g / "a.npy"), (lambda g, d: g / "probs.npy")
    cases += [
        pair("bad option", "adam with 0 epochs", good_a, lambda g, d: g / "b.npy",
             ["--solver", "adam", "--epochs", "0"], ("epochs >= 1",)),
        pair("bad option", "a key the .npz lacks", lambda g, d: g / "a.npz", lambda g, d: g / "a.npz",
             ["--key", "nope"], ("a.npz", "no array 'nope'")),
        pair("value range", "probabilities not summing to 1",
             lambda g, d: save(d / "p.npy", np.full((8, 3), 0.5)), good_probs, ["--inputs", "probs"],
             ("do not sum to 1",)),
        pair("value range", "negative probabilities",
             lambda g, d: save(d / "p.npy", -np.ones((8, 3)) / 3), good_probs, ["--inputs", "probs"],
             ("negative probabilities",)),
        pair("value range", "positive log-probabilities", good_a, good_a,
             ["--inputs", "log_probs"], ("log-probabilities must be <= 0",)),
    ]
    return cases


def avgcase_cases():
    def argv_x(good, d, path):
        return ["avgcase", str(good / "model.pt"), path, *SIGMA, "--out", str(d / "out/p.csv")]

    batch = "a batch (N, ...)"
    arrays = [
        ("wrong shape", "1-D", POINTS[0], (batch, "(4,)")),
        ("wrong shape", "scalar", np.float32(1.0), (batch, "()")),
        ("wrong shape", "other width (mat1 and mat2)", np.hstack([POINTS, POINTS[:, :1]]),
         ("the model does not take the points", "(N, 5)")),
        ("wrong shape", "3-D", POINTS.reshape(6, 2, 2), ("the model does not take the points",
                                                        "(N, 2, 2)")),
        ("wrong shape", "4-D", POINTS.reshape(6, 1, 2, 2), ("the model does not take the points",
                                                           "(N, 1, 2, 2)")),
        *dtype_arrays(POINTS.shape),
        *nan_arrays(POINTS, ("non-finite", "nan"), ("non-finite", "inf")),
        ("empty", "zero points", POINTS[:0], ("no points",)),
        ("empty", "zero features", POINTS[:, :0], ("the model does not take the points",)),
    ]
    cases = (_file_cases("avgcase", "points", argv_x, POINTS)
             + _array_cases("avgcase", "points", argv_x, arrays))

    def model_case(category, name, make, words, extra=()):
        def argv(good, d):
            path = make(good, d)
            return ["avgcase", str(path), str(good / "x.npy"), *SIGMA, *extra,
                    "--out", str(d / "out/p.csv")]
        return Case("avgcase", category, f"model: {name}", argv, words)

    def weights(i, o, fill=None):
        def make(good, d):
            lin = nn.Linear(i, o)
            if fill is not None:
                nn.init.constant_(lin.weight, fill)
            torch.save(lin.state_dict(), d / "w.pt")
            return d / "w.pt"
        return make

    def kw(i, o):
        return [*LINEAR, json.dumps({"in_features": i, "out_features": o})]

    def scripted(module):
        def make(good, d):
            script(module, d / "m.pt")
            return d / "m.pt"
        return make

    def damaged(src, write):
        def make(good, d):
            write(good / src, d / "m.pt")
            return d / "m.pt"
        return make

    cases += [
        model_case("class count", "one output", weights(4, 1), ("1 class score", "at least 2"),
                   kw(4, 1)),
        model_case("class count", "no outputs", scripted(NoOut()), ("0 class score", "at least 2")),
        model_case("wrong shape", "takes 5 features (mat1 and mat2)", weights(5, 3),
                   ("the model does not take the points", "(N, 4)"), kw(5, 3)),
        model_case("NaN and inf", "NaN weights", weights(4, 3, np.nan), ("NaN or infinite",), kw(4, 3)),
        model_case("NaN and inf", "NaN outputs (TorchScript)", scripted(NaNOut()), ("NaN or infinite",)),
        model_case("wrong shape", "3-D outputs", scripted(ThreeD()), ("(N, C)", "(2, 3, 1)")),
        model_case("not what it claims", "returns a tuple", scripted(TupleOut()),
                   ("returns a tuple", "not a tensor")),
        model_case("not what it claims", "raises in forward", scripted(Fails()),
                   ("the model does not take the points", "refuses every batch")),
        model_case("not what it claims", "state_dict without --arch", weights(4, 3),
                   ("holds weights only", "--arch")),
        model_case("not what it claims", "state_dict of another shape than --arch", weights(4, 3),
                   ("do not match --arch torch.nn:Linear",), kw(4, 5)),
        model_case("bad option", "--arch-kwargs not JSON", weights(4, 3), ("--arch-kwargs", "JSON"),
                   [*LINEAR, "{in_features: 4"]),
        model_case("bad option", "--arch of no module", weights(4, 3), ("--arch", "cannot import"),
                   ["--arch", "no_such_module_x:Net"]),
        model_case("not what it claims", "a dict", lambda g, d: (torch.save({"epoch": 3}, d / "m.pt"),
                                                                 d / "m.pt")[1],
                   ("holds a dict, not a model",)),
        model_case("not what it claims", "pickled code", lambda g, d: (
            torch.save(RunsCode(d / "RAN"), d / "m.pt"), d / "m.pt")[1], ("would run code",)),
        model_case("not what it claims", "a pickled nn.Module (runs code when loaded)", lambda g, d: (
            torch.save(nn.Linear(4, 3), d / "m.pt"), d / "m.pt")[1], ("would run code",)),
        model_case("not what it claims", "a plain pickle", lambda g, d: (
            (d / "m.pt").write_bytes(pickle.dumps([1, 2])), d / "m.pt")[1],
            ("m.pt", "not a model file")),
        model_case("not what it claims", "text", lambda g, d: (
            (d / "m.pt").write_text("def model(x): return x\n"), d / "m.pt")[1],
            ("m.pt", "not a model file")),
        model_case("empty", "zero-byte file", lambda g, d: ((d / "m.pt").write_bytes(b""), d / "m.pt")[1],
                   ("m.pt", "empty file")),
        model_case("not what it claims", "truncated TorchScript", damaged("model.pt", truncated),
                   ("m.pt", "not a model file")),
        model_case("not what it claims", "truncated torch.export", damaged("model.pt2", truncated),
                   ("m.pt", "not a model file")),
        model_case("not what it claims", "zip of text", lambda g, d: zip_of_text(d / "m.pt"),
                   ("m.pt", "not a model file")),
        model_case("not what it claims", "an array file", lambda g, d: save(d / "m.pt", POINTS),
                   ("m.pt", "holds a Tensor, not a model")),
        model_case("not what it claims", "directory", lambda g, d: ((d / "m.pt").mkdir(), d / "m.pt")[1],
                   ("m.pt", "a directory")),
        model_case("not what it claims", "missing", lambda g, d: d / "m.pt", ("m.pt", "no such model file")),
    ]

    def opt(name, extra, words):
        return Case("avgcase", "bad option", name, lambda g, d: [
            "avgcase", str(g / "model.pt"), str(g / "x.npy"), *extra,
            "--out", str(d / "out/p.csv")], words)

    cases += [
        opt("sigma 0", ["--sigma", "0"], ("sigma must be", "> 0")),
        opt("sigma -1", ["--sigma", "0.1", "-1"], ("sigma must be", "-1")),
        opt("sigma nan", ["--sigma", "nan"], ("sigma must be", "nan")),
        opt("sigma inf", ["--sigma", "inf"], ("sigma must be", "inf")),
        opt("unknown estimator", ["--sigma", "1", "--estimators", "taylor,magic"],
            ("unknown estimator 'magic'",)),
        opt("empty estimator list", ["--sigma", "1", "--estimators", ","], ("unknown estimator ''",)),
        opt("--n-mc 0", [*SIGMA[:4], "--n-mc", "0"], ("--n-mc must be an integer >= 1",)),
        opt("--n-mmse -3", ["--sigma", "1", "--estimators", "mmse", "--n-mmse", "-3"],
            ("--n-mmse must be an integer >= 1",)),
        opt("temperature 0 (after mc)", ["--sigma", "1", "--estimators", "mc,softmax", "--n-mc", "20",
                                         "--temperature", "0"], ("temperature", "> 0")),
        opt("temperature nan", ["--sigma", "1", "--estimators", "softmax", "--temperature", "nan"],
            ("temperature", "nan")),
        opt("linear estimator on a nonlinear model", ["--sigma", "1", "--estimators", "taylor,linear"],
            ("'linear' estimator needs a linear model",)),
        Case("avgcase", "bad option", "--out is a directory", lambda g, d: [
            "avgcase", str(g / "model.pt"), str(g / "x.npy"), *SIGMA, "--out", str(g)],
            ("--out", "a directory")),
        Case("avgcase", "bad option", "--key the .npz lacks", lambda g, d: [
            "avgcase", str(g / "model.pt"), str(g / "x.npz"), *SIGMA, "--key", "nope",
            "--out", str(d / "out/p.csv")], ("x.npz", "no array 'nope'")),
    ]
    return cases


def corrupt_cases():
    def argv_images(good, d, path):
        return ["corrupt", path, str(d / "out"), "--corruptions", "contrast", "--workers", "1"]

    def argv_labels(good, d, path):
        return ["corrupt", str(good / "images.npy"), str(d / "out"), "--labels", path,
                "--corruptions", "contrast", "--workers", "1"]

    layout = "(N, H, W, 3) or (N, 3, H, W)"
    images = [
        ("wrong shape", "1-D", IMAGES.ravel()[:10], (layout, "(10,)")),
        ("wrong shape", "3-D (no channels)", IMAGES[..., 0], (layout, "(2, 16, 16)")),
        ("wrong shape", "5-D", IMAGES[None], (layout, "(1, 2, 16, 16, 3)")),
        ("wrong shape", "4 channels", np.concatenate([IMAGES, IMAGES[..., :1]], -1),
         (layout, "(2, 16, 16, 4)")),
        ("wrong shape", "1 channel", IMAGES[..., :1], (layout, "(2, 16, 16, 1)")),
        *dtype_arrays(IMAGES.shape, extra=[
            ("wrong dtype", "float in [0, 1]", IMAGES / 255.0, ("uint8", "float64")),
            ("wrong dtype", "float32 0..255", IMAGES.astype(np.float32), ("uint8", "float32"))]),
        *nan_arrays(IMAGES, ("uint8", "float64"), ("uint8", "float64")),
        ("empty", "zero images", IMAGES[:0], ("no images",)),
        ("value range", "above 255", IMAGES.astype(np.int16) + 100, ("outside the uint8 range",
                                                                   "355")),
        ("value range", "negative", IMAGES.astype(np.int64) - 256, ("outside the uint8 range", "-256")),
    ]
    labels = [
        ("wrong shape", "2-D", np.zeros((2, 1), np.int64), ("labels", "shape (2,)", "(2, 1)")),
        ("wrong shape", "fewer than the images", np.zeros(1, np.int64), ("labels", "shape (2,)", "(1,)")),
        ("wrong shape", "more than the images", np.zeros(3, np.int64), ("labels", "shape (2,)", "(3,)")),
        ("wrong shape", "scalar", np.int64(1), ("labels", "shape (2,)", "()")),
        *dtype_arrays((2,), extra=[("wrong dtype", "float", np.array([0.0, 1.5]),
                                    ("labels", "integers", "float64"))]),
        *nan_arrays(np.zeros(2), ("labels", "integers"), ("labels", "integers")),
        ("empty", "zero labels", np.zeros(0, np.int64), ("labels", "shape (2,)", "(0,)")),
        ("class count", "negative class", np.array([0, -1]), ("labels", "class indices >= 0", "-1")),
    ]
    cases = (_file_cases("corrupt", "images", argv_images, IMAGES)
             + _file_cases("corrupt", "labels", argv_labels, np.arange(2))
             + _array_cases("corrupt", "images", argv_images, images)
             + _array_cases("corrupt", "labels", argv_labels, labels))

    def sized(name, shape, corruption, words):
        def make(good, d):
            path = save(d / "im.npy", np.zeros(shape, np.uint8))
            return ["corrupt", str(path), str(d / "out"), "--corruptions", f"contrast,{corruption}",
                    "--workers", "1"]
        return Case("corrupt", "wrong shape", name, make, words)

    cases += [
        sized("jpeg_compression on 8x8", (1, 8, 8, 3), "jpeg_compression",
              ("jpeg_compression", "multiples of 16", "8x8")),
        sized("zoom_blur on 16x32", (1, 16, 32, 3), "zoom_blur", ("zoom_blur", "square", "16x32")),
        sized("glass_blur on 1x1", (1, 1, 1, 3), "glass_blur", ("glass_blur", "at least", "1x1")),
        sized("elastic_transform on 2x2", (1, 2, 2, 3), "elastic_transform",
              ("elastic_transform", "at least", "2x2")),
        sized("pixelate on 1x1", (1, 1, 1, 3), "pixelate", ("pixelate", "at least", "1x1")),
    ]

    def opt(name, extra, words, out=lambda d: d / "out"):
        return Case("corrupt", "bad option", name, lambda g, d: [
            "corrupt", str(g / "images.npy"), str(out(d)), *extra], words)

    def a_file(d):
        (d / "out").write_text("I am a file")
        return d / "out"

    cases += [
        opt("unknown corruption", ["--corruptions", "contrast,hail"], ("unknown corruption 'hail'",)),
        opt("empty corruption name", ["--corruptions", "contrast,"], ("unknown corruption ''",)),
        opt("a corruption twice", ["--corruptions", "fog,contrast,fog"], ("'fog'", "twice")),
        opt("--workers 0", ["--corruptions", "contrast", "--workers", "0"], ("--workers", ">= 1")),
        Case("corrupt", "bad option", "--key the .npz lacks", lambda g, d: [
            "corrupt", str(g / "images.npz"), str(d / "out"), "--key", "nope"],
            ("images.npz", "no array 'nope'")),
        opt("out is a file", ["--corruptions", "contrast"], ("out", "not a folder"), out=a_file),
    ]
    return cases


def oodrb_cases():
    """The model file and the options of `pabench oodrb` (its data checks are in
    test_oodrb_user.py); run in a workflow folder with a tiny scale."""
    def run(make, extra=()):
        def argv(good, d):
            return ["oodrb", str(make(good, d)), "--configfile", "tiny.yaml",
                    "--out", str(d / "out"), *extra]
        return argv

    def write(name, how):
        def make(good, d):
            how(d / name, good)
            return d / name
        return make

    def table(text):
        def make(good, d):
            (d / "zoo.csv").write_text(text)
            return ["--zoo", str(d / "zoo.csv")]
        return make

    def config(text):
        def make(good, d):
            (d / "c.yaml").write_text(text)
            return ["--configfile", "tiny.yaml", str(d / "c.yaml")]
        return make

    jit = lambda g, d: g / "oodrb/net.pt"  # noqa: E731
    model_files = [
        ("empty", "zero-byte model", write("m.pt", lambda p, g: p.write_bytes(b"")), ("m.pt", "empty file")),
        ("not what it claims", "text model", write("m.pt", lambda p, g: p.write_text("hello\n")),
         ("m.pt", "not a model file")),
        ("not what it claims", "truncated TorchScript", write("m.pt", lambda p, g: truncated(
            g / "oodrb/net.pt", p)), ("m.pt", "not a model file")),
        ("not what it claims", "zip of text", write("m.pt", lambda p, g: zip_of_text(p)),
         ("m.pt", "not a model file")),
        ("not what it claims", "pickled code", write("m.pt", lambda p, g: torch.save(
            RunsCode(p.parent / "RAN"), p)), ("m.pt", "would run code")),
        ("not what it claims", "a dict", write("m.pt", lambda p, g: torch.save({"a": 1}, p)),
         ("holds a dict, not a model",)),
        ("not what it claims", "an array", write("m.pt", lambda p, g: torch.save(torch.zeros(3), p)),
         ("holds a Tensor, not a model",)),
        ("not what it claims", "directory", write("m.pt", lambda p, g: p.mkdir()), ("m.pt", "a directory")),
        ("not what it claims", "missing", lambda g, d: d / "m.pt", ("m.pt", "no such model file")),
        *[("class count", f"{k} classes for 10", write("m.pt", lambda p, g, k=k: script(
            nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, k)), p)),
           (f"returns {k} class scores per image", "10 classes")) for k in (1, 3, 11)],
        ("wrong shape", "takes 1-channel images", write("m.pt", lambda p, g: script(
            nn.Sequential(nn.Conv2d(1, 2, 8, stride=8), nn.Flatten(), nn.Linear(32, 10)), p)),
         ("expects 1-channel images",)),
    ]
    cases = [Case("oodrb", c, n, run(make), w) for c, n, make, w in model_files]
    options = [
        ("bad option", "--arch-kwargs not JSON", ["--arch", "smallcnn4", "--arch-kwargs", "{x"],
         ("--arch-kwargs", "JSON")),
        ("bad option", "--arch-kwargs a list", ["--arch", "smallcnn4", "--arch-kwargs", "[1]"],
         ("--arch-kwargs", "JSON object")),
        ("bad option", "--name with a slash", ["--name", "a/b"], ("model name 'a/b'",)),
        ("bad option", "--device tpu", ["--device", "tpu"], ("tpu",)),
        ("bad option", "--arch on TorchScript", ["--arch", "smallcnn4"], ("leave out --arch",)),
    ]
    cases += [Case("oodrb", c, n, run(jit, extra), w) for c, n, extra, w in options]
    files = [
        ("not what it claims", "zoo: missing", lambda g, d: ["--zoo", str(d / "zoo.csv")],
         ("zoo.csv", "no such file")),
        ("empty", "zoo: zero-byte", table(""), ("zoo.csv",)),
        ("not what it claims", "zoo: not a shifts table", table("a,b\n1,2\n"), ("zoo.csv", "model")),
        ("not what it claims", "zoo: truncated", table("model,shift\nx,i"), ("zoo.csv", "truncated")),
        ("not what it claims", "config: missing", lambda g, d: [
            "--configfile", "tiny.yaml", str(d / "c.yaml")], ("c.yaml", "no such config file")),
        ("not what it claims", "config: not YAML", config("oodrb: [unclosed\n"), ("c.yaml",)),
        ("wrong dtype", "config: n_test a string", config("oodrb: {n_test: many}\n"),
         ("oodrb.n_test",)),
        ("value range", "config: n_test 0", config("oodrb: {n_test: 0}\n"), ("oodrb.n_test",)),
        ("wrong shape", "config: a list", config("- oodrb\n"), ("c.yaml", "must be a mapping")),
    ]
    cases += [Case("oodrb", c, n, lambda g, d, e=extra: [*run(jit)(g, d), *e(g, d)], w)
              for c, n, extra, w in files]
    return cases


def other_cases():
    """check-config (its own fuzz is test_config_fuzz.py), wandb-runs and wandb-dashboard: the
    files and folders they are given.  Run in the oodrb workflow folder (the schema is there)."""
    def config(category, name, write, words):
        def argv(good, d):
            write(d / "c.yaml")
            return ["check-config", "config.yaml", str(d / "c.yaml")]
        return Case("check-config", category, name, argv, words)

    def folder(command, category, name, make, words):
        def argv(good, d):
            path = make(d)
            return ([command, str(path)] if command == "wandb-runs"
                    else [command, "--dir", str(path), "--dry-run"])
        return Case(command, category, name, argv, words)

    a_file = lambda d: ((d / "w").write_text("not a folder\n"), d / "w")[1]  # noqa: E731
    cases = [
        config("not what it claims", "missing", lambda p: None, ("c.yaml", "No such file")),
        config("not what it claims", "directory", lambda p: p.mkdir(), ("c.yaml", "directory")),
        config("not what it claims", "binary", lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
               ("c.yaml", "not a text file")),
        config("not what it claims", "not YAML", lambda p: p.write_text("dg: [unclosed\n"),
               ("c.yaml", "not valid YAML")),
        config("wrong shape", "a list", lambda p: p.write_text("- dg\n"), ("must be a mapping",)),
        config("wrong dtype", "epochs a string", lambda p: p.write_text("dg: {epochs: ten}\n"),
               ("dg.epochs",)),
        config("value range", "epochs 0", lambda p: p.write_text("dg: {epochs: 0}\n"), ("dg.epochs",)),
        config("bad option", "unknown key", lambda p: p.write_text("dg: {epoch: 3}\n"),
               ("unknown key 'dg.epoch'",)),
    ]
    for command in ("wandb-runs", "wandb-dashboard"):
        cases += [
            folder(command, "not what it claims", "missing folder", lambda d: d / "w",
                   ("w", "no such folder" if command == "wandb-runs" else "no W&B run")),
            folder(command, "not what it claims", "a file", a_file,
                   ("w", "not a folder" if command == "wandb-runs" else "no W&B run")),
        ]
    cases.append(folder("wandb-dashboard", "empty", "a folder without runs",
                        lambda d: (d / "w").mkdir() or d / "w", ("no W&B run directories",)))
    return cases


CASES = pa_cases() + avgcase_cases() + corrupt_cases() + oodrb_cases() + other_cases()
IN_WORKFLOW = ("oodrb", "check-config")


# ------------------------------------------------------------------ fixtures and the runner
@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """Readable inputs of every command; the good runs are checked in test_good_inputs_work."""
    from pabench.attacks.models import build
    from pabench.core import config as pabench_config
    from pabench.core import paths
    from pabench.experiments.oodrb import plan

    g = tmp_path_factory.mktemp("good")
    np.save(g / "a.npy", SCORES)
    np.save(g / "b.npy", SCORES + rng.normal(size=SCORES.shape))
    np.savez(g / "a.npz", x=SCORES)
    np.save(g / "probs.npy", np.full((8, 3), 1 / 3))
    np.save(g / "x.npy", POINTS)
    np.savez(g / "x.npz", x=POINTS)
    np.save(g / "images.npy", IMAGES)
    np.savez(g / "images.npz", x=IMAGES)
    np.save(g / "labels.npy", np.arange(2))
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3)).eval()
    script(net, g / "model.pt")
    program = torch.export.export(net, (torch.as_tensor(POINTS[:2]),),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, g / "model.pt2")
    torch.save(nn.Linear(4, 3).state_dict(), g / "linear.pt")
    # a workflow folder for oodrb: config.yaml, the schema, a tiny scale, its ID split
    o = g / "oodrb"
    o.mkdir()
    shutil.copy(REPO / "config.yaml", o)
    shutil.copytree(REPO / "workflow/schemas", o / "workflow/schemas")
    (o / "tiny.yaml").write_text(TINY_OODRB)
    script(build("smallcnn4", 10, 32).eval(), o / "net.pt")
    cfg = pabench_config.load([o / "config.yaml", o / "tiny.yaml"])
    where = o / paths.oodrb_data(plan.dataset(cfg), "id")   # the ID split the model is checked on
    where.parent.mkdir(parents=True)
    np.savez(where, test_x=rng.integers(0, 256, (6, 3, 32, 32)).astype(np.uint8),
             test_y=np.arange(6), train_y=np.arange(10))
    return g


@pytest.fixture
def in_workflow_folder(good):
    cwd = os.getcwd()
    os.chdir(good / "oodrb")
    yield
    os.chdir(cwd)


def run_main(argv):
    """(exit code, stdout, stderr with every warning as a line, the traceback of an exception
    that escaped main or None)."""
    out, err = io.StringIO(), io.StringIO()
    escaped = None
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            code = cli.main(argv)
        except SystemExit as stop:
            code = stop.code
        except Exception:  # noqa: BLE001 - what the user would see as a traceback
            code, escaped = 1, traceback.format_exc(limit=-3)
    lines = err.getvalue().strip().splitlines() + [
        f"{w.category.__name__}: {w.message}" for w in caught]
    return code, out.getvalue(), lines, escaped


def listing(folder) -> set:
    return {str(p.relative_to(folder)) for p in Path(folder).rglob("*")}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.command}-{c.name}" for c in CASES])
def test_bad_input_gives_one_line_naming_it_and_writes_nothing(case, good, tmp_path, request):
    if case.command in IN_WORKFLOW:
        request.getfixturevalue("in_workflow_folder")
    argv = case.argv(good, tmp_path)
    before, good_before = listing(tmp_path), listing(good)
    code, out, err, escaped = run_main(argv)
    assert escaped is None, f"{case.name}: an exception escaped (a traceback):\n{escaped}"
    assert code not in (0, None), f"{case.name}: exit code {code}; stdout {out!r}"
    assert len(err) == 1, f"{case.name}: stderr is not one line:\n" + "\n".join(err)
    message = err[0]
    missing = [w for w in case.words if w not in message]
    assert not missing, f"{case.name}: message lacks {missing}:\n{message}"
    assert "Traceback" not in message and out == "", (message, out)
    assert listing(tmp_path) == before, f"{case.name}: wrote {listing(tmp_path) - before}"
    assert listing(good) == good_before, f"{case.name}: wrote {listing(good) - good_before}"
    assert not (tmp_path / "RAN").exists(), f"{case.name}: loading the file ran its code"


def test_every_command_has_cases_in_every_category_that_applies():
    counts = Counter((c.command, c.category) for c in CASES)
    assert set(c.category for c in CASES) <= set(CATEGORIES)
    for command in ("pa", "avgcase", "corrupt"):
        for category in ("wrong shape", "wrong dtype", "NaN and inf", "empty", "class count",
                         "not what it claims", "bad option"):
            assert counts[command, category] >= 1, (command, category)
    assert len(CASES) >= 300, len(CASES)
    assert len({(c.command, c.name) for c in CASES}) == len(CASES)   # no case twice


def test_the_documented_counts_are_the_cases():
    """docs/reliability.md's table of cases per command and category is this module's."""
    text = (REPO / "docs/reliability.md").read_text()
    section = text.split("## Bad input to the commands", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `pabench ")]
    documented = {}
    header = [h.strip() for h in next(line for line in section.splitlines()
                                      if line.startswith("| command")).strip("|").split("|")]
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        command = re.search(r"pabench ([\w-]+)", cells[0]).group(1)
        for name, cell in zip(header[1:], cells[1:]):
            documented[command, name] = int(cell.replace("-", "0").replace(",", ""))
    counts = Counter((c.command, c.category) for c in CASES)
    for command in sorted({c.command for c in CASES}):
        for category in CATEGORIES:
            assert documented[command, category] == counts[command, category], (command, category)
        assert documented[command, "total"] == sum(counts[command, c] for c in CATEGORIES)


# ------------------------------------------------------------------ good runs, subprocess, warnings
def test_good_inputs_work(good, tmp_path, in_workflow_folder):
    """The fuzz's starting points run: so each bad case fails for its own damage."""
    for argv in (["pa", str(good / "a.npy"), str(good / "b.npy")],
                 ["pa", str(good / "probs.npy"), str(good / "probs.npy"), "--inputs", "probs"],
                 ["avgcase", str(good / "model.pt"), str(good / "x.npy"), *SIGMA,
                  "--out", str(tmp_path / "p.csv")],
                 ["avgcase", str(good / "model.pt2"), str(good / "x.npz"), *SIGMA],
                 ["avgcase", str(good / "linear.pt"), str(good / "x.npy"), *SIGMA, *LINEAR,
                  '{"in_features": 4, "out_features": 3}', "--estimators", "linear,taylor"],
                 ["corrupt", str(good / "images.npz"), str(tmp_path / "c"), "--labels",
                  str(good / "labels.npy"), "--corruptions", "contrast", "--workers", "1"]):
        code, out, err, escaped = run_main(argv)
        assert escaped is None and code == 0, (argv, err, escaped)
        assert not [line for line in err if "Warning" in line], err
    assert (tmp_path / "p.csv").is_file() and (tmp_path / "c/contrast.npy").is_file()


def test_avgcase_casts_points_to_the_models_dtype(good, tmp_path):
    """A float64 model takes float32 points (they are cast to its parameters' dtype)."""
    script(nn.Linear(4, 3).double(), tmp_path / "m.pt")
    code, out, err, escaped = run_main(["avgcase", str(tmp_path / "m.pt"), str(good / "x.npy"),
                                        *SIGMA])
    assert escaped is None and code == 0, (err, escaped)


def _subprocess(*args, cwd=None):
    return subprocess.run([sys.executable, "-W", "error", "-m", "pabench.cli", *args],
                          capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(REPO / "src")})


@pytest.mark.parametrize("name", ["pa: text named .npy", "avgcase: mat1 and mat2",
                                  "corrupt: images above 255", "oodrb: --arch-kwargs a list"])
@pytest.mark.slow
def test_through_a_subprocess_the_exit_status_is_2_and_stderr_one_line(name, good, tmp_path):
    """The user's view, with every warning an error: exit status 2, one stderr line, no
    traceback, nothing written."""
    (tmp_path / "bad.npy").write_text("a,b\n1,2\n")
    np.save(tmp_path / "wide.npy", np.hstack([POINTS, POINTS[:, :1]]))
    np.save(tmp_path / "bright.npy", IMAGES.astype(np.int16) + 100)
    args, cwd, words = {
        "pa: text named .npy": (["pa", str(tmp_path / "bad.npy"), str(good / "b.npy")], None,
                                "not a .npy file"),
        "avgcase: mat1 and mat2": (["avgcase", str(good / "model.pt"), str(tmp_path / "wide.npy"),
                                    *SIGMA, "--out", str(tmp_path / "out/p.csv")], None,
                                   "the model does not take the points, shape (N, 5): "
                                   "RuntimeError: mat1 and mat2 shapes cannot be multiplied"),
        "corrupt: images above 255": (["corrupt", str(tmp_path / "bright.npy"), str(tmp_path / "out")],
                                      None, "outside the uint8 range"),
        "oodrb: --arch-kwargs a list": (["oodrb", str(good / "oodrb/net.pt"), "--arch", "smallcnn4",
                                         "--arch-kwargs", "[4]", "--configfile", "tiny.yaml",
                                         "--out", str(tmp_path / "out")], good / "oodrb",
                                        "--arch-kwargs: give a JSON object"),
    }[name]
    proc = _subprocess(*args, cwd=cwd)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_avgcase_loads_torchscript_and_torch_export_without_a_warning(good):
    """TorchScript loads without torch.jit.load's FutureWarning and a torch.export archive is
    taken: with every warning an error, both run."""
    for model in ("model.pt", "model.pt2"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert cli.main(["avgcase", str(good / model), str(good / "x.npy"), *SIGMA]) == 0
