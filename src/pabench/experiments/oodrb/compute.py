"""The OODRobustBench experiment's computations, one per rule: the ID split, each dataset shift,
the zoo's training, and per model its accuracy, robustness and PA under every dataset shift, every
threat shift, and Table 3's attack comparison.  Images are uint8 (N, 3, H, W) throughout; every
robustness under dataset shift is MM5's at the training eps, as OODRobustBench evaluates it."""
from __future__ import annotations

import logging
import time

import numpy as np
import pandas as pd
import torch

from pabench.attacks import datasets as adv_data
from pabench.attacks.mm5 import mm_attack
from pabench.attacks import robustbench
from pabench.attacks.models import load_zoo_model, save_zoo_model
from pabench.attacks.training import ZooSettings, as_float, train_zoo
from pabench.experiments.oodrb import plan
from pabench.models import on_device
from pabench.reporting import degenerate

log = logging.getLogger("pabench.oodrb")


def batch_size(device, shape) -> int:
    """Images per forward pass and attack chunk, for images of `shape` (..., H, W): 1,000
    CIFAR-sized images on a GPU, 256 on a CPU, whose passes over 1,000 leave its cache (1.6x
    the time per image for the zoo's CNNs); fewer in proportion for larger images, so that an
    ImageNet model's backward pass fits a GPU (64 at 224 px)."""
    gpu = torch.device(device).type == "cuda"
    per = (1000 if gpu else 256) * 32 * 32 // (shape[-1] * shape[-2])
    return max(64 if gpu else 8, per)


# ------------------------------------------------------------------ data
def _imagenet_sizes(o: dict) -> dict:
    im = o.get("imagenet", {})
    return {"image_size": im.get("image_size", 224), "resize": im.get("resize", 256)}


def id_data(o: dict) -> dict:
    """The zoo's training images and the ID test images (a seeded subset of the test split;
    ImageNet: no training images, the first n_test of the authors' test subset)."""
    if o["dataset"] == "imagenet":
        from pabench.datasets.imagenet_shifts import load_test

        test_x, test_y = load_test(o["imagenet"]["folder"], o["n_test"], **_imagenet_sizes(o))
        return {"train_x": test_x[:0], "train_y": test_y[:0], "test_x": test_x, "test_y": test_y}
    cfg = o.get("cifar10", {})
    train_x, train_y = adv_data.load(o["dataset"], "train", cfg)
    test_x, test_y = adv_data.load(o["dataset"], "test", cfg)
    if o["n_train"] is not None:
        train_x, train_y = adv_data.subset(train_x, train_y, o["n_train"], o["test_seed"] + 1)
    test_x, test_y = adv_data.subset(test_x, test_y, o["n_test"], o["test_seed"])
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def corruption_source(o: dict, n_test: int) -> np.ndarray:
    """The positions in the ID test split of the images every corruption corrupts, at every
    severity: all of them (the paper: the whole test set), or a seeded subset of n_shift in index
    order.  One set for every corruption, so that each is measured against the clean accuracy and
    robustness of the same images (and the split, sorted by class on the digits, is not cut into
    one class per corruption)."""
    return positions(n_test, o["n_shift"], o["test_seed"] + 3)


def positions(n_total: int, n: int | None, seed: int) -> np.ndarray:
    """n of the positions 0..n_total-1: all of them when n is None or >= n_total, else a seeded
    subset in index order (the digits' test split is sorted by class: its first n would not do)."""
    if n is None or n >= n_total:
        return np.arange(n_total)
    return np.sort(np.random.default_rng(seed).permutation(n_total)[:n])


