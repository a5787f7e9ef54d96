"""Table 1 of the average-case paper at its own size, on any device: wall seconds of MC
(n = 10,000), Taylor and MMSE (n = 5) for the same 50 points at sigma = 0.1, through the
workflow's own `compute.runtime` (each estimator warmed up on one point first).

    python benchmarks/bench_runtime.py [--device cuda] [--points 50] [--classes 10 100]
                                       [--split] [--authors] [--mc-n 10000]

Model: the average-case PreAct ResNet-18 at 32x32, random init with BatchNorm statistics
recalibrated on 64 other images (as in bench_avgcase.py: the raw init predicts one class
everywhere), for each number of classes; points: mnist32 test images.  The workflow's Table 1
times the trained main model where the job runs; this script times the same estimators on the
paper's network without training one, so a GPU session can measure the paper-scale row in
seconds.  On a CPU it times 2 points unless told otherwise (and --mc-n below 10,000 is scaled
linearly to 10,000 in the ratios, as MC's time is linear in its copies).

For each number of classes it prints the issue's goal for the normal CDF on the device:
Taylor >= 10x faster than MC n = 10,000 and faster than MMSE n = 5.  --split times each
linearisation and its normal CDF apart: the CDF on the estimator's device (PyTorch on a GPU)
and, beside it, on the CPU (the C kernel) for the same z and covariance, with their largest
difference.  --authors also times the authors' own Taylor and MMSE (benchmarks/authors.py:
jacobian(model(x).sum(0), vectorize=True), scipy's CDF per point at maxpts 10,000).

The lead's GPU call (one short run, paper size):
    python benchmarks/bench_runtime.py --device cuda --split --authors
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
import torch

from pabench.attacks.datasets import mnist32
from pabench.core.paths import AvgModel
from pabench.experiments.avgcase.compute import runtime
from pabench.experiments.avgcase.training import as_input, build, recalibrate_batchnorm
from pabench.metrics.avgcase import estimators as est
from pabench.metrics.avgcase.mvn import mvn_cdf

import authors   # benchmarks/authors.py


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--points", type=int, help="points timed (default: 50, the paper's, on a "
                    "GPU; 2 on a CPU, where MC n = 10,000 alone takes over a minute per point)")
    ap.add_argument("--classes", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--mc-n", type=int, default=10_000)
    ap.add_argument("--mmse-n", type=int, default=5)
    ap.add_argument("--split", action="store_true", help="also time Taylor's and MMSE's two parts "
                    "apart: the linearisation (gradients) and the normal CDF, on the device and "
                    "on the CPU")
    ap.add_argument("--authors", action="store_true", help="also time the authors' Taylor and "
                    "MMSE on the same points")
    ap.add_argument("--threads", type=int, help="CPU threads of torch (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    points = args.points or (50 if device.type == "cuda" else 2)
    images, _ = mnist32("test")
    cfg = {"sigma": 0.1, "mc_n": args.mc_n, "mmse_n": args.mmse_n}
    tables = []
    for classes in args.classes:
        torch.manual_seed(0)
        model = build("resnet18", (3, 32, 32), classes).to(device)
        model = recalibrate_batchnorm(model, images[500:564], device, batch=64)
        m = AvgModel(f"random{classes}", "resnet18", 0.0)
        t = runtime(model, m, images[:points], cfg, device)
        t["classes"] = classes
        if args.authors:
            t = pd.concat([t, authors_rows(model, images[:points], cfg, device)], ignore_index=True)
            t["classes"] = classes
        tables.append(t)
        if args.split:
            split(model, images[:points], cfg, device, classes)
    t = pd.concat(tables, ignore_index=True)
    print(f"device: {t['device'].iloc[0]}; torch {torch.__version__}")
    print(t[["classes", "estimator", "n", "points", "seconds", "seconds_per_point"]]
          .to_string(index=False))
    scale = 10_000 / args.mc_n
    for classes, g in t.groupby("classes"):
        s = g.set_index("estimator")["seconds_per_point"]
        mc = s["mc"] * scale
        note = f" (MC n={args.mc_n:,} scaled x{scale:g} to n=10,000)" if scale != 1 else ""
        goal = mc / s["taylor"] >= 10 and s["taylor"] < s["mmse"]
        print(f"{classes} classes{note}: MC / Taylor {mc / s['taylor']:.1f}x, MC / MMSE "
              f"{mc / s['mmse']:.1f}x, MMSE / Taylor {s['mmse'] / s['taylor']:.2f}x; goal (Taylor "
              f">= 10x faster than MC, faster than MMSE) {'met' if goal else 'NOT met'}")
        if args.authors:
            print(f"   against the authors' way: Taylor {s['authors_taylor'] / s['taylor']:.2f}x, "
                  f"MMSE {s['authors_mmse'] / s['mmse']:.2f}x faster")


def authors_rows(model, images_u8, cfg, device):
    """Seconds of the authors' Taylor and MMSE on the same points (warmed up on one point)."""
    x = as_input(images_u8, device)
    sigma, n = cfg["sigma"], cfg["mmse_n"]
    rows = []
    for name, fn in (("authors_taylor", lambda x: authors.taylor(model, x, sigma)),
                     ("authors_mmse", lambda x: authors.mmse(model, x, sigma, n))):
        fn(x[:1])
        authors.sync(device)
        start = time.perf_counter()
        fn(x)
        authors.sync(device)
        seconds = time.perf_counter() - start
        rows.append({"estimator": name, "n": n if name.endswith("mmse") else 0, "points": len(x),
                     "seconds": seconds, "seconds_per_point": seconds / len(x)})
    return pd.DataFrame(rows)


def split(model, images_u8, cfg, device, classes):
    """Seconds per point of the linearisation and of the normal CDF, Taylor and MMSE apart: the
    CDF where the estimators run it (the model's device) and on the CPU (the C kernel)."""
    x = as_input(images_u8, device)
    for name, kw in (("taylor", {}), ("mmse", {"sigma": cfg["sigma"], "n": cfg["mmse_n"]})):
        lin = est.linearised(model, x[:1], **kw)                # warm-ups
        est.from_linearisation(lin, cfg["sigma"])
        authors.sync(device)
        start = time.perf_counter()
        lin = est.linearised(model, x, **kw)
        authors.sync(device)
        mid = time.perf_counter()
        p, err = est.from_linearisation(lin, cfg["sigma"], return_error=True)
        end = time.perf_counter()
        p_cpu, cpu = p, end - mid
        if device.type != "cpu":                                # the same z and cov on the CPU
            z = lin.z(cfg["sigma"])
            mvn_cdf(z[:1], lin.cov[:1])                         # warm-up
            t0 = time.perf_counter()
            p_cpu = mvn_cdf(z, lin.cov, return_error=True)[0]
            cpu = time.perf_counter() - t0
        print(f"{classes} classes, {name}: linearisation {(mid - start) / len(x):.4f} s/point, "
              f"normal CDF on {device.type} {(end - mid) / len(x):.4f} s/point "
              f"({est.cdf_over_tolerance(err)} of {len(x)} points above the tolerance), on the "
              f"CPU {cpu / len(x):.4f} s/point; max |p_{device.type} - p_cpu| "
              f"{np.abs(p - p_cpu).max():.1e}; median p {np.median(p):.3f}")


if __name__ == "__main__":
    main()
