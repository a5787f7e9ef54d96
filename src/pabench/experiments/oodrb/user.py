"""Benchmark a user's own model the OODRobustBench way (`pabench oodrb MODEL`, `benchmark`).

The model runs through the workflow's own functions on the configured scale's data (config.yaml
and its overlays): clean accuracy, MM5 robustness and PA on the ID test split and under every
dataset shift (compute.shift_scores, compute.shifts) and every threat shift (compute.threats);
then the aggregates of analysis.aggregate (R_c, R_n, OOD_d, OOD_t, OOD) and its effective
accuracy and robustness against the lines fitted on a finished workflow run's zoo
(analysis.fits on data/results/oodrb/shifts.csv: AT models, the paper's filter).

The scale's data sets are read from the workflow's files (data/oodrb/data/<dataset>/) where they
are present and fit the config, else built on the fly.  Everything that can be checked cheaply
(the config, the zoo table, the model file, one forward pass on three ID images) is checked
before any attack; outputs are written at the end, each atomically."""
from __future__ import annotations

import logging
import math
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from pabench.core import paths
from pabench.experiments.oodrb import analysis as A
from pabench.experiments.oodrb import plan

log = logging.getLogger("pabench.oodrb")

CONFIG = "config.yaml"
ZOO_TABLE = paths.oodrb_table("shifts")
STYLE = "workflow/style/pabench.mplstyle"
METHOD = "user"                      # the `method` of the user's rows
GROUP = "AT"                         # the zoo's lines: adversarially trained models (Eq. 5)
PROBE = 3                            # ID images of the checking forward pass
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
NOTE_NO_ZOO = ("no zoo table at {path}: effective robustness and the zoo are left out (run "
               "`snakemake --cores all oodrb` first, or name a finished run's table with --zoo)")


@dataclass
class Report:
    """One model's benchmark: the tidy rows (the workflow's format), the table (a row per shift,
    then the summary; percent, log PA in nats), the zoo's rows and fitted lines (None / empty
    without a zoo), and notes for the reader."""
    name: str
    rows: pd.DataFrame
    table: pd.DataFrame
    zoo: pd.DataFrame | None
    lines: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        return self.table[self.table.section == "summary"].reset_index(drop=True)


# ------------------------------------------------------------------ inputs
def load_config(configfiles=()) -> dict:
    """config.yaml with the given overlays laid over it (as Snakemake's --configfile), checked
    against the workflow's schema."""
    from pabench.core import config as pabench_config

    files = [CONFIG] + [f for f in configfiles if Path(f).resolve() != Path(CONFIG).resolve()]
    for f in files:
        if not Path(f).is_file():
            where = " (run from the workflow's folder)" if f == CONFIG else ""
            raise FileNotFoundError(f"{f}: no such config file{where}")
    cfg = pabench_config.load(files)
    pabench_config.check(cfg)
    return cfg


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ValueError(f"model name {name!r}: use letters, digits and . _ + - (it names the "
                         "output files)")
    return name


def read_zoo(path) -> pd.DataFrame:
    """The zoo's stacked shifts table (degenerate models left out, as in every fit)."""
    try:
        return A.read_shifts({"shifts": path})
    except ValueError as err:  # (the table checks name the table, not the file)
        if str(path) in str(err):
            raise
        raise ValueError(f"{path}: {err}") from None


def _image_batch(images_u8: np.ndarray, device):
    import torch

    from pabench.attacks.training import as_float

    return as_float(torch.from_numpy(np.ascontiguousarray(images_u8))).to(device)


