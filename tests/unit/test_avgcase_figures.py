"""Figures, tables and claims of the average-case robustness paper on small synthetic tables in
the per-model and stacked CSV formats the workflow writes: the plotted numbers are the ones fed
in, and each claim's verdict follows them."""
import numpy as np
import pandas as pd
import pytest

from pabench.core import paths
from pabench.core.io import read_table, write_csv
from pabench.experiments.avgcase import figures, tables
from pabench.papers.avgcase import PAPER
from pabench.reporting import claims

SIGMAS = [0.01, 0.1, 0.4]
N_POINTS = 100
MAIN = "mnist32/resnet18_w16-lam0"
FAMILY = [MAIN, "mnist32/resnet18_w16-lam0.001", "mnist32/resnet18_w16-lam0.01"]
LINEAR, CNN = "mnist/linear-lam0", "fmnist/cnn-lam0"
ESTIMATORS = ("mc", "taylor", "taylor_mvs", "mmse", "mmse_mvs", "softmax")

# Each estimator's p as a function of (sigma, model, p_mc).  GOOD: the paper's findings (MMSE
# closest to MC, Taylor next, softmax far; errors grow with sigma and shrink with lambda;
# mv-sigmoid within 0.005 of mvn-cdf; Taylor and MMSE exact for the linear model).  BAD: each
# finding reversed or broken.
GOOD = {"mmse": lambda s, m, mc: mc + (0.001 if m.arch == "linear" else 0.01 * (1 + 10 * s) / (1 + 100 * m.lam)),
        "mmse_mvs": lambda s, m, mc: mc - 0.01 * (1 + 10 * s) / (1 + 100 * m.lam),
        "taylor": lambda s, m, mc: mc + (0.003 if m.arch == "linear" else 0.02 * (1 + 10 * s)),
        "taylor_mvs": lambda s, m, mc: mc + 0.02 * (1 + 10 * s) + 0.005 * (m.arch != "linear"),
        "softmax": lambda s, m, mc: np.full_like(mc, 0.97),
        "linear": lambda s, m, mc: mc + 0.002}
BAD = {"mmse": lambda s, m, mc: mc + 0.05, "mmse_mvs": lambda s, m, mc: mc + 0.05,
       "taylor": lambda s, m, mc: mc + 0.005,
       "taylor_mvs": lambda s, m, mc: 0.9 - mc,   # anti-correlated with Taylor
       "softmax": lambda s, m, mc: mc, "linear": lambda s, m, mc: mc}


