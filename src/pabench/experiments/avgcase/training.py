"""Models of the average-case robustness experiments and their training with gradient-norm
regularisation: CE(f(x), y) + lambda * ||grad_x CE(f(x), y)||^2 per example (the loss's input
gradient: Srinivas & Fleuret 2018 relate this penalty to Gaussian data augmentation; the code the
paper cites scales its weight otherwise: plan.cited_reg_constant).

Models take images in [0, 1] (no normalisation, as in the authors' code) and return logits.
"""
from __future__ import annotations

import logging
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pabench.attacks.models import LeNetCNN, ResidualNet
from pabench.experiments.avgcase.models import ResNet18, ViT, ViTSize

log = logging.getLogger("pabench.avgcase")

# resnet18*: the paper's post-activation ResNet-18 (the authors' models/resnet.py);
# preact_resnet18*: our PreAct ResNet-18, the quick scale's stand-in; _w<k>: first stage k channels.
# vit: ViT-Lite-7/4 sized (models.py); vit_tiny: the quick scale's small ViT.
VIT_SIZES = {"vit": ViTSize(patch=4, depth=7, width=256, heads=4, mlp=512),
             "vit_tiny": ViTSize(patch=8, depth=2, width=64, heads=4, mlp=128)}
RESNETS = ("resnet18", "resnet18_w16", "resnet18_w8",
           "preact_resnet18", "preact_resnet18_w16", "preact_resnet18_w8")
ARCHS = ("linear", "cnn", "cnn_w16", "cnn_w8", *RESNETS, *VIT_SIZES)
_RECALIBRATION_IMAGES = 1024   # training images that set BatchNorm's statistics after each epoch


def build(arch: str, shape: tuple[int, int, int], num_classes: int) -> nn.Module:
    """A model for images of shape (channels, height, width)."""
    channels, height, width = shape
    if arch == "linear":
        return nn.Sequential(nn.Flatten(), nn.Linear(channels * height * width, num_classes))
    if arch.startswith("cnn") and arch in ARCHS:   # cnn_w16: 16 and 32 channels (cnn: 32, 64)
        net = LeNetCNN(num_classes, height, in_channels=channels, width=_width(arch, 32))
        return net.to(memory_format=torch.channels_last)  # 1.3-1.5x faster on CPU, as for ResNets
    if arch in RESNETS:
        if channels != 3:
            raise ValueError(f"{arch} takes 3-channel images, got {channels}")
        w = _width(arch, 64)  # resnet18_w8: stages of 8, 16, 32, 64 channels
        net = (ResNet18(num_classes, channels, w) if arch.startswith("resnet18") else
               ResidualNet([(w, 2, 1), (2 * w, 2, 2), (4 * w, 2, 2), (8 * w, 2, 2)], w, num_classes))
        return net.to(memory_format=torch.channels_last)  # 1.5x faster convolutions on CPU
    if arch in VIT_SIZES:
        if height != width:
            raise ValueError(f"{arch} takes square images, got {height}x{width}")
        return ViT(VIT_SIZES[arch], num_classes, channels, height)
    raise ValueError(f"unknown architecture {arch!r}; choose one of {ARCHS}")


def _width(arch: str, default: int) -> int:
    return int(arch.partition("_w")[2] or default)


def as_input(images_u8, device) -> torch.Tensor:
    """uint8 images as floats in [0, 1] (channels-last, the layout the ResNets run fastest in)."""
    x = torch.as_tensor(np.asarray(images_u8), device=device).float().div_(255.0)
    return x.contiguous(memory_format=torch.channels_last) if x.ndim == 4 else x


def step(model, opt, x, y, lam: float, weight: float | None = None) -> tuple[float, float, int]:
    """One optimiser step on CE + weight * ||grad_x CE||^2 (weight: lambda unless given; 0 on the
    steps lazy regularisation skips); returns (CE + lambda * that norm, the mean squared
    input-gradient norm of the per-example CE, how many of the batch the model classified right
    before the step).  Without a penalty the norm is only logged, so it is read off the one
    backward pass (x.grad of the mean CE is that gradient / batch size) instead of a second one."""
    weight = lam if weight is None else weight
    x = x.requires_grad_(True)
    logits = model(x)
    ce = F.cross_entropy(logits, y, reduction="none")
    mean = ce.mean()
    opt.zero_grad(set_to_none=True)
    if weight > 0:
        (grad,) = torch.autograd.grad(ce.sum(), x, create_graph=True)
        sq = grad.flatten(1).pow(2).sum(1).mean()
        (mean + weight * sq).backward()
    else:
        mean.backward()
        sq = (x.grad * len(x)).flatten(1).pow(2).sum(1).mean()
    opt.step()
    return mean.item() + lam * sq.item(), sq.item(), int((logits.argmax(1) == y).sum())