def corruption_data(o: dict, name: str, test_x: np.ndarray, test_y: np.ndarray) -> dict:
    """One corruption at every configured severity of the ID test images of `corruption_source`:
    our generator's, or the published CIFAR-10-C images of the same test images.  x is
    (severities, n, 3, H, W); `source` indexes the clean originals in the ID test split (-1: not
    in it, so no clean pair for PA and no matched clean accuracy)."""
    severities = list(o["severities"])
    if o.get("dataset") == "imagenet":
        return imagenet_corruption(o, name, test_y)
    if o["corruption_source"] == "published":
        return published_corruption(o, name, test_y)
    from pabench.datasets.corruptions import corrupt

    source = corruption_source(o, len(test_x))
    nhwc = np.ascontiguousarray(test_x[source].transpose(0, 2, 3, 1))
    x = np.stack([corrupt(nhwc, name, s, seed=o["corruption_seed"], index=source)
                  .transpose(0, 3, 1, 2) for s in severities])
    return {"x": np.ascontiguousarray(x), "y": test_y[source], "severities": np.array(severities),
            "source": source}


def published_corruption(o: dict, name: str, test_y: np.ndarray) -> dict:
    """One corruption of the published CIFAR-10-C (downloaded into cifar10c_root, MD5-checked).
    Each severity block corrupts the 10,000 CIFAR-10 test images in order, so it pairs with the
    ID split only when that is the whole test set (as long as a block, kept in order; its labels
    must then agree): then the images of `corruption_source`, each with its original; otherwise
    the first n_shift of each severity, unpaired."""
    from pabench.datasets.cifar_shifts import download_cifar10c, load_cifar10c

    folder = download_cifar10c(o["cifar10c_root"])
    parts = [load_cifar10c(folder, name, s) for s in o["severities"]]
    y = parts[0][1]
    if len(test_y) == len(y):
        source = keep = corruption_source(o, len(test_y))
        if not np.array_equal(y[keep], test_y[source]):
            raise ValueError(f"{folder}: the labels of {name} differ from the ID test labels: "
                             "not the CIFAR-10 test set in order, so no image pairs with its "
                             "original")
    else:
        keep = np.arange(len(y) if o["n_shift"] is None else min(o["n_shift"], len(y)))
        source = np.full(len(keep), -1)
    return {"x": np.stack([np.asarray(p[0][keep]) for p in parts]), "y": y[keep],
            "severities": np.array(o["severities"]), "source": source}


def imagenet_corruption(o: dict, name: str, test_y: np.ndarray) -> dict:
    """One corruption of the published ImageNet-C (oodrb.imagenet.c_folder) on the ID test
    images of `corruption_source`: the files of the same names, each paired with its original."""
    from pabench.datasets.cifar_shifts import image_ids
    from pabench.datasets.imagenet_shifts import ID_LIST, load_corruption

    source = corruption_source(o, len(test_y))
    ids = [image_ids(ID_LIST)[i] for i in source]
    parts = [load_corruption(o["imagenet"]["c_folder"], name, s, ids, **_imagenet_sizes(o))
             for s in o["severities"]]
    return {"x": np.stack([x for x, _ in parts]), "y": test_y[source],
            "severities": np.array(o["severities"]), "source": source}


def frost_textures(o: dict, shift: str):
    """The frost textures for this shift's job (a context manager): the reference generator's
    photographs (downloaded into frost_root, SHA-256-checked) where our generator makes frost
    with `frost: photos`; otherwise nothing changes (procedural textures)."""
    from contextlib import nullcontext

    if shift != "frost" or o["corruption_source"] != "generator" or o["frost"] != "photos":
        return nullcontext()
    from pabench.datasets.cifar_shifts import download_frost_photos
    from pabench.datasets.corruptions.frost import photos

    return photos(download_frost_photos(o["frost_root"]))


def natural_data(o: dict, name: str) -> dict:
    """One natural shift: its images (a seeded subset of n_natural), no clean originals."""
    if o["dataset"] == "mnist32":
        from pabench.datasets.digit_shifts import load_natural_shift

        x, y = load_natural_shift(name)
    elif o["dataset"] == "imagenet":   # the first n_natural of the authors' (shuffled) list
        from pabench.datasets.imagenet_shifts import load_natural

        x, y = load_natural(name, o["natural_folders"].get(name), o["natural_root"],
                            o["n_natural"], **_imagenet_sizes(o))
        return {"x": x[None], "y": y, "severities": np.array([0]), "source": np.full(len(y), -1)}
    else:
        x, y = _cifar_natural(name, o["natural_root"], o["natural_folders"].get(name))
    if o["n_natural"] is not None:
        x, y = adv_data.subset(x, y, o["n_natural"], o["test_seed"] + 2)
    return {"x": x[None], "y": y.astype(np.int64), "severities": np.array([0]),
            "source": np.full(len(y), -1)}


