# Average-case robustness (Han, Srinivas & Lakkaraju): datasets, models trained with
# gradient-norm regularisation, every estimator at every sigma, PA under Gaussian noise,
# convergence, the case study, Table 1's runtimes, and one tidy table per kind.
from pabench.core import paths, resources
from pabench.experiments.avgcase import plan as avg

AVG_MODEL = r"[A-Za-z0-9_]+-lam[0-9.e+\-]+"


rule avg_data:
    output:
        data=paths.avg_data(),
    params:
        experiment="avgcase",
        dataset=lambda wc: avg.dataset_params(config, wc.dataset),
        seed=config["avgcase"]["data_seed"],
    wildcard_constraints:
        dataset="|".join(avg.datasets(config)),
    log:
        paths.log("avg_data", "{dataset}"),
    benchmark:
        paths.benchmark("avg_data", "{dataset}")
    threads: 1
    resources:
        **resources.of(config, "avg_data"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/avg_data.py"


rule avg_train:
    input:
        data=paths.avg_data(),
    output:
        model=paths.avg_file("models"),
        history=paths.avg_file("history"),
    params:
        experiment="avgcase",
        train=avg.train_params(config),
        device=config["avgcase"]["device"],
    wildcard_constraints:
        dataset="|".join(avg.datasets(config)),
        avg_model=AVG_MODEL,
        seed=r"\d+",
    log:
        paths.log("avg_train", "{dataset}", "{avg_model}", "s{seed}"),
    benchmark:
        paths.benchmark("avg_train", "{dataset}", "{avg_model}", "s{seed}")
    threads: 1
    resources:
        **resources.of(config, "avg_train"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/avg_train.py"


# One rule per evaluation of a trained model; the script dispatches on the rule's name.
for kind, reads in avg.EVALUATIONS.items():

    rule:
        name:
            f"avg_{kind}"
        input:
            model=paths.avg_file("models"),
            history=paths.avg_file("history"),  # its test accuracy: is the model degenerate?
            data=paths.avg_data(),
            **{name: paths.avg_file(name) for name in reads},
        output:
            table=paths.avg_file(kind),
        params:
            experiment="avgcase",
            kind=kind,
            settings=avg.eval_settings(config),
            pa=config["pa"]["adam"],
        wildcard_constraints:
            dataset="|".join(avg.datasets(config)),
            avg_model=AVG_MODEL,
            seed=r"\d+",
        log:
            paths.log(f"avg_{kind}", "{dataset}", "{avg_model}", "s{seed}"),
        benchmark:
            paths.benchmark(f"avg_{kind}", "{dataset}", "{avg_model}", "s{seed}")
        threads: 1
        resources:
            **resources.of(config, f"avg_{kind}"),
        conda:
            "../../envs/pabench.yaml"
        script:
            "../scripts/avg_evaluate.py"


rule avg_table:
    input:
        tables=lambda wc: avg.table_inputs(config, wc.kind),
    output:
        table=paths.avg_table("{kind}"),
    params:
        experiment="avgcase",
    wildcard_constraints:
        kind="|".join(avg.TABLES),
    log:
        paths.log("avg_table", "{kind}"),
    benchmark:
        paths.benchmark("avg_table", "{kind}")
    threads: 1
    resources:
        **resources.of(config, "avg_table", default="table"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/concat_tables.py"
