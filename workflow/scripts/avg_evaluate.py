"""Rules avg_estimates, avg_noise_pa, avg_convergence, avg_case_study, avg_runtime: one
evaluation of one trained model (the rule's `kind`), written as one CSV."""
from pabench.jobserver import delegate; delegate()  # noqa: E702 - first: see pabench.jobserver
import torch

from pabench.core.io import load_npz, read_table, write_csv
from pabench.core.paths import parse_avg_model
from pabench.experiments.avgcase import compute, training
from pabench.metrics.settings import PASettings
from pabench.reporting import degenerate
from pabench.training.loop import resolve_device
from pabench.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    kind, s = smk.params.kind, smk.params.settings
    m = parse_avg_model(smk.wildcards.dataset, smk.wildcards.avg_model, smk.wildcards.seed)
    device = resolve_device(s["device"])
    model = training.load(smk.input.model, device)
    d = load_npz(smk.input.data)
    x, y = d["test_x"], d["test_y"]
    flagged = bool(read_table(smk.input.history)[degenerate.COLUMN].iloc[-1])  # set by avg_train
    n, sigmas = s["n_points"], s["sigmas"]
    if kind == "estimates":
        table = compute.estimates(model, m, x[:n], y[:n], sigmas, s, device, seed=m.seed,
                                  progress=True)
    elif kind == "noise_pa":
        settings = PASettings.from_config(smk.params.pa, s["noise_pa"]["pa_epochs"])
        table = compute.noise_pa(model, m, x[:n], y[:n], sigmas, read_table(smk.input.estimates),
                                 settings, device, s["noise_pa"]["seed"])
    elif kind == "convergence":
        c = s["convergence"]
        table = compute.convergence(model, m, x[:c["points"]], c["sigma"], c["n"],
                                    c["reference_n"], s["softmax"]["temperature"], device)
    elif kind == "case_study":
        c = s["case_study"]
        table = compute.case_study(model, m, x[:c["images"]], c, s["softmax"]["temperature"],
                                   s["train"], device)
    else:
        table = compute.runtime(model, m, x[:s["runtime"]["points"]], s["runtime"], device)
    write_csv(smk.output.table, table.assign(**{degenerate.COLUMN: flagged}))
    run.log_table(kind, table)
