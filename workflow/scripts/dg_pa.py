"""Rule dg_pa: PA (adam and exact) and AFR of one model on every shift-ratio dataset."""
from pabench.experiments.dg import compute as dg
from pabench.core.io import write_csv
from pabench.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    scores, classes = dg.load_scores(smk.input.scores)
    table = dg.shift_ratio_pa(scores, classes, smk.params.ratios, smk.params.pa)
    table.insert(0, "algorithm", smk.wildcards.algorithm)
    table.insert(1, "seed", int(smk.wildcards.seed))
    write_csv(smk.output.table, table)
    run.log_table("pa", table)
    full = table[table.shift_ratio == 1.0]
    run.log({f"logpa_adam/sf{k}": v for k, v in zip(full.n_shift_factors, full.logpa_adam)})
    run.log({f"afr_true/sf{k}": v for k, v in zip(full.n_shift_factors, full.afr_true)})