def _reason(err: BaseException) -> str:
    """The line of an error that says what went wrong (TorchScript puts it last)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    if not lines:
        return type(err).__name__
    return lines[-1] if "TorchScript" in lines[0] else lines[0]


def _expected_channels(model, x, text: str) -> str | None:
    """The channel count the model wants, from its error or by a probe with 1-channel images."""
    import torch

    found = re.search(r"to have (\d+) channels", text) or re.search(r"size\(\)\[1\] == (\d+)", text)
    if found:
        return found.group(1)
    if x.shape[1] != 1:
        try:
            with torch.no_grad():
                model(x.mean(1, keepdim=True))
            return "1"
        except Exception:  # noqa: BLE001 - only a probe
            pass
    return None


def _input_problem(model, x, err: BaseException) -> str:
    """Why the model refused the data's images: channels, batch size or image shape."""
    text, shape = str(err), ", ".join(map(str, x.shape[1:]))
    channels = _expected_channels(model, x, text)
    if channels is not None:
        return (f"the model expects {channels}-channel images; the data have {x.shape[1]} "
                f"channels (N, {shape})")
    batch = re.search(r"size\(\)\[0\] == (\d+)", text)
    if batch is not None:
        return (f"the model takes a fixed batch of {batch.group(1)} images; export it with a "
                "dynamic batch dimension (torch.export.Dim)")
    return f"the model does not take the data's images, shape (N, {shape}) in [0, 1]: {_reason(err)}"


def check_model(model, images_u8: np.ndarray, num_classes: int, device) -> None:
    """One forward pass on a few ID images (the input shape and channels, the number of classes,
    finite logits), one on a single image (MM5's chunks can be that small) and one gradient (MM5
    ascends it): a ValueError naming the first problem."""
    import torch

    x = _image_batch(images_u8[:PROBE], device)
    try:
        with torch.no_grad():
            out = model(x)
    except Exception as err:  # noqa: BLE001 - a user's model raises anything
        raise ValueError(_input_problem(model, x, err)) from None
    if not isinstance(out, torch.Tensor):
        raise ValueError(f"the model returns a {type(out).__name__}, not a tensor of logits")
    if out.ndim != 2 or out.shape[0] != len(x):
        raise ValueError(f"the model returns shape {tuple(out.shape)} for {len(x)} images, not "
                         f"({len(x)}, classes) logits")
    if out.shape[1] != num_classes:
        raise ValueError(f"the model returns {out.shape[1]} class scores per image; the data "
                         f"have {num_classes} classes")
    if not torch.isfinite(out).all():
        raise ValueError("the model returns NaN or infinite outputs on ID test images")
    try:
        with torch.no_grad():
            model(x[:1])
    except Exception as err:  # noqa: BLE001
        raise ValueError(f"the model takes {len(x)} images at once but not one: {_reason(err)} "
                         "(export it with a dynamic batch dimension)") from None
    xg = x.clone().requires_grad_(True)
    try:
        (grad,) = torch.autograd.grad(model(xg).float().logsumexp(1).sum(), xg)
    except RuntimeError as err:
        raise ValueError(f"the model's outputs have no gradient with respect to its input "
                         f"(MM5 needs one): {_reason(err)}") from None
    if not torch.isfinite(grad).all():
        raise ValueError("the model's input gradient is NaN or infinite on ID test images")


# ------------------------------------------------------------------ the scale's data
def _workflow_file(config: dict, shift: str) -> Path:
    return Path(paths.oodrb_data(plan.dataset(config), shift))


def _fits_config(config: dict, shift: str, d: dict, data: dict | None) -> bool:
    """Whether a workflow data file matches what the config asks for (sizes, severities, the ID
    labels of a corruption's source images): else it is stale and built anew."""
    o = config["oodrb"]
    if shift == "id":
        return ({"test_x", "test_y", "train_y"} <= set(d)
                and (o["n_test"] is None or len(d["test_y"]) == o["n_test"]))
    if not {"x", "y", "severities", "source"} <= set(d):
        return False
    if d["x"].shape[-3:] != data["test_x"].shape[-3:]:
        return False
    if plan.is_corruption(config, shift):
        if list(d["severities"]) != list(o["severities"]):
            return False
        if o["corruption_source"] == "published":
            return True
        n = len(data["test_y"]) if o["n_shift"] is None else min(o["n_shift"], len(data["test_y"]))
        src = d["source"]
        return (len(d["y"]) == n and (src >= 0).all() and (src < len(data["test_y"])).all()
                and bool((data["test_y"][src] == d["y"]).all()))
    return o["n_natural"] is None or len(d["y"]) == o["n_natural"]


