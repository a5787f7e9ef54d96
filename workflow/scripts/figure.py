"""Every figure rule: read the rule's input table, draw with the shared style, log to W&B."""
import pandas as pd

from pabench.figures import toy
from pabench.figures.common import use_style
from pabench.workflow import job

FIGURES = {"fig01": toy.fig01, "fig02": toy.fig02}

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    use_style(smk.input.style)
    table = pd.read_csv(smk.input.table)
    outputs = (smk.output.pdf, smk.output.png, smk.output.csv)
    FIGURES[smk.rule](table, outputs, dict(smk.params.meta))
    run.log_table(f"{smk.rule}_data", pd.read_csv(smk.output.csv))
    run.log_image(smk.rule, smk.output.png)
