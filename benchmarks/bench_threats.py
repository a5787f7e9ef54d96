"""Convergence of the OODRobustBench threat-shift attacks at the configured steps.

Every threat shift of `oodrb.threats` (the quick scale's by default) runs on a few zoo models as
the workflow runs it (pabench.experiments.oodrb.compute.threat_attack), then

* with twice its steps (MM5: twice the iterations per target; StAdv and ReColor: twice the Adam
  steps at the same rate, i.e. the same optimisation carried on);
* MM5: with twice its random restarts (further seeds on the points still robust, as the workflow
  runs its `restarts`).  StAdv and ReColor have no random start, as in the reference;
* with --paper-attack, StAdv and ReColor as the paper runs them, carried over (100 steps at the
  reference's Adam step relative to the bound, lr_scale 1), for reference.

Criterion: neither doubling (steps, restarts) moves robust accuracy by 1 point or more.  The
script prints numbers; it is not a timed test.

    python benchmarks/bench_threats.py [--models pgd-c8 ...] [--n 500] [--paper-attack]
        [--threats l2 ...] [--config config.yaml ...]

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

import torch

from pabench.core import config as pabench_config
from pabench.core import paths
from pabench.experiments.oodrb import compute, plan
from pabench.training.loop import resolve_device

SCHEMA = Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml"
CRITERION = 1.0  # points


def variants(t: dict, o: dict, paper_attack: bool) -> dict[str, tuple[dict, dict]]:
    """The runs of one threat besides the workflow's own: {label: (threat, oodrb settings)};
    MM5 (L-inf, L2) also with twice its restarts."""
    if t["kind"] in ("linf", "l2"):   # the threat's own MM5 iterations, or oodrb.mm5's
        return {"2x steps": ({**t, "steps": 2 * mm_steps(t, o)}, o),
                "2x restarts": ({**t, "restarts": 2 * t.get("restarts", 1)}, o)}
    out = {"2x steps": ({**t, "steps": 2 * t["steps"]}, o)}
    if paper_attack:
        out["paper's attack"] = ({**t, "steps": plan.DEFAULT_STEPS[t["kind"]], "lr_scale": 1.0}, o)
    return out


def mm_steps(t: dict, o: dict) -> int:
    return t.get("steps", o["mm5"]["steps"])


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
    p.add_argument("--paper-attack", action="store_true",
                   help="also run StAdv and ReColor as the paper does (100 steps, lr_scale 1)")
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
    print("| model | threat | eps | steps | lr_scale | robust % | 2x steps | 2x restarts | "
          "paper's attack | s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    worst: dict[str, float] = {}
    models = {name: zoo_model(config, name, data, device) for name in args.models}  # read first
    for name, (model, source) in models.items():
        for shift, t in threats.items():
            start = time.perf_counter()
            _, robust, _ = compute.threat_attack(t, model, x, y, o, device)
            seconds = time.perf_counter() - start
            base = 100 * robust.mean()
            cells = {}
            for label, (t2, o2) in variants(t, o, args.paper_attack).items():
                r = compute.threat_attack(t2, model, x, y, o2, device)[1]
                cells[label] = 100 * r.mean() - base
            moved = [abs(v) for k, v in cells.items() if k != "paper's attack"]
            worst[shift] = round(max(worst.get(shift, 0.0), *moved), 6)  # 1 point: not < 1
            cols = ["2x steps", "2x restarts", "paper's attack"]
            steps = (f"MM5 {mm_steps(t, o)} x {t.get('restarts', 1)}" if t["kind"] in ("linf", "l2")
                     else t["steps"])
            print(f"| {name} ({source}) | {shift} | {t['eps']:.3g} | {steps} | "
                  f"{t.get('lr_scale', '-')} | {base:.1f} | "
                  + " | ".join(f"{cells[c]:+.1f}" if c in cells else "-" for c in cols)
                  + f" | {seconds:.1f} |", flush=True)
    print(f"\nLargest move of robust accuracy under 2x steps or restarts (criterion: < "
          f"{CRITERION:g} point; {len(y)} images, 1 image = {100 / len(y):.2g} point):")
    for shift, w in worst.items():
        verdict = "converged" if w < CRITERION else "NOT converged"
        print(f"  {shift}: {w:.1f} points, {verdict}")


if __name__ == "__main__":
    main()
