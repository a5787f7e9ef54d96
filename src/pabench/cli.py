"""The `pabench` command.

    pabench pa A B [--solver exact|adam] [--inputs logits|log_probs|probs]   # prints JSON
    pabench avgcase MODEL INPUTS --sigma 0.1 [0.2 ...] [--estimators mc,taylor,mmse] [--out p.csv]
    pabench oodrb MODEL [--arch module:Class] [--configfile overlay.yaml] [--zoo shifts.csv] [--out DIR]
    pabench check-config [config.yaml workflow/config/test.yaml ...]
    pabench wandb-runs [data/wandb]
    pabench wandb-dashboard [--dir data/wandb] [--entity E] [--project pabench] [--url URL] [--dry-run]
"""
from __future__ import annotations

import argparse
import json
import math
import sys

from pabench import __version__


def _json_number(x):
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, list):
        return [_json_number(v) for v in x]
    return x


def cmd_pa(args) -> int:
    from pabench.core.io import load_array
    from pabench.metrics import afr_pred, posterior_agreement

    a = load_array(args.a, args.key)
    b = load_array(args.b, args.key)
    res = posterior_agreement(a, b, solver=args.solver, inputs=args.inputs, epochs=args.epochs,
                              seed=args.seed, progress=args.progress)
    out = {k: _json_number(v) for k, v in res.summary().items()}
    if a.ndim == 2:
        out["afr_pred"] = afr_pred(a, b)
    print(json.dumps(out, indent=2))
    return 0


def _load_model(path):
    """A whole model: a torch.export archive, TorchScript, or a pickled nn.Module (trusted files
    only: it runs code)."""
    from pabench.core.modelfile import load_model

    return load_model(path, allow_pickle=True)


def cmd_avgcase(args) -> int:
    from pathlib import Path

    import pandas as pd

    import numpy as np

    from pabench.core.io import load_array, write_csv
    from pabench.metrics.avgcase import checks
    from pabench.metrics.avgcase.estimators import estimate
    from pabench.metrics.avgcase.mvn import ABSEPS

    names = [checks.check_estimator(n.strip()) for n in args.estimators.split(",")]
    sigmas = [checks.check_sigma(s) for s in args.sigma]
    for what, n in (("--n-mc", args.n_mc), ("--n-mmse", args.n_mmse)):
        checks.check_n(n, what)
    if not Path(args.model).is_file():
        raise FileNotFoundError(f"{args.model}: no such model file")
    x = load_array(args.inputs, args.key).astype("float32")
    model = _load_model(args.model).eval()
    rows = []
    for sigma in sigmas:
        for name in names:
            n = args.n_mc if name == "mc" else args.n_mmse if name.startswith("mmse") else None
            extra = {"adaptive": args.adaptive, "bfloat16": args.bfloat16} if name == "mc" else {}
            if name in checks.LINEARISED:   # the normal CDF's error estimate per point
                p, err = estimate(name, model, x, sigma, n=n, return_error=True)
            else:
                p = estimate(name, model, x, sigma, n=n, temperature=args.temperature, **extra)
                err = np.full(len(p), np.nan)
            rows.append(pd.DataFrame({"point": range(len(p)), "sigma": sigma, "estimator": name,
                                      "p": p, "cdf_error": err}))
    table = pd.concat(rows, ignore_index=True)
    if args.out:
        write_csv(args.out, table)
    summary = table.groupby(["sigma", "estimator"]).p.mean().unstack()
    print(summary.to_string(float_format=lambda v: f"{v:.4f}"))
    over = table[table.cdf_error > ABSEPS]
    if len(over):
        print(f"{len(over)} of {table.cdf_error.notna().sum()} linearised estimates have normal-CDF "
              f"error estimates above {ABSEPS:g} (column cdf_error): "
              + ", ".join(f"{e} {c}" for e, c in over.estimator.value_counts().items()))
    return 0


