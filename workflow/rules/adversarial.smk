# Adversarial robustness (PA paper, Section 4.1, Appendices B and F): test images, the
# self-trained zoo (and RobustBench models at paper scale), one attack run per
# (model, attack, eps), PA / AFR on the adversarial-ratio views, Figures 3-6, 9, 14-18.
include: "adversarial_setup.smk"


wildcard_constraints:
    dataset="mnist32|cifar10|imagenet",
    adv_model=r"[A-Za-z0-9_.\-]+",
    attack="|".join(ATTACKS),
    eps=rf"[0-9.\-]+|{MIN_NORM}",


rule adv_data:
    output:
        split="data/adversarial/{dataset}/{split}.npz",
    params:
        experiment="adversarial",
        dataset=lambda wc: IMAGENET if wc.dataset == "imagenet" else ADV.get(wc.dataset, {}),
        n_test=ADV["n_test"],
        test_seed=ADV["test_seed"],
    wildcard_constraints:
        split="train|test",
    log:
        "data/logs/adv_data/{dataset}-{split}.log",
    benchmark:
        "data/benchmarks/adv_data/{dataset}-{split}.tsv"
    conda:
        ENV
    script:
        "../scripts/adv_data.py"


rule adv_train:
    input:
        train=f"data/adversarial/{ADV_DATA}/train.npz",
        test=f"data/adversarial/{ADV_DATA}/test.npz",
    output:
        model=f"data/adversarial/{ADV_DATA}/models/{{adv_model}}.pt",
        history=f"data/adversarial/{ADV_DATA}/models/{{adv_model}}.csv",
    params:
        experiment="adversarial",
        zoo=lambda wc: zoo_params(wc.adv_model),
        jpeg_rs=lambda wc: jpeg_rs_params(wc.adv_model),
        device=ADV["device"],
    wildcard_constraints:
        adv_model="|".join(ZOO),
    threads: 1
    log:
        "data/logs/adv_train/{adv_model}.log",
    benchmark:
        "data/benchmarks/adv_train/{adv_model}.tsv"
    conda:
        ENV
    script:
        "../scripts/adv_train.py"


rule adv_attack:
    input:
        model=lambda wc: adv_model_input(wc.adv_model),
        test="data/adversarial/{dataset}/test.npz",
    output:
        record="data/adversarial/{dataset}/attacks/{adv_model}/{attack}/{eps}.npz",
    params:
        experiment="adversarial",
        settings=lambda wc: adv_setup(wc.dataset)[1][wc.attack],
        jpeg_rs=lambda wc: jpeg_rs_params(wc.adv_model),
        from_zoo=lambda wc: wc.adv_model in ZOO,
        device=ADV["device"],
        batch_size=ADV["batch_size"],
        robustbench_dir=ADV["robustbench_dir"],
    threads: 1
    log:
        "data/logs/adv_attack/{dataset}-{adv_model}-{attack}-{eps}.log",
    benchmark:
        "data/benchmarks/adv_attack/{dataset}-{adv_model}-{attack}-{eps}.tsv"
    conda:
        ENV
    script:
        "../scripts/adv_attack.py"


rule adv_score:
    input:
        records=lambda wc: [adv_record(wc.dataset, wc.adv_model, wc.attack, e)
                            for e in adv_eps(wc.attack, wc.dataset)],
    output:
        table=adv_scores("{dataset}", "{adv_model}", "{attack}"),
    params:
        experiment="adversarial",
        runs=lambda wc: [(wc.attack, e) for e in adv_eps(wc.attack, wc.dataset)],
        ratios=ADV["adversarial_ratios"],
        pa_epochs=ADV["pa_epochs"],
        adam=config["pa"]["adam"],
    log:
        "data/logs/adv_score/{dataset}-{adv_model}-{attack}.log",
    benchmark:
        "data/benchmarks/adv_score/{dataset}-{adv_model}-{attack}.tsv"
    conda:
        ENV
    script:
        "../scripts/adv_score.py"


rule adv_table:
    input:
        tables=lambda wc: adv_score_tables(wc.dataset),
        histories=lambda wc: [f"data/adversarial/{ADV_DATA}/models/{m}.csv"
                              for m in adv_setup(wc.dataset)[0] if m in ZOO],
    output:
        table="data/results/adversarial/{dataset}.csv",
        md="figures/pa/models-{dataset}.md",
        csv="figures/pa/models-{dataset}.csv",
        tex="figures/pa/models-{dataset}.tex",
        html=reported("figures/pa/models-{dataset}.html", "adversarial"),
    params:
        experiment="adversarial",
        models=lambda wc: adv_setup(wc.dataset)[0],
        zoo=ADV["zoo"],
        meta=lambda wc: provenance(
            caption="Models of the adversarial experiments: source (self-trained zoo or "
            "RobustBench), training method, architecture and clean accuracy on the attacked "
            "test images",
            data=DATASET_LABEL[wc.dataset]),
    log:
        "data/logs/adv_table/{dataset}.log",
    benchmark:
        "data/benchmarks/adv_table/{dataset}.tsv"
    conda:
        ENV
    script:
        "../scripts/adv_table.py"


rule adv_ar_figure:
    input:
        tables=lambda wc: adv_score_tables(AR_FIGURES[wc.figure][0], [AR_FIGURES[wc.figure][1]]),
        style=STYLE,
    output:
        pdf="figures/pa/{figure}.pdf",
        png=reported("figures/pa/{figure}.png", "adversarial"),
        csv="figures/pa/{figure}.csv",
    params:
        experiment="adversarial",
        attack=lambda wc: AR_FIGURES[wc.figure][1],
        models=lambda wc: adv_setup(AR_FIGURES[wc.figure][0])[0],
        meta=lambda wc: adv_figure_meta(AR_FIGURES[wc.figure][2], [AR_FIGURES[wc.figure][1]],
                                        AR_FIGURES[wc.figure][0]),
    wildcard_constraints:
        figure="|".join(AR_FIGURES),
    log:
        "data/logs/{figure}.log",
    benchmark:
        "data/benchmarks/adv_ar_figure/{figure}.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"


rule adv_confidence_figure:
    input:
        records=lambda wc: sorted({adv_record(ADV_DATA, m, a, e)
                                   for a, e, _ in CONFIDENCE_FIGURES[wc.figure][0]
                                   for m in CONFIDENCE_FIGURES[wc.figure][1]}),
        tables=lambda wc: adv_score_tables(
            ADV_DATA, sorted({a for a, _, _ in CONFIDENCE_FIGURES[wc.figure][0]})),
        style=STYLE,
    output:
        pdf="figures/pa/{figure}.pdf",
        png=reported("figures/pa/{figure}.png", "adversarial"),
        csv="figures/pa/{figure}.csv",
    params:
        experiment="adversarial",
        panels=lambda wc: CONFIDENCE_FIGURES[wc.figure][0],
        models=lambda wc: CONFIDENCE_FIGURES[wc.figure][1],
        dataset=ADV_DATA,
        meta=lambda wc: adv_figure_meta(CONFIDENCE_FIGURES[wc.figure][2],
                                        sorted({a for a, _, _ in CONFIDENCE_FIGURES[wc.figure][0]})),
    wildcard_constraints:
        figure="|".join(CONFIDENCE_FIGURES),
    log:
        "data/logs/{figure}.log",
    benchmark:
        "data/benchmarks/adv_confidence_figure/{figure}.tsv"
    conda:
        ENV
    script:
        "../scripts/figure.py"
