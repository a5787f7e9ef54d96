"""The claims check: verdicts follow the numbers, and a claim the tables cannot decide is marked
not evaluated rather than passed or failed."""
import numpy as np
import pandas as pd
import pytest

from pabench.papers import PAPERS, claim_modules
from pabench.reporting.claims import (MIXED, NOT_EVALUATED, NOT_REPRODUCED, REPRODUCED, Claim, discordant,
                                      evaluate, load, to_markdown)
from pabench.core.io import read_table
from pabench.experiments.toy.compute import bernoulli_table

ARS = [0.0, 0.1, 0.2, 0.3, 0.5, 1.0]


def adversarial_table(pa, afr=None, beta=None, attacks=("pgd",), eps=("0.1", "0.2")):
    """A tidy adversarial table: pa(model, attack, eps, ar) gives log PA (adam); afr and beta
    likewise (defaults: AFR_T falls with AR, beta 1)."""
    afr = afr or (lambda m, a, e, ar: 1 - ar / 2)
    beta = beta or (lambda m, a, e, ar: 1.0)
    rows = [{"dataset": "mnist32", "model": m, "attack": a, "eps": e, "ar": ar,
             "logpa_adam": pa(m, a, e, ar), "beta_adam": beta(m, a, e, ar),
             "afr_true": afr(m, a, e, ar), "logpa_exact": 0.0 if ar == 0 else -1.0,
             "beta_exact": float("inf") if ar == 0 else 2.0}
            for m in ("undefended", "madry", "jpeg_rs") for a in attacks for e in eps for ar in ARS]
    return pd.DataFrame(rows)


CLAIMS = load(claim_modules())


def verdicts(tables):
    return evaluate(tables).set_index("id").verdict


def test_claims_are_well_formed():
    ids = [c.id for c in CLAIMS]
    assert len(ids) == len(set(ids)) and len(ids) >= 15
    for paper in PAPERS.values():  # every paper's results back some of its claims, or it says why not
        assert any(e.claims for e in paper.entries) != bool(paper.no_claims), paper.key
    for c in CLAIMS:
        assert c.source and c.statement.endswith(".") and c.tables


def test_claims_come_in_the_order_of_their_modules_whatever_was_imported_first():
    modules = claim_modules()
    ordered = load(modules[::-1])  # every module was imported already, in the other order
    assert [c.module for c in ordered] == sorted((c.module for c in CLAIMS), key=modules[::-1].index)
    assert [c.id for c in load(modules[:1])] == [c.id for c in CLAIMS if c.module == modules[0]]


def test_verdict_follows_the_numbers():
    weakest = adversarial_table(lambda m, a, e, ar: -ar * (10 if m == "undefended" else 1))
    strongest = adversarial_table(lambda m, a, e, ar: -ar * (0.1 if m == "undefended" else 1))
    assert verdicts({"adversarial": weakest})["adv-pgd-undefended-lowest"] == REPRODUCED
    assert verdicts({"adversarial": strongest})["adv-pgd-undefended-lowest"] == NOT_REPRODUCED


def test_afr_overestimation_needs_both_halves():
    """AFR_T ranks the undefended model above a defended one while PA ranks it last."""
    pa = lambda m, a, e, ar: -ar * (10 if m == "undefended" else 1)  # noqa: E731
    afr_high = lambda m, a, e, ar: 1.0 if m == "undefended" else 1 - ar  # noqa: E731
    afr_low = lambda m, a, e, ar: 1 - ar if m == "undefended" else 1.0  # noqa: E731
    assert verdicts({"adversarial": adversarial_table(pa, afr_high)})["adv-pgd-afr-overestimates"] == REPRODUCED
    assert verdicts({"adversarial": adversarial_table(pa, afr_low)})["adv-pgd-afr-overestimates"] == NOT_REPRODUCED


