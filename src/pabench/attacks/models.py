"""Networks of the adversarial experiments (PA paper, Section 4.1): the self-trained zoo's
architectures, the JPEG + Reverse Sigmoid defence around a network, checkpoints, and the
RobustBench models (paper scale; the optional `robustbench` package, which needs internet).

Every model takes images in [0, 1] and returns scores for PA: logits, or log-probabilities for
the JPEG + RS defence (whose output is a probability vector; re-softmaxing it would be wrong).
"""
from __future__ import annotations

import pickle
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from pabench.core.io import atomic_path
from pabench.models import BasicBlock, MaxPool2

ARCHS = ("cnn", "preact_resnet18", "wrn28_10")  # and "smallcnn<channels>" (OODRobustBench's zoo)
# Published standardly trained CIFAR-10 networks (pabench.attacks.published), and
# "robustbench/<id>": a RobustBench architecture (the optional package).
CIFAR_RESNETS = {"resnet20": 3, "resnet32": 5, "resnet44": 7, "resnet56": 9}   # blocks per stage
VGGS = {"vgg11_bn": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
        "vgg13_bn": [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
        "vgg16_bn": [64, 64, "M", 128, 128, "M"] + [256] * 3 + ["M"] + ([512] * 3 + ["M"]) * 2,
        "vgg19_bn": [64, 64, "M", 128, 128, "M"] + [256] * 4 + ["M"] + ([512] * 4 + ["M"]) * 2}
# The input normalisation those networks were trained with (chenyaofo/image-classification-codebase,
# conf/cifar10.conf)
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010)
METHODS = ("undefended", "madry", "fast_fgsm", "trades", "jpeg_rs")


