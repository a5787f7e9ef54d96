"""The threat-shift attacks of OODRobustBench (StAdv, ReColorAdv): the building blocks against
what they must compute (identity, known pixel shifts, known colours, the smoothness sum), the
threat-model bounds of what the attacks return, their strength on a small CNN trained here on the
8x8 digits, the robust flags, determinism, batching, the model left as it was, and bad input
refused with the value named."""
import copy
import math
import re

import pytest
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

from pabench.attacks import threats as T
from pabench.attacks.threats import (
    RECOLOR_RESOLUTION,
    THREATS,
    ThreatResult,
    apply_color_grid,
    apply_flow,
    luv_to_rgb,
    recolor_attack,
    rgb_to_luv,
    smoothness,
    stadv_attack,
    threat_attack,
)

N_TEST = 60


pytestmark = pytest.mark.usefixtures("one_thread")


def _cnn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, 10))


@pytest.fixture(scope="module")
def digits_model():
    """A small CNN on the 8x8 digits upsampled to 16x16, grey in 3 channels, in [0, 1], trained
    for 4 epochs (about 2 s); plus N_TEST held-out points."""
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    x = F.interpolate(x, size=16, mode="bilinear", align_corners=False).clamp(0, 1)
    x = x.repeat(1, 3, 1, 1)
    y = torch.tensor(d.target)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    train, test = perm[:1500], perm[1500:1500 + N_TEST]
    torch.manual_seed(0)
    net = _cnn()
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(4):
        for i in range(0, len(train), 50):
            b = train[i:i + 50]
            loss = F.cross_entropy(net(x[b]), y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    net.eval().requires_grad_(False)
    return net, x[test], y[test]


def _accuracy(model, x, y) -> float:
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


# Strong settings for the strength checks.  StAdv runs at its reference learning rate; eps 0.2
# is 1.5 pixel on 16 x 16 images.  ReColorAdv's reference learning rate (0.001) needs ~100 steps
# to use a large budget, so the strong run raises it to keep the test fast; the reference
# settings are checked separately (test_reference_settings_lower_the_accuracy).
STRONG = {"stadv": dict(eps=0.2, steps=40), "recolor": dict(eps=0.3, steps=30, lr=0.01)}


@pytest.fixture(scope="module")
def strong_runs(digits_model):
    net, x, y = digits_model
    return {name: threat_attack(name, net, x, y, return_perturbation=True, **STRONG[name])
            for name in THREATS}


# --- building blocks -----------------------------------------------------------------------------

def test_zero_flow_is_the_identity_and_a_pixel_flow_shifts_by_a_pixel():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 3, 5, 7, generator=g)
    flow = torch.zeros(2, 5, 7, 2)
    assert torch.allclose(apply_flow(x, flow), x, atol=1e-6)
    # +1 pixel in x (2 / (W - 1) in normalised units): pixel j shows pixel j + 1; the sampling
    # point of the last column is clamped into the image
    flow[..., 0] = 2.0 / (7 - 1)
    out = apply_flow(x, flow)
    assert torch.allclose(out[..., :-1], x[..., 1:], atol=1e-6)
    assert torch.allclose(out[..., -1], x[..., -1], atol=1e-6)
    # -2 pixels in y: row i shows row i - 2, the first two rows show row 0
    flow = torch.zeros(2, 5, 7, 2)
    flow[..., 1] = -2 * 2.0 / (5 - 1)
    out = apply_flow(x, flow)
    assert torch.allclose(out[:, :, 2:], x[:, :, :-2], atol=1e-6)
    assert torch.allclose(out[:, :, :2], x[:, :, :1].expand(-1, -1, 2, -1), atol=1e-6)
    # half a pixel in x: bilinear, the mean of the two neighbours
    flow = torch.zeros(2, 5, 7, 2)
    flow[..., 0] = 0.5 * 2.0 / (7 - 1)
    out = apply_flow(x, flow)
    assert torch.allclose(out[..., :-1], (x[..., :-1] + x[..., 1:]) / 2, atol=1e-6)
    # one flow per image, shared by the channels
    flow = torch.zeros(2, 5, 7, 2)
    flow[1, ..., 0] = 2.0 / (7 - 1)
    out = apply_flow(x, flow)
    assert torch.allclose(out[0], x[0], atol=1e-6)
    assert torch.allclose(out[1, :, :, :-1], x[1, :, :, 1:], atol=1e-6)
    with pytest.raises(ValueError, match=re.escape("got (2, 5, 6, 2)")):
        apply_flow(x, torch.zeros(2, 5, 6, 2))