def test_missing_models_attacks_and_tables_are_not_evaluated():
    table = adversarial_table(lambda m, a, e, ar: -ar)
    table = table[table.model != "undefended"]
    v = verdicts({"adversarial": table})
    assert v["adv-pgd-undefended-lowest"] == NOT_EVALUATED   # no undefended model
    assert v["adv-fmn-jpeg-rs-best"] == NOT_EVALUATED         # no FMN runs
    assert v["adv-apgd-top-defenses"] == NOT_EVALUATED        # no RobustBench models
    assert v["dg-erm-irm-lisa"] == NOT_EVALUATED              # no dg table at all
    results = evaluate({"adversarial": table}).set_index("id")
    assert "no undefended model" in results.loc["adv-pgd-undefended-lowest", "measured"]


def test_exact_solver_claim_reads_infinite_beta_from_csv(tmp_path):
    path = tmp_path / "adv.csv"
    adversarial_table(lambda m, a, e, ar: -ar).to_csv(path, index=False)
    assert verdicts({"adversarial": read_table(path)})["adv-exact-no-shift"] == REPRODUCED


def test_toy_claims_on_a_real_bernoulli_table():
    table = bernoulli_table(n_samples=200, n_probabilities=6, seeds=[0], solvers=["exact"],
                            adam_epochs=1, adam={"lr": 0.1, "batch_size": 64, "beta0": 1.0})
    v = verdicts({"toy_bernoulli": table})
    assert v["toy-constant-is-robust"] == REPRODUCED
    assert v["toy-random-is-not"] == REPRODUCED
    assert v["toy-accuracy-inconsistent"] == REPRODUCED
    # Swapping the classifiers' names must break the claims.
    swapped = table.replace({"classifier": {"constant": "random", "random": "constant"}})
    assert verdicts({"toy_bernoulli": swapped})["toy-random-is-not"] == NOT_REPRODUCED


def test_dg_ordering_and_model_selection():
    dg = pd.DataFrame([{"algorithm": a, "seed": 0, "n_shift_factors": k, "shift_ratio": 1.0,
                        "logpa_adam": -k * w, "beta_adam": b, "afr_true": 1 - 0.1 * k}
                       for a, w, b in (("erm", 3, 1.0), ("irm", 2, 2.0), ("lisa", 1, 3.0))
                       for k in range(1, 6)])
    v = verdicts({"dg": dg})
    assert v["dg-erm-irm-lisa"] == REPRODUCED and v["dg-lisa-highest-beta"] == REPRODUCED
    assert v["dg-erm-above-irm-mild"] == NOT_REPRODUCED and v["dg-accuracy-falls"] == REPRODUCED
    ms = pd.DataFrame([{"setting": s, "algorithm": a, "seed": 0, "env": f"test_{t}",
                        "acc_best_acc": 0.5, "acc_best_pa": 0.5 + (0.1 if a == "irm" else -0.05)}
                       for s in ("ZGO", "1-CGO", "ZSO") for a in ("erm", "irm") for t in (1, 2)])
    v = verdicts({"model_selection": ms})
    assert v["ms-irm-benefits-more"] == REPRODUCED
    assert v["ms-pa-selects-better"] == NOT_REPRODUCED  # 6 cells up, 6 down: not "more"


def test_discordant_pairs_and_markdown():
    a = pd.Series({"x": 1.0, "y": 2.0, "z": 3.0})
    assert discordant(a, a * 2) == 0
    assert discordant(a, -a) == 3
    assert discordant(a, pd.Series({"x": 1.0, "y": 1.0, "z": 2.0})) == 0  # ties are not discordant
    md = to_markdown(evaluate({}), "test")
    assert md.startswith("# Claims check (test scale)") and f"{len(CLAIMS)} {NOT_EVALUATED}" in md


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: c.id)
def test_every_claim_is_not_evaluated_without_its_tables(claim):
    row = evaluate({}).set_index("id").loc[claim.id]
    assert row.verdict == NOT_EVALUATED and "no " in row.measured


# ------------------------------------------------------------------ over seeds, degenerate models
def seeded(tables: dict) -> pd.DataFrame:
    """{seed: table} stacked with a seed column."""
    return pd.concat([t.assign(seed=s) for s, t in tables.items()], ignore_index=True)


WEAKEST = lambda m, a, e, ar: -ar * (10 if m == "undefended" else 1)  # noqa: E731
STRONGEST = lambda m, a, e, ar: -ar * (0.1 if m == "undefended" else 1)  # noqa: E731


