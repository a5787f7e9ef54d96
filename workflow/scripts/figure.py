"""Every figure rule: draw from the rule's inputs with the shared style, log to W&B."""
import pandas as pd

from pabench.figures import dg, diagvib, toy
from pabench.figures.common import use_style
from pabench.workflow import job


def from_table(draw):
    """A figure drawn from the rule's one input table."""
    return lambda smk, outputs, meta: draw(pd.read_csv(smk.input.table), outputs, meta)


FIGURES = {
    "fig01": from_table(toy.fig01),
    "fig02": from_table(toy.fig02),
    "fig07": from_table(dg.fig07),
    "fig08": lambda smk, outputs, meta: dg.fig08(list(smk.input.scores), smk.params.runs,
                                                  pd.read_csv(smk.input.pa), outputs, meta),
    "fig11": lambda smk, outputs, meta: dg.fig11(list(smk.input.stages), smk.params.algorithms,
                                                  smk.input.val, smk.params.samples,
                                                  smk.params.device, outputs, meta),
    "fig12": lambda smk, outputs, meta: diagvib.fig12(smk.params.study, outputs, meta),
    "fig13": lambda smk, outputs, meta: diagvib.fig13(smk.input, outputs, meta),
}

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    use_style(smk.input.style)
    outputs = (smk.output.pdf, smk.output.png, smk.output.csv)
    FIGURES[smk.rule](smk, outputs, dict(smk.params.meta))
    run.log_table(f"{smk.rule}_data", pd.read_csv(smk.output.csv))
    run.log_image(smk.rule, smk.output.png)
