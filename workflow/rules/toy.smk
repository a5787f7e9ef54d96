# PA paper, toy examples: the Bernoulli classifiers (Figure 1) and the PA illustration (Figure 2).
from pabench.core import paths, resources


rule toy_bernoulli:
    output:
        table=paths.toy_table("bernoulli"),
    params:
        experiment="toy",
        settings=config["toy"]["bernoulli"],
        adam=config["pa"]["adam"],
    log:
        paths.log("toy_bernoulli"),
    benchmark:
        paths.benchmark("toy_bernoulli")
    threads: 1
    resources:
        **resources.of(config, "toy_bernoulli"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/toy_bernoulli.py"


rule toy_gaussian:
    output:
        table=paths.toy_table("gaussian"),
    params:
        experiment="toy",
        settings=config["toy"]["gaussian"],
    log:
        paths.log("toy_gaussian"),
    benchmark:
        paths.benchmark("toy_gaussian")
    threads: 1
    resources:
        **resources.of(config, "toy_gaussian"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/toy_gaussian.py"
