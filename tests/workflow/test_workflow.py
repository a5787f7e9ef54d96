"""The Snakemake workflow, run for real at test scale, and its W&B runs read back."""
import re

import numpy as np

import pandas as pd
import pytest

from conftest import SECRET, TEST, planned_in, run_snakemake, scale_config
from pabench.papers import PAPERS
from pabench.runtime.tracking import offline_runs

PA = PAPERS["pa"].enabled(scale_config())
AVG = PAPERS["avgcase"].enabled(scale_config())
OODRB = PAPERS["oodrb"].enabled(scale_config())
THESIS = PAPERS["thesis"].enabled(scale_config())
FIGURES = [path for entry in PA + AVG + OODRB + THESIS for path in entry.outputs().values()]
GROUPS = {"toy_bernoulli": "toy", "toy_gaussian": "toy", "mnist_pools": "mnist",
          "diagvib_split": "diagvib", "diagvib_ass": "diagvib", "shift_ratio_views": "diagvib",
          "train_dg": "dg", "train_fig11": "dg", "dg_scores": "dg", "dg_pa": "dg", "dg_pa_table": "dg",
          "train_ms": "model_selection", "ms_eval": "model_selection", "ms_table": "model_selection",
          "adv_data": "adversarial", "adv_train": "adversarial", "adv_attack": "adversarial",
          "adv_score": "adversarial", "adv_table": "adversarial", "claims": "checks", "timings": "checks",
          **{rule: "avgcase" for rule in ("avg_data", "avg_train", "avg_estimates", "avg_estimates_sigma",
                                          "avg_noise_pa",
                                          "avg_convergence", "avg_case_study", "avg_runtime",
                                          "avg_linear_convergence", "avg_table")},
          **{rule: "oodrb" for rule in ("oodrb_data", "oodrb_shift", "oodrb_train", "oodrb_shifts",
                                        "oodrb_shift_scores", "oodrb_attacks", "oodrb_table")},
          **{entry.rule: entry.experiment for entry in PA + AVG + OODRB + THESIS}}

pytestmark = pytest.mark.workflow


