# Adversarial robustness (PA paper, Section 4.1, Appendices B and F): test images, the
# self-trained zoo (and RobustBench models at paper scale), one attack run per
# (model, attack, eps), PA / AFR on the adversarial-ratio views, one tidy table per dataset.
from pabench.attacks.records import ATTACKS
from pabench.core import paths, resources
from pabench.core.paths import MIN_NORM, Eps
from pabench.experiments.adversarial import plan as adv


rule adv_data:
    output:
        split=paths.adv_split(),
    params:
        experiment="adversarial",
        dataset=lambda wc: adv.dataset_params(config, wc.dataset),
        n_test=config["adversarial"]["n_test"],
        test_seed=config["adversarial"]["test_seed"],
    wildcard_constraints:
        dataset="mnist32|cifar10|imagenet",
        split="train|test",
    log:
        paths.log("adv_data", "{dataset}", "{split}"),
    benchmark:
        paths.benchmark("adv_data", "{dataset}", "{split}")
    threads: 1
    resources:
        **resources.of(config, "adv_data"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/adv_data.py"


rule adv_train:
    input:
        train=paths.adv_split(adv.main_dataset(config), "train"),
        test=paths.adv_split(adv.main_dataset(config), "test"),
    output:
        model=paths.zoo_model(adv.main_dataset(config)),
        history=paths.zoo_history(adv.main_dataset(config)),
    params:
        experiment="adversarial",
        zoo=lambda wc: adv.zoo_params(config, wc.adv_model),
        jpeg_rs=lambda wc: adv.jpeg_rs_params(config, wc.adv_model),
        device=config["adversarial"]["device"],
    wildcard_constraints:
        adv_model="|".join(adv.zoo(config)),
        seed=r"\d+",
    log:
        paths.log("adv_train", "{adv_model}", "s{seed}"),
    benchmark:
        paths.benchmark("adv_train", "{adv_model}", "s{seed}")
    threads: 1
    resources:
        **resources.of(config, "adv_train"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/adv_train.py"


# With adversarial.split_attacks: one attack job per (model, attack, eps) run and one scoring
# job per (model, attack); without: one attack and one scoring job per model, running all of
# them.  The same scripts and files either way.
if adv.split_attacks(config):

    rule adv_attack:
        input:
            model=lambda wc: adv.model_input(config, wc.adv_model),
            test=paths.adv_split("{dataset}", "test"),
        output:
            records=[paths.attack_record()],
        params:
            dataset=lambda wc: wc.dataset,
            runs=lambda wc: adv.attack_jobs(config, wc.dataset, [(wc.attack, Eps(wc.eps))]),
            **adv.attack_rule_params(config),
        wildcard_constraints:
            dataset="mnist32|cifar10|imagenet",
            adv_model=r"[A-Za-z0-9_.+\-]+",
            attack="|".join(ATTACKS),
            eps=rf"[0-9.\-]+|{MIN_NORM}",
        log:
            paths.log("adv_attack", "{dataset}", "{adv_model}", "{attack}", "{eps}"),
        benchmark:
            paths.benchmark("adv_attack", "{dataset}", "{adv_model}", "{attack}", "{eps}")
        threads: 1
        resources:
            **resources.of(config, "adv_attack"),
        conda:
            "../../envs/pabench.yaml"
        script:
            "../scripts/adv_attack.py"


    rule adv_score:
        input:
            records=lambda wc: [paths.record_of(r) for r in adv.runs(config, wc.dataset, wc.adv_model, wc.attack)],
        output:
            tables=[paths.adv_scores()],
        params:
            attacks=lambda wc: [wc.attack],
            **adv.score_rule_params(config),
        wildcard_constraints:
            dataset="mnist32|cifar10|imagenet",
            adv_model=r"[A-Za-z0-9_.+\-]+",
            attack="|".join(ATTACKS),
        log:
            paths.log("adv_score", "{dataset}", "{adv_model}", "{attack}"),
        benchmark:
            paths.benchmark("adv_score", "{dataset}", "{adv_model}", "{attack}")
        threads: 1
        resources:
            **resources.of(config, "adv_score"),
        conda:
            "../../envs/pabench.yaml"
        script:
            "../scripts/adv_score.py"

else:
    for _dataset in adv.datasets(config):

        rule:
            name:
                f"adv_attacks_{_dataset}"
            input:
                model=lambda wc: adv.model_input(config, wc.adv_model),
                test=paths.adv_split(_dataset, "test"),
            output:
                records=[paths.attack_record(_dataset, "{adv_model}", a, e)
                         for a, e in adv.model_runs(config, _dataset)],
            params:
                dataset=_dataset,
                runs=adv.attack_jobs(config, _dataset, adv.model_runs(config, _dataset)),
                **adv.attack_rule_params(config),
            wildcard_constraints:
                adv_model=r"[A-Za-z0-9_.+\-]+",
            log:
                paths.log("adv_attacks", _dataset, "{adv_model}"),
            benchmark:
                paths.benchmark("adv_attacks", _dataset, "{adv_model}")
            threads: 1
            resources:
                **resources.of(config, "adv_attacks"),
            conda:
                "../../envs/pabench.yaml"
            script:
                "../scripts/adv_attack.py"

        rule:
            name:
                f"adv_scores_{_dataset}"
            input:
                records=[paths.attack_record(_dataset, "{adv_model}", a, e)
                         for a, e in adv.model_runs(config, _dataset)],
            output:
                tables=[paths.adv_scores(_dataset, "{adv_model}", a)
                        for a in adv.attack_settings(config, _dataset)],
            params:
                attacks=list(adv.attack_settings(config, _dataset)),
                **adv.score_rule_params(config),
            wildcard_constraints:
                adv_model=r"[A-Za-z0-9_.+\-]+",
            log:
                paths.log("adv_scores", _dataset, "{adv_model}"),
            benchmark:
                paths.benchmark("adv_scores", _dataset, "{adv_model}")
            threads: 1
            resources:
                **resources.of(config, "adv_scores"),
            conda:
                "../../envs/pabench.yaml"
            script:
                "../scripts/adv_score.py"


rule adv_table:
    input:
        tables=lambda wc: adv.score_tables(config, wc.dataset),
    output:
        table=paths.adv_table(),
    params:
        experiment="adversarial",
    wildcard_constraints:
        dataset="mnist32|cifar10|imagenet",
    log:
        paths.log("adv_table", "{dataset}"),
    benchmark:
        paths.benchmark("adv_table", "{dataset}")
    threads: 1
    resources:
        **resources.of(config, "adv_table"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/concat_tables.py"