def _smoothness_by_shifts(field):
    """Xiao et al.'s flow loss written out: for each grid axis, compare every node with its
    neighbour on either side (an edge node with itself)."""
    total = torch.zeros(field.shape[0], dtype=field.dtype)
    for dim in range(1, field.ndim - 1):
        n = field.shape[dim]
        after = torch.cat([field.narrow(dim, 1, n - 1), field.narrow(dim, n - 1, 1)], dim)
        before = torch.cat([field.narrow(dim, 0, 1), field.narrow(dim, 0, n - 1)], dim)
        for other in (after, before):
            terms = ((other - field) ** 2).sum(-1).add(1e-10).sqrt()
            total += terms.reshape(field.shape[0], -1).sum(1)
    return total


@pytest.mark.parametrize("shape", [(2, 5, 6, 2), (3, 4, 5, 6, 3), (2, 1, 4, 2)])
def test_smoothness_is_the_flow_loss_and_its_gradient_the_closed_form(shape):
    g = torch.Generator().manual_seed(1)
    field = torch.randn(shape, generator=g, dtype=torch.float64)
    assert torch.allclose(smoothness(field), _smoothness_by_shifts(field), rtol=1e-12)
    # a constant field is perfectly smooth: only the sqrt(1e-10) terms remain
    const = torch.ones(shape, dtype=torch.float64)
    nodes = math.prod(shape[1:-1])
    assert torch.allclose(smoothness(const), torch.full((shape[0],), 2 * (len(shape) - 2) * nodes
                                                        * 1e-5, dtype=torch.float64))
    # channel-first layout (the attack's internal one) and the closed-form gradient
    cf = field.movedim(-1, 1).contiguous()
    assert torch.allclose(smoothness(cf, channel_dim=1), smoothness(field), rtol=1e-12)
    leaf = cf.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(smoothness(leaf, channel_dim=1).sum(), leaf)
    assert torch.allclose(T._smoothness_grad(cf, 1), auto, rtol=1e-9, atol=1e-12)


def test_colour_space_is_the_scaled_cie_luv():
    rgb = torch.tensor([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0],
                        [0.5, 0.5, 0.5]]).view(5, 3, 1, 1)
    luv = rgb_to_luv(rgb).view(5, 3) * torch.tensor([100.0, 200.0, 200.0]) \
        - torch.tensor([0.0, 100.0, 100.0])
    # L*u*v* (D65) of white, black, sRGB red, sRGB blue, mid grey (published values)
    expected = torch.tensor([[100.0, 0.0, 0.0], [0.0, 0.0, 0.0], [53.23, 175.05, 37.75],
                             [32.30, -9.40, -130.34], [53.39, 0.0, 0.0]])
    assert torch.allclose(luv, expected, atol=0.1), luv
    g = torch.Generator().manual_seed(2)
    x = torch.rand(4, 3, 6, 6, generator=g)
    assert torch.allclose(luv_to_rgb(rgb_to_luv(x)), x, atol=2e-3)  # 4-digit sRGB matrices


def test_colour_grid_zero_is_the_identity_even_for_saturated_colours():
    g = torch.Generator().manual_seed(3)
    x = torch.rand(3, 3, 8, 8, generator=g)
    x[0, :, 0, 0] = torch.tensor([1.0, 0.0, 0.0])  # u* = 175: outside the grid's u range
    x[0, :, 0, 1] = torch.tensor([0.0, 0.0, 1.0])  # v* = -130: outside the grid's v range
    delta = torch.zeros((3,) + RECOLOR_RESOLUTION + (3,))
    assert torch.allclose(apply_color_grid(x, delta), x, atol=2e-3)
    # a constant shift of L (0.05 = 5 L* units) moves every in-gamut colour by exactly that
    grey = torch.full((1, 3, 2, 2), 0.5)
    delta = torch.zeros((1,) + RECOLOR_RESOLUTION + (3,))
    delta[..., 0] = 0.05
    out = rgb_to_luv(apply_color_grid(grey, delta))
    assert torch.allclose(out - rgb_to_luv(grey), torch.tensor([0.05, 0.0, 0.0]).view(1, 3, 1, 1),
                          atol=1e-3)
    # one node only changes colours in the cells around it: black stays black
    delta = torch.zeros((1,) + RECOLOR_RESOLUTION + (3,))
    delta[0, -1, 15:17, 15:17, 0] = -0.06  # the 4 nodes around white (u = v = 0.5 = 15.5 / 31)
    dark = torch.zeros(1, 3, 2, 2)
    assert torch.equal(apply_color_grid(dark, delta), luv_to_rgb(rgb_to_luv(dark)))
    assert apply_color_grid(torch.ones(1, 3, 2, 2), delta).max() < 0.95