def test_claims_are_checked_per_seed_and_mixed_when_seeds_disagree():
    adv = seeded({0: adversarial_table(WEAKEST), 1: adversarial_table(STRONGEST),
                  2: adversarial_table(WEAKEST)})
    row = evaluate({"adversarial": adv}).set_index("id").loc["adv-pgd-undefended-lowest"]
    assert (row.verdict, row.seeds_holding, row.seeds_note) == (MIXED, "2/3", "")
    assert row.measured.startswith("seed 0: eps 0.1: undefended -10") and "seed 1: eps 0.1: undefended -0.1" in row.measured
    every = seeded({s: adversarial_table(WEAKEST) for s in (0, 1, 2)})
    row = evaluate({"adversarial": every}).set_index("id").loc["adv-pgd-undefended-lowest"]
    assert (row.verdict, row.seeds_holding) == (REPRODUCED, "3/3")
    assert not row.measured.startswith("seed")  # the same text in every seed is said once
    none = seeded({s: adversarial_table(STRONGEST) for s in (0, 1, 2)})
    assert verdicts({"adversarial": none})["adv-pgd-undefended-lowest"] == NOT_REPRODUCED


def test_rows_without_a_seed_belong_to_every_seed():
    """A pretrained model (seed empty) is compared with each seed's zoo models."""
    adv = seeded({s: adversarial_table(WEAKEST) for s in (0, 1, 2)})
    adv.loc[adv.model == "madry", "seed"] = None
    adv = adv.drop_duplicates(["model", "seed", "attack", "eps", "ar"])
    row = evaluate({"adversarial": adv}).set_index("id").loc["adv-pgd-undefended-lowest"]
    assert (row.verdict, row.seeds_holding) == (REPRODUCED, "3/3")


def test_fewer_than_three_seeds_is_marked_in_the_table_and_the_markdown():
    dg = pd.DataFrame([{"algorithm": a, "seed": 0, "n_shift_factors": k, "shift_ratio": 1.0,
                        "logpa_adam": -k * w, "beta_adam": 1.0, "afr_true": 1 - 0.1 * k}
                       for a, w in (("erm", 3), ("irm", 2), ("lisa", 1)) for k in range(1, 6)])
    results = evaluate({"dg": dg}, load(["pabench.experiments.dg.claims"]))
    row = results.set_index("id").loc["dg-erm-irm-lisa"]
    assert (row.verdict, row.seeds_holding) == (REPRODUCED, "1/1")
    assert row.seeds_note == "1 seed: not enough for a verdict over seeds"
    md = to_markdown(results, "quick")
    assert "| reproduced 1/1 * | 1 seed: not enough for a verdict over seeds |" in md
    assert "| claim | source | PA solver | measured | verdict | seeds |" in md


def test_a_claim_can_be_checked_once_over_every_seed():
    """`unseeded`: one check on every row, the reason in the note (here: rows of three seeds)."""
    rows = Claim("tests", "t-rows", "test", "Nine rows.", ("t",),
                 lambda t: (len(t) == 9, f"{len(t)} rows"), unseeded="a statement over the zoo")
    per_seed = Claim("tests", "t-rows-per-seed", "test", "Nine rows.", ("t",),
                     lambda t: (len(t) == 9, f"{len(t)} rows"))
    table = pd.DataFrame({"seed": [0, 1, 2] * 3, "x": range(9)})
    r = evaluate({"t": table}, [rows, per_seed]).set_index("id")
    assert (r.loc["t-rows", "verdict"], r.loc["t-rows", "seeds_note"]) == (REPRODUCED, "a statement over the zoo")
    assert r.loc["t-rows", "seeds_holding"] == "" and r.loc["t-rows", "measured"] == "9 rows"
    assert (r.loc["t-rows-per-seed", "verdict"], r.loc["t-rows-per-seed", "measured"]) == (NOT_REPRODUCED, "3 rows")
    # Without any seed the claim runs once, and says that one run is not enough.
    once = evaluate({"t": table.drop(columns="seed")}, [per_seed])
    assert once.verdict.iloc[0] == REPRODUCED and once.seeds_note.iloc[0].startswith("no seeds in its tables")
    assert "| reproduced * |" in to_markdown(once, "test")


