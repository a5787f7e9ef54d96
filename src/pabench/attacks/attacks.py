"""Evasion attacks of the PA paper (Section 4.1, Appendix F) and the per-sample record each
attack run writes.

PGD L-inf and FMN L-inf come from foolbox (the authors' library and settings: PGD without random
start at `rel_stepsize` 0.025; FMN minimum-norm, untargeted); APGD-CE, APGD-DLR, APGD-DLR-T and
FAB from pyautoattack (the reference AutoAttack by Croce & Hein).  Library semantics are kept:
APGD and FAB return the clean image where they fail, so those samples have perturbation norm 0.

One run = (model, attack, eps) over the whole test set, batch by batch.  Every finished batch is
kept in `<output>.partial/` so an interrupted run resumes where it stopped; the final record is
checked (every image in [0, 1], every bounded perturbation within eps) before it is written.
"""
from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from pabench.core.paths import Eps
from pabench.core.io import atomic_path, load_npz
from pabench.attacks.records import ATTACKS, RECORD_KEYS, check_attack, check_record

log = logging.getLogger("pabench.attacks")


def attack_fn(name: str, model, eps: float | None, cfg: dict, num_classes: int, device):
    """A function (x, y) -> adversarial x of the named attack with the config's settings.  The
    model's weights are frozen: attacks need input gradients only, and foolbox's backward pass
    would otherwise also compute every weight gradient (measured: +30-50% time per step)."""
    model.requires_grad_(False)
    steps = int(cfg["steps"])
    if name in ("pgd", "fmn"):
        import foolbox as fb

        fmodel = fb.PyTorchModel(model, bounds=(0, 1), device=device)
        if name == "pgd":
            attack = fb.attacks.LinfPGD(rel_stepsize=cfg.get("rel_stepsize", 0.025), steps=steps,
                                        random_start=cfg.get("random_start", False))
        else:
            attack = fb.attacks.LInfFMNAttack(steps=steps)

        def run(x, y):
            _, clipped, _ = attack(fmodel, x, y, epsilons=eps)
            return clipped
        return run
    from pyautoattack.autopgd_base import APGDAttack, APGDAttack_targeted
    from pyautoattack.fab_pt import FABAttack_PT

    common = dict(n_iter=steps, norm="Linf", eps=eps, n_restarts=cfg.get("restarts", 1),
                  seed=cfg.get("seed", 0), device=device)
    if name == "apgd-ce":
        attack = APGDAttack(model, loss="ce", **common)
    elif name == "apgd-dlr":
        attack = APGDAttack(model, loss="dlr", **common)
    elif name == "apgd-dlr-t":
        attack = APGDAttack_targeted(model, n_target_classes=min(cfg.get("targets", 9), num_classes - 1),
                                     **common)
    else:
        attack = FABAttack_PT(model, targeted=False, **common)
    return lambda x, y: attack.perturb(x, y)


def fingerprint(model: torch.nn.Module, name: str, eps, cfg: dict, labels: np.ndarray,
                batch_size: int) -> str:
    """What a partial batch depends on; batches of another model or setting are not reused."""
    h = hashlib.sha256(json.dumps([name, str(eps), cfg, repr(model), batch_size], sort_keys=True,
                                  default=str).encode())
    for v in model.state_dict().values():
        h.update(v.detach().cpu().numpy().tobytes())
    h.update(labels.tobytes())
    return h.hexdigest()


def _batch(model, fn, x_u8: np.ndarray, y: np.ndarray, device) -> dict:
    x = torch.from_numpy(x_u8).to(device).float().div_(255)
    t = torch.from_numpy(y).long().to(device)
    adv = fn(x, t)
    if not isinstance(adv, torch.Tensor) or tuple(adv.shape) != tuple(x.shape):
        shape = tuple(adv.shape) if isinstance(adv, torch.Tensor) else type(adv).__name__
        raise ValueError(f"the attack returned adversarial images of shape {shape}, expected "
                         f"{tuple(x.shape)}")
    adv = adv.detach().float()
    with torch.no_grad():
        clean_scores, adv_scores = model(x).float(), model(adv).float()
    linf = (adv - x).abs().flatten(1).amax(1)
    return {"adv": adv.cpu().numpy(), "clean_scores": clean_scores.cpu().numpy(),
            "adv_scores": adv_scores.cpu().numpy(), "linf": linf.cpu().numpy(),
            "success": (adv_scores.argmax(1) != t).cpu().numpy(), "labels": y.astype(np.int64)}


def attack_dataset(model, images: np.ndarray, labels: np.ndarray, name: str, eps: Eps, cfg: dict,
                   output, batch_size: int, device, num_classes: int, progress: bool = True) -> dict:
    """Attack every image (uint8, N x 3 x H x W) with the bound eps (unbounded for a
    minimum-norm attack), resuming from finished batches, check the record and write it to
    `output` (.npz).  Returns the record."""
    check_attack(name)
    if ATTACKS[name][1] != (eps.value is not None):
        raise ValueError(f"attack {name!r} {'needs' if ATTACKS[name][1] else 'takes no'} eps bound, got {eps}")
    eps_value = eps.value
    output = Path(output)
    partial = output.with_name(output.name + ".partial")
    key = fingerprint(model, name, eps.tag, cfg, labels, batch_size)
    stamp = partial / "fingerprint"
    if partial.exists() and (not stamp.is_file() or stamp.read_text() != key):
        shutil.rmtree(partial)  # another model or setting: start over
    partial.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key)
    fn = attack_fn(name, model, eps_value, cfg, num_classes, device)
    parts = []
    starts = range(0, len(images), batch_size)
    for b, lo in enumerate(tqdm(starts, desc=f"{name} eps={eps}", disable=not progress, mininterval=2.0)):
        path = partial / f"batch{b:05d}.npz"
        hi = min(lo + batch_size, len(images))
        part = _load_part(path, hi - lo)
        if part is None:
            part = _batch(model, fn, images[lo:hi], labels[lo:hi], device)
            check_record(part, eps_value, hi - lo, f"batch {b}")
            with atomic_path(path) as tmp, open(tmp, "wb") as fh:
                np.savez(fh, **part)
        parts.append(part)
    record = {k: np.concatenate([p[k] for p in parts]) for k in RECORD_KEYS}
    check_record(record, eps_value, len(images), str(output))
    with atomic_path(output) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **record)
    shutil.rmtree(partial)
    return record


def _load_part(path: Path, n: int) -> dict | None:
    """A finished batch of an interrupted run, or None (missing or unreadable: redo it)."""
    if not path.is_file():
        return None
    try:
        part = load_npz(path, RECORD_KEYS, only=True)
    except ValueError:
        log.warning("%s: unreadable partial batch, recomputing it", path)
        return None
    return part if all(len(v) == n for v in part.values()) else None
