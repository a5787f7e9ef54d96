"""The training loop of the domain-generalisation experiments.

Each step takes one minibatch from every training environment (Adam, lr and batch size from the
settings).  After every epoch the model predicts the validation pair; validation accuracy (both
environments pooled) and PA between the pair (exact solver) are recorded, and three checkpoints
are kept: the best-accuracy epoch, the best-PA epoch and the last epoch (state dicts, loadable
with weights_only=True).  Seeded; deterministic on CPU.
"""
from __future__ import annotations

import logging
import pickle
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from pabench.core import paths
from pabench.core.io import atomic_path
from pabench.metrics import posterior_agreement
from pabench.models import BACKBONES, Classifier
from pabench.training.algorithms import ALGORITHMS, irm_penalty, irm_weight, lisa_mix, soft_cross_entropy

log = logging.getLogger("pabench.training")
CHECKPOINTS = ("best_acc", "best_pa", "last")


@dataclass
class TrainSettings:
    algorithm: str
    backbone: str
    epochs: int
    lr: float
    batch_size: int
    seed: int = 0
    irm_weight: float = 1.0
    irm_anneal_epochs: int = 0
    lisa_alpha: float = 2.0
    lisa_p_same_label: float = 0.75
    lisa_mix: str = "mixup"
    pretrained: str | None = None
    device: str = "auto"  # auto: cuda when available
    save_epochs: tuple = ()  # also keep epoch<k>.pt after these epochs (training stages)
    recalibrate_bn: bool = False  # BatchNorm statistics recomputed on the training data each epoch


def check_settings(settings: TrainSettings, train_envs: dict, val_envs: dict) -> None:
    """Refuse a bad configuration before any training, naming the problem."""
    if settings.algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {settings.algorithm!r}; choose one of {ALGORITHMS}")
    if settings.backbone not in BACKBONES:
        raise ValueError(f"unknown backbone {settings.backbone!r}; choose one of {BACKBONES}")
    if settings.lisa_mix not in ("mixup", "cutmix"):
        raise ValueError(f"unknown LISA mix {settings.lisa_mix!r}; choose mixup or cutmix")
    if len(val_envs) != 2:
        raise ValueError(f"validation needs a pair of environments, got {list(val_envs)}")
    for name, env in train_envs.items():
        if len(env) < settings.batch_size:
            raise ValueError(f"training environment {name!r} has {len(env)} samples, fewer than "
                             f"one batch ({settings.batch_size})")


def to_input(images: np.ndarray, device) -> torch.Tensor:
    """uint8 images (n, 3, S, S) as floats in [-1, 1] (channels-last on a CPU: see `on_device`)."""
    x = torch.from_numpy(np.array(images)).to(device).float().div_(127.5).sub_(1.0)
    return x.contiguous(memory_format=torch.channels_last) if x.device.type == "cpu" else x


def on_device(model: torch.nn.Module, device) -> torch.nn.Module:
    """The model on `device`; on a CPU in channels-last layout, where the DG CNN's training steps
    and 256-image BatchNorm passes run 1.7x faster (the same arithmetic, other rounding)."""
    model = model.to(device)
    return model.to(memory_format=torch.channels_last) if torch.device(device).type == "cpu" else model


@torch.no_grad()
def predict(model, images, device, batch: int | None = None, features: bool = False) -> np.ndarray:
    """Logits (or features) of uint8 images, in eval mode.  Default batch: 256 on a GPU, 32 on a
    CPU, where small batches stay in cache (the DG CNN on 64 px: 0.36 ms per image in batches of
    32, 1.5 ms in batches of 256)."""
    model.eval()
    batch = batch or (256 if torch.device(device).type == "cuda" else 32)
    out = []
    for lo in range(0, len(images), batch):
        x = to_input(images[lo:lo + batch], device)
        out.append((model.features(x) if features else model(x)).float().cpu().numpy())
    return np.concatenate(out)


