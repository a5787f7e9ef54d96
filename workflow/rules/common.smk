# Shared paths and helpers of every rule file.
STYLE = "workflow/style/pabench.mplstyle"
ENV = "../../envs/pabench.yaml"
FIGURE_EXT = [".pdf", ".png", ".csv"]


def figure_files(paper, name):
    return [f"figures/{paper}/{name}{ext}" for ext in FIGURE_EXT]


def provenance(**extra):
    """Caption metadata of a figure: scale and what it was computed from."""
    return {"scale": config["scale"], **extra}
