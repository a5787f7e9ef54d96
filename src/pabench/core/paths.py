"""Every file the workflow writes, built and parsed in one place.

Rules build their inputs and outputs here (with Snakemake wildcards such as "{seed}" where a
field is left open), and scripts and figures turn a path back into its typed key here, so that no
other module knows how a path is spelled.  Keys are typed: an attack's eps travels as an `Eps`,
a training run as a `TrainRun`, never as a string to re-parse.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

FIGURE_EXT = (".pdf", ".png", ".csv")
TABLE_EXT = (".md", ".csv", ".tex", ".html")
MIN_NORM = "min"  # the eps tag of a minimum-norm attack (FMN): no bound


# ------------------------------------------------------------------ typed keys
def parse_eps(value) -> float:
    """An eps from the config: a number or a fraction string such as "8/255"; must lie in (0, 1]."""
    try:
        eps = float(Fraction(str(value).strip())) if isinstance(value, str) else float(value)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"eps {value!r} is not a number or a fraction like '8/255'") from None
    if not 0 < eps <= 1:
        raise ValueError(f"eps {value!r} is outside (0, 1] (images are in [0, 1])")
    return eps


@dataclass(frozen=True)
class Eps:
    """An attack's perturbation bound: its file-name tag ("8-255", "0.1", or "min" for the
    unbounded minimum-norm attack) and its value (None when unbounded)."""
    tag: str

    def __post_init__(self):
        if self.tag != MIN_NORM:
            parse_eps(self.tag.replace("-", "/"))  # refuse a tag that is no eps

    @classmethod
    def of(cls, value) -> Eps:
        """From the config's form: 0.3, "8/255" (or "min")."""
        if value == MIN_NORM:
            return cls(MIN_NORM)
        parse_eps(value)
        return cls(str(value).strip().replace("/", "-"))

    @property
    def value(self) -> float | None:
        return None if self.tag == MIN_NORM else parse_eps(self.tag.replace("-", "/"))

    @property
    def label(self) -> str:
        return "min-norm" if self.tag == MIN_NORM else f"eps = {self.tag.replace('-', '/')}"

    def __str__(self) -> str:
        return self.tag


UNBOUNDED = Eps(MIN_NORM)


@dataclass(frozen=True)
class TrainRun:
    """One domain-generalisation training run; setting is the model-selection co-occurrence
    setting (None for the shift-factor study)."""
    algorithm: str
    seed: int
    setting: str | None = None

    @property
    def tag(self) -> str:
        return f"{self.algorithm}-s{self.seed}"


@dataclass(frozen=True)
class AttackRun:
    """One attack run: a model of a dataset attacked with one attack at one eps; seed: the
    training seed of a self-trained (zoo) model, None for a pretrained one."""
    dataset: str
    model: str
    attack: str
    eps: Eps
    seed: int | None = None


def _tag(value) -> str:
    """A field as it stands in a path: typed keys by their tag, wildcards ("{eps}") as they are."""
    return value.tag if isinstance(value, Eps) else str(value)


def _parse(template: str, path: str) -> dict:
    """The fields of a path built from template (the inverse of str.format)."""
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+?)", re.escape(template))
    match = re.fullmatch(pattern, str(path))
    if not match:
        raise ValueError(f"{path!r} is not a path of the form {template!r}")
    return match.groupdict()


# ------------------------------------------------------------------ figures and tables
def figure_files(paper: str, name: str) -> dict:
    return {ext[1:]: f"figures/{paper}/{name}{ext}" for ext in FIGURE_EXT}


def table_files(paper: str, name: str) -> dict:
    return {ext[1:]: f"figures/{paper}/{name}{ext}" for ext in TABLE_EXT}


def check_files(name: str) -> dict:
    """The run-wide checks beside the papers: claims and timings."""
    return {ext[1:]: f"figures/{name}{ext}" for ext in (".md", ".csv", ".html")}


def log(rule: str, *fields) -> str:
    return f"data/logs/{rule}/{'-'.join(map(_tag, fields)) or rule}.log"


def benchmark(rule: str, *fields) -> str:
    return f"data/benchmarks/{rule}/{'-'.join(map(_tag, fields)) or rule}.tsv"