def test_every_figure_is_built(ran):
    root, _ = ran
    # What the PA paper's registry builds at test scale (no ImageNet folder, no RobustBench).
    assert [e.name for e in PA] == ["fig1", "fig2", "fig3", "fig4", "fig5", "fig6", "fig7", "fig8",
                                    "fig9", "fig11", "fig12", "fig13", "fig14", "fig15", "fig16", "table1",
                                    "selection_splits", "table2", "table3", "models_mnist32"]
    for rel in FIGURES:
        path = root / rel
        assert path.is_file() and path.stat().st_size > 0, rel
    assert (root / "figures/pa/fig1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (root / "figures/pa/fig1.pdf").read_bytes()[:5] == b"%PDF-"


def test_figure_csv_holds_the_plotted_numbers(ran):
    root, _ = ran
    fig1 = pd.read_csv(root / "figures/pa/fig1.csv")
    table = pd.read_csv(root / "data/results/toy/bernoulli.csv")
    exact = table[table.solver == "exact"].groupby(["classifier", "p"]).pa.mean()
    plotted = fig1[(fig1.panel == "pa") & (fig1.solver == "exact")].set_index(["classifier", "p"])["mean"]
    pd.testing.assert_series_equal(plotted.sort_index(), exact.sort_index(), check_names=False)


def _jobs_run(output: str) -> int:
    """The total of Snakemake's job-stats table (rule all included)."""
    totals = re.findall(r"^total\s+(\d+)\s*$", output, flags=re.M)
    return int(totals[-1])


def test_each_job_logged_its_own_metrics_to_wandb(ran):
    root, proc = ran
    all_runs = offline_runs(root / "data/wandb")
    runs = {r["job_type"]: r for r in all_runs}
    assert set(runs) == set(GROUPS)
    assert len(all_runs) == _jobs_run(proc.stdout + proc.stderr) - 1  # every job but `all`
    for run in all_runs:
        job_type = run["job_type"]
        assert run["group"] == GROUPS[job_type] and run["project"] == "pabench"
        assert run["name"].startswith(job_type) and run["config"]["scale"] == "test"
        assert run["artifacts"], f"{job_type}: outputs not logged as an artifact"
    splits = sorted(r["name"] for r in all_runs if r["job_type"] == "diagvib_split")
    assert splits[-3:] == [f"diagvib_split-study=shift_factor-split={s}" for s in ("test", "train", "val")]

    ass = pd.read_csv(root / "data/results/diagvib/ass.csv")
    for env, value in zip(ass.env, ass.ass):
        assert runs["diagvib_ass"]["metrics"][f"ass/{env}"] == pytest.approx(value, rel=1e-9)
    assert runs["mnist_pools"]["metrics"]["test/size"] == 1000

    gauss = pd.read_csv(root / "data/results/toy/gaussian.csv")
    assert runs["toy_gaussian"]["metrics"]["beta_star"] == pytest.approx(gauss.beta_star.iloc[0], rel=1e-9)
    assert runs["toy_gaussian"]["config"]["settings"]["n_observations"] == 20

    bern = pd.read_csv(root / "data/results/toy/bernoulli.csv")
    random_exact = bern[(bern.classifier == "random") & (bern.solver == "exact")].pa.mean()
    assert runs["toy_bernoulli"]["metrics"]["random/exact/mean_pa"] == pytest.approx(random_exact, rel=1e-9)
    assert runs["toy_bernoulli"]["media"]["bernoulli"] == "table-file"

    history = pd.read_csv(root / "data/models/shift_factor/irm-s0/history.csv")
    irm = next(r for r in all_runs if r["name"] == "train_dg-algorithm=irm-seed=0")
    assert irm["metrics"]["val_logpa"] == pytest.approx(history.val_logpa.iloc[-1], rel=1e-9)
    assert irm["config"]["dg"]["backbone"] == "cnn"
    selection = pd.read_csv(root / "data/results/model_selection.csv")
    assert set(selection.validation) == {"ID", "SD", "1F-MD", "5F-MD", "OOD"}  # every split of Table 3
    assert set(selection.solver) == {"adam", "exact"}  # PA selection by each solver
    ms = next(r for r in all_runs if r["name"] == "ms_eval-setting=train_zgo-algorithm=irm-seed=0")
    for row in selection[(selection.setting == "ZGO") & (selection.env == "test_5")].itertuples():
        key = f"{row.validation}/{row.solver}/test_5/acc_best_pa"
        if row.pa_preference:  # a tied criterion selected nothing: no accuracy to log
            assert ms["metrics"][key] == pytest.approx(row.acc_best_pa)
        else:
            assert np.isnan(ms["metrics"].get(key, np.nan)) and np.isnan(row.acc_best_pa)
    assert selection.epochs.between(1, 2).all()  # the test scale's cap of 2 epochs
    table1 = pd.read_csv(root / "figures/pa/table1.csv")
    assert list(table1.setting) == [s for s in ["ZGO", "1-CGO", "2-CGO", "3-CGO", "ZSO"] for _ in range(2)]
    assert list(table1["PA solver"]) == ["adam", "exact"] * 5
    # The thesis's table, from the same runs: IRM's PA-selected (exact) epochs, by hand.
    thesis = pd.read_csv(root / "figures/thesis/target_accuracy.csv")
    assert list(thesis["selected by"]) == ["accuracy", "PA (adam)", "PA (exact)"] * 5
    for setting in ("ZGO", "ZSO"):
        pa = thesis[(thesis.setting == setting) & (thesis["selected by"] == "PA (exact)")].iloc[0]
        irm = selection[(selection.algorithm == "irm") & (selection.setting == setting)
                        & (selection.validation == "ID") & (selection.solver == "exact")]
        per_seed = [irm[irm.seed == seed].acc_best_pa.dropna() for seed in sorted(set(selection.seed))]
        chosen = [a for a in per_seed if len(a)]
        assert pa.seeds == len(per_seed) and pa["no preference"] == len(per_seed) - len(chosen)
        if not chosen:
            assert pd.isna(pa["average acc"])   # written "n/a", which pandas reads as missing
            continue
        assert len(chosen[0]) == 5
        assert float(pa["average acc"]) == pytest.approx(100 * np.mean([a.mean() for a in chosen]), abs=0.051)  # rounded to 0.1
        assert float(pa["worst-case acc"]) == pytest.approx(100 * np.mean([a.min() for a in chosen]), abs=0.051)
    assert "scale: test" in (root / "figures/thesis/target_accuracy.md").read_text()
    for fig in ("fig1", "fig2", "fig7", "fig8", "fig11", "fig12", "fig13"):
        assert runs[f"pa_{fig}"]["media"] == {f"{fig}_data": "table-file", fig: "image-file"}
        files = {f for art in runs[f"pa_{fig}"]["artifacts"] for f in art["files"]}
        assert {f"{fig}.pdf", f"{fig}.png", f"{fig}.csv"} <= files


def test_adversarial_results(ran):
    """The tidy table covers every (model, seed, attack, eps, AR); AR views are consistent; each
    attack run's W&B metrics match its record; the figures' CSVs hold the table's numbers."""
    from pabench.attacks.records import load_record

    root, _ = ran
    table = pd.read_csv(root / "data/results/adversarial/mnist32.csv")
    runs = {("pgd", "0.2"), ("fmn", "min"), ("apgd-ce", "0.2"), ("apgd-dlr", "0.2"), ("fab", "0.2")}
    seeds = scale_config()["adversarial"]["zoo"]["seeds"]
    assert set(zip(table.attack, table.eps.astype(str))) == runs
    assert set(table.model) == {"jpeg_rs"} and sorted(table.seed.unique()) == seeds == [0, 1]
    assert len(table) == len(runs) * 11 * len(seeds) and table.degenerate.dtype == bool
    zero = table[table.ar == 0]
    assert (zero.afr_pred == 1).all() and np.allclose(zero.afr_true, zero.clean_accuracy)
    # Each seed is its own training run: its own weights, so its own clean predictions.
    clean = [load_record(root / f"data/adversarial/mnist32/attacks/jpeg_rs-s{s}/pgd/0.2.npz")["clean_scores"]
             for s in seeds]
    assert not np.allclose(clean[0], clean[1])
    for (model, seed, attack, eps), group in table.groupby(["model", "seed", "attack", "eps"]):
        record = load_record(root / f"data/adversarial/mnist32/attacks/{model}-s{seed}/{attack}/{eps}.npz")
        labels = record["labels"]
        full = group[group.ar == 1].iloc[0]
        assert full.afr_true == pytest.approx((record["adv_scores"].argmax(1) == labels).mean())
        if eps != "min":
            assert record["linf"].max() <= float(eps) + 1e-6
        assert 0 <= record["adv"].min() and record["adv"].max() <= 1
    wb = [r for r in offline_runs(root / "data/wandb") if r["job_type"] == "adv_attack"]
    assert len(wb) == 5 * len(seeds)
    pgd = next(r for r in wb if r["name"] == "adv_attack-dataset=mnist32-adv_model=jpeg_rs-s1-attack=pgd-eps=0.2")
    record = load_record(root / "data/adversarial/mnist32/attacks/jpeg_rs-s1/pgd/0.2.npz")
    assert pgd["metrics"]["attack_success_rate"] == pytest.approx(record["success"].mean())
    # Figure 3 plots the mean over the seeds (their spread shaded).
    fig3 = pd.read_csv(root / "figures/pa/fig3.csv")
    pgd_mean = table[table.attack == "pgd"].groupby(["model", "ar"]).logpa_adam.mean()
    assert np.allclose(fig3.sort_values(["model", "ar"]).logpa_adam, pgd_mean.sort_index())
    assert (fig3.n_seeds == len(seeds)).all()
    assert (fig3.n_degenerate == table[table.attack == "pgd"].groupby(["model", "ar"]).degenerate.sum().values).all()
    models = pd.read_csv(root / "figures/pa/models_mnist32.csv")
    accuracy = table.groupby(["model", "seed"]).clean_accuracy.first()
    assert dict(zip(zip(models.model, models.seed), models["clean accuracy"])) == pytest.approx(
        accuracy.round(4).to_dict())


def test_avgcase_results(ran):
    root, _ = ran
    assert [e.name for e in AVG] == ["fig2a", "fig2b", "fig3", "fig4", "class_bias_other",
                                     "errors_by_model", "noisy_images", "fig10", "convergence",
                                     "linear_convergence", "noise_pa", "table1", "runtimes",
                                     "case_study", "models", "noise_pa_correlation", "errors"]
    cfg = scale_config()["avgcase"]
    models = pd.read_csv(root / "figures/avgcase/models.csv")
    # The MNIST models learn even at test scale (chance is 0.1); the test-scale ResNet (400
    # images, 1 epoch) does not, so only its pipeline is checked here, not its numbers.
    assert len(models) == 4 and (models[models.dataset == "mnist"]["test accuracy"] > 0.3).all()
    assert not models[models.dataset == "mnist"].degenerate.any()
    linear = pd.read_csv(root / "data/avgcase/estimates/mnist/linear-lam0-s0.csv")
    assert (linear.seed == 0).all() and not linear.degenerate.any()
    assert set(linear.estimator) == {"mc", "taylor", "taylor_mvs", "mmse", "mmse_mvs", "softmax",
                                     "linear"}
    assert linear.p.between(0, 1).all() and len(linear) == 7 * len(cfg["sigmas"]) * cfg["n_points"]
    wide = linear.pivot_table(index=["sigma", "point"], columns="estimator", values="p")
    np.testing.assert_allclose(wide.taylor, wide.linear, atol=1e-6)  # Lemma 1: exact if linear
    mc = linear[linear.estimator == "mc"]
    assert (mc.n >= 1).all() and (mc.n <= cfg["mc"]["n"]).all()
    noise = pd.read_csv(root / "data/results/avgcase/noise_pa.csv")
    assert len(noise) == 4 * len(cfg["sigmas"]) and np.isfinite(noise.logpa).all()
    runtime = pd.read_csv(root / "figures/avgcase/table1.csv")
    assert set(runtime.estimator) >= {"mc", "taylor", "mmse"}


def test_oodrb_results(ran):
    root, _ = ran
    cfg = scale_config()["oodrb"]
    assert {e.name for e in OODRB} >= {"table1", "fig1", "fig2", "fig3", "fig4", "fig5", "fig6",
                                       "table3", "grid", "pa_severity", "pa_ranking", "pa_predicts"}
    shifts = pd.read_csv(root / "data/results/oodrb/shifts.csv")
    models = [m["name"] for m in cfg["zoo"]["models"]]
    per_model = 1 + len(cfg["corruptions"]) * len(cfg["severities"]) + len(cfg["natural"]) + \
        len(cfg["threats"])
    assert sorted(shifts.model.unique()) == sorted(models) and len(shifts) == len(models) * per_model
    assert set(shifts[shifts.family == "threat"]["shift"]) == {"linf_1.5x", "stadv", "lpa"}
    # split_shifts (as at the paper scale): each model's shifts were scored by jobs of their own
    assert cfg["split_shifts"]
    for model in models:
        for shift in cfg["corruptions"] + cfg["natural"]:
            part = pd.read_csv(root / f"data/oodrb/shift_scores/mnist32/{model}/{shift}.csv")
            assert set(part["shift"]) == {shift}
            merged = shifts[(shifts.model == model) & (shifts["shift"] == shift)]
            np.testing.assert_allclose(merged.robustness, part.robustness)
    assert (shifts.robustness <= shifts.accuracy.fillna(1) + 1e-12).all()
    assert np.isfinite(shifts[shifts.family == "corruption"].log_pa).all()
    table1 = pd.read_csv(root / "figures/oodrb/table1.csv")
    assert sorted(table1.model) == sorted(models)
    # the leaderboard's ID robustness is the ID row's MM5 robustness of each model, in percent
    ids = shifts[shifts["shift"] == "id"].set_index("model").robustness * 100
    got = table1.set_index("model")["ID robustness (%)"]
    np.testing.assert_allclose(got.sort_index(), ids.sort_index().round(1), atol=0.051)
    attacks = pd.read_csv(root / "data/results/oodrb/attacks.csv")
    assert set(attacks.attack) == {"pgd", "cw", "aa", "mm5"} and set(attacks.model) == {"pgd-a"}
    # LPA ran through an untrained LPIPS network, and the caption says so
    assert "LPIPS alexnet_cifar with RANDOM weights" in (root / "figures/oodrb/table1.md").read_text()


def test_imagenet_figures_from_a_folder(ran, tmp_path):
    """Figures 17-18 are built only when an ImageNet folder is configured; here the 20 real
    ImageNet validation images that ship with foolbox, laid out as an ImageNet folder, a seeded
    12 of them attacked through the paper's code path: a RobustBench ImageNet architecture (untrained weights) alone
    and inside JPEG + RS."""
    from pabench.tools.rehearsal import write_imagenet

    root, _ = ran
    assert not (root / "figures/pa/fig17.pdf").exists()
    folder = tmp_path / "imagenet_val"
    write_imagenet(folder)
    labels = {int(d.name) for d in folder.iterdir()}   # foolbox's files carry their ImageNet class
    assert 243 in labels and 990 in labels
    (root / "imagenet.yaml").write_text(f"adversarial:\n  imagenet:\n    folder: {folder}\n")
    targets = [f"figures/pa/fig{k}.{ext}" for k in (17, 18) for ext in ("pdf", "csv")]
    targets.append("data/results/adversarial/imagenet.csv")
    # Targets first: --configfile takes every path that follows it.
    run_snakemake(root, *targets, "--cores", "2", *TEST, "imagenet.yaml")
    split = np.load(root / "data/adversarial/imagenet/test.npz")
    # a seeded subset of the folder, with the folders' ImageNet classes as labels
    assert split["images"].shape == (12, 3, 64, 64) and set(split["labels"]) <= labels
    assert len(set(split["labels"])) > 1
    models = {"Salman2020Do_R18", "jpeg_rs+Salman2020Do_R18"}
    fig17 = pd.read_csv(root / "figures/pa/fig17.csv")
    assert set(fig17.model) == models and set(fig17.eps.astype(str)) == {"8-255"}
    table = pd.read_csv(root / "data/results/adversarial/imagenet.csv")
    assert set(table.attack) == {"apgd-ce", "apgd-dlr-t"} and (table.n == 12).all()
    # untrained weights classify at chance: flagged as not evidence, never silently counted
    assert set(table.model) == models and table.degenerate.all()


def test_api_key_is_never_written(ran):
    root, _ = ran
    for path in root.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), f"API key leaked into {path}"


