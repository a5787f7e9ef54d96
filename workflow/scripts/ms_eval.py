"""Rule ms_eval: test accuracy of the accuracy-selected and PA-selected checkpoints."""
from pabench.experiments.dg import compute as dg
from pabench.datasets.splits import load_split
from pabench.core.io import write_csv
from pabench.training.loop import load_checkpoint, resolve_device
from pabench.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    device = resolve_device(smk.params.device)
    models = {name: load_checkpoint(getattr(smk.input, name), device) for name in ("best_acc", "best_pa")}
    table = dg.selected_accuracy(models, load_split(smk.input.test), device)
    table.insert(0, "setting", smk.params.label)
    table.insert(1, "algorithm", smk.wildcards.algorithm)
    table.insert(2, "seed", int(smk.wildcards.seed))
    write_csv(smk.output.table, table)
    run.log({f"{env}/{col}": v for env, row in zip(table.env, table.to_dict("records"))
             for col, v in row.items() if col.startswith("acc_")})
    run.log_table("selection", table)
