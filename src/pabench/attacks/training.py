"""Training of the self-trained zoo (every scale): an undefended network, PGD adversarial
training (Madry et al. 2018), fast FGSM training with a random start (Wong et al. 2020), TRADES
(Zhang et al. 2019), and the JPEG + RS model, whose network is trained undefended (the defence
wraps it at evaluation).  Adam, seeded; images in [0, 1]."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from pabench.attacks.models import METHODS, build

log = logging.getLogger("pabench.attacks")


@dataclass
class ZooSettings:
    method: str
    arch: str = "cnn"
    epochs: int = 5
    batch_size: int = 128
    lr: float = 1e-3
    eps: float = 0.3             # training L-inf radius
    pgd_steps: int = 7           # Madry and TRADES inner maximisation
    trades_beta: float = 6.0
    seed: int = 0
    device: str = "cpu"
    augment: str = "none"        # none | crop (random 4-px-padded crop) | crop_flip (+ h-flip)
    eps_warmup: float = 0.0      # epochs over which the training eps ramps up linearly from 0


AUGMENTATIONS = ("none", "crop", "crop_flip")


def augment(x: torch.Tensor, how: str, gen: torch.Generator) -> torch.Tensor:
    """The standard CIFAR augmentation on a batch: a random crop of the image zero-padded by 4
    pixels (one offset per image), and with crop_flip a random horizontal flip (not for digits)."""
    if how == "none":
        return x
    n, _, h, w = x.shape
    padded = F.pad(x, (4, 4, 4, 4))
    dy, dx = (torch.randint(0, 9, (n,), generator=gen) for _ in range(2))
    rows = (dy[:, None] + torch.arange(h))[:, None, :, None].to(x.device)
    cols = (dx[:, None] + torch.arange(w))[:, None, None, :].to(x.device)
    out = padded[torch.arange(n, device=x.device)[:, None, None, None],
                 torch.arange(x.shape[1], device=x.device)[None, :, None, None], rows, cols]
    if how == "crop_flip":
        flip = (torch.rand(n, generator=gen) < 0.5).to(x.device)
        out = torch.where(flip[:, None, None, None], out.flip(3), out)
    return out


def as_float(images_u8: torch.Tensor) -> torch.Tensor:
    return images_u8.float().div_(255)


def pgd_linf(model, x, y, eps: float, steps: int, step: float, random_start: bool, loss_fn=None):
    """Inner maximisation of adversarial training (our own, not the evaluation attacks)."""
    loss_fn = loss_fn or (lambda out, y: F.cross_entropy(out, y))
    delta = (torch.empty_like(x).uniform_(-eps, eps) if random_start else torch.zeros_like(x))
    delta = ((x + delta).clamp(0, 1) - x).requires_grad_(True)
    for _ in range(steps):
        loss = loss_fn(model(x + delta), y)
        (grad,) = torch.autograd.grad(loss, delta)
        delta = (delta + step * grad.sign()).clamp(-eps, eps)
        delta = ((x + delta).clamp(0, 1) - x).detach().requires_grad_(True)
    return (x + delta).detach()


def zoo_loss(s: ZooSettings, model, x, y):
    """The training loss of one batch; `s.eps` is the radius of this step (ramped by train_zoo)."""
    if s.method in ("undefended", "jpeg_rs"):
        return F.cross_entropy(model(x), y)
    if s.method == "madry":
        was = model.training
        model.eval()  # attack the network as it predicts (BatchNorm in eval), then train on it
        adv = pgd_linf(model, x, y, s.eps, s.pgd_steps, 2.5 * s.eps / s.pgd_steps, True)
        model.train(was)
        return F.cross_entropy(model(adv), y)
    if s.method == "fast_fgsm":
        # Wong et al. 2020: uniform start in the eps-ball, one FGSM step of 1.25 eps, project.
        adv = pgd_linf(model, x, y, s.eps, 1, 1.25 * s.eps, True)
        return F.cross_entropy(model(adv), y)
    if s.method == "trades":
        was = model.training
        model.eval()
        with torch.no_grad():
            p_clean = F.softmax(model(x), 1)
        kl = lambda out, _: F.kl_div(F.log_softmax(out, 1), p_clean, reduction="batchmean")  # noqa: E731
        # TRADES starts near x (0.001 N(0, 1)) and ascends the KL with step eps/4 (0.007 at 8/255).
        x0 = (x + 0.001 * torch.randn_like(x)).clamp(0, 1)
        adv = pgd_linf(model, x0, y, s.eps, s.pgd_steps, s.eps / 4, False, kl)
        adv = torch.min(torch.max(adv, x - s.eps), x + s.eps).clamp(0, 1)
        model.train(was)
        logits = model(x)
        robust = F.kl_div(F.log_softmax(model(adv), 1), F.softmax(logits, 1), reduction="batchmean")
        return F.cross_entropy(logits, y) + s.trades_beta * robust
    raise ValueError(f"unknown training method {s.method!r}; choose one of {METHODS}")


def train_zoo(s: ZooSettings, images: np.ndarray, labels: np.ndarray, num_classes: int,
              tracker=None, progress: bool = True):
    """Train one zoo model on uint8 images (N, 3, H, W); returns the network and its history."""
    if s.method not in METHODS:
        raise ValueError(f"unknown training method {s.method!r}; choose one of {METHODS}")
    if s.augment not in AUGMENTATIONS:
        raise ValueError(f"unknown augmentation {s.augment!r}; choose one of {AUGMENTATIONS}")
    if len(images) < s.batch_size:
        raise ValueError(f"{len(images)} training images, fewer than one batch ({s.batch_size})")
    device = torch.device(s.device)
    torch.manual_seed(s.seed)
    gen = torch.Generator().manual_seed(s.seed)
    net = build(s.arch, num_classes, images.shape[-1]).to(device)
    # Channels-last on a CPU: 1.1x (LeNet) to 1.7x (SmallCNN) faster steps; returned in the usual
    # layout (the attack libraries reshape input gradients with .view).
    layout = torch.channels_last if device.type == "cpu" else torch.contiguous_format
    net = net.to(memory_format=layout)
    opt = torch.optim.Adam(net.parameters(), lr=s.lr)
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels).long()
    steps = len(images) // s.batch_size
    history = []
    for epoch in range(s.epochs):
        net.train()
        order = torch.randperm(len(images), generator=gen)
        total, start = 0.0, time.perf_counter()
        for k in tqdm(range(steps), desc=f"{s.method} epoch {epoch + 1}/{s.epochs}",
                      disable=not progress, mininterval=2.0):
            idx = order[k * s.batch_size:(k + 1) * s.batch_size]
            x, y = augment(as_float(x_all[idx].to(device)), s.augment, gen), y_all[idx].to(device)
            x = x.contiguous(memory_format=layout)
            ramp = min(1.0, (epoch + k / steps) / s.eps_warmup) if s.eps_warmup > 0 else 1.0
            loss = zoo_loss(replace(s, eps=s.eps * ramp) if ramp < 1 else s, net, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
        row = {"epoch": epoch + 1, "train_loss": total / steps,
               "images_per_s": steps * s.batch_size / (time.perf_counter() - start)}
        history.append(row)
        log.info("%s epoch %d: %s", s.method, epoch + 1, row)
        if tracker is not None:
            tracker.log(row)
    return net.to(memory_format=torch.contiguous_format).eval(), history


@torch.no_grad()
def scores(model, images: np.ndarray, device, batch: int = 500) -> np.ndarray:
    """The model's scores (logits, or log-probabilities for JPEG + RS) on uint8 images."""
    model.eval()
    out = [model(as_float(torch.from_numpy(images[i:i + batch]).to(device))).float().cpu()
           for i in range(0, len(images), batch)]
    return torch.cat(out).numpy()
