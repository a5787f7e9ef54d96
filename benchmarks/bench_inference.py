"""Inference speed of the quick scale's small models on CPU: MaxPool2 against nn.MaxPool2d, and
the batch sizes the code now uses against the ones it used, in one process.

    python benchmarks/bench_inference.py [--images 2048] [--threads 1]

For each model (the DG CNN on 64 px, the adversarial zoo's LeNet CNN on 32 px, OODRobustBench's
SmallCNN of width 8 and 16, the average-case CNN on 28 px and ResNet-18/8 on 32 px), random
images are classified under torch.no_grad, and milliseconds per image are printed for
  old: nn.MaxPool2d at the old batch size (DG predict: 256; MC sampling: 1024),
  new: MaxPool2 at the new default (DG predict: 32; MC sampling: 256 on CPU),
with old / new.  Outputs of both are checked equal first.
"""
from __future__ import annotations

import argparse
import copy
import time

import torch
from torch import nn

from pabench.attacks.models import LeNetCNN, SmallCNN
from pabench.experiments.avgcase.training import build
from pabench.models import Classifier, MaxPool2


def with_old_pooling(model: nn.Module) -> nn.Module:
    old = copy.deepcopy(model)
    for module in old.modules():
        for name, child in module.named_children():
            if isinstance(child, MaxPool2):
                setattr(module, name, nn.MaxPool2d(2))
    return old


def ms_per_image(model, x, batch: int) -> float:
    with torch.no_grad():
        model(x[:batch])  # warm-up
        start = time.perf_counter()
        for lo in range(0, len(x), batch):
            model(x[lo:lo + batch])
    return (time.perf_counter() - start) / len(x) * 1e3


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the jobs use 1)")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cases = [  # name, model, input shape, old batch, new batch
        ("DG CNN, 64 px (DG predict)", Classifier("cnn", 4), (3, 64, 64), 256, 32),
        ("LeNet CNN, 32 px (adversarial zoo)", LeNetCNN(10, 32), (3, 32, 32), 100, 100),
        ("SmallCNN w8, 32 px (OODRB zoo)", SmallCNN(10, 32, 8), (3, 32, 32), 1000, 1000),
        ("SmallCNN w16, 32 px (OODRB zoo)", SmallCNN(10, 32, 16), (3, 32, 32), 1000, 1000),
        ("CNN, 28 px (average case, MC)", build("cnn", (1, 28, 28), 10), (1, 28, 28), 1024, 256),
        ("ResNet-18/8, 32 px (average case, MC)", build("resnet18_w8", (3, 32, 32), 10),
         (3, 32, 32), 1024, 256),
    ]
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.images} images, no_grad; "
          f"ms per image")
    print(f"  {'model':40s}{'old':>14s}{'new':>14s}{'old/new':>9s}")
    for name, model, shape, old_batch, new_batch in cases:
        model.eval()
        old = with_old_pooling(model).eval()
        x = torch.rand(args.images, *shape)
        with torch.no_grad():
            assert torch.equal(model(x[:64]), old(x[:64])), name
        t_old, t_new = ms_per_image(old, x, old_batch), ms_per_image(model, x, new_batch)
        print(f"  {name:40s}{t_old:9.3f} ({old_batch:4d}){t_new:9.3f} ({new_batch:4d})"
              f"{t_old / t_new:8.2f}x")


if __name__ == "__main__":
    main()
