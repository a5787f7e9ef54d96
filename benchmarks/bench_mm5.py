"""MM5 against AutoAttack at its defaults on a small zoo: robust accuracy (target: MM5 within 1
point of AutoAttack) and gradient evaluations (target: at least 5x fewer), both counted by the
same hook on the model, so the ratio does not depend on the machine's load.

MM5 runs twice: as the reference runs it (every point for all 20 iterations of each target run),
and as the workflow runs it (`early_stop=True`: a point leaves its run at its first misclassified
iterate).  Their robust flags must be equal (checked); the target is judged on the workflow's.
On an undefended model, where AutoAttack's first APGD run breaks every point, the reference
behaviour cannot reach 5x: 100 against 21 passes per point is 4.8x at best.

    python benchmarks/bench_mm5.py [--n 100] [--device auto] [--models st pgd trades fgsm]

The models are trained here as the OODRobustBench quick-scale zoo trains them (smallcnn8 on 2,000
digits padded to 32x32x3, eps 0.2 with a one-epoch ramp, 3 epochs); the images are a seeded
subset of the held-out test split.
"""
from __future__ import annotations

import argparse
import platform
import time

import torch

from pabench.attacks import datasets as adv_data
from pabench.attacks.mm5 import mm_attack
from pabench.attacks.training import ZooSettings, as_float, train_zoo
from pabench.experiments.oodrb.compute import PassCounter, autoattack
from pabench.training.loop import resolve_device

METHODS = {"st": "undefended", "pgd": "madry", "trades": "trades", "fgsm": "fast_fgsm"}
AA_DEFAULTS = {"apgd_steps": 100, "fab_steps": 100, "square_queries": 5000}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100, help="test images per model")
    p.add_argument("--eps", type=float, default=0.2)
    p.add_argument("--device", default="auto")
    p.add_argument("--models", nargs="+", default=list(METHODS), choices=list(METHODS))
    args = p.parse_args()
    torch.set_num_threads(1)
    device = resolve_device(args.device)
    train_x, train_y = adv_data.subset(*adv_data.mnist32("train"), 2000, 1)
    test_x, test_y = adv_data.subset(*adv_data.mnist32("test"), args.n, 0)
    x = as_float(torch.from_numpy(test_x)).to(device)
    y = torch.from_numpy(test_y).long().to(device)
    print(f"# MM5 vs AutoAttack (standard, defaults {AA_DEFAULTS}), L-inf eps {args.eps}, "
          f"{args.n} images; {device} ({platform.processor() or platform.machine()})")
    print("| model | clean % | AA % | MM5 % | MM5 - AA (points) | AA grad evals | MM5 grad evals "
          "(reference) | ratio | MM5 grad evals (early stop) | ratio | AA s | MM5 s (early stop) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    gaps, ratios, ref_ratios = [], [], []
    for name in args.models:
        s = ZooSettings(METHODS[name], arch="smallcnn8", epochs=3, lr=0.003, eps=args.eps,
                        pgd_steps=2, eps_warmup=1.0, device=str(device))
        net, _ = train_zoo(s, train_x, train_y, 10, progress=False)
        with torch.no_grad():
            clean = (net(x).argmax(1) == y).float().mean().item()
        results = {}
        for attack in ("aa", "mm5", "mm5-early"):
            counter, start = PassCounter(net), time.perf_counter()
            if attack == "aa":
                robust = autoattack(net, x, y, args.eps, AA_DEFAULTS, device)
            else:
                robust = mm_attack(net, x, y, args.eps, "Linf", 5, 20, batch_size=1000,
                                   early_stop=attack == "mm5-early").robust
            counter.close()
            results[attack] = (robust, counter.grad, time.perf_counter() - start)
        (aa, aa_g, aa_s), (mm, ref_g, _), (early, mm_g, mm_s) = results.values()
        if not torch.equal(mm, early):
            raise SystemExit(f"{name}: MM5 with early_stop found other robust points")
        aa, mm = aa.float().mean().item(), mm.float().mean().item()
        gaps.append(100 * (mm - aa))
        ratios.append(aa_g / max(mm_g, 1))
        ref_ratios.append(aa_g / max(ref_g, 1))
        print(f"| {name} | {100 * clean:.1f} | {100 * aa:.1f} | {100 * mm:.1f} | {gaps[-1]:+.1f} | "
              f"{aa_g} | {ref_g} | {ref_ratios[-1]:.1f}x | {mm_g} | {ratios[-1]:.1f}x | {aa_s:.1f} "
              f"| {mm_s:.1f} |", flush=True)
    mean_gap = sum(gaps) / len(gaps)
    print(f"\nmean MM5 - AA: {mean_gap:+.2f} points (target within 1: "
          f"{'met' if abs(mean_gap) <= 1 + 1e-9 else 'NOT met'}); worst {max(gaps, key=abs):+.1f}; "
          f"gradient evaluations AA / MM5 as the workflow runs it (early stop): {min(ratios):.1f}x "
          f"to {max(ratios):.1f}x (target >= 5x: {'met' if min(ratios) >= 5 else 'NOT met'}); "
          f"as the reference runs it: {min(ref_ratios):.1f}x to {max(ref_ratios):.1f}x")


if __name__ == "__main__":
    main()