def _cached(config: dict, shift: str, data: dict | None = None) -> Path | None:
    from pabench.core.io import load_npz

    path = _workflow_file(config, shift)
    if not path.is_file():
        return None
    try:
        d = load_npz(path)
    except ValueError:
        return None
    return path if _fits_config(config, shift, d, data) else None


def id_split(config: dict, fresh: bool = False) -> tuple[dict, str]:
    """The ID test split (and the training labels, for the class count): the workflow's file
    where it fits the config, else built; and where it came from."""
    from pabench.core.io import load_npz
    from pabench.experiments.oodrb import compute

    path = None if fresh else _cached(config, "id")
    if path is not None:
        return load_npz(path, ["test_x", "test_y", "train_y"], only=True), str(path)
    d = compute.id_data(config["oodrb"])
    return {k: d[k] for k in ("test_x", "test_y", "train_y")}, "built"


def shift_sets(config: dict, data: dict, folder, fresh: bool = False) -> dict[str, str]:
    """Every dataset shift's file (the workflow's where it fits the config, else built into
    `folder`), in the config's order."""
    from tqdm.auto import tqdm

    from pabench.experiments.oodrb import compute

    o, files, built = config["oodrb"], {}, []
    for shift in tqdm(plan.shifts(config), desc="dataset shift data", unit="shift"):
        path = None if fresh else _cached(config, shift, data)
        if path is None:
            arrays = (compute.corruption_data(o, shift, data["test_x"], data["test_y"])
                      if plan.is_corruption(config, shift) else compute.natural_data(o, shift))
            path = Path(folder) / f"{shift}.npz"
            np.savez(path, **arrays)
            built.append(shift)
        files[shift] = str(path)
    log.info("dataset shift data: %d read from %s, %d built%s", len(files) - len(built),
             _workflow_file(config, "id").parent, len(built),
             f" ({', '.join(built)})" if built else "")
    return files


# ------------------------------------------------------------------ evaluation
def evaluate(config: dict, name: str, model, data: dict, shift_files: dict, device) -> pd.DataFrame:
    """The model's tidy rows: ID and every dataset shift, then every threat shift, attacked as
    the workflow attacks the zoo (oodrb.split_shifts: one shift at a time, else every shifted
    image in one MM5 call); the workflow's columns, method "user"."""
    from tqdm.auto import tqdm

    from pabench.experiments.oodrb import compute
    from pabench.metrics.settings import PASettings

    pa = PASettings.from_config(config["pa"]["adam"], config["oodrb"]["pa_epochs"])
    scored = None
    if plan.split_shifts(config):
        clean = compute.logits(model, data["test_x"], device)
        scored = [compute.shift_scores(config, name, model, clean, {shift: path}, pa, device)
                  for shift, path in tqdm(shift_files.items(), desc="dataset shifts (MM5, PA)",
                                          unit="shift")]
        log.info("ID: MM5 on %d images", len(data["test_y"]))
    else:
        log.info("ID and %d dataset shifts: MM5 and PA in one pass", len(shift_files))
    # the shift files also name each corruption's originals (its matched clean numbers)
    table, predictions = compute.shifts(config, name, model, data, shift_files, pa, device, scored)
    log.info("threat shifts: %s", ", ".join(plan.threats(config)) or "none")
    threats = compute.threats(config, name, model, data, pa, device,
                              compute.id_flags(predictions)).assign(
        degenerate=bool(table.degenerate.iloc[0]))
    rows = pd.concat([table, threats], ignore_index=True)
    return rows.assign(model=name, method=METHOD, adversarial=True, arch="", epochs=np.nan,
                       augment="", trades_beta=np.nan)