BENCHMARKS = "data/benchmarks"

# ------------------------------------------------------------------ toy examples
def toy_table(kind: str) -> str:
    return f"data/results/toy/{kind}.csv"


# ------------------------------------------------------------------ MNIST and DiagViB-6
MNIST_POOLS = "data/mnist/pools.npz"
SHIFT_RATIO_VIEWS = "data/diagvib/shift_factor/shift_ratio_views.json"
DIAGVIB_ASS = "data/results/diagvib/ass.csv"


def diagvib_split(study: str, split: str) -> str:
    """A rendered DiagViB-6 split (a directory)."""
    return f"data/diagvib/{study}/{split}"


# ------------------------------------------------------------------ domain generalisation
_MODEL_DIR = "data/models/{study}/{prefix}{algorithm}-s{seed}"
_DG_SCORES = "data/results/dg/scores/{algorithm}-s{seed}.npz"
DG_PA_TABLE = "data/results/dg/pa.csv"
MS_TABLE = "data/results/model_selection.csv"


FIG11 = "fig11"  # the setting of Figure 11's own training runs (Appendix D)


def selection_checkpoint(criterion: str, split: str | None = None) -> str:
    """A model-selection checkpoint's name in model_dir: "best_acc" / "best_pa" on the main
    validation split, "best_acc-<split>" on another one (Appendix E)."""
    return criterion if split is None else f"{criterion}-{split}"


def model_dir(run: TrainRun | None = None, algorithm="{algorithm}", seed="{seed}", setting=None) -> str:
    """The checkpoints of a training run: shift-factor study (setting None), Figure 11's runs
    (setting FIG11) or model selection (a co-occurrence setting)."""
    if run is not None:
        algorithm, seed, setting = run.algorithm, run.seed, run.setting
    if setting is None:
        study, prefix = "shift_factor", ""
    elif setting == FIG11:
        study, prefix = FIG11, ""
    else:
        study, prefix = "model_selection", f"{setting}/"
    return _MODEL_DIR.format(study=study, prefix=prefix, algorithm=algorithm, seed=seed)


def checkpoint(run: TrainRun, which: str) -> str:
    """best_acc, best_pa, last or epoch<k> of a run."""
    return f"{model_dir(run)}/{which}.pt"


_STAGE = f"data/models/{FIG11}/{{algorithm}}-s{{seed}}/{{which}}.pt"


def parse_checkpoint(path) -> tuple[TrainRun, str]:
    """The run and the checkpoint name (epoch3, last, ...) of a Figure 11 checkpoint."""
    f = _parse(_STAGE, path)
    return TrainRun(f["algorithm"], int(f["seed"]), FIG11), f["which"]


def dg_scores(algorithm="{algorithm}", seed="{seed}") -> str:
    return _DG_SCORES.format(algorithm=algorithm, seed=seed)


def parse_dg_scores(path) -> TrainRun:
    fields = _parse(_DG_SCORES, path)
    return TrainRun(fields["algorithm"], int(fields["seed"]))


def dg_pa(algorithm="{algorithm}", seed="{seed}") -> str:
    return f"data/results/dg/pa/{algorithm}-s{seed}.csv"


def ms_result(setting="{setting}", algorithm="{algorithm}", seed="{seed}") -> str:
    return f"data/results/model_selection/{setting}/{algorithm}-s{seed}.csv"


# ------------------------------------------------------------------ adversarial robustness
_ATTACK_RECORD = "data/adversarial/{dataset}/attacks/{model}/{attack}/{eps}.npz"
_ZOO_MODEL = "data/adversarial/{dataset}/models/{model}.pt"


def adv_run(model: str, seed=None) -> str:
    """The name a model's attack and score files go by: a zoo model's carries its training seed
    ("madry-s1"), a pretrained (RobustBench) model's is its id."""
    return model if seed is None else f"{model}-s{seed}"


def parse_adv_run(name: str) -> tuple[str, int | None]:
    """(model, seed) of adv_run's name (seed None: a pretrained model)."""
    match = re.fullmatch(r"(.+)-s(\d+)", name)
    return (match[1], int(match[2])) if match else (name, None)


