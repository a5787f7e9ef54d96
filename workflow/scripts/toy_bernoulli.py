"""Rule toy_bernoulli: accuracy and PA of the three Bernoulli classifiers (PA paper, Figure 1)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.core.io import write_csv
from pabench.experiments.toy.compute import bernoulli_table
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    settings = snakemake.params.settings  # noqa: F821
    table = bernoulli_table(**settings, adam=snakemake.params.adam, progress=True)  # noqa: F821
    write_csv(snakemake.output.table, table)  # noqa: F821
    run.log_table("bernoulli", table)
    for (name, solver), d in table.groupby(["classifier", "solver"]):
        run.log({f"{name}/{solver}/mean_pa": d.pa.mean(), f"{name}/mean_accuracy": d.accuracy.mean()})
