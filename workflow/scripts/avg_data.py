"""Rule avg_data: one dataset's train and test images at this scale (seeded subsets)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import numpy as np

from pabench.core.io import atomic_path
from pabench.experiments.avgcase.compute import dataset_arrays
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    arrays = dataset_arrays(smk.wildcards.dataset, dict(smk.params.dataset), smk.params.seed)
    with atomic_path(smk.output.data) as tmp:
        np.savez(tmp, **arrays)
    run.log({"train": len(arrays["train_y"]), "test": len(arrays["test_y"]),
             "classes": int(len(np.unique(arrays["train_y"])))})
