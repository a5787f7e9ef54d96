"""DiagViB-6 datasets on disk: specs from the config, generation in chunks, memory-mapped reading.

A *split* (e.g. the shift-factor study's test split) renders one or more environments from one
MNIST pool.  Paired splits render the same digit instances in the same order in every
environment, with the same random draws (jitter, position in the band, scale, texture offset),
so images differ only by the environments' factor values.  Unpaired splits give each
environment its own disjoint part of the pool.  With `replace: true` instances are drawn with
replacement (within each environment's part), which the paper's sizes (2 x 40,000 training
images from about 12,000 digits) require.

Layout of a split directory:
    split.json                   the spec, the source and the image size
    <env>/images.npy             uint8 (n, 3, S, S), written chunk by chunk, read with mmap
    <env>/meta.csv               per sample: label, MNIST instance id, factor values and draws
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from pabench.core.io import read_table
from pabench.datasets import diagvib
from pabench.datasets.mnist import DigitPools
from pabench.datasets.textures import texture_bank

POOLS = ("train", "val", "test")


@dataclass
class SplitSpec:
    study: str
    name: str
    pool: str
    envs: list
    n: int
    paired: bool
    seed: int
    replace: bool
    digits: list
    environments: dict  # env name -> diagvib.Environment
    label: str = ""  # name in figures and tables

    @classmethod
    def from_config(cls, study: str, study_cfg: dict, split: str) -> "SplitSpec":
        where = f"diagvib.studies.{study}.splits.{split}"
        cfg = study_cfg["splits"][split]
        digits = [int(d) for d in study_cfg["digits"]]
        if cfg["pool"] not in POOLS:
            raise ValueError(f"{where}.pool: {cfg['pool']!r} is not one of {POOLS}")
        known = study_cfg["environments"]
        for env in cfg["envs"]:
            if env not in known:
                raise ValueError(f"{where}.envs: unknown environment {env!r}; known: {list(known)}")
        environments = {e: diagvib.Environment.from_config(e, known[e], digits) for e in cfg["envs"]}
        return cls(study, split, cfg["pool"], list(cfg["envs"]), int(cfg["n"]), bool(cfg["paired"]),
                   int(cfg["seed"]), bool(cfg.get("replace", False)), digits, environments,
                   cfg.get("label", split))

    def instances(self, pools: DigitPools) -> dict:
        """Per environment, the pool indices it renders (checked against the pool's size)."""
        where = f"diagvib.studies.{self.study}.splits.{self.name}"
        present = set(np.unique(pools.labels[pools.pools[self.pool]]).tolist())
        missing = sorted(set(self.digits) - present)
        if missing:
            raise ValueError(f"{where}: digits {missing} are not in the {pools.source} {self.pool} pool")
        own = {tuple(e.digits) for e in self.environments.values()}
        if self.paired and len(own) > 1:
            raise ValueError(f"{where}: paired environments must show the same digits, got {sorted(own)}")
        candidates = pools.pool(self.pool, self.digits)
        rng = np.random.default_rng([self.seed, 1])
        order = rng.permutation(candidates)
        parts = [order] if self.paired else np.array_split(order, len(self.envs))
        chosen = []
        for env, part in zip(self.envs, parts):
            part = part[np.isin(pools.labels[part], self.environments[env].digits)]
            if not self.replace and self.n > len(part):
                raise ValueError(f"{where}.n: {self.n} samples per environment, but the {self.pool} "
                                 f"pool holds only {len(part)} usable digits"
                                 f"{'' if self.paired else ' per environment (disjoint parts)'}; "
                                 "lower n or set replace: true")
            chosen.append(rng.choice(part, self.n, replace=True) if self.replace else part[:self.n])
        if self.paired:
            chosen = chosen * len(self.envs)
        return dict(zip(self.envs, chosen))


def _variates(spec: SplitSpec, env_index: int) -> np.ndarray:
    """Uniform draws of one environment; shared by all environments of a paired split."""
    stream = 0 if spec.paired else env_index + 1
    return np.random.default_rng([spec.seed, 2, stream]).random((spec.n, diagvib.N_VARIATES))


def _write_npy(path: Path, shape, chunks) -> None:
    """Write an .npy file from an iterator of uint8 chunks without holding it in memory."""
    header = {"descr": "|u1", "fortran_order": False, "shape": tuple(shape)}
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_2_0(fh, header)
        written = 0
        for chunk in chunks:
            fh.write(memoryview(np.ascontiguousarray(chunk, dtype=np.uint8)).cast("B"))
            written += len(chunk)
            del chunk  # do not hold it while the next one is rendered
    if written != shape[0]:
        raise RuntimeError(f"{path}: wrote {written} images, expected {shape[0]}")


def build_split(spec: SplitSpec, pools: DigitPools, out_dir, size: int, texture_seed: int = 0,
                chunk: int = 512, progress: bool = False) -> dict:
    """Render every environment of the split into out_dir (replaced atomically)."""
    out_dir = Path(out_dir)
    for stale in out_dir.parent.glob(f".{out_dir.name}.tmp-*"):  # left by a killed job
        shutil.rmtree(stale, ignore_errors=True)
    tmp = out_dir.with_name(f".{out_dir.name}.tmp-{os.getpid()}")
    tmp.mkdir(parents=True)
    textures = texture_bank(texture_seed)
    chosen = spec.instances(pools)  # validates before anything is rendered
    try:
        for k, env in enumerate(spec.envs):
            idx = chosen[env]
            factors = diagvib.sample_factors(spec.environments[env], pools.labels[idx],
                                             _variates(spec, k), size)
            (tmp / env).mkdir()

            def chunks(idx=idx, factors=factors, env=env):
                for lo in tqdm(range(0, len(idx), chunk), desc=f"{spec.study}/{spec.name}/{env}",
                               disable=not progress, mininterval=2.0):
                    part = {key: val[lo:lo + chunk] for key, val in factors.items()}
                    yield diagvib.render(pools.images[idx[lo:lo + chunk]], part, size, textures)

            _write_npy(tmp / env / "images.npy", (len(idx), 3, size, size), chunks())
            meta = pd.DataFrame({"label": pools.labels[idx], "mnist_id": pools.ids[idx], **factors})
            meta.to_csv(tmp / env / "meta.csv", index=False, float_format="%.10g")
        info = {"study": spec.study, "split": spec.name, "pool": spec.pool, "envs": spec.envs,
                "n": spec.n, "paired": spec.paired, "seed": spec.seed, "replace": spec.replace,
                "digits": spec.digits, "size": size, "source": pools.source,
                "texture_seed": texture_seed,
                "factors": {e: spec.environments[e].factors for e in spec.envs}}
        (tmp / "split.json").write_text(json.dumps(info, indent=2, sort_keys=True, default=str) + "\n")
        shutil.rmtree(out_dir, ignore_errors=True)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return info


class EnvironmentData:
    """One rendered environment, memory-mapped: images (n, 3, S, S) uint8, labels, metadata."""

    def __init__(self, directory):
        directory = Path(directory)
        self.dir = directory
        try:
            self.images = np.load(directory / "images.npy", mmap_mode="r")
        except (OSError, ValueError) as err:
            raise ValueError(f"{directory / 'images.npy'}: cannot be read ({err})") from None
        self.meta = read_table(directory / "meta.csv")
        if len(self.meta) != len(self.images):
            raise ValueError(f"{directory}: {len(self.images)} images but {len(self.meta)} metadata rows")
        if "label" not in self.meta:
            raise ValueError(f"{directory / 'meta.csv'}: no 'label' column")
        self.labels = self.meta["label"].to_numpy()

    def __len__(self) -> int:
        return len(self.images)


def load_split(directory) -> dict:
    """{env name: EnvironmentData} of a split directory."""
    directory = Path(directory)
    try:
        envs = json.loads((directory / "split.json").read_text())["envs"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{directory / 'split.json'}: not a split description "
                         f"({type(err).__name__}: {err})") from None
    return {env: EnvironmentData(directory / env) for env in envs}
