"""Rule diagvib_split: render one split of a DiagViB-6 study (all its environments)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.datasets.splits import SplitSpec, build_split
from pabench.datasets.mnist import load_pools
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    spec = SplitSpec.from_config(smk.wildcards.study, smk.params.study, smk.wildcards.split)
    info = build_split(spec, load_pools(smk.input.pools), smk.output[0], size=smk.params.size,
                       texture_seed=smk.params.texture_seed, chunk=smk.params.chunk, progress=True)
    run.log({"n_per_env": info["n"], "n_envs": len(info["envs"]), "image_size": info["size"]})
