"""The training loop of the domain-generalisation experiments.

Each step takes one minibatch from every training environment (Adam, lr and batch size from the
settings).  After every epoch the model predicts the validation pair; validation accuracy (both
environments pooled) and PA between the pair are recorded (exact solver; with `pa_adam` also the
authors' adam procedure), and checkpoints are kept: the best-accuracy epoch, the best-PA epoch
of each solver and the last epoch (state dicts, loadable with weights_only=True).  With
`patience`, training stops once validation accuracy has not improved for that many epochs
(`epochs` is then the cap).  Seeded; deterministic on CPU.

Selection never rests on a tie: a criterion whose highest validation value is reached in more
than one epoch (e.g. log PA at its beta* = 0 floor, -N log K, in every epoch) prefers none of
them (`select_epochs` gives None).  Its checkpoint file still holds the first of those epochs,
the one early stopping keeps, for the experiments that need a model whatever the tie
(`checkpoint_epochs`: Figures 7-8's best-accuracy checkpoint).
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
from pabench.metrics.settings import PASettings
from pabench.models import BACKBONES, Classifier, on_device
from pabench.training.algorithms import ALGORITHMS, irm_penalty, irm_weight, lisa_mix, soft_cross_entropy

log = logging.getLogger("pabench.training")
CHECKPOINTS = ("best_acc", "best_pa", "last")
# Selection criteria and the history column each maximises: validation accuracy, log PA by the
# exact solver, log PA by the adam solver (runs with TrainSettings.pa_adam).
CRITERIA = {"best_acc": "val_acc", "best_pa": "val_logpa", "best_pa_adam": "val_logpa_adam"}
# Validation values this close are tied: the beta* = 0 floor of log PA repeats to the last bit;
# distinct accuracies on n images differ by 1/n.
TIE_RTOL = TIE_ATOL = 1e-9


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
    # Stop once validation accuracy has not improved for this many epochs (None: train `epochs`).
    patience: int | None = None
    pa_adam: PASettings | None = None  # also validate PA with the adam solver (the papers')


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
    if settings.patience is not None and settings.patience < 1:
        raise ValueError(f"patience must be at least 1 epoch (or None), got {settings.patience}")
    for name, env in train_envs.items():
        if len(env) < settings.batch_size:
            raise ValueError(f"training environment {name!r} has {len(env)} samples, fewer than "
                             f"one batch ({settings.batch_size})")


def to_input(images: np.ndarray, device) -> torch.Tensor:
    """uint8 images (n, 3, S, S) as floats in [-1, 1] (channels-last on a CPU: see
    pabench.models.on_device)."""
    x = torch.from_numpy(np.array(images)).to(device).float().div_(127.5).sub_(1.0)
    return x.contiguous(memory_format=torch.channels_last) if x.device.type == "cpu" else x


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


def _column(criterion: str, split: str | None) -> str:
    return CRITERIA[criterion] + (f"-{split}" if split else "")


def tied(values, top) -> np.ndarray:
    """Which of `values` tie with `top`."""
    return np.isclose(np.asarray(values, dtype=float), top, rtol=TIE_RTOL, atol=TIE_ATOL)


def improves(value: float, best: float) -> bool:
    """Whether a validation value beats the best so far (a tie does not)."""
    return value > best and not bool(tied(value, best))


def _criteria(history: pd.DataFrame, split: str | None) -> list[str]:
    return [c for c in CRITERIA if _column(c, split) in history.columns]


def checkpoint_epochs(history: pd.DataFrame, split: str | None = None) -> dict:
    """The epoch (1-based) each checkpoint of a validation split holds: the first epoch with the
    criterion's highest value (what early stopping keeps), and the last epoch."""
    out = {}
    for c in _criteria(history, split):
        values = history[_column(c, split)].to_numpy(dtype=float)
        out[c] = int(history.epoch.iloc[int(np.argmax(tied(values, values.max())))])
    return {**out, "last": int(history.epoch.iloc[-1])}


def select_epochs(history: pd.DataFrame, split: str | None = None) -> dict:
    """The epoch each criterion selects on a validation split (None: the main one): the one with
    the highest validation value, or None when that value is reached in several epochs (the
    criterion has no preference; no tie rule decides for it); and the last epoch."""
    out = {}
    for c in _criteria(history, split):
        values = history[_column(c, split)].to_numpy(dtype=float)
        top = tied(values, values.max())
        out[c] = int(history.epoch.iloc[int(np.argmax(top))]) if top.sum() == 1 else None
    return {**out, "last": int(history.epoch.iloc[-1])}


