"""Figure 10 through Snakemake: planned at the quick scale (labelled sentences, MiniLM with a
logistic head) and the paper scale, not the test scale, and built end to end (the rules' scripts,
W&B runs, the figure) from the rehearsal's stand-ins: a fake IMDB archive in the published layout
and a tiny random DistilBERT loaded by path.  One strategy at one W keeps it within a minute on 2
cores; tests/unit/test_text_model.py covers every strategy, tests/unit/test_text_encoder.py the
quick scale's classifier."""
import pandas as pd
import pytest

from conftest import planned, run_snakemake
from pabench.tools import rehearsal
from pabench.core import paths

pytestmark = pytest.mark.workflow

TEXT_RULES = {"text_data", "text_model", "text_logits", "text_score", "pa_fig10"}


def test_figure_10_is_planned_at_the_quick_and_paper_scales(workdir):
    # quick: a dry run plans every text rule, the sentences' folder unread (a missing one fails
    # only Figure 10's jobs, saying how to get it)
    (workdir / "nowhere.yaml").write_text("text:\n  sentences: {folder: nowhere}\n")
    # (the test and paper scales' text rules: test_workflow.py, test_dry_run_at_every_scale)
    quick = [rule for rule, _ in planned(workdir, "pa", "--configfile", "nowhere.yaml")]
    assert TEXT_RULES <= set(quick) and quick.count("text_logits") == 1 + 3 * 4


def test_figure_10_builds_from_stand_ins(workdir):
    rehearsal.write_text(workdir / "data/stand-in")
    (workdir / "text.yaml").write_text(
        "text:\n  enabled: true\n  data: imdb\n  head: null\n"
        "  imdb: {archive: data/stand-in/aclImdb_v1.tar.gz, md5: null}\n"
        "  n: 8\n  strategies: [amplification]\n  powers: [1]\n"
        "  model: data/stand-in/distilbert\n  revision: null\n  batch_size: 4\n  device: cpu\n"
        "  pa_epochs: 3\n")
    run_snakemake(workdir, "--cores", "2", "--configfile", "text.yaml", "--",
                  *paths.figure_files("pa", "fig10").values())
    table = pd.read_csv(workdir / paths.TEXT_TABLE)
    assert table[["strategy", "power", "replacements", "n"]].values.tolist() == \
        [["amplification", 1, 2, 8]]
    assert table.mean_replacements_made.iloc[0] == 2.0
    figure = pd.read_csv(workdir / "figures/pa/fig10.csv")
    assert figure.logpa_adam.tolist() == table.logpa_adam.tolist()
    assert (workdir / paths.TEXT_MODEL / "config.json").is_file()
    assert (workdir / "data/text/logits/clean.npz").is_file()
    assert list((workdir / "data/wandb").rglob("offline-run-*"))   # one W&B run per job
