"""Rule adv_score: PA (adam, stacked over every view, and exact), beta and AFR of one model on
every adversarial-ratio view of every attack run (attack, eps)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.attacks.records import load_record
from pabench.experiments.adversarial.scoring import score_records
from pabench.core import paths
from pabench.core.io import write_csv
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    keys = ("clean_scores", "adv_scores", "linf", "success", "labels")
    records = {paths.parse_attack_record(path): load_record(path, keys) for path in smk.input.records}
    table = score_records(records, smk.params.ratios, smk.params.pa)
    model, seed = paths.parse_adv_run(smk.wildcards.adv_model)
    table.insert(0, "seed", seed)  # None (empty): a pretrained model, the same in every seed
    table.insert(0, "model", model)
    table.insert(0, "dataset", smk.wildcards.dataset)
    write_csv(smk.output.table, table)
    run.log_table("pa", table)
