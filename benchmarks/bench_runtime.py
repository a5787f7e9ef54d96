"""Table 1 of the average-case paper at its own size, on any device: wall seconds of MC
(n = 10,000), Taylor and MMSE (n = 5) for the same 50 points at sigma = 0.1, through the
workflow's own `compute.runtime` (each estimator warmed up on one point first).

    python benchmarks/bench_runtime.py [--device cuda] [--points 50] [--classes 10 100] [--split]

Model: the average-case PreAct ResNet-18 at 32x32, random init with BatchNorm statistics
recalibrated on 64 other images (as in bench_avgcase.py: the raw init predicts one class
everywhere), for each number of classes; points: mnist32 test images.  The workflow's Table 1
times the trained main model where the job runs; this script times the same estimators on the
paper's network without training one, so a GPU session can measure the paper-scale row in
seconds.  On a CPU it times 2 points unless told otherwise.
"""
from __future__ import annotations

import argparse
import time

import pandas as pd
import torch

from pabench.adversarial.datasets import mnist32
from pabench.core.paths import AvgModel
from pabench.experiments.avgcase.compute import runtime
from pabench.experiments.avgcase.training import as_input, build, recalibrate_batchnorm
from pabench.metrics.avgcase import estimators as est
from pabench.metrics.avgcase.mvn import mvn_cdf


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--points", type=int, help="points timed (default: 50, the paper's, on a "
                    "GPU; 2 on a CPU, where MC n = 10,000 alone takes over a minute per point)")
    ap.add_argument("--classes", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--mc-n", type=int, default=10_000)
    ap.add_argument("--mmse-n", type=int, default=5)
    ap.add_argument("--split", action="store_true", help="also time Taylor's and MMSE's two parts "
                    "apart: the linearisation (gradients, on the device) and the normal CDF (CPU)")
    args = ap.parse_args()
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
        tables.append(t)
        if args.split:
            split(model, images[:points], cfg, device, classes)
    t = pd.concat(tables, ignore_index=True)
    print(f"device: {t['device'].iloc[0]}; torch {torch.__version__}")
    print(t[["classes", "estimator", "n", "points", "seconds", "seconds_per_point"]]
          .to_string(index=False))
    for classes, g in t.groupby("classes"):
        s = g.set_index("estimator")["seconds_per_point"]
        print(f"{classes} classes: MC / Taylor {s['mc'] / s['taylor']:.1f}x, "
              f"MC / MMSE {s['mc'] / s['mmse']:.1f}x")


def split(model, images_u8, cfg, device, classes):
    """Seconds per point of the linearisation and of the normal CDF, Taylor and MMSE apart."""
    x = as_input(images_u8, device)
    for name, kw in (("taylor", {}), ("mmse", {"sigma": cfg["sigma"], "n": cfg["mmse_n"]})):
        est.linearised(model, x[:1], **kw)                     # warm-up
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        lin = est.linearised(model, x, **kw)                    # ends on the CPU (numpy)
        mid = time.perf_counter()
        mvn_cdf(lin.z(cfg["sigma"]), lin.cov)
        end = time.perf_counter()
        print(f"{classes} classes, {name}: linearisation {(mid - start) / len(x):.4f} s/point, "
              f"normal CDF {(end - mid) / len(x):.4f} s/point")


if __name__ == "__main__":
    main()