# --- the attacks ---------------------------------------------------------------------------------

def test_results_inside_the_threat_model_and_robust_flags_verified(digits_model, strong_runs):
    net, x, y = digits_model
    for name, res in strong_runs.items():
        eps = STRONG[name]["eps"]
        assert isinstance(res, ThreatResult)
        assert res.x_adv.shape == x.shape and res.x_adv.dtype == x.dtype
        assert res.x_adv.min() >= 0 and res.x_adv.max() <= 1
        assert res.robust.dtype == torch.bool and res.robust.shape == y.shape
        with torch.no_grad():
            assert torch.equal(res.robust, net(res.x_adv).argmax(1) == y)
        assert res.robust_accuracy == pytest.approx(res.robust.float().mean().item())
        p = res.perturbation
        assert p.abs().max().item() <= eps * (1 + 1e-6)
        if name == "stadv":
            assert p.shape == (len(x), 16, 16, 2)
            again = apply_flow(x, p)
        else:
            assert p.shape == (len(x),) + RECOLOR_RESOLUTION + (3,)
            again = apply_color_grid(x, p)
        # x_adv is the image of p (up to float rounding, amplified by the sRGB gamma near 0)
        assert torch.allclose(again, res.x_adv, atol=1e-4)
        # points misclassified when clean are not attacked: clean image, zero perturbation
        with torch.no_grad():
            wrong = net(x).argmax(1) != y
        assert wrong.any() and not res.robust[wrong].any()
        assert torch.equal(res.x_adv[wrong], x[wrong]) and not p[wrong].any()


def test_strong_attacks_break_the_model_tiny_ones_change_little(digits_model, strong_runs):
    net, x, y = digits_model
    clean = _accuracy(net, x, y)
    assert clean >= 0.85
    for name, res in strong_runs.items():
        assert res.robust_accuracy <= 0.25 * clean, (name, res.robust_accuracy, clean)
    for name in THREATS:
        res = threat_attack(name, net, x, y, eps=1e-3, steps=5)
        assert res.robust_accuracy >= clean - 2 / len(x), name
        assert (res.x_adv - x).abs().max() < 0.02, name
        # StAdv: 1e-3 is 0.0075 pixel; ReColorAdv: 1e-3 of the scaled LUV axes
        assert (res.x_adv - x).abs().mean() < 2e-3, name


def test_reference_settings_lower_the_accuracy(digits_model):
    """eps and learning rate of perceptual-advex / OODRobustBench (fewer steps than 100)."""
    net, x, y = digits_model
    clean = _accuracy(net, x, y)
    assert (T.STADV_LR, T.STADV_SMOOTH, T.RECOLOR_LR, T.RECOLOR_SMOOTH) == (
        0.01, 0.0025, 0.001, 0.0036)
    assert RECOLOR_RESOLUTION == (16, 32, 32)
    st = stadv_attack(net, x, y, steps=30)
    assert st.robust_accuracy <= 0.5 * clean
    # ReColorAdv at lr 0.001 moves a node by at most ~0.03 in 30 steps: on the 12 points closest
    # to the decision boundary (smallest clean margin) it must already break some
    with torch.no_grad():
        near = T.logit_margin(net(x), y).argsort()[:12]
    rc = recolor_attack(net, x[near], y[near], steps=30)
    assert rc.robust_accuracy <= _accuracy(net, x[near], y[near]) - 2 / 12


def test_reference_lr_keeps_the_reference_step_relative_to_the_bound(digits_model):
    """The reference's Adam rate at its bound; x bound / its bound elsewhere (x lr_scale).  A 6x
    bound then takes 6x the step, so a run of 10 steps at 10x the reference's step reaches it
    (at the reference's absolute rate x 10, 0.01, it would stop near a sixth of it)."""
    assert T.reference_lr("stadv", 0.05) == T.STADV_LR
    assert T.reference_lr("recolor", 0.06) == T.RECOLOR_LR
    assert T.reference_lr("recolor", 0.36) == pytest.approx(0.001 * 6)
    assert T.reference_lr("stadv", 0.1, 5) == pytest.approx(0.01 * 2 * 5)
    net, x, y = digits_model
    eps, steps = 0.36, 10
    res = recolor_attack(net, x, y, eps=eps, steps=steps, lr=T.reference_lr("recolor", eps, 10),
                         return_perturbation=True)
    assert res.perturbation.abs().amax().item() >= 0.9 * eps


