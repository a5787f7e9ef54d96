"""Rule dg_scores: logits of a trained model on every test environment."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import numpy as np

from pabench.experiments.dg import compute as dg
from pabench.datasets.splits import load_split
from pabench.core.io import atomic_path
from pabench.training.loop import load_checkpoint, resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    device = resolve_device(smk.params.device)
    model, state = load_checkpoint(smk.input.model, device)
    scores = dg.split_scores(model, load_split(smk.input.test), device)
    with atomic_path(smk.output.scores) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, classes=np.array(state["classes"]), **scores)
    run.log({f"accuracy/{env}": float((np.array(state["classes"])[scores[env].argmax(1)]
                                       == scores[f"{env}/labels"]).mean())
             for env in scores if "/" not in env})
