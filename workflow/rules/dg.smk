# Domain generalisation (PA paper, Section 4.2): ERM / IRM / LISA on the shift-factor study, test
# scores, PA and AFR on the shift-ratio datasets; model selection (Table 1) on the co-occurrence
# settings of the model-selection study.
from pabench.core import paths, resources
from pabench.experiments.dg import plan as dg


rule train_dg:
    input:
        train=paths.diagvib_split("shift_factor", "train"),
        val=paths.diagvib_split("shift_factor", "val"),
    output:
        **dg.train_outputs(config),
    params:
        experiment="dg",
        dg=lambda wc: dg.train_params(config["dg"], wc.algorithm),
        stages=False,
    wildcard_constraints:
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        paths.log("train_dg", "{algorithm}", "s{seed}"),
    benchmark:
        paths.benchmark("train_dg", "{algorithm}", "s{seed}")
    threads: dg.threads(config, workflow)
    resources:
        **resources.of(config, "train_dg"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/train_dg.py"


# Figure 11's own runs (Appendix D): the shift-factor training data, dg.fig11's settings, the
# checkpoints of three training stages kept.
rule train_fig11:
    input:
        train=paths.diagvib_split("shift_factor", "train"),
        val=paths.diagvib_split("shift_factor", "val"),
    output:
        **dg.train_outputs(config, setting=paths.FIG11, stages=True),
    params:
        experiment="dg",
        dg=lambda wc: dg.fig11_params(config["dg"], wc.algorithm),
        stages=True,  # keep the checkpoints of the three training stages
    wildcard_constraints:
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        paths.log("train_fig11", "{algorithm}", "s{seed}"),
    benchmark:
        paths.benchmark("train_fig11", "{algorithm}", "s{seed}")
    threads: dg.threads(config, workflow)
    resources:
        **resources.of(config, "train_fig11"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/train_dg.py"


rule dg_scores:
    input:
        model=dg.train_outputs(config)[config["dg"]["evaluate"]],
        test=paths.diagvib_split("shift_factor", "test"),
    output:
        scores=paths.dg_scores(),
    params:
        experiment="dg",
        device=config["dg"]["device"],
    wildcard_constraints:
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        paths.log("dg_scores", "{algorithm}", "s{seed}"),
    benchmark:
        paths.benchmark("dg_scores", "{algorithm}", "s{seed}")
    threads: 1
    resources:
        **resources.of(config, "dg_scores"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/dg_scores.py"


rule dg_pa:
    input:
        scores=paths.dg_scores(),
        history=dg.train_outputs(config)["history"],  # ID validation accuracy: degenerate?
    output:
        table=paths.dg_pa(),
    params:
        experiment="dg",
        ratios=config["diagvib"]["shift_ratios"],
        pa=dg.pa_settings(config),
        n_val=dg.val_size(config, "shift_factor", "val"),
        checkpoint=config["dg"]["evaluate"],  # the one dg_scores scored
    wildcard_constraints:
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        paths.log("dg_pa", "{algorithm}", "s{seed}"),
    benchmark:
        paths.benchmark("dg_pa", "{algorithm}", "s{seed}")
    threads: 1
    resources:
        **resources.of(config, "dg_pa"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/dg_pa.py"


rule dg_pa_table:
    input:
        tables=[paths.dg_pa(r.algorithm, r.seed) for r in dg.runs(config)],
    output:
        table=paths.DG_PA_TABLE,
    params:
        experiment="dg",
    log:
        paths.log("dg_pa_table"),
    benchmark:
        paths.benchmark("dg_pa_table")
    threads: 1
    resources:
        **resources.of(config, "dg_pa_table"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/concat_tables.py"


rule train_ms:
    input:
        train=paths.diagvib_split("model_selection", "{setting}"),
        val=paths.diagvib_split("model_selection", config["dg"]["model_selection"]["validation"]),
        also=[paths.diagvib_split("model_selection", v) for v in dg.ms_also_validate(config)],
    output:
        **{**dg.train_outputs(config, setting="{setting}"), **dg.ms_checkpoints(config)},
    params:
        experiment="model_selection",
        dg=lambda wc: dg.train_params(config["dg"], wc.algorithm),
        stages=False,
        epochs=config["dg"]["model_selection"]["epochs"],  # the cap
        patience=config["dg"]["model_selection"].get("patience"),
        pa=dg.pa_settings(config),  # validation PA by the adam solver too (the paper's)
        also=dg.ms_also_validate(config),
    wildcard_constraints:
        setting="[a-z0-9_]+",
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        paths.log("train_ms", "{setting}", "{algorithm}", "s{seed}"),
    benchmark:
        paths.benchmark("train_ms", "{setting}", "{algorithm}", "s{seed}")
    threads: dg.threads(config, workflow)
    resources:
        **resources.of(config, "train_ms"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/train_dg.py"


rule ms_eval:
    input:
        history=dg.train_outputs(config, setting="{setting}")["history"],
        test=paths.diagvib_split("model_selection", "test"),
        **dg.ms_checkpoints(config),
    output:
        table=paths.ms_result(),
    params:
        experiment="model_selection",
        device=config["dg"]["device"],
        label=lambda wc: dg.ms_label(config, wc.setting),
        validation={v: dg.ms_label(config, v) for v in
                    [config["dg"]["model_selection"]["validation"], *dg.ms_also_validate(config)]},
        n_val=dg.val_size(config, "model_selection", config["dg"]["model_selection"]["validation"]),
        patience=config["dg"]["model_selection"].get("patience"),
    wildcard_constraints:
        setting="[a-z0-9_]+",
        algorithm="[a-z]+",
        seed=r"\d+",
    log:
        paths.log("ms_eval", "{setting}", "{algorithm}", "s{seed}"),
    benchmark:
        paths.benchmark("ms_eval", "{setting}", "{algorithm}", "s{seed}")
    threads: 1
    resources:
        **resources.of(config, "ms_eval"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/ms_eval.py"


rule ms_table:
    input:
        tables=[paths.ms_result(r.setting, r.algorithm, r.seed) for r in dg.ms_runs(config)],
    output:
        table=paths.MS_TABLE,
    params:
        experiment="model_selection",
    log:
        paths.log("ms_table"),
    benchmark:
        paths.benchmark("ms_table")
    threads: 1
    resources:
        **resources.of(config, "ms_table"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/concat_tables.py"
