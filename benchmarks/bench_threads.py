"""The PA library on an idle and on a busy machine, side by side in one process.

    python benchmarks/bench_threads.py [--repeat 15] [--sizes 10000,100000,1000000]
                                       [--points 300] [--only pa|avgcase]

For each problem (PA exact solver on N x 10 logits for each N, the adam solver on 10,000 x 10
for 20 epochs; the average-case Taylor estimator, gradients and normal CDF, on --points 28 x 28
inputs of a small MLP and of a small CNN) it prints the median time in three conditions:
  idle     nothing else running (beyond what the machine already runs: check the load line)
  busy     one plain Python busy loop per core (background processes)
  torch    one PyTorch process per core, each running element-wise operations on its default
           thread count: what other jobs of a workflow do to a notebook beside them
and in two thread policies: `capped` (pabench.core.threads, what the library does) and
`all threads` (every operation spread over all of torch's threads, the policy before the cap).
Goal: loaded at most 2x idle with the capped policy.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

import numpy as np
import torch
from torch import nn

from pabench.core import threads
from pabench.metrics import posterior_agreement
from pabench.metrics.avgcase.estimators import p_taylor


def _busy_loop():
    while True:
        pass


def _torch_loop():
    x = torch.randn(200_000)
    while True:
        x = (x * 1.0001).sin_()


def _avgcase_problems(points):
    """Taylor estimates (sigma 0.1) of two small 10-class models on `points` 28 x 28 inputs."""
    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Flatten(), nn.Linear(784, 100), nn.ReLU(), nn.Linear(100, 10))
    cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(32 * 7 * 7, 10))
    x = torch.rand(points, 1, 28, 28)
    return {f"taylor MLP {points} pts": lambda: p_taylor(mlp, x, 0.1),
            f"taylor CNN {points} pts": lambda: p_taylor(cnn, x, 0.1)}


def _problems(sizes):
    rng = np.random.default_rng(0)
    out = {}
    for n in sizes:
        a = rng.normal(size=(n, 10)) * 3
        b = a + 1.5 * rng.normal(size=a.shape)
        out[f"exact N={n:,}"] = (lambda a=a, b=b: posterior_agreement(a, b))
    a = rng.normal(size=(10_000, 10)) * 3
    b = a + 1.5 * rng.normal(size=a.shape)
    out["adam N=10,000, 20 epochs"] = lambda: posterior_agreement(a, b, "adam", epochs=20)
    return out


def _median_seconds(fn, repeat):
    fn()  # warm-up: native build, allocator
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _measure(problems, repeat):
    """{(problem, policy): seconds} for both thread policies, interleaved."""
    cap = threads.MIN_WORK_PER_THREAD
    out = {}
    for name, fn in problems.items():
        for policy, bound in (("capped", cap), ("all threads", 1)):
            threads.MIN_WORK_PER_THREAD = bound
            try:
                out[name, policy] = _median_seconds(fn, repeat)
            finally:
                threads.MIN_WORK_PER_THREAD = cap
    return out


def _loaded(target, problems, repeat):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=target, daemon=True) for _ in range(os.cpu_count())]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let the loaders start (a PyTorch import takes a second)
    try:
        return _measure(problems, repeat)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--points", type=int, default=300, help="average-case points")
    ap.add_argument("--only", choices=["pa", "avgcase"], help="time only these problems")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{os.cpu_count()} cores, torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"load average at start {os.getloadavg()[0]:.2f}; "
          f"MIN_WORK_PER_THREAD {threads.MIN_WORK_PER_THREAD:,}")
    problems = {**(_problems(sizes) if args.only != "avgcase" else {}),
                **(_avgcase_problems(args.points) if args.only != "pa" else {})}
    results = {"idle": _measure(problems, args.repeat),
               "busy": _loaded(_busy_loop, problems, args.repeat),
               "torch": _loaded(_torch_loop, problems, args.repeat)}
    print(f"{'problem':<28}{'policy':<13}{'idle ms':>10}{'busy ms':>10}{'torch ms':>10}"
          f"{'busy/idle':>11}{'torch/idle':>12}")
    for name in problems:
        for policy in ("capped", "all threads"):
            t = {c: results[c][name, policy] for c in results}
            print(f"{name:<28}{policy:<13}{1e3 * t['idle']:>10.1f}{1e3 * t['busy']:>10.1f}"
                  f"{1e3 * t['torch']:>10.1f}{t['busy'] / t['idle']:>11.2f}"
                  f"{t['torch'] / t['idle']:>12.2f}")
    print(f"\n{'all threads / capped':<28}{'idle':>10}{'busy':>10}{'torch':>10}")
    for name in problems:
        ratios = (results[c][name, "all threads"] / results[c][name, "capped"] for c in results)
        print(f"{name:<28}" + "".join(f"{r:>10.2f}" for r in ratios))
    worst = max(results[c][n, "capped"] / results["idle"][n, "capped"]
                for c in ("busy", "torch") for n in problems)
    print(f"capped policy, worst loaded/idle: {worst:.2f} (goal <= 2)")


if __name__ == "__main__":
    main()