def p_mc(point: np.ndarray, class_effect: float) -> np.ndarray:
    """p_mc per point: 0.1 + class_effect * label, plus a within-class spread below 0.05."""
    return 0.1 + class_effect * (point % 10) + 0.005 * (point // 10)


def estimates_frame(ref: str, estimators: dict, class_effect: float = 0.08, seed: int = 0,
                    degenerate: bool = False) -> pd.DataFrame:
    dataset, model = ref.split("/")
    m = paths.parse_avg_model(dataset, model, seed)
    point = np.arange(N_POINTS)
    mc = p_mc(point, class_effect)
    names = ESTIMATORS + (("linear",) if m.arch == "linear" else ())
    rows = [pd.DataFrame({"dataset": dataset, "model": model, "arch": m.arch, "lam": m.lam,
                          "seed": seed, "point": point, "label": point % 10, "target": point % 10,
                          "sigma": s, "estimator": name,
                          "n": 20 if name.startswith(("mc", "mmse")) else 0,
                          "p": mc if name == "mc" else estimators[name](s, m, mc),
                          "degenerate": degenerate})
            for s in SIGMAS for name in names]
    return pd.concat(rows, ignore_index=True)


def write_estimates(root, estimators: dict, class_effect: float = 0.08, seed: int = 0,
                    degenerate: bool = False) -> dict:
    """Every model's estimate file of one training seed under root; {ref: path}."""
    out = {}
    for ref in FAMILY + [LINEAR, CNN]:
        path = root / paths.avg_file("estimates", *ref.split("/"), seed)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_csv(path, estimates_frame(ref, estimators, class_effect, seed, degenerate))
        out[ref] = str(path)
    return out


def outputs(root, name):
    return tuple(str(root / f"{name}.{ext}") for ext in ("pdf", "png", "csv"))


def drawn(root, name) -> pd.DataFrame:
    out = outputs(root, name)
    assert all((root / f"{name}.{ext}").stat().st_size > 0 for ext in ("pdf", "png", "csv")), out
    return read_table(out[2])


META = {"caption": "test", "scale": "test"}


def test_errors_and_fig2_plot_the_hand_computed_means(tmp_path):
    files = write_estimates(tmp_path, GOOD)
    figures.fig2a({"estimates": files[MAIN]}, outputs(tmp_path, "fig2a"), dict(META))
    err = drawn(tmp_path, "fig2a").set_index(["estimator", "sigma"])
    mc = p_mc(np.arange(N_POINTS), 0.08)
    for s in SIGMAS:
        assert err.loc[("mmse", s), "mean_abs_error"] == pytest.approx(0.01 * (1 + 10 * s))
        assert err.loc[("taylor", s), "mean_rel_error"] == pytest.approx(np.mean(0.02 * (1 + 10 * s) / mc))
        assert err.loc[("softmax", s), "mean_abs_error"] == pytest.approx(np.mean(np.abs(0.97 - mc)))
        assert err.loc[("mmse", s), "n_points"] == N_POINTS
    assert set(err.index.get_level_values(0)) == set(ESTIMATORS) - {"mc"}

    figures.fig2b({"estimates": [files[r] for r in FAMILY]}, outputs(tmp_path, "fig2b"), dict(META))
    b = drawn(tmp_path, "fig2b")
    assert set(b.estimator) == {"mmse"} and sorted(b.lam.unique()) == [0, 0.001, 0.01]
    got = b.set_index(["lam", "sigma"]).mean_abs_error
    assert got[(0.01, 0.4)] == pytest.approx(0.01 * 5 / 2)

    table = tables.errors({"estimates": list(files.values())}, main=MAIN)
    assert table[table.main].model.unique().tolist() == ["resnet18_w16-lam0"]
    linear = table[(table.model == "linear-lam0") & (table.estimator == "linear")]
    assert linear.mean_abs_error.to_numpy() == pytest.approx(0.002)


def test_relative_error_skips_points_where_mc_is_zero(tmp_path):
    frame = estimates_frame(MAIN, GOOD)
    frame.loc[(frame.estimator == "mc") & (frame.point == 0), "p"] = 0.0
    err = tables.errors_frame(frame).set_index(["estimator", "sigma"])
    assert err.loc[("taylor", 0.1), "n_rel_points"] == N_POINTS - 1
    assert np.isfinite(err.mean_rel_error).all()


def test_fig10_fig3_and_fig4(tmp_path):
    files = write_estimates(tmp_path, GOOD)
    figures.fig10({"estimates": files[MAIN]}, outputs(tmp_path, "fig10"), dict(META), sigma=0.09)
    mvs = drawn(tmp_path, "fig10")
    assert len(mvs) == N_POINTS * len(SIGMAS)   # every sigma; the left panel's is marked
    assert (mvs[mvs.paper_sigma].sigma == 0.1).all() and mvs.paper_sigma.sum() == N_POINTS
    assert mvs.spread.tolist() == mvs.mvn_cdf.between(0.01, 0.99).tolist()
    assert (mvs.mv_sigmoid - mvs.mvn_cdf).to_numpy() == pytest.approx(0.005)

    data = tmp_path / "data.npz"
    rng = np.random.default_rng(0)
    np.savez(data, test_x=rng.integers(0, 256, (N_POINTS, 3, 8, 8), dtype=np.uint8),
             test_y=np.arange(N_POINTS) % 10)
    figures.fig3({"estimates": files[MAIN], "data": str(data)}, outputs(tmp_path, "fig3"),
                 dict(META), sigma=0.1)
    grid = drawn(tmp_path, "fig3")
    assert len(grid) == 10 * 4
    seven = grid[grid.label == 7].set_index(["score", "end"]).point
    assert seven[("mmse", "highest")] == 97 and seven[("mmse", "lowest")] == 7  # p grows with point // 10
    # Softmax is 0.97 for every point: ties go to the lowest index at both ends.
    assert seven[("softmax", "highest")] == 7 and seven[("softmax", "lowest")] == 7

    figures.fig4({"estimates": [files[MAIN], files[CNN]]}, outputs(tmp_path, "fig4"), dict(META))
    points = drawn(tmp_path, "fig4")
    assert len(points) == 2 * len(SIGMAS) * 2 * N_POINTS and set(points.estimator) == {"mc", "mmse"}
    assert set(points[points.dataset == "fmnist"]["class"]) == set(figures.FMNIST)
    assert figures.class_name("cifar100", 99) == "worm" and len(figures.CIFAR100) == 100


def stacked_tables(good: bool = True) -> dict:
    """The stacked runtime, case-study, convergence, noise-PA and history tables."""
    models = [r.split("/") for r in FAMILY]
    runtime = pd.DataFrame([{"dataset": "mnist32", "model": "resnet18_w16-lam0", "estimator": e,
                             "n": n, "points": 3, "sigma": 0.1, "seconds": 3 * spp,
                             "seconds_per_point": spp, "device": "CPU: 2 threads, test"}
                            for e, n, spp in (("mc", 10000, 6.0), ("taylor", 0, 0.2),
                                              ("mmse", 5, 0.5 if good else 1.0))])
    case = pd.DataFrame([{"dataset": "mnist32", "model": "resnet18_w16-lam0", "seed": 0,
                          "score": s, "sigma": 0.2, "tie": 0.001, "tied_share": tied,
                          "pool": 300, "quantile": 0.25, "per_class": 75, "n_train": 120,
                          "n_test": 30, "train_accuracy": 0.9, "test_accuracy": acc}
                         for s, acc, tied in (("mmse", 0.9 if good else 0.5, 0.4),
                                              ("softmax", 0.6, 0.1))])
    # The linear models' MMSE and Taylor against the exact answer and MC: excess over the exact
    # answer's error 0.03 at n = 5 (as the quick scale's), 0.002 at the paper's n = 500 (0.03 too
    # when not good).
    linear = pd.DataFrame([{"dataset": d, "model": "linear-lam0", "arch": "linear", "lam": 0.0,
                            "seed": 0, "sigma": s, "estimator": e, "n": n,
                            "mean_abs_diff_exact": excess, "mean_abs_error": 0.004 + excess,
                            "exact_abs_error": 0.004, "n_points": N_POINTS}
                           for d in ("mnist", "fmnist") for s in SIGMAS
                           for e, n, excess in (("taylor", 0, 0.0), ("mmse", 5, 0.03),
                                                ("mmse", 500, 0.002 if good else 0.03))])
    conv = pd.DataFrame([{"dataset": "mnist32", "model": "resnet18_w16-lam0", "sigma": 0.1,
                          "estimator": e, "n": n, "mean_abs_diff": (0.0 if n == 100 and e == "mc"
                                                                    else 0.3 / np.sqrt(n)),
                          "mean_p": 0.8, "reference_n": 4000}
                         for e in ("mc", "mmse", "softmax") for n in (1, 10, 100)])
    noise = pd.DataFrame([{"dataset": d, "model": m, "arch": "resnet18_w16", "lam": lam,
                           "sigma": s, "logpa": -100 * s * (k + 1), "logpa_adam": -90 * s * (k + 1),
                           "afr_true": 0.9 - s, "afr_pred": 1 - s * (k + 1), "accuracy_clean": 0.9,
                           "accuracy_noisy": 0.9 - s, "p_mc_mean": 1 - s * (k + 1) / 2,
                           "p_mmse_mean": 1 - s * (k + 1) / 2, "n_points": N_POINTS}
                          for k, ((d, m), lam) in enumerate(zip(models, (0, 0.001, 0.01)))
                          for s in SIGMAS])
    history = pd.DataFrame([{"dataset": d, "model": m, "arch": "resnet18_w16", "lam": lam,
                             "seed": 0, "epoch": e, "loss": 1 / e, "grad_norm": 2.0 / e,
                             "train_accuracy": 0.5 + 0.2 * e, "test_accuracy": 0.4 + 0.2 * e,
                             "n_test": 300, "degenerate": False}
                            for (d, m), lam in zip(models, (0, 0.001, 0.01)) for e in (1, 2)])
    return {"runtime": runtime, "case_study": case, "convergence": conv, "noise_pa": noise,
            "history": history, "linear_convergence": linear}


def test_stacked_table_figures_and_tables(tmp_path):
    files = {}
    for kind, frame in stacked_tables().items():
        files[kind] = str(tmp_path / f"{kind}.csv")
        write_csv(files[kind], frame)
    figures.convergence({"table": files["convergence"]}, outputs(tmp_path, "conv"), dict(META))
    assert len(drawn(tmp_path, "conv")) == 9
    figures.noise_pa({"table": files["noise_pa"]}, outputs(tmp_path, "noise_pa"), dict(META))
    assert drawn(tmp_path, "noise_pa").logpa.tolist() == stacked_tables()["noise_pa"].logpa.tolist()

    t1 = tables.table1({"table": files["runtime"]}).set_index("estimator")
    assert t1.loc["taylor", "speed-up vs MC (per point)"] == pytest.approx(30)
    assert t1.loc["mmse", "seconds for 50 points (extrapolated)"] == pytest.approx(25)
    assert t1.loc["taylor", "n"] == "N/A" and t1.loc["mc", "paper CPU s (50 points)"] == 6071

    case = tables.case_study({"table": files["case_study"]}).set_index("score")
    assert case.loc["p_mmse", "test accuracy"] == 0.9 and case.loc["softmax", "paper test accuracy (CIFAR-10)"] == 0.58
    assert case.loc["p_mmse", "seed"] == 0 and case.loc["p_mmse", "tied share (images)"] == 0.4
    assert case.loc["softmax", "pool (untied images)"] == 300

    figures.linear_convergence({"table": files["linear_convergence"]}, outputs(tmp_path, "lin"),
                               dict(META))
    lin = drawn(tmp_path, "lin")
    assert len(lin) == len(stacked_tables()["linear_convergence"])
    assert set(lin.n) == {0, 5, 500} and (lin[lin.n == 500].mean_abs_diff_exact == 0.002).all()

    models = tables.models({"table": files["history"]})
    assert len(models) == 3 and (models.epochs == 2).all()
    assert models["test accuracy"].tolist() == pytest.approx([0.8] * 3)
    assert models["input-gradient norm (final epoch)"].tolist() == pytest.approx([1.0] * 3)

    corr = tables.noise_pa_correlation({"table": files["noise_pa"]}).set_index("measure")
    noise = stacked_tables()["noise_pa"]
    assert corr.loc["log PA (exact)", "n (model, sigma)"] == len(noise)
    assert corr.loc["AFR_P", "spearman"] == pytest.approx(1.0)  # both fall with s * (k + 1)
    assert corr.loc["log PA (exact)", "spearman"] == pytest.approx(
        noise.logpa.rank().corr(noise.p_mc_mean.rank()))


AVG_CLAIMS = [c for c in claims.load(PAPER.claim_modules) if c.id.startswith("avg-")]


def claim_tables(root, good: bool) -> dict:
    """The claims' tables as the claims rule reads them: the errors table and the Figure 4 and 10
    point data written by their functions, the stacked runtime and case-study tables."""
    files = write_estimates(root, GOOD if good else BAD, class_effect=0.08 if good else 0.0)
    errors = root / "errors.csv"
    write_csv(errors, tables.errors({"estimates": list(files.values())}, main=MAIN))
    figures.fig10({"estimates": files[MAIN]}, outputs(root, "fig10"), dict(META), sigma=0.05)
    figures.fig4({"estimates": [files[MAIN], files[CNN]]}, outputs(root, "fig4"), dict(META))
    figures.fig4({"estimates": [files[LINEAR]]}, outputs(root, "other"), dict(META))
    stacked = stacked_tables(good)
    named = {"avg_errors": errors, "avg_mvs": outputs(root, "fig10")[2],
             "avg_class_bias": outputs(root, "fig4")[2],
             "avg_class_bias_other": outputs(root, "other")[2]}
    for name, kind in (("avg_runtime", "runtime"), ("avg_case_study", "case_study"),
                       ("avg_linear", "linear_convergence")):
        named[name] = root / f"{kind}.csv"
        write_csv(named[name], stacked[kind])
    return {name: read_table(path) for name, path in named.items()}


def test_claims_follow_the_numbers(tmp_path):
    config = {"avgcase": {"class_bias": ["x"], "class_bias_other": ["y"], "use": ["mnist"],
                          "models": {"mnist": {"linear": [0]}}}}
    assert set(PAPER.claim_tables(config)) == {t for c in AVG_CLAIMS for t in c.tables}
    (tmp_path / "good").mkdir()
    (tmp_path / "bad").mkdir()
    good = claims.evaluate(claim_tables(tmp_path / "good", True), AVG_CLAIMS).set_index("id")
    bad = claims.evaluate(claim_tables(tmp_path / "bad", False), AVG_CLAIMS).set_index("id")
    assert (good.verdict == claims.REPRODUCED).all(), good[good.verdict != claims.REPRODUCED].measured.to_dict()
    assert (bad.verdict == claims.NOT_REPRODUCED).all(), bad[bad.verdict != claims.NOT_REPRODUCED].measured.to_dict()


def test_claims_without_their_data_are_not_evaluated(tmp_path):
    frame = estimates_frame(MAIN, GOOD)
    errors = tables.errors_frame(frame).assign(main=True)   # no family, no linear model
    flat = pd.DataFrame({"dataset": "mnist32", "model": "m", "sigma": 0.1, "estimator": "mc",
                         "point": range(20), "label": np.arange(20) % 10, "p": 1.0, "class": "0"})
    got = claims.evaluate({"avg_errors": errors, "avg_class_bias": flat,
                    "avg_runtime": stacked_tables()["runtime"].query("estimator != 'mc'")},
                   AVG_CLAIMS).set_index("id").verdict
    for cid in ("avg-robust-training-lower-error", "avg-linear-exact", "avg-class-bias",
                "avg-analytical-faster", "avg-mvs-tracks-mvn-cdf", "avg-case-study-mmse-beats-softmax"):
        assert got[cid] == claims.NOT_EVALUATED, cid
    assert got["avg-mmse-most-accurate"] == claims.REPRODUCED
    # MMSE of the linear models without the paper's n = 500, every MVS point saturated, a pool
    # too small to train the case study's CNN on: not evaluated either.
    linear = stacked_tables()["linear_convergence"]
    saturated = pd.DataFrame({"seed": 0, "sigma": 0.05, "mvn_cdf": np.linspace(0.995, 1, 20),
                              "mv_sigmoid": np.linspace(0.99, 1, 20), "spread": False})
    case = stacked_tables()["case_study"].assign(test_accuracy=np.nan, pool=3)
    got = claims.evaluate({"avg_linear": linear[linear.n != 500], "avg_mvs": saturated,
                           "avg_case_study": case}, AVG_CLAIMS).set_index("id")
    for cid in ("avg-linear-exact", "avg-mvs-tracks-mvn-cdf", "avg-case-study-mmse-beats-softmax"):
        assert got.loc[cid, "verdict"] == claims.NOT_EVALUATED, cid
    assert "n = 500" in got.loc["avg-linear-exact", "measured"]
    assert "pool of 3 untied images" in got.loc["avg-case-study-mmse-beats-softmax", "measured"]


def test_linear_exactness_is_judged_at_the_papers_n():
    """MMSE's excess at n = 5 (0.03, over the 0.01 allowed) is not the paper's setting: the
    claim reads n = 500, and names the small n's excess beside it."""
    got = claims.evaluate({"avg_linear": stacked_tables()["linear_convergence"]},
                          AVG_CLAIMS).set_index("id").loc["avg-linear-exact"]
    assert got.verdict == claims.REPRODUCED
    assert "mmse (n = 500) 0.002" in got.measured and "mmse at n = 5: 0.03" in got.measured


def test_mv_sigmoid_is_judged_where_mvn_cdf_is_spread():
    """140 saturated points on the diagonal and 10 spread ones 0.15 below it: over all 150 the
    agreement looks fine (MAE 0.01, r ~ 1); where p is spread it is not."""
    sat = np.linspace(0.991, 1.0, 140)
    mid = np.linspace(0.2, 0.8, 10)
    mvs = pd.DataFrame({"seed": 0, "sigma": 0.05, "mvn_cdf": np.r_[sat, mid],
                        "mv_sigmoid": np.r_[sat, mid - 0.15],
                        "spread": np.r_[np.zeros(140, bool), np.ones(10, bool)]})
    assert (mvs.mv_sigmoid - mvs.mvn_cdf).abs().mean() == pytest.approx(0.01)
    got = claims.evaluate({"avg_mvs": mvs}, AVG_CLAIMS).set_index("id").loc["avg-mvs-tracks-mvn-cdf"]
    assert got.verdict == claims.NOT_REPRODUCED, got.measured
    assert "MAE = 0.15 over 10 of 150 points" in got.measured


def test_class_bias_corrects_for_the_sigmas_tested():
    """A class effect with Kruskal-Wallis p ~ 0.005 at one of 5 sigmas (none elsewhere): below
    0.01 uncorrected, not after Bonferroni over the 5 (p x 5 ~ 0.025)."""
    from scipy import stats

    rng = np.random.default_rng(0)
    label = np.arange(60) % 3
    noise = {s: rng.permutation(60) / 60 for s in SIGMAS + [0.2, 0.3]}
    shift = 0.44 * (label == 0)
    p = {s: noise[s] + (shift if s == 0.1 else 0) for s in noise}
    pvalue = stats.kruskal(*[p[0.1][label == k] for k in range(3)]).pvalue
    assert 0.01 / 5 < pvalue < 0.01, pvalue
    others = [stats.kruskal(*[p[s][label == k] for k in range(3)]).pvalue for s in p if s != 0.1]
    assert min(others) > pvalue
    points = pd.concat([pd.DataFrame({"dataset": "fmnist", "model": "cnn-lam0", "seed": 0,
                                      "sigma": s, "estimator": "mc", "point": np.arange(60),
                                      "label": label, "p": v}) for s, v in p.items()])
    got = claims.evaluate({"avg_class_bias": points}, AVG_CLAIMS).set_index("id").loc["avg-class-bias"]
    assert got.verdict == claims.NOT_REPRODUCED, got.measured
    assert f"x 5 sigmas = {min(1, 5 * pvalue):.2g}" in got.measured


def test_seeds_are_kept_apart_and_a_degenerate_seed_is_named(tmp_path):
    """Two training seeds: Figure 2a's CSV keeps each seed's errors (the plot averages them), the
    errors table and Figure 10 carry seed and flag, the caption counts the flagged model, and the
    claims check each seed and leave the flagged one out."""
    from PIL import Image

    good = write_estimates(tmp_path, GOOD)
    bad = write_estimates(tmp_path, BAD, seed=1, degenerate=True)
    figures.fig2a({"estimates": [good[MAIN], bad[MAIN]]}, outputs(tmp_path, "fig2a"), dict(META))
    err = drawn(tmp_path, "fig2a")
    assert sorted(err.seed.unique()) == [0, 1] and err.groupby("seed").degenerate.all().tolist() == [False, True]
    mmse = err[(err.estimator == "mmse") & (err.sigma == 0.4)].set_index("seed").mean_abs_error
    assert mmse[0] == pytest.approx(0.05) and mmse[1] == pytest.approx(0.05)  # GOOD 0.01 x 5, BAD 0.05
    caption = Image.open(outputs(tmp_path, "fig2a")[1]).info["Description"]
    assert "1 of 2 models near chance or with PA at beta* = 0 in every view: not evidence" in caption
    figures.fig10({"estimates": [good[MAIN], bad[MAIN]]}, outputs(tmp_path, "fig10"), dict(META), sigma=0.1)
    mvs = drawn(tmp_path, "fig10")
    assert len(mvs) == 2 * N_POINTS * len(SIGMAS)
    assert mvs.groupby("seed").degenerate.first().tolist() == [False, True]
    errors = tables.errors({"estimates": list(good.values()) + list(bad.values())}, main=MAIN)
    got = claims.evaluate({"avg_errors": errors, "avg_mvs": mvs}, AVG_CLAIMS).set_index("id")
    row = got.loc["avg-mmse-most-accurate"]
    # Seed 1 (BAD: MMSE worse than Taylor) is left out: it would have made the claim mixed.
    assert (row.verdict, row.seeds_holding) == (claims.REPRODUCED, "1/1")
    assert "seed 1: not evidence: all 5 models degenerate" in row.measured
    row = got.loc["avg-mvs-tracks-mvn-cdf"]
    assert row.verdict == claims.REPRODUCED and row.seeds_note.startswith("1 of 2 seeds evaluated")


def test_captions_state_the_lazy_penalty_only_for_penalised_models():
    from conftest import REPO
    from pabench.core.config import load
    from pabench.papers.avgcase import _meta

    config = load([REPO / "config.yaml"])
    config["avgcase"]["train"]["penalty_every"] = 4
    assert "training" not in _meta(config, ["mnist32/resnet18_w8-lam0"])
    lazy = _meta(config, ["mnist32/resnet18_w8-lam0", "mnist32/resnet18_w8-lam0.03"])["training"]
    assert "every 4th step at 4 x lambda" in lazy
    config["avgcase"]["train"]["penalty_every"] = 1
    assert _meta(config, ["mnist32/resnet18_w8-lam0.03"])["training"] == (
        "gradient-norm penalty at every step")


# ------------------------------------------------------------------ the appendix's entries
def test_errors_by_model_plots_every_models_errors(tmp_path):
    files = write_estimates(tmp_path, GOOD)
    figures.errors_by_model({"estimates": list(files.values())}, outputs(tmp_path, "ebm"), dict(META))
    err = drawn(tmp_path, "ebm")
    expected = tables.errors_of(list(files.values()))
    assert len(err) == len(expected)
    assert [f"{d}/{m}" for d, m in dict.fromkeys(zip(err.dataset, err.model))] == list(files)
    mmse = err[(err.model == "resnet18_w16-lam0.01") & (err.estimator == "mmse")].set_index("sigma")
    assert mmse.mean_abs_error[0.4] == pytest.approx(0.01 * 5 / 2)
    assert set(err[err.model == "linear-lam0"].estimator) == set(ESTIMATORS) - {"mc"} | {"linear"}


def _image_data(path, labels, channels=1):
    rng = np.random.default_rng(0)
    np.savez(path, test_x=rng.integers(0, 256, (len(labels), channels, 8, 8), dtype=np.uint8),
             test_y=np.asarray(labels))
    return str(path)


def test_noisy_images_at_every_sigma(tmp_path):
    """The first image of each of the first 2 classes per dataset, clean and at every sigma with
    one noise direction per image: the noise's norm grows in proportion to sigma, and so does
    the share of pixel values that leave [0, 1]."""
    data = [_image_data(tmp_path / "a.npz", [3, 3, 5, 1]),
            _image_data(tmp_path / "b.npz", [0, 7, 7], channels=3)]
    figures.noisy_images({"data": data}, outputs(tmp_path, "noisy"), dict(META),
                         datasets=["mnist", "cifar10"], sigmas=[0.4, 0.05], seed=1)
    shown = drawn(tmp_path, "noisy")
    assert len(shown) == 2 * 2 * 3
    assert shown.groupby("dataset", sort=False).point.unique().map(list).to_dict() == {
        "mnist": [0, 2], "cifar10": [0, 1]}
    assert set(shown[shown.dataset == "cifar10"]["class"]) == {"airplane", "horse"}
    clean = shown[shown.sigma == 0]
    assert (clean.clipped_share == 0).all() and (clean.noise_l2 == 0).all()
    per = shown.set_index(["dataset", "point", "sigma"])
    ratio = per.loc[("mnist", 0, 0.4), "noise_l2"] / per.loc[("mnist", 0, 0.05), "noise_l2"]
    assert ratio == pytest.approx(8)
    assert per.loc[("mnist", 0, 0.4), "clipped_share"] > per.loc[("mnist", 0, 0.05), "clipped_share"]
    assert figures.example_points(np.array([4, 4, 2, 4, 9]), 3) == [0, 2, 4]


def test_class_bias_of_many_classes_is_drawn_ranked(tmp_path):
    """With more than MANY_CLASSES classes (CIFAR-100) each class is a median and quartiles, the
    classes ranked by their median; the CSV keeps every point."""
    n = 30 * 5
    rows = [pd.DataFrame({"dataset": "cifar100", "model": "resnet18-lam0", "arch": "resnet18",
                          "lam": 0.0, "seed": 0, "point": np.arange(n), "label": np.arange(n) % 30,
                          "target": 0, "sigma": s, "estimator": e, "n": 0,
                          "p": ((np.arange(n) % 30) * 7 % 30) / 30 + 0.001 * (np.arange(n) // 30),
                          "degenerate": False})
            for s in SIGMAS for e in ("mc", "mmse")]
    path = tmp_path / "est.csv"
    write_csv(path, pd.concat(rows, ignore_index=True))
    figures.fig4({"estimates": [str(path)]}, outputs(tmp_path, "many"), dict(META))
    points = drawn(tmp_path, "many")
    assert len(points) == len(SIGMAS) * 2 * n and 30 > figures.MANY_CLASSES
    assert points["class"].iloc[0] == "apple"
    est = pd.concat(rows)
    q = figures.class_quartiles(est[(est.sigma == 0.1) & (est.estimator == "mc")])
    assert q["median"].is_monotonic_increasing and q["rank"].tolist() == list(range(30))
    assert q.label.iloc[0] == 0 and q.label.iloc[-1] == 17   # 17 * 7 % 30 = 29, the largest
    assert (q.q1 <= q["median"]).all() and (q["median"] <= q.q3).all()


def test_runtimes_table_gives_each_models_speedups(tmp_path):
    runtime = stacked_tables()["runtime"]
    other = runtime.assign(dataset="mnist", model="cnn-lam0",
                           seconds_per_point=runtime.seconds_per_point * [0.1, 1, 1])
    path = tmp_path / "runtime_models.csv"
    write_csv(path, pd.concat([runtime, other], ignore_index=True))
    t = tables.runtimes({"table": str(path)}).set_index(["model", "estimator"])
    speed = t["speed-up vs MC (per point)"]
    assert speed[("resnet18_w16-lam0", "taylor")] == pytest.approx(30)
    assert speed[("cnn-lam0", "taylor")] == pytest.approx(3)       # MC 10x cheaper there
    assert speed[("cnn-lam0", "mc")] == pytest.approx(1)
    assert t.loc[("cnn-lam0", "taylor"), "n"] == "N/A" and "paper CPU s (50 points)" not in t


def test_class_bias_of_the_other_models_is_judged_as_figure_4s():
    from scipy import stats

    label = np.arange(60) % 3
    biased = pd.DataFrame({"dataset": "mnist", "model": "cnn-lam0", "seed": 0, "sigma": 0.1,
                           "estimator": "mc", "point": np.arange(60), "label": label,
                           "p": 0.3 * label + np.arange(60) / 600})
    got = claims.evaluate({"avg_class_bias_other": biased}, AVG_CLAIMS).set_index("id")
    assert got.loc["avg-class-bias-other", "verdict"] == claims.REPRODUCED
    flat = biased.assign(p=np.random.default_rng(0).permutation(60) / 60)
    pvalue = stats.kruskal(*[flat.p[label == k] for k in range(3)]).pvalue
    got = claims.evaluate({"avg_class_bias_other": flat}, AVG_CLAIMS).set_index("id")
    assert got.loc["avg-class-bias-other", "verdict"] == claims.NOT_REPRODUCED
    assert f"smallest p = {pvalue:.2g}" in got.loc["avg-class-bias-other", "measured"]
