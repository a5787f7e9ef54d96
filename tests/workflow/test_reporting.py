"""What users look at, on the test-scale run: the claims check, the timing summary, the W&B
workspace specification, and partial reruns planned by Snakemake dry runs."""
import json
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from conftest import TEST, planned, run_snakemake, scale_config
from pabench.core import paths
from pabench.experiments.adversarial import plan as adv
from pabench.runtime.dashboard import build_workspace, spec_from_dir
from pabench.papers import PAPERS, claim_modules
from pabench.reporting.claims import MIXED, NOT_EVALUATED, NOT_REPRODUCED, REPRODUCED, load

pytestmark = pytest.mark.workflow
CLAIMS = load(claim_modules())
FIGURE_RULES = {e.rule for p in PAPERS.values() for e in p.enabled(scale_config())
                if e.kind == "figure"}


def test_claims_check_of_the_run(ran):
    root, _ = ran
    claims = pd.read_csv(root / "figures/claims.csv")
    assert list(claims.id) == [c.id for c in CLAIMS]
    assert set(claims.verdict) <= {REPRODUCED, MIXED, NOT_REPRODUCED, NOT_EVALUATED}
    v = claims.set_index("id").verdict
    # Mathematical facts hold at any scale; paper-scale-only claims are not evaluated.
    assert v["toy-constant-is-robust"] == REPRODUCED and v["adv-exact-no-shift"] == REPRODUCED
    assert v["adv-apgd-top-defenses"] == NOT_EVALUATED
    assert v["adv-pgd-undefended-lowest"] == NOT_EVALUATED  # the test zoo has no undefended model
    md = (root / "figures/claims.md").read_text()
    assert md.startswith("# Claims check (test scale)") and "| claim | source | PA solver | measured | verdict | seeds |" in md
    # The test zoo trains two seeds: the adversarial claims are checked in each, and say too few.
    exact = claims.set_index("id").loc["adv-exact-no-shift"]
    assert exact.seeds_holding == "2/2" and exact.seeds_note == "2 seeds: not enough for a verdict over seeds"
    assert "reproduced 2/2 *" in md


def test_timing_summary_covers_the_rules_that_ran(ran):
    root, _ = ran
    timings = pd.read_csv(root / "figures/timings.csv")
    rules = set(timings.rule)
    assert {"train_dg", "adv_attack", "adv_score", "pa_fig1", "claims", "total"} <= rules
    body = timings[timings.rule != "total"]
    total = timings.set_index("rule").loc["total"]
    assert total.jobs == body.jobs.sum() == len(list((root / "data/benchmarks").glob("*/*.tsv")))
    assert total.total_s == pytest.approx(body.total_s.sum(), abs=0.05)
    assert (body.total_s > 0).all() and list(body.total_s) == sorted(body.total_s, reverse=True)


def test_wandb_workspace_spec_from_the_logged_runs(ran):
    root, _ = ran
    spec = spec_from_dir(root / "data/wandb")
    assert list(spec)[:2] == ["toy", "diagvib"] and "checks" in spec
    assert spec["toy"] == [("image", "fig1"), ("table", "fig1_data"),
                           ("image", "fig2"), ("table", "fig2_data")]
    adv = dict((k, kind) for kind, k in spec["adversarial"])
    assert {"fig3", "fig3_data", "fig16", "models_mnist32"} <= set(adv)
    assert ("table", "claims") in spec["checks"] and ("table", "table1") in spec["model_selection"]
    # The wandb_workspaces objects build offline; their serialised form holds every key.
    model = build_workspace(spec, "someone", "pabench")._to_model()
    dumped = model.spec.model_dump(by_alias=True, exclude_none=True)
    sections = {s["name"]: json.dumps(s) for s in dumped["section"]["panelBankConfig"]["sections"]}
    assert set(sections) == set(spec)
    for group, panels in spec.items():
        for _, key in panels:
            assert f'"{key}"' in sections[group], (group, key)


