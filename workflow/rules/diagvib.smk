# DiagViB-6 datasets (PA paper, Section 4.2 and Appendix E): digit pools, rendered splits,
# shift-ratio views, ASS, Figure 13 and Table 2.
DIAGVIB = config["diagvib"]


rule mnist_pools:
    output:
        pools="data/mnist/pools.npz",
    params:
        experiment="mnist",
        source=config["data"]["mnist"]["source"],
        root=config["data"]["mnist"]["root"],
    log:
        "data/logs/mnist_pools.log",
    benchmark:
        "data/benchmarks/mnist_pools/mnist_pools.tsv"
    conda:
        ENV
    script:
        "../scripts/mnist_pools.py"


rule diagvib_split:
    input:
        pools=rules.mnist_pools.output.pools,
    output:
        directory("data/diagvib/{study}/{split}"),
    params:
        experiment="diagvib",
        study=lambda wc: DIAGVIB["studies"][wc.study],
        size=DIAGVIB["image_size"],
        texture_seed=DIAGVIB["texture_seed"],
        chunk=DIAGVIB["chunk"],
    wildcard_constraints:
        study="[a-z_]+",
        split="[a-z0-9_]+",
    log:
        "data/logs/diagvib_split/{study}-{split}.log",
    benchmark:
        "data/benchmarks/diagvib_split/{study}-{split}.tsv"
    conda:
        ENV
    script:
        "../scripts/diagvib_split.py"


rule shift_ratio_views:
    input:
        test=split_dir("shift_factor", "test"),
    output:
        views="data/diagvib/shift_factor/shift_ratio_views.json",
    params:
        experiment="diagvib",
        ratios=DIAGVIB["shift_ratios"],
    log:
        "data/logs/shift_ratio_views.log",
    benchmark:
        "data/benchmarks/shift_ratio_views/shift_ratio_views.tsv"
    conda:
        ENV
    script:
        "../scripts/shift_ratio_views.py"


rule diagvib_ass:
    input:
        test=split_dir("shift_factor", "test"),
    output:
        table="data/results/diagvib/ass.csv",
    params:
        experiment="diagvib",
    log:
        "data/logs/diagvib_ass.log",
    benchmark:
        "data/benchmarks/diagvib_ass/diagvib_ass.tsv"
    conda:
        ENV
    script:
        "../scripts/diagvib_ass.py"


rule fig13:
    input:
        train=split_dir("shift_factor", "train"),
        val=split_dir("shift_factor", "val"),
        test=split_dir("shift_factor", "test"),
        style=STYLE,
    output:
        pdf="figures/pa/fig13.pdf",
        png=reported("figures/pa/fig13.png", "diagvib"),
        csv="figures/pa/fig13.csv",
    params:
        experiment="diagvib",
        meta=provenance(
            caption="Figure 13: samples of the shift-factor study: training env0/env1 (different "
            "digit instances), validation env0/env1 and test env0..env5 (the same instances)",
            data=f"DiagViB-6 ({config['data']['mnist']['source']} digits, "
            f"{DIAGVIB['image_size']}px)",
            seeds=[s["seed"] for s in DIAGVIB["studies"]["shift_factor"]["splits"].values()],
        ),
    log:
        "data/logs/fig13.log",
    benchmark:
        "data/benchmarks/fig13/fig13.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"


rule table2:
    input:
        ass=rules.diagvib_ass.output.table,
    output:
        md="figures/pa/table2.md",
        csv="figures/pa/table2.csv",
        tex="figures/pa/table2.tex",
        html=reported("figures/pa/table2.html", "diagvib"),
    params:
        experiment="diagvib",
        study=DIAGVIB["studies"]["shift_factor"],
        envs=DIAGVIB["studies"]["shift_factor"]["splits"]["test"]["envs"],
        meta=provenance(
            caption="Table 2: factors of the shift-factor environments (cumulative shifts; CC = "
            "center-center, LC = lower-center) and the average structural similarity (ASS) of "
            "each test environment to env0 over paired images",
            data=f"DiagViB-6 ({config['data']['mnist']['source']} digits, "
            f"{DIAGVIB['image_size']}px)",
            n=DIAGVIB["studies"]["shift_factor"]["splits"]["test"]["n"],
        ),
    log:
        "data/logs/table2.log",
    benchmark:
        "data/benchmarks/table2/table2.tsv"
    conda:
        ENV
    script:
        "../scripts/table.py"


rule fig12:
    input:
        style=STYLE,
    output:
        pdf="figures/pa/fig12.pdf",
        png=reported("figures/pa/fig12.png", "diagvib"),
        csv="figures/pa/fig12.csv",
    params:
        experiment="diagvib",
        study=DIAGVIB["studies"]["model_selection"],
        meta=provenance(
            caption="Figure 12: co-occurrence of the learning factor (hue) and the predicted "
            "factor (digit) in the training sources of each setting (x = the pair occurs), drawn "
            "from the config. k-CGO: the first k digits of (1, 7, 4) occur with both hues (our "
            "reading; the paper does not list the pairs)",
            data="configuration",
        ),
    log:
        "data/logs/fig12.log",
    benchmark:
        "data/benchmarks/fig12/fig12.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"


rule table3:
    output:
        md="figures/pa/table3.md",
        csv="figures/pa/table3.csv",
        tex="figures/pa/table3.tex",
        html=reported("figures/pa/table3.html", "diagvib"),
    params:
        experiment="diagvib",
        study=DIAGVIB["studies"]["model_selection"],
        meta=provenance(
            caption="Table 3: environments of the model-selection study (hue is the learning "
            "factor; CC = center-center, UL = upper-left). Training sources: env 0 red, env 1 "
            "blue; the co-occurrence settings choose the digits each source shows: ZGO red 1,4 / "
            "blue 7,9; k-CGO the first k digits of (1, 7, 4) with both hues; ZSO all digits with "
            "both (our reading of Figure 12). Validation pairs share digit instances; Test 1-5 are "
            "the cumulative shifts of Table 2",
            data="configuration",
            n={s: c["n"] for s, c in DIAGVIB["studies"]["model_selection"]["splits"].items()},
        ),
    log:
        "data/logs/table3.log",
    benchmark:
        "data/benchmarks/table3/table3.tsv"
    conda:
        ENV
    script:
        "../scripts/table.py"