def planned(config: dict) -> pd.DataFrame:
    """The non-ID rows the config's scale evaluates: (shift, family, severity, threat eps)."""
    rows = [{"shift": s, "family": "corruption" if plan.is_corruption(config, s) else "natural",
             "severity": sev}
            for s in plan.shifts(config)
            for sev in (config["oodrb"]["severities"] if plan.is_corruption(config, s) else [0])]
    rows += [{"shift": s, "family": "threat", "severity": 0, "eps": t["eps"]}
             for s, t in plan.threats(config).items()]
    return pd.DataFrame(rows, columns=["shift", "family", "severity", "eps"])


def zoo_mismatch(zoo: pd.DataFrame, rows: pd.DataFrame) -> str:
    """How the zoo's shifts differ from those of `rows` (`planned`, or a run's rows; "" when
    they are the same): lines fitted on other shifts say nothing about this OOD_d or OOD_t."""
    def keys(t):
        t = t[t.family != "id"]
        return set(zip(t["shift"], t.family, t.severity.astype(int)))

    def eps(t):
        t = t[t.family == "threat"]
        return (dict(zip(t["shift"], t.eps.astype(float))) if "eps" in t.columns else {})

    only_zoo = sorted(keys(zoo) - keys(rows))
    only_here = sorted(keys(rows) - keys(zoo))
    parts = []
    if only_zoo:
        parts.append(f"the zoo has {_list(only_zoo)} that this run does not")
    if only_here:
        parts.append(f"this run has {_list(only_here)} that the zoo does not")
    zoo_eps, here_eps = eps(zoo.drop_duplicates("shift")), eps(rows)
    differ = [s for s in here_eps if s in zoo_eps
              and not math.isclose(zoo_eps[s], here_eps[s], rel_tol=1e-9)]
    if differ:
        parts.append("threat radius differs: " + ", ".join(
            f"{s} {zoo_eps[s]:g} (zoo) vs {here_eps[s]:g}" for s in differ))
    return "; ".join(parts)


def _list(keys) -> str:
    shown = [f"{s}@{sev}" if fam == "corruption" else s for s, fam, sev in keys[:4]]
    return ", ".join(shown) + (f" and {len(keys) - 4} more" if len(keys) > 4 else "")


def zoo_lines(zoo: pd.DataFrame | None) -> pd.DataFrame:
    """The zoo's fitted lines ID -> OOD (accuracy and robustness, AT models, the paper's filter)
    per target: every shift and R_c, R_n, OOD_d, OOD_t."""
    if zoo is None:
        return pd.DataFrame(columns=["target", "pair", "slope", "intercept", "r2", "n"])
    return A.fits(zoo, pairs=("acc-acc", "rob-rob"), groups=(GROUP,))


def _predicted(lines: pd.DataFrame, target: str, pair: str, x: float) -> tuple[float, float, int]:
    """The zoo's line of `target` at ID value x, its R^2 and its number of models."""
    hit = lines[(lines.target == target) & (lines.pair == pair)]
    if hit.empty:
        return np.nan, np.nan, 0
    line = hit.iloc[0]
    return float(line.slope * x + line.intercept), float(line.r2), int(line.n)