def _cifar_natural(name: str, root, folder=None):
    """A published natural shift, downloaded into `root` (checksummed), or read from `folder`
    when the user names one (files in the published layout, already there)."""
    from pabench.datasets import cifar_shifts as cs

    loaders = {"cifar10.1": (cs.load_cifar101, cs.download_cifar101),
               "cifar10.2": (cs.load_cifar102, cs.download_cifar102),
               "cinic10": (cs.load_cinic10, cs.download_cinic10),
               "cifar10r": (cs.load_cifar10r, cs.download_imagenet_r)}
    if name not in loaders:
        raise ValueError(f"unknown CIFAR-10 natural shift {name!r}")
    read, download = loaders[name]
    return read(folder if folder is not None else download(root))


# ------------------------------------------------------------------ models
def settings(spec: dict, eps: float, device) -> ZooSettings:
    keys = ("method", "arch", "epochs", "batch_size", "lr", "pgd_steps", "trades_beta", "seed",
            "augment", "eps_warmup")
    return ZooSettings(**{k: spec[k] for k in keys}, eps=eps, device=str(device))


def train(name: str, spec: dict, data: dict, eps: float, device, tracker=None):
    """Train one zoo model; returns the network and its history table (one row per epoch)."""
    s = settings(spec, eps, device)
    start = time.perf_counter()
    net, history = train_zoo(s, data["train_x"], data["train_y"], num_classes(data),
                             tracker=tracker)
    seconds = time.perf_counter() - start
    acc = accuracy(net, data["test_x"], data["test_y"], device)
    log.info("%s: ID test accuracy %.3f after %.1f s", name, acc, seconds)
    table = pd.DataFrame(history).assign(model=name, **describe(spec), train_seconds=seconds,
                                         accuracy=acc)
    return net, table


def save(net, path, spec: dict, data: dict) -> None:
    save_zoo_model(net, path, spec["arch"], spec["method"], num_classes(data),
                   data["train_x"].shape[-1], extra={"spec": dict(spec)})


def load(config: dict, name: str, path, device):
    """A zoo model from its checkpoint, or a RobustBench model by id (paper scale), from the
    setup's dataset and threat model (RobustBench's CIFAR-10 L-inf or L2, ImageNet L-inf)."""
    if name in plan.zoo(config):
        return on_device(load_zoo_model(path, device=device)[0], device)
    o = config["oodrb"]
    return on_device(robustbench.load(name, o["dataset"], o["robustbench_dir"], device,
                                      o["robustbench_weights"], plan.norm(config)), device)


def describe(spec: dict) -> dict:
    """The model columns every per-model table carries."""
    method = spec.get("method", "robustbench")
    return {"method": method, "adversarial": method != "undefended",
            "arch": spec.get("arch", "robustbench"), "epochs": spec.get("epochs", np.nan),
            "augment": spec.get("augment", ""),
            "trades_beta": spec["trades_beta"] if method == "trades" else np.nan}


def num_classes(data: dict) -> int:
    return int(max(data["train_y"].max(), data["test_y"].max())) + 1


@torch.no_grad()
def logits(model, images, device) -> np.ndarray:
    """Float64 logits of uint8 images (numpy) or of float images in [0, 1] (a tensor)."""
    out = []
    batch = batch_size(device, images.shape)
    for i in range(0, len(images), batch):
        chunk = images[i:i + batch]
        if isinstance(chunk, np.ndarray):
            chunk = as_float(torch.from_numpy(np.ascontiguousarray(chunk)))
        out.append(model(chunk.to(device)).double().cpu())
    return torch.cat(out).numpy()


def accuracy(model, images_u8, labels, device) -> float:
    return float((logits(model, images_u8, device).argmax(1) == labels).mean())


