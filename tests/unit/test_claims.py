"""The claims check: verdicts follow the numbers, and a claim the tables cannot decide is marked
not evaluated rather than passed or failed."""
import numpy as np
import pandas as pd
import pytest

from pabench.reporting.registry import claim_modules, papers
from pabench.reporting.claims import (MIXED, NOT_EVALUATED, NOT_REPRODUCED, REPRODUCED, Claim, _discordant,
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
    for paper in papers().values():  # every paper's results back some of its claims, or it says why not
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
    assert _discordant(a, a * 2) == 0
    assert _discordant(a, -a) == 3
    assert _discordant(a, pd.Series({"x": 1.0, "y": 1.0, "z": 2.0})) == 0  # ties are not discordant
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
    assert "| claim | source | measured | verdict | seeds |" in md


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