def cmd_oodrb(args) -> int:
    import logging

    from pabench.experiments.oodrb import user

    kwargs = None
    if args.arch_kwargs:
        try:
            kwargs = json.loads(args.arch_kwargs)
        except json.JSONDecodeError as err:
            raise ValueError(f"--arch-kwargs: not JSON ({err})") from None
        if not isinstance(kwargs, dict):
            raise ValueError("--arch-kwargs: give a JSON object, e.g. '{\"num_classes\": 10}'")
    logging.basicConfig(format="%(message)s")        # progress: pabench's own log lines only
    logging.getLogger("pabench").setLevel(logging.INFO)
    report = user.benchmark(args.model, name=args.name, configfiles=args.configfile, zoo=args.zoo,
                            out=args.out, device=args.device, arch=args.arch,
                            arch_kwargs=kwargs, fresh_data=args.fresh_data)
    summary = report.summary()[["name", "accuracy", "robustness", "log_pa",
                                "effective_accuracy", "effective_robustness"]]
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    for path in user.output_paths(args.out, report.name).values():
        print(f"wrote {path}")
    return 0


def cmd_check_config(args) -> int:
    from pabench.core import config

    files = args.files or ["config.yaml"]
    config.check(config.load(files), args.schema)
    print(f"ok: {' + '.join(files)} is a valid configuration")
    return 0


def cmd_wandb_runs(args) -> int:
    from pabench.tracking import local_runs

    for run in local_runs(args.dir):
        print(json.dumps({k: run.get(k) for k in ("name", "group", "job_type", "metrics")},
                         default=str))
    return 0


def cmd_wandb_dashboard(args) -> int:
    from pabench import dashboard

    spec = dashboard.spec_from_dir(args.dir)
    if args.dry_run:
        print(json.dumps(spec, indent=2))
        return 0
    if not args.entity:
        raise ValueError("--entity is required to save the workspace (your W&B user or team)")
    try:
        url = dashboard.save(spec, args.entity, args.project, args.name, args.url)
    except RuntimeError as err:
        raise OSError(str(err)) from None
    print(f"workspace saved: {url}")
    return 0