def _reference_run(name, model, x, y, eps, steps, lr):
    """The mister_ed formulation written out: torch.optim.Adam on
    sum(CW margin + lambda * smoothness(params - identity)), the projection (clip the sampling
    grid / node colours to the valid range -- ReColorAdv: also into the sRGB gamut --, then to
    identity +- eps) at the start of every forward pass, a last forward pass after the last step.
    Parametrised by the offset from the identity: the same for Adam in exact arithmetic, while
    the reference's absolute parameters leave rounding noise (1e-17 in float64) between nodes
    whose offsets are equal, which the smoothness term (|d| against sqrt(1e-10)) and Adam (|g|
    against 1e-8) blow up to steps of order lr.  Bookkeeping as threats.py documents it: per
    point the first misclassified iterate, else the one with the lowest margin."""
    n = x.shape[0]
    if name == "stadv":
        theta = torch.eye(2, 3, dtype=x.dtype).expand(n, 2, 3)
        ident = F.affine_grid(theta, list(x.shape), align_corners=True)
        lam = 0.0025 / eps

        def clip(q):
            return q.clamp(-1, 1)

        def image(q):
            return F.grid_sample(x, q, align_corners=True)  # the reference's 'zeros' padding
    else:
        axes = [torch.arange(r, dtype=x.dtype) / (r - 1) for r in RECOLOR_RESOLUTION]
        ident = torch.stack(torch.meshgrid(*axes, indexing="ij"), -1).expand(n, -1, -1, -1, -1)
        lam = 0.0036 / eps
        luv = rgb_to_luv(x)
        where = (2 * luv - 1).flip(1).permute(0, 2, 3, 1)[:, None]

        def clip(q):
            flat = q.clamp(0, 1).reshape(n, -1, 3).transpose(1, 2)
            return rgb_to_luv(luv_to_rgb(flat)).transpose(1, 2).reshape(q.shape)

        def image(q):  # interpolate the node colours; index clamped to the grid
            cols = F.grid_sample(q.permute(0, 4, 1, 2, 3), where, padding_mode="border",
                                 align_corners=True)[:, :, 0]
            return luv_to_rgb(cols)
    offset = torch.zeros_like(ident).requires_grad_(True)
    opt = torch.optim.Adam([offset], lr=lr)
    best_x, best_p = x.clone(), torch.zeros_like(ident)
    best_m = torch.full((n,), float("inf"), dtype=x.dtype)
    done = torch.zeros(n, dtype=torch.bool)
    for it in range(steps + 1):
        with torch.no_grad():
            offset.copy_((clip(ident + offset) - ident).clamp(-eps, eps))
        out = image(ident + offset).clamp(0, 1)
        logits = model(out)
        other = logits.clone()
        other[torch.arange(n), y] = float("-inf")
        margin = logits[torch.arange(n), y] - other.amax(1)
        with torch.no_grad():
            broken = logits.argmax(1) != y
            take = ~done & (broken | (margin < best_m))
            best_x[take], best_p[take] = out[take], offset[take]
            best_m = torch.where(take, margin, best_m)
            done |= broken
        if it == steps:
            break
        loss = (margin + lam * _smoothness_by_shifts(offset)).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return best_x, best_p, ~done


@pytest.mark.parametrize("name,eps,steps,lr,param_tol", [("stadv", 0.01, 12, 0.01, 1e-9),
                                                         ("recolor", 0.1, 8, 0.01, 2e-3)])
def test_step_for_step_the_reference_formulation(digits_model, name, eps, steps, lr, param_tol):
    """In float64, on grey digits (whose colours lie inside the ReColorAdv grid, where this module
    and the reference interpolate alike).  StAdv agrees to rounding.  ReColorAdv agrees on the
    images and the robust flags; its grid nodes that no pixel uses move only under the smoothness
    term, whose sqrt(d^2 + 1e-10) and Adam's eps 1e-8 make their path chaotic: a 1e-15
    difference in the first projection (operation order) grows to ~1e-4 in 8 steps."""
    net, x, y = digits_model
    net = copy.deepcopy(net).double()
    with torch.no_grad():
        near = T.logit_margin(net(x.double()), y).argsort()[:10]  # close to the boundary: some break
    xs, ys = x[near].double(), y[near]
    res = threat_attack(name, net, xs, ys, eps=eps, steps=steps, lr=lr, return_perturbation=True)
    with torch.no_grad():
        clean_ok = net(xs).argmax(1) == ys
    ref_x, ref_p, ref_robust = _reference_run(name, net, xs[clean_ok], ys[clean_ok], eps, steps,
                                              lr)
    assert torch.equal(res.robust[clean_ok], ref_robust)
    assert 0 < ref_robust.sum() < clean_ok.sum()  # the comparison covers both kinds of points
    assert res.x_adv.dtype == torch.float64
    assert torch.allclose(res.x_adv[clean_ok], ref_x, atol=1e-5 if name == "recolor" else 1e-9)
    assert torch.allclose(res.perturbation[clean_ok], ref_p, atol=param_tol)


