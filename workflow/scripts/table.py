"""Every table rule: build the table from the rule's inputs and the config, write md/csv/tex."""

from pabench import dg
from pabench.figures import diagvib
from pabench.tables import write_table
from pabench.io import read_table
from pabench.workflow import job


def table2(smk):
    return diagvib.table2(smk.params.study, list(smk.params.envs), read_table(smk.input.ass))


def table3(smk):
    return diagvib.table3(smk.params.study)


def table1(smk):
    return dg.table1(read_table(smk.input.results), smk.params.settings, smk.params.tests)


TABLES = {"table1": table1, "table2": table2, "table3": table3}

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    meta = dict(smk.params.meta)
    frame = TABLES[smk.rule](smk)
    write_table(frame, meta.pop("caption"), meta, smk.rule, smk.output.md, smk.output.csv,
                smk.output.tex, smk.output.html)
    run.log_table(smk.rule, frame.astype(str))
