# Domain generalisation (PA paper, Section 4.2): ERM / IRM / LISA on the shift-factor study,
# test-set scores, PA and AFR on the shift-ratio datasets, Figure 7.
from pabench.dg import stage_epochs, train_params

DG = config["dg"]
DG_RUNS = [f"{a}-s{s}" for a in DG["algorithms"] for s in DG["seeds"]]
TRAIN_THREADS = DG.get("threads") or workflow.cores
PCA_ALGORITHMS = [a for a in ("erm", "irm") if a in DG["algorithms"]]  # Figure 11



rule train_dg:
    input:
        train=split_dir("shift_factor", "train"),
        val=split_dir("shift_factor", "val"),
    output:
        best_acc="data/models/shift_factor/{algorithm}-s{seed}/best_acc.pt",
        best_pa="data/models/shift_factor/{algorithm}-s{seed}/best_pa.pt",
        last="data/models/shift_factor/{algorithm}-s{seed}/last.pt",
        history="data/models/shift_factor/{algorithm}-s{seed}/history.csv",
        stages=expand("data/models/shift_factor/{{algorithm}}-s{{seed}}/epoch{e}.pt",
                      e=stage_epochs(DG["epochs"])),
    params:
        experiment="dg",
        dg=lambda wc: train_params(DG, wc.algorithm),
    wildcard_constraints:
        algorithm="[a-z]+",
        seed=r"\d+",
    threads: TRAIN_THREADS
    log:
        "data/logs/train_dg/{algorithm}-s{seed}.log",
    benchmark:
        "data/benchmarks/train_dg/{algorithm}-s{seed}.tsv"
    conda:
        ENV
    script:
        "../scripts/train_dg.py"


rule dg_scores:
    input:
        model="data/models/shift_factor/{algorithm}-s{seed}/last.pt",
        test=split_dir("shift_factor", "test"),
    output:
        scores="data/results/dg/scores/{algorithm}-s{seed}.npz",
    params:
        experiment="dg",
        device=DG["device"],
    wildcard_constraints:
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        "data/logs/dg_scores/{algorithm}-s{seed}.log",
    benchmark:
        "data/benchmarks/dg_scores/{algorithm}-s{seed}.tsv"
    conda:
        ENV
    script:
        "../scripts/dg_scores.py"


rule dg_pa:
    input:
        scores=rules.dg_scores.output.scores,
    output:
        table="data/results/dg/pa/{algorithm}-s{seed}.csv",
    params:
        experiment="dg",
        ratios=DIAGVIB["shift_ratios"],
        pa_epochs=DG["pa_epochs"],
        adam=config["pa"]["adam"],
    wildcard_constraints:
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        "data/logs/dg_pa/{algorithm}-s{seed}.log",
    benchmark:
        "data/benchmarks/dg_pa/{algorithm}-s{seed}.tsv"
    conda:
        ENV
    script:
        "../scripts/dg_pa.py"


rule dg_pa_table:
    input:
        tables=expand("data/results/dg/pa/{run}.csv", run=DG_RUNS),
    output:
        table="data/results/dg/pa.csv",
    params:
        experiment="dg",
    log:
        "data/logs/dg_pa_table.log",
    benchmark:
        "data/benchmarks/dg_pa_table/dg_pa_table.tsv"
    conda:
        ENV
    script:
        "../scripts/concat_tables.py"


rule fig07:
    input:
        table=rules.dg_pa_table.output.table,
        style=STYLE,
    output:
        pdf="figures/pa/fig07.pdf",
        png=reported("figures/pa/fig07.png", "dg"),
        csv="figures/pa/fig07.csv",
    params:
        experiment="dg",
        meta=provenance(
            caption="Figure 7: PA (adam solver, as the paper; and the exact solver) and AFR_T of "
            "ERM, IRM and LISA trained on env0/env1, tested against env0 on env1..env5 at shift "
            "ratios SR (mean over seeds)",
            data=f"DiagViB-6 shift-factor study ({config['data']['mnist']['source']} digits, "
            f"{DIAGVIB['image_size']}px)",
            backbone=DG["backbone"],
            epochs=DG["epochs"],
            solver=f"adam ({DG['pa_epochs']} epochs) and exact",
            seeds=DG["seeds"],
        ),
    log:
        "data/logs/fig07.log",
    benchmark:
        "data/benchmarks/fig07/fig07.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"


MS = DG["model_selection"]
MS_STUDY = DIAGVIB["studies"]["model_selection"]
MS_SETTINGS = [s for s, c in MS_STUDY["splits"].items() if c["pool"] == "train"]
MS_RUNS = [f"{setting}/{a}-s{s}" for setting in MS_SETTINGS for a in MS["algorithms"] for s in DG["seeds"]]


rule train_ms:
    input:
        train=split_dir("model_selection", "{setting}"),
        val=split_dir("model_selection", MS["validation"]),
    output:
        best_acc="data/models/model_selection/{setting}/{algorithm}-s{seed}/best_acc.pt",
        best_pa="data/models/model_selection/{setting}/{algorithm}-s{seed}/best_pa.pt",
        last="data/models/model_selection/{setting}/{algorithm}-s{seed}/last.pt",
        history="data/models/model_selection/{setting}/{algorithm}-s{seed}/history.csv",
    params:
        experiment="model_selection",
        dg=lambda wc: train_params(DG, wc.algorithm),
        epochs=MS["epochs"],
    wildcard_constraints:
        setting="[a-z0-9_]+",
        algorithm="[a-z]+",
        seed=r"\d+",
    threads: TRAIN_THREADS
    log:
        "data/logs/train_ms/{setting}-{algorithm}-s{seed}.log",
    benchmark:
        "data/benchmarks/train_ms/{setting}-{algorithm}-s{seed}.tsv"
    conda:
        ENV
    script:
        "../scripts/train_dg.py"


