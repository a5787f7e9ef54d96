"""Stack per-run result tables into one tidy table."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import pandas as pd

from pabench.core.io import read_table, write_csv
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    table = pd.concat([read_table(p) for p in smk.input.tables], ignore_index=True)
    write_csv(smk.output.table, table)
    run.log({"rows": len(table)})
    run.log_table("table", table)
