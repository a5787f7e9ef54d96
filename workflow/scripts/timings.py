"""Rule timings: summarise every rule's Snakemake benchmark files."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.core import paths
from pabench.reporting.tables import write_table
from pabench.reporting.timings import summarise
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    table = summarise(paths.BENCHMARKS)
    meta = dict(smk.params.meta)
    caption = meta.pop("caption")
    write_table(table, caption, meta, "timings", smk.output.md, smk.output.csv,
                html_path=smk.output.html)
    run.log({"total_job_s": float(table.loc[table.rule == "total", "total_s"].iloc[0])})
    run.log_table("timings", table)