def summarize(rows: pd.DataFrame, lines: pd.DataFrame) -> pd.DataFrame:
    """A row per shift (ID first; corruptions averaged over their severities), then the summary
    (ID, R_c, R_n, OOD_d, OOD_t, OOD): accuracy and robustness (percent), mean log PA, and where
    the zoo has a line, its prediction at the model's ID value and the effective accuracy and
    robustness (the model's value minus that prediction; Eq. 5)."""
    agg = A.aggregate(rows).iloc[0]
    ps = A.per_shift(rows)
    n = rows.groupby("shift")["n"].first()

    def row(section, name, family, acc, rob, log_pa, severities=np.nan, images=np.nan):
        out = {"section": section, "name": name, "label": A.label(name), "family": family,
               "severities": severities, "n": images, "accuracy": acc, "robustness": rob,
               "log_pa": log_pa}
        for metric, pair, value, x in (("accuracy", "acc-acc", acc, agg.id_acc),
                                       ("robustness", "rob-rob", rob, agg.id_rob)):
            predicted, r2, fitted = _predicted(lines, name, pair, x)
            out[f"zoo_{metric}"] = predicted
            out[f"effective_{metric}"] = value - predicted
            out[f"zoo_fit_r2_{metric}"] = r2
            out[f"zoo_fit_n_{metric}"] = fitted
        return out

    out = [row("shift", "id", "id", agg.id_acc, agg.id_rob, agg.id_log_pa, 1, n.get("id"))]
    for r in ps.itertuples():
        out.append(row("shift", r.shift, r.family, r.accuracy, r.robustness, r.log_pa,
                       r.severities, n.get(r.shift)))
    out.append(row("summary", "ID", "id", agg.id_acc, agg.id_rob, agg.id_log_pa))
    out.append(row("summary", "R_c", "corruption", agg.rc_acc, agg.rc_rob,
                   agg.corruption_log_pa))
    out.append(row("summary", "R_n", "natural", agg.rn_acc, agg.rn_rob, np.nan))
    out.append(row("summary", "OOD_d", "dataset", agg.oodd_acc, agg.oodd_rob, np.nan))
    out.append(row("summary", "OOD_t", "threat", np.nan, agg.oodt_rob, agg.threat_log_pa))
    out.append(row("summary", "OOD", "all", agg.ood_acc, agg.ood_rob, np.nan))
    table = pd.DataFrame(out)
    for metric in ("accuracy", "robustness"):   # the ID rows are the lines' inputs, not targets
        idx = table.family == "id"
        table.loc[idx, [f"zoo_{metric}", f"effective_{metric}"]] = np.nan
    return table


def benchmark(model, *, name: str | None = None, config: dict | None = None, configfiles=(),
              zoo=None, out=None, device=None, arch: str | None = None,
              arch_kwargs: dict | None = None, fresh_data: bool = False) -> Report:
    """Benchmark `model` (a model file, see pabench.core.modelfile, or an nn.Module that takes
    (N, 3, H, W) images in [0, 1] and returns logits) on the scale of `config` (default:
    config.yaml with `configfiles` laid over it).  zoo: a finished workflow run's stacked shifts
    table (default data/results/oodrb/shifts.csv, left out with a note when absent; a path given
    must exist).  out: a folder for the outputs (`write`); None writes nothing."""
    from pabench.core.modelfile import load_model
    from pabench.experiments.oodrb import compute
    from pabench.training.loop import resolve_device

    # Everything cheap first: a bad input stops here, before any data set or attack.
    config = load_config(configfiles) if config is None else config
    if isinstance(model, (str, Path)):
        name = check_name(name or re.sub(r"[^A-Za-z0-9._+-]", "_", Path(model).stem).lstrip("._+-")
                          or "model")
    else:
        name = check_name(name or type(model).__name__)
    notes = []
    zoo_path = Path(zoo) if zoo is not None else Path(ZOO_TABLE)
    zoo_table = read_zoo(zoo_path) if zoo is not None or zoo_path.is_file() else None
    if zoo_table is None:
        notes.append(NOTE_NO_ZOO.format(path=zoo_path))
    elif zoo_mismatch(zoo_table, planned(config)):
        notes.append(f"the zoo table {zoo_path} was run on other shifts ("
                     f"{zoo_mismatch(zoo_table, planned(config))}): effective robustness and the "
                     "zoo are left out")
        zoo_table = None
    device = resolve_device(device or config["oodrb"]["device"])
    data, source = id_split(config, fresh_data)
    classes = compute.num_classes(data)
    if isinstance(model, (str, Path)):
        model = load_model(model, arch, arch_kwargs, device, num_classes=classes,
                           image_size=data["test_x"].shape[-1])
    else:
        model = model.to(device).eval()
    check_model(model, data["test_x"], classes, device)
    log.info("%s: takes %s images, returns %d classes; ID split %s", name,
             tuple(data["test_x"].shape[1:]), classes, source)
    if plan.skip_note(config):
        notes.append(plan.skip_note(config))
    for note in notes:
        log.warning("note: %s", note)

    with tempfile.TemporaryDirectory(prefix="pabench-oodrb-") as folder:
        shift_files = shift_sets(config, data, folder, fresh_data)
        rows = evaluate(config, name, model, data, shift_files, device)
    if rows.degenerate.any():
        notes.append(f"{name} is near chance on its ID test images, or its PA is at beta* = 0 "
                     "in every view (pabench.reporting.degenerate): its numbers are no evidence")
        log.warning("note: %s", notes[-1])
    lines = zoo_lines(zoo_table)
    o = config["oodrb"]
    meta = {"dataset": o["dataset"], "ID images": len(data["test_y"]),
            "eps": o["eps"], "MM5": f"{o['mm5']['n_targets']} targets x {o['mm5']['steps']} steps",
            "PA": f"exact; adam {o['pa_epochs']} epochs",
            "zoo": (f"{zoo_path}: {zoo_table.model.nunique()} models, lines on the {GROUP} models"
                    if zoo_table is not None else "none")}
    report = Report(name, rows, summarize(rows, lines), zoo_table, lines, notes, meta)
    if out is not None:
        write(report, out)
    return report