def cmd_corrupt(args) -> int:
    import numpy as np

    from pabench.core.io import load_array
    from pabench.datasets.corruptions import ALL_CORRUPTIONS, CORRUPTIONS
    from pabench.datasets.corruptions.write import write_cifar_c

    images = load_array(args.images, args.key)
    labels = load_array(args.labels) if args.labels else np.zeros(len(images), np.int64)
    if images.ndim == 4 and images.shape[1] == 3 and images.shape[-1] != 3:
        images = images.transpose(0, 2, 3, 1)          # the project's (N, 3, H, W) -> CIFAR-C's
    names = CORRUPTIONS if args.corruptions == "benchmark" else (
        ALL_CORRUPTIONS if args.corruptions == "all" else args.corruptions.split(","))
    paths = write_cifar_c(images, labels, args.out, names, seed=args.seed, workers=args.workers)
    print(json.dumps({"written": [str(p) for p in paths]}))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pabench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"pabench {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    pa = sub.add_parser("pa", help="posterior agreement between two score files")
    pa.add_argument("a", help="scores on X' (.npy, .npz or .pt; shape (N, K) or (P, N, K))")
    pa.add_argument("b", help="scores on X'' (same shape)")
    pa.add_argument("--solver", choices=["exact", "adam"], default="exact")
    pa.add_argument("--inputs", choices=["logits", "log_probs", "probs"], default="logits")
    pa.add_argument("--key", help="array name inside .npz / .pt files")
    pa.add_argument("--epochs", type=int, default=500, help="adam solver epochs (default 500)")
    pa.add_argument("--seed", type=int, default=0, help="adam solver minibatch seed")
    pa.add_argument("--progress", action="store_true", help="progress bar for the adam solver")
    pa.set_defaults(func=cmd_pa)

    ac = sub.add_parser("avgcase", help="average-case robustness p_robust of a model's points "
                        "under Gaussian noise (mean per sigma and estimator; --out: per point)")
    ac.add_argument("model", help="TorchScript file, or a pickled nn.Module (torch.save(model))")
    ac.add_argument("inputs", help="points in the model's input space (.npy, .npz, .pt), (N, ...)")
    ac.add_argument("--sigma", type=float, nargs="+", required=True, help="noise std (> 0)")
    ac.add_argument("--estimators", default="mc,taylor,mmse",
                    help="comma-separated: mc, taylor, taylor_mvs, mmse, mmse_mvs, softmax, linear")
    ac.add_argument("--n-mc", type=int, default=10_000, help="MC noisy copies (default 10,000)")
    ac.add_argument("--adaptive", action="store_true",
                    help="MC: stop a point once as exact as n fixed copies at worst")
    ac.add_argument("--bfloat16", action="store_true",
                    help="MC: classify the copies under bfloat16 autocast (faster, approximate)")
    ac.add_argument("--n-mmse", type=int, default=5, help="MMSE noisy copies (default 5)")
    ac.add_argument("--temperature", type=float, default=1.0, help="softmax temperature")
    ac.add_argument("--key", help="array name inside .npz / .pt files")
    ac.add_argument("--out", help="write every point's estimate to this CSV")
    ac.set_defaults(func=cmd_avgcase)

    oo = sub.add_parser("oodrb", help="benchmark your own model on OODRobustBench's shifts: ID, "
                        "every dataset and threat shift (MM5), OOD_d / OOD_t, effective robustness "
                        "against the zoo's lines, PA; a table (CSV, Markdown) and a figure")
    oo.add_argument("model", help="a torch.export archive (.pt2), TorchScript, a pabench zoo "
                    "checkpoint, or a state_dict with --arch; takes (N, 3, H, W) images in [0, 1], "
                    "returns logits")
    oo.add_argument("--arch", help="the architecture of a state_dict: package.module:Class, or a "
                    "pabench architecture (smallcnn<c>, cnn, preact_resnet18, wrn28_10)")
    oo.add_argument("--arch-kwargs", help="JSON keyword arguments of the architecture")
    oo.add_argument("--name", help="the model's name in the outputs (default: the file's stem)")
    oo.add_argument("--configfile", nargs="+", default=[],
                    help="config overlays laid over config.yaml, as in snakemake (the scale)")
    oo.add_argument("--zoo", help="a finished workflow run's stacked shifts table (default "
                    "data/results/oodrb/shifts.csv where present)")
    oo.add_argument("--out", default="figures/oodrb/user", help="output folder")
    oo.add_argument("--device", help="cpu, cuda or auto (default: oodrb.device)")
    oo.add_argument("--fresh-data", action="store_true",
                    help="build every data set anew instead of reading the workflow's data/ files")
    oo.set_defaults(func=cmd_oodrb)

    co = sub.add_parser("corrupt", help="write CIFAR-10-C style corruptions of uint8 images in "
                        "the published layout (<corruption>.npy with severities 1-5, labels.npy)")
    co.add_argument("images", help="uint8 images (N, H, W, 3) or (N, 3, H, W): .npy, .npz or .pt")
    co.add_argument("out", help="output folder")
    co.add_argument("--labels", help="labels (N,) (.npy, .npz, .pt); default zeros")
    co.add_argument("--key", help="array name of the images inside .npz / .pt files")
    co.add_argument("--corruptions", default="benchmark",
                    help="'benchmark' (the 15), 'all' (with the 4 extras) or a comma-separated list")
    co.add_argument("--seed", type=int, default=0)
    co.add_argument("--workers", type=int, help="processes (default: all cores)")
    co.set_defaults(func=cmd_corrupt)

    cc = sub.add_parser("check-config", help="validate configuration files (merged in order)")
    cc.add_argument("files", nargs="*")
    cc.add_argument("--schema", default="workflow/schemas/config.schema.yaml")
    cc.set_defaults(func=cmd_check_config)

    wr = sub.add_parser("wandb-runs", help="list the offline W&B runs under a directory")
    wr.add_argument("dir", nargs="?", default="data/wandb")
    wr.set_defaults(func=cmd_wandb_runs)

    wd = sub.add_parser("wandb-dashboard", help="create or update the project's W&B workspace: a "
                        "section per experiment, the image and numbers of every figure")
    wd.add_argument("--dir", default="data/wandb", help="the workflow's W&B directory")
    wd.add_argument("--entity", help="W&B user or team (required unless --dry-run)")
    wd.add_argument("--project", default="pabench")
    wd.add_argument("--name", default="pabench figures", help="workspace name")
    wd.add_argument("--url", help="update the workspace at this URL instead of creating one")
    wd.add_argument("--dry-run", action="store_true",
                    help="print the panel specification and save nothing (no network)")
    wd.set_defaults(func=cmd_wandb_dashboard)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, OSError) as err:
        print(f"pabench: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