def mm5(model, images_u8: np.ndarray, labels: np.ndarray, eps: float, o: dict, device,
        norm: str = "Linf"):
    """MM5 (o["mm5"]) on uint8 images: (adversarial logits, robust flags, gradient evaluations)."""
    x = as_float(torch.from_numpy(np.ascontiguousarray(images_u8)).to(device))
    y = torch.from_numpy(np.asarray(labels)).long().to(device)
    r = mm_attack(model, x, y, eps, norm, o["mm5"]["n_targets"], o["mm5"]["steps"], seed=0,
                  batch_size=batch_size(device, x.shape), early_stop=True)
    return logits(model, r.x_adv, device), r.robust.cpu().numpy(), r.grad_evals


# ------------------------------------------------------------------ evaluations
def _row(name, spec, shift, family, severity, n, acc, rob, **scores) -> dict:
    return {"model": name, **describe(spec), "shift": shift, "family": family,
            "severity": int(severity), "n": int(n), "accuracy": acc, "robustness": rob, **scores}


def _pa_columns(clean: np.ndarray, views: np.ndarray, labels, pa) -> pd.DataFrame:
    """PA (both solvers) and AFR of each view against the clean logits, as the tidy columns."""
    from pabench.metrics.views import score_views

    s = score_views(clean, views, labels, pa)
    return pd.DataFrame({"log_pa": s.logpa_exact, "log_pa_adam": s.logpa_adam,
                         "beta": s.beta_exact, "afr_pred": s.afr_pred, "afr_true": s.afr_true})


def shifts(config: dict, name: str, model, data: dict, shift_files: dict, pa, device,
           scored: list | None = None):
    """ID and every dataset shift for one model: clean accuracy, MM5 robustness at eps, and PA /
    AFR between the clean and the shifted (ID: MM5's adversarial, the first misclassified
    iterate, the clean image where robust) logits; on each corrupted row also the clean accuracy
    and robustness of exactly its originals (`matched_clean`).  Returns the rows and the per-image
    predictions (clean and adversarial) on the ID set and the natural shifts.  `shift_files`:
    every dataset shift's images; `scored`: the (rows, predictions) of every shift from its own
    job (oodrb.split_shifts), instead of attacking the shifts here (the files then give only
    each corruption's originals)."""
    o, spec = config["oodrb"], plan.zoo(config).get(name, {})
    x, y = data["test_x"], data["test_y"]
    clean = logits(model, x, device)
    adv, robust, _ = mm5(model, x, y, plan.eps_of(config), o, device, plan.norm(config))
    scores = _pa_columns(clean, adv[None], y, pa).iloc[0].to_dict()
    accuracy = float((clean.argmax(1) == y).mean())
    rows = pd.DataFrame([_row(name, spec, "id", "id", 0, len(y), accuracy, float(robust.mean()),
                              **scores)])
    preds = [_predictions(name, spec, "id", y, clean, adv)]
    if scored is None:
        scored = [shift_scores(config, name, model, clean, shift_files, pa, device)]
    table = pd.concat([rows, *(r for r, _ in scored)], ignore_index=True)
    table = matched_clean(table, shift_files, clean.argmax(1) == y, robust)
    # A model near chance on its ID test images, or whose PA is at beta* = 0 for every view, is
    # not evidence (pabench.reporting.degenerate): flagged on all its rows.
    flagged = degenerate.flag(table.accuracy.iloc[0], len(y), clean.shape[1], table.beta)
    return (table.assign(**{degenerate.COLUMN: flagged}),
            pd.concat([*preds, *(p for _, p in scored)], ignore_index=True))


def matched_clean(table: pd.DataFrame, shift_files: dict, correct: np.ndarray,
                  robust: np.ndarray) -> pd.DataFrame:
    """The rows with `clean_accuracy` and `clean_robustness`: on a corrupted row, the clean
    accuracy and MM5 robustness (per-image flags `correct` and `robust` on the ID split) of
    exactly the ID images it corrupts; NaN elsewhere (natural shifts have no originals: they
    are compared with the whole ID split, as in the paper; ID and threat rows are that split)."""
    from pabench.core.io import load_npz

    acc, rob = np.full(len(table), np.nan), np.full(len(table), np.nan)
    for shift, path in shift_files.items():
        source = load_npz(path, ["source"], only=True)["source"]
        if len(source) and (source >= 0).all():
            mine = (table["shift"] == shift).to_numpy() & (table.family == "corruption").to_numpy()
            acc[mine], rob[mine] = correct[source].mean(), robust[source].mean()
    return table.assign(clean_accuracy=acc, clean_robustness=rob)


