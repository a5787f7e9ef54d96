"""Gradient-norm regularised training: the penalty is CE + lambda * ||grad_x CE||^2 per example,
the logged norm is that gradient's, and a larger lambda gives a smoother model."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pabench.experiments.avgcase.training import (accuracy, build, recalibrate_batchnorm,
                                                   step, train)


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
    with torch.no_grad():
        right = int((model(x).argmax(1) == y).sum())   # before the step
    loss, got_sq, got_right = step(model, torch.optim.SGD(model.parameters(), lr=0.1), x, y, lam)
    assert got_right == right
    assert got_sq == pytest.approx(sq, rel=1e-5)
    assert loss == pytest.approx(ce + lam * sq, rel=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it stepped


@pytest.mark.parametrize("every", [1, 3])
def test_the_penalty_lowers_the_input_gradient_norm(every):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (400, 1, 8, 8), dtype=np.uint8)
    y = (x.reshape(400, -1)[:, :32].mean(1) > x.reshape(400, -1)[:, 32:].mean(1)).astype(np.int64)
    kw = dict(epochs=3, batch_size=50, lr=0.01, seed=0, device="cpu", penalty_every=every)
    norms = {lam: train("linear", lam, x[:300], y[:300], x[300:], y[300:], **kw)[1][-1]["grad_norm"]
             for lam in (0.0, 1.0)}
    assert norms[1.0] < 0.7 * norms[0.0], norms
    with pytest.raises(ValueError, match="lambda"):
        train("linear", -0.1, x[:300], y[:300], x[300:], y[300:], **kw)
    with pytest.raises(ValueError, match="penalty_every"):
        train("linear", 1.0, x[:300], y[:300], x[300:], y[300:], **{**kw, "penalty_every": 0})


def test_train_accuracy_is_read_off_the_training_steps():
    """With lr = 0 the weights never move, so the accuracy of the epoch's batches as trained on
    equals the accuracy of the model on the whole training set (a model without BatchNorm)."""
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (300, 1, 8, 8), dtype=np.uint8)
    y = rng.integers(0, 3, 300)
    model, history = train("cnn", 0.0, x, y, x[:50], y[:50], epochs=1, batch_size=50, lr=0.0,
                           seed=0, device="cpu")
    assert history[0]["train_accuracy"] == accuracy(model, x, y, "cpu")
    assert history[0]["test_accuracy"] == accuracy(model, x[:50], y[:50], "cpu")


def test_a_lazy_step_is_a_plain_step_that_reports_the_penalised_loss():
    """Lazy regularisation's unpenalised steps (weight 0) move the weights as lambda = 0 does,
    and report CE + lambda * ||grad||^2 all the same; a penalised step uses the weight given."""
    x, y = _batch()
    runs = {}
    for name, lam, weight in (("plain", 0.0, None), ("lazy", 0.5, 0.0), ("k=2", 0.5, 1.0),
                              ("lam=1", 1.0, None)):
        torch.manual_seed(0)
        model = build("cnn", (1, 8, 8), 3)
        ce, sq = _explicit(model, x, y)
        loss, got_sq, _ = step(model, torch.optim.SGD(model.parameters(), lr=0.1), x.clone(), y,
                               lam, weight)
        assert loss == pytest.approx(ce + lam * sq, rel=1e-5) and got_sq == pytest.approx(sq, rel=1e-5)
        runs[name] = [p.detach() for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(runs["plain"], runs["lazy"]))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(runs["k=2"], runs["lam=1"]))
    assert not all(torch.allclose(a, b) for a, b in zip(runs["plain"], runs["lam=1"]))


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


def test_every_architecture_is_in_the_schema_and_builds_at_its_width():
    import yaml

    from conftest import REPO
    from pabench.experiments.avgcase.training import ARCHS

    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    avg = schema["properties"]["avgcase"]["properties"]
    assert set(schema["$defs"]["avg_arch"]["enum"]) == set(ARCHS)
    for key in ("models", "train_by_arch"):   # both name architectures by that list
        archs = avg[key]["additionalProperties"] if key == "models" else avg[key]
        assert archs["propertyNames"] == {"$ref": "#/$defs/avg_arch"}, key
    widths = {"cnn": 32, "cnn_w16": 16, "cnn_w8": 8}
    for arch, width in widths.items():
        convs = [m for m in build(arch, (1, 28, 28), 10).modules() if isinstance(m, torch.nn.Conv2d)]
        assert [c.out_channels for c in convs] == [width, 2 * width], arch
    with pytest.raises(ValueError, match="cnn_w4"):
        build("cnn_w4", (1, 28, 28), 10)


@pytest.mark.parametrize("batch", [16, 128])
def test_lambda_on_the_cited_codes_scale(batch):
    """The code the paper cites (tml-tuebingen/pags) adds reg_constant * 1e5 * ||grad_x of the
    batch-mean CE||^2 summed over the batch / B; plan.cited_reg_constant(lambda, B) is the
    reg_constant that gives the same penalty as our lambda * mean_i ||grad_x CE_i||^2."""
    from pabench.experiments.avgcase.plan import cited_reg_constant

    torch.manual_seed(0)
    model = build("linear", (1, 8, 8), 3)
    x, y = _batch(seed=1, n=batch)
    _, ours = _explicit(model, x, y)
    x = x.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(F.cross_entropy(model(x), y), x)   # of the batch's mean CE
    theirs = 1e5 * grad.pow(2).sum().item() / batch
    lam = 0.03
    assert lam * ours == pytest.approx(cited_reg_constant(lam, batch) * theirs, rel=1e-5)
    assert cited_reg_constant(lam) == pytest.approx(lam * 128 ** 2 / 1e5)   # their default batch
