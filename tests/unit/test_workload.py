"""The paper-scale workload (pabench.tools.workload) follows the config: attack steps, training epochs,
MC samples and corruption images counted from models, eps, steps, images and epochs, and the
wall-time schedule of the compute estimate."""
import copy

import pytest
import yaml

from conftest import REPO, scale_config
from pabench.tools import workload
from pabench.core.config import load

PAPER = load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])


def units(config, experiment, unit, job_prefix=""):
    return sum(w.units for w in workload.work(config)
               if w.experiment == experiment and w.unit == unit and w.job.startswith(job_prefix))


def changed(**paths):
    """A copy of the paper config with dotted keys replaced."""
    config = copy.deepcopy(PAPER)
    for path, value in paths.items():
        *parents, key = path.split("__")
        node = config
        for p in parents:
            node = node[p]
        node[key] = value
    return config


def test_pgd_steps_are_models_times_eps_times_steps_times_images():
    a = PAPER["adversarial"]
    models = len(a["zoo"]["models"]) * len(a["zoo"]["seeds"]) + len(a["robustbench"])
    expected = models * len(a["eps"]) * a["attacks"]["pgd"]["steps"] * a["n_test"]
    assert units(PAPER, "pa-adversarial", "attack step", "adv_attack cifar10/") > expected
    pgd = sum(w.units for w in workload.work(PAPER) if "/pgd/" in w.job)
    assert pgd == expected == (1 * 3 + 5) * 5 * 1000 * 10_000   # JPEG + RS x 3 seeds, 5 RobustBench
    double = changed(adversarial__n_test=a["n_test"] // 2)
    assert sum(w.units for w in workload.work(double) if "/pgd/" in w.job) == expected / 2


def test_a_new_robustbench_model_adds_its_attack_runs_and_fab_takes_a_jacobian():
    ids = [*PAPER["adversarial"]["robustbench"], "Carmon2019Unlabeled"]
    more = changed(adversarial__robustbench=ids)
    runs = lambda c: {w.job for w in workload.work(c) if w.rule == "adv_attack"}  # noqa: E731
    added = runs(more) - runs(PAPER)
    per_model = sum(len(PAPER["adversarial"]["eps"]) if a != "fmn" else 1
                    for a in PAPER["adversarial"]["use_attacks"])
    assert len(added) == per_model and all("/Carmon2019Unlabeled/" in j for j in added)
    fab = [w for w in workload.work(PAPER) if "/fab/" in w.job]
    assert fab and all(w.passes["bwd"] == w.net.classes * w.units == 10 * w.units for w in fab)


def test_training_epochs_follow_the_config():
    dg = PAPER["dg"]
    runs = len(dg["algorithms"]) * len(dg["seeds"])
    assert not dg["recalibrate_bn"]  # else every epoch also predicts the training images
    ms = len(dg["model_selection"]["algorithms"]) * len(dg["seeds"]) * 5
    fig11 = 2 * dg["fig11"]["epochs"]  # ERM and IRM, the first seed
    assert units(PAPER, "pa-dg", "training epoch") == (runs * dg["epochs"] + fig11
                                                       + ms * dg["model_selection"]["epochs"])
    erm = next(w for w in workload.work(PAPER) if w.job == "train_dg erm/0")
    assert erm.passes["train:dg:erm"] == dg["epochs"] * 2 * 40_000  # 2 environments x 40,000
    assert erm.net.shape == (3, 128, 128) and erm.net.arch == "resnet50"
    longer = next(w for w in workload.work(changed(dg__epochs=2 * dg["epochs"]))
                  if w.job == "train_dg erm/0")
    assert longer.units == 2 * dg["epochs"]


def test_lazy_regularisation_penalises_one_step_in_k():
    def passes(config, job):
        return next(w for w in workload.work(config) if w.job == job).passes

    job = "avg_train cifar10/resnet18-lam0.01/0"
    epochs, bs = PAPER["avgcase"]["train"]["epochs"], PAPER["avgcase"]["train"]["batch_size"]
    steps = 50_000 // bs
    assert passes(PAPER, job) == {"train:avg:grad": epochs * steps * bs,
                                  "fwd": epochs * (1024 + 10_000)}
    lazy = passes(changed(avgcase__train__penalty_every=4), job)
    penalised = epochs * -(-steps // 4) * bs
    assert lazy["train:avg:grad"] == penalised
    assert lazy["train:avg:plain"] == epochs * steps * bs - penalised
    plain = passes(changed(avgcase__train__penalty_every=4), "avg_train cifar10/resnet18-lam0/0")
    assert "train:avg:grad" not in plain   # lambda = 0: no penalty to make lazy


def test_mc_samples_are_sigmas_times_points_times_n():
    s = PAPER["avgcase"]
    per_sigma = [w.units for w in workload.work(PAPER)      # split_sigmas: a job per sigma
                 if w.job.startswith(f"avg_estimates_sigma {s['main']}/0/") and w.unit == "MC sample"]
    assert per_sigma == [s["n_points"] * s["mc"]["n"]] * len(s["sigmas"])
    unsplit = changed(avgcase__split_sigmas=False)
    one = [w.units for w in workload.work(unsplit)
           if w.job == f"avg_estimates {s['main']}/0" and w.unit == "MC sample"]
    assert one == [sum(per_sigma)] == [7 * 10_000 * 10_000]
    assert not any(w.job.startswith("avg_estimates_sigma") for w in workload.work(unsplit))
    half = changed(avgcase__mc={**s["mc"], "n": s["mc"]["n"] // 2})
    assert (units(half, "avgcase", "MC sample", "avg_estimates")
            == units(PAPER, "avgcase", "MC sample", "avg_estimates") / 2)
    cifar100 = [w for w in workload.work(PAPER)
                if w.job.startswith("avg_estimates_sigma cifar100/resnet18-") and w.unit == "MMSE copy"]
    assert len(cifar100) == len(s["train"]["seeds"]) * len(s["sigmas"])
    assert all(w.net.classes == 100 for w in cifar100)


def test_corruptions_are_generated_only_with_our_generator():
    o = PAPER["oodrb"]
    assert o["corruption_source"] == "published"   # the paper's files
    assert units(PAPER, "oodrb", "corruption image") == 0
    generated = changed(oodrb__corruption_source="generator")
    assert units(generated, "oodrb", "corruption image") == len(o["corruptions"]) * 5 * o["n_shift"] \
        == 750_000
    # every model attacks the ID set, every corrupted and every natural image with MM5
    shifts = [w for w in workload.work(PAPER) if w.rule in ("oodrb_shifts", "oodrb_shift_scores")
              and w.job.split()[1].startswith("cifar10/")]   # the base setup
    # the RobustBench models of Table 1 and the published ST models (RobustBench's Standard is
    # a RobustBench architecture, the others zoo architectures); none is trained
    st = [m["published"] for m in o["zoo"]["models"]]
    assert {(w.net.source, w.net.arch) for w in shifts} == (
        {("robustbench", m) for m in o["robustbench"] + ["Standard"]}
        | {("zoo", m.split("/")[1]) for m in st if m.startswith("chenyaofo/")})
    assert units(PAPER, "oodrb", "training epoch") == 0
    images = o["n_test"] + 750_000 + sum(workload.NATURAL[s] for s in o["natural"])
    mm5 = o["mm5"]["n_targets"] * (o["mm5"]["steps"] + 1)
    assert sum(w.units for w in shifts) == (len(o["robustbench"]) + len(st)) * (
        images * mm5 + o["n_test"] * (2 * mm5 + 100 + 100 + 40 + 5 * 40))
    # L-inf, L2 by MM5; StAdv, ReColor 100 steps; PPGD 40; LPA up to 5 rounds of 40


def test_text_views_are_a_forward_pass_of_every_review_per_view():
    t = PAPER["text"]
    views = 1 + len(t["strategies"]) * len(t["powers"])   # the clean view and every shift
    assert units(PAPER, "pa-text", "forward", "text_logits") == views * workload.IMDB_TEST
    assert units(changed(text__n=1000), "pa-text", "forward") == views * 1000
    assert units(changed(text__powers=[0, 1]), "pa-text", "forward") == (
        (1 + 2 * len(t["strategies"])) * workload.IMDB_TEST)
    assert units(changed(text__enabled=False), "pa-text", "forward") == 0
    net = next(w.net for w in workload.work(PAPER) if w.experiment == "pa-text")
    assert net.shape == (t["max_length"],) and net.classes == 2


def test_every_built_setup_is_counted_with_its_own_models_norm_and_threats():
    """The L2 setup's RobustBench L2 models (MM5 under L2, its threats) under its tag; the
    ImageNet setup only once its folders are set; the shared CIFAR-10 shift files once."""
    o, l2 = PAPER["oodrb"], PAPER["oodrb"]["setups"]["l2"]
    jobs = {w.job for w in workload.work(PAPER) if w.experiment == "oodrb"}
    for model in l2["robustbench"]:
        assert f"oodrb_shifts l2/{model}" in jobs
    nets = {w.net for w in workload.work(PAPER) if w.job.startswith("oodrb_shifts l2/")}
    assert {n.threat for n in nets if n.source == "robustbench" and n.arch in l2["robustbench"]} \
        == {"L2"}
    assert not any(j.split()[1].startswith("imagenet/") for j in jobs)   # no folders: not built
    folders = changed(**{"oodrb__setups__imagenet__imagenet__folder": "/in", "oodrb__setups__"
                         "imagenet__imagenet__c_folder": "/in-c", "oodrb__setups__imagenet__"
                         "natural_folders": {n: "/x" for n in o["setups"]["imagenet"]["natural"]}})
    imagenet = [w for w in workload.work(folders) if w.job.startswith("oodrb_shifts imagenet/")]
    assert imagenet and all(w.net.shape == (3, 224, 224) and w.net.classes == 1000
                            for w in imagenet)
    generated = changed(oodrb__corruption_source="generator")
    made = [w.job for w in workload.work(generated) if w.unit == "corruption image"]
    assert len(made) == len(set(made)) == len(o["corruptions"])   # the base and L2 share them


def test_split_shifts_moves_each_shifts_attack_into_a_job_of_its_own():
    o = PAPER["oodrb"]
    assert o["split_shifts"]
    one = changed(oodrb__split_shifts=False)
    steps = {config_name: {} for config_name in ("split", "one")}
    for name, config in (("split", PAPER), ("one", one)):
        for w in workload.work(config):
            if w.rule in ("oodrb_shifts", "oodrb_shift_scores"):
                steps[name][w.job] = steps[name].get(w.job, 0) + w.units
    assert sum(steps["split"].values()) == sum(steps["one"].values())   # the same attack steps
    model = o["robustbench"][0]
    mm5 = o["mm5"]["n_targets"] * (o["mm5"]["steps"] + 1)
    assert steps["split"][f"oodrb_shift_scores cifar10/{model}/frost"] == 5 * o["n_shift"] * mm5
    assert steps["split"][f"oodrb_shift_scores cifar10/{model}/cifar10.1"] == 2_000 * mm5
    per_model = [j for j in steps["split"] if j.startswith(f"oodrb_shift_scores cifar10/{model}/")]
    assert len(per_model) == len(o["corruptions"]) + len(o["natural"])
    assert not any(j.startswith("oodrb_shift_scores") for j in steps["one"])


def test_every_gpu_rule_is_counted():
    """A new rule that asks for a GPU at paper scale must be counted (or named here, with why)."""
    not_counted = {"pa_fig11"}     # PCA of 128 validation images' features: seconds
    gpu_rules = {rule for rule, r in yaml.safe_load((REPO / "workflow/resources.yaml").read_text())
                 ["paper"].items() if r.get("gpu")}
    counted = {w.rule for config in (PAPER, changed(avgcase__split_sigmas=False),
                                     changed(adversarial__split_attacks=False), scale_config())
               for w in workload.work(config)}
    assert gpu_rules - counted == not_counted


def test_every_network_job_names_a_buildable_network():
    for w in workload.work(PAPER):
        assert (w.net is None) == (w.unit in ("corruption image", "rendered image")), w.job
        assert w.units > 0 and all(n >= 0 for n in w.passes.values()), w.job


@pytest.mark.parametrize("devices, expected", [(1, 10), (2, 5), (4, 4), (10, 4)])
def test_makespan_schedules_longest_jobs_first(devices, expected):
    assert workload.makespan([4, 3, 2, 1], devices) == expected


def test_job_totals_add_the_parts_of_a_job():
    assert workload.job_totals([("a", 1.0), ("b", 2.0), ("a", 3.0)]) == {"a": 4.0, "b": 2.0}
