"""`pabench oodrb MODEL` and pabench.experiments.oodrb.user.benchmark: a user's own model on a
tiny OODRobustBench scale (the test scale with two corruptions at two severities, one natural
shift, two threat shifts, a short MM5), every model form, effective robustness against a zoo
table with known lines, and every bad input refused by name before anything is written."""
import contextlib
import copy
import io
import os
import pickle
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import REPO
from torch import nn

from pabench import cli
from pabench.attacks.models import build, save_zoo_model
from pabench.core import config as pabench_config
from pabench.core.modelfile import load_model
from pabench.experiments.oodrb import compute, plan, user

TINY = """oodrb:
  n_test: 10
  n_shift: 5
  n_natural: 5
  corruptions: [gaussian_noise, contrast]
  severities: [1, 3]
  natural: [sklearn_digits]
  threats:
    - {name: linf_1.5x, kind: linf, paper_eps: 12/255, rule: id_ratio}
    - {name: stadv, kind: stadv, eps: 0.05, steps: 2}
  lpips: {weights: none}
  mm5: {n_targets: 2, steps: 2}
  pa_epochs: 2
"""
# The synthetic zoo's lines (percent): OOD_d robustness = 0.5 ID robustness + 5, OOD_d accuracy
# = 0.9 ID accuracy - 2, OOD_t robustness = 0.8 ID robustness.
ROB, ACC, THREAT = (0.5, 5.0), (0.9, -2.0), (0.8, 0.0)


