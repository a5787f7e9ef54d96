"""PPGD and LPA, the LPIPS-bounded threat-shift attacks: the LPIPS distance against its formula,
the weights download (torchvision's hash prefix, a pinned SHA-256, files of the real formats
served from file:// URLs), conjugate gradient on a linear map, the projection, and the attacks on
a small CNN trained here (inside the bound, strength, determinism, chunking, bad input)."""
import copy
import hashlib

import pytest
import torch
import torch.nn.functional as F
import torchvision
from sklearn.datasets import load_digits

from pabench.attacks import perceptual as P
from pabench.attacks.threats import ThreatResult

pytestmark = pytest.mark.usefixtures("one_thread")

N_TEST = 24
TOL = 1e-4   # float32 rounding of a distance of order 1


@pytest.fixture(scope="module")
def lpips():
    return P.load_lpips("alexnet_cifar", "random")


@pytest.fixture(scope="module")
def digits():
    """A small CNN on the 8x8 digits upsampled to 16x16, grey in 3 channels (about 2 s), and
    N_TEST held-out points it classifies correctly."""
    d = load_digits()
    x = torch.tensor(d.data / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    x = F.interpolate(x, size=16, mode="bilinear", align_corners=False).clamp(0, 1).repeat(1, 3, 1, 1)
    y = torch.tensor(d.target)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    train, test = perm[:1500], perm[1500:]
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(16 * 4 * 4, 10))
    opt = torch.optim.Adam(net.parameters(), 1e-2)
    for _ in range(4):
        for i in range(0, len(train), 50):
            b = train[i:i + 50]
            opt.zero_grad()
            F.cross_entropy(net(x[b]), y[b]).backward()
            opt.step()
    net.eval()
    with torch.no_grad():
        right = test[net(x[test]).argmax(1) == y[test]]
    assert len(right) >= 0.9 * len(test)
    return net, x[right[:N_TEST]], y[right[:N_TEST]]


@pytest.fixture(scope="module")
def runs(digits, lpips):
    net, x, y = digits
    return {name: fn(net, lpips, x, y, eps=0.5, steps=10) for name, fn in
            (("ppgd", P.ppgd_attack), ("lpa", P.lpa_attack))}


def test_lpips_distance_is_the_normalised_activation_distance(lpips):
    torch.manual_seed(1)
    a, b = torch.rand(3, 3, 32, 32), torch.rand(3, 3, 32, 32)
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

    def phi(img):   # module by module, keeping the output of every ReLU
        h, out = (img - mean) / std, []
        for layer in lpips.features:
            h = layer(h)
            if isinstance(layer, torch.nn.ReLU):
                unit = h / (h.pow(2).sum(1, keepdim=True).sqrt() + 1e-10)
                out.append((unit / (h.shape[2] * h.shape[3]) ** 0.5).flatten(1))
        return torch.cat(out, 1)

    with torch.no_grad():
        expected = (phi(a) - phi(b)).norm(dim=1)
        assert torch.allclose(lpips.distance(a, b), expected, atol=1e-6)
        assert torch.allclose(lpips.distance(b, a), expected, atol=1e-6)
        assert lpips.distance(a, a).abs().max() == 0
        # five layers, each of unit norm per position over sqrt(HW) positions: |phi| = sqrt(5)
        assert torch.allclose(lpips(a).norm(dim=1), torch.full((3,), 5 ** 0.5), atol=1e-4)


