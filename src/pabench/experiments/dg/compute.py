"""The domain-generalisation experiments (PA paper, Section 4.2): training settings from the
config, test-set scores of trained models, and PA / AFR on the shift-ratio datasets (Figure 7)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from pabench.datasets.shift import shift_ratio_view
from pabench.metrics import afr_true
from pabench.metrics.settings import PASettings
from pabench.metrics.views import score_views
from pabench.core import paths
from pabench.experiments.dg.plan import MS_SOLVERS, stage_epochs
from pabench.training.loop import TrainSettings, class_indices, predict, select_epochs


def settings(dg: dict, algorithm: str, seed: int, epochs: int | None = None,
             stages: bool = False, patience: int | None = None,
             pa_adam: PASettings | None = None) -> TrainSettings:
    """Training settings from the config's `dg` section; with stages, also keep the checkpoints
    of the three training stages; `epochs` (default dg.epochs) is the cap when `patience` is set;
    `pa_adam`: also validate PA with the adam solver."""
    epochs = epochs or dg["epochs"]
    # An algorithm's own section (irm, lisa) may be all the workflow passes of it.
    extra = {}
    if "irm" in dg:
        extra.update(irm_weight=dg["irm"]["weight"], irm_anneal_epochs=dg["irm"]["anneal_epochs"])
    if "lisa" in dg:
        extra.update(lisa_alpha=dg["lisa"]["alpha"], lisa_p_same_label=dg["lisa"]["p_same_label"],
                     lisa_mix=dg["lisa"]["mix"])
    return TrainSettings(algorithm=algorithm, backbone=dg["backbone"], epochs=epochs, lr=dg["lr"],
                         batch_size=dg["batch_size"], seed=seed, pretrained=dg.get("pretrained"),
                         recalibrate_bn=dg.get("recalibrate_bn", False), device=dg["device"],
                         save_epochs=tuple(stage_epochs(epochs)) if stages else (),
                         patience=patience, pa_adam=pa_adam, **extra)


def split_scores(model, split: dict, device) -> dict:
    """Logits and labels of every environment of a loaded split: {env: logits, env/labels: labels}."""
    out = {}
    for env, data in split.items():
        out[env] = predict(model, data.images, device)
        out[f"{env}/labels"] = data.labels
    return out


def load_scores(path) -> tuple[dict, np.ndarray]:
    """What rule dg_scores wrote: ({env: logits, env/labels: labels}, classes), checked: finite
    logits, one label per row, the same classes everywhere."""
    from pabench.core.io import load_npz

    arrays = load_npz(path, keys=["classes"])
    classes = arrays.pop("classes")
    for env in (k for k in arrays if "/" not in k):
        logits, labels = arrays[env], arrays.get(f"{env}/labels")
        if labels is None or logits.ndim != 2 or len(labels) != len(logits):
            raise ValueError(f"{path}: environment {env!r} has {logits.shape} scores but "
                             f"{None if labels is None else len(labels)} labels")
        if logits.shape[1] != len(classes):
            raise ValueError(f"{path}: environment {env!r} scores {logits.shape[1]} classes, "
                             f"the file lists {len(classes)}")
        if not np.isfinite(logits).all():
            raise ValueError(f"{path}: environment {env!r} has non-finite scores (NaN or inf)")
    return arrays, classes


def _view(scores: dict, view: list[dict]) -> np.ndarray:
    """The scores of a shift-ratio view (slices of the paired environments)."""
    return np.concatenate([scores[p["env"]][p["start"]:p["stop"]] for p in view])


def shift_ratio_pa(scores: dict, classes, ratios, settings: PASettings) -> pd.DataFrame:
    """PA between env0 and every shift-ratio view of env1..env5 (exact and adam solvers, the
    adam ones stacked), with AFR_T (accuracy on the view), AFR_P (agreement with env0) and the
    mean predictive confidence on the view and on env0 (Figure 8)."""
    envs = [e for e in scores if "/" not in e and e != "env0"]
    n = len(scores["env0"])
    labels = class_indices(np.asarray(classes), scores["env0/labels"])
    cases = [{"env": env, "n_shift_factors": k, "shift_ratio": float(ratio)}
             for k, env in enumerate(envs, start=1) for ratio in ratios]
    views = np.stack([_view(scores, shift_ratio_view(n, c["env"], c["shift_ratio"])) for c in cases])
    table = pd.concat([pd.DataFrame(cases), score_views(scores["env0"], views, labels, settings)], axis=1)
    return table.assign(accuracy_env0=afr_true(scores["env0"], labels), n=n,
                        confidence=max_softmax(views).mean(axis=1),
                        confidence_env0=float(max_softmax(scores["env0"]).mean()))


def selected_accuracy(models: dict, split: dict, device, cache: dict | None = None) -> pd.DataFrame:
    """Test accuracy of each selected checkpoint ({"best_acc": (model, state), ...}) on every
    environment of a loaded test split.  `cache` (shared across calls on one run's checkpoints)
    keeps the predictions by (epoch, env): one run's checkpoints of the same epoch are the same
    weights, whichever validation split selected them."""
    cache = {} if cache is None else cache
    rows = []
    for env, data in split.items():
        row = {"env": env}
        for name, (model, state) in models.items():
            key = (int(state["epoch"]), env)
            if key not in cache:
                cache[key] = np.array(state["classes"])[predict(model, data.images, device).argmax(1)]
            pred = cache[key]
            row[f"acc_{name}"] = float((pred == data.labels).mean())
            row[f"epoch_{name}"] = int(state["epoch"])
        rows.append(row)
    return pd.DataFrame(rows)


def selection_results(history: pd.DataFrame, validations: dict, load, test: dict, device) -> pd.DataFrame:
    """Test accuracy of the epochs each criterion selects: one row per validation split, PA
    solver and test environment, with acc_best_acc / epoch_best_acc (selected by validation
    accuracy) and acc_best_pa / epoch_best_pa (by validation PA of that solver).
    validations: {split: label}, split None the main one; load(name) gives the (model, state) of a
    checkpoint.  A criterion whose highest validation value is tied selects nothing
    (loop.select_epochs): its accuracy and epoch are NaN and acc_preference / pa_preference say
    it had no preference, so that no tie rule decides a comparison."""
    cache, frames = {}, []
    for split, label in validations.items():
        chosen = select_epochs(history, split)
        for solver, criterion in MS_SOLVERS.items():
            picks = {"best_acc": ("best_acc", chosen["best_acc"]), "best_pa": (criterion, chosen[criterion])}
            models = {}
            for name, (which, epoch) in picks.items():
                if epoch is None:
                    continue
                path = paths.selection_checkpoint(which, split)
                models[name] = load(path)
                if int(models[name][1]["epoch"]) != epoch:
                    raise ValueError(f"checkpoint {path} holds epoch {models[name][1]['epoch']}, "
                                     f"but the history selects epoch {epoch}")
            table = selected_accuracy(models, test, device, cache) if models else pd.DataFrame({"env": list(test)})
            for name in picks:
                if name not in models:
                    table[f"acc_{name}"] = table[f"epoch_{name}"] = np.nan
            frames.append(table.assign(validation=label, solver=solver,
                                       acc_preference=picks["best_acc"][1] is not None,
                                       pa_preference=picks["best_pa"][1] is not None))
    columns = ["env", "validation", "solver", "acc_best_acc", "epoch_best_acc", "acc_best_pa",
               "epoch_best_pa", "acc_preference", "pa_preference"]
    return pd.concat(frames, ignore_index=True)[columns]


def max_softmax(logits: np.ndarray) -> np.ndarray:
    """The predictive confidence of each row of logits (..., K): its largest softmax probability."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(-1, keepdims=True)
    return 1.0 / np.exp(z).sum(-1)


def confidence(scores: dict, envs) -> pd.DataFrame:
    """Per test environment: the mean and standard error of the predictive confidence (maximum
    softmax probability) of the model's predictions (Figure 8)."""
    rows = []
    for env in envs:
        conf = max_softmax(scores[env])
        rows.append({"env": env, "confidence": float(conf.mean()),
                     "stderr": float(conf.std(ddof=1) / np.sqrt(len(conf))) if len(conf) > 1 else 0.0})
    return pd.DataFrame(rows)


def principal_component(features0: np.ndarray, features1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Projections of two paired feature sets on the first principal component of both together,
    scaled to [-1, 1] (Appendix D, Figure 11)."""
    both = np.concatenate([features0, features1]).astype(np.float64)
    centred = both - both.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    pc = centred @ vt[0]
    sign = np.sign(pc[np.argmax(np.abs(pc))]) or 1.0
    scale = np.abs(pc).max() or 1.0
    pc = pc * sign / scale
    return pc[:len(features0)], pc[len(features0):]