def test_second_run_has_nothing_to_do(ran):
    root, _ = ran
    proc = run_snakemake(root, "-n", *TEST)
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_lint_is_clean(workdir):
    proc = run_snakemake(workdir, "--lint")
    assert "Congratulations" in proc.stdout + proc.stderr


@pytest.mark.parametrize("overlay", [None, "workflow/config/test.yaml", "workflow/config/paper.yaml"])
def test_dry_run_at_every_scale(workdir, overlay):
    args = ["-n"] + (["--configfile", overlay] if overlay else [])
    proc = run_snakemake(workdir, *args)
    assert "fig1" in proc.stdout and "fig2" in proc.stdout
    # Figure 10's text rules: none at the test scale, the clean view and 3 strategies x 7 powers
    # at the paper scale (the quick scale's: test_text_workflow.py)
    rules = [rule for rule, _ in planned_in(proc.stdout)]
    if overlay and "test" in overlay:
        assert rules.count("text_logits") == rules.count("pa_fig10") == 0 and rules.count("pa_fig9") == 1
    if overlay and "paper" in overlay:
        assert rules.count("text_logits") == 1 + 3 * 7 and rules.count("pa_fig10") == 1
        # per-sigma estimates on a GPU, their stacking on none
        asks = {rule: re.findall(rf"^rule {rule}:\n(?:    .*\n)*?    resources: (.*)$", proc.stdout,
                                 flags=re.M) for rule in ("avg_estimates", "avg_estimates_sigma")}
        assert len(asks["avg_estimates_sigma"]) == 7 * len(asks["avg_estimates"]) > 0
        assert all("gpu=1" in r for r in asks["avg_estimates_sigma"])
        assert not any("gpu" in r for r in asks["avg_estimates"])