def adv_split(dataset="{dataset}", split="{split}") -> str:
    return f"data/adversarial/{dataset}/{split}.npz"


def zoo_model(dataset, model="{adv_model}", seed="{seed}") -> str:
    return _ZOO_MODEL.format(dataset=dataset, model=adv_run(model, seed))


def zoo_history(dataset, model="{adv_model}", seed="{seed}") -> str:
    return zoo_model(dataset, model, seed)[:-len(".pt")] + ".csv"


def parse_zoo_history(path) -> tuple[str, int]:
    """(model, seed) of a zoo training history."""
    return parse_adv_run(_parse(_ZOO_MODEL[:-len(".pt")] + ".csv", path)["model"])


def attack_record(dataset="{dataset}", model="{adv_model}", attack="{attack}", eps="{eps}") -> str:
    """model: the run's name (adv_run)."""
    return _ATTACK_RECORD.format(dataset=dataset, model=model, attack=attack, eps=_tag(eps))


def record_of(run: AttackRun) -> str:
    return attack_record(run.dataset, adv_run(run.model, run.seed), run.attack, run.eps)


def parse_attack_record(path) -> AttackRun:
    f = _parse(_ATTACK_RECORD, path)
    model, seed = parse_adv_run(f["model"])
    return AttackRun(f["dataset"], model, f["attack"], Eps(f["eps"]), seed)


def adv_scores(dataset="{dataset}", model="{adv_model}", attack="{attack}") -> str:
    """PA / AFR of one model run (adv_run's name) under one attack, every eps and AR (rule
    adv_score)."""
    return f"data/results/adversarial/{dataset}/{model}/{attack}.csv"


def adv_table(dataset="{dataset}") -> str:
    """The tidy table of an adversarial dataset's experiment (every model, attack, eps, AR)."""
    return f"data/results/adversarial/{dataset}.csv"


# ------------------------------------------------------------------ average-case robustness
# A model is named "<arch>-lam<lambda>" (e.g. "cnn-lam0", "resnet18-lam0.01"): its architecture
# and gradient-norm weight; every file of a model is keyed by (dataset, model, training seed).
_AVG = "data/avgcase/{kind}/{dataset}/{model}-s{seed}{ext}"


@dataclass(frozen=True)
class AvgModel:
    dataset: str
    arch: str
    lam: float
    seed: int = 0

    @property
    def name(self) -> str:
        return f"{self.arch}-lam{self.lam:g}"


def avg_model_name(arch: str, lam) -> str:
    return AvgModel("", arch, float(lam)).name


def parse_avg_model(dataset: str, name: str, seed=0) -> AvgModel:
    arch, sep, lam = str(name).rpartition("-lam")
    if not sep or not arch:
        raise ValueError(f"{name!r} is not a model name of the form <arch>-lam<lambda>")
    return AvgModel(dataset, arch, float(lam), int(seed))


def avg_data(dataset="{dataset}") -> str:
    """The train/test images and labels of one dataset at this scale (rule avg_data)."""
    return f"data/avgcase/data/{dataset}.npz"


def avg_file(kind: str, dataset="{dataset}", model="{avg_model}", seed="{seed}") -> str:
    """One model's file of the given kind: "models" (.pt weights), "history" (training, .csv),
    "estimates", "noise_pa", "convergence", "case_study", "runtime" (.csv)."""
    ext = ".pt" if kind == "models" else ".csv"
    return _AVG.format(kind=kind, dataset=dataset, model=model, seed=seed, ext=ext)


def avg_sigma_file(dataset="{dataset}", model="{avg_model}", seed="{seed}",
                   sigma="{sigma_index}") -> str:
    """One model's estimates at one sigma, numbered by its place in avgcase.sigmas (rule
    avg_estimates_sigma, with avgcase.split_sigmas), stacked by its avg_estimates."""
    return f"data/avgcase/estimates_sigma/{dataset}/{model}-s{seed}/{sigma}.csv"


def parse_avg_file(path) -> tuple[str, AvgModel]:
    """(kind, model) of a file built by avg_file."""
    stem = str(path).rsplit(".", 1)[0]  # the extension, not a dot inside lambda
    fields = _parse(_AVG.replace("{ext}", ""), stem)
    return fields["kind"], parse_avg_model(fields["dataset"], fields["model"], fields["seed"])


