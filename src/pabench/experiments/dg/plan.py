"""What the domain-generalisation experiments run, from the config: training runs of the
shift-factor study and of the model-selection study, and the settings each job reads.  No
PyTorch here, so planning the workflow stays fast."""
from __future__ import annotations

from pabench.core import paths
from pabench.core.paths import TrainRun
from pabench.metrics.settings import PASettings


def stage_epochs(epochs: int) -> list[int]:
    """Three training stages (Appendix D, Figure 11): the first, middle and last epoch."""
    return sorted({1, max(1, (epochs + 1) // 2), epochs})


def train_params(dg: dict, algorithm: str) -> dict:
    """The part of the config's `dg` section one training run reads: the shared settings and its
    own algorithm's section only, so that changing another algorithm's settings (or the seed
    list) does not rerun it."""
    shared = ("backbone", "pretrained", "recalibrate_bn", "epochs", "lr", "batch_size", "device")
    return {**{k: dg[k] for k in shared if k in dg}, **({algorithm: dg[algorithm]} if algorithm in dg else {})}


def runs(config: dict) -> list[TrainRun]:
    """The shift-factor study's training runs (Figure 7)."""
    dg = config["dg"]
    return [TrainRun(a, s) for a in dg["algorithms"] for s in dg["seeds"]]


def pca_algorithms(config: dict) -> list[str]:
    """The algorithms Figure 11 compares."""
    return [a for a in ("erm", "irm") if a in config["dg"]["algorithms"]]


def fig11_params(dg: dict, algorithm: str) -> dict:
    """Figure 11's own runs (Appendix D: ResNet-18, Adam lr 1e-2, 50 epochs): the shift-factor
    runs' settings with `dg.fig11`'s backbone, lr and epochs."""
    return {**train_params(dg, algorithm), **dg["fig11"]}


def stage_checkpoints(config: dict) -> list[str]:
    """Figure 11's checkpoints: its own run (first seed) of each compared algorithm at each stage."""
    dg = config["dg"]
    return [paths.checkpoint(TrainRun(a, dg["seeds"][0], paths.FIG11), f"epoch{e}")
            for a in pca_algorithms(config) for e in stage_epochs(dg["fig11"]["epochs"])]


def val_size(config: dict, study: str, split: str) -> int:
    """The validation images a training run is validated on: n per environment, every environment."""
    spec = config["diagvib"]["studies"][study]["splits"][split]
    return int(spec["n"]) * len(spec["envs"])


def ms_study(config: dict) -> dict:
    return config["diagvib"]["studies"]["model_selection"]


def ms_settings(config: dict) -> list[str]:
    """The co-occurrence settings: the model-selection study's training splits."""
    return [s for s, c in ms_study(config)["splits"].items() if c["pool"] == "train"]


def ms_runs(config: dict) -> list[TrainRun]:
    ms, seeds = config["dg"]["model_selection"], config["dg"]["seeds"]
    return [TrainRun(a, s, setting) for setting in ms_settings(config) for a in ms["algorithms"]
            for s in seeds]


def ms_also_validate(config: dict) -> list[str]:
    """The other validation splits each model-selection run also selects on (Appendix E)."""
    return list(config["dg"]["model_selection"].get("also_validate", []))


# The checkpoints a model-selection run keeps per validation split: the epoch of best accuracy
# and of best PA by each solver (exact, and adam as the paper).
MS_CRITERIA = ("best_acc", "best_pa", "best_pa_adam")
# The PA solvers of model selection and the checkpoint each selects with.
MS_SOLVERS = {"adam": "best_pa_adam", "exact": "best_pa"}


def ms_checkpoints(config: dict) -> dict:
    """{best_acc: path, best_pa: path, best_pa_adam: path, best_acc-<split>: path, ...}: the
    selected checkpoints of a model-selection run on the main and the other validation splits,
    {setting}, {algorithm} and {seed} left open."""
    d = paths.model_dir(setting="{setting}")
    names = [paths.selection_checkpoint(k, v) for v in [None, *ms_also_validate(config)] for k in MS_CRITERIA]
    return {name: f"{d}/{name}.pt" for name in names}


def ms_label(config: dict, setting: str) -> str:
    return ms_study(config)["splits"][setting].get("label", setting)


def pa_settings(config: dict) -> PASettings:
    return PASettings.from_config(config["pa"]["adam"], config["dg"]["pa_epochs"])


def threads(config: dict, workflow) -> int:
    """Training threads: the config's, or every core Snakemake was given (read only then:
    Snakemake refuses to report its cores to a command run without --cores, e.g. --unlock)."""
    return config["dg"].get("threads") or workflow.cores


# The lightness values along the paper's cumulative test ladders (Table 2; Table 1's Tests 1-5).
PAPER_LIGHTNESS = ["dark", "bright"]


def lightness_ladder(config: dict, study: str) -> list:
    """The lightness values of a study's test environments, in order and without repeats."""
    spec = config["diagvib"]["studies"][study]
    values = []
    for env in spec["splits"]["test"]["envs"]:
        value = spec["environments"][env]["lightness"]
        value = value if isinstance(value, str) else str(value)  # several values or per digit
        if value not in values:
            values.append(value)
    return values


def data_label(config: dict, study: str) -> str:
    """The data of a DG figure's caption, with the lightness shift where it is not the paper's."""
    ladder = lightness_ladder(config, study.replace("-", "_"))
    shift = "" if ladder == PAPER_LIGHTNESS else (
        f"; lightness shift {' -> '.join(ladder)}, paper: {' -> '.join(PAPER_LIGHTNESS)}")
    return (f"DiagViB-6 {study} study ({config['data']['mnist']['source']} digits, "
            f"{config['diagvib']['image_size']}px{shift})")


def train_outputs(config: dict, setting: str | None = None, stages: bool = False) -> dict:
    """The files of a training run, with {algorithm} and {seed} (and {setting}) left open:
    the best-accuracy, best-PA and last checkpoints, the history and, with stages (Figure 11's
    runs), the checkpoints of its three training stages."""
    d = paths.model_dir(setting=setting)
    out = {k: f"{d}/{k}.pt" for k in ("best_acc", "best_pa", "last")}
    out["history"] = f"{d}/history.csv"
    if stages:
        out["stages"] = [f"{d}/epoch{e}.pt" for e in stage_epochs(config["dg"]["fig11"]["epochs"])]
    return out