# ------------------------------------------------------------------ outputs
def output_paths(out, name: str) -> dict[str, Path]:
    base = f"oodrb_{name}"
    files = {"csv": ".csv", "md": ".md", "rows": "_rows.csv", "pdf": ".pdf", "png": ".png",
             "figure_csv": "_figure.csv"}
    return {k: Path(out) / f"{base}{suffix}" for k, suffix in files.items()}


def markdown(report: Report) -> str:
    from pabench.reporting.tables import to_markdown

    def view(frame):
        cols = ["label", "family", "accuracy", "robustness", "log_pa", "zoo_robustness",
                "effective_accuracy", "effective_robustness"]
        return frame[cols].rename(columns={"label": "shift", "log_pa": "log PA",
                                           "zoo_robustness": "zoo line (robustness)",
                                           "effective_accuracy": "effective accuracy",
                                           "effective_robustness": "effective robustness"})

    t = report.table
    details = "; ".join(f"{k}: {v}" for k, v in report.meta.items())
    notes = "".join(f"- {n}\n" for n in report.notes)
    return (f"# {report.name} on OODRobustBench\n\n{details}\n\n" + (notes + "\n" if notes else "")
            + "## Summary\n\n"
            + to_markdown(view(t[t.section == "summary"]),
                          "Accuracy and robustness in percent (MM5 at eps on ID and the dataset "
                          "shifts; each threat's own attack); effective = the model's value minus "
                          f"the zoo's line at its ID value ({GROUP} models).")
            + "\n## Per shift\n\n"
            + to_markdown(view(t[t.section == "shift"]),
                          "Corruptions averaged over their severities. log PA: clean against "
                          "shifted logits (ID and threats: against the adversarial logits); none "
                          "for natural shifts, which have no clean originals."))


# ------------------------------------------------------------------ the figure
SCATTERS = (("OOD_d robustness", "id_rob", "oodd_rob", "OOD_d", "robustness"),
            ("OOD_t robustness", "id_rob", "oodt_rob", "OOD_t", "robustness"),
            ("OOD_d accuracy", "id_acc", "oodd_acc", "OOD_d", "accuracy"))


