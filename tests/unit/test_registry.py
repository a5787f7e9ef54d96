"""The paper registries, the rules made from them, the resources table and the config schema's
agreement with the code: what every new figure or paper relies on."""
import re
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, scale_config
from pabench.core import resources
from pabench.core.config import load as load_config
from pabench.experiments.avgcase import plan as avg_plan
from pabench.experiments.oodrb import plan as oodrb_plan
from pabench.experiments.toy import figures as toy_figures
from pabench.papers import PAPERS, claim_modules, claim_tables, unbuildable
from pabench.reporting import registry
from pabench.reporting.claims import load

PAPER_SCALE = [REPO / "config.yaml", REPO / "workflow/config/paper.yaml"]
CONFIGS = {"test": scale_config(), "paper": load_config(PAPER_SCALE),
           "arxiv-v1": load_config([*PAPER_SCALE, REPO / "workflow/config/arxiv-v1.yaml"])}
ENTRIES = [e for paper in PAPERS.values() for e in paper.entries]


def test_rule_names_and_outputs_are_unique_across_papers():
    rules = [e.rule for e in ENTRIES]
    assert len(rules) == len(set(rules)) and all(re.fullmatch(r"[a-z]+_[a-z0-9_]+", r) for r in rules)
    outputs = [p for e in ENTRIES for p in e.outputs().values()]
    assert len(outputs) == len(set(outputs))
    for e in ENTRIES:
        assert all(p.startswith(f"figures/{e.paper}/{e.name}.") for p in e.outputs().values())
    assert not set(PAPERS) & set(rules)  # a paper's target rule never collides with an entry


def test_every_entry_resolves_and_builds_its_rule_inputs_at_every_scale():
    for scale, config in CONFIGS.items():
        for paper in PAPERS.values():
            for e in paper.enabled(config):
                assert registry.load_function(e.spec) is e.function, e.spec
                inputs = e.inputs(config)
                for name, value in inputs.items():
                    assert re.fullmatch(r"[a-z_]+", name)
                    paths = [value] if isinstance(value, str) else value
                    assert all(isinstance(p, str) and "{" not in p for p in paths), (scale, e.name, name)
                meta = e.provenance(config)
                assert meta["caption"] == e.caption and meta["scale"] == config["scale"]
                assert isinstance(e.args(config), dict)


def test_claims_named_by_entries_exist_and_every_claim_is_backed():
    ids = [c.id for c in load(claim_modules())]
    assert len(ids) == len(set(ids))
    named = [c for e in ENTRIES for c in e.claims]
    assert set(named) <= set(ids), set(named) - set(ids)
    assert set(ids) <= set(named), f"claims no figure or table backs: {set(ids) - set(named)}"


def test_claim_tables_name_one_file_each():
    for config in CONFIGS.values():
        tables = claim_tables(config)
        needed = {t for c in load(claim_modules()) for t in c.tables}
        # ImageNet runs only with a folder of images, the text shifts only at the paper scale
        assert needed - set(tables) <= ({"imagenet"} if config["text"]["enabled"] else {"imagenet", "text"})


def _nested():
    def draw(inputs):
        return None
    return draw


def test_a_bad_entry_is_refused():
    with pytest.raises(ValueError, match="unknown experiment"):
        registry.Entry("pa", "figX", toy_figures.fig1, "nowhere", "caption")
    with pytest.raises(ValueError, match="kind"):
        registry.Entry("pa", "figX", toy_figures.fig1, "toy", "caption", kind="movie")
    # a job imports the function by its module and name: a string, a lambda or a nested
    # function cannot be found that way
    for bad in ("pabench.experiments.toy.figures:fig1", lambda inputs: None, _nested()):
        with pytest.raises(ValueError, match="module-level function"):
            registry.Entry("pa", "figX", bad, "toy", "caption")
    entry = registry.Entry("pa", "fig1", toy_figures.fig1, "toy", "caption")
    with pytest.raises(ValueError, match="duplicate entries"):
        registry.Paper("pa", "title", (entry, entry))