def test_wandb_dashboard_command(ran, tmp_path):
    root, _ = ran
    env = {"PATH": str(__import__("os").environ["PATH"]), "HOME": str(tmp_path),
           "NETRC": str(tmp_path / "none")}
    cmd = [sys.executable, "-m", "pabench.cli", "wandb-dashboard", "--dir", str(root / "data/wandb")]
    dry = subprocess.run([*cmd, "--dry-run"], capture_output=True, text=True, env=env)
    assert dry.returncode == 0 and json.loads(dry.stdout)["toy"][0] == ["image", "fig1"]
    offline = {"WANDB_API_KEY": "pabench-fake-key-0123456789abcdef01234567",
               "WANDB_BASE_URL": "http://127.0.0.1:9"}
    for extra, more_env, message in (([], {}, "--entity is required"),
                                     (["--entity", "me"], {}, "no W&B credentials"),
                                     (["--entity", "me"], offline, "cannot be reached")):
        proc = subprocess.run([*cmd, *extra], capture_output=True, text=True, env={**env, **more_env})
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr


def test_one_figure_builds_only_what_it_needs(workdir):
    jobs = planned(workdir, "figures/pa/fig3.pdf", *TEST)
    assert sorted({r for r, _ in jobs}) == ["adv_attack", "adv_data", "adv_score", "adv_train", "pa_fig3"]
    assert all("attack=pgd" in wc for r, wc in jobs if r in ("adv_attack", "adv_score"))
    assert sorted(r for r, _ in planned(workdir, "figures/pa/fig1.pdf", *TEST)) == ["pa_fig1", "toy_bernoulli"]


def test_style_change_reruns_only_the_figure_rules(finished):
    assert planned(finished, *TEST) == []  # the copy is as finished as the run
    style = finished / "workflow/style/pabench.mplstyle"
    style.write_text(style.read_text() + "\naxes.grid: True\n")
    jobs = planned(finished, *TEST)
    # The figure rules, and the timing summary that reads their benchmark files.
    # The avgcase claims read figure CSVs (fig4, fig10), so the claims check reruns too.
    assert {r for r, _ in jobs} == FIGURE_RULES | {"timings", "claims"}
    assert {"pa_fig3", "pa_fig5", "pa_fig14", "pa_fig15", "pa_fig16"} <= FIGURE_RULES


def test_one_algorithm_change_reruns_only_its_branch(finished):
    overlay = finished / "lisa.yaml"
    overlay.write_text("dg:\n  lisa: {alpha: 1.0, p_same_label: 0.75, mix: mixup}\n")
    jobs = planned(finished, *TEST, str(overlay))
    per_run = [(r, wc) for r, wc in jobs if r in ("train_dg", "dg_scores", "dg_pa", "train_ms")]
    assert per_run and all("algorithm=lisa" in wc for _, wc in per_run)
    # Its training, scores and PA, and what reads them: nothing of the other algorithms.
    assert {r for r, _ in jobs} == {"train_dg", "dg_scores", "dg_pa", "dg_pa_table", "pa_fig7",
                                    "pa_fig8", "claims", "timings"}


def test_per_sigma_jobs_stack_to_the_bytes_of_one_job(finished):
    """The test scale runs the estimates one job per sigma (avgcase.split_sigmas, as the paper
    scale); one job for every sigma, run by Snakemake on the same model, writes the same file."""
    rel = "data/avgcase/estimates/mnist/linear-lam0-s0.csv"
    stacked = (finished / rel).read_bytes()
    overlay = finished / "unsplit.yaml"
    overlay.write_text("avgcase:\n  split_sigmas: false\n")
    args = (*TEST, str(overlay), "--forcerun", "avg_estimates", "--until", "avg_estimates", rel)
    assert {r for r, _ in planned(finished, *args)} == {"avg_estimates"}
    run_snakemake(finished, "--cores", "2", *args)
    assert (finished / rel).read_bytes() == stacked
    assert len(pd.read_csv(finished / rel).sigma.unique()) == len(scale_config()["avgcase"]["sigmas"])