def _scatter(ax, report: Report, zoo_agg, kept, panel, legend: bool) -> pd.DataFrame:
    """One ID -> OOD panel: the zoo by training method (hollow: not fitted), its line, y = x and
    the model as a red star; returns the plotted points."""
    from pabench.experiments.oodrb import figures as F

    title, xc, yc, target, metric = panel
    me = A.aggregate(report.rows).iloc[0]
    zoo = (zoo_agg[["model", "method", xc, yc]].dropna() if zoo_agg is not None
           else pd.DataFrame(columns=["model", "method", xc, yc]))
    lo, hi = F.square_limits(ax, [me[xc], me[yc], *zoo[xc], *zoo[yc]])
    ax.plot([lo, hi], [lo, hi], color="0.6", ls="--", lw=0.8, label="y = x")
    line = report.lines[(report.lines.target == target)
                        & (report.lines.pair == ("rob-rob" if metric == "robustness" else "acc-acc"))]
    if len(zoo):
        if len(line):
            F.draw_line(ax, line.iloc[0], lo, hi, label=f"zoo line ({GROUP} models)")
        F.scatter_methods(ax, zoo, xc, yc, legend=legend, fitted=zoo.model.isin(kept))
    ax.scatter([me[xc]], [me[yc]], marker="*", s=170, color="red", edgecolors="k", lw=0.6,
               zorder=5, label=report.name)
    eff = report.table[(report.table.section == "summary") & (report.table.name == target)]
    eff = eff[f"effective_{metric}"].iloc[0] if len(eff) else np.nan
    sub = (f"effective {metric} {eff:+.1f} points (R^2 {F.format_r2(line.r2.iloc[0])}, n = "
           f"{int(line.n.iloc[0])})" if np.isfinite(eff) and len(line) else "no zoo line")
    ax.set_title(f"{title}\n{sub}", fontsize=8)
    ax.set(xlabel=f"ID {metric} (%)", ylabel=f"{title} (%)", aspect="equal")
    points = zoo.assign(source="zoo", in_fit=zoo.model.isin(kept))
    points = pd.concat([points, pd.DataFrame([{"model": report.name, "method": METHOD, xc: me[xc],
                                               yc: me[yc], "source": "user", "in_fit": False}])],
                       ignore_index=True)
    return pd.DataFrame({"panel": title, "model": points.model, "method": points.method,
                         "source": points.source, "in_fit": points.in_fit, "x": points[xc],
                         "y": points[yc]})


OUTSIDE = {"fontsize": 7, "loc": "upper left", "bbox_to_anchor": (1.005, 1.0)}


def _family_breaks(ax, families) -> None:
    for k in range(1, len(families)):
        if families[k] != families[k - 1]:
            ax.axvline(k - 0.5, color="0.8", lw=0.8)


