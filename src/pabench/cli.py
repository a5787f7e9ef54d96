"""The `pabench` command.

    pabench pa A B [--solver exact|adam] [--inputs logits|log_probs|probs]   # prints JSON
    pabench avgcase MODEL INPUTS --sigma 0.1 [0.2 ...] [--estimators mc,taylor,mmse] [--out p.csv]
                    [--arch module:Class --arch-kwargs JSON]
    pabench oodrb MODEL [--arch module:Class] [--configfile overlay.yaml] [--zoo shifts.csv] [--out DIR]
    pabench corrupt IMAGES OUT [--labels L] [--corruptions benchmark|all|a,b] [--workers N]
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

    a = load_array(args.a, args.key)
    b = load_array(args.b, args.key)
    from pabench.core.threads import threads_limited  # (PyTorch: once the files read)
    from pabench.metrics import afr_pred, posterior_agreement

    res = posterior_agreement(a, b, solver=args.solver, inputs=args.inputs, epochs=args.epochs,
                              seed=args.seed, progress=args.progress)
    out = {k: _json_number(v) for k, v in res.summary().items()}
    if a.ndim == 2:
        with threads_limited(a.size):        # the library's thread bound (pabench.core.threads)
            out["afr_pred"] = afr_pred(a, b)
    print(json.dumps(out, indent=2))
    return 0


def _arch_kwargs(text):
    """--arch-kwargs: a JSON object (None when not given)."""
    if not text:
        return None
    try:
        kwargs = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--arch-kwargs: not JSON ({err})") from None
    if not isinstance(kwargs, dict):
        raise ValueError("--arch-kwargs: give a JSON object, e.g. '{\"num_classes\": 10}'")
    return kwargs


def _points(path, key):
    """The points of `pabench avgcase`: a non-empty batch (N, ...) of finite real numbers."""
    from pabench.core.io import load_array
    from pabench.metrics.avgcase.checks import check_finite

    x = load_array(path, key)
    if x.ndim < 2:
        raise ValueError(f"{path}: the points must be a batch (N, ...), got shape {x.shape}")
    if len(x) == 0:
        raise ValueError(f"{path}: holds no points, shape {x.shape}")
    check_finite(x, str(path))
    return x


def _checked_model(model, x, names):
    """The points as a tensor of the model's dtype, after one forward pass on two of them
    (before any estimator runs): the model takes them and returns finite (N, C) logits, C >= 2;
    with the 'linear' estimator, the model is linear."""
    import torch

    from pabench.core.modelfile import reason
    from pabench.core.threads import threads_limited
    from pabench.metrics.avgcase.checks import check_classes
    from pabench.metrics.avgcase.estimators import linear_weights

    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    x = torch.from_numpy(x).to(dtype)
    probe = x[:2]
    try:
        with torch.no_grad(), threads_limited(probe.numel()):
            out = model(probe)
    except Exception as err:  # noqa: BLE001 - a user's model raises anything
        shape = ", ".join(map(str, x.shape[1:]))
        raise ValueError(f"the model does not take the points, shape (N, {shape}): "
                         f"{reason(err)}") from None
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"the model returns a {type(out).__name__}, not a tensor of logits")
    if out.ndim != 2 or len(out) != len(probe):
        raise ValueError(f"the model must return logits of shape (N, C); for {len(probe)} "
                         f"points it returns {tuple(out.shape)}")
    check_classes(out.shape[1])
    if not torch.isfinite(out).all():
        raise ValueError("the model returns NaN or infinite logits on the points")
    if "linear" in names:
        linear_weights(model, x)
    return x


def cmd_avgcase(args) -> int:
    from pathlib import Path

    import pandas as pd

    import numpy as np

    from pabench.core.io import write_csv
    from pabench.core.modelfile import load_model
    from pabench.metrics.avgcase import checks
    from pabench.metrics.avgcase.estimators import estimate
    from pabench.metrics.avgcase.mvn import ABSEPS

    names = [checks.check_estimator(n.strip()) for n in args.estimators.split(",")]
    sigmas = [checks.check_sigma(s) for s in args.sigma]
    for what, n in (("--n-mc", args.n_mc), ("--n-mmse", args.n_mmse)):
        checks.check_n(n, what)
    checks.check_temperature(args.temperature)
    if args.out and Path(args.out).is_dir():
        raise ValueError(f"--out {args.out}: a directory; name a CSV file")
    x = _points(args.inputs, args.key)
    model = load_model(args.model, args.arch, _arch_kwargs(args.arch_kwargs))
    x = _checked_model(model, x, names)
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

    kwargs = _arch_kwargs(args.arch_kwargs)
    if args.device not in (None, "auto"):
        import torch

        try:
            torch.device(args.device)
        except RuntimeError:
            raise ValueError(f"--device {args.device}: not a device (cpu, cuda, cuda:N or "
                             "auto)") from None
    from pabench.experiments.oodrb import user

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


def cmd_status(args) -> int:
    from pathlib import Path

    from pabench.reporting import status

    for name in args.write or []:
        changed = status.write(Path(name))
        print(f"{name}: {'updated' if changed else 'already current'}")
    if not args.write:
        print(status.table())
    return 0


def cmd_where(args) -> int:
    from pabench.core import config
    from pabench.reporting import where

    print(where.describe(args.target, config.load(["config.yaml", *args.configfile])))
    return 0


def cmd_check_config(args) -> int:
    from pabench.core import config

    files = args.files or ["config.yaml"]
    config.check(config.load(files), args.schema)
    print(f"ok: {' + '.join(files)} is a valid configuration")
    return 0


def cmd_wandb_runs(args) -> int:
    from pathlib import Path

    from pabench.runtime.tracking import local_runs

    if not Path(args.dir).is_dir():
        what = "not a folder" if Path(args.dir).exists() else "no such folder"
        raise FileNotFoundError(f"{args.dir}: {what}")
    for run in local_runs(args.dir):
        print(json.dumps({k: run.get(k) for k in ("name", "group", "job_type", "metrics")},
                         default=str))
    return 0


def cmd_wandb_dashboard(args) -> int:
    from pabench.runtime import dashboard

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


def _images(path, key):
    """The uint8 images (N, H, W, 3) of `pabench corrupt`: the project's (N, 3, H, W) are
    transposed, integer arrays within 0..255 taken as uint8."""
    import numpy as np

    from pabench.core.io import load_array

    x = load_array(path, key)
    if x.ndim != 4 or 3 not in (x.shape[1], x.shape[-1]):
        raise ValueError(f"{path}: images must have shape (N, H, W, 3) or (N, 3, H, W), got "
                         f"{x.shape}")
    if x.dtype.kind == "f":
        raise ValueError(f"{path}: images must be uint8 (0..255), got {x.dtype}; scale images "
                         "in [0, 1] by 255 and convert them")
    if len(x) == 0:
        raise ValueError(f"{path}: holds no images, shape {x.shape}")
    if x.dtype != np.uint8:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi > 255:
            raise ValueError(f"{path}: values from {lo} to {hi} are outside the uint8 range 0..255")
        x = x.astype(np.uint8)
    return x.transpose(0, 2, 3, 1) if x.shape[1] == 3 and x.shape[-1] != 3 else x


def _labels(path, n: int):
    """One integer class index >= 0 per image."""
    from pabench.core.io import load_array

    y = load_array(path)
    if y.shape != (n,):
        raise ValueError(f"{path}: labels must have shape ({n},), one per image, got {y.shape}")
    if y.dtype.kind == "f":
        raise ValueError(f"{path}: labels must be integers (class indices), got {y.dtype}")
    if n and y.min() < 0:
        raise ValueError(f"{path}: labels must be class indices >= 0, got {y.min()}")
    return y.astype("int64")


def cmd_corrupt(args) -> int:
    from pathlib import Path

    import numpy as np

    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise ValueError(f"{args.out}: not a folder (a file is there)")
    images = _images(args.images, args.key)
    labels = _labels(args.labels, len(images)) if args.labels else np.zeros(len(images), np.int64)
    from pabench.datasets.corruptions import ALL_CORRUPTIONS, CORRUPTIONS  # (PyTorch)
    from pabench.datasets.corruptions.write import write_cifar_c

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
    _model_arguments(ac, "(a pickled nn.Module is refused: loading it would run the file's code)",
                     "")
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
    _model_arguments(oo, "; takes (N, 3, H, W) images in [0, 1], returns logits",
                     " (smallcnn<c>, cnn, preact_resnet18, wrn28_10)")
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
    co.add_argument("images", help="uint8 images (N, H, W, 3) or (N, 3, H, W), or integers within "
                    "0..255: .npy, .npz or .pt")
    co.add_argument("out", help="output folder")
    co.add_argument("--labels", help="labels (N,) (.npy, .npz, .pt); default zeros")
    co.add_argument("--key", help="array name of the images inside .npz / .pt files")
    co.add_argument("--corruptions", default="benchmark",
                    help="'benchmark' (the 15), 'all' (with the 4 extras) or a comma-separated list")
    co.add_argument("--seed", type=int, default=0)
    co.add_argument("--workers", type=int, help="processes (default: all cores)")
    co.set_defaults(func=cmd_corrupt)

    st = sub.add_parser("status", help="the table of every registered figure and table and "
                        "whether the quick and the paper scale build it (from the registries)")
    st.add_argument("--write", metavar="FILE", nargs="+", help="replace the status blocks "
                    "(summary, table) between their markers in these files instead of printing")
    st.set_defaults(func=cmd_status)
    wh = sub.add_parser("where", help="the rule, function (file:line), inputs and config keys of "
                        "a figure or table")
    wh.add_argument("target", help="a figure or table file (figures/oodrb/fig3.pdf) or its rule")
    wh.add_argument("--configfile", nargs="+", default=[], help="overlays on config.yaml, as "
                    "snakemake takes them")
    wh.set_defaults(func=cmd_where)
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


def _model_arguments(parser, model_note: str, arch_note: str) -> None:
    """The model file and, for a state_dict, its architecture (pabench.core.modelfile)."""
    parser.add_argument("model", help="a torch.export archive (.pt2), TorchScript, a pabench zoo "
                        "checkpoint, or a state_dict with --arch " + model_note)
    parser.add_argument("--arch", help="the architecture of a state_dict: package.module:Class, "
                        "or a pabench architecture" + arch_note)
    parser.add_argument("--arch-kwargs", help="JSON keyword arguments of the architecture")


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError, OSError) as err:
        # one line: a configuration error lists its keys on lines of their own
        message = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
        print(f"pabench: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