def test_random_weights_are_seeded_and_bad_names_refused():
    torch.manual_seed(123)
    a = P.load_lpips("alexnet_cifar", "random")
    b = P.load_lpips("alexnet_cifar", "random")
    assert all(torch.equal(u, v) for u, v in zip(a.state_dict().values(), b.state_dict().values()))
    imagenet = P.load_lpips("alexnet", "random")
    with torch.no_grad():
        assert imagenet(torch.rand(2, 3, 64, 64)).shape[0] == 2
    with pytest.raises(ValueError, match="LPIPS network must be one of"):
        P.load_lpips("vgg", "random")
    with pytest.raises(ValueError, match="LPIPS weights must be one of"):
        P.load_lpips("alexnet_cifar", "pretrained")


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_torchvision_alexnet_weights_checked_by_their_hash_prefix(tmp_path):
    """A file in torchvision's format (AlexNet's state dict: features.* and classifier.*; the
    classifier, 58M of its 61M parameters and never read, shrunk here to keep the test fast),
    named as torchvision names its files (the SHA-256 prefix after the last dash), from a
    file:// URL."""
    torch.manual_seed(5)
    reference = torchvision.models.alexnet(weights=None)
    state = {k: v for k, v in reference.state_dict().items() if k.startswith("features.")}
    state.update({"classifier.1.weight": torch.zeros(8, 9216), "classifier.6.bias": torch.zeros(1000)})
    raw = tmp_path / "raw.pth"
    torch.save(state, raw)
    served = tmp_path / "srv" / f"alexnet-owt-{_sha(raw)[:8]}.pth"
    served.parent.mkdir()
    raw.rename(served)
    net = P.load_lpips("alexnet", "download", tmp_path / "lpips", url=served.as_uri())
    for name, value in reference.features.state_dict().items():
        assert torch.equal(net.features.state_dict()[name], value)
    assert (tmp_path / "lpips" / served.name).is_file()
    P.load_lpips("alexnet", "download", tmp_path / "lpips", url=served.as_uri())  # kept: re-checked
    # a file whose content does not match the prefix in its name is refused and not kept
    wrong = tmp_path / "srv" / "alexnet-owt-00000000.pth"
    wrong.write_bytes(served.read_bytes())
    with pytest.raises(ValueError, match="checksum mismatch .*expected 00000000.* not kept"):
        P.fetch_weights("alexnet", tmp_path / "bad", url=wrong.as_uri())
    assert not (tmp_path / "bad" / wrong.name).exists()


def test_alexnet_cifar_checkpoint_loaded_pinned_sha_checked(tmp_path, caplog):
    """perceptual-advex's checkpoint: {'model': AlexNetFeatureModel state dict}, whose keys
    name every module twice (model.features.* and the layer aliases) plus the classifier."""
    torch.manual_seed(6)
    features = P.cifar_alexnet_features()
    state = {f"model.features.{k}": v for k, v in features.state_dict().items()}
    state.update({f"layer1.{k}": v for k, v in features[:2].state_dict().items()})
    state["model.classifier.1.weight"] = torch.zeros(4096, 1024)
    served = tmp_path / "srv" / "alexnet_cifar.pt"
    served.parent.mkdir()
    torch.save({"model": state, "epoch": 90}, served)
    net = P.load_lpips("alexnet_cifar", "download", tmp_path / "w", url=served.as_uri())
    assert all(torch.equal(net.features.state_dict()[k], v) for k, v in features.state_dict().items())
    assert _sha(served) in caplog.text   # no published checksum: logged, to be pinned
    P.load_lpips("alexnet_cifar", "download", tmp_path / "w2", url=served.as_uri(),
                 sha256=_sha(served))
    with pytest.raises(ValueError, match=f"checksum mismatch .*expected {'ab' * 32}"):
        P.load_lpips("alexnet_cifar", "download", tmp_path / "w3", url=served.as_uri(),
                     sha256="ab" * 32)
    assert not (tmp_path / "w3" / "alexnet_cifar.pt").exists()
    other = tmp_path / "srv2" / "alexnet_cifar.pt"
    other.parent.mkdir()
    torch.save({"state_dict": {"fc.weight": torch.zeros(2)}}, other)
    with pytest.raises(ValueError, match="holds no model.features"):
        P.load_lpips("alexnet_cifar", "download", tmp_path / "w4", url=other.as_uri())
    assert not (tmp_path / "w4" / "alexnet_cifar.pt").exists()
    junk = tmp_path / "srv3" / "alexnet_cifar.pt"
    junk.parent.mkdir()
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a PyTorch weights file"):
        P.load_lpips("alexnet_cifar", "download", tmp_path / "w5", url=junk.as_uri())