rule ms_eval:
    input:
        best_acc=rules.train_ms.output.best_acc,
        best_pa=rules.train_ms.output.best_pa,
        test=split_dir("model_selection", "test"),
    output:
        table="data/results/model_selection/{setting}/{algorithm}-s{seed}.csv",
    params:
        experiment="model_selection",
        device=DG["device"],
        label=lambda wc: MS_STUDY["splits"][wc.setting].get("label", wc.setting),
    wildcard_constraints:
        setting="[a-z0-9_]+",
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        "data/logs/ms_eval/{setting}-{algorithm}-s{seed}.log",
    benchmark:
        "data/benchmarks/ms_eval/{setting}-{algorithm}-s{seed}.tsv"
    conda:
        ENV
    script:
        "../scripts/ms_eval.py"


rule ms_table:
    input:
        tables=expand("data/results/model_selection/{run}.csv", run=MS_RUNS),
    output:
        table="data/results/model_selection.csv",
    params:
        experiment="model_selection",
    log:
        "data/logs/ms_table.log",
    benchmark:
        "data/benchmarks/ms_table/ms_table.tsv"
    conda:
        ENV
    script:
        "../scripts/concat_tables.py"


rule table1:
    input:
        results=rules.ms_table.output.table,
    output:
        md="figures/pa/table1.md",
        csv="figures/pa/table1.csv",
        tex="figures/pa/table1.tex",
        html=reported("figures/pa/table1.html", "model_selection"),
    params:
        experiment="model_selection",
        settings=[MS_STUDY["splits"][s].get("label", s) for s in MS_SETTINGS],
        tests=MS_STUDY["splits"]["test"]["envs"],
        meta=provenance(
            caption="Table 1: model selection with in-distribution validation: test accuracy (%) "
            "on Test 1..5 of the epoch selected by validation accuracy, and the difference "
            "PA-selected minus accuracy-selected (with its std over seeds)",
            data=f"DiagViB-6 model-selection study ({config['data']['mnist']['source']} digits, "
            f"{DIAGVIB['image_size']}px)",
            backbone=DG["backbone"],
            epochs=MS["epochs"],
            validation=MS["validation"],
            solver="exact",
            seeds=DG["seeds"],
        ),
    log:
        "data/logs/table1.log",
    benchmark:
        "data/benchmarks/table1/table1.tsv"
    conda:
        ENV
    script:
        "../scripts/table.py"


rule fig08:
    input:
        scores=expand("data/results/dg/scores/{run}.npz", run=DG_RUNS),
        pa=rules.dg_pa_table.output.table,
        style=STYLE,
    output:
        pdf="figures/pa/fig08.pdf",
        png=reported("figures/pa/fig08.png", "dg"),
        csv="figures/pa/fig08.csv",
    params:
        experiment="dg",
        runs=DG_RUNS,
        meta=provenance(
            caption="Figure 8: average predictive confidence (max softmax, mean +- standard error) "
            "on env0 and on env k for #SF = 1..5, per algorithm, and the final beta (adam solver, "
            "SR = 1) at #SF = 5",
            data=f"DiagViB-6 shift-factor study ({config['data']['mnist']['source']} digits, "
            f"{DIAGVIB['image_size']}px)",
            backbone=DG["backbone"],
            solver=f"adam ({DG['pa_epochs']} epochs)",
            seeds=DG["seeds"],
        ),
    log:
        "data/logs/fig08.log",
    benchmark:
        "data/benchmarks/fig08/fig08.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"


rule fig11:
    input:
        stages=[f"data/models/shift_factor/{a}-s{DG['seeds'][0]}/epoch{e}.pt"
                for a in PCA_ALGORITHMS for e in stage_epochs(DG["epochs"])],
        val=split_dir("shift_factor", "val"),
        style=STYLE,
    output:
        pdf="figures/pa/fig11.pdf",
        png=reported("figures/pa/fig11.png", "dg"),
        csv="figures/pa/fig11.csv",
    params:
        experiment="dg",
        algorithms=PCA_ALGORITHMS,
        samples=128,
        device=DG["device"],
        meta=provenance(
            caption="Figure 11: first principal component (scaled to [-1, 1]) of the penultimate "
            "features of 128 paired validation samples in env0 (red) and env1 (blue), coloured by "
            "class, for ERM and IRM at the first, middle and last epoch (the runs of Figure 7; "
            "Appendix D trained separate ResNet18 runs for 50 epochs at lr 1e-2)",
            data=f"DiagViB-6 shift-factor study ({config['data']['mnist']['source']} digits, "
            f"{DIAGVIB['image_size']}px)",
            backbone=DG["backbone"],
            seeds=DG["seeds"][:1],
        ),
    log:
        "data/logs/fig11.log",
    benchmark:
        "data/benchmarks/fig11/fig11.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"
