"""Rule toy_gaussian: the PA illustration of Figure 2, computed with the exact solver."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.experiments.toy.figures import gaussian_table
from pabench.core.io import write_csv
from pabench.experiments.toy.compute import gaussian_illustration
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    result = gaussian_illustration(**snakemake.params.settings)  # noqa: F821
    table = gaussian_table(result)
    write_csv(snakemake.output.table, table)  # noqa: F821
    run.log({"beta_star": result["beta_star"], "pa_star": result["pa_star"],
             **{f"pa/{k}": v for k, v in result["pa_at"].items()}})
    run.log_table("gaussian", table)