def test_conjugate_gradient_solves_the_normal_equations_of_a_linear_map():
    """For phi linear, J^T J s = g has the exact solution (W^T W)^-1 g, which 5 CG iterations
    reach in 3 dimensions (the finite difference of a linear map is exact).  A point whose
    residual falls below the reference's tolerance (|r|^2 < 0.1) stops there, on its own."""
    torch.manual_seed(2)
    w = torch.randn(4, 3, dtype=torch.float64)
    a = w.T @ w
    lin = lambda p: p.flatten(1) @ w.T   # noqa: E731
    p = torch.randn(3, 1, 1, 3, dtype=torch.float64, requires_grad=True)
    g = 100 * torch.randn(3, 1, 1, 3, dtype=torch.float64)
    g[2] = g[2] / g[2].norm() * 0.2            # |g|^2 = 0.04 < 0.1: one iteration only
    s = P._cg_solve(lin, p, lin(p), g).flatten(1)
    g = g.flatten(1)
    expected = torch.linalg.solve(a, g[:2].T).T
    assert torch.allclose(s[:2], expected, rtol=1e-6, atol=1e-6)
    one_step = (g[2] @ g[2]) / (g[2] @ a @ g[2]) * g[2]    # steepest descent's first step
    assert torch.allclose(s[2], one_step, atol=1e-9)
    assert not torch.allclose(s[2], torch.linalg.solve(a, g[2]), atol=1e-3)


def test_projection_moves_only_points_outside_the_ball_into_it(lpips):
    torch.manual_seed(3)
    x = torch.rand(6, 3, 16, 16)
    far = (x + 0.4 * torch.randn_like(x)).clamp(0, 1)
    near = (x + 1e-3 * torch.randn_like(x)).clamp(0, 1)
    a = torch.cat([far[:3], near[3:]])
    with torch.no_grad():
        before = lpips.distance(x, a)
    bound = float(before[:3].min()) / 2
    assert (before[3:] < bound).all()
    out = P.project(lpips, x, a, bound)
    with torch.no_grad():
        after = lpips.distance(x, out)
    assert (after <= bound + TOL).all() and out.min() >= 0 and out.max() <= 1
    assert torch.equal(out[3:], a[3:])           # already inside: unchanged
    assert (after[:3] > 0.5 * bound).all()       # pulled to the ball, not to x


def test_results_inside_the_ball_and_the_robust_flags_verified(digits, lpips, runs):
    net, x, y = digits
    for name, r in runs.items():
        assert isinstance(r, ThreatResult) and r.x_adv.shape == x.shape
        assert r.x_adv.min() >= 0 and r.x_adv.max() <= 1
        with torch.no_grad():
            assert (lpips.distance(x, r.x_adv) <= 0.5 + TOL).all(), name
            assert torch.equal(net(r.x_adv).argmax(1) == y, r.robust), name
        assert 0 < r.grad_evals <= 10 * len(y) * (P.LPA_BINARY_STEPS if name == "lpa" else 1)


def test_attacks_break_the_model_and_a_tiny_bound_changes_little(digits, lpips, runs):
    net, x, y = digits
    for name, fn in (("ppgd", P.ppgd_attack), ("lpa", P.lpa_attack)):
        assert runs[name].robust_accuracy <= 0.25, (name, runs[name].robust_accuracy)
        tiny = fn(net, lpips, x, y, eps=1e-3, steps=3)
        assert tiny.robust_accuracy >= 0.9, name
        with torch.no_grad():
            assert (lpips.distance(x, tiny.x_adv) <= 1e-3 + TOL).all()


