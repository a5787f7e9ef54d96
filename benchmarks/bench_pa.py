"""PA solver benchmark: prints timings and ratios measured in this one process.

    python benchmarks/bench_pa.py [--quick]

1. exact solver, N = 10,000, K = 10 logits            (target <= 20 ms)
2. exact solver, N = 100,000, K = 1,000 logits        (target <= 5 s)
3. the authors' per-pair loop (autograd + torch.optim.Adam, 500 epochs) as the baseline:
   exact must be >= 1,000x faster at a log PA at least as high
4. stacked adam solver, 330 pairs of 10,000 x 10, 500 epochs (target <= 90 s)
--quick shrinks 3 and 4 (fewer epochs / pairs) and scales the times up linearly.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch

from pabench.metrics import posterior_agreement


def logits_pair(n, k, seed, noise=1.5):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(n, k, generator=g) * 3
    return a, a + torch.randn(n, k, generator=g) * noise


def timed(fn, repeat=1):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def authors_loop(a, b, epochs, seed=0, lr=0.1, batch_size=64):
    """Straightforward re-implementation of the authors' procedure for one pair: softmax
    products, autograd, torch.optim.Adam, clamp, full evaluation every epoch, best epoch."""
    a, b = a.double(), b.double()
    beta = torch.tensor([1.0], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([beta], lr=lr)
    gen = torch.Generator().manual_seed(seed)
    best = -float("inf")
    for _ in range(epochs):
        order = torch.randperm(len(a), generator=gen)
        for lo in range(0, len(a), batch_size):
            idx = order[lo:lo + batch_size]
            opt.zero_grad()
            k = torch.log((torch.softmax(beta * a[idx], 1) * torch.softmax(beta * b[idx], 1)).sum(1))
            (-k.sum()).backward()
            opt.step()
            with torch.no_grad():
                beta.clamp_(min=0.0)
        with torch.no_grad():
            full = torch.log((torch.softmax(beta * a, 1) * torch.softmax(beta * b, 1)).sum(1)).sum()
            best = max(best, full.item())
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter runs of 3 and 4, scaled up")
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    a, b = logits_pair(10_000, 10, 0)
    posterior_agreement(a, b)  # warm-up
    t_small, r_small = timed(lambda: posterior_agreement(a, b), repeat=21)
    print(f"1. exact N=10,000 K=10:        {t_small * 1e3:8.1f} ms (target <= 20 ms)  "
          f"beta={r_small.beta:.6g} logpa={r_small.logpa:.6f}")

    big_a, big_b = logits_pair(100_000, 1_000, 1)
    t_big, r_big = timed(lambda: posterior_agreement(big_a, big_b), repeat=3)
    print(f"2. exact N=100,000 K=1,000:    {t_big:8.2f} s  (target <= 5 s)   "
          f"beta={r_big.beta:.6g} logpa={r_big.logpa:.6f}")
    del big_a, big_b

    epochs = 20 if args.quick else 500
    t_loop, loop_best = timed(lambda: authors_loop(a, b, epochs))
    t_loop *= 500 / epochs
    ratio = t_loop / t_small
    print(f"3. authors' loop, 500 epochs:  {t_loop:8.2f} s{' (scaled from %d epochs)' % epochs if args.quick else ''}"
          f"  exact is {ratio:,.0f}x faster (target >= 1,000x); "
          f"logpa exact {r_small.logpa:.6f} vs loop {loop_best:.6f} "
          f"({'exact >= loop' if r_small.logpa >= loop_best - 1e-9 * abs(loop_best) else 'EXACT LOWER'})")

    pairs = 33 if args.quick else 330
    sa = torch.stack([logits_pair(10_000, 10, 100 + i)[0] for i in range(pairs)])
    sb = torch.stack([logits_pair(10_000, 10, 100 + i)[1] for i in range(pairs)])
    t_adam, r_adam = timed(lambda: posterior_agreement(sa, sb, solver="adam", epochs=500, progress=True))
    scaled = t_adam * 330 / pairs
    print(f"4. stacked adam, 330 pairs x 500 epochs: {scaled:8.1f} s"
          f"{' (scaled from %d pairs)' % pairs if args.quick else ''} (target <= 90 s); "
          f"median beta {np.median(r_adam.beta):.4g}")


if __name__ == "__main__":
    main()