def shift_scores(config: dict, name: str, model, clean_id: np.ndarray, shift_files: dict, pa,
                 device) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The given dataset shifts for one model: a row per shift and severity (clean accuracy, MM5
    robustness, PA / AFR of each corrupted set against the clean logits `clean_id` of its ID
    originals) and the per-image predictions on the natural shifts and on the corruptions of
    plan.agreement_corruptions (every severity's images in turn, indexed as one set)."""
    from pabench.core.io import load_npz

    o, spec = config["oodrb"], plan.zoo(config).get(name, {})
    # Every shifted image in one MM5 call: large batches are several times cheaper per image.
    sets = []
    for shift, path in shift_files.items():
        d = load_npz(path, ["x", "y", "severities", "source"])
        for k, severity in enumerate(d["severities"]):
            sets.append((shift, int(severity), d["x"][k], d["y"], d["source"]))
    all_x = np.concatenate([s[2] for s in sets])
    all_y = np.concatenate([s[3] for s in sets])
    all_clean = logits(model, all_x, device)
    all_adv, all_robust, _ = mm5(model, all_x, all_y, plan.eps_of(config), o, device,
                                 plan.norm(config))
    bounds = np.cumsum([0] + [len(s[3]) for s in sets])
    paired = [(j, s) for j, s in enumerate(sets) if (s[4] >= 0).all()]
    pa_rows = {}
    if paired:
        # each corrupted set against the clean logits of its own originals, in one stacked solve
        views = np.stack([all_clean[bounds[j]:bounds[j + 1]] for j, _ in paired])
        ref = np.stack([clean_id[s[4]] for _, s in paired])
        table = _pa_columns(ref, views, np.stack([s[3] for _, s in paired]), pa)
        pa_rows = {j: table.iloc[k].to_dict() for k, (j, _) in enumerate(paired)}
    nan = dict.fromkeys(("log_pa", "log_pa_adam", "beta", "afr_pred", "afr_true"), np.nan)
    rows, preds, recorded = [], [], set(plan.agreement_corruptions(config))
    first = {}   # shift -> its first image's position in all_x (a corruption's severities in turn)
    for j, (shift, severity, _, labels, _) in enumerate(sets):
        lo, hi = bounds[j], bounds[j + 1]
        family = "corruption" if plan.is_corruption(config, shift) else "natural"
        rows.append(_row(name, spec, shift, family, severity, hi - lo,
                         float((all_clean[lo:hi].argmax(1) == labels).mean()),
                         float(all_robust[lo:hi].mean()), **pa_rows.get(j, nan)))
        if family == "natural" or shift in recorded:
            start = lo - first.setdefault(shift, lo)
            preds.append(_predictions(name, spec, shift, labels, all_clean[lo:hi], all_adv[lo:hi],
                                      start))
    if not preds:   # no shift with predictions among these: an empty table with the columns
        preds = [_predictions(name, spec, "", np.zeros(0, np.int64), np.zeros((0, 1)),
                              np.zeros((0, 1)))]
    return pd.DataFrame(rows), pd.concat(preds, ignore_index=True)


def _predictions(name, spec, shift, labels, clean, adv, start: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"model": name, "adversarial": describe(spec)["adversarial"], "shift": shift,
                         "index": start + np.arange(len(labels)),
                         "label": labels, "pred_clean": clean.argmax(1), "pred_adv": adv.argmax(1)})


def threat_source(o: dict, n_test: int) -> np.ndarray:
    """The positions in the ID test split of the images every threat shift attacks: all of them
    (the paper), or a seeded subset of n_threat (the quick scale: the threat attacks' restarts
    are most of its cost), the same for every threat."""
    return positions(n_test, o.get("n_threat"), o["test_seed"] + 5)


