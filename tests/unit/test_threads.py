"""Small problems run on one thread (pabench.core.threads): the PA library and what calls it."""
import numpy as np
import pytest
import torch

from pabench.core import threads
from pabench.metrics import exact, pa


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def test_threads_for_grows_with_work_and_stays_within_what_is_available():
    w = threads.MIN_WORK_PER_THREAD
    assert threads.threads_for(0, 4) == 1
    assert threads.threads_for(w - 1, 4) == 1
    assert threads.threads_for(2 * w, 4) == 2
    assert threads.threads_for(100 * w, 4) == 4
    assert threads.threads_for(100 * w, 1) == 1


def test_a_small_pa_solve_runs_on_one_thread_and_restores_the_setting(two_threads, monkeypatch):
    seen = []
    real = exact.solve_exact

    def spy(pairs):
        seen.append(torch.get_num_threads())
        return real(pairs)

    monkeypatch.setattr(pa, "solve_exact", spy)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(1000, 10))
    r = pa.posterior_agreement(a, a + rng.normal(size=a.shape))
    assert seen == [1]
    assert torch.get_num_threads() == 2
    assert np.isfinite(r.logpa)


def test_the_setting_is_restored_when_the_solve_fails(two_threads):
    with pytest.raises(ValueError):
        pa.posterior_agreement(np.zeros((10, 3)), np.full((10, 3), np.nan))
    assert torch.get_num_threads() == 2


def test_one_thread_gives_the_same_answer_as_two(two_threads, monkeypatch):
    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 4000, 10))
    b = a + rng.normal(size=a.shape)
    small = pa.posterior_agreement(a, b)
    monkeypatch.setattr(threads, "MIN_WORK_PER_THREAD", 1)   # every problem "large": 2 threads
    large = pa.posterior_agreement(a, b)
    np.testing.assert_allclose(small.logpa, large.logpa, rtol=1e-12)
    np.testing.assert_allclose(small.beta, large.beta, rtol=1e-9)


# ---- the average-case estimators, the normal CDF and the commands

class _ThreadSpy(torch.nn.Module):
    """A linear model that records torch's thread count at each forward pass."""

    def __init__(self, d=8, c=3):
        super().__init__()
        self.lin = torch.nn.Linear(d, c)
        self.seen = []

    def forward(self, x):
        self.seen.append(torch.get_num_threads())
        return self.lin(x)


def _spy_on(monkeypatch, module, name):
    seen, real = [], getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return seen


def test_small_estimates_run_on_one_thread_and_restore_the_setting(two_threads, monkeypatch):
    from pabench.metrics.avgcase import estimators, mvn

    torch.manual_seed(0)
    model, x = _ThreadSpy(), torch.randn(20, 8)
    cdf = _spy_on(monkeypatch, mvn, "_mvn_points")
    for name in ("mc", "taylor", "mmse", "softmax"):
        model.seen.clear()
        estimators.estimate(name, model, x, 0.5, n=4 if name != "taylor" else None)
        assert set(model.seen) == {1}, name
        assert torch.get_num_threads() == 2
    assert cdf and set(cdf) == {1}
    cdf.clear()
    mvn.mvn_cdf(np.zeros((5, 2)), np.eye(2))
    assert cdf == [1]


def test_estimates_with_work_for_two_threads_use_both(two_threads, monkeypatch):
    from pabench.metrics.avgcase import estimators

    monkeypatch.setattr(threads, "MIN_WORK_PER_THREAD", 1000)
    model, x = _ThreadSpy(), torch.randn(10, 8)   # 8 values a point, 27 parameters: 270 a copy
    estimators.p_mc(model, x, 0.5, 3)                    # 810: one thread
    assert set(model.seen) == {1}
    model.seen.clear()
    estimators.p_mc(model, x, 0.5, n=300)                # 81,000: both
    assert set(model.seen) == {2}
    model.seen.clear()
    estimators.p_mmse(model, torch.randn(300, 8), 0.5, 5)
    assert set(model.seen) == {2}


def test_a_large_network_on_few_points_keeps_every_thread(two_threads):
    """The work counts the model's parameters (a floor on its multiply-adds), not only the input
    values: a ResNet-sized model on 2 points is not a small problem."""
    from pabench.metrics.avgcase import estimators

    model = _ThreadSpy()
    model.weights = torch.nn.Parameter(torch.zeros(2 * threads.MIN_WORK_PER_THREAD))  # unused
    estimators.p_taylor(model, torch.randn(2, 8), 0.5)
    assert set(model.seen) == {2}
    assert torch.get_num_threads() == 2


def test_a_bad_copy_count_still_gets_the_estimators_message(two_threads):
    from pabench.metrics.avgcase import estimators

    with pytest.raises(ValueError, match="n must"):
        estimators.p_mc(_ThreadSpy(), torch.randn(4, 8), 0.5, n=0)
    assert torch.get_num_threads() == 2


def test_the_commands_run_small_problems_on_one_thread(two_threads, monkeypatch, tmp_path, capsys):
    from pabench import cli
    from pabench.metrics import afr
    from pabench.metrics.avgcase import estimators, mvn

    rng = np.random.default_rng(0)
    a = rng.normal(size=(500, 10))
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a + rng.normal(size=a.shape))
    pa_seen = _spy_on(monkeypatch, pa, "solve_exact")
    afr_seen = _spy_on(monkeypatch, afr, "_predictions")
    assert cli.main(["pa", str(tmp_path / "a.npy"), str(tmp_path / "b.npy")]) == 0
    assert pa_seen == [1] and afr_seen == [1, 1]

    torch.save(torch.nn.Linear(8, 3).state_dict(), tmp_path / "w.pt")
    np.save(tmp_path / "x.npy", rng.normal(size=(30, 8)).astype(np.float32))
    grads = _spy_on(monkeypatch, estimators, "decision_functions")
    cdf = _spy_on(monkeypatch, mvn, "_mvn_points")
    assert cli.main(["avgcase", str(tmp_path / "w.pt"), str(tmp_path / "x.npy"), "--sigma", "0.5",
                     "--estimators", "taylor,mmse", "--arch", "torch.nn:Linear", "--arch-kwargs",
                     '{"in_features": 8, "out_features": 3}']) == 0
    assert grads and set(grads) == {1} and cdf and set(cdf) == {1}
    assert torch.get_num_threads() == 2
    capsys.readouterr()
