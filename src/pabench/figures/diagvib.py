"""DiagViB-6 figures and tables of the PA paper: Figure 13 (samples) and Table 2 (factors + ASS)."""
from __future__ import annotations

import pandas as pd

from ..data.datasets import load_split
from ..data.diagvib import FACTORS, canonical
from .common import plt, save_figure

SAMPLES = 6  # columns of Figure 13


def fig13(inputs, outputs, meta: dict) -> pd.DataFrame:
    """Rows: training env0 / env1 (different digit instances), validation env0 / env1 and test
    env0..env5 (the same instances); columns: the first samples of each."""
    rows = []
    for split_name in ("train", "val", "test"):
        split = load_split(getattr(inputs, split_name))
        rows += [(split_name, env, data) for env, data in split.items()]
    fig, axes = plt.subplots(len(rows), SAMPLES, figsize=(SAMPLES * 0.9, len(rows) * 0.95),
                             squeeze=False)
    records = []
    for r, (split_name, env, data) in enumerate(rows):
        for c in range(min(SAMPLES, len(data))):
            ax = axes[r, c]
            ax.imshow(data.images[c].transpose(1, 2, 0), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
            for side in ax.spines.values():
                side.set_visible(False)
            m = data.meta.iloc[c]
            records.append({"row": r, "col": c, "split": split_name, "env": env, "index": c,
                            "label": int(m.label), "mnist_id": int(m.mnist_id),
                            **{f: m[f] for f in FACTORS}})
        axes[r, 0].set_ylabel(f"{split_name}\n{env}", rotation=0, ha="right", va="center", fontsize=7)
    fig.subplots_adjust(wspace=0.05, hspace=0.08, top=0.99, bottom=0.01)
    data = pd.DataFrame(records)
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


def _describe(values) -> str:
    if isinstance(values, dict):
        return ", ".join(f"{d}: {_describe(v)}" for d, v in values.items())
    if isinstance(values, str):
        values = [values]
    return "/".join(str(v) for v in values)


def _canonical(factor, values):
    if isinstance(values, dict):
        return {d: _canonical(factor, v) for d, v in values.items()}
    if isinstance(values, str):
        values = [values]
    return [canonical(factor, str(v)) for v in values]


def table2(study: dict, envs: list, ass: pd.DataFrame) -> pd.DataFrame:
    """Factor values of each environment (from the config) and its ASS against env0."""
    frame = {"factor": [f.capitalize() for f in FACTORS] + ["Shape", "ASS vs env0"]}
    ass_by_env = dict(zip(ass.env, ass.ass))
    for k, env in enumerate(envs):
        spec = study["environments"][env]
        frame[str(k)] = ([_describe(_canonical(f, spec[f])) for f in FACTORS]
                         + [",".join(map(str, study["digits"])), f"{ass_by_env[env]:.3f}"])
    return pd.DataFrame(frame)
