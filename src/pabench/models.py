"""Classifiers for the domain-generalisation experiments: a torchvision backbone (trained from
scratch unless the user supplies weights) and the authors' head
Linear-500 / BatchNorm / ReLU / Dropout 0.2 / Linear-256 / ReLU / Linear-K (activations are our
choice; the authors' code lists the layers only).  `features(x)` gives the 256-d penultimate
representation (Appendix D, Figure 11)."""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

BACKBONES = ("cnn", "cnn_w8", "resnet18", "resnet50")


def _pair_max(x: torch.Tensor) -> torch.Tensor:
    """The maximum of each 2x2 window (stride 2) of x, whose height and width are even."""
    rows = torch.maximum(x[..., 0::2, :], x[..., 1::2, :])
    return torch.maximum(rows[..., 0::2], rows[..., 1::2])


class _StandardLayoutGrad(torch.autograd.Function):
    """The identity, whose backward hands the gradient back in the standard (NCHW) layout."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad.contiguous()


def _standard_layout_grad(module, args):
    if args and isinstance(args[0], torch.Tensor) and args[0].ndim == 4:
        return (_StandardLayoutGrad.apply(args[0]), *args[1:])
    return None


def on_device(model: nn.Module, device) -> nn.Module:
    """The model on `device`; on a CPU with its weights in channels-last layout, where small CNNs'
    convolutions run faster (the DG CNN's training steps 1.7x, the OODRobustBench zoo's gradient
    steps up to 2.7x; the same arithmetic, other rounding).  Input gradients still come back
    in the standard layout: attack code (ours, AutoAttack's) reshapes them with .view."""
    model = model.to(device)
    if torch.device(device).type != "cpu":
        return model
    model.register_forward_pre_hook(_standard_layout_grad)
    return model.to(memory_format=torch.channels_last)


class MaxPool2(nn.Module):
    """nn.MaxPool2d(2): the same outputs and gradients, and without autograd several times
    faster on CPU, whose max_pool2d kernel for NCHW tensors is slow (10 ms for a 32 x 16 x 64 x 64
    batch against 0.7 ms by elementwise maxima; benchmarks/bench_inference.py).  With autograd it
    is max_pool2d itself (its backward beat a hand-written one)."""

    def forward(self, x):
        if torch.is_grad_enabled() and x.requires_grad:
            return F.max_pool2d(x, 2)
        h, w = x.shape[-2] // 2 * 2, x.shape[-1] // 2 * 2  # floor mode, as MaxPool2d
        return _pair_max(x[..., :h, :w])


class BasicBlock(nn.Module):
    """He et al.'s post-activation basic block: conv3x3-BN-ReLU-conv3x3-BN plus the input (a
    strided 1x1 conv + BN where the shape changes), then ReLU.  `shortcut`: the projection's
    name, as the published weights call it (torchvision and the CIFAR ResNets of
    pabench.attacks.published: downsample; the average-case authors' ResNet-18: shortcut)."""

    def __init__(self, cin: int, cout: int, stride: int, shortcut: str = "shortcut"):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut_name = shortcut
        setattr(self, shortcut, nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                              nn.BatchNorm2d(cout))
                if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        return F.relu(out + getattr(self, self.shortcut_name)(x))


class SmallCNN(nn.Module):
    """Three conv-BatchNorm-ReLU blocks of `width`, 2 x and 4 x `width` channels.  Without the
    BatchNorm the pooled features of a small digit on a flat background are tiny (variance
    ~1e-6), the head's BatchNorm then normalises mostly its eps and its running statistics, and
    eval-mode predictions collapse to one class."""

    def __init__(self, width: int = 16):
        super().__init__()

        def block(c_in, c_out):
            return [nn.Conv2d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm2d(c_out), nn.ReLU()]

        self.net = nn.Sequential(
            *block(3, width), MaxPool2(), *block(width, 2 * width), MaxPool2(), *block(2 * width, 4 * width),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.out_features = 4 * width

    def forward(self, x):
        return self.net(x)


def _backbone(name: str) -> tuple[nn.Module, int]:
    if name in ("cnn", "cnn_w8"):
        body = SmallCNN(8 if name == "cnn_w8" else 16)
        return body, body.out_features
    from torchvision import models

    net = getattr(models, name)(weights=None)
    width = net.fc.in_features
    net.fc = nn.Identity()
    return net, width


class Classifier(nn.Module):
    def __init__(self, backbone: str, num_classes: int, pretrained: str | None = None):
        super().__init__()
        if backbone not in BACKBONES:
            raise ValueError(f"unknown backbone {backbone!r}; choose one of {BACKBONES}")
        self.body, width = _backbone(backbone)
        if pretrained:
            load_backbone_weights(self.body, pretrained)
        self.neck = nn.Sequential(nn.Linear(width, 500), nn.BatchNorm1d(500), nn.ReLU(),
                                  nn.Dropout(0.2), nn.Linear(500, 256), nn.ReLU())
        self.fc = nn.Linear(256, num_classes)

    def features(self, x):
        return self.neck(self.body(x))

    def forward(self, x):
        return self.fc(self.features(x))


def load_backbone_weights(body: nn.Module, path) -> None:
    """ImageNet-pretrained backbone weights from a local state-dict file (never downloaded),
    loaded with weights_only=True; the classifier layer of the file is ignored."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: pretrained weights not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unreadable file is the same user error
        raise ValueError(f"{path}: not a state dict ({type(err).__name__}: {err})") from None
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a state dict")
    state = {k: v for k, v in state.items() if not k.startswith("fc.")}
    missing, unexpected = body.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if not k.startswith("fc.")]:
        raise ValueError(f"{path}: does not match the backbone (missing {missing[:3]}, "
                         f"unexpected {unexpected[:3]})")
