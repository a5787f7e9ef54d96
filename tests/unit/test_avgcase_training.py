"""Gradient-norm regularised training: the penalty is CE + lambda * ||grad_x CE||^2 per example,
the logged norm is that gradient's, and a larger lambda gives a smoother model."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pabench.experiments.avgcase.training import build, recalibrate_batchnorm, step, train


def _batch(seed=0, n=32):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def _explicit(model, x, y):
    """(mean CE, mean squared norm of the per-example CE's input gradient), by autograd."""
    x = x.clone().requires_grad_(True)
    ce = F.cross_entropy(model(x), y, reduction="none")
    (grad,) = torch.autograd.grad(ce.sum(), x)
    return ce.mean().item(), grad.flatten(1).pow(2).sum(1).mean().item()


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_step_reports_the_penalised_loss_and_the_input_gradient_norm(lam):
    torch.manual_seed(0)
    model = build("cnn", (1, 8, 8), 3)
    x, y = _batch()
    ce, sq = _explicit(model, x, y)
    before = [p.detach().clone() for p in model.parameters()]
    loss, got_sq = step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, lam)
    assert got_sq == pytest.approx(sq, rel=1e-5)
    assert loss == pytest.approx(ce + lam * sq, rel=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it stepped


def test_the_penalty_lowers_the_input_gradient_norm():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (400, 1, 8, 8), dtype=np.uint8)
    y = (x.reshape(400, -1)[:, :32].mean(1) > x.reshape(400, -1)[:, 32:].mean(1)).astype(np.int64)
    kw = dict(epochs=3, batch_size=50, lr=0.01, seed=0, device="cpu")
    norms = {lam: train("linear", lam, x[:300], y[:300], x[300:], y[300:], **kw)[1][-1]["grad_norm"]
             for lam in (0.0, 1.0)}
    assert norms[1.0] < 0.7 * norms[0.0], norms
    with pytest.raises(ValueError, match="lambda"):
        train("linear", -0.1, x[:300], y[:300], x[300:], y[300:], **kw)


def test_batchnorm_recalibration_sets_the_statistics_of_the_given_images():
    torch.manual_seed(0)
    model = build("resnet18_w8", (3, 8, 8), 4)
    images = np.random.default_rng(0).integers(0, 256, (64, 3, 8, 8), dtype=np.uint8)
    bn = next(m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))
    seen = []
    bn.register_forward_hook(lambda m, inputs, out: seen.append(inputs[0].detach()))
    recalibrate_batchnorm(model, images, "cpu", batch=16)
    inputs = torch.cat(seen)   # what the first BatchNorm saw, in 4 batches of 16
    means = torch.stack([b.mean((0, 2, 3)) for b in inputs.split(16)]).mean(0)
    torch.testing.assert_close(bn.running_mean, means, rtol=1e-4, atol=1e-6)
    assert not model.training and bn.momentum == 0.1   # eval mode, training momentum restored
