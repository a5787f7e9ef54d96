# PA paper, Figures 1 and 2: the Bernoulli classifiers and the PA illustration.


rule toy_bernoulli:
    output:
        table="data/results/toy/bernoulli.csv",
    params:
        experiment="toy",
        settings=config["toy"]["bernoulli"],
        adam=config["pa"]["adam"],
    log:
        "data/logs/toy_bernoulli.log",
    benchmark:
        "data/benchmarks/toy_bernoulli/toy_bernoulli.tsv"
    conda:
        ENV
    script:
        "../scripts/toy_bernoulli.py"


rule toy_gaussian:
    output:
        table="data/results/toy/gaussian.csv",
    params:
        experiment="toy",
        settings=config["toy"]["gaussian"],
    log:
        "data/logs/toy_gaussian.log",
    benchmark:
        "data/benchmarks/toy_gaussian/toy_gaussian.tsv"
    conda:
        ENV
    script:
        "../scripts/toy_gaussian.py"


rule fig01:
    input:
        table=rules.toy_bernoulli.output.table,
        style=STYLE,
    output:
        pdf="figures/pa/fig01.pdf",
        png=reported("figures/pa/fig01.png", "toy"),
        csv="figures/pa/fig01.csv",
    params:
        experiment="toy",
        meta=provenance(
            caption="Figure 1: accuracy and PA of a perfect, a constant and a random binary "
            "classifier on Bernoulli(p) targets (mean +- std over seeds)",
            data="simulated Bernoulli targets",
            n=config["toy"]["bernoulli"]["n_samples"],
            solver=", ".join(config["toy"]["bernoulli"]["solvers"]),
            adam_epochs=config["toy"]["bernoulli"]["adam_epochs"],
            seeds=config["toy"]["bernoulli"]["seeds"],
        ),
    log:
        "data/logs/fig01.log",
    benchmark:
        "data/benchmarks/fig01/fig01.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"


rule fig02:
    input:
        table=rules.toy_gaussian.output.table,
        style=STYLE,
    output:
        pdf="figures/pa/fig02.pdf",
        png=reported("figures/pa/fig02.png", "toy"),
        csv="figures/pa/fig02.csv",
    params:
        experiment="toy",
        meta=provenance(
            caption="Figure 2: Gibbs posteriors over a real-valued mean fit to two noisy samples, "
            "at beta too low, optimal (exact solver) and too high, and PA as a function of beta",
            data="simulated Gaussian samples",
            n=config["toy"]["gaussian"]["n_observations"],
            solver="exact",
            seeds=[config["toy"]["gaussian"]["seed"]],
        ),
    log:
        "data/logs/fig02.log",
    benchmark:
        "data/benchmarks/fig02/fig02.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"
