"""The domain-generalisation experiments (PA paper, Section 4.2): training settings from the
config, test-set scores of trained models, and PA / AFR on the shift-ratio datasets (Figure 7)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .data.shift import shift_ratio_view
from .metrics import afr_pred, afr_true, posterior_agreement
from .training.loop import TrainSettings, class_indices, predict


def stage_epochs(epochs: int) -> list[int]:
    """Three training stages (Appendix D, Figure 11): the first, middle and last epoch."""
    return sorted({1, max(1, (epochs + 1) // 2), epochs})


def train_params(dg: dict, algorithm: str) -> dict:
    """The part of the config's `dg` section one training run reads: the shared settings and its
    own algorithm's section only, so that changing another algorithm's settings (or the seed
    list) does not rerun it."""
    shared = ("backbone", "pretrained", "epochs", "lr", "batch_size", "device")
    return {**{k: dg[k] for k in shared if k in dg}, **({algorithm: dg[algorithm]} if algorithm in dg else {})}


def settings(dg: dict, algorithm: str, seed: int, epochs: int | None = None,
             stages: bool = False) -> TrainSettings:
    """Training settings from the config's `dg` section; with stages, also keep the checkpoints
    of the three training stages."""
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
                         device=dg["device"],
                         save_epochs=tuple(stage_epochs(epochs)) if stages else (), **extra)


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
    from .io import load_npz

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


def shift_ratio_pa(scores: dict, classes, ratios, pa_epochs: int, adam: dict, seed: int = 0) -> pd.DataFrame:
    """PA between env0 and every shift-ratio view of env1..env5 (exact and adam solvers, the
    adam ones stacked), with AFR_T (accuracy on the view) and AFR_P (agreement with env0)."""
    envs = [e for e in scores if "/" not in e and e != "env0"]
    n = len(scores["env0"])
    labels = class_indices(np.asarray(classes), scores["env0/labels"])
    cases, b_stack = [], []
    for k, env in enumerate(envs, start=1):
        for ratio in ratios:
            view = shift_ratio_view(n, env, float(ratio))
            cases.append({"env": env, "n_shift_factors": k, "shift_ratio": float(ratio)})
            b_stack.append(_view(scores, view))
    a = scores["env0"]
    b = np.stack(b_stack)
    a_stack = np.broadcast_to(a, b.shape)
    exact = posterior_agreement(a_stack, b, solver="exact")
    fitted = posterior_agreement(a_stack, b, solver="adam", epochs=pa_epochs, lr=adam["lr"],
                                 batch_size=adam["batch_size"], beta0=adam["beta0"], seed=seed)
    rows = []
    for j, case in enumerate(cases):
        rows.append({**case, "logpa_adam": float(fitted.logpa[j]), "beta_adam": float(fitted.beta[j]),
                     "adam_epoch": int(fitted.epoch[j]), "logpa_exact": float(exact.logpa[j]),
                     "beta_exact": float(exact.beta[j]), "afr_true": afr_true(b[j], labels),
                     "afr_pred": afr_pred(a, b[j]), "accuracy_env0": afr_true(a, labels), "n": n})
    return pd.DataFrame(rows)


def selected_accuracy(models: dict, split: dict, device) -> pd.DataFrame:
    """Test accuracy of each selected checkpoint ({"best_acc": (model, state), ...}) on every
    environment of a loaded test split."""
    rows = []
    for env, data in split.items():
        row = {"env": env}
        for name, (model, state) in models.items():
            pred = np.array(state["classes"])[predict(model, data.images, device).argmax(1)]
            row[f"acc_{name}"] = float((pred == data.labels).mean())
            row[f"epoch_{name}"] = int(state["epoch"])
        rows.append(row)
    return pd.DataFrame(rows)


def table1(results: pd.DataFrame, settings_order, tests) -> pd.DataFrame:
    """Table 1: per algorithm and co-occurrence setting, the test accuracy (%) of the epoch
    selected by validation accuracy and the difference PA-selected minus accuracy-selected, as
    mean over seeds with their spread (std)."""
    results = results.assign(diff=results.acc_best_pa - results.acc_best_acc)
    rows = []
    for algorithm in dict.fromkeys(results.algorithm):
        for setting in settings_order:
            d = results[(results.algorithm == algorithm) & (results.setting == setting)]
            if d.empty:
                continue
            row = {"algorithm": algorithm.upper(), "setting": setting, "seeds": d.seed.nunique()}
            for k, env in enumerate(tests, start=1):
                e = d[d.env == env]
                row[f"Test {k} acc"] = f"{100 * e.acc_best_acc.mean():.1f}"
                row[f"Test {k} diff"] = f"{100 * e['diff'].mean():+.1f}"
                row[f"Test {k} std"] = f"{100 * e['diff'].std(ddof=0):.1f}"
            rows.append(row)
    return pd.DataFrame(rows)


def confidence(scores: dict, envs) -> pd.DataFrame:
    """Per test environment: the mean and standard error of the predictive confidence (maximum
    softmax probability) of the model's predictions (Figure 8)."""
    rows = []
    for env in envs:
        z = scores[env] - scores[env].max(1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(1, keepdims=True)
        conf = p.max(1)
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
