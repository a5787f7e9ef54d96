"""Rule dg_pa: PA (adam and exact) and AFR of one model on every shift-ratio dataset."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.experiments.dg import compute as dg
from pabench.core.io import read_table, write_csv
from pabench.reporting import degenerate
from pabench.training.loop import checkpoint_epochs
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    scores, classes = dg.load_scores(smk.input.scores)
    table = dg.shift_ratio_pa(scores, classes, smk.params.ratios, smk.params.pa)
    table.insert(0, "algorithm", smk.wildcards.algorithm)
    table.insert(1, "seed", int(smk.wildcards.seed))
    # The scored checkpoint's ID validation accuracy near chance, or PA at beta* = 0 in every
    # view, flags the run as not evidence.
    history = read_table(smk.input.history)
    epoch = checkpoint_epochs(history)[smk.params.checkpoint]  # the epoch the checkpoint holds
    val_acc = float(history.set_index("epoch").val_acc[epoch])
    flagged = degenerate.flag(val_acc, smk.params.n_val, len(classes), table.beta_exact)
    table = table.assign(val_acc=val_acc, **{degenerate.COLUMN: flagged})
    write_csv(smk.output.table, table)
    run.log_table("pa", table)
    full = table[table.shift_ratio == 1.0]
    run.log({f"logpa_adam/sf{k}": v for k, v in zip(full.n_shift_factors, full.logpa_adam)})
    run.log({f"afr_true/sf{k}": v for k, v in zip(full.n_shift_factors, full.afr_true)})
