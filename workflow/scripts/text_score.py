"""Rule text_score: PA (adam, stacked over every view, and exact), beta and accuracy of every
shifted view of the reviews against the clean one."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.core import paths
from pabench.core.io import write_csv
from pabench.experiments.text.compute import load_logits
from pabench.experiments.text.scoring import score_text_views
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    clean = load_logits(smk.input.clean)
    views = {paths.parse_text_logits(p): load_logits(p) for p in smk.input.views}
    table = score_text_views(clean, views, smk.params.pa, smk.params.model)
    write_csv(smk.output.table, table)
    run.log_table("pa", table)
