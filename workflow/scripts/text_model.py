"""Rule text_model: the sentiment classifier saved under data/, so that every logits job loads
the same files: a sequence classifier (a Hugging Face hub id, its files at the pinned revision
downloaded once and checked by pabench.core.download.hub_model, or a local folder) as it is, or
(text.head: logistic) a sentence encoder with a logistic-regression head trained here on the
labelled sentences of other domains (plan.HEAD_TRAIN)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import torch

from pabench.core.download import hub_model
from pabench.datasets.sentences import read_sentences
from pabench.experiments.text.compute import save_classifier, train_head
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    model = hub_model(smk.params.model, smk.params.revision)   # a hub id: its checked files
    if smk.params.head is None:
        save_classifier(model, smk.output.model, smk.params.revision)
    else:
        train = [s for domain in smk.params.train for s in read_sentences(smk.params.sentences, domain)]
        info = train_head(model, smk.output.model, [s.text for s in train],
                          [s.label for s in train], smk.params.revision, smk.params.batch_size,
                          smk.params.max_length, resolve_device(smk.params.device))
        run.log({**info, "train_domains": ",".join(smk.params.train)})
