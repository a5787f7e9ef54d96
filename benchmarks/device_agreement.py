"""The same weights on two devices at the paper's N: do CPU and GPU results agree within
workflow/config/tolerances.yaml, whose limits were set for 10,000 test points?

    python benchmarks/device_agreement.py train CKPT                 # once, here (CPU, ~2 min)
    python benchmarks/device_agreement.py eval CKPT OUT [--device cuda] [--fashion DIR]
    python -m pabench.tools.compare OUT_CPU OUT_GPU --tolerances workflow/config/tolerances.yaml

A rehearsal compares models trained on each device (different models) on 8-16 points; this
compares one checkpoint on the 10,000 Fashion-MNIST test images.  `train`: the average-case
CNN (`cnn`, paper width), 2 epochs of Adam on the 60,000 training images.  `eval` computes, on
`--device`, what the papers' tables report and tolerances.yaml has limits for:

- clean accuracy; PGD (L-inf, eps 0.1, 10 steps of 0.025, no random start: deterministic)
  robustness; PA between the clean and the adversarial logits, exact and Adam (100 epochs);
  AFR_T and AFR_P: OUT/figures/agreement/summary.csv;
- at sigma 0.1: mean p_taylor (deterministic), mean p_mmse (n = 5) and mean p_mc (n = 100)
  in the same file, and p_taylor per point in OUT/figures/avgcase/agreement_points.csv (the
  per-point limit of tolerances.yaml applies to the average-case files).

MC and MMSE draw their noise from the device's own generator, so their means differ by sampling
error as well as rounding; the two Taylor columns isolate rounding.  --fashion names a folder
holding Debian's Fashion-MNIST .gz files (default: where Debian's package puts them).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from pabench.attacks.training import pgd_linf
from pabench.datasets import fashion_mnist
from pabench.experiments.avgcase.training import as_input, build, train
from pabench.metrics.afr import accuracy, afr_pred, afr_true
from pabench.metrics.avgcase import estimators as est
from pabench.metrics.pa import posterior_agreement

SHAPE, CLASSES, ARCH = (1, 28, 28), 10, "cnn"
EPS, STEPS, STEP = 0.1, 10, 0.025
SIGMA, MMSE_N, MC_N = 0.1, 5, 100
BATCH = 1000


def data(split: str, folder: str | None):
    kw = {"source": "debian", "debian_dir": folder} if folder else {}
    images, labels = fashion_mnist.load(split, **kw)
    return images[:, None], labels


def cmd_train(args):
    torch.manual_seed(0)
    x, y = data("train", args.fashion)
    tx, ty = data("test", args.fashion)
    model, history = train(ARCH, 0.0, x, y, tx, ty, epochs=2, batch_size=128, lr=1e-3, seed=0,
                           device="cpu")
    torch.save(model.state_dict(), args.ckpt)
    print(f"trained {ARCH}: {history[-1]}; wrote {args.ckpt}")


def batched(fn, x, *rest):
    return torch.cat([fn(x[i:i + BATCH], *(r[i:i + BATCH] for r in rest))
                      for i in range(0, len(x), BATCH)])


def per_batch(estimate, x) -> np.ndarray:
    """An estimator's per-point numpy results, BATCH points at a time (the order the documented
    runs drew their MC and MMSE noise in)."""
    return np.concatenate([estimate(x[i:i + BATCH]) for i in range(0, len(x), BATCH)])


def cmd_eval(args):
    device = torch.device(args.device)
    model = build(ARCH, SHAPE, CLASSES)
    model.load_state_dict(torch.load(args.ckpt, map_location="cpu"))
    model = model.to(device).eval().requires_grad_(False)
    images, labels = data("test", args.fashion)
    x, y = as_input(images, device), torch.as_tensor(labels, device=device)
    start = time.perf_counter()
    with torch.no_grad():
        clean = batched(model, x).double().cpu()
    adv_x = batched(lambda xb, yb: pgd_linf(model, xb, yb, EPS, STEPS, STEP, False), x, y)
    with torch.no_grad():
        adv = batched(model, adv_x).double().cpu()
    exact = posterior_agreement(clean, adv, "exact")
    adam = posterior_agreement(clean, adv, "adam", epochs=100)
    p_taylor = per_batch(lambda xb: est.p_taylor(model, xb, SIGMA), x)
    p_mmse = per_batch(lambda xb: est.p_mmse(model, xb, SIGMA, MMSE_N), x)
    p_mc = per_batch(lambda xb: est.p_mc(model, xb, SIGMA, MC_N).p, x)
    seconds = time.perf_counter() - start
    summary = pd.DataFrame([{
        "model": f"fashion_mnist/{ARCH} (2 epochs)", "points": len(x),
        "accuracy_clean": accuracy(clean, labels), "robustness": accuracy(adv, labels),
        "logpa_exact": exact.logpa, "beta_exact": exact.beta,
        "logpa_adam": adam.logpa, "beta_adam": adam.beta,
        "afr_true": afr_true(adv, labels), "afr_pred": afr_pred(clean, adv),
        "mean_p_taylor": p_taylor.mean(), "mean_p_mmse": p_mmse.mean(),
        "mean_p_mc": p_mc.mean(), "seconds": seconds, "device": str(device)}])
    out = Path(args.out)
    (out / "figures/agreement").mkdir(parents=True, exist_ok=True)
    (out / "figures/avgcase").mkdir(parents=True, exist_ok=True)
    summary.to_csv(out / "figures/agreement/summary.csv", index=False)
    pd.DataFrame({"p": p_taylor}).to_csv(out / "figures/avgcase/agreement_points.csv",
                                         index=False)
    print(summary.T.to_string(header=False))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("ckpt")
    e = sub.add_parser("eval")
    e.add_argument("ckpt")
    e.add_argument("out")
    e.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    for p in (t, e):
        p.add_argument("--fashion", help="folder of Debian's Fashion-MNIST .gz files")
    args = ap.parse_args()
    {"train": cmd_train, "eval": cmd_eval}[args.cmd](args)


if __name__ == "__main__":
    main()
