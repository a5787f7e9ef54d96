# Text shifts (PA paper, Appendix C, Figure 10; `text.enabled`): the test reviews (quick scale: the
# IMDB sentences of the UCI labelled sentences; paper scale: IMDB's test reviews), the sentiment
# classifier saved once (quick: MiniLM with a logistic head trained here; paper: DistilBERT), its
# logits on the clean reviews and on every (strategy, W) view, PA / accuracy of every view against
# the clean one in one tidy table.  The sentences are read from text.sentences.folder, not
# declared as inputs: where they are missing the job says how to get them, and only Figure 10
# fails.
from pabench.core import paths, resources
from pabench.core.paths import CLEAN
from pabench.experiments.text import plan as text
from pabench.experiments.text.shifts import STRATEGIES


rule text_data:
    output:
        reviews=paths.TEXT_REVIEWS,
    params:
        experiment="text",
        **text.data_params(config),
        n=config["text"]["n"],
        seed=config["text"]["seed"],
    log:
        paths.log("text_data"),
    benchmark:
        paths.benchmark("text_data")
    threads: 1
    resources:
        **resources.of(config, "text_data"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/text_data.py"


rule text_model:
    output:
        model=directory(paths.TEXT_MODEL),
    params:
        experiment="text",
        **text.model_params(config),
        batch_size=config["text"]["batch_size"],
        max_length=config["text"]["max_length"],
        device=config["text"]["device"],
    log:
        paths.log("text_model"),
    benchmark:
        paths.benchmark("text_model")
    threads: 1
    resources:
        **resources.of(config, "text_model"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/text_model.py"


rule text_logits:
    input:
        reviews=paths.TEXT_REVIEWS,
        model=paths.TEXT_MODEL,
    output:
        logits=paths.text_logits(),
    params:
        experiment="text",
        view=lambda wc: paths.TextView.of(wc.view),
        seed=config["text"]["seed"],
        batch_size=config["text"]["batch_size"],
        max_length=config["text"]["max_length"],
        device=config["text"]["device"],
    wildcard_constraints:
        view=rf"{CLEAN}|({'|'.join(STRATEGIES)})-w\d+",
    log:
        paths.log("text_logits", "{view}"),
    benchmark:
        paths.benchmark("text_logits", "{view}")
    threads: 1
    resources:
        **resources.of(config, "text_logits"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/text_logits.py"


rule text_score:
    input:
        clean=paths.text_logits(CLEAN),
        views=text.logits_files(config),
    output:
        table=paths.TEXT_TABLE,
    params:
        experiment="text",
        model=config["text"]["model"],
        pa=text.pa_settings(config),
    log:
        paths.log("text_score"),
    benchmark:
        paths.benchmark("text_score")
    threads: 1
    resources:
        **resources.of(config, "text_score"),
    conda:
        "../../envs/pabench.yaml"
    script:
        "../scripts/text_score.py"
