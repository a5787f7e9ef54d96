# One rule per figure and table of every paper, made from the paper registries
# (src/pabench/papers/): the rule is named <paper>_<name> and writes figures/<paper>/<name>.*;
# one target rule per paper builds all of it (`snakemake --cores all pa`).
from pabench.core import paths, resources
from pabench.papers import PAPERS
from pabench.reporting.registry import STYLE, rule_outputs


for paper in PAPERS.values():
    for entry in paper.enabled(config):

        rule:
            name:
                entry.rule
            input:
                **entry.inputs(config),
                **({"style": STYLE} if entry.kind == "figure" else {}),
            output:
                **rule_outputs(paper, entry),
            params:
                experiment=entry.experiment,
                name=entry.name,
                function=entry.spec,
                args=entry.args(config),
                meta=entry.provenance(config),
            log:
                paths.log(entry.rule),
            benchmark:
                paths.benchmark(entry.rule)
            threads: 1
            resources:
                **resources.of(config, entry.rule, default=entry.kind),
            conda:
                "../../envs/pabench.yaml"
            script:
                "../scripts/paper_result.py"

    rule:
        name:
            paper.key
        input:
            paper.targets(config),
