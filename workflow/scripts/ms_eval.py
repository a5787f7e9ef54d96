"""Rule ms_eval: test accuracy of the accuracy-selected and PA-selected checkpoints (PA by the
adam and by the exact solver), for the main validation split and each other one (column
`validation`); criteria without preference (a tied best validation value) select nothing."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.experiments.dg import compute as dg
from pabench.datasets.splits import load_split
from pabench.core.io import read_table, write_csv
from pabench.reporting import degenerate
from pabench.training.loop import load_checkpoint, resolve_device, stopped_early
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    device = resolve_device(smk.params.device)
    history = read_table(smk.input.history)
    # The first validation split is the main one (its checkpoints carry no split in their name).
    validations = {(split if k else None): label for k, (split, label) in enumerate(smk.params.validation.items())}
    table = dg.selection_results(history, validations, lambda name: load_checkpoint(smk.input[name], device),
                                 load_split(smk.input.test), device)
    table.insert(0, "setting", smk.params.label)
    table.insert(1, "algorithm", smk.wildcards.algorithm)
    table.insert(2, "seed", int(smk.wildcards.seed))
    # Even the best epoch near chance on the ID validation data: the run learned nothing.
    val_acc = float(history.val_acc.max())
    classes = len(load_checkpoint(smk.input.best_acc, device)[1]["classes"])
    table = table.assign(epochs=len(history), stopped_early=stopped_early(history, smk.params.patience),
                         val_acc=val_acc,
                         **{degenerate.COLUMN: degenerate.near_chance(val_acc, smk.params.n_val, classes)})
    write_csv(smk.output.table, table)
    run.log({f"{row['validation']}/{row['solver']}/{row['env']}/{col}": v for row in table.to_dict("records")
             for col, v in row.items() if col.startswith("acc_")})
    run.log_table("selection", table)