def recalibrate_batchnorm(model: nn.Module, images_u8, device, batch: int = 128) -> nn.Module:
    """Set every BatchNorm's running statistics to the average batch statistics of `images_u8`
    under the current weights ("precise BN"), and return the model in eval mode.  The running
    averages of training lag the weights: after 2 quick epochs a ResNet's eval accuracy fell to
    0.42 with a train-mode loss that was fine, and recalibrating on 1,024 images gave back 0.94."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if norms:
        momenta = [m.momentum for m in norms]
        for m in norms:
            m.reset_running_stats()
            m.momentum = None   # a cumulative average over the batches below
        model.train()
        with torch.no_grad():
            for i in range(0, len(images_u8), batch):
                model(as_input(images_u8[i:i + batch], device))
        for m, momentum in zip(norms, momenta):
            m.momentum = momentum
    return model.eval()


@torch.inference_mode()
def accuracy(model, images_u8, labels, device, batch: int = 500) -> float:
    model.eval()
    hits = 0
    for i in range(0, len(images_u8), batch):
        pred = model(as_input(images_u8[i:i + batch], device)).argmax(1).cpu().numpy()
        hits += int((pred == labels[i:i + batch]).sum())
    return hits / len(images_u8)


def train(arch: str, lam: float, train_x, train_y, test_x, test_y, *, epochs: int,
          batch_size: int, lr: float, seed: int, device, penalty_every: int = 1,
          tracker=None) -> tuple[nn.Module, list]:
    """Adam on the regularised loss; one history row per epoch: loss, mean squared gradient norm,
    train accuracy (of the epoch's batches as they were trained on, in train mode: read off the
    training steps' logits, where a separate pass over the training set took ~15% of a quick
    ResNet's training) and test accuracy (eval mode, after BatchNorm recalibration).

    penalty_every = k > 1 is lazy regularisation (Karras et al. 2020, StyleGAN2): the penalty, a
    second backward pass through the network (~4x a plain step), is applied on every k-th step
    only, with weight k * lambda: the same objective in expectation (docs/avgcase.md)."""
    if lam < 0:
        raise ValueError(f"gradient-norm weight lambda must be >= 0, got {lam!r}")
    if int(penalty_every) != penalty_every or penalty_every < 1:
        raise ValueError(f"penalty_every must be an integer >= 1, got {penalty_every!r}")
    torch.manual_seed(seed)
    num_classes = int(max(train_y.max(), test_y.max())) + 1
    model = build(arch, tuple(train_x.shape[1:]), num_classes).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = np.random.default_rng(seed)
    y_all = torch.as_tensor(train_y, dtype=torch.long)
    history = []
    for epoch in range(1, epochs + 1):
        model.train()
        order = gen.permutation(len(train_x))
        total = sq_total = 0.0
        correct = seen = 0
        steps = max(1, len(order) // batch_size)
        start = time.perf_counter()
        for k in range(steps):
            idx = order[k * batch_size:(k + 1) * batch_size]
            weight = lam * penalty_every if k % penalty_every == 0 else 0.0
            loss, sq, right = step(model, opt, as_input(train_x[idx], device),
                                   y_all[idx].to(device), lam, weight)
            total, sq_total = total + loss, sq_total + sq
            correct, seen = correct + right, seen + len(idx)
        recalibrate_batchnorm(model, train_x[order[:_RECALIBRATION_IMAGES]], device)
        row = {"epoch": epoch, "loss": total / steps, "grad_norm": float(np.sqrt(sq_total / steps)),
               "train_accuracy": correct / seen,
               "test_accuracy": accuracy(model, test_x, test_y, device),
               "seconds": time.perf_counter() - start}
        history.append(row)
        log.info("%s lambda %g epoch %d: %s", arch, lam, epoch, row)
        if tracker is not None:
            tracker.log(row)
    return model.eval(), history


def save(model: nn.Module, path, arch: str, shape, num_classes: int, lam: float) -> None:
    from pabench.core.io import atomic_path

    with atomic_path(path) as tmp:
        torch.save({"arch": arch, "shape": list(shape), "num_classes": num_classes, "lam": lam,
                    "state_dict": model.state_dict()}, tmp)


def load(path, device="cpu") -> nn.Module:
    state = torch.load(path, map_location=device, weights_only=True)
    model = build(state["arch"], tuple(state["shape"]), state["num_classes"])
    model.load_state_dict(state["state_dict"])
    return model.to(device).eval()
