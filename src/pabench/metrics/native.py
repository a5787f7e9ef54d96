"""The fused C kernels of pa_native.c: compiled with the system C compiler on first use,
cached under ~/.cache/pabench/native (or $PABENCH_CACHE/native), loaded with ctypes.

Without a compiler (or with PABENCH_NATIVE=0) `load()` returns None and callers use the
PyTorch code path, which computes the same quantities.  Building and caching: pabench.core.native.
"""
from __future__ import annotations

import ctypes
from functools import lru_cache
from pathlib import Path

import torch

from pabench.core.native import compile_library
from pabench.metrics.kernel import CentredPairs

SOURCE = Path(__file__).with_name("pa_native.c")
# -ffast-math (with its finite-math assumption, which the kernels respect) is what lets gcc
# call glibc's vectorised exp.
FLAGS = ("-O3", "-march=native", "-ffast-math", "-fopenmp", "-fPIC", "-shared")


@lru_cache(maxsize=None)
def load():
    """The compiled library, or None when it cannot be built here (the adam solver then uses
    its PyTorch path)."""
    lib = compile_library(SOURCE, FLAGS)
    if lib is None:
        return None
    ptr, long, dbl = ctypes.c_void_p, ctypes.c_long, ctypes.c_double
    lib.pa_terms.argtypes = [ptr, ptr, long, long, long, ptr, ptr, ptr, ctypes.c_int]
    lib.pa_terms.restype = None
    lib.pa_adam_epoch.argtypes = [ptr, ptr, long, long, long, ptr, long, dbl, dbl, dbl, dbl, long,
                                  ptr, ptr, ptr, ctypes.c_int]
    lib.pa_adam_epoch.restype = None
    return lib


def _threads(tasks: int) -> int:
    """OpenMP threads of a kernel call: its loop runs over pairs, so no more threads than pairs,
    and no more than torch may use (pabench.core.threads limits that for small problems)."""
    return max(1, min(tasks, torch.get_num_threads()))


def usable(p: CentredPairs) -> bool:
    """Whether the native kernels can evaluate these pairs (CPU, finite scores)."""
    return (not p.masked and p.X.device.type == "cpu" and p.X.is_contiguous()
            and p.delta.is_contiguous() and load() is not None)


def convex_parts(p: CentredPairs, pairs: torch.Tensor, beta: torch.Tensor) -> torch.Tensor:
    """(F1, F2, F2') of pair pairs[r] at beta[r] for every request r: shape (R, 3), where the
    objective is F1 - F2 with F1, F2 convex (see kernel.convex_parts)."""
    pairs = pairs.to(torch.long).contiguous()
    beta = beta.to(torch.float64).contiguous()
    out = torch.empty(len(pairs), 4, dtype=torch.float64)
    load().pa_terms(p.X.data_ptr(), p.delta.data_ptr(), p.n, p.k, len(pairs), pairs.data_ptr(),
                    beta.data_ptr(), out.data_ptr(), _threads(len(pairs)))
    return out[:, :3]


def adam_epoch(p: CentredPairs, order: torch.Tensor, batch: int, lr: float, betas, eps: float,
               step0: int, beta: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> None:
    """One epoch of minibatch steps for every pair, updating beta, m and v in place."""
    order = order.to(torch.long).contiguous()
    load().pa_adam_epoch(p.X.data_ptr(), p.delta.data_ptr(), p.X.shape[0], p.n, p.k,
                         order.data_ptr(), batch, lr, betas[0], betas[1], eps, step0,
                         beta.data_ptr(), m.data_ptr(), v.data_ptr(), _threads(p.X.shape[0]))
