"""Bad input is refused with a message that names the problem; the CLI reads real files."""
import json
import math
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from pabench.cli import main
from pabench.metrics import accuracy, afr_pred, afr_true, posterior_agreement


@pytest.mark.parametrize("a,b,message", [
    (np.zeros((5, 3)), np.zeros((5, 4)), "shapes differ"),
    (np.zeros((5, 1)), np.zeros((5, 1)), "K >= 2"),
    (np.zeros((0, 3)), np.zeros((0, 3)), "empty"),
    (np.zeros(3), np.zeros(3), "shape (N, K)"),
    (np.array([[np.nan, 1.0], [np.nan, 0.0]]), np.zeros((2, 2)), "2 NaN"),
    (np.zeros((2, 2)), np.array([[np.inf, 0.0], [1.0, -np.inf]]), "2 infinite"),
    ([["a", "b"]], [["c", "d"]], "numeric"),
])
def test_bad_scores_raise_value_error(a, b, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        posterior_agreement(a, b)


def test_read_only_scores_score_alike_without_a_warning(tmp_path, recwarn):
    """Memory-mapped score files are read-only: PA takes them as they are (no copy, no PyTorch
    warning about non-writable arrays) and scores them as the writable arrays."""
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(50, 4)), rng.normal(size=(50, 4))
    np.save(tmp_path / "a.npy", a), np.save(tmp_path / "b.npy", b)
    ro_a, ro_b = np.load(tmp_path / "a.npy", mmap_mode="r"), np.load(tmp_path / "b.npy", mmap_mode="r")
    assert not ro_a.flags.writeable
    got = posterior_agreement(ro_a, ro_b)
    assert not [w for w in recwarn if "not writable" in str(w.message)]
    assert got.logpa == posterior_agreement(a, b).logpa


def test_probabilities_must_sum_to_one():
    with pytest.raises(ValueError, match="do not sum to 1"):
        posterior_agreement(np.full((4, 3), 0.3), np.full((4, 3), 1 / 3), inputs="probs")
    with pytest.raises(ValueError, match="negative"):
        posterior_agreement(np.array([[1.2, -0.2]]), np.array([[0.5, 0.5]]), inputs="probs")
    with pytest.raises(ValueError, match="do not sum to 1"):
        posterior_agreement(np.zeros((2, 3)), np.zeros((2, 3)), inputs="log_probs")


def test_unknown_solver_and_inputs():
    with pytest.raises(ValueError, match="solver"):
        posterior_agreement(np.zeros((2, 2)), np.zeros((2, 2)), solver="newton")
    with pytest.raises(ValueError, match="inputs"):
        posterior_agreement(np.zeros((2, 2)), np.zeros((2, 2)), inputs="scores")


def test_accuracy_measures():
    a = np.array([[2.0, 0.0], [0.0, 1.0], [3.0, 1.0], [0.0, 5.0]])
    b = np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 5.0]])
    y = np.array([0, 1, 0, 0])
    assert accuracy(a, y) == 0.75
    assert afr_true(b, y) == 0.25
    assert afr_pred(a, b) == 0.5
    with pytest.raises(ValueError, match="labels"):
        accuracy(a, y[:3])


def _cli_json(capsys, *args):
    assert main(list(args)) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_reads_npy_npz_and_pt(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = rng.normal(size=(200, 4))
    b = a + rng.normal(size=(200, 4))
    expected = posterior_agreement(a, b)
    np.save(tmp_path / "a.npy", a)
    np.savez(tmp_path / "b.npz", logits=b)
    torch.save(torch.tensor(b), tmp_path / "b.pt")
    out = _cli_json(capsys, "pa", str(tmp_path / "a.npy"), str(tmp_path / "b.npz"))
    assert out["logpa"] == pytest.approx(expected.logpa, rel=1e-12)
    assert out["beta"] == pytest.approx(expected.beta, rel=1e-12)
    out = _cli_json(capsys, "pa", str(tmp_path / "a.npy"), str(tmp_path / "b.pt"), "--solver", "adam",
                    "--epochs", "3")
    assert out["solver"] == "adam" and out["epoch"] >= 1


def test_cli_identical_inputs_print_infinite_beta(tmp_path, capsys):
    a = np.eye(3)[[0, 1, 2, 1]] * 4.0
    np.save(tmp_path / "a.npy", a)
    out = _cli_json(capsys, "pa", str(tmp_path / "a.npy"), str(tmp_path / "a.npy"))
    assert out["beta"] == "inf" and out["logpa"] == 0.0
    assert out["pa"] == pytest.approx(math.log(3))


@pytest.mark.slow
def test_cli_errors_are_one_line_without_traceback(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((3, 2)))
    np.save(tmp_path / "b.npy", np.zeros((4, 2)))
    proc = subprocess.run([sys.executable, "-m", "pabench.cli", "pa", str(tmp_path / "a.npy"),
                           str(tmp_path / "b.npy")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "shapes differ" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "pabench.cli", "pa", str(tmp_path / "nope.npy"),
                           str(tmp_path / "b.npy")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no such file" in proc.stderr


class _Evil:
    """Unpickling this would create a file: proof that code ran."""

    def __reduce__(self):
        return (open, ("/tmp/pabench-pwned", "w"))


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_pickled_code_in_a_pt_file_is_refused(tmp_path):
    from pabench.core.io import load_array

    raw = tmp_path / "raw.pt"
    with open(raw, "wb") as fh:
        pickle.dump({"logits": _Evil()}, fh)
    saved = tmp_path / "saved.pt"
    torch.save({"logits": _Evil()}, saved)
    for path, message in ((raw, "not a .pt file"),      # refused before reaching its global
                          (saved, r"pickles [\w.]*open, whose loading would run code")):
        with pytest.raises(ValueError, match=message):
            load_array(path, "logits")
    assert not os.path.exists("/tmp/pabench-pwned")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"holds pickled objects \(dtype object\)"):
        load_array(tmp_path / "obj.npy")
