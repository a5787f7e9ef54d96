"""Every figure rule: draw from the rule's inputs with the shared style, log to W&B.  Only the
figure's own module is imported (most figures need no PyTorch, whose import costs seconds)."""
import importlib

import pandas as pd

from pabench.figures.common import use_style
from pabench.io import read_table
from pabench.workflow import job


def module(name):
    return importlib.import_module(f"pabench.figures.{name}")


def from_table(mod, name):
    """A figure drawn from the rule's one input table."""
    return lambda smk, outputs, meta: getattr(module(mod), name)(read_table(smk.input.table), outputs, meta)


def adv_tables(paths):
    """The adv_score tables stacked; eps tags stay strings ("0.1", "8-255", "min")."""
    return pd.concat([read_table(p, dtype={"eps": str}) for p in paths], ignore_index=True)


def adv_ar(main_ar_max=None):
    return lambda smk, outputs, meta: module("adversarial").ar_figure(
        adv_tables(smk.input.tables), smk.params.attack, smk.params.models, outputs, meta, main_ar_max)


def adv_confidence(smk, outputs, meta):
    records = {}  # attack records by (model, attack, eps), read from their paths
    for path in smk.input.records:
        *_, model, attack, eps = path[:-len(".npz")].split("/")
        records[(model, attack, eps)] = path
    return module("adversarial").confidence_figure(records, adv_tables(smk.input.tables),
                                                   smk.params.panels, smk.params.models, outputs, meta)


FIGURES = {
    "fig01": from_table("toy", "fig01"),
    "fig02": from_table("toy", "fig02"),
    "fig03": adv_ar(),
    "fig04": adv_confidence,
    "fig05": adv_ar(main_ar_max=0.5),
    "fig06": adv_confidence,
    "fig07": from_table("dg", "fig07"),
    "fig08": lambda smk, outputs, meta: module("dg").fig08(list(smk.input.scores), smk.params.runs,
                                                           read_table(smk.input.pa), outputs, meta),
    "fig09": adv_confidence,
    "fig11": lambda smk, outputs, meta: module("dg").fig11(list(smk.input.stages), smk.params.algorithms,
                                                           smk.input.val, smk.params.samples,
                                                           smk.params.device, outputs, meta),
    "fig12": lambda smk, outputs, meta: module("diagvib").fig12(smk.params.study, outputs, meta),
    "fig13": lambda smk, outputs, meta: module("diagvib").fig13(smk.input, outputs, meta),
    "fig14": adv_ar(),
    "fig15": adv_ar(),
    "fig16": adv_ar(),
    "fig17": adv_ar(),
    "fig18": adv_ar(),
}

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    use_style(smk.input.style)
    outputs = (smk.output.pdf, smk.output.png, smk.output.csv)
    name = smk.wildcards.get("figure", smk.rule)  # the adversarial rules draw several figures
    FIGURES[name](smk, outputs, dict(smk.params.meta))
    run.log_table(f"{name}_data", pd.read_csv(smk.output.csv))
    run.log_image(name, smk.output.png)
