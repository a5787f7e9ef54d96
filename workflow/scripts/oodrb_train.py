"""Rule oodrb_train: one model of the self-trained zoo."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import torch

from pabench.core.io import load_npz, write_csv
from pabench.experiments.oodrb import compute
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    data = load_npz(smk.input.data, ["train_x", "train_y", "test_x", "test_y"])
    device = resolve_device(smk.params.device)
    spec = dict(smk.params.spec)
    net, history = compute.train(smk.wildcards.oodrb_model, spec, data, smk.params.eps, device,
                                 tracker=run)
    compute.save(net, smk.output.model, spec, data)
    write_csv(smk.output.history, history)
    run.log({"accuracy": float(history.accuracy.iloc[-1])})
