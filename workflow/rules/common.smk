# Shared paths and helpers of every rule file.
from pathlib import Path

STYLE = "workflow/style/pabench.mplstyle"
ENV = "../../envs/pabench.yaml"
FIGURE_EXT = [".pdf", ".png", ".csv"]
TABLE_EXT = [".md", ".csv", ".tex", ".html"]


# Snakemake report (`snakemake --report report.html`): one category per paper, one subcategory
# per experiment; every caption is rendered from the rule's params.meta by one template.
PAPER = "PA robustness paper (TMLR)"
CHECKS = "Reproduction checks"
EXPERIMENTS = {"toy": "Toy examples", "diagvib": "DiagViB-6 datasets",
               "dg": "Domain generalisation", "model_selection": "Model selection",
               "adversarial": "Adversarial robustness", "checks": "Claims and timings"}
CAPTION = "../report/caption.rst"  # relative to the rule files


def reported(path, experiment, category=PAPER):
    """An output shown in the report under the paper and experiment, labelled by its name."""
    return report(path, caption=CAPTION, category=category, subcategory=EXPERIMENTS[experiment],
                  labels={"result": Path(path).stem})


def figure_files(paper, name):
    return [f"figures/{paper}/{name}{ext}" for ext in FIGURE_EXT]


def table_files(paper, name):
    return [f"figures/{paper}/{name}{ext}" for ext in TABLE_EXT]


def split_dir(study, split):
    """A rendered DiagViB-6 split (rule diagvib_split)."""
    return f"data/diagvib/{study}/{split}"


def provenance(**extra):
    """Caption metadata of a figure: scale and what it was computed from."""
    return {"scale": config["scale"], **extra}
