"""Rule text_logits: the classifier's logits on one view of the reviews, clean or shifted by one
strategy at one power W (the shift drawn per review from the seed, the strategy and W)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import numpy as np
import torch

from pabench.datasets.imdb import load_reviews
from pabench.experiments.text import compute
from pabench.experiments.text.shifts import replacements, shift_reviews
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    view = smk.params.view
    reviews = load_reviews(smk.input.reviews)
    if view.strategy is None:
        texts, made, asked = [r.text for r in reviews], np.zeros(len(reviews), np.int64), 0
    else:
        texts, made = shift_reviews(reviews, view.strategy, view.power, smk.params.seed)
        asked = replacements(view.power)
    device = resolve_device(smk.params.device)
    tokenizer, model = compute.load_classifier(smk.input.model, device)
    scores = compute.logits(texts, tokenizer, model, smk.params.batch_size, smk.params.max_length,
                            desc=view.tag)
    labels = np.array([r.label for r in reviews], dtype=np.int64)
    compute.save_logits(smk.output.logits, scores, labels, [r.id for r in reviews], made, asked)
    run.log({"accuracy": float((scores.argmax(1) == labels).mean()),
             "mean_replacements_made": float(made.mean()), "replacements": asked,
             "reviews": len(reviews)})
