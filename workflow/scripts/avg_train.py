"""Rule avg_train: one model, trained with gradient-norm weight lambda (from its name)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import pandas as pd
import torch

from pabench.core.io import load_npz, write_csv
from pabench.core.paths import parse_avg_model
from pabench.experiments.avgcase import training
from pabench.reporting import degenerate
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    m = parse_avg_model(smk.wildcards.dataset, smk.wildcards.avg_model, smk.wildcards.seed)
    t = smk.params.train
    d = load_npz(smk.input.data)
    device = resolve_device(smk.params.device)
    model, history = training.train(m.arch, m.lam, d["train_x"], d["train_y"], d["test_x"],
                                    d["test_y"], epochs=t["epochs"], batch_size=t["batch_size"],
                                    lr=t["lr"], seed=m.seed, device=device,
                                    penalty_every=t.get("penalty_every", 1), tracker=run)
    num_classes = int(max(d["train_y"].max(), d["test_y"].max())) + 1
    training.save(model, smk.output.model, m.arch, d["train_x"].shape[1:], num_classes, m.lam)
    # The final model near chance on the test images (in distribution) is not evidence.
    flagged = degenerate.near_chance(history[-1]["test_accuracy"], len(d["test_y"]), num_classes)
    write_csv(smk.output.history, pd.DataFrame(history).assign(
        dataset=m.dataset, model=m.name, arch=m.arch, lam=m.lam, seed=m.seed,
        n_test=len(d["test_y"]), **{degenerate.COLUMN: flagged}))
