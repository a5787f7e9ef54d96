# DiagViB-6 datasets (PA paper, Section 4.2 and Appendix E): digit pools, rendered splits,
# shift-ratio views and the average structural similarity of the test environments.
from pabench.core import paths, resources


rule mnist_pools:
    output:
        pools=paths.MNIST_POOLS,
    params:
        experiment="mnist",
        source=config["data"]["mnist"]["source"],
        root=config["data"]["mnist"]["root"],
    log:
        paths.log("mnist_pools"),
    benchmark:
        paths.benchmark("mnist_pools")
    threads: 1
    resources:
        **resources.of(config, "mnist_pools"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/mnist_pools.py"


rule diagvib_split:
    input:
        pools=paths.MNIST_POOLS,
    output:
        directory(paths.diagvib_split("{study}", "{split}")),
    params:
        experiment="diagvib",
        study=lambda wc: config["diagvib"]["studies"][wc.study],
        size=config["diagvib"]["image_size"],
        texture_seed=config["diagvib"]["texture_seed"],
        chunk=config["diagvib"]["chunk"],
    wildcard_constraints:
        study="[a-z_]+",
        split="[a-z0-9_]+",
    log:
        paths.log("diagvib_split", "{study}", "{split}"),
    benchmark:
        paths.benchmark("diagvib_split", "{study}", "{split}")
    threads: 1
    resources:
        **resources.of(config, "diagvib_split"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/diagvib_split.py"


rule shift_ratio_views:
    input:
        test=paths.diagvib_split("shift_factor", "test"),
    output:
        views=paths.SHIFT_RATIO_VIEWS,
    params:
        experiment="diagvib",
        ratios=config["diagvib"]["shift_ratios"],
    log:
        paths.log("shift_ratio_views"),
    benchmark:
        paths.benchmark("shift_ratio_views")
    threads: 1
    resources:
        **resources.of(config, "shift_ratio_views"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/shift_ratio_views.py"


rule diagvib_ass:
    input:
        test=paths.diagvib_split("shift_factor", "test"),
    output:
        table=paths.DIAGVIB_ASS,
    params:
        experiment="diagvib",
    log:
        paths.log("diagvib_ass"),
    benchmark:
        paths.benchmark("diagvib_ass")
    threads: 1
    resources:
        **resources.of(config, "diagvib_ass"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/diagvib_ass.py"
