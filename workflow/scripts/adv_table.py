"""Rule adv_table: the tidy table of an adversarial experiment (model, attack, eps, AR, PA of
both solvers, beta, AFR_T, AFR_P, clean accuracy) and its model table (source, method,
architecture, clean accuracy on the attacked test images)."""
import pandas as pd

from pabench.io import read_table, write_csv
from pabench.tables import write_table
from pabench.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    table = pd.concat([read_table(p, dtype={"eps": str}) for p in smk.input.tables], ignore_index=True)
    write_csv(smk.output.table, table)
    run.log_table("pa", table)
    histories = {p.rsplit("/", 1)[1][:-len(".csv")]: read_table(p) for p in smk.input.histories}
    rows = []
    for model in smk.params.models:
        accuracy = float(table[table.model == model].clean_accuracy.iloc[0])
        hist = histories.get(model)
        trained = hist is not None
        adversarial = trained and model not in ("undefended", "jpeg_rs")
        rows.append({"model": model, "source": "self-trained" if trained else "RobustBench",
                     "method": model if trained else "(RobustBench)",
                     "architecture": hist.arch.iloc[0] if trained else "(RobustBench)",
                     "train epochs": int(hist.epoch.max()) if trained else "",
                     "train eps": str(smk.params.zoo["eps"]) if adversarial else "",
                     "clean accuracy": round(accuracy, 4),
                     "n": int(table[table.model == model].n.iloc[0])})
        run.log({f"clean_accuracy/{model}": accuracy})
    models = pd.DataFrame(rows)
    meta = dict(smk.params.meta)
    write_table(models, meta.pop("caption"), meta, f"models-{smk.wildcards.dataset}", smk.output.md,
                smk.output.csv, smk.output.tex, smk.output.html)
    run.log_table("models", models.astype(str))
