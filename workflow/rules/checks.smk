# What the report adds to the papers: the claims check (every paper's checkable claims evaluated
# on the tidy result tables) and the run's timing (every rule's Snakemake benchmark files).
from pabench.core import paths, resources
from pabench.papers import all_targets, claim_modules, claim_tables
from pabench.reporting.registry import CHECKS, reported


rule claims:
    input:
        **claim_tables(config),
    output:
        md=paths.check_files("claims")["md"],
        csv=paths.check_files("claims")["csv"],
        html=reported(paths.check_files("claims")["html"], CHECKS, "checks"),
    params:
        experiment="checks",
        modules=claim_modules(),
        meta={
            "caption": "Claims check: each checkable claim of the papers, where it comes from, "
            "what this run measured and the verdict over the seeds (reproduced in every seed / "
            "mixed / not reproduced in any / not evaluated at this scale), in how many seeds it "
            "held, fewer than 3 seeds marked; degenerate models (near chance, or PA at beta* = 0 "
            "everywhere) are left out as not evidence; thresholds are fixed in the experiments' "
            "claims modules, not tuned",
            "scale": config["scale"],
            "data": "the workflow's tidy result tables: " + ", ".join(claim_tables(config).values()),
            "solver": "as each claim states (adam: the paper's solver; exact)",
            "seeds": "those of the experiments: each claim is checked per seed",
        },
    log:
        paths.log("claims"),
    benchmark:
        paths.benchmark("claims")
    threads: 1
    resources:
        **resources.of(config, "claims"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/claims.py"


rule timings:
    input:
        all_targets(config),
        paths.check_files("claims").values(),  # last: every other job's benchmark file is written
    output:
        md=paths.check_files("timings")["md"],
        csv=paths.check_files("timings")["csv"],
        html=reported(paths.check_files("timings")["html"], CHECKS, "checks"),
    params:
        experiment="checks",
        meta={
            "caption": "Timing of the run: wall-clock seconds and peak memory per rule, summed "
            "over its jobs, from the Snakemake benchmark files under data/benchmarks (jobs ran side "
            "by side, so the sum exceeds the elapsed time)",
            "scale": config["scale"],
            "data": "every benchmark file under data/benchmarks/<rule>/ (the latest run of each "
            "job, including jobs of earlier configurations whose files are still there)",
        },
    log:
        paths.log("timings"),
    threads: 1
    resources:
        **resources.of(config, "timings"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/timings.py"
