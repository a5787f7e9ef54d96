"""The batched "adam" solver reproduces the authors' procedure exactly."""
import numpy as np
import pytest
import torch

from pabench.metrics import posterior_agreement


def authors_procedure(a, b, epochs, seed, lr=0.1, batch_size=64, beta0=1.0):
    """A straightforward per-pair re-implementation: autograd through softmax products,
    torch.optim.Adam, projection to beta >= 0, full-data evaluation after every epoch.
    Uses the same minibatch order as pabench (torch.randperm with the seeded generator)."""
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    beta = torch.tensor([beta0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([beta], lr=lr)
    gen = torch.Generator().manual_seed(seed)

    def objective(x, y, bt):
        return torch.logsumexp(torch.log_softmax(bt * x, 1) + torch.log_softmax(bt * y, 1), 1).sum()

    betas, values = [], []
    for _ in range(epochs):
        order = torch.randperm(len(a), generator=gen)
        for lo in range(0, len(a), batch_size):
            idx = order[lo:lo + batch_size]
            opt.zero_grad()
            (-objective(a[idx], b[idx], beta)).backward()
            opt.step()
            with torch.no_grad():
                beta.clamp_(min=0.0)
        with torch.no_grad():
            betas.append(beta.item())
            values.append(objective(a, b, beta).item())
    best = int(np.argmax(values))
    return betas[best], values[best], best + 1, np.array(betas)


def pair(seed, n=300, k=5, noise=1.5):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(n, k)) * 2
    return a, a + rng.normal(size=(n, k)) * noise


def test_adam_matches_the_authors_procedure():
    a, b = pair(0)
    beta, value, epoch, trajectory = authors_procedure(a, b, epochs=25, seed=3)
    r = posterior_agreement(a, b, solver="adam", epochs=25, seed=3)
    assert r.epoch == epoch
    assert r.beta == pytest.approx(beta, rel=1e-9)
    assert r.logpa == pytest.approx(value, rel=1e-9)
    np.testing.assert_allclose(r.history["beta"], trajectory, rtol=1e-9)


def test_stack_optimises_each_pair_as_if_alone():
    pairs = [pair(s, n=256) for s in range(4)]
    a = np.stack([p[0] for p in pairs])
    b = np.stack([p[1] for p in pairs])
    stack = posterior_agreement(a, b, solver="adam", epochs=15, seed=1)
    assert stack.beta.shape == (4,) and stack.kernel.shape == (4, 256)
    for i, (x, y) in enumerate(pairs):
        single = posterior_agreement(x, y, solver="adam", epochs=15, seed=1)
        assert stack.beta[i] == pytest.approx(single.beta, rel=1e-12)
        assert stack.logpa[i] == pytest.approx(single.logpa, rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_exact_is_at_least_adam(seed):
    a, b = pair(seed, noise=[0.5, 1.5, 4.0][seed])
    exact = posterior_agreement(a, b)
    adam = posterior_agreement(a, b, solver="adam", epochs=40, seed=seed)
    assert exact.logpa >= adam.logpa - 1e-9 * abs(adam.logpa)
    assert adam.kernel.sum() == pytest.approx(adam.logpa, rel=1e-10)


def test_adam_on_identical_inputs_reflects_confidence():
    """No shift: the exact optimum is beta = inf (PA 0), while Adam stops at a finite beta
    whose PA reflects how peaked the predictions are (the paper's AR = 0 remark)."""
    a, _ = pair(4)
    confident, flat = posterior_agreement(a * 3, a * 3, solver="adam", epochs=10), \
        posterior_agreement(a / 3, a / 3, solver="adam", epochs=10)
    assert np.isfinite(confident.beta) and confident.logpa < 0
    assert confident.logpa > flat.logpa


def test_adam_is_seeded():
    a, b = pair(5)
    r1 = posterior_agreement(a, b, solver="adam", epochs=5, seed=7)
    r2 = posterior_agreement(a, b, solver="adam", epochs=5, seed=7)
    r3 = posterior_agreement(a, b, solver="adam", epochs=5, seed=8)
    assert r1.beta == r2.beta
    assert not np.array_equal(r1.history["beta"], r3.history["beta"])


def test_native_kernels_match_the_pytorch_path(monkeypatch):
    from pabench.metrics import native

    if native.load() is None:
        pytest.skip("no C compiler: only the PyTorch path exists here")
    a = np.stack([pair(s, n=500)[0] for s in range(3)])
    b = np.stack([pair(s, n=500)[1] for s in range(3)])
    fast = posterior_agreement(a, b, solver="adam", epochs=12, seed=2)
    monkeypatch.setattr(native, "usable", lambda p: False)
    slow = posterior_agreement(a, b, solver="adam", epochs=12, seed=2)
    np.testing.assert_allclose(fast.history["beta"], slow.history["beta"], rtol=1e-12)
    np.testing.assert_allclose(fast.logpa, slow.logpa, rtol=1e-12)
    np.testing.assert_array_equal(fast.epoch, slow.epoch)


def test_bounded_search_finds_the_best_epoch_of_a_full_search():
    """The branch and bound over epochs skips evaluations but returns max_e f(beta_e)."""
    from pabench.metrics import pa_curve

    a, b = pair(8, n=640, noise=2.0)
    r = posterior_agreement(a, b, solver="adam", epochs=60, seed=4)
    every_epoch = pa_curve(a, b, r.history["beta"])
    assert r.logpa == pytest.approx(every_epoch.max(), rel=1e-12)
    assert r.epoch == int(np.argmax(every_epoch)) + 1
    evaluated = ~np.isnan(r.history["logpa"])
    assert evaluated.sum() < 60  # it did skip epochs
    np.testing.assert_allclose(r.history["logpa"][evaluated], every_epoch[evaluated], rtol=1e-12)
