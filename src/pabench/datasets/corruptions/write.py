"""Write the published CIFAR-10-C layout: `<corruption>.npy` (5 N, H, W, 3) uint8 with the
severities 1..5 stacked in blocks of N, and `labels.npy` (the N labels repeated 5 times), so that
the published files can be dropped in place of ours.  Work is split into (corruption, severity,
chunk) tasks over a process pool.  Every input is checked before any work; the files are written
under temporary names and renamed into place together once all are complete, so a failure leaves
none of them (nor the folder, if it made it)."""
from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from pabench.core.io import atomic_path
from pabench.datasets.corruptions import SEVERITIES, check_corruption, check_size
from pabench.datasets.corruptions.apply import corrupt

_IMAGES: np.ndarray | None = None     # the source images; forked workers inherit them


def _one_thread():
    import torch

    torch.set_num_threads(1)          # one process per core


def _task(args):
    name, severity, start, stop, seed = args
    return name, severity, start, corrupt(_IMAGES[start:stop], name, severity, seed, start=start)


def write_cifar_c(images, labels, folder, corruptions, seed: int = 0, workers: int | None = None,
                  chunk: int = 500, progress: bool = True) -> list[Path]:
    """Corrupt uint8 images (N, H, W, 3) with every corruption at every severity and write the
    CIFAR-10-C layout into `folder`; returns the written paths.  Image i of the input always gets
    the same result for a given seed, whatever `workers` and `chunk`."""
    global _IMAGES
    images, labels = np.ascontiguousarray(images), np.asarray(labels)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[-1] != 3:
        raise ValueError(f"images must be uint8 (N, H, W, 3), got {images.dtype} {images.shape}")
    if labels.shape != (len(images),):
        raise ValueError(f"labels must have shape ({len(images)},), got {labels.shape}")
    corruptions = [check_corruption(c) for c in corruptions]
    for i, c in enumerate(corruptions):
        if c in corruptions[:i]:
            raise ValueError(f"corruption {c!r} is named twice")
        check_size(c, *images.shape[1:3])
    folder = Path(folder)
    made_folder = not folder.exists()
    n, k = len(images), len(SEVERITIES)
    tasks = [(c, s, lo, min(lo + chunk, n), seed) for c in corruptions for s in SEVERITIES
             for lo in range(0, n, chunk)]
    workers = max(1, min(workers or os.cpu_count() or 1, len(tasks)))
    names = ["labels", *corruptions]
    files, tmp, arrays = {}, {}, {}     # files: the open atomic writes, published at the end
    _IMAGES = images
    pool = None
    try:
        for c in names:
            ctx = atomic_path(folder / f"{c}.npy")
            tmp[c] = ctx.__enter__()
            files[c] = ctx
        with open(tmp["labels"], "wb") as fh:
            np.save(fh, np.tile(labels.astype(np.int64), k))
        for c in corruptions:
            arrays[c] = np.lib.format.open_memmap(tmp[c], mode="w+", dtype=np.uint8,
                                                  shape=(k * n, *images.shape[1:]))
        pool = mp.get_context("fork").Pool(workers, initializer=_one_thread) if workers > 1 else None
        results = pool.imap_unordered(_task, tasks) if pool else map(_task, tasks)
        with tqdm(total=len(corruptions) * k * n, unit="img", desc="corruptions",
                  disable=not progress) as bar:
            for name, severity, start, out in results:
                block = (severity - 1) * n + start
                arrays[name][block:block + len(out)] = out
                bar.update(len(out))
        for c in corruptions:
            arrays.pop(c).flush()
        for c in names:
            files.pop(c).__exit__(None, None, None)
    except BaseException as err:
        arrays.clear()
        for ctx in files.values():                      # removes the temporaries
            ctx.__exit__(type(err), err, err.__traceback__)
        if made_folder and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
        raise
    finally:
        _IMAGES = None
        if pool is not None:
            pool.terminate()
            pool.join()
    return [folder / f"{c}.npy" for c in names]
