"""Attack records and their adversarial-ratio views (numpy only, so that figure jobs need no
PyTorch).

An attack record (.npz, one per (model, attack, eps)) holds for every sample: the adversarial
image, the clean and adversarial scores, the perturbation L-inf norm, the success flag and the
label.  AR = p keeps the p*N samples with the smallest perturbation norm adversarial (ties by
index) and resets the rest to clean: index views of one attack run, never new attacks.
"""
from __future__ import annotations

import numpy as np

from pabench.core.io import load_npz

# name -> (library, bounded by eps)
ATTACKS = {
    "pgd": ("foolbox", True),
    "fmn": ("foolbox", False),
    "apgd-ce": ("pyautoattack", True),
    "apgd-dlr": ("pyautoattack", True),
    "apgd-dlr-t": ("pyautoattack", True),
    "fab": ("pyautoattack", True),
}
TOLERANCE = 1e-6        # float32 rounding of x + delta
RECORD_KEYS = ("adv", "clean_scores", "adv_scores", "linf", "success", "labels")


def check_attack(name: str) -> None:
    if name not in ATTACKS:
        raise ValueError(f"unknown attack {name!r}; choose one of {sorted(ATTACKS)}")


def check_record(record: dict, eps: float | None, n: int, source: str) -> None:
    """Fail loudly unless the record is complete, every image is in [0, 1] and every bounded
    perturbation is within eps."""
    for key in RECORD_KEYS:
        if key not in record:
            raise ValueError(f"{source}: attack record lacks {key!r}")
        if len(record[key]) != n:
            raise ValueError(f"{source}: {key} has {len(record[key])} rows, expected {n}")
    adv = record["adv"]
    if not np.isfinite(adv).all() or adv.min() < 0 or adv.max() > 1:
        raise ValueError(f"{source}: adversarial images outside [0, 1] "
                         f"(min {np.nanmin(adv):.3g}, max {np.nanmax(adv):.3g})")
    if eps is not None and record["linf"].max() > eps + TOLERANCE:
        worst = int(np.argmax(record["linf"]))
        raise ValueError(f"{source}: perturbation of sample {worst} has L-inf norm "
                         f"{record['linf'][worst]:.6g} > eps {eps:.6g}")
    _check_scores(record, source)


def _check_scores(record: dict, source) -> None:
    for key in ("clean_scores", "adv_scores"):
        if key in record and not np.isfinite(record[key]).all():
            raise ValueError(f"{source}: {key} contain NaN or inf")


def load_record(path, keys=RECORD_KEYS) -> dict:
    """The arrays of an attack record (no pickles), checked for consistent lengths and finite
    scores (the rest was checked when the attack run wrote it)."""
    record = load_npz(path, keys, only=True)
    lengths = {k: len(v) for k, v in record.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"{path}: arrays of different lengths {lengths}")
    _check_scores(record, path)
    return record


def ar_order(linf: np.ndarray) -> np.ndarray:
    """Sample indices by perturbation norm, ascending, ties by index (a stable sort)."""
    return np.argsort(np.asarray(linf), kind="stable")


def ar_mask(linf: np.ndarray, ratio: float) -> np.ndarray:
    """Boolean mask of the samples that stay adversarial at AR = ratio."""
    if not 0 <= ratio <= 1:
        raise ValueError(f"adversarial ratio {ratio} outside [0, 1]")
    n = len(linf)
    mask = np.zeros(n, dtype=bool)
    mask[ar_order(linf)[:int(round(ratio * n))]] = True
    return mask


def ar_scores(record: dict, mask: np.ndarray) -> np.ndarray:
    """The scores of an AR view (mask from ar_mask): adversarial where the mask holds."""
    return np.where(mask[:, None], record["adv_scores"], record["clean_scores"])


def softmax(scores: np.ndarray) -> np.ndarray:
    z = scores - scores.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


def confidence_groups(record: dict, ratio: float) -> dict:
    """Figure 4's two groups at AR = ratio: the predictive confidence p(y'|X') of samples
    predicted correctly before the attack, and p(y''|X'') of the successfully attacked ones
    (prediction on the view differs from the clean one)."""
    clean = softmax(record["clean_scores"].astype(np.float64))
    view = softmax(ar_scores(record, ar_mask(record["linf"], ratio)).astype(np.float64))
    pred_a, pred_b = clean.argmax(1), view.argmax(1)
    correct = pred_a == record["labels"]
    attacked = pred_b != pred_a
    return {"clean_correct": clean.max(1)[correct], "attacked": view.max(1)[attacked]}
