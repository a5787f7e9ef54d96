"""DiagViB-6 figures and tables of the PA paper: Figure 13 (samples) and Table 2 (factors + ASS)."""
from __future__ import annotations

import pandas as pd

from pabench.core.io import read_table
from pabench.datasets.diagvib import FACTORS, HUES, Environment, canonical
from pabench.reporting.plotting import plt, save_figure

SAMPLES = 6  # columns of Figure 13


def fig13(inputs, outputs, meta: dict) -> pd.DataFrame:
    """Rows: training env0 / env1 (different digit instances), validation env0 / env1 and test
    env0..env5 (the same instances); columns: the first samples of each."""
    from pabench.datasets.splits import load_split  # the rendered images (reading them loads PyTorch)

    rows = []
    for split_name in ("train", "val", "test"):
        split = load_split(inputs[split_name])
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


def table2(inputs: dict, study: dict, envs: list) -> pd.DataFrame:
    ass = read_table(inputs["ass"])
    """Factor values of each environment (from the config) and its ASS against env0."""
    frame = {"factor": [f.capitalize() for f in FACTORS] + ["Shape", "ASS vs env0"]}
    ass_by_env = dict(zip(ass.env, ass.ass))
    for k, env in enumerate(envs):
        spec = study["environments"][env]
        frame[str(k)] = ([_describe(_canonical(f, spec[f])) for f in FACTORS]
                         + [",".join(map(str, study["digits"])), f"{ass_by_env[env]:.3f}"])
    return pd.DataFrame(frame)


def cooccurrence(study: dict) -> pd.DataFrame:
    """Which (hue, digit) pairs the training splits of a study show: one row per setting, hue
    and digit, `present` 1 or 0 (Figure 12), computed from the config."""
    rows = []
    for split, cfg in study["splits"].items():
        if cfg["pool"] != "train":
            continue
        seen = set()
        for env in cfg["envs"]:
            e = Environment.from_config(env, study["environments"][env], study["digits"])
            seen |= {(h, d) for d in e.digits for h in e.choices("hue", d)}
        hues = sorted({h for h, _ in seen}, key=list(HUES).index)
        rows += [{"setting": cfg.get("label", split), "hue": h, "digit": d,
                  "present": int((h, d) in seen)} for h in hues for d in study["digits"]]
    return pd.DataFrame(rows)


def fig12(inputs: dict, outputs, meta: dict, study: dict) -> pd.DataFrame:
    data = cooccurrence(study)
    settings = list(dict.fromkeys(data.setting))
    fig, axes = plt.subplots(1, len(settings), figsize=(1.6 * len(settings), 1.9), squeeze=False)
    for i, (ax, setting) in enumerate(zip(axes[0], settings)):
        d = data[data.setting == setting]
        hues, digits = list(dict.fromkeys(d.hue)), list(dict.fromkeys(d.digit))
        grid = d.pivot(index="hue", columns="digit", values="present").loc[hues, digits]
        ax.imshow(grid.to_numpy(), cmap="Greys", vmin=0, vmax=1.4)
        ax.set_xticks(range(len(digits)), [str(x) for x in digits])
        ax.set_yticks(range(len(hues)), hues if i == 0 else [])
        ax.set_xlabel("digit (F_P)")
        ax.set_title(setting)
        ax.grid(False)
        for (i, j), v in pd.DataFrame(grid.to_numpy()).stack().items():
            ax.text(j, i, "x" if v else "", ha="center", va="center", color="w")
    axes[0, 0].set_ylabel("hue (F_L)")
    save_figure(fig, *outputs, data, meta.pop("caption"), meta)
    return data


def table3(inputs: dict, study: dict) -> pd.DataFrame:
    """Every environment of every split of the model-selection study, from the config."""
    rows = []
    for split, cfg in study["splits"].items():
        for k, env in enumerate(cfg["envs"]):
            e = Environment.from_config(env, study["environments"][env], study["digits"])
            rows.append({"split": cfg.get("label", split), "env": env,
                         **{f.capitalize(): _describe(e.factors[f]) for f in FACTORS},
                         "Shape": ",".join(map(str, e.digits))})
    return pd.DataFrame(rows)
