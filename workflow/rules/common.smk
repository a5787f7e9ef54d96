# Shared paths and helpers of every rule file.
STYLE = "workflow/style/pabench.mplstyle"
ENV = "../../envs/pabench.yaml"
FIGURE_EXT = [".pdf", ".png", ".csv"]
TABLE_EXT = [".md", ".csv", ".tex"]


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
