"""The README's generated table of results, and `pabench where`."""
import inspect

import pytest
from conftest import REPO

from pabench import cli
from pabench.core import config as pabench_config
from pabench.reporting import status, where
from pabench.papers import PAPERS
from pabench.reporting.registry import Entry


def _block(path, block):
    return path.read_text().split(status.begin(block), 1)[1].split(status.END, 1)[0].strip()


def test_the_readme_and_results_tables_are_the_registries():
    """Adding, removing or disabling an entry without `pabench status --write README.md
    docs/results.md` fails."""
    assert _block(REPO / "README.md", "summary") == status.summary(REPO)
    assert _block(REPO / "docs/results.md", "table") == status.table(REPO)
    every = {f"figures/{p.key}/{e.name}" for p in PAPERS.values() for e in p.entries}
    assert {r["file"] for r in status.rows(REPO)} == every


def test_status_cells_say_built_not_at_this_scale_or_what_is_needed(monkeypatch):
    rows = {r["file"]: r for r in status.rows(REPO)}
    assert rows["figures/pa/fig1"]["quick"] == "yes"
    assert rows["figures/oodrb/models"]["paper"] == "-"       # nothing is trained at paper scale
    assert rows["figures/pa/fig17"]["paper"] == "needs `adversarial.imagenet.folder`"
    assert status._label("Figure 7: PA (adam; exact) of ERM. More.") == ("Figure 7", "PA (adam; exact) of ERM")
    named = [{"name": n, "file": f"figures/x/{f}"} for n, f in
             [("Figure 1", "a"), ("Figure 2", "b"), ("Figure 3", "c"), ("Figure 5", "d"),
              ("Figure 2a", "e"), ("Table 1", "f"), ("figure", "grid"), ("Figure 10 (appendix)", "g")]]
    assert status._names(named) == "Figures 1, 2, 2a, 3, 5, 10; Table 1; grid"
    assert status._names(named[:4]) == "Figures 1-3, 5"
    summary = status.summary(REPO).splitlines()
    pa = next(line for line in summary if line.startswith("| PA robustness paper (TMLR)"))
    assert "Figures 1-16" in pa and "Figures 17, 18" in pa and "`adversarial.imagenet.folder`" in pa


def test_write_replaces_only_between_the_markers(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{status.begin('summary')}\nOLD SUMMARY\n{status.END}\nmid\n"
                      f"{status.begin('table')}\nOLD TABLE\n{status.END}\nafter\n")
    assert status.write(readme, REPO)
    text = readme.read_text()
    assert text.startswith("intro\n") and text.endswith(f"{status.END}\nafter\n")
    assert f"{status.END}\nmid\n" in text and "OLD" not in text
    assert "| `figures/pa/fig1` |" in text and "| PA robustness paper (TMLR) |" in text
    assert not status.write(readme, REPO)                     # already current
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="no status block"):
        status.write(readme, REPO)


def test_where_finds_the_function_line_inputs_and_the_keys_read(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    config = pabench_config.load(["config.yaml"])
    for target in ("figures/oodrb/fig3.pdf", "figures/oodrb/fig3", "oodrb_fig3", str(REPO / "figures/oodrb/fig3.png")):
        assert where.find(target)[1].name == "fig3"
    text = where.describe("figures/oodrb/fig3.pdf", config)
    fn = PAPERS["oodrb"].entries[[e.name for e in PAPERS["oodrb"].entries].index("fig3")].function
    line = inspect.getsourcelines(fn)[1]
    assert f"src/pabench/experiments/oodrb/figures.py:{line})" in text
    assert "input     shifts: data/results/oodrb/shifts.csv" in text
    # the keys an entry reads, most specific only
    probe = Entry("pa", "probe", status.table, "toy", "Probe: x",
                  inputs=lambda c: {"a": c["oodrb"]["zoo"]["defaults"]["epochs"]},
                  meta=lambda c: {"n": c["oodrb"].get("n_test"), "m": c.get("missing_key")})
    assert where.keys_read(probe, config) == ["oodrb.n_test", "oodrb.zoo.defaults.epochs"]
    assert cli.main(["where", "figures/nothing.pdf"]) == 2
    assert "not a registered figure or table" in capsys.readouterr().err