def avg_table(kind: str) -> str:
    """A tidy table of every model's per-model files of one kind (rule avg_table), e.g.
    "history", "noise_pa", "convergence", "case_study", "runtime"."""
    return f"data/results/avgcase/{kind}.csv"


# ------------------------------------------------------------------ OODRobustBench
# Models are named freely in the config (oodrb.zoo.models) or are RobustBench ids; every file of a
# model is keyed by (dataset, model).
def oodrb_data(dataset="{dataset}", shift="{shift}") -> str:
    """One dataset's images at this scale: "id" (train and ID test split, rule oodrb_data), or
    one dataset shift (rule oodrb_shift): a corruption at every severity or a natural shift."""
    return f"data/oodrb/data/{dataset}/{shift}.npz"


def oodrb_file(kind: str, dataset="{dataset}", model="{oodrb_model}") -> str:
    """One model's file of the given kind: "models" (.pt weights), "history" (training),
    "shifts", "threats", "attacks", "attack_images", "predictions" (.csv)."""
    ext = ".pt" if kind == "models" else ".csv"
    return f"data/oodrb/{kind}/{dataset}/{model}{ext}"


def oodrb_shift_file(kind: str, dataset="{dataset}", model="{oodrb_model}", shift="{shift}") -> str:
    """One model's scores on one dataset shift (rule oodrb_shift_scores, with oodrb.split_shifts):
    "shift_scores" (a row per severity) or "shift_predictions" (per image, natural shifts)."""
    return f"data/oodrb/{kind}/{dataset}/{model}/{shift}.csv"


def oodrb_table(kind: str, setup: str | None = None) -> str:
    """A tidy table of every model's per-model files of one kind (rule oodrb_table): the base
    setup's (CIFAR-10 L-inf), or another setup's in its own folder (rule oodrb_setup_table)."""
    return f"data/results/oodrb/{kind}.csv" if setup is None else \
        f"data/results/oodrb/{setup}/{kind}.csv"


# ------------------------------------------------------------------ text shifts (PA paper, Appendix C)
# The IMDB test reviews scored (rule text_data), the classifier saved locally (rule text_model),
# one logits file per view: the clean reviews or one shift strategy at one power W (rule
# text_logits), and the tidy table of PA and accuracy per view (rule text_score).
TEXT_REVIEWS = "data/text/imdb_test.json"
TEXT_MODEL = "data/text/model"
TEXT_TABLE = "data/results/text/scores.csv"
_TEXT_LOGITS = "data/text/logits/{view}.npz"
CLEAN = "clean"


@dataclass(frozen=True)
class TextView:
    """The reviews one text_logits job scores: clean (strategy None) or shifted by `strategy`
    with 2^power replacements."""
    strategy: str | None = None
    power: int | None = None

    def __post_init__(self):
        if (self.strategy is None) != (self.power is None):
            raise ValueError("a text view has both a strategy and a power W, or neither (clean)")
        if self.strategy is not None and not re.fullmatch(r"[a-z]+", self.strategy):
            raise ValueError(f"text view strategy {self.strategy!r} is not a lowercase name")
        if self.power is not None and self.power < 0:
            raise ValueError(f"text view power W = {self.power} is negative")

    @property
    def tag(self) -> str:
        return CLEAN if self.strategy is None else f"{self.strategy}-w{self.power}"

    @classmethod
    def of(cls, tag: str) -> TextView:
        """From its tag: "clean" or "<strategy>-w<W>"."""
        if tag == CLEAN:
            return cls()
        match = re.fullmatch(r"([a-z]+)-w(\d+)", str(tag))
        if not match:
            raise ValueError(f"{tag!r} is not a text view tag ('clean' or '<strategy>-w<W>')")
        return cls(match[1], int(match[2]))


def text_logits(view="{view}") -> str:
    return _TEXT_LOGITS.format(view=view.tag if isinstance(view, TextView) else view)


def parse_text_logits(path) -> TextView:
    return TextView.of(_parse(_TEXT_LOGITS, path)["view"])
