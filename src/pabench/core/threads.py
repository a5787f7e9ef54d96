"""How many CPU threads a computation may use.

PyTorch splits every element-wise operation over all intra-op threads once a tensor passes its
grain size (32,768 elements), and OpenMP threads spin at each operation's barrier.  On a busy
machine (another PyTorch job on every core) a thread that has to wait for its share of a core
turns each of the thousands of small operations of a PA solve into a scheduler round trip:
the same solve then runs 10-100x slower on two threads than on one.  Small problems therefore run
on one thread, and larger ones on as many threads as they have work for.  docs/architecture.md
("Threads on a busy machine") lists what each caller counts as its work.
"""
from __future__ import annotations

import functools
import platform
from contextlib import contextmanager

import numpy as np
import torch

# Elements of work (scores, pixels) one thread gets before a second one is worth its barriers
# (benchmarks/bench_threads.py measures this bound, idle and loaded).
MIN_WORK_PER_THREAD = 1 << 21


def cpu_name() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo), else what the platform module knows."""
    try:
        with open("/proc/cpuinfo") as fh:
            return next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def threads_for(work: int, available: int | None = None) -> int:
    """Threads for `work` elements: one per MIN_WORK_PER_THREAD, at least 1, at most the
    available ones (torch's current setting by default)."""
    available = torch.get_num_threads() if available is None else available
    return max(1, min(available, int(work) // MIN_WORK_PER_THREAD))


@contextmanager
def threads_limited(work: int):
    """Run the block with threads_for(work) intra-op threads, restoring the setting after.
    Yields the count (also the bound for the native kernels' OpenMP loops)."""
    before = torch.get_num_threads()
    n = threads_for(work, before)
    if n != before:
        torch.set_num_threads(n)
    try:
        yield n
    finally:
        if n != before:
            torch.set_num_threads(before)



def size_of(x) -> int:
    """Elements of an array-like (tensor, ndarray, nested list) without converting it."""
    return x.numel() if isinstance(x, torch.Tensor) else int(np.size(x))


def limit_threads(work_of):
    """Decorator: run the function under threads_limited(work_of(*args, **kwargs))."""
    def wrap(fn):
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with threads_limited(work_of(*args, **kwargs)):
                return fn(*args, **kwargs)
        return inner
    return wrap
