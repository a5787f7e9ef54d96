"""Rule shift_ratio_views: index views mixing env0 with env k at each shift ratio (no copies)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.datasets.splits import load_split
from pabench.datasets.shift import shift_ratio_view
from pabench.core.io import write_json
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    split = load_split(smk.input.test)
    n = len(split["env0"])
    views = {f"{env}/sr={ratio:g}": shift_ratio_view(n, env, float(ratio))
             for env in split if env != "env0" for ratio in smk.params.ratios}
    write_json(smk.output.views, {"split": smk.input.test, "n": n, "views": views})
    run.log({"n_views": len(views)})