def id_flags(predictions: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The ID split's per-image (correct, robust) flags from `shifts`' predictions (MM5's
    adversarial prediction is the clean one where the attack failed)."""
    p = predictions[predictions["shift"] == "id"].sort_values("index")
    label = p.label.to_numpy()
    return p.pred_clean.to_numpy() == label, p.pred_adv.to_numpy() == label


def threats(config: dict, name: str, model, data: dict, pa, device,
            flags: tuple[np.ndarray, np.ndarray] | None = None) -> pd.DataFrame:
    """Every threat shift on the ID test images of `threat_source`: robust accuracy and PA / AFR
    of clean vs adversarial logits.  L-inf and L2 run MM5; StAdv, ReColor, PPGD and LPA their own
    attacks (PPGD and LPA bounded by the LPIPS network of oodrb.lpips, loaded once).  On a subset,
    each row also carries the clean accuracy and robustness of exactly those images, from the ID
    split's per-image `flags` (`id_flags`), as a corrupted row does (`matched_clean`)."""
    from pabench.attacks.perceptual import load_lpips

    o, spec = config["oodrb"], plan.zoo(config).get(name, {})
    keep = threat_source(o, len(data["test_y"]))
    x, y = data["test_x"][keep], data["test_y"][keep]
    matched = {}
    if len(keep) < len(data["test_y"]):
        if flags is None:
            raise ValueError("threat shifts on a subset of the ID images need the ID split's "
                             "per-image flags (compute.id_flags) for their clean numbers")
        matched = {"clean_accuracy": float(flags[0][keep].mean()),
                   "clean_robustness": float(flags[1][keep].mean())}
    clean = logits(model, x, device)
    lpips = None
    rows = []
    for shift, t in plan.threats(config).items():
        start = time.perf_counter()
        if t["kind"] in plan.LPIPS_KINDS and lpips is None:
            lp = o["lpips"]
            lpips = load_lpips(lp["network"], lp["weights"], lp["dir"], sha256=lp["sha256"],
                               device=device)
        adv, robust, evals = threat_attack(t, model, x, y, o, device, lpips)
        scores = _pa_columns(clean, adv[None], y, pa).iloc[0].to_dict()
        rows.append(_row(name, spec, shift, "threat", 0, len(y), np.nan, float(robust.mean()),
                         **scores, kind=t["kind"], eps=t["eps"], steps=t.get("steps"),
                         grad_evals=evals, **matched,
                         seconds=time.perf_counter() - start))
        log.info("%s %s: robust accuracy %.3f", name, shift, rows[-1]["robustness"])
    return pd.DataFrame(rows)


def threat_attack(t: dict, model, x: np.ndarray, y: np.ndarray, o: dict, device, lpips=None):
    """One threat shift (a plan.threats entry) on uint8 images: (adversarial logits, robust
    flags, gradient evaluations).  L-inf and L2 run MM5 (o["mm5"], with the threat's `steps`
    per target and `restarts` where it gives them); StAdv and ReColor take
    lr_scale x the reference's Adam step relative to their bound (threats.reference_lr); PPGD
    and LPA need the LPIPS network."""
    from pabench.attacks.perceptual import lpa_attack, ppgd_attack
    from pabench.attacks import threats as th

    xf = as_float(torch.from_numpy(x).to(device))
    yt = torch.from_numpy(y).long().to(device)
    if t["kind"] in ("linf", "l2"):
        return _mm_restarts(t, model, x, y, xf, yt, o, device)
    if t["kind"] in plan.LPIPS_KINDS:
        attack = {"ppgd": ppgd_attack, "lpa": lpa_attack}[t["kind"]]
        r = attack(model, lpips, xf, yt, t["eps"], t["steps"], batch_size=batch_size(device, xf.shape))
    else:
        r = th.threat_attack(t["kind"], model, xf, yt, t["eps"], t["steps"],
                             batch_size=batch_size(device, xf.shape),
                             lr=th.reference_lr(t["kind"], t["eps"], t["lr_scale"]))
    return logits(model, r.x_adv, device), r.robust.cpu().numpy(), r.grad_evals


def _mm_restarts(t: dict, model, x, y, xf, yt, o: dict, device):
    """MM5 with the threat's iterations per target (default o["mm5"]'s), then each further
    restart (seeds 1, 2, ...) on the points still robust, as AutoAttack adds its restarts: a point
    is robust when no restart breaks it, its adversarial example the first restart's that does."""
    norm = "Linf" if t["kind"] == "linf" else "L2"
    steps = t.get("steps", o["mm5"]["steps"])
    adv, robust, evals = mm5(model, x, y, t["eps"], {**o, "mm5": {**o["mm5"], "steps": steps}},
                             device, norm)
    for seed in range(1, t.get("restarts", 1)):
        todo = np.flatnonzero(robust)
        if not todo.size:
            break
        r = mm_attack(model, xf[todo], yt[todo], t["eps"], norm, o["mm5"]["n_targets"], steps,
                      seed=seed, batch_size=batch_size(device, xf.shape), early_stop=True)
        evals += r.grad_evals
        broken = ~r.robust.cpu().numpy()
        if broken.any():
            adv[todo[broken]] = logits(model, r.x_adv[torch.from_numpy(broken)], device)
            robust[todo[broken]] = False
    return adv, robust, evals


# ------------------------------------------------------------------ Table 3: the attacks compared
class PassCounter:
    """Counts, on a model, the images in every backward pass that reaches the input (gradient
    evaluations) and in every forward pass, by hooks: one count for every attack alike."""

    def __init__(self, model):
        self.grad = self.forward = 0
        self._hooks = [model.register_full_backward_hook(self._backward),
                       model.register_forward_hook(self._forward)]

    def _backward(self, module, grad_input, grad_output):
        self.grad += grad_output[0].shape[0]

    def _forward(self, module, inputs, output):
        self.forward += inputs[0].shape[0]

    def close(self):
        for h in self._hooks:
            h.remove()


def _loss(name: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Per-image loss the PGD variants ascend: cross-entropy, or CW's margin max_{j != y} f_j - f_y."""
    if name == "pgd":
        return torch.nn.functional.cross_entropy(out, y, reduction="none")
    other = out.clone()
    other[torch.arange(len(y)), y] = -torch.inf
    return other.amax(1) - out.gather(1, y[:, None])[:, 0]


def pgd(model, x: torch.Tensor, y: torch.Tensor, eps: float, steps: int, rel_stepsize: float,
        loss: str = "pgd") -> torch.Tensor:
    """L-inf PGD without random start (step rel_stepsize x eps, sign of the gradient) on CE
    ("pgd") or the CW margin ("cw"); a point counts as broken when any iterate misclassifies it,
    and its adversarial example is the first such iterate.  Returns the robust flags."""
    model.requires_grad_(False)
    adv, robust = x.clone(), model(x).argmax(1) == y
    for _ in range(steps):
        adv.requires_grad_(True)
        out = model(adv)
        robust &= out.argmax(1) == y
        (grad,) = torch.autograd.grad(_loss(loss, out, y).sum(), adv)
        step = rel_stepsize * eps * grad.sign() * robust[:, None, None, None]
        adv = (x + (adv.detach() + step - x).clamp(-eps, eps)).clamp(0, 1)
    with torch.no_grad():
        robust &= model(adv).argmax(1) == y
    return robust


def autoattack(model, x, y, eps: float, a: dict, device) -> torch.Tensor:
    """AutoAttack's standard version (APGD-CE, APGD-T, FAB-T, Square; pyautoattack, the reference
    code) with the iteration counts of the config (plan.AA_DEFAULTS: the standard ones).  Returns
    the robust flags."""
    from pyautoattack import AutoAttack

    aa = AutoAttack(model, norm="Linf", eps=eps, version="standard", seed=0, device=device)
    aa.verbose = False
    aa.apgd.n_iter = aa.apgd_targeted.n_iter = a["apgd_steps"]
    aa.fab.n_iter = a["fab_steps"]
    aa.square.n_queries = a["square_queries"]
    x_adv, _ = aa.run_standard_evaluation(x, y, batch_size=batch_size(device, x.shape))
    with torch.no_grad():
        return torch.from_numpy(logits(model, x_adv, device).argmax(1)).to(y.device) == y


def table3_sets(config: dict, data: dict, shift_files: dict) -> dict:
    """Table 3's images: {"id": (x, y), "corruptions": (x, y)}.  ID: table3.n ID test images (a
    seeded subset of the split in index order, all of it when n >= n_test).  Corrupted: table3.n
    images at table3.severity drawn across the corruptions in turn (image i is corruption
    i mod C of the corruptions' i // C-th original)."""
    from pabench.core.io import load_npz

    o, t3 = config["oodrb"], config["oodrb"]["table3"]
    n = t3["n"]
    keep = positions(len(data["test_y"]), n, o["test_seed"] + 4)
    sets = {"id": (data["test_x"][keep], data["test_y"][keep])}
    corruptions = [s for s in shift_files if plan.is_corruption(config, s)]
    if corruptions:
        loaded = {c: load_npz(shift_files[c], ["x", "y", "severities"]) for c in corruptions}
        picks = [(corruptions[i % len(corruptions)], i // len(corruptions)) for i in range(n)]
        picks = [(c, j) for c, j in picks if j < len(loaded[c]["y"])]
        k = {c: list(loaded[c]["severities"]).index(t3["severity"]) for c in corruptions}
        sets["corruptions"] = (np.stack([loaded[c]["x"][k[c]][j] for c, j in picks]),
                               np.array([loaded[c]["y"][j] for c, j in picks]))
    return sets


def attacks(config: dict, name: str, model, data: dict, shift_files: dict, device
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Table 3 for one model: PGD, CW, AutoAttack and MM5 at eps on the images of `table3_sets`,
    with measured gradient evaluations and seconds.  Returns a row per attack and set, and a row
    per image and set with every attack's robust flag (for the paired MM5 - AA gap's standard
    error)."""
    o, spec, t3 = config["oodrb"], plan.zoo(config).get(name, {}), config["oodrb"]["table3"]
    eps = plan.eps_of(config)
    rows, images = [], []
    for shift, (x_u8, labels) in table3_sets(config, data, shift_files).items():
        x = as_float(torch.from_numpy(np.ascontiguousarray(x_u8)).to(device))
        y = torch.from_numpy(labels).long().to(device)
        flags = {}
        for attack in ("pgd", "cw", "aa", "mm5"):
            counter, start = PassCounter(model), time.perf_counter()
            try:
                if attack in ("pgd", "cw"):
                    robust = pgd(model, x, y, eps, t3[attack]["steps"],
                                 plan.table3_step(config, attack), attack)
                elif attack == "aa":
                    robust = autoattack(model, x, y, eps, t3["aa"], device)
                else:
                    robust = mm_attack(model, x, y, eps, "Linf", o["mm5"]["n_targets"],
                                       o["mm5"]["steps"], batch_size=batch_size(device, x.shape)).robust
            finally:
                counter.close()
            flags[attack] = robust.cpu().numpy().astype(bool)
            rows.append({"model": name, **describe(spec), "attack": attack, "shift": shift,
                         "severity": 0 if shift == "id" else t3["severity"], "n": len(labels),
                         "setting": plan.attack_setting(config, attack),
                         "robustness": float(flags[attack].mean()),
                         "grad_evals": counter.grad, "forward_evals": counter.forward,
                         "seconds": time.perf_counter() - start})
            log.info("%s %s %s: robust accuracy %.3f, %d gradient evaluations", name, shift,
                     attack, rows[-1]["robustness"], counter.grad)
        images.append(pd.DataFrame({"model": name, "shift": shift, "index": np.arange(len(labels)),
                                    "label": labels,
                                    **{f"robust_{a}": f for a, f in flags.items()}}))
    return pd.DataFrame(rows), pd.concat(images, ignore_index=True)
