"""Paths are built and parsed in one module with typed keys; every experiment scores its paired
views through one core; estimators accumulate batches like their functional form."""
import numpy as np
import pytest
import torch

from pabench.core import paths
from pabench.core.paths import UNBOUNDED, AttackRun, Eps, TrainRun
from pabench.metrics import afr_pred, afr_true, posterior_agreement
from pabench.metrics.estimator import AFRTrue, PosteriorAgreement
from pabench.metrics.settings import PASettings
from pabench.metrics.views import SCORE_COLUMNS, score_views


def test_paths_round_trip_to_typed_keys():
    run = AttackRun("cifar10", "Wang2023Better_WRN-28-10", "apgd-dlr", Eps.of("8/255"))
    path = paths.record_of(run)
    assert path == "data/adversarial/cifar10/attacks/Wang2023Better_WRN-28-10/apgd-dlr/8-255.npz"
    back = paths.parse_attack_record(path)
    assert back == run and back.eps.value == pytest.approx(8 / 255)
    assert paths.parse_attack_record(paths.attack_record("mnist32", "m", "fmn", UNBOUNDED)).eps.value is None
    assert paths.parse_dg_scores(paths.dg_scores("irm", 12)) == TrainRun("irm", 12)
    assert paths.parse_checkpoint(paths.checkpoint(TrainRun("lisa", 3, paths.FIG11), "epoch5")) == (TrainRun("lisa", 3, paths.FIG11), "epoch5")
    assert paths.parse_zoo_history(paths.zoo_history("mnist32", "fast_fgsm", 2)) == ("fast_fgsm", 2)
    # A zoo model's files carry its training seed; a pretrained model's do not.
    zoo = AttackRun("mnist32", "madry", "pgd", Eps.of(0.1), 1)
    assert paths.record_of(zoo) == "data/adversarial/mnist32/attacks/madry-s1/pgd/0.1.npz"
    assert paths.parse_attack_record(paths.record_of(zoo)) == zoo and back.seed is None
    assert paths.parse_adv_run("Wang2023Better_WRN-28-10") == ("Wang2023Better_WRN-28-10", None)
    avg = paths.avg_file("estimates", "mnist32", "resnet18_w8-lam1e-05", 2)
    assert avg == "data/avgcase/estimates/mnist32/resnet18_w8-lam1e-05-s2.csv"
    assert paths.parse_avg_file(avg) == ("estimates", paths.AvgModel("mnist32", "resnet18_w8", 1e-05, 2))
    ms = TrainRun("erm", 0, "train_zgo")
    assert paths.model_dir(ms) == "data/models/model_selection/train_zgo/erm-s0"
    # Left open, a field is a Snakemake wildcard.
    assert paths.attack_record() == "data/adversarial/{dataset}/attacks/{adv_model}/{attack}/{eps}.npz"


def test_a_path_of_another_form_or_a_bad_eps_is_refused():
    with pytest.raises(ValueError, match="is not a path of the form"):
        paths.parse_attack_record("data/adversarial/cifar10/models/x.pt")
    with pytest.raises(ValueError, match="outside"):
        paths.parse_attack_record("data/adversarial/cifar10/attacks/m/pgd/3.npz")
    with pytest.raises(ValueError, match="not a number"):
        Eps.of("eight")
    assert Eps.of("8/255") == Eps("8-255") and str(Eps.of(0.3)) == "0.3" and UNBOUNDED.label == "min-norm"


def test_score_views_matches_the_metrics_it_stacks():
    rng = np.random.default_rng(0)
    n, k, p = 60, 4, 3
    a = rng.normal(size=(n, k)) * 2
    views = np.stack([a + rng.normal(size=(n, k)) * s for s in (0.0, 1.0, 4.0)])
    labels = a.argmax(1)
    settings = PASettings(epochs=20, batch_size=16)
    table = score_views(a, views, labels, settings)
    assert list(table.columns) == list(SCORE_COLUMNS) and len(table) == p
    for j in range(p):
        exact = posterior_agreement(a, views[j], solver="exact")
        assert table.logpa_exact[j] == pytest.approx(float(exact.logpa), rel=1e-9, abs=1e-12)
        assert table.afr_true[j] == afr_true(views[j], labels) and table.afr_pred[j] == afr_pred(a, views[j])
    stacked = settings.solve(np.broadcast_to(a, views.shape), views)
    assert np.array_equal(table.logpa_adam, stacked.logpa) and np.array_equal(table.adam_epoch, stacked.epoch)
    # One reference per view, and per-view labels, give the same as the shared ones.
    same = score_views(np.stack([a] * p), views, np.stack([labels] * p), settings)
    assert same.equals(table)
    assert table.logpa_exact.iloc[0] == 0 and table.logpa_exact.is_monotonic_decreasing


def test_score_views_refuses_mismatched_shapes():
    a = np.zeros((5, 3))
    with pytest.raises(ValueError, match="a stack"):
        score_views(a, np.zeros((5, 3)), np.zeros(5, int), PASettings(epochs=1))
    with pytest.raises(ValueError, match="does not match"):
        score_views(np.zeros((6, 3)), np.zeros((2, 5, 3)), np.zeros(5, int), PASettings(epochs=1))


def test_pa_settings_from_the_config():
    s = PASettings.from_config({"lr": 0.05, "batch_size": 32, "beta0": 2.0}, 7)
    assert s == PASettings(epochs=7, lr=0.05, batch_size=32, beta0=2.0)


def test_estimator_update_compute_equals_the_functional_form():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(50, 3)), rng.normal(size=(50, 3))
    pa = PosteriorAgreement(solver="exact")
    for lo in range(0, 50, 16):
        pa.update(a[lo:lo + 16], b[lo:lo + 16])
    assert pa.n == 50
    assert pa.compute().logpa == posterior_agreement(a, b, solver="exact").logpa
    assert pa(a[:10], b[:10]).logpa == posterior_agreement(a[:10], b[:10], solver="exact").logpa
    acc = AFRTrue().update(torch.as_tensor(a[:20]), torch.as_tensor(a[:20].argmax(1)))
    acc.update(torch.as_tensor(a[20:]), torch.as_tensor(b[20:].argmax(1)))
    assert acc.compute() == afr_true(a, np.concatenate([a[:20].argmax(1), b[20:].argmax(1)]))
    pa.reset()
    with pytest.raises(ValueError, match="before any update"):
        pa.compute()
    with pytest.raises(ValueError, match="different lengths"):
        pa.update(a[:3], b[:4])
    with pytest.raises(TypeError, match="takes 2 arrays"):
        pa.update(a)