def draw(report: Report):
    """The one-page figure: the model among the zoo (ID against OOD_d and OOD_t robustness and
    OOD_d accuracy, with the zoo's lines), its accuracy and robustness per shift against the
    zoo's line at its ID values, and its log PA per shift against the zoo's.  Returns the figure
    and its plotted numbers."""
    from pabench.reporting.plotting import plt

    zoo_agg = A.aggregate(report.zoo) if report.zoo is not None else None
    kept = A.fit_models(zoo_agg, GROUP)[0] if zoo_agg is not None else []
    fig = plt.figure(figsize=(11.0, 8.5))
    grid = fig.add_gridspec(3, 3, height_ratios=[1.4, 1, 1], hspace=0.75, wspace=0.3,
                            left=0.07, right=0.83, top=0.95, bottom=0.1)
    data = [_scatter(fig.add_subplot(grid[0, k]), report, zoo_agg, kept, panel, legend=k == 0)
            for k, panel in enumerate(SCATTERS)]
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.axes[2].legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.04, 0.5))

    t = report.table[report.table.section == "shift"].reset_index(drop=True)
    pos = np.arange(len(t))
    ax = fig.add_subplot(grid[1, :])
    ax.bar(pos - 0.2, t.accuracy, 0.4, color="0.7", label="accuracy")
    ax.bar(pos + 0.2, t.robustness, 0.4, color="C3",
           label="robustness (MM5 at eps;\na threat shift: its own attack)")
    if report.zoo is not None:
        ax.scatter(pos - 0.2, t.zoo_accuracy, marker="_", s=140, color="k", lw=1.5,
                   label="the zoo's line at the\nmodel's ID value")
        ax.scatter(pos + 0.2, t.zoo_robustness, marker="_", s=140, color="k", lw=1.5)
    _family_breaks(ax, list(t.family))
    ax.set_xticks(pos, t.label, rotation=60, ha="right", fontsize=7)
    ax.set(ylabel="percent", ylim=(0, 105), xlim=(-0.6, len(t) - 0.4))
    ax.set_title(f"{report.name}: accuracy and robustness per shift (corruptions: mean over "
                 "severities)", fontsize=8)
    ax.legend(**OUTSIDE)

    ax = fig.add_subplot(grid[2, :])
    ax.bar(pos, t.log_pa, 0.5, color="C4", label=report.name)
    zoo_pa = _zoo_log_pa(report.zoo, list(t.name))
    if zoo_pa is not None:
        ax.errorbar(pos, zoo_pa["median"], yerr=[zoo_pa["median"] - zoo_pa["min"],
                                                 zoo_pa["max"] - zoo_pa["median"]],
                    fmt="o", ms=3, color="k", lw=0.8, capsize=2, label="zoo: median\nand range")
    for k in np.flatnonzero(t.log_pa.isna().to_numpy()):
        ax.text(pos[k], 0, "no clean\npair", ha="center", va="top", fontsize=5, color="0.4")
    _family_breaks(ax, list(t.family))
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_xticks(pos, t.label, rotation=60, ha="right", fontsize=7)
    ax.set(ylabel="log PA (nats, symlog)", xlim=(-0.6, len(t) - 0.4))
    ax.set_title("log PA, clean against shifted logits (ID and threats: against adversarial "
                 "ones)", fontsize=8)
    ax.legend(**OUTSIDE)
    bars = t[["name", "family", "accuracy", "robustness", "log_pa", "zoo_accuracy",
              "zoo_robustness"]].assign(panel="per shift")
    if zoo_pa is not None:
        bars = bars.assign(zoo_log_pa_median=zoo_pa["median"].to_numpy(),
                           zoo_log_pa_min=zoo_pa["min"].to_numpy(),
                           zoo_log_pa_max=zoo_pa["max"].to_numpy())
    return fig, pd.concat([*data, bars], ignore_index=True)


def _zoo_log_pa(zoo: pd.DataFrame | None, names: list[str]) -> pd.DataFrame | None:
    """Per shift (in `names`' order), the median, minimum and maximum over the zoo's models of
    their mean log PA."""
    if zoo is None:
        return None
    per_model = zoo.groupby(["shift", "model"]).log_pa.mean().groupby("shift")
    stats = pd.DataFrame({"median": per_model.median(), "min": per_model.min(),
                          "max": per_model.max()})
    return stats.reindex(names)


def write(report: Report, out) -> dict[str, Path]:
    """The table (CSV, Markdown), the tidy rows and the figure (pdf, png and its numbers)."""
    from pabench.core.io import write_csv, write_text
    from pabench.reporting.plotting import save_figure

    from pabench.reporting.plotting import plt

    where = output_paths(out, report.name)
    # the workflow's figure style where the repository has it (its savefig.bbox keeps the
    # provenance footnote on the page)
    style = [s for s in (Path(STYLE), Path(__file__).parents[4] / STYLE) if s.is_file()]
    with plt.style.context([str(style[0])] if style else {"savefig.bbox": "tight"}):
        fig, data = draw(report)   # drawn before any file is written
        write_csv(where["csv"], report.table)
        write_text(where["md"], markdown(report))
        write_csv(where["rows"], report.rows)
        caption = (f"{report.name} on OODRobustBench's shifts: ID against OOD with the zoo's "
                   "lines (effective = distance above the line), accuracy, robustness and log PA "
                   "per shift." + "".join(f" Note: {n}." for n in report.notes))
        save_figure(fig, where["pdf"], where["png"], where["figure_csv"], data, caption,
                    {"scale": report.meta.get("dataset", ""), **report.meta,
                     **({"notes": "; ".join(report.notes)} if report.notes else {})})
    return where