def class_indices(classes: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Positions of `labels` in the sorted array `classes` (digit labels to class indices)."""
    idx = np.searchsorted(classes, labels)
    if np.any(idx >= len(classes)) or np.any(classes[np.minimum(idx, len(classes) - 1)] != labels):
        raise ValueError(f"labels {sorted(set(np.asarray(labels).tolist()) - set(classes.tolist()))} "
                         f"are not among the trained classes {classes.tolist()}")
    return idx


def select_epochs(history: pd.DataFrame) -> dict:
    """Epochs (1-based) selected by maximal validation accuracy, maximal validation PA (first on
    ties) and the last one."""
    acc = int(history.epoch.iloc[int(np.argmax(history.val_acc.to_numpy()))])
    pa = int(history.epoch.iloc[int(np.argmax(history.val_logpa.to_numpy()))])
    return {"best_acc": acc, "best_pa": pa, "last": int(history.epoch.iloc[-1])}


def save_checkpoint(model, path, epoch: int, settings: TrainSettings, classes) -> None:
    state = {"state_dict": model.state_dict(), "epoch": epoch, "classes": list(map(int, classes)),
             "backbone": settings.backbone}
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path, device="cpu"):
    """A model and its checkpoint record (weights_only: no pickled code can run)."""
    path = Path(path)
    try:
        state = torch.load(path, map_location=device, weights_only=True)
        model = Classifier(state["backbone"], len(state["classes"]))
        model.load_state_dict(state["state_dict"])
    except (OSError, RuntimeError, KeyError, TypeError, ValueError, pickle.UnpicklingError) as err:
        raise ValueError(f"{path}: not a pabench checkpoint ({type(err).__name__}: {err})") from None
    return on_device(model, device).eval(), state


@torch.no_grad()
def recalibrate_batchnorm(model, envs, device, batch: int = 256) -> None:
    """Replace every BatchNorm layer's running statistics by their average over the training
    images ("precise BN", Wu & Johnson 2021): the mean exactly, the variance as the image-weighted
    mean of the batches' variances.  The running averages of a few small batches lag the weights;
    evaluated with them, a model that fits its training data can predict one class for everything
    (seen at the quick scale's small DiagViB-6 splits)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    model.train()
    seen, part = 0, max(1, batch // len(envs))
    # Every batch holds every environment, as in training: a batch of one environment would leave
    # the variance between environments (red vs blue) out of the statistics.
    for lo in range(0, max(len(env) for env in envs), part):
        x = torch.cat([to_input(env.images[lo:lo + part], device) for env in envs if lo < len(env)])
        if len(x) < 2:  # BatchNorm has no batch variance of one image; it barely counts anyway
            continue
        seen += len(x)
        for m in norms:  # running <- running + (b / seen) (batch - running): a weighted mean
            m.momentum = len(x) / seen
        model(x)
    for m, momentum in zip(norms, momenta):
        m.momentum = momentum


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def train(settings: TrainSettings, train_envs: dict, val_envs: dict, out_dir, tracker=None,
          progress: bool = False, also_validate: dict | None = None) -> pd.DataFrame:
    """Train, validate every epoch, keep the three checkpoints in out_dir; returns the history.
    also_validate: {name: validation pair}, each also validated every epoch (history columns
    val_acc-<name>, val_logpa-<name>) with its own best-accuracy and best-PA checkpoints
    (best_acc-<name>.pt, best_pa-<name>.pt): model selection on other validation splits."""
    also_validate = also_validate or {}
    check_settings(settings, train_envs, val_envs)
    for pair in also_validate.values():
        check_settings(settings, train_envs, pair)
    device = resolve_device(settings.device)
    torch.manual_seed(settings.seed)
    gen = torch.Generator().manual_seed(settings.seed)
    envs = list(train_envs.values())
    classes = np.unique(np.concatenate([e.labels for e in envs]))
    model = on_device(Classifier(settings.backbone, len(classes), settings.pretrained), device)
    opt = torch.optim.Adam(model.parameters(), lr=settings.lr)
    val0, val1 = val_envs.values()
    val_y = [class_indices(classes, v.labels) for v in (val0, val1)]
    steps = min(len(e) // settings.batch_size for e in envs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    best = {}  # checkpoint name -> the best value so far
    extra = {name: (list(pair.values()), [class_indices(classes, v.labels) for v in pair.values()])
             for name, pair in also_validate.items()}
    for epoch in range(settings.epochs):
        model.train()
        orders = [torch.randperm(len(e), generator=gen).numpy() for e in envs]
        total, wait, start = 0.0, 0.0, time.perf_counter()
        for step in tqdm(range(steps), desc=f"{settings.algorithm} epoch {epoch + 1}", disable=not progress,
                         mininterval=2.0):
            t0 = time.perf_counter()
            xs, ys = [], []
            for env, order in zip(envs, orders):
                idx = np.sort(order[step * settings.batch_size:(step + 1) * settings.batch_size])
                xs.append(to_input(env.images[idx], device))
                ys.append(torch.as_tensor(class_indices(classes, env.labels[idx]), device=device))
            wait += time.perf_counter() - t0
            loss = _loss(settings, model, xs, ys, len(classes), epoch, gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
        elapsed = time.perf_counter() - start
        if settings.recalibrate_bn:
            recalibrate_batchnorm(model, envs, device)
        accs, pa = _validate(model, (val0, val1), val_y, device)
        row = {"epoch": epoch + 1, "train_loss": total / max(steps, 1),
               "val_acc": float(np.mean(accs)), "val_acc_0": accs[0], "val_acc_1": accs[1],
               "val_logpa": pa.logpa, "val_pa": pa.pa, "val_beta": pa.beta,
               "images_per_s": steps * settings.batch_size * len(envs) / max(elapsed, 1e-9),
               "data_wait_fraction": wait / max(elapsed, 1e-9)}
        selection = {"best_acc": row["val_acc"], "best_pa": row["val_logpa"]}
        for name, (pair, ys) in extra.items():
            accs, pa = _validate(model, pair, ys, device)
            row[f"val_acc-{name}"], row[f"val_logpa-{name}"] = float(np.mean(accs)), pa.logpa
            selection.update({paths.selection_checkpoint("best_acc", name): row[f"val_acc-{name}"],
                              paths.selection_checkpoint("best_pa", name): pa.logpa})
        rows.append(row)
        log.info("epoch %d: %s", epoch + 1, {k: round(v, 4) for k, v in row.items()})
        if tracker is not None:
            tracker.log(row)
        for name, value in selection.items():  # the first epoch wins ties
            if value > best.get(name, -np.inf):
                best[name] = value
                save_checkpoint(model, out_dir / f"{name}.pt", epoch + 1, settings, classes)
        save_checkpoint(model, out_dir / "last.pt", epoch + 1, settings, classes)
        if epoch + 1 in settings.save_epochs:
            save_checkpoint(model, out_dir / f"epoch{epoch + 1}.pt", epoch + 1, settings, classes)
    history = pd.DataFrame(rows)
    history.attrs["settings"] = asdict(settings)
    return history


def _validate(model, pair, labels, device):
    """Accuracy on each environment of a validation pair and PA between the two (exact solver)."""
    logits = [predict(model, v.images, device) for v in pair]
    return [float((lg.argmax(1) == y).mean()) for lg, y in zip(logits, labels)], \
        posterior_agreement(logits[0], logits[1])


def _loss(settings, model, xs, ys, num_classes, epoch, gen):
    if settings.algorithm == "lisa":
        mixed = lisa_mix(xs, ys, num_classes, gen, settings.lisa_alpha, settings.lisa_p_same_label,
                         settings.lisa_mix)
        return soft_cross_entropy(model(mixed.x), mixed.y)
    logits = model(torch.cat(xs)).split([len(x) for x in xs])
    risks = [F.cross_entropy(lg, y) for lg, y in zip(logits, ys)]
    loss = torch.stack(risks).mean()
    if settings.algorithm == "irm":
        weight = irm_weight(epoch, settings.irm_weight, settings.irm_anneal_epochs)
        loss = loss + weight * torch.stack([irm_penalty(lg, y) for lg, y in zip(logits, ys)]).mean()
    return loss
