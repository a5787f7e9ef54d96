"""Rules oodrb_shifts, oodrb_shift_scores and oodrb_attacks: one evaluation of one model (the
rule's `kind`), written as one CSV (oodrb_shifts also writes the threat shifts and the per-image
predictions; oodrb_shift_scores, one shift's scores and predictions, which oodrb_shifts then reads
instead of attacking that shift itself; oodrb_attacks also each image's robust flags)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import torch

from pabench.core.io import load_npz, read_table, write_csv
from pabench.experiments.oodrb import compute, plan
from pabench.metrics.settings import PASettings
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    # the settings of the setup this file belongs to (its tag: the `dataset` wildcard)
    config = plan.setup_config(smk.config, smk.wildcards.dataset)
    kind, name = smk.params.kind, smk.wildcards.oodrb_model
    device = resolve_device(config["oodrb"]["device"])
    model = compute.load(config, name, smk.input.model[0] if smk.input.model else None, device)
    data = load_npz(smk.input.data, ["test_x", "test_y"])  # evaluations use the ID test split only
    pa = PASettings.from_config(smk.params.pa, config["oodrb"]["pa_epochs"])
    if kind == "shift_scores":   # one shift (oodrb.split_shifts), paired with the clean ID logits
        clean = compute.logits(model, data["test_x"], device)
        table, predictions = compute.shift_scores(config, name, model, clean,
                                                  {smk.wildcards.shift: smk.input.shift}, pa, device)
        write_csv(smk.output.predictions, predictions)
    elif kind == "shifts":
        split = plan.split_shifts(config)
        shift_files = dict(zip(plan.shifts(config), smk.input.shift_data))
        # (a shift's predictions: none but the header for a corruption)
        scored = ([(read_table(a), read_table(b, rows_optional=True)) for a, b in
                   zip(smk.input.shifts[::2], smk.input.shifts[1::2])] if split else None)
        table, predictions = compute.shifts(config, name, model, data, shift_files, pa, device,
                                            scored)
        write_csv(smk.output.predictions, predictions)
        if plan.skipped_threats(config):
            run.log({"skipped_threats": plan.skipped_threats(config)})
            print(plan.skip_note(config))
        # the model's flag (from its ID accuracy and its PA under the dataset shifts) on its threat rows too
        threats = compute.threats(config, name, model, data, pa, device,
                                  compute.id_flags(predictions)).assign(
            degenerate=bool(table.degenerate.iloc[0]))
        write_csv(smk.output.threats, threats)
        run.log_table("threats", threats)
    else:
        shift_files = dict(zip(plan.shifts(config), smk.input.shift_data))
        table, images = compute.attacks(config, name, model, data, shift_files, device)
        write_csv(smk.output.images, images)
    write_csv(smk.output.table, table)
    run.log_table(kind, table)
