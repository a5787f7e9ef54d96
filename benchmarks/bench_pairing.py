"""How much the quick scale's kinds of job slow each other when two run side by side.

    python benchmarks/bench_pairing.py [--seconds 6]

Snakemake runs two one-thread jobs at a time on the 2-core machine.  Each workload below runs in
a process of its own, as a job does, for --seconds: first alone, then beside each workload
(itself included).  Printed: steps per second alone, and for each pair the rate beside that
partner as a fraction of the rate alone (1.00: no slowdown).  Workloads (one thread each, CPU,
random weights and inputs of the workflow's shapes):
  dg       a DG training step: the 64 px DG CNN, 2 x 16 images, channels-last, Adam
  attack   an MM5 gradient: OODRobustBench's smallcnn8 on 27 images of 32 x 32 x 3
  avgcase  an MC forward pass: the average-case ResNet-18/8 on 256 images of 32 x 32 x 3
  matmul   a 256 x 256 matrix product (fits in cache: the control)
If two workloads slow each other much less than each slows itself, a scheduler that pairs them
(e.g. a Snakemake resource allowing one DG training at a time) saves wall time.
"""
from __future__ import annotations

import argparse
import itertools
import multiprocessing as mp
import time

WORKLOADS = ("dg", "attack", "avgcase", "matmul")


def _step(kind: str):
    """One step of the workload, as a function without arguments."""
    import torch

    torch.manual_seed(0)
    if kind == "dg":
        from pabench.models import Classifier, on_device

        model = on_device(Classifier("cnn", 4), "cpu").train()
        opt = torch.optim.Adam(model.parameters(), 1e-3)
        x = torch.randn(32, 3, 64, 64).contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 4, (32,))

        def step():
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return step
    if kind == "attack":
        from pabench.attacks.models import build
        from pabench.models import on_device

        model = on_device(build("smallcnn8", 10, 32).eval(), "cpu")
        x = torch.rand(27, 3, 32, 32)

        def step():
            z = x.clone().requires_grad_()
            torch.autograd.grad(model(z)[:, 0].sum(), z)
        return step
    if kind == "avgcase":
        from pabench.experiments.avgcase.training import build

        model = build("resnet18_w8", (3, 32, 32), 10).eval()
        x = torch.rand(256, 3, 32, 32).contiguous(memory_format=torch.channels_last)

        def step():
            with torch.no_grad():
                model(x)
        return step
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    return lambda: a @ b


def _run(slot: int, kind: str, seconds: float, start, out) -> None:
    import torch

    torch.set_num_threads(1)
    step = _step(kind)
    for _ in range(3):
        step()
    start.wait()
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    out.put((slot, n / (time.perf_counter() - t0)))


def rates(kinds, seconds: float) -> list[float]:
    """Steps per second of each workload of `kinds`, run at the same time."""
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(len(kinds)), ctx.Queue()
    procs = [ctx.Process(target=_run, args=(i, k, seconds, start, out)) for i, k in enumerate(kinds)]
    for p in procs:
        p.start()
    got = dict(out.get() for _ in procs)
    for p in procs:
        p.join()
    return [got[i] for i in range(len(kinds))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    args = ap.parse_args()
    alone = {k: rates([k], args.seconds)[0] for k in WORKLOADS}
    beside = {}
    for a, b in itertools.combinations_with_replacement(WORKLOADS, 2):
        ra, rb = rates([a, b], args.seconds)
        beside[a, b], beside[b, a] = ra / alone[a], rb / alone[b]
    print("steps/s alone: " + ", ".join(f"{k} {alone[k]:.1f}" for k in WORKLOADS))
    print("rate beside a partner / rate alone (row: the workload, column: its partner)")
    print(f"{'':<10}" + "".join(f"{k:>10}" for k in WORKLOADS))
    for a in WORKLOADS:
        print(f"{a:<10}" + "".join(f"{beside[a, b]:>10.2f}" for b in WORKLOADS))


if __name__ == "__main__":
    main()