def test_grad_evals_count_the_forward_backward_passes(digits_model):
    net, x, y = digits_model
    passes = {"fwd": 0, "bwd": 0}

    def on_forward(module, inputs, output):
        if torch.is_grad_enabled() and inputs[0].requires_grad:
            passes["fwd"] += inputs[0].shape[0]

    def on_backward(module, grad_input, grad_output):
        passes["bwd"] += grad_output[0].shape[0]

    n_correct = round(_accuracy(net, x, y) * len(x))
    hooks = [net.register_forward_hook(on_forward), net.register_full_backward_hook(on_backward)]
    try:
        strong = stadv_attack(net, x, y, eps=0.2, steps=40)
        counted = dict(passes)
        weak = stadv_attack(net, x, y, eps=1e-4, steps=7)
    finally:
        for h in hooks:
            h.remove()
    assert strong.grad_evals == counted["fwd"] == counted["bwd"] > 0
    # broken points stop: far fewer than steps x points
    assert n_correct <= strong.grad_evals < 0.3 * 40 * n_correct
    # nothing breaks at eps 1e-4: every clean-correct point runs every step
    assert weak.robust.sum().item() == n_correct
    assert weak.grad_evals == 7 * n_correct == passes["fwd"] - counted["fwd"]


@pytest.mark.parametrize("name", sorted(THREATS))
def test_deterministic_and_batching_does_not_change_the_result(digits_model, name):
    net, x, y = digits_model
    x, y = x[:14], y[:14]
    kwargs = dict(eps=0.08, steps=6, return_perturbation=True)
    if name == "recolor":
        kwargs["lr"] = 0.01
    a = threat_attack(name, net, x, y, **kwargs)
    b = threat_attack(name, net, x, y, **kwargs)
    assert torch.equal(a.x_adv, b.x_adv) and torch.equal(a.robust, b.robust)
    assert torch.equal(a.perturbation, b.perturbation) and a.grad_evals == b.grad_evals
    # no random start in the reference configuration: the seed does not matter
    c = threat_attack(name, net, x, y, seed=5, **kwargs)
    assert torch.equal(a.x_adv, c.x_adv)
    # chunks of 3 points give what one batch gives (every point is optimised on its own)
    d = threat_attack(name, net, x, y, batch_size=3, **kwargs)
    assert torch.allclose(a.x_adv, d.x_adv, atol=1e-6) and torch.equal(a.robust, d.robust)
    assert torch.allclose(a.perturbation, d.perturbation, atol=1e-6)
    assert a.grad_evals == d.grad_evals
    # the same function under both names
    assert torch.equal(THREATS[name](net, x, y, **kwargs).x_adv, a.x_adv)


def test_model_left_as_it_was(digits_model):
    _, x, y = digits_model
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Dropout(0.5), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 14 * 14, 10))
    model[0].bias.requires_grad_(False)  # a mix of trainable and frozen parameters
    flags = [p.requires_grad for p in model.parameters()]
    model.train()
    seen = []  # (training, any parameter trainable) at every forward pass during the attack
    hook = model.register_forward_hook(lambda m, i, o: seen.append(
        (m.training, any(p.requires_grad for p in m.parameters()))))
    for attack in (stadv_attack, recolor_attack):
        a = attack(model, x[:8], y[:8], steps=3)
        assert seen and set(seen) == {(False, False)}  # eval mode, parameters frozen
        assert [p.requires_grad for p in model.parameters()] == flags
        assert all(p.grad is None for p in model.parameters())  # no weight gradients
        assert model.training and all(m.training for m in model.modules())
        b = attack(model, x[:8], y[:8], steps=3)  # eval mode inside: dropout off
        assert torch.equal(a.x_adv, b.x_adv)
    hook.remove()


