"""Rules adv_score and adv_scores: PA (adam, stacked over every view, and exact), beta and AFR of
one model on every adversarial-ratio view of every attack run (eps), one table per attack of
params.attacks (output.tables, in that order)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.attacks.records import load_record
from pabench.experiments.adversarial.scoring import score_records
from pabench.core import paths
from pabench.core.io import write_csv
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    keys = ("clean_scores", "adv_scores", "linf", "success", "labels")
    runs = {path: paths.parse_attack_record(path) for path in smk.input.records}
    for attack, out in zip(smk.params.attacks, smk.output.tables, strict=True):
        records = {r: load_record(path, keys) for path, r in runs.items() if r.attack == attack}
        table = score_records(records, smk.params.ratios, smk.params.pa)
        first = next(iter(records))
        table.insert(0, "seed", first.seed)  # None (empty): a pretrained model, the same in every seed
        table.insert(0, "model", first.model)
        table.insert(0, "dataset", first.dataset)
        write_csv(out, table)
        run.log_table("pa" if len(smk.params.attacks) == 1 else f"pa_{attack}", table)
