"""Rule adv_data: the images of one adversarial dataset split (the test split is the config's
seeded subset of n_test images; ImageNet samples its own seeded subset of the folder)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import numpy as np

from pabench.attacks import datasets
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    images, labels = datasets.load(smk.wildcards.dataset, smk.wildcards.split, dict(smk.params.dataset))
    if smk.wildcards.split == "test" and smk.wildcards.dataset != "imagenet":
        images, labels = datasets.subset(images, labels, smk.params.n_test, smk.params.test_seed)
    datasets.save_split(smk.output.split, images, labels)
    run.log({"images": len(labels), "classes": int(len(np.unique(labels))),
             "image_size": int(images.shape[-1])})