def scored_model(model: str, seed: int, learned: bool, flip: float) -> pd.DataFrame:
    """One zoo model's real adversarial scores (pabench's scoring) under PGD at two eps: a model
    that learned (or one that ignores its input), attacked on a share `flip` of the images."""
    from pabench.core.paths import AttackRun, Eps
    from pabench.experiments.adversarial.scoring import score_records
    from pabench.metrics.settings import PASettings

    rng = np.random.default_rng([seed, len(model)])
    n, k = 120, 5
    labels = rng.integers(0, k, n)
    clean = (np.eye(k)[labels] * 4 if learned else 0) + rng.normal(size=(n, k))
    records = {}
    for eps in ("0.1", "0.2"):
        hit = rng.random(n) < flip * float(eps) / 0.2
        adv = np.where(hit[:, None], np.roll(clean, 1, axis=1), clean)
        records[AttackRun("mnist32", model, "pgd", Eps.of(eps), seed)] = {
            "clean_scores": clean, "adv_scores": adv, "linf": rng.uniform(0, float(eps), n),
            "labels": labels, "success": adv.argmax(1) != labels}
    table = score_records(records, ARS, PASettings(epochs=10))
    return table.assign(dataset="mnist32", model=model, seed=seed)


def test_a_seed_whose_model_is_at_chance_is_not_evidence():
    """Three seeds of the zoo scored for real; in seed 2 the undefended model learned nothing:
    it is flagged, left out, and that seed cannot decide the claim."""
    tables = [scored_model("undefended", s, learned=s != 2, flip=1.0) for s in (0, 1, 2)]
    tables += [scored_model("madry", s, learned=True, flip=0.3) for s in (0, 1, 2)]
    adv = pd.concat(tables, ignore_index=True)
    flagged = adv.groupby(["model", "seed"]).degenerate.first()
    assert flagged.sum() == 1 and flagged[("undefended", 2)]
    row = evaluate({"adversarial": adv}).set_index("id").loc["adv-pgd-undefended-lowest"]
    assert (row.verdict, row.seeds_holding) == (REPRODUCED, "2/2")
    assert row.seeds_note == "2 of 3 seeds evaluated; 2 seeds: not enough for a verdict over seeds"
    assert "seed 2: no undefended model [left out, not evidence (degenerate): mnist32 undefended s2]" in row.measured
    # Counted as evidence, the model at chance would have decided seed 2 as well.
    row = evaluate({"adversarial": adv.assign(degenerate=False)}).set_index("id").loc["adv-pgd-undefended-lowest"]
    assert row.seeds_holding in ("2/3", "3/3") and "left out" not in row.measured


def test_a_claim_with_only_degenerate_models_is_not_evaluated():
    adv = seeded({s: adversarial_table(WEAKEST) for s in (0, 1, 2)}).assign(degenerate=True)
    row = evaluate({"adversarial": adv}).set_index("id").loc["adv-pgd-undefended-lowest"]
    assert row.verdict == NOT_EVALUATED and row.seeds_holding == ""
    assert row.measured == "not evidence: all 3 models degenerate (near chance or PA at beta* = 0)"
    assert row.seeds_note == "0 of 3 seeds evaluated"


