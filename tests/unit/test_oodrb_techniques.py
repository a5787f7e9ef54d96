"""OODRobustBench by technique (Table 2, Figure 7, Tables 6-10) on a small hand-built zoo: the
comparison sets are the models that differ in one setting alone, AER is the distance to the AT
line, Figure 7 averages over sets (not models), Table 2's "-" rule matches the paper's own
table, and every model id of the metadata is one the pipeline can run."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pabench.core import config as pabench_config
from pabench.core.io import read_table, write_csv
from pabench.experiments.oodrb import techniques as T

REPO = Path(__file__).resolve().parents[2]
# (model, method, trades_beta, arch, epochs, augment, ID rob, OOD_d rob, OOD_t rob) in percent;
# ID accuracy 85 + ID rob / 10 (every AT model passes the 110 filter), OOD_d accuracy 0.8 x it.
ZOO = [("pgd-c8", "madry", np.nan, "smallcnn8", 3, "none", 40.0, 30.0, 20.0),
       ("pgd-c8-crop", "madry", np.nan, "smallcnn8", 3, "crop", 50.0, 39.0, 30.0),
       ("pgd-c16", "madry", np.nan, "smallcnn16", 3, "none", 60.0, 38.0, 25.0),
       ("pgd-c4", "madry", np.nan, "smallcnn4", 3, "none", 35.0, 28.5, 18.0),
       ("trades6-c8", "trades", 6.0, "smallcnn8", 3, "none", 70.0, 45.0, 40.0),
       ("fgsm-c8", "fast_fgsm", np.nan, "smallcnn8", 3, "none", 55.0, 37.5, 33.0),
       ("pgd-c8-e6", "madry", np.nan, "smallcnn8", 6, "none", 45.0, 32.5, 21.0),
       ("trades6-c16-e6", "trades", 6.0, "smallcnn16", 6, "crop", 65.0, 41.0, 35.0),
       ("st-c8", "undefended", np.nan, "smallcnn8", 3, "none", 0.0, 0.0, 0.0),
       ("st-c8-crop", "undefended", np.nan, "smallcnn8", 3, "crop", 0.5, 0.2, 0.0)]


def make_shifts(zoo=ZOO) -> pd.DataFrame:
    """ID, one corruption and one natural shift (both at the OOD_d value, so OOD_d is it) and
    an L-p and a non-L-p threat (L-p at OOD_t + 10, non-L-p at OOD_t - 10: OOD_t their mean)."""
    rows = []
    for model, method, beta, arch, epochs, augment, rid, rd, rt in zoo:
        base = {"model": model, "method": method, "adversarial": method != "undefended",
                "arch": arch, "epochs": epochs, "augment": augment, "trades_beta": beta}
        lp, nonlp = (min(rt + 10, 100), max(rt - 10, 0)) if rt else (0.0, 0.0)
        id_acc = 85.0 + rid / 10
        cells = (("id", "id", id_acc, rid, None),
                 ("fog", "corruption", 0.8 * id_acc, rd, None),
                 ("font_digits", "natural", 0.8 * id_acc, rd, None),
                 ("linf_1.5x", "threat", None, lp, "linf"), ("stadv", "threat", None, nonlp, "stadv"))
        for shift, family, acc, rob, kind in cells:
            rows.append({**base, "shift": shift, "family": family,
                         "severity": int(family == "corruption"),
                         "accuracy": np.nan if acc is None else acc / 100, "robustness": rob / 100,
                         "kind": kind})
    return pd.DataFrame(rows)


def sets(technique: str) -> dict:
    s = T.zoo_sets(make_shifts().drop_duplicates("model"), technique)
    return {name: list(d.sort_values("rank").level) for name, d in s.groupby("set")}


def test_zoo_sets_hold_models_that_differ_in_one_setting_alone():
    assert sets("augmentation") == {
        "method madry, arch smallcnn8, epochs 3": ["none", "crop"]}
    # widths by their number, not as text (smallcnn16 < smallcnn4 as strings)
    assert sets("model_size") == {
        "method madry, epochs 3, augment none": ["smallcnn4", "smallcnn8", "smallcnn16"]}
    assert sets("at_method") == {
        "arch smallcnn8, epochs 3, augment none": ["madry", "trades (beta 6)", "fast_fgsm"]}
    assert sets("epochs") == {
        "method madry, arch smallcnn8, augment none": ["3 epochs", "6 epochs"]}
    # standard training never enters (st-c8 / st-c8-crop would form an augmentation set)
    assert sets("extra_data") == {} and sets("architecture") == {}


def test_aer_is_the_distance_to_the_line_fitted_on_the_at_models():
    v = T.model_values(make_shifts())
    at = v[v.adversarial]
    for ood, aer in (("oodd_rob", "aer_d"), ("oodt_rob", "aer_t")):
        slope, intercept = np.polyfit(at.id_rob, at[ood], 1)
        expected = at[ood] - (slope * at.id_rob + intercept)
        assert np.allclose(at[aer], expected), aer
    assert v.loc["pgd-c8-crop", "aer_d"] > 0 > v.loc["pgd-c16", "aer_d"]
    # OOD_t split into its L-p and non-L-p means
    assert v.loc["pgd-c8", ["oodt_lp", "oodt_nonlp", "oodt_rob"]].tolist() == \
        pytest.approx([30.0, 10.0, 20.0])
    # (nearly) no robustness: AER undefined, effective accuracy still defined
    assert v.loc[["st-c8", "st-c8-crop"], ["aer_d", "aer_t"]].isna().all().all()
    assert v.loc[["st-c8", "st-c8-crop"], "er_d"].notna().all()


def test_the_near_zero_rule_reproduces_the_dashes_of_the_papers_table2():
    for row in T.metadata()["table2"]:
        id_rob, ood_rob, aer = row["paper"][1], row["paper"][3], row["paper"][5]
        assert (aer is None) == (id_rob < T.NEAR_ZERO or ood_rob < T.NEAR_ZERO), row["method"]


def test_figure7_averages_over_sets_not_over_models():
    f = pd.DataFrame({
        "technique": "model_size", "source": "zoo", "evaluated": True,
        "set": ["s1", "s1", "s2", "s2", "s2"], "model": ["a", "b", "c", "d", "e"],
        "level": ["small", "large", "small", "small", "large"], "rank": [0, 1, 0, 0, 1],
        "id_rob": [10.0, 20.0, 30.0, 50.0, 60.0], "oodd_rob": 1.0, "oodt_rob": 1.0,
        "aer_d": [1.0, 2.0, 3.0, 5.0, np.nan], "aer_t": 0.0})
    m = T.level_means(f).set_index("level")
    assert list(m.index) == ["small", "large"]
    assert m.loc["small", "id_rob"] == pytest.approx((10 + (30 + 50) / 2) / 2)   # not 30
    assert m.loc["small", ["sets", "models"]].tolist() == [2, 3]
    assert m.loc["large", "aer_d"] == pytest.approx(2.0)   # an undefined AER is left out
    assert T.level_means(f.assign(evaluated=False)).empty
    # a set with one level evaluated compares nothing
    alone = f.assign(evaluated=[True, False, True, True, True])
    assert T.level_means(alone).set_index("level").loc["small", "sets"] == 1


def test_paper_sets_follow_the_papers_tables():
    t6 = T.paper_sets("extra_data")
    assert list(t6.level) == ["none", "synthetic", "real"]
    assert t6.paper_aer_t.tolist() == [-2.18, -2.13, -1.67]
    t9 = T.paper_sets("model_size")
    assert t9.groupby("set")["level"].apply(list).map(tuple).unique().tolist() == \
        [("small", "medium", "large")]
    assert set(T.paper_sets("at_method").level) == {"PGD", "VR", "HE", "MMA", "AS"}
    assert T.paper_sets("epochs").empty


def test_metadata_ids_are_the_paper_scale_models():
    meta = T.metadata()
    paper = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    run = set(paper["oodrb"]["robustbench"])
    assert set(meta["models"]) == run                # every model run has its metadata
    for technique in T.TECHNIQUE_NAMES:
        p = T.paper_sets(technique)
        if p.empty:
            continue
        cifar = p[(p.setup == T.SETUP) & p.model.notna()]
        assert set(cifar.model) <= run, technique   # every CIFAR-10 set member is run
    kinds = {m["extra_data"] for m in meta["models"].values()}
    assert kinds <= {"none", "real", "synthetic", "real+synthetic"}


def test_tables_and_figure7_are_written_with_why_notes(tmp_path):
    shifts = tmp_path / "shifts.csv"
    write_csv(str(shifts), make_shifts())
    inputs = {"shifts": str(shifts)}
    t7 = T.technique_table(inputs, "augmentation")
    ours = t7[t7.source == "zoo"]
    assert ours.model.tolist() == ["pgd-c8", "pgd-c8-crop"] and ours.note.eq("").all()
    paper = t7[t7.source == "paper sets"]
    assert len(paper) == 12 and paper.note.str.contains("not on RobustBench").all()
    assert paper["OOD_d AER"].isna().all() and paper["paper OOD_d AER"].notna().all()
    t2 = T.table2(inputs)
    assert (t2.source == "ours").sum() == len(ZOO)
    assert t2[t2.method == "CARD-Deck"].note.str.contains("corruptions leaderboard").all()
    out = tuple(str(tmp_path / f"fig7.{e}") for e in ("pdf", "png", "csv"))
    data = T.fig7(inputs, out, {"caption": "test", "scale": "test"})
    assert (tmp_path / "fig7.png").stat().st_size > 0
    assert set(data.technique) == {"augmentation", "model_size", "at_method", "epochs"}
    assert len(read_table(out[2])) == len(data)


def test_captions_say_what_the_quick_scale_cannot_show():
    from pabench.papers import oodrb

    quick = pabench_config.load([REPO / "config.yaml"])
    meta = oodrb._technique_meta(quick, "extra_data", "model_size", "at_method")
    assert meta["extra data: zoo sets"].startswith("not at this scale: ")
    assert "smallcnn4, smallcnn8, smallcnn16" in meta["model size: zoo sets"]
    assert "(0 of 3 models run here)" in meta["extra data: the paper's sets"]
    paper = pabench_config.load([REPO / "config.yaml", REPO / "workflow/config/paper.yaml"])
    meta = oodrb._technique_meta(paper, "extra_data", "at_method")
    assert "(3 of 3 models run here)" in meta["extra data: the paper's sets"]
    assert meta["extra data: zoo sets"] == "no self-trained zoo at this scale"


def test_the_papers_sets_are_evaluated_where_their_robustbench_models_ran(tmp_path):
    # Table 6's three RobustBench models and one Table 1 model outside every set
    rb = [("Gowal2020Uncovering_70_16", 57.0, 36.0, 29.0),
          ("Gowal2021Improving_70_16_ddpm_100m", 66.0, 43.0, 34.0),
          ("Gowal2020Uncovering_70_16_extra", 66.0, 42.5, 34.0),
          ("Wong2020Fast", 43.0, 25.0, 20.0)]
    shifts = make_shifts([(m, "robustbench", np.nan, "robustbench", np.nan, "", r, d, t)
                          for m, r, d, t in rb])
    f = T.comparisons(shifts, "extra_data")
    assert f.evaluated.sum() == 3 and set(f.source) == {"paper sets"}
    assert f.set_index("level").loc["none", "id_rob"] == pytest.approx(57.0)
    means = T.level_means(f)
    assert means.level.tolist() == ["none", "synthetic", "real"]
    t2 = T.table2_rows(shifts)
    ours = t2[t2.source == "ours"].set_index("model")
    assert ours.loc["Wong2020Fast", "defence"] == "supervised L-p defence (FBF)"
    assert ours.loc["Wong2020Fast", "architecture"] == "PreActResNet-18"
    # a set member not run here says so
    t10 = T.comparisons(shifts, "at_method")
    assert "not in oodrb.robustbench" in t10.set_index("model").loc["Pang2020Boosting", "note"]
    # no zoo and no paper set (training length at paper scale): nothing drawn, no error
    assert T.comparisons(shifts, "epochs").empty
    path = tmp_path / "shifts.csv"
    write_csv(str(path), shifts)
    out = tuple(str(tmp_path / f"fig7.{e}") for e in ("pdf", "png", "csv"))
    data = T.fig7({"shifts": str(path)}, out, {"caption": "test", "scale": "test"})
    assert set(data.technique) == {"extra_data"}


def test_an_empty_panel_gives_the_reason_of_its_scale():
    quick = T.comparisons(make_shifts(), "extra_data")
    assert T.why_missing(quick, "extra_data", zoo=True).startswith(T.NOT_IN_ZOO["extra_data"])
    rb = make_shifts([("Wong2020Fast", "robustbench", np.nan, "robustbench", np.nan, "",
                       43.0, 25.0, 20.0)])
    paper = T.comparisons(rb, "extra_data")
    assert not T.has_zoo(T.model_values(rb)) and T.has_zoo(T.model_values(make_shifts()))
    why = T.why_missing(paper, "extra_data", zoo=False)
    assert why.startswith("no self-trained zoo") and "not in oodrb.robustbench" in why
    assert T.why_missing(T.comparisons(make_shifts(), "model_size"), "model_size") == ""
