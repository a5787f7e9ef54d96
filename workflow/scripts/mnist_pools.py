"""Rule mnist_pools: the configured MNIST source as compact train / val / test digit pools."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import numpy as np

from pabench.datasets.mnist import load_source, save_pools
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    pools = load_source(smk.params.source, smk.params.root)
    save_pools(pools, smk.output.pools)
    run.log({f"{name}/size": len(idx) for name, idx in pools.pools.items()})
    run.log({f"{name}/digit_{d}": int(np.sum(pools.labels[idx] == d))
             for name, idx in pools.pools.items() for d in range(10)})
