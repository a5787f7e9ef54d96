# OODRobustBench (Li et al.): the ID split and every dataset shift, the zoo, per model its
# accuracy, MM5 robustness and PA under every dataset and threat shift, Table 3's attack
# comparison, and one tidy table per kind.
import re

from pabench.core import paths, resources
from pabench.experiments.oodrb import plan as oodrb

OODRB_MODELS = "|".join(map(re.escape, oodrb.models(config) + oodrb.table3_only(config))) or "^$"
OODRB_TRAINED = "|".join(map(re.escape, oodrb.trained(config))) or "^$"
OODRB_PUBLISHED = "|".join(map(re.escape, oodrb.published(config))) or "^$"
OODRB_SHIFTS = "|".join(map(re.escape, oodrb.shifts(config))) or "^$"


rule oodrb_data:
    output:
        data=paths.oodrb_data(shift="id"),
    params:
        experiment="oodrb",
        settings=config["oodrb"],
    log:
        paths.log("oodrb_data", "{dataset}"),
    benchmark:
        paths.benchmark("oodrb_data", "{dataset}")
    threads: 1
    resources:
        **resources.of(config, "oodrb_data"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/oodrb_data.py"


rule oodrb_shift:
    input:
        data=paths.oodrb_data(shift="id"),
    output:
        data=paths.oodrb_data(),
    params:
        experiment="oodrb",
        settings=config["oodrb"],
    wildcard_constraints:
        shift=OODRB_SHIFTS,
    log:
        paths.log("oodrb_shift", "{dataset}", "{shift}"),
    benchmark:
        paths.benchmark("oodrb_shift", "{dataset}", "{shift}")
    threads: 1
    resources:
        **resources.of(config, "oodrb_shift"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/oodrb_data.py"


rule oodrb_train:
    input:
        data=paths.oodrb_data(shift="id"),
    output:
        model=paths.oodrb_file("models"),
        history=paths.oodrb_file("history"),
    params:
        experiment="oodrb",
        spec=lambda wc: oodrb.zoo(config)[wc.oodrb_model],
        eps=oodrb.eps_of(config),
        device=config["oodrb"]["device"],
    wildcard_constraints:
        oodrb_model=OODRB_TRAINED,
    log:
        paths.log("oodrb_train", "{dataset}", "{oodrb_model}"),
    benchmark:
        paths.benchmark("oodrb_train", "{dataset}", "{oodrb_model}")
    threads: 1
    resources:
        **resources.of(config, "oodrb_train"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/oodrb_train.py"


# A published zoo model (standardly trained): its weights downloaded and checked, saved as a zoo
# checkpoint like a trained one's.
rule oodrb_published:
    output:
        model=paths.oodrb_file("models"),
    params:
        experiment="oodrb",
        spec=lambda wc: oodrb.zoo(config)[wc.oodrb_model],
        directory=config["oodrb"]["published_dir"],
        weights=config["oodrb"]["published_weights"],
        robustbench_dir=config["oodrb"]["robustbench_dir"],
    wildcard_constraints:
        oodrb_model=OODRB_PUBLISHED,
    log:
        paths.log("oodrb_published", "{dataset}", "{oodrb_model}"),
    benchmark:
        paths.benchmark("oodrb_published", "{dataset}", "{oodrb_model}")
    threads: 1
    resources:
        **resources.of(config, "oodrb_published"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/oodrb_published.py"


# One rule per evaluation of a model (oodrb_shifts also writes the threat shifts and Figure 5's
# predictions, oodrb_attacks each image's robust flags).
for kind in oodrb.RESULTS:

    rule:
        name:
            f"oodrb_{kind}"
        input:
            model=lambda wc: oodrb.model_input(config, wc.dataset, wc.oodrb_model),
            data=paths.oodrb_data(shift="id"),
            # oodrb_shifts with split_shifts: every shift's scores from its own job below
            shifts=((lambda wc: oodrb.shift_inputs(config, wc.dataset, wc.oodrb_model))
                    if kind == "shifts" else list(oodrb.shift_files(config).values())),
            # every shift's images (split_shifts: read for the originals each corruption corrupts)
            shift_data=list(oodrb.shift_files(config).values()),
        output:
            table=paths.oodrb_file(kind),
            **({"threats": paths.oodrb_file("threats"),
                "predictions": paths.oodrb_file("predictions")} if kind == "shifts" else
               {"images": paths.oodrb_file("attack_images")}),
        params:
            experiment="oodrb",
            kind=kind,
            pa=config["pa"]["adam"],
        wildcard_constraints:
            oodrb_model=OODRB_MODELS,
        log:
            paths.log(f"oodrb_{kind}", "{dataset}", "{oodrb_model}"),
        benchmark:
            paths.benchmark(f"oodrb_{kind}", "{dataset}", "{oodrb_model}")
        threads: 1
        resources:
            **resources.of(config, f"oodrb_{kind}"),
        conda:
            "../../envs/pabench.yaml"
        script:
            "../scripts/oodrb_evaluate.py"


# With oodrb.split_shifts: one model's MM5 and PA on one dataset shift, read by its oodrb_shifts.
rule oodrb_shift_scores:
    input:
        model=lambda wc: oodrb.model_input(config, wc.dataset, wc.oodrb_model),
        data=paths.oodrb_data(shift="id"),
        shift=paths.oodrb_data(),
    output:
        table=paths.oodrb_shift_file("shift_scores"),
        predictions=paths.oodrb_shift_file("shift_predictions"),
    params:
        experiment="oodrb",
        kind="shift_scores",
        pa=config["pa"]["adam"],
    wildcard_constraints:
        oodrb_model=OODRB_MODELS,
        shift=OODRB_SHIFTS,
    log:
        paths.log("oodrb_shift_scores", "{dataset}", "{oodrb_model}", "{shift}"),
    benchmark:
        paths.benchmark("oodrb_shift_scores", "{dataset}", "{oodrb_model}", "{shift}")
    threads: 1
    resources:
        **resources.of(config, "oodrb_shift_scores"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/oodrb_evaluate.py"


rule oodrb_table:
    input:
        tables=lambda wc: oodrb.table_inputs(config, wc.kind),
    output:
        table=paths.oodrb_table("{kind}"),
    params:
        experiment="oodrb",
    wildcard_constraints:
        kind="|".join(oodrb.TABLES),
    log:
        paths.log("oodrb_table", "{kind}"),
    benchmark:
        paths.benchmark("oodrb_table", "{kind}")
    threads: 1
    resources:
        **resources.of(config, "oodrb_table", default="table"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/concat_tables.py"
