# What the report adds to the figures: the claims check (the papers' checkable claims evaluated
# on the tidy result tables) and the run's timing (every rule's Snakemake benchmark files).
CLAIM_TABLES = {
    "toy_bernoulli": rules.toy_bernoulli.output.table,
    "toy_gaussian": rules.toy_gaussian.output.table,
    "dg": rules.dg_pa_table.output.table,
    "model_selection": rules.ms_table.output.table,
    "adversarial": f"data/results/adversarial/{ADV_DATA}.csv",
    **({"imagenet": "data/results/adversarial/imagenet.csv"} if IMAGENET_ON else {}),
}


rule claims:
    input:
        **CLAIM_TABLES,
    output:
        md="figures/claims.md",
        csv="figures/claims.csv",
        html=reported("figures/claims.html", "checks", CHECKS),
    params:
        experiment="checks",
        meta=provenance(
            caption="Claims check: each checkable claim of the papers, where it comes from, what "
            "this run measured and the verdict (reproduced / not reproduced / not evaluated at "
            "this scale); thresholds are fixed in src/pabench/claims.py, not tuned",
            data="the workflow's tidy result tables: " + ", ".join(CLAIM_TABLES.values()),
            solver="as each claim states (adam: the paper's solver; exact)",
            seeds="those of the experiments",
        ),
    log:
        "data/logs/claims.log",
    benchmark:
        "data/benchmarks/claims/claims.tsv"
    conda:
        ENV
    script:
        "../scripts/claims.py"


rule timings:
    input:
        RESULTS,
        rules.claims.output,  # last: every other job's benchmark file is written
    output:
        md="figures/timings.md",
        csv="figures/timings.csv",
        html=reported("figures/timings.html", "checks", CHECKS),
    params:
        experiment="checks",
        meta=provenance(
            caption="Timing of the run: wall-clock seconds and peak memory per rule, summed over "
            "its jobs, from the Snakemake benchmark files under data/benchmarks (jobs ran side by "
            "side, so the sum exceeds the elapsed time)",
            data="every benchmark file under data/benchmarks/<rule>/ (the latest run of each job, "
            "including jobs of earlier configurations whose files are still there)",
        ),
    log:
        "data/logs/timings.log",
    conda:
        ENV
    script:
        "../scripts/timings.py"
