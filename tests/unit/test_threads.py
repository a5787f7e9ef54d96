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