@pytest.mark.slow
def test_figure_and_table_functions_drawn_from_tables_import_no_torch():
    """A job that draws from CSVs (or the config) must not pay PyTorch's import."""
    needs_torch = {"fig8", "fig11", "fig13"}  # logits files, checkpoints, rendered images
    modules = sorted({e.spec.partition(":")[0] for e in ENTRIES if e.name not in needs_torch}
                     | {"pabench.reporting.tables", "pabench.reporting.claims", "pabench.runtime.workflow",
                        *claim_modules()})
    code = f"import sys\nfor m in {modules!r}:\n    __import__(m)\nprint('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_planning_the_workflow_imports_no_torch():
    code = ("import sys, pabench.papers, pabench.core.config, pabench.experiments.dg.plan, "
            "pabench.experiments.adversarial.plan, pabench.experiments.oodrb.plan, "
            "pabench.experiments.oodrb.checks\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _workflow_rules() -> set[str]:
    text = "".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk"))
    looped = {f"avg_{kind}" for kind in avg_plan.EVALUATIONS}  # avgcase.smk makes these in a loop
    looped |= {f"oodrb_{kind}" for kind in oodrb_plan.RESULTS}  # and oodrb.smk these
    looped |= {"adv_attacks", "adv_scores"}  # adversarial.smk: adv_attacks_<dataset>, ...
    return set(re.findall(r"^\s*rule (\w+):", text, flags=re.M)) | {"timings"} | looped


def test_every_rule_declares_threads_and_resources():
    for path in (REPO / "workflow/rules").glob("*.smk"):
        for block in re.split(r"\n(?=\s*rule\b)", path.read_text())[1:]:
            if "script:" in block:
                assert "threads:" in block and "resources.of(config" in block, (path.name, block[:60])


@pytest.mark.parametrize("scale", ["test", "paper"])
def test_resources_cover_every_rule_at_every_scale(scale):
    config = CONFIGS[scale]
    for rule in _workflow_rules():
        got = resources.of(config, rule)
        assert got["mem_mb"] > 0 and got["runtime"] > 0
    for e in ENTRIES:
        assert resources.of(config, e.rule, default=e.kind)["mem_mb"] > 0
    with pytest.raises(KeyError, match="no resources for rule 'nope'"):
        resources.of(config, "nope")


def test_resources_table_names_only_known_rules():
    table = yaml.safe_load((REPO / "workflow/resources.yaml").read_text())
    known = _workflow_rules() | {e.rule for e in ENTRIES} | {"figure", "table"}
    for scale, section in table.items():
        assert set(section) <= known, (scale, set(section) - known)
        assert set(section) == set(table["quick"]), scale


def _enum(schema: dict, *path) -> list:
    node = schema
    for key in path:
        node = node[key]
    return node["enum"]


def test_schema_enums_match_the_code():
    """The schema's choices and the code's constants have to agree (one is not derived from the other)."""
    from pabench.attacks.datasets import DATASETS
    from pabench.attacks.models import ARCHS, METHODS
    from pabench.attacks.records import ATTACKS
    from pabench.datasets.diagvib import IMAGE_SIZES
    from pabench.datasets.mnist import SOURCES
    from pabench.metrics.pa import SOLVERS
    from pabench.models import BACKBONES
    from pabench.runtime.tracking import MODES
    from pabench.training.algorithms import ALGORITHMS

    s = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    props = s["properties"]
    assert _enum(s["$defs"], "attacks", "propertyNames") == list(ATTACKS)
    assert _enum(props["adversarial"]["properties"]["use_attacks"], "items") == list(ATTACKS)
    assert _enum(s["$defs"], "arch") == list(ARCHS)
    assert _enum(props["adversarial"]["properties"]["zoo"]["properties"]["models"], "items") == list(METHODS)
    assert set(_enum(props["adversarial"]["properties"], "dataset")) == set(DATASETS) - {"imagenet"}
    assert _enum(props["dg"]["properties"]["algorithms"], "items") == list(ALGORITHMS)
    assert _enum(props["dg"]["properties"]["model_selection"]["properties"]["algorithms"], "items") == list(ALGORITHMS)
    assert _enum(props["dg"]["properties"], "backbone") == list(BACKBONES)
    assert _enum(props["data"]["properties"]["mnist"]["properties"], "source") == list(SOURCES)
    assert _enum(props["diagvib"]["properties"], "image_size") == list(IMAGE_SIZES)
    assert _enum(props["toy"]["properties"]["bernoulli"]["properties"]["solvers"], "items") == list(SOLVERS)
    assert _enum(props["wandb"]["properties"], "mode") == list(MODES)
    from pabench.datasets.corruptions import ALL_CORRUPTIONS
    from pabench.experiments.oodrb import plan as oodrb

    o = props["oodrb"]["properties"]
    assert set(_enum(o["corruptions"], "items")) == set(ALL_CORRUPTIONS)
    assert set(_enum(o["natural"], "items")) == {n for names in oodrb.NATURAL.values() for n in names}
    assert _enum(o["threats"]["items"]["properties"], "kind") == list(oodrb.THREAT_KINDS)


def test_resources_are_derived_from_a_runs_timing_table(tmp_path):
    timings = tmp_path / "timings.csv"
    timings.write_text("rule,jobs,total_s,mean_s,max_s,max_rss_mb,share,unreadable_files\n"
                       "train_dg,3,900,300,400,1000,0.5,0\npa_fig1,1,2,2,2,100,0.1,0\n"
                       "pa_table1,1,1,1,1,300,0.1,0\ntotal,5,903,1,400,1000,1,0\n")
    got = resources.from_timings(timings)
    assert got["train_dg"] == {"mem_mb": 1536, "runtime": 10}   # 1000 MB * 1.5 -> 1536; 400 s * 1.5
    assert got["pa_fig1"] == got["figure"] == {"mem_mb": 512, "runtime": 5}   # the floors
    assert got["table"] == {"mem_mb": 512, "runtime": 5} and "total" not in got


def test_imagenet_results_asked_for_without_a_folder_name_the_key_to_set(monkeypatch):
    monkeypatch.chdir(REPO)   # an absolute target is read relative to the workflow's folder
    paper = CONFIGS["paper"]
    assert paper["adversarial"]["imagenet"]["folder"] is None
    imagenet = {"pa_fig17", "pa_fig18", "pa_models_imagenet"}
    assert not imagenet & {e.rule for e in PAPERS["pa"].enabled(paper)}
    message = unbuildable(paper, ["--cores", "2", "pa_fig17", "./figures/pa/fig18.png",
                                           str(REPO / "figures/pa/models_imagenet.csv")])
    assert message.startswith("pa_fig17, figures/pa/fig18.png, figures/pa/models_imagenet.csv: ")
    assert message.count("adversarial.imagenet.folder is null; set it to a folder of ImageNet "
                         "validation images in class subfolders") == 1
    # nothing to say for the paper, other figures, or once the folder is given
    assert unbuildable(paper, ["pa", "pa_fig3", "figures/pa/fig16.pdf"]) == ""
    given = {**paper, "adversarial": {**paper["adversarial"],
                                      "imagenet": {**paper["adversarial"]["imagenet"], "folder": "val"}}}
    assert imagenet <= {e.rule for e in PAPERS["pa"].enabled(given)}
    assert unbuildable(given, ["pa_fig17", "pa_models_imagenet"]) == ""


def test_every_paper_names_its_outputs_by_one_scheme():
    """fig<N> / table<N> with the paper's number unpadded (and a panel, range or setup suffix),
    else a descriptive snake_case name."""
    numbered = re.compile(r"(fig|table)[1-9][0-9]*[a-z]?(_[a-z0-9]+)*")
    for paper in PAPERS.values():
        for e in paper.entries:
            if re.match(r"(fig|table)[0-9]", e.name):
                assert numbered.fullmatch(e.name), f"{paper.key}.{e.name}"
            else:
                assert re.fullmatch(r"[a-z][a-z0-9_]*", e.name), f"{paper.key}.{e.name}"

