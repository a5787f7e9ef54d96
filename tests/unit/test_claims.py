"""The claims check: verdicts follow the numbers, and a claim the tables cannot decide is marked
not evaluated rather than passed or failed."""
import pandas as pd
import pytest

from pabench.reporting.registry import claim_modules, papers
from pabench.reporting.claims import (NOT_EVALUATED, NOT_REPRODUCED, REPRODUCED, _discordant, evaluate, load,
                                      to_markdown)
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
    for paper in papers().values():  # every paper's results back some of its claims
        assert any(e.claims for e in paper.entries), paper.key
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
