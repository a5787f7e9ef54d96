"""Rules train_dg, train_fig11 and train_ms: train one algorithm on a training split, validating
every epoch.  Params: dg (settings), stages (keep the three training stages' checkpoints), and for
model selection epochs (the cap), patience, pa (adam solver settings) and also (other splits)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import torch

from pabench.experiments.dg import compute as dg
from pabench.datasets.splits import load_split
from pabench.core.io import write_csv
from pabench.training.loop import train
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    settings = dg.settings(smk.params.dg, smk.wildcards.algorithm, int(smk.wildcards.seed),
                           epochs=smk.params.get("epochs"), stages=smk.params.stages,
                           patience=smk.params.get("patience"), pa_adam=smk.params.get("pa"))
    out_dir = smk.output.last.rsplit("/", 1)[0]
    also = dict(zip(smk.params.get("also") or [], [load_split(p) for p in smk.input.get("also", [])]))
    history = train(settings, load_split(smk.input.train), load_split(smk.input.val), out_dir,
                    tracker=run, progress=True, also_validate=also)
    write_csv(smk.output.history, history)
    run.log_table("history", history)
