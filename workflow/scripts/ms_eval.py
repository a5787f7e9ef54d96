"""Rule ms_eval: test accuracy of the accuracy-selected and PA-selected checkpoints, for the main
validation split and each other one (column `validation`)."""
from pabench.jobserver import delegate; delegate()  # noqa: E702 - first: see pabench.jobserver
import pandas as pd

from pabench.experiments.dg import compute as dg
from pabench.datasets.splits import load_split
from pabench.core import paths
from pabench.core.io import read_table, write_csv
from pabench.reporting import degenerate
from pabench.training.loop import load_checkpoint, resolve_device
from pabench.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    device = resolve_device(smk.params.device)
    test = load_split(smk.input.test)
    tables, predictions = [], {}   # predictions by (epoch, env): checkpoints share epochs
    for k, (split, label) in enumerate(smk.params.validation.items()):  # the first: the main one
        inputs = {name: paths.selection_checkpoint(name, split if k else None) for name in ("best_acc", "best_pa")}
        models = {name: load_checkpoint(getattr(smk.input, key), device) for name, key in inputs.items()}
        tables.append(dg.selected_accuracy(models, test, device, predictions).assign(validation=label))
    table = pd.concat(tables, ignore_index=True)
    table.insert(0, "setting", smk.params.label)
    table.insert(1, "algorithm", smk.wildcards.algorithm)
    table.insert(2, "seed", int(smk.wildcards.seed))
    # Even the best epoch near chance on the ID validation data: the run learned nothing.
    val_acc = float(read_table(smk.input.history).val_acc.max())
    classes = len(models["best_acc"][1]["classes"])
    table = table.assign(val_acc=val_acc,
                         **{degenerate.COLUMN: degenerate.near_chance(val_acc, smk.params.n_val, classes)})
    write_csv(smk.output.table, table)
    run.log({f"{row['validation']}/{row['env']}/{col}": v for row in table.to_dict("records")
             for col, v in row.items() if col.startswith("acc_")})
    run.log_table("selection", table)
