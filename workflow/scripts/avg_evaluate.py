"""Rules avg_estimates, avg_estimates_sigma, avg_noise_pa, avg_convergence, avg_case_study,
avg_runtime, avg_linear_convergence: one evaluation of one trained model (the rule's `kind`), written as one CSV.  With
avgcase.split_sigmas, avg_estimates stacks its avg_estimates_sigma files instead."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import pandas as pd
import torch

from pabench.core.io import load_npz, read_table, write_csv
from pabench.core.paths import parse_avg_model
from pabench.experiments.avgcase import compute, training
from pabench.metrics.settings import PASettings
from pabench.reporting import degenerate
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job


def evaluate(smk, kind: str, s: dict, m):
    """The rule's table: computed on the model, or (avg_estimates with avgcase.split_sigmas)
    stacked from its per-sigma files, which needs neither the model nor a GPU."""
    if kind == "estimates" and smk.input.sigmas:
        return pd.concat([read_table(f).drop(columns=degenerate.COLUMN) for f in smk.input.sigmas],
                         ignore_index=True)
    device = resolve_device(s["device"])
    model = training.load(smk.input.model, device)
    d = load_npz(smk.input.data)
    x, y = d["test_x"], d["test_y"]
    n, sigmas = s["n_points"], s["sigmas"]
    if kind in ("estimates", "estimates_sigma"):   # every sigma, or this job's one
        one = kind == "estimates_sigma"
        first = int(smk.wildcards.sigma_index) if one else 0
        last = first + 1 if one else len(sigmas)
        return compute.estimates(model, m, x[:n], y[:n], sigmas[first:last], s, device,
                                 seed=m.seed, progress=True, first=first)
    if kind == "noise_pa":
        settings = PASettings.from_config(smk.params.pa, s["noise_pa"]["pa_epochs"])
        return compute.noise_pa(model, m, x[:n], y[:n], sigmas, read_table(smk.input.estimates),
                                settings, device, s["noise_pa"]["seed"])
    if kind == "convergence":
        c = s["convergence"]
        return compute.convergence(model, m, x[:c["points"]], c["sigma"], c["n"],
                                   c["reference_n"], s["softmax"]["temperature"], device)
    if kind == "case_study":
        c = s["case_study"]
        return compute.case_study(model, m, x[:c["images"]], c, s["softmax"]["temperature"],
                                  s["train"], device, read_table(smk.input.estimates))
    if kind == "linear_convergence":
        return compute.linear_convergence(model, m, x[:n], s["linear_convergence"]["n"],
                                          read_table(smk.input.estimates), device, seed=m.seed)
    return compute.runtime(model, m, x[:s["runtime"]["points"]], s["runtime"], device)


with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    kind, s = smk.params.kind, smk.params.settings
    m = parse_avg_model(smk.wildcards.dataset, smk.wildcards.avg_model, smk.wildcards.seed)
    flagged = bool(read_table(smk.input.history)[degenerate.COLUMN].iloc[-1])  # set by avg_train
    table = evaluate(smk, kind, s, m)
    write_csv(smk.output.table, table.assign(**{degenerate.COLUMN: flagged}))
    run.log_table(kind, table)