def stopped_early(history: pd.DataFrame, patience: int | None) -> bool:
    """Whether the patience rule ended the run (else it ran to its cap of epochs): validation
    accuracy's best epoch lies `patience` epochs before the last."""
    if patience is None:
        return False
    return int(history.epoch.iloc[-1]) - checkpoint_epochs(history)["best_acc"] >= patience


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
def recalibrate_batchnorm(model, envs, device, batch: int | None = None) -> None:
    """Replace every BatchNorm layer's running statistics by their average over the training
    images ("precise BN", Wu & Johnson 2021): the mean exactly, the variance as the image-weighted
    mean of the batches' variances, in batches of `batch` images (default: 256 on a GPU, 32 on
    a CPU, whose larger batches leave its cache: 2x the time per image for the DG CNN).  The running averages of a few small batches lag the weights;
    evaluated with them, a model that fits its training data can predict one class for everything
    (seen at the quick scale's small DiagViB-6 splits)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    momenta = [m.momentum for m in norms]
    model.train()
    batch = batch or (256 if torch.device(device).type == "cuda" else 32)
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
    """Train, validate every epoch, keep the checkpoints in out_dir; returns the history.
    also_validate: {name: validation pair}, each also validated every epoch (history columns
    val_acc-<name>, val_logpa-<name>, val_logpa_adam-<name>) with its own selected checkpoints
    (best_acc-<name>.pt, best_pa-<name>.pt, best_pa_adam-<name>.pt): model selection on other
    validation splits.  Only the main pair's accuracy decides when to stop."""
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
    steps = min(len(e) // settings.batch_size for e in envs)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    best = {}  # checkpoint name -> the best value so far
    pairs = _validation_pairs(classes, {None: val_envs, **also_validate})
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
            loss = batch_loss(settings, model, xs, ys, len(classes), epoch, gen)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item()
        elapsed = time.perf_counter() - start
        if settings.recalibrate_bn:
            recalibrate_batchnorm(model, envs, device)
        row = {"epoch": epoch + 1, "train_loss": total / max(steps, 1),
               **_validate(model, pairs, device, settings.pa_adam),
               "images_per_s": steps * settings.batch_size * len(envs) / max(elapsed, 1e-9),
               "data_wait_fraction": wait / max(elapsed, 1e-9)}
        rows.append(row)
        log.info("epoch %d: %s", epoch + 1, {k: round(v, 4) for k, v in row.items()})
        if tracker is not None:
            tracker.log(row)
        for split in pairs:
            for criterion in CRITERIA:
                name, column = paths.selection_checkpoint(criterion, split), _column(criterion, split)
                if column in row and improves(row[column], best.get(name, -np.inf)):
                    best[name] = row[column]
                    save_checkpoint(model, out_dir / f"{name}.pt", epoch + 1, settings, classes)
        save_checkpoint(model, out_dir / "last.pt", epoch + 1, settings, classes)
        if epoch + 1 in settings.save_epochs:
            save_checkpoint(model, out_dir / f"epoch{epoch + 1}.pt", epoch + 1, settings, classes)
        if stopped_early(pd.DataFrame(rows), settings.patience):
            log.info("validation accuracy has not improved for %d epochs: stopping", settings.patience)
            break
    history = pd.DataFrame(rows)
    history.attrs["settings"] = asdict(settings)
    return history


def _validation_pairs(classes: np.ndarray, pairs: dict) -> dict:
    """{split: (images per environment, class indices per environment)}, where environments
    whose images are identical (a pair rendered twice in one environment: the thesis's SD
    split) share one array, which `_validate` predicts once."""
    arrays, out = [], {}
    for split, pair in pairs.items():
        images = []
        for env in pair.values():
            same = next((a for a in arrays if a.shape == env.images.shape
                         and np.array_equal(a, env.images)), None)
            if same is None:
                arrays.append(same := env.images)
            images.append(same)
        out[split] = (images, [class_indices(classes, v.labels) for v in pair.values()])
    return out


def _validate(model, pairs: dict, device, adam: PASettings | None) -> dict:
    """The history columns of one epoch's validation: per pair ({split: (images, labels)} per
    environment, split None the main pair) the accuracy (pooled and, for the main pair, per
    environment) and PA between the two environments, exact and, with `adam`, by the adam solver
    (the pairs of equal size stacked into one solve).  An array shared by several environments
    is predicted once."""
    row, logits, predicted = {}, {}, {}
    for split, (images, labels) in pairs.items():
        for x in images:
            if id(x) not in predicted:
                predicted[id(x)] = predict(model, x, device)
        logits[split] = [predicted[id(x)] for x in images]
        accs = [float((lg.argmax(1) == y).mean()) for lg, y in zip(logits[split], labels)]
        pa = posterior_agreement(*logits[split])
        row[_column("best_acc", split)] = float(np.mean(accs))
        row[_column("best_pa", split)] = pa.logpa
        if split is None:
            row.update(val_acc_0=accs[0], val_acc_1=accs[1], val_pa=pa.pa, val_beta=pa.beta)
    if adam is not None:
        by_size = {}
        for split, (a, b) in logits.items():
            by_size.setdefault(a.shape, []).append(split)
        for splits in by_size.values():
            fitted = adam.solve(np.stack([logits[s][0] for s in splits]), np.stack([logits[s][1] for s in splits]))
            for s, logpa, beta in zip(splits, fitted.logpa, fitted.beta):
                row[_column("best_pa_adam", s)] = float(logpa)
                if s is None:
                    row["val_beta_adam"] = float(beta)
    return row


def batch_loss(settings, model, xs, ys, num_classes, epoch, gen):
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