def test_one_attack_and_one_score_job_per_model_write_the_files_of_the_per_attack_jobs(finished):
    """The test scale attacks and scores with a job per (model, attack, eps) and per (model,
    attack) (adversarial.split_attacks, as the paper scale); the quick scale's one attack and one
    scoring job per model, run by Snakemake on the same model, write the same records (every
    array) and score tables (byte for byte)."""
    config = scale_config()
    records = sorted((finished / "data/adversarial/mnist32/attacks/jpeg_rs-s0").glob("*/*.npz"))
    assert len(records) == len(adv.model_runs(config, "mnist32"))
    tables = [finished / paths.adv_scores("mnist32", "jpeg_rs-s0", a) for a in adv.attack_settings(config, "mnist32")]
    before = {r: dict(np.load(r)) for r in records}
    scored = {t: t.read_bytes() for t in tables}
    overlay = finished / "merged.yaml"
    overlay.write_text("adversarial:\n  split_attacks: false\n")
    rel = [str(p.relative_to(finished)) for p in (*records, *tables)]
    args = (*rel, "--forcerun", "adv_attacks_mnist32", *TEST, str(overlay))  # targets first
    assert sorted(r for r, _ in planned(finished, *args)) == ["adv_attacks_mnist32", "adv_scores_mnist32"]
    run_snakemake(finished, "--cores", "2", *args)
    for r in records:
        after = np.load(r)
        assert set(after.files) == set(before[r]) and all(
            np.array_equal(after[k], before[r][k]) for k in after.files), r
    assert all(t.read_bytes() == scored[t] for t in tables)


def test_a_new_seed_runs_only_its_own_jobs(finished):
    """Seeds are separate jobs: adding one trains, attacks and evaluates only the new seed, and
    rebuilds what stacks the seeds; nothing of the seeds already run is redone."""
    overlay = finished / "seeds.yaml"
    overlay.write_text("adversarial:\n  zoo:\n    seeds: [0, 1, 2]\n"
                       "avgcase:\n  train: {epochs: 1, seeds: [0, 2]}\n")
    jobs = planned(finished, *TEST, str(overlay))
    per_seed = [(r, wc) for r, wc in jobs if r in ("adv_train", "adv_attack", "adv_score", "avg_train",
                                                  "avg_estimates", "avg_estimates_sigma",
                                                  "avg_case_study", "avg_linear_convergence")]
    assert {r for r, _ in per_seed} == {"adv_train", "adv_attack", "adv_score", "avg_train",
                                        "avg_estimates", "avg_estimates_sigma", "avg_case_study",
                                        "avg_linear_convergence"}
    assert all("seed=2" in wc or "-s2," in wc for _, wc in per_seed), per_seed
    rules = {r for r, _ in jobs}
    assert not rules & {"adv_data", "avg_data", "avg_noise_pa", "avg_runtime", "avg_convergence",
                        "train_dg", "train_ms", "toy_bernoulli"}

PAPER, CHECKS = "PA robustness paper (TMLR)", "Reproduction checks"


