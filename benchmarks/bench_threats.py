"""Convergence of the OODRobustBench threat-shift attacks at the configured steps.

Every threat shift of `oodrb.threats` (the quick scale's by default) runs on a few zoo models as
the workflow runs it (pabench.experiments.oodrb.compute.threat_attack), then

* with twice its steps, as `steps: 2x` in the config would run it (MM5: twice the iterations per
  target; StAdv and ReColor: twice the steps at threats.matched_lr, i.e. half the Adam rate);
* StAdv and ReColor: twice the steps at the same Adam rate (the optimisation carried on);
* MM5: a second random restart (another seed; a point is robust only when both leave it
  correct).  StAdv and ReColor have no random start, as in the reference;
* StAdv and ReColor: the paper's 100 steps (at matched_lr), for reference.

Criterion: no 2x variant (steps or restarts) moves robust accuracy by 1 point or more.  The
script prints numbers; it is not a timed test.

    python benchmarks/bench_threats.py [--models pgd-c8 ...] [--n 500] [--config config.yaml ...]

Models: the zoo's checkpoints under data/oodrb/models/<dataset>/ (after
`snakemake --cores 2 oodrb_train`), or, where one is missing, trained here by the workflow's own
function on the workflow's training images.  Images: a seeded subset of n test images, which
holds the workflow's n_test ID images (the same seed, a longer prefix of the same permutation).
"""
from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import numpy as np
import torch

from pabench.adversarial.mm5 import mm_attack
from pabench.adversarial.threats import matched_lr
from pabench.adversarial.training import as_float
from pabench.core import config as pabench_config
from pabench.core import paths
from pabench.experiments.oodrb import compute, plan
from pabench.training.loop import resolve_device

SCHEMA = Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml"
CRITERION = 1.0  # points


def variants(t: dict, o: dict) -> dict[str, tuple[dict, dict, float | None]]:
    """The runs of one threat besides the workflow's own: {label: (threat, oodrb settings, lr)};
    "2x restarts" is handled apart (a second seed of MM5)."""
    if t["kind"] in ("linf", "l2"):
        mm = o["mm5"]
        return {"2x steps": (t, {**o, "mm5": {**mm, "steps": 2 * mm["steps"]}}, None)}
    steps = t["steps"]
    out = {"2x steps": ({**t, "steps": 2 * steps}, o, None),
           "2x steps, same lr": ({**t, "steps": 2 * steps}, o, matched_lr(t["kind"], t["eps"], steps))}
    if steps < plan.DEFAULT_STEPS[t["kind"]]:
        out["paper's steps"] = ({**t, "steps": plan.DEFAULT_STEPS[t["kind"]]}, o, None)
    return out


def second_restart(model, x, y, t, o, device) -> np.ndarray:
    """MM5's robust flags with another seed (compute.mm5 runs seed 0)."""
    xf = as_float(torch.from_numpy(x).to(device))
    yt = torch.from_numpy(y).long().to(device)
    r = mm_attack(model, xf, yt, t["eps"], "Linf" if t["kind"] == "linf" else "L2",
                  o["mm5"]["n_targets"], o["mm5"]["steps"], seed=1, batch_size=compute.BATCH,
                  early_stop=True)
    return r.robust.cpu().numpy()


def zoo_model(config, name, data, device):
    o = config["oodrb"]
    path = paths.oodrb_file("models", o["dataset"], name)
    if Path(path).is_file():
        return compute.load(config, name, path, device), "checkpoint"
    net, _ = compute.train(name, plan.zoo(config)[name], data, plan.eps_of(config), device)
    return net.eval(), "trained here"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", nargs="+", default=["config.yaml"], help="config and overlays")
    p.add_argument("--models", nargs="+",
                   default=["st-c8", "pgd-c8", "pgd-c16", "trades6-c8", "fgsm-c8"])
    p.add_argument("--threats", nargs="+", help="threat names (default: every one that runs)")
    p.add_argument("--n", type=int, default=500, help="test images")
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    torch.set_num_threads(1)
    config = pabench_config.load(args.config)
    pabench_config.check(config, SCHEMA)
    o, device = config["oodrb"], resolve_device(args.device)
    threats = {k: t for k, t in plan.threats(config).items()
               if args.threats is None or k in args.threats}
    data = compute.id_data({**o, "n_test": args.n})
    x, y = data["test_x"], data["test_y"]
    print(f"# Threat attacks at the configured steps vs 2x steps / 2x restarts ({args.config}); "
          f"{len(y)} test images; MM5 {o['mm5']}; {device} "
          f"({platform.processor() or platform.machine()}, 1 thread)")
    print("| model | threat | eps | steps | robust % | 2x steps | 2x steps, same lr | "
          "2x restarts | paper's steps | s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    worst: dict[str, float] = {}
    for name in args.models:
        model, source = zoo_model(config, name, data, device)
        for shift, t in threats.items():
            start = time.perf_counter()
            _, robust, _ = compute.threat_attack(t, model, x, y, o, device)
            seconds = time.perf_counter() - start
            base = 100 * robust.mean()
            cells = {}
            for label, (t2, o2, lr) in variants(t, o).items():
                r = compute.threat_attack(t2, model, x, y, o2, device, lr=lr)[1]
                cells[label] = 100 * r.mean() - base
            if t["kind"] in ("linf", "l2"):
                cells["2x restarts"] = 100 * (robust & second_restart(model, x, y, t, o, device)
                                              ).mean() - base
            moved = [abs(v) for k, v in cells.items() if k != "paper's steps"]
            worst[shift] = max(worst.get(shift, 0.0), *moved)
            cols = ["2x steps", "2x steps, same lr", "2x restarts", "paper's steps"]
            print(f"| {name} ({source}) | {shift} | {t['eps']:.3g} | {t.get('steps', o['mm5']['steps'])} "
                  f"| {base:.1f} | " + " | ".join(f"{cells[c]:+.1f}" if c in cells else "-"
                                                  for c in cols)
                  + f" | {seconds:.1f} |", flush=True)
    print(f"\nLargest move of robust accuracy under 2x steps or restarts (criterion: < "
          f"{CRITERION:g} point; {len(y)} images, 1 image = {100 / len(y):.2g} point):")
    for shift, w in worst.items():
        verdict = "converged" if w < CRITERION else "NOT converged"
        print(f"  {shift}: {w:.1f} points, {verdict}")


if __name__ == "__main__":
    main()
