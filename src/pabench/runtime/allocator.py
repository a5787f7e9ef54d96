"""glibc malloc settings for the workflow's jobs (set in the Snakefile, inherited by every job).

glibc hands a freed block of more than 128 KiB (its mmap threshold, which grows to at most 32 MiB)
back to the kernel, and trims the heap's top once 128 KiB of it are free.  A job allocates and
frees large tensors all the time, every layer's activations for every batch, so each one is
faulted in afresh, page by page, and zeroed by the kernel.  With the thresholds below, freed
blocks stay in the process for reuse, which speeds up jobs that allocate large activations batch
after batch (the MC estimator's ResNet-18/8 forward pass; `benchmarks/bench_allocator.py`,
docs/measurements.md).  The price is memory a job has
freed staying mapped until it exits, at most about `top_pad` + the job's own peak.

A user's own GLIBC_TUNABLES malloc settings are kept; PABENCH_MALLOC_TUNING=0 turns this off.
Only glibc reads GLIBC_TUNABLES (other C libraries ignore it), and only at a process's start: it
acts on the processes started after `configure`, not on the one that calls it.
"""
from __future__ import annotations

import os

ENV = "GLIBC_TUNABLES"
SWITCH = "PABENCH_MALLOC_TUNING"
MiB = 1 << 20
TUNABLES = {
    "glibc.malloc.mmap_threshold": 64 * MiB,   # blocks up to this size come from the heap
    "glibc.malloc.trim_threshold": 512 * MiB,  # free memory kept at the heap's top
    "glibc.malloc.top_pad": 64 * MiB,          # grow the heap in steps this large
}


def configure(environ=None) -> str | None:
    """Add TUNABLES to GLIBC_TUNABLES in `environ` (default: os.environ), unless the switch is off
    or the variable already sets a malloc tunable.  Returns the value now in force, if any."""
    from pabench.runtime.tracking import switched_on

    environ = os.environ if environ is None else environ
    current = environ.get(ENV, "")
    if not switched_on(SWITCH, environ) or "glibc.malloc." in current:
        return current or None
    ours = ":".join(f"{key}={value}" for key, value in TUNABLES.items())
    environ[ENV] = f"{current}:{ours}" if current else ours
    return environ[ENV]