class LeNetCNN(nn.Module):
    """A 3-layer CNN (two conv layers and a hidden linear layer, LeCun-style), the backbone of
    the paper's JPEG + RS model and our small-scale zoo."""

    def __init__(self, num_classes: int = 10, image_size: int = 32, in_channels: int = 3,
                 width: int = 32):
        super().__init__()   # width: the first conv's channels (the second has twice as many)
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 5, padding=2), nn.ReLU(), MaxPool2(),
            nn.Conv2d(width, 2 * width, 5, padding=2), nn.ReLU(), MaxPool2(), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(2 * width * (image_size // 4) ** 2, 8 * width),
                                  nn.ReLU(), nn.Linear(8 * width, num_classes))

    def forward(self, x):
        return self.head(self.features(x))


class SmallCNN(nn.Module):
    """Three 3x3 conv layers (c, 2c, 4c channels, each ReLU + 2x2 max-pool) and a 64-unit hidden
    layer: OODRobustBench's quick-scale zoo, small enough that MM5 on every shifted set of ~20
    models fits minutes on 2 cores; `channels` sets the width."""

    def __init__(self, num_classes: int = 10, image_size: int = 32, channels: int = 8):
        super().__init__()
        layers, cin = [], 3
        for cout in (channels, 2 * channels, 4 * channels):
            layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(), MaxPool2()]
            cin = cout
        self.features = nn.Sequential(*layers, nn.Flatten())
        self.head = nn.Sequential(nn.Linear(cin * (image_size // 8) ** 2, 64), nn.ReLU(),
                                  nn.Linear(64, num_classes))

    def forward(self, x):
        return self.head(self.features(x))


class _PreActBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, drop: float = 0.0):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(cout), nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.drop = drop
        self.shortcut = (nn.Conv2d(cin, cout, 1, stride, bias=False)
                         if stride != 1 or cin != cout else None)

    def forward(self, x):
        out = F.relu(self.bn1(x), inplace=True)  # in place: a new tensor took 15% of a CPU forward
        skip = self.shortcut(out) if self.shortcut is not None else x
        out = self.conv1(out)
        out = F.relu(self.bn2(out), inplace=True)
        if self.drop:
            out = F.dropout(out, self.drop, self.training)
        return self.conv2(out) + skip


class ResidualNet(nn.Module):
    """Pre-activation residual network: PreActResNet-18 (He et al. 2016b, Wong 2020's model) or
    WideResNet-28-10 (Zagoruyko & Komodakis 2016, RobustBench's `Standard`) by its stage list."""

    def __init__(self, stages, stem: int, num_classes: int):
        super().__init__()
        self.stem = nn.Conv2d(3, stem, 3, 1, 1, bias=False)
        blocks, cin = [], stem
        for cout, n, stride in stages:
            for i in range(n):
                blocks.append(_PreActBlock(cin, cout, stride if i == 0 else 1))
                cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.bn = nn.BatchNorm2d(cin)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
        out = F.relu(self.bn(self.blocks(self.stem(x))), inplace=True)
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


class Normalized(nn.Module):
    """`net` on inputs in [0, 1], standardised per channel first (mean and std are not weights:
    the state dict holds `net`'s, under "net.")."""

    def __init__(self, net: nn.Module, mean, std):
        super().__init__()
        self.net = net
        self.register_buffer("mean", torch.tensor(mean).view(1, -1, 1, 1), persistent=False)
        self.register_buffer("std", torch.tensor(std).view(1, -1, 1, 1), persistent=False)

    def forward(self, x):
        return self.net((x - self.mean) / self.std)


class CifarResNet(nn.Module):
    """ResNet-20/32/44/56 for CIFAR (He et al. 2016, Section 4.2): a 16-channel 3x3 stem, three
    stages of `blocks` basic blocks at 16, 32, 64 channels (strides 1, 2, 2), global average
    pooling, a linear head."""

    def __init__(self, blocks: int, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        cin = 16
        for i, (cout, stride) in enumerate(((16, 1), (32, 2), (64, 2)), 1):
            stage = [BasicBlock(cin if k == 0 else cout, cout, stride if k == 0 else 1, "downsample")
                     for k in range(blocks)]
            setattr(self, f"layer{i}", nn.Sequential(*stage))
            cin = cout
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class VGG(nn.Module):
    """VGG with BatchNorm for 32x32 inputs (Simonyan & Zisserman 2015, configurations A, B, D,
    E): 3x3 conv-BN-ReLU layers and 2x2 max-pools ("M"), then 512-512-classes linear layers
    with dropout."""

    def __init__(self, layout, num_classes: int = 10):
        super().__init__()
        layers, cin = [], 3
        for v in layout:
            if v == "M":
                layers.append(MaxPool2())
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU()]
                cin = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(512, 512), nn.ReLU(), nn.Dropout(),
                                        nn.Linear(512, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def build(arch: str, num_classes: int = 10, image_size: int = 32) -> nn.Module:
    if arch in CIFAR_RESNETS:
        return Normalized(CifarResNet(CIFAR_RESNETS[arch], num_classes), CIFAR10_MEAN, CIFAR10_STD)
    if arch in VGGS:
        return Normalized(VGG(VGGS[arch], num_classes), CIFAR10_MEAN, CIFAR10_STD)
    if arch.startswith("robustbench/"):
        from pabench.attacks import robustbench

        return robustbench.architecture(arch.split("/", 1)[1], "cifar10")
    if arch == "cnn":
        return LeNetCNN(num_classes, image_size)
    if re.fullmatch(r"smallcnn[1-9][0-9]*", arch):
        return SmallCNN(num_classes, image_size, int(arch[len("smallcnn"):]))
    if arch == "preact_resnet18":
        return ResidualNet([(64, 2, 1), (128, 2, 2), (256, 2, 2), (512, 2, 2)], 64, num_classes)
    if arch == "wrn28_10":
        return ResidualNet([(160, 4, 1), (320, 4, 2), (640, 4, 2)], 16, num_classes)
    raise ValueError(f"unknown architecture {arch!r}; choose one of {ARCHS}, smallcnn<channels>, "
                     f"{', '.join(CIFAR_RESNETS)}, {', '.join(VGGS)} or robustbench/<id>")


class _JpegIdentityGrad(torch.autograd.Function):
    """JPEG compression forward, identity backward (BPDA, Athalye et al. 2018): the attacks see
    the defence's true output but a usable gradient."""

    @staticmethod
    def forward(ctx, x, quality):
        return jpeg(x, quality)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def jpeg(x: torch.Tensor, quality: int) -> torch.Tensor:
    """Round-trip a batch of [0, 1] images through JPEG at `quality` (torchvision's codec)."""
    from torchvision.io import decode_jpeg, encode_jpeg

    u8 = (x.detach() * 255).round().clamp(0, 255).to(torch.uint8).cpu()
    decoded = decode_jpeg(encode_jpeg(list(u8), quality=quality))
    return torch.stack(decoded).to(x.device, x.dtype) / 255


def reverse_sigmoid(p: torch.Tensor, beta: float, gamma: float) -> torch.Tensor:
    """Reverse Sigmoid (Lee et al. 2018): p' = normalize(clip(p - beta(sigmoid(gamma logit p)
    - 1/2), 0, 1))."""
    p = p.clamp(1e-7, 1 - 1e-7)  # finite logit
    q = (p - beta * (torch.sigmoid(gamma * torch.log(p / (1 - p))) - 0.5)).clamp(0, 1)
    # A tiny floor keeps log q finite when the clip hits 0 (it shifts no visible probability).
    q = q.clamp_min(1e-12)
    return q / q.sum(1, keepdim=True)


class JpegReverseSigmoid(nn.Module):
    """The paper's JPEG + RS defended model: JPEG(quality) -> network -> softmax -> Reverse
    Sigmoid.  Returns log-probabilities."""

    def __init__(self, net: nn.Module, quality: int = 75, beta: float = 1.0, gamma: float = 0.1):
        super().__init__()
        self.net, self.quality, self.beta, self.gamma = net, quality, beta, gamma

    def extra_repr(self):  # in repr(model), hence in the attack runs' fingerprints
        return f"quality={self.quality}, beta={self.beta}, gamma={self.gamma}"

    def forward(self, x):
        x = _JpegIdentityGrad.apply(x, self.quality)
        return torch.log(reverse_sigmoid(F.softmax(self.net(x), 1), self.beta, self.gamma))


def save_zoo_model(net: nn.Module, path, arch: str, method: str, num_classes: int, image_size: int,
                   extra: dict | None = None) -> None:
    state = {"state_dict": net.state_dict(), "arch": arch, "method": method,
             "num_classes": num_classes, "image_size": image_size, **(extra or {})}
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_zoo_model(path, jpeg_rs: dict | None = None, device="cpu") -> tuple[nn.Module, dict]:
    """A self-trained zoo model in eval mode, wrapped in the JPEG + RS defence when it was trained
    for it.  Loaded with weights_only=True: a file that would run code is refused."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: model checkpoint not found (train it with the workflow)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, ValueError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path}: not a readable checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(state, dict) or not isinstance(state.get("state_dict"), dict):
        raise ValueError(f"{path}: not a pabench model checkpoint (expected a dict with a "
                         "'state_dict' and the architecture)")
    missing = [k for k in ("arch", "method", "num_classes", "image_size") if k not in state]
    if missing:
        raise ValueError(f"{path}: checkpoint lacks {missing}")
    net = build(state["arch"], state["num_classes"], state["image_size"])
    try:
        net.load_state_dict(state["state_dict"])
    except RuntimeError as err:
        raise ValueError(f"{path}: weights do not match architecture {state['arch']!r} "
                         f"({str(err).splitlines()[0]})") from None
    model = net
    if state["method"] == "jpeg_rs":
        model = JpegReverseSigmoid(net, **(jpeg_rs or {}))
    return model.to(device).eval(), {k: v for k, v in state.items() if k != "state_dict"}

