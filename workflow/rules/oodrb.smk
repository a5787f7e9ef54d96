# OODRobustBench (Li et al.): the ID split and every dataset shift, the zoo, per model its
# accuracy, MM5 robustness and PA under every dataset and threat shift, Table 3's attack
# comparison, and one tidy table per kind.
from pabench.core import paths, resources
from pabench.experiments.oodrb import plan as oodrb

# Every setup (oodrb.setups: CIFAR-10 L2, ImageNet L-inf beside the base CIFAR-10 L-inf), by the
# tag its per-model files sit under (the `dataset` wildcard of the per-model rules: the dataset
# for the base setup, the setup's name otherwise; plan.tag).
OODRB_SETUPS = oodrb.setups_by_tag(config)


OODRB_TAGS = oodrb.alternation(OODRB_SETUPS)
OODRB_DATASETS = oodrb.alternation(oodrb.dataset(c) for c in OODRB_SETUPS.values())
OODRB_OTHER = oodrb.alternation(oodrb.setup_of(c) for c in OODRB_SETUPS.values()
                   if oodrb.setup_of(c) != oodrb.BASE)
OODRB_MODELS = oodrb.alternation(m for c in OODRB_SETUPS.values() for m in oodrb.models(c) + oodrb.table3_only(c))
OODRB_TRAINED = oodrb.alternation(m for c in OODRB_SETUPS.values() for m in oodrb.trained(c))
OODRB_PUBLISHED = oodrb.alternation(m for c in OODRB_SETUPS.values() for m in oodrb.published(c))
OODRB_SHIFTS = oodrb.alternation(s for c in OODRB_SETUPS.values() for s in oodrb.shifts(c))


rule oodrb_data:
    output:
        data=paths.oodrb_data(shift="id"),
    params:
        experiment="oodrb",
        settings=lambda wc: oodrb.data_config(config, wc.dataset)["oodrb"],
    wildcard_constraints:
        dataset=OODRB_DATASETS,
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
        settings=lambda wc: oodrb.data_config(config, wc.dataset)["oodrb"],
    wildcard_constraints:
        dataset=OODRB_DATASETS,
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
        data=lambda wc: oodrb.data_file(oodrb.setup_config(config, wc.dataset), "id"),
    output:
        model=paths.oodrb_file("models"),
        history=paths.oodrb_file("history"),
    params:
        experiment="oodrb",
        spec=lambda wc: oodrb.zoo(oodrb.setup_config(config, wc.dataset))[wc.oodrb_model],
        eps=lambda wc: oodrb.eps_of(oodrb.setup_config(config, wc.dataset)),
        device=config["oodrb"]["device"],
    wildcard_constraints:
        dataset=OODRB_TAGS,
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
        spec=lambda wc: oodrb.zoo(oodrb.setup_config(config, wc.dataset))[wc.oodrb_model],
        directory=config["oodrb"]["published_dir"],
        weights=config["oodrb"]["published_weights"],
        robustbench_dir=config["oodrb"]["robustbench_dir"],
    wildcard_constraints:
        dataset=OODRB_TAGS,
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
            model=lambda wc: oodrb.model_input(oodrb.setup_config(config, wc.dataset), wc.dataset, wc.oodrb_model),
            data=lambda wc: oodrb.data_file(oodrb.setup_config(config, wc.dataset), "id"),
            # oodrb_shifts with split_shifts: every shift's scores from its own job below
            shifts=((lambda wc: oodrb.shift_inputs(oodrb.setup_config(config, wc.dataset), wc.dataset, wc.oodrb_model))
                    if kind == "shifts" else
                    (lambda wc: list(oodrb.shift_files(oodrb.setup_config(config, wc.dataset)).values()))),
            # every shift's images (split_shifts: read for the originals each corruption corrupts)
            shift_data=lambda wc: list(oodrb.shift_files(oodrb.setup_config(config, wc.dataset)).values()),
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
            dataset=OODRB_TAGS,
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
        model=lambda wc: oodrb.model_input(oodrb.setup_config(config, wc.dataset), wc.dataset, wc.oodrb_model),
        data=lambda wc: oodrb.data_file(oodrb.setup_config(config, wc.dataset), "id"),
        shift=lambda wc: oodrb.data_file(oodrb.setup_config(config, wc.dataset), wc.shift),
    output:
        table=paths.oodrb_shift_file("shift_scores"),
        predictions=paths.oodrb_shift_file("shift_predictions"),
    params:
        experiment="oodrb",
        kind="shift_scores",
        pa=config["pa"]["adam"],
    wildcard_constraints:
        dataset=OODRB_TAGS,
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
        tables=lambda wc: oodrb.table_inputs(oodrb.for_setup(config, oodrb.BASE), wc.kind),
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


# Another setup's tables (oodrb.setups), in a folder of its own beside the base setup's.
rule oodrb_setup_table:
    input:
        tables=lambda wc: oodrb.table_inputs(oodrb.for_setup(config, wc.setup), wc.kind),
    output:
        table=paths.oodrb_table("{kind}", "{setup}"),
    params:
        experiment="oodrb",
    wildcard_constraints:
        kind="|".join(oodrb.TABLES),
        setup=OODRB_OTHER,
    log:
        paths.log("oodrb_table", "{setup}", "{kind}"),
    benchmark:
        paths.benchmark("oodrb_table", "{setup}", "{kind}")
    threads: 1
    resources:
        **resources.of(config, "oodrb_setup_table", default="table"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/concat_tables.py"
