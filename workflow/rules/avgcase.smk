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
        train=lambda wc: avg.train_params(config, avg.model_of(f"{wc.dataset}/{wc.avg_model}").arch),
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


# One rule per evaluation of a trained model; the script dispatches on the rule's name.  With
# avgcase.split_sigmas, avg_estimates stacks the rows of avg_estimates_sigma below instead of
# computing them.
for kind, reads in avg.EVALUATIONS.items():
    stacks = kind == "estimates" and avg.split_sigmas(config)

    rule:
        name:
            f"avg_{kind}"
        input:
            model=paths.avg_file("models"),
            history=paths.avg_file("history"),  # its test accuracy: is the model degenerate?
            data=paths.avg_data(),
            **{name: paths.avg_file(name) for name in reads},
            sigmas=(lambda wc: avg.sigma_inputs(config, wc.dataset, wc.avg_model, wc.seed))
            if stacks else [],
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
            **(resources.of(config, "table") if stacks else resources.of(config, f"avg_{kind}")),
        conda:
            "../../envs/pabench.yaml"
        script:
            "../scripts/avg_evaluate.py"


# With avgcase.split_sigmas: one model's estimators at one sigma (numbered by its place in
# avgcase.sigmas), read by its avg_estimates.
rule avg_estimates_sigma:
    input:
        model=paths.avg_file("models"),
        history=paths.avg_file("history"),
        data=paths.avg_data(),
    output:
        table=paths.avg_sigma_file(),
    params:
        experiment="avgcase",
        kind="estimates_sigma",
        settings=avg.eval_settings(config),
    wildcard_constraints:
        dataset="|".join(avg.datasets(config)),
        avg_model=AVG_MODEL,
        seed=r"\d+",
        sigma_index=r"\d+",
    log:
        paths.log("avg_estimates_sigma", "{dataset}", "{avg_model}", "s{seed}", "{sigma_index}"),
    benchmark:
        paths.benchmark("avg_estimates_sigma", "{dataset}", "{avg_model}", "s{seed}",
                        "{sigma_index}")
    threads: 1
    resources:
        **resources.of(config, "avg_estimates_sigma"),
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