# ------------------------------------------------------------------ PA solvers, new statements
def test_solver_dependent_claims_report_both_verdicts():
    """adam's log PA at AR = 0 sits below 0 by a model-dependent offset (beta cannot reach
    infinity), the exact solver's is 0 for every model: the same table can fail the claim with
    adam and pass it with the exact solver.  Both rows are reported, each naming its solver."""
    offset = {"undefended": -30.0, "madry": -1.0, "jpeg_rs": -2.0}   # adam at AR = 0
    adam = lambda m, a, e, ar: offset[m] - ar * (10 if m == "undefended" else 1)  # noqa: E731
    afr = lambda m, a, e, ar: 1.0 if m == "undefended" else 1 - ar  # noqa: E731
    table = adversarial_table(adam, afr, attacks=("pgd", "fmn"))
    exact = lambda r: 0.0 if r.ar == 0 else -r.ar * (10 if r.model == "undefended" else 1)  # noqa: E731
    table["logpa_exact"] = table.apply(exact, axis=1)
    # adam ranks the undefended model last at every AR, exact as well from AR > 0: both hold ...
    results = evaluate({"adversarial": table}).set_index("id")
    assert results.loc["adv-fmn-afr-overestimates", "solver"] == "adam"
    assert results.loc["adv-fmn-afr-overestimates-exact", "solver"] == "exact"
    assert results.loc["adv-fmn-afr-overestimates-exact", "verdict"] == REPRODUCED
    # ... but with the offset reversed (adam favours the undefended model), only exact holds.
    offset.update(undefended=-0.1, madry=-40.0, jpeg_rs=-40.0)
    table["logpa_adam"] = [adam(r.model, r.attack, r.eps, r.ar) for r in table.itertuples()]
    v = verdicts({"adversarial": table})
    assert v["adv-fmn-afr-overestimates"] == NOT_REPRODUCED
    assert v["adv-fmn-afr-overestimates-exact"] == REPRODUCED
    assert v["adv-exact-no-shift"] == REPRODUCED and "adv-exact-no-shift-exact" not in v
    solvers = evaluate({}).set_index("id").solver
    assert solvers["adv-ar0-ranking"] == "adam" and solvers["toy-constant-is-robust"] == "exact"
    assert solvers["dg-accuracy-falls"] == "" and solvers["ms-pa-selects-better-exact"] == "exact"


def ms_table(delta: dict, no_preference=()) -> pd.DataFrame:
    """Model-selection results, ID validation, both solvers: delta[(setting, algorithm)] is the
    PA-selected minus accuracy-selected accuracy; (setting, algorithm, solver) in
    no_preference had a tied best validation PA (no selection)."""
    rows = []
    for (setting, algorithm), d in delta.items():
        for solver in ("adam", "exact"):
            tie = (setting, algorithm, solver) in no_preference
            for env in ("test_1", "test_2"):
                rows.append({"setting": setting, "algorithm": algorithm, "seed": 0, "env": env,
                             "validation": "ID", "solver": solver, "acc_best_acc": 0.5,
                             "acc_best_pa": np.nan if tie else 0.5 + d, "pa_preference": not tie})
                rows.append({**rows[-1], "validation": "SD", "acc_best_pa": 0.0})  # not Table 1's split
    return pd.DataFrame(rows)


def test_model_selection_counts_runs_without_a_pa_preference_apart():
    """ZGO's PA tied at its floor: counted as no preference, neither a win nor a loss (the old
    check counted it as 'equal'); a claim with no compared cell is not evaluated."""
    ms = ms_table({("ZGO", "erm"): 0.0, ("ZGO", "irm"): 0.0, ("1-CGO", "erm"): 0.1,
                   ("1-CGO", "irm"): 0.2, ("3-CGO", "irm"): -0.05},
                  no_preference={("ZGO", "erm", "adam"), ("ZGO", "irm", "adam"), ("ZGO", "erm", "exact"),
                                 ("ZGO", "irm", "exact")})
    r = evaluate({"model_selection": ms}).set_index("id")
    assert r.loc["ms-pa-selects-better", "verdict"] == REPRODUCED
    assert r.loc["ms-pa-selects-better", "measured"] == "higher in 4, lower in 2, equal in 0, no preference in 4 of 10 cells"
    assert r.loc["ms-partial-go-gain", "measured"].startswith("mean difference 8.333 points over 6 cells")
    assert r.loc["ms-irm-benefits-more", "verdict"] == NOT_REPRODUCED
    assert r.loc["ms-irm-benefits-more", "measured"] == "IRM 7.5, ERM 10 points, no preference in 4"
    tied = ms_table({("1-CGO", "irm"): 0.1}, no_preference={("1-CGO", "irm", "adam")})
    r = evaluate({"model_selection": tied}).set_index("id")
    assert r.loc["ms-pa-selects-better", "verdict"] == NOT_EVALUATED
    assert "no cell where both criteria chose an epoch" in r.loc["ms-pa-selects-better", "measured"]
    assert r.loc["ms-pa-selects-better-exact", "verdict"] == REPRODUCED