def _zoo_table(cfg) -> pd.DataFrame:
    """Four AT models exactly on the lines above, on the tiny scale's shifts (the per-shift
    values equal the aggregate, so every per-shift line is the aggregate's too)."""
    rows = []
    for k, (acc, rob) in enumerate([(0.80, 0.35), (0.85, 0.40), (0.90, 0.50), (0.95, 0.60)]):
        base = {"model": f"at{k}", "method": "madry", "adversarial": True, "n": 10}
        rows.append({**base, "shift": "id", "family": "id", "severity": 0, "accuracy": acc,
                     "robustness": rob})
        ood_acc = (ACC[0] * 100 * acc + ACC[1]) / 100
        ood_rob = (ROB[0] * 100 * rob + ROB[1]) / 100
        for shift in plan.shifts(cfg):
            corruption = plan.is_corruption(cfg, shift)
            for sev in cfg["oodrb"]["severities"] if corruption else [0]:
                rows.append({**base, "shift": shift, "severity": sev, "accuracy": ood_acc,
                             "robustness": ood_rob,
                             "family": "corruption" if corruption else "natural"})
        for shift, t in plan.threats(cfg).items():
            rows.append({**base, "shift": shift, "family": "threat", "severity": 0,
                         "accuracy": np.nan, "robustness": THREAT[0] * rob, "kind": t["kind"],
                         "eps": t["eps"]})
    return pd.DataFrame(rows).assign(log_pa=-1.0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A workflow folder (config.yaml, the schema, the tiny overlay) with the tiny scale's data
    files where the workflow writes them, a synthetic zoo table, and one small network saved
    as TorchScript and as a state_dict.  The tests run inside it."""
    root = tmp_path_factory.mktemp("oodrb_user")
    shutil.copy(REPO / "config.yaml", root)
    shutil.copytree(REPO / "workflow/schemas", root / "workflow/schemas")
    (root / "tiny.yaml").write_text(TINY)
    cfg = pabench_config.load([root / "config.yaml", root / "tiny.yaml"])
    o = cfg["oodrb"]
    data = compute.id_data(o)
    folder = root / "data/oodrb/data/mnist32"
    folder.mkdir(parents=True)
    np.savez(folder / "id.npz", **data)
    for shift in plan.shifts(cfg):
        arrays = (compute.corruption_data(o, shift, data["test_x"], data["test_y"])
                  if plan.is_corruption(cfg, shift) else compute.natural_data(o, shift))
        np.savez(folder / f"{shift}.npz", **arrays)
    _zoo_table(cfg).to_csv(root / "zoo.csv", index=False)
    torch.manual_seed(0)
    net = build("smallcnn4", 10, 32).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)   # torch.jit.script's deprecation notice
        torch.jit.script(net).save(str(root / "net.jit.pt"))
    torch.save(net.state_dict(), root / "net_weights.pt")
    cwd = os.getcwd()
    os.chdir(root)
    yield {"root": root, "cfg": cfg, "data": data, "net": net}
    os.chdir(cwd)


def _run(*args) -> int:
    return cli.main(["oodrb", *args, "--configfile", "tiny.yaml"])


@pytest.fixture(scope="module")
def jit_run(tiny):
    """The CLI on the TorchScript model, against the synthetic zoo: (exit code, stdout)."""
    capture = io.StringIO()
    with contextlib.redirect_stdout(capture):
        code = _run("net.jit.pt", "--name", "jit", "--zoo", "zoo.csv", "--out", "out")
    return code, capture.getvalue()


def test_cli_benchmarks_a_torchscript_model_against_the_zoo(tiny, jit_run):
    """The CLI on a TorchScript model: the files, a row per shift, the ID accuracy the model has,
    the workflow's row format, and effective accuracy and robustness against the zoo's known
    lines (the model's OOD value minus the line at its ID value)."""
    code, out = jit_run
    assert code == 0
    where = user.output_paths("out", "jit")
    assert all(p.is_file() and p.stat().st_size for p in where.values())
    table = pd.read_csv(where["csv"])
    shifts = table[table.section == "shift"]
    assert list(shifts.name) == ["id", "gaussian_noise", "contrast", "sklearn_digits",
                                 "linf_1.5x", "stadv"]
    data, net = tiny["data"], tiny["net"]
    id_acc = 100 * compute.accuracy(net, data["test_x"], data["test_y"], "cpu")
    assert shifts.accuracy.iloc[0] == pytest.approx(id_acc)
    rows = pd.read_csv(where["rows"])
    assert {"model", "shift", "family", "severity", "accuracy", "robustness", "log_pa"} <= set(rows)
    assert len(rows) == 1 + 2 * 2 + 1 + 2 and (rows.model == "jit").all()
    assert (rows.robustness <= rows.accuracy.fillna(1) + 1e-12).all()
    s = table[table.section == "summary"].set_index("name")
    for target, metric, (slope, intercept), x in (
            ("OOD_d", "robustness", ROB, "robustness"), ("OOD_d", "accuracy", ACC, "accuracy"),
            ("R_c", "robustness", ROB, "robustness"), ("OOD_t", "robustness", THREAT, "robustness")):
        line = slope * s.loc["ID", x] + intercept
        assert s.loc[target, f"zoo_{metric}"] == pytest.approx(line)
        assert s.loc[target, f"effective_{metric}"] == pytest.approx(s.loc[target, metric] - line)
    assert "OOD_d" in out and "wrote out/oodrb_jit.png" in out
    assert "effective robustness" in where["md"].read_text()


def test_function_and_cli_on_module_plus_checkpoint_match_torchscript(tiny, jit_run):
    """The same weights as a state_dict with module:Class (the CLI) give the TorchScript model's
    table; with a pabench architecture (the function, one shift at a time as with
    oodrb.split_shifts) its accuracy and PA (MM5's random starts differ between the two ways);
    with no zoo, a note instead of effective robustness."""
    assert _run("net_weights.pt", "--arch", "pabench.attacks.models:SmallCNN",
                "--arch-kwargs", '{"channels": 4}', "--name", "cls", "--out", "out2") == 0
    split = copy.deepcopy(tiny["cfg"])
    split["oodrb"]["split_shifts"] = True
    report = user.benchmark("net_weights.pt", arch="smallcnn4", config=split, name="sd")
    assert any("no zoo table" in n for n in report.notes)
    assert report.table.effective_robustness.isna().all()
    jit = pd.read_csv(user.output_paths("out", "jit")["csv"])
    cls = pd.read_csv(user.output_paths("out2", "cls")["csv"])
    for other, columns in ((cls, ("accuracy", "robustness", "log_pa")),
                           (report.table, ("accuracy", "log_pa"))):
        for column in columns:
            np.testing.assert_allclose(other[column], jit[column], rtol=1e-6, atol=1e-9,
                                       equal_nan=True, err_msg=column)
    # each corruption against the clean accuracy of exactly its own images, both ways
    jit_rows = pd.read_csv(user.output_paths("out", "jit")["rows"])
    corrupted = report.rows.family == "corruption"
    assert report.rows.clean_accuracy[corrupted].notna().all()
    np.testing.assert_allclose(report.rows.clean_accuracy[corrupted],
                               jit_rows.clean_accuracy[jit_rows.family == "corruption"])


class ThreeByThree(nn.Module):
    """A small network with a chosen input channel count, image size, classes and output."""

    def __init__(self, channels=3, size=32, classes=10, nan=False):
        super().__init__()
        self.conv = nn.Conv2d(channels, 4, 3, stride=4)
        self.fc = nn.Linear(4 * ((size - 3) // 4 + 1) ** 2, classes)
        self.nan = nan

    def forward(self, x):
        out = self.fc(self.conv(x).flatten(1))
        return out * float("nan") if self.nan else out


def _script(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.script(ThreeByThree(**kwargs)).save(str(path))


def _pickle(path):
    with open(path, "wb") as fh:
        pickle.dump({"weights": [1, 2, 3]}, fh)


@pytest.mark.parametrize("make,message", [
    (lambda p: _script(p, channels=1), "the model expects 1-channel images; the data have 3 channels"),
    (lambda p: _script(p, size=28), "does not take the data's images, shape (N, 3, 32, 32)"),
    (lambda p: _script(p, classes=5), "returns 5 class scores per image; the data have 10 classes"),
    (lambda p: _script(p, nan=True), "returns NaN or infinite outputs"),
    (_pickle, "a pickle that is not a model file"),
    (lambda p: torch.save({"epoch": 3}, p), "holds a dict, not a model"),
    (lambda p: None, "no such model file"),
])
def test_bad_input_is_one_line_naming_it_and_writes_nothing(tiny, capsys, make, message):
    path = tiny["root"] / "bad.pt"
    path.unlink(missing_ok=True)
    make(path)
    assert _run("bad.pt", "--out", "bad_out") == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tiny["root"] / "bad_out").exists()


def test_state_dict_without_or_with_a_wrong_arch_is_named(tiny, capsys):
    assert _run("net_weights.pt", "--out", "bad_out") == 2
    assert "holds weights only (a state_dict)" in capsys.readouterr().err
    assert _run("net_weights.pt", "--arch", "smallcnn8", "--out", "bad_out") == 2
    assert "weights do not match --arch smallcnn8 (size mismatch" in capsys.readouterr().err
    assert _run("net.jit.pt", "--zoo", "nowhere.csv", "--out", "bad_out") == 2
    assert "nowhere.csv: no such file" in capsys.readouterr().err
    assert not (tiny["root"] / "bad_out").exists()


def test_a_zoo_run_on_other_shifts_is_named_and_fits_nothing(tiny):
    cfg = tiny["cfg"]
    zoo = _zoo_table(cfg)
    rows = user.planned(cfg)
    assert user.zoo_mismatch(zoo, rows) == ""
    other = zoo.assign(severity=zoo.severity.where(zoo.severity != 3, 5))
    assert "the zoo has contrast@5, gaussian_noise@5 that this run does not" in user.zoo_mismatch(other, rows)
    wider = zoo.assign(eps=zoo.eps * 2)
    assert "threat radius differs: linf_1.5x 0.6 (zoo) vs 0.3" in user.zoo_mismatch(wider, rows)


def test_model_files_load_quietly_in_every_form(tmp_path):
    """TorchScript without torch.jit.load's FutureWarning, a torch.export archive with a dynamic
    batch (eval() and requires_grad_() work on it, as the attacks need), a pabench checkpoint."""
    torch.manual_seed(0)
    net = ThreeByThree().eval()
    x = torch.rand(5, 3, 32, 32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.script(net).save(str(tmp_path / "m.pt"))
    program = torch.export.export(net, (x[:2],), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, tmp_path / "m.pt2")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        scripted = load_model(tmp_path / "m.pt")
    exported = load_model(tmp_path / "m.pt2")
    save_zoo_model(build("smallcnn4"), tmp_path / "zoo.pt", "smallcnn4", "madry", 10, 32)
    assert isinstance(load_model(tmp_path / "zoo.pt"), type(build("smallcnn4")))
    for model in (scripted, exported):
        model.eval().requires_grad_(False)
        torch.testing.assert_close(model(x), net(x))
