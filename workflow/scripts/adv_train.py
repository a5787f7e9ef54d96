"""Rule adv_train: train one model of the self-trained zoo and report its clean accuracy."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import pandas as pd
import torch

from pabench.attacks import datasets
from pabench.core.paths import parse_eps
from pabench.attacks.models import JpegReverseSigmoid, save_zoo_model
from pabench.attacks.training import ZooSettings, scores, train_zoo
from pabench.core.io import write_csv
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    zoo = smk.params.zoo
    device = resolve_device(smk.params.device)
    method, seed = smk.wildcards.adv_model, int(smk.wildcards.seed)
    settings = ZooSettings(method=method, arch=zoo["arch"], epochs=zoo["epochs"],
                           batch_size=zoo["batch_size"], lr=zoo["lr"],
                           eps=parse_eps(zoo["eps"]), pgd_steps=zoo["pgd_steps"],
                           trades_beta=zoo["trades_beta"], seed=seed, device=str(device))
    images, labels = datasets.load_split(smk.input.train)
    if zoo.get("n_train"):  # the seed draws the training subset too: a seed is a whole new run
        images, labels = datasets.subset(images, labels, zoo["n_train"], seed)
    num_classes = int(labels.max()) + 1
    net, history = train_zoo(settings, images, labels, num_classes, tracker=run)
    model = JpegReverseSigmoid(net, **smk.params.jpeg_rs) if method == "jpeg_rs" else net
    test_x, test_y = datasets.load_split(smk.input.test)
    clean = float((scores(model, test_x, device).argmax(1) == test_y).mean())
    save_zoo_model(net, smk.output.model, settings.arch, method, num_classes, images.shape[-1],
                   extra={"clean_accuracy": clean, "eps": settings.eps})
    history = pd.DataFrame(history).assign(clean_accuracy=clean, method=method, arch=settings.arch,
                                           seed=seed)
    write_csv(smk.output.history, history)
    run.log({"clean_accuracy": clean})