def test_rejected_config_runs_nothing(workdir):
    (workdir / "bad.yaml").write_text("toy:\n  bernoulli:\n    typo_key: 1\n")
    proc = run_snakemake(workdir, "--cores", "1", "--configfile", "workflow/config/test.yaml",
                         "--configfile", "bad.yaml", check=False)
    assert proc.returncode != 0 and "unknown key 'toy.bernoulli.typo_key'" in proc.stderr
    assert not (workdir / "data").exists() and not (workdir / "figures").exists()


def test_snakemake_stops_on_a_bad_config_before_any_job_without_traceback(workdir):
    """Once through Snakemake (every other rejection is checked in process, tests/unit)."""
    (workdir / "bad.yaml").write_text("adversarial:\n  zoo:\n    models: [undefended, resnet9000]\n")
    proc = run_snakemake(workdir, "-n", "--configfile", "bad.yaml", check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "pabench: invalid configuration" in out
    assert "adversarial.zoo.models.1" in out and "Traceback" not in out and "rule " not in proc.stdout


def test_rule_files_do_not_depend_on_their_include_order(workdir):
    """Each .smk file imports what it uses: the Snakefile's includes in reverse plan the same jobs."""
    def jobs():
        out = run_snakemake(workdir, "-n", "--quiet", "rules", *TEST).stdout
        return sorted(line.split()[0] for line in out.splitlines() if line.strip()[:1].isalpha()
                      and len(line.split()) == 2 and line.split()[1].isdigit())

    forward = jobs()
    snakefile = workdir / "Snakefile"
    lines = snakefile.read_text().splitlines()
    includes = [i for i, line in enumerate(lines) if line.startswith("include:")]
    for i, line in zip(includes, reversed([lines[i] for i in includes])):
        lines[i] = line
    snakefile.write_text("\n".join(lines) + "\n")
    assert jobs() == forward and "pa_fig3" in forward and len(forward) > 30
