"""Rule diagvib_ass: average structural similarity of each test environment to env0."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import pandas as pd

from pabench.datasets.splits import load_split
from pabench.datasets.shift import average_ssim
from pabench.core.io import write_csv
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    split = load_split(smk.input.test)
    base = split["env0"].images
    table = pd.DataFrame({"env": list(split),
                          "ass": [average_ssim(base, data.images) for data in split.values()]})
    write_csv(smk.output.table, table)
    run.log({f"ass/{env}": value for env, value in zip(table.env, table.ass)})
    run.log_table("ass", table)
