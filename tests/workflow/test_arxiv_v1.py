"""The arXiv v1 overlay (workflow/config/arxiv-v1.yaml), planned by Snakemake dry runs on top of
the quick and the paper scale: PGD at eps 8, 16, 32/255 and FMN only, no AutoAttack figures."""
import re

import pytest

from conftest import REPO, planned_in, planned_outputs, run_snakemake
from pabench.core import config as pabench_config
from pabench.core import paths
from pabench.core.paths import MIN_NORM, Eps
from pabench.experiments.adversarial import plan as adv
from pabench.papers import PAPERS

pytestmark = pytest.mark.workflow

V1 = "workflow/config/arxiv-v1.yaml"
PAPER = "workflow/config/paper.yaml"
V1_EPS = {Eps.of(e).tag for e in ("8/255", "16/255", "32/255")}
AUTOATTACK = {"pa_fig14", "pa_fig15", "pa_fig16", "pa_fig17", "pa_fig18", "pa_models_imagenet"}


def _config(*overlays) -> dict:
    return pabench_config.load([REPO / "config.yaml", *(REPO / o for o in overlays)])


@pytest.mark.parametrize("base", [(), (PAPER,)], ids=["quick", "paper"])
def test_v1_overlay_plans_pgd_at_8_16_32_and_fmn_without_autoattack(workdir, base):
    out = run_snakemake(workdir, "-n", "pa", "--configfile", *base, V1).stdout
    jobs = planned_in(out)
    config = _config(*base, V1)
    per_model = {}  # every attacked model (run) -> its (attack, eps) runs, whichever jobs run them
    for rule, outputs in planned_outputs(out):
        if re.fullmatch(r"adv_attack(s_\w+)?", rule):
            for run in map(paths.parse_attack_record, outputs):
                per_model.setdefault(paths.adv_run(run.model, run.seed), []).append((run.attack, run.eps.tag))
    v1_runs = {("pgd", tag) for tag in V1_EPS} | {("fmn", MIN_NORM)}
    assert all(sorted(r) == sorted(v1_runs) for r in per_model.values()), per_model
    models = adv.models(config, adv.main_dataset(config))  # quick: the zoo; paper: + RobustBench
    assert len(per_model) >= len(models)
    rules = {rule for rule, _ in jobs}
    figures = {rule for rule in rules if rule.startswith("pa_")}
    assert figures == {e.rule for e in PAPERS["pa"].enabled(config)}
    assert {"pa_fig3", "pa_fig4", "pa_fig5", "pa_fig6", "pa_fig9", "pa_table1"} <= figures
    assert not figures & AUTOATTACK
    # The journal version at the same scale has the AutoAttack figures: the overlay removes them.
    journal = {e.rule for e in PAPERS["pa"].enabled(_config(*base))}
    assert journal - figures == {"pa_fig14", "pa_fig15", "pa_fig16"}