def dg_table(confidence: dict, seeds=(0,), spread=0.0, gap=1.0) -> pd.DataFrame:
    """A DG table with confidence per algorithm, log PA = -k * weight (+- spread over seeds)."""
    weight = {"erm": 3.0, "irm": 2.0, "lisa": 1.0}
    return pd.DataFrame([{"algorithm": a, "seed": s, "n_shift_factors": k, "shift_ratio": sr,
                          "logpa_adam": -k * weight[a] * gap + spread * (s - 1),
                          "logpa_exact": -k * weight[a] * gap + spread * (s - 1),
                          "beta_adam": 1.0, "beta_exact": 1.0, "afr_true": 0.9,
                          "confidence": confidence[a] - 0.01 * k, "confidence_env0": confidence[a]}
                         for a in weight for s in seeds for k in range(1, 6) for sr in (0.2, 1.0)])


def test_figure8_confidence_ordering_says_where_lisa_stands():
    v = evaluate({"dg": dg_table({"erm": 0.98, "irm": 0.97, "lisa": 0.91})}).set_index("id")
    row = v.loc["dg-lisa-most-confident"]
    assert row.verdict == NOT_REPRODUCED
    assert row.measured.startswith("LISA the most confident in 0 and the least in 6 of 6: env0: ERM 0.98, IRM 0.97, LISA 0.91")
    assert verdicts({"dg": dg_table({"erm": 0.9, "irm": 0.95, "lisa": 0.99})})["dg-lisa-most-confident"] == REPRODUCED


def test_figure7_separation_is_judged_against_the_spread_over_seeds():
    apart = dg_table({"erm": 0.9, "irm": 0.9, "lisa": 0.9}, seeds=(0, 1, 2), spread=0.1)
    r = evaluate({"dg": apart}).set_index("id")
    assert r.loc["dg-pa-separates-algorithms", "verdict"] == REPRODUCED
    assert r.loc["dg-pa-separates-algorithms", "measured"].startswith("separated at 30 of 30")
    assert r.loc["dg-pa-separates-algorithms", "seeds_note"].startswith("separation is judged")
    mixed = dg_table({"erm": 0.9, "irm": 0.9, "lisa": 0.9}, seeds=(0, 1, 2), spread=1.0)
    row = evaluate({"dg": mixed}).set_index("id").loc["dg-pa-separates-algorithms-exact"]
    assert row.verdict == NOT_REPRODUCED and "overlapping e.g. SR 0.2 #SF 1 ERM-IRM" in row.measured
    one_seed = dg_table({"erm": 0.9, "irm": 0.9, "lisa": 0.9})
    assert verdicts({"dg": one_seed})["dg-pa-separates-algorithms"] == NOT_EVALUATED


def test_imagenet_afr_needs_a_large_adversarial_ratio_to_rank_as_pa_does():
    ars = [0.0, 0.2, 0.5, 0.8, 1.0]
    robust = {"Standard": 0.0, "Salman": 0.5, "Engstrom": 0.8}

    def table(afr):
        return pd.DataFrame([{"model": m, "attack": "apgd-ce", "eps": e, "ar": ar,
                              "logpa_adam": -ar * (1 - r) * 100 - 1, "logpa_exact": -ar * (1 - r) * 100,
                              "afr_true": afr(r, ar)} for m, r in robust.items() for e in ("1/255", "4/255")
                             for ar in ars])
    # Clean accuracy ranks the models the other way round (Standard the most accurate): AFR_T
    # agrees with its AR = 1 ranking only once most images are attacked.
    late = table(lambda r, ar: (1 - ar) * (0.9 - 0.3 * r) + ar * r)
    row = evaluate({"imagenet": late}).set_index("id").loc["adv-imagenet-afr-needs-large-ar"]
    assert row.verdict == REPRODUCED
    assert "PA discordant with AFR_T(AR = 1) at AR none, AFR_T at AR 0.2" in row.measured
    early = table(lambda r, ar: 0.5 + 0.1 * r - 0.3 * ar)   # AFR_T ranks alike at every AR
    assert verdicts({"imagenet": early})["adv-imagenet-afr-needs-large-ar-exact"] == NOT_REPRODUCED