def test_report_shows_figures_and_claims_in_headless_chromium(ran, tmp_path):
    """Snakemake's report of the run, opened in headless Chromium and clicked through: a figure
    with its caption, and the claims check table, are on screen (screenshots kept in tmp_path)."""
    from browser import Browser, find_chromium

    chromium = find_chromium()
    if chromium is None:
        pytest.skip("Chromium is not installed and could not be installed on this machine "
                    "(.ci/run installs Debian's `chromium`; or: apt-get install chromium)")
    root, _ = ran
    report = tmp_path / "report.html"
    run_snakemake(root, "--report", str(report), *TEST)
    link = "[...document.querySelectorAll('nav a')].some(a => a.innerText.trim() === {})"
    image = "document.querySelector('#app img[src^=\"data:image/png\"]')"
    with Browser(chromium) as b:
        b.open(report.as_uri())
        b.wait(f"typeof app !== 'undefined' && {link.format(json.dumps(PAPER))}", "the report menu")
        # A figure: paper -> experiment -> the fig1 row's view and info buttons.
        b.js(f"__t.clickText({json.dumps(PAPER)})")
        b.wait(link.format('"Toy examples"'), "the experiments of the paper")
        b.js("__t.clickText('Toy examples')")
        b.wait("__t.row('fig1') !== undefined", "the fig1 row")
        b.js("__t.clickRow('fig1', 0)")
        b.wait(f"(() => {{ const i = {image}; return i && i.complete && i.naturalWidth > 0 }})()",
               "the figure")
        b.js("__t.clickRow('fig1', 1)")
        b.wait("document.querySelector('nav').innerText.includes('Figure 1')", "the caption")
        pixels = b.screenshot(tmp_path / "fig1.png")
        x0, y0, x1, y1 = (int(v) for v in b.js("__t.rect('#app img[src^=\"data:image/png\"]')"))
        shown = pixels[max(y0, 0):y1, max(x0, 0):x1]
        assert shown.shape[0] > 100 and shown.shape[1] > 100, (x0, y0, x1, y1)
        assert shown.std() > 20 and len(np.unique(shown.reshape(-1, 3), axis=0)) > 20
        caption = b.js("document.querySelector('nav').innerText")
        for text in ("Figure 1", "test", "exact", "Seeds"):
            assert text.lower() in caption.lower(), text
        # The claims check: back to the menu -> Reproduction checks -> the claims table.
        b.js("__t.clickText('Results')")
        b.wait(link.format(json.dumps(CHECKS)), "the menu again")
        b.js(f"__t.clickText({json.dumps(CHECKS)})")
        b.wait("__t.row('claims') !== undefined", "the claims row")
        b.js("__t.clickRow('claims', 0)")
        b.wait("document.querySelector('#app iframe') !== null", "the claims table")
        deadline, table = time.monotonic() + 15, ""
        while "verdict" not in table and time.monotonic() < deadline:
            table, _ = b.frame_text(), time.sleep(0.2)
        pixels = b.screenshot(tmp_path / "claims.png")
        x0, y0, x1, y1 = (int(v) for v in b.js("__t.rect('#app iframe')"))
        assert pixels[max(y0, 0):y1, max(x0, 0):x1].std() > 10
    for text in ("verdict", "toy-constant-is-robust", "adv-exact-no-shift", REPRODUCED, NOT_EVALUATED):
        assert text in table, text


def test_runs_record_their_inputs_and_log_each_output_as_a_typed_artifact(ran):
    from pabench.runtime.tracking import offline_runs

    root, _ = ran
    runs = {r["name"]: r for r in offline_runs(root / "data/wandb")}
    fig1 = runs["pa_fig1"]
    assert fig1["group"] == "toy" and fig1["job_type"] == "pa_fig1"
    assert fig1["config"]["inputs"] == ["data/results/toy/bernoulli.csv", "workflow/style/pabench.mplstyle"]
    outputs = {(a["name"], a["type"]) for a in fig1["artifacts"] if a["type"] != "run_table"}
    assert outputs == {("figures-pa-fig1.pdf", "figure"), ("figures-pa-fig1.png", "figure"),
                       ("figures-pa-fig1.csv", "figure")}  # run_table: the logged wandb.Table
    train = runs["train_dg-algorithm=erm-seed=0"]
    kinds = {a["name"]: a["type"] for a in train["artifacts"]}
    assert kinds["data-models-shift_factor-erm-s0-last.pt"] == "model"
    assert kinds["data-models-shift_factor-erm-s0-history.csv"] == "model"  # the training record
    split = next(r for n, r in runs.items() if n.startswith("diagvib_split-") and "split=train" in n)
    assert {a["type"] for a in split["artifacts"]} == {"dataset"}


def test_a_paper_target_builds_that_paper(workdir):
    """`snakemake pa` plans every figure and table rule of the PA paper and what they need, not the
    run-wide checks."""
    rules = {r for r, _ in planned(workdir, "pa", *TEST)}
    paper = {e.rule for e in PAPERS["pa"].enabled(scale_config())}
    assert paper <= rules and "claims" not in rules and "timings" not in rules
    assert {"train_dg", "adv_attack", "diagvib_split"} <= rules
    assert not any(r.startswith("avg") for r in rules)  # not the other paper's
