"""The workflow's glibc malloc settings (pabench.runtime.allocator) against glibc's defaults.

    python benchmarks/bench_allocator.py [--repeats 3] [--threads 1]

glibc reads its settings when a process starts, so this process times each workload in child
processes started alternately without and with the settings (`repeats` of each), and prints the
median milliseconds per image of each and default / tuned.  Workloads: the average-case
ResNet-18/8 (32 px) and CNN (28 px) forward passes at the MC batch of 256 without autograd, and
one ResNet-18/8 training step at batch 64, without and with the gradient-norm penalty.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time, torch
from pabench.experiments.avgcase import training as T
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
out = {}

def timed(fn, images, reps):
    fn(); fn()   # warm-up
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps / images * 1e3

for arch, shape in (("resnet18_w8", (3, 32, 32)), ("cnn", (1, 28, 28))):
    model = T.build(arch, shape, 10).eval()
    x = torch.rand(256, *shape).contiguous(memory_format=torch.channels_last)
    with torch.inference_mode():
        out[f"{arch} forward (MC batch 256)"] = timed(lambda: model(x), 256, 8)
for lam in (0.0, 0.03):
    model = T.build("resnet18_w8", (3, 32, 32), 10).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.rand(64, 3, 32, 32).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 10, (64,))
    out[f"resnet18_w8 training step, lambda {lam:g}"] = timed(
        lambda: T.step(model, opt, x.clone(), y, lam), 64, 6)
print(json.dumps(out))
"""


def run_child(tuned: bool, threads: int) -> dict:
    from pabench.runtime import allocator

    env = {k: v for k, v in os.environ.items() if k not in (allocator.ENV, allocator.SWITCH)}
    if tuned:
        allocator.configure(env)
    done = subprocess.run([sys.executable, "-c", CHILD, str(threads)], env=env, check=True,
                          capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    runs = {False: [], True: []}
    for _ in range(args.repeats):
        for tuned in (False, True):
            runs[tuned].append(run_child(tuned, args.threads))
    print(f"glibc malloc: defaults vs pabench.runtime.allocator, torch threads {args.threads}, "
          f"median of {args.repeats} child processes each")
    print(f"{'workload':40s} {'default':>12s} {'tuned':>12s} {'ratio':>7s}")
    for name in runs[False][0]:
        default = statistics.median(r[name] for r in runs[False])
        tuned = statistics.median(r[name] for r in runs[True])
        print(f"{name:40s} {default:9.3f} ms {tuned:9.3f} ms {default / tuned:6.2f}x")


if __name__ == "__main__":
    main()
