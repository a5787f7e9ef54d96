"""Attack overhead: each attack's throughput against the same model's plain forward+backward
throughput on the same device and batch (target: overhead <= 30%).

    python benchmarks/bench_attacks.py [--archs cnn preact_resnet18] [--device auto] [--batch 128]
    python benchmarks/bench_attacks.py --device cuda --archs wrn28_10 --batch 500 --project

An attack of S steps needs S forward+backward passes, so its ideal time per batch is
S x (forward+backward); overhead = measured / ideal - 1.  FAB needs one backward per class per
step and APGD-DLR-T one run per target class, so they are reported against their own ideal
(K backward passes per step; T runs).  With --project (GPU), the time of PGD-1000 on 10,000
CIFAR-sized images is projected from the measured PGD step time.  Random weights are fine for
timing.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import torch
import torch.nn.functional as F

from pabench.attacks.attacks import attack_fn
from pabench.attacks.models import build
from pabench.training.loop import resolve_device


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, device, repeats: int) -> float:
    fn()  # warm-up (cuDNN autotuning, lazy imports)
    _sync(device)
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    _sync(device)
    return (time.perf_counter() - start) / repeats


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--archs", nargs="+", default=["cnn", "preact_resnet18"])
    ap.add_argument("--attacks", nargs="+", default=["pgd", "fmn", "apgd-ce", "apgd-dlr", "fab"])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--project", action="store_true", help="project PGD-1000 on 10,000 images")
    args = ap.parse_args()
    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(f"device: {device} ({name}), {os.cpu_count()} CPU cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, batch {args.batch}, {args.steps} steps, 32x32 images")
    torch.manual_seed(0)
    for arch in args.archs:
        model = build(arch, 10, 32).to(device).eval()
        x = torch.rand(args.batch, 3, 32, 32, device=device)
        with torch.no_grad():  # labels = predictions: every sample is attacked (APGD and FAB
            y = model(x).argmax(1)  # skip the already misclassified ones)

        model.requires_grad_(False)  # as in the attack runs: input gradients only

        def fwd_bwd():
            xr = x.clone().requires_grad_(True)
            loss = F.cross_entropy(model(xr), y)
            torch.autograd.grad(loss, xr)

        base = timed(fwd_bwd, device, max(args.repeats, 5))
        print(f"{arch}: forward+backward {args.batch / base:,.0f} images/s ({1000 * base:.2f} ms/batch)")
        for attack in args.attacks:
            cfg = {"steps": args.steps, "rel_stepsize": 0.025}
            fn = attack_fn(attack, model, None if attack == "fmn" else 8 / 255, cfg, 10, device)
            t = timed(lambda: fn(x, y), device, args.repeats)
            passes = args.steps * (10 if attack == "fab" else 1)  # FAB: a Jacobian (K rows) per step
            ideal = passes * base
            print(f"  {attack:9s} {args.batch / t:10,.1f} images/s  {1000 * t:9.1f} ms/batch  "
                  f"ideal {1000 * ideal:9.1f} ms  overhead {100 * (t / ideal - 1):+6.1f}%")
            if attack == "pgd" and args.project:
                per_image_step = t / args.steps / args.batch
                hours = per_image_step * 1000 * 10_000 / 3600
                print(f"  projected PGD-1000 on 10,000 images: {hours:.2f} h ({arch}, batch {args.batch})")


if __name__ == "__main__":
    main()