class _CallCounter(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model, self.calls = model, 0

    def forward(self, x):
        self.calls += 1
        return self.model(x)


@pytest.mark.parametrize("name", sorted(THREATS))
@pytest.mark.parametrize("change,expected", [
    ({"eps": 0.0}, "eps must be a finite number > 0, got 0.0"),
    ({"eps": -0.1}, "got -0.1"),
    ({"eps": float("nan")}, "got nan"),
    ({"eps": float("inf")}, "got inf"),
    ({"eps": "0.05"}, "got '0.05'"),
    ({"steps": 0}, "steps must be >= 1, got 0"),
    ({"steps": -3}, "steps must be >= 1, got -3"),
    ({"steps": 2.5}, "steps must be an integer >= 1, got 2.5"),
    ({"batch_size": 0}, "batch_size must be >= 1, got 0"),
    ({"seed": 1.5}, "seed must be an integer, got 1.5"),
    ({"lr": 0.0}, "lr must be a finite number > 0, got 0.0"),
    ({"x_ndim": 3}, "x must be a batch of images (N, C, H, W), got shape (10, 16, 16)"),
    ({"x_ndim": 5}, "got shape (10, 1, 3, 16, 16)"),
    ({"x_value": 1.5}, "x must lie in [0, 1], got values in [0.0, 1.5]"),
    ({"x_value": -0.25}, "got values in [-0.25, "),
    ({"x_value": float("nan")}, "x must lie in [0, 1]"),
    ({"x_int": True}, "x must be a floating-point tensor, got torch.int64"),
    ({"y_len": 9}, "x of shape (10, 3, 16, 16) and y of shape (9,)"),
    ({"y_float": True}, "y must be an integer tensor of labels, got torch.float32"),
    ({"labels": 12}, "labels must lie in [0, 9], got values in ["),
    ({"labels": -1}, "labels must lie in [0, 9], got values in [-1, "),
])
def test_bad_input_is_refused_with_the_value_named(digits_model, name, change, expected):
    net, x, y = digits_model
    model = _CallCounter(net)
    kwargs = {"eps": 0.05, "steps": 5}
    kwargs.update({k: v for k, v in change.items() if k in ("eps", "steps", "batch_size", "seed",
                                                             "lr")})
    xb, yb = x[:10].clone(), y[:10].clone()
    if "x_ndim" in change:
        xb = xb[:, 0] if change["x_ndim"] == 3 else xb[:, None]
    if "x_value" in change:
        xb[3, 0, 2, 2] = change["x_value"]
    if "x_int" in change:
        xb = xb.long()
    if "y_len" in change:
        yb = yb[:change["y_len"]]
    if "y_float" in change:
        yb = yb.float()
    if "labels" in change:
        yb[0] = change["labels"]
    with pytest.raises(ValueError, match=re.escape(expected)):
        threat_attack(name, model, xb, yb, **kwargs)
    # refused before any work: at most a single-image probe for the number of classes
    assert model.calls == (1 if "labels" in change else 0)


def test_recolor_needs_rgb_and_unknown_names_are_refused(digits_model):
    net, x, y = digits_model
    with pytest.raises(ValueError, match=re.escape("needs RGB images (N, 3, H, W), got shape "
                                                   "(10, 1, 16, 16)")):
        recolor_attack(net, x[:10, :1], y[:10])
    with pytest.raises(ValueError, match=re.escape("unknown threat attack 'fog'; known: "
                                                   "recolor, stadv")):
        threat_attack("fog", net, x, y, 0.05, 10)
    assert set(THREATS) == {"stadv", "recolor"}
    assert THREATS["stadv"] is stadv_attack and THREATS["recolor"] is recolor_attack


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda_like_on_cpu(digits_model):
    net, x, y = digits_model
    gpu_net = copy.deepcopy(net).to("cuda")
    for name in THREATS:
        kwargs = dict(eps=0.08, steps=10, return_perturbation=True)
        cpu = threat_attack(name, net, x, y, **kwargs)
        gpu = threat_attack(name, gpu_net, x.cuda(), y.cuda(), **kwargs)
        assert gpu.x_adv.device.type == "cuda" and gpu.robust.device.type == "cuda"
        assert abs(gpu.robust_accuracy - cpu.robust_accuracy) <= 2 / len(x)
        assert gpu.perturbation.abs().max().item() <= 0.08 * (1 + 1e-6)
        assert gpu.x_adv.min() >= 0 and gpu.x_adv.max() <= 1
