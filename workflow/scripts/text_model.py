"""Rule text_model: the sentiment classifier (a Hugging Face hub id, downloaded once, or a local
folder) and its tokenizer saved under data/, so that every logits job loads the same files."""
from pabench.jobserver import delegate; delegate()  # noqa: E702 - first: see pabench.jobserver
from pabench.experiments.text.compute import save_classifier
from pabench.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    save_classifier(smk.params.model, smk.output.model, smk.params.revision)
