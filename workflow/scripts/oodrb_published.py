"""Rule oodrb_published: one published (standardly trained) zoo model, downloaded and checked,
saved as a zoo checkpoint."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.attacks import published
from pabench.attacks.models import save_zoo_model
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    spec = dict(smk.params.spec)
    net, info = published.load(spec["published"], smk.params.directory, smk.params.weights,
                               smk.params.robustbench_dir)
    save_zoo_model(net, smk.output.model, spec["arch"], spec["method"], 10, 32,
                   extra={"spec": spec, **info})
    run.log({k: v for k, v in info.items() if v is not None})