def test_deterministic_seeded_and_chunking_changes_only_rounding(digits, lpips, runs):
    net, x, y = digits
    for name, fn in (("ppgd", P.ppgd_attack), ("lpa", P.lpa_attack)):
        again = fn(net, lpips, x, y, eps=0.5, steps=10)
        assert torch.equal(again.x_adv, runs[name].x_adv), name
        chunked = fn(net, lpips, x, y, eps=0.5, steps=10, batch_size=7)
        assert torch.equal(chunked.robust, runs[name].robust), name
        assert (chunked.x_adv - runs[name].x_adv).abs().max() < 0.05, name
        other = fn(net, lpips, x[:6], y[:6], eps=0.5, steps=10, seed=1)
        assert not torch.equal(other.x_adv, runs[name].x_adv[:6]), name


def test_misclassified_points_untouched_and_the_models_left_as_they_were(digits, lpips):
    net, x, y = digits
    wrong = (y + 1) % 10
    model = copy.deepcopy(net).train()
    params = [p.clone() for p in model.parameters()]
    r = P.lpa_attack(model, lpips, x[:4], wrong[:4], eps=0.5, steps=2)
    assert torch.equal(r.x_adv, x[:4]) and not r.robust.any() and r.grad_evals == 0
    r = P.ppgd_attack(model, lpips, x[:4], y[:4], eps=0.5, steps=2)
    assert model.training and all(p.requires_grad for p in model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(params, model.parameters()))
    assert not lpips.training and not any(p.requires_grad for p in lpips.parameters())


@pytest.mark.parametrize("change, expected", [
    ({"eps": 0.0}, "eps must be a finite number > 0"),
    ({"steps": 0}, "steps must be >= 1"),
    ({"step": -1.0}, "step must be a finite number > 0"),
    ({"x": "grey"}, r"RGB images \(N, 3, H, W\) needed"),
    ({"x": "range"}, r"x must lie in \[0, 1\]"),
    ({"y": "range"}, r"labels must lie in \[0, 9\]"),
    ({"lpips": "alexnet"}, "lpips must be an LPIPS network"),
])
def test_bad_input_is_refused_with_the_value_named(digits, lpips, change, expected):
    net, x, y = digits
    args = {"x": x[:2], "y": y[:2], "lpips": lpips, "eps": 0.5, "steps": 2}
    if change.get("x") == "grey":
        change = {"x": x[:2, :1]}
    elif change.get("x") == "range":
        change = {"x": x[:2] * 2}
    elif change.get("y") == "range":
        change = {"y": y[:2] + 10}
    args.update(change)
    for fn in (P.ppgd_attack, P.lpa_attack):
        with pytest.raises(ValueError, match=expected):
            fn(net, **args)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_runs_on_cuda_like_on_cpu(digits, lpips, runs):
    net, x, y = digits
    gpu_net, gpu_lpips = copy.deepcopy(net).to("cuda"), copy.deepcopy(lpips).to("cuda")
    for name, fn in (("ppgd", P.ppgd_attack), ("lpa", P.lpa_attack)):
        gpu = fn(gpu_net, gpu_lpips, x.cuda(), y.cuda(), eps=0.5, steps=10)
        assert gpu.x_adv.device.type == "cuda" and gpu.robust.device.type == "cuda"
        assert abs(gpu.robust_accuracy - runs[name].robust_accuracy) <= 2 / len(x)
        with torch.no_grad():
            assert (gpu_lpips.distance(x.cuda(), gpu.x_adv) <= 0.5 + TOL).all()
        assert gpu.x_adv.min() >= 0 and gpu.x_adv.max() <= 1


def test_one_ppgd_step_moves_by_its_lpips_step_and_raises_the_loss(digits, lpips):
    """From x itself (no random start) and with a bound far away (no projection), one step moves
    each point by about `step` in LPIPS distance (first order: h = 1e-3) and raises the margin
    loss it maximises."""
    net, x, y = digits
    step = 0.02
    with torch.no_grad():
        before = P._loss(net(x), y)
    best, evals = P._ppgd_chunk(net, lpips, x, y, torch.zeros_like(x), 10.0, 1, step)
    assert evals == len(x)
    with torch.no_grad():
        moved = lpips.distance(x, best.x_adv)
        after = P._loss(net(best.x_adv), y)
    assert ((moved - step).abs() < 0.25 * step).all(), moved
    assert (after > before).float().mean() >= 0.9
