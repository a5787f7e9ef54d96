"""Rules adv_attack and adv_attacks: attack runs of one model over the test images, one per
(attack, eps) of params.runs, each written to its record in output.records (adversarial image,
clean and adversarial scores, L-inf norm, success)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import torch

from pabench.attacks import datasets
from pabench.attacks.attacks import attack_dataset
from pabench.attacks import robustbench
from pabench.attacks.models import JpegReverseSigmoid, load_zoo_model
from pabench.experiments.adversarial.plan import pretrained
from pabench.training.loop import resolve_device
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    torch.set_num_threads(max(1, smk.threads))
    device = resolve_device(smk.params.device)
    images, labels = datasets.load_split(smk.input.test)
    name = smk.wildcards.adv_model
    if smk.params.from_zoo:
        model, info = load_zoo_model(smk.input.model[0], smk.params.jpeg_rs, device)
        if info["image_size"] != images.shape[-1] or info["num_classes"] <= labels.max():
            raise ValueError(f"{smk.input.model[0]}: model for {info['num_classes']} classes at "
                             f"{info['image_size']} px cannot classify {smk.input.test} "
                             f"({labels.max() + 1} classes, {images.shape[-1]} px)")
    else:
        model_id, defended = pretrained(name)
        model = robustbench.load(model_id, smk.params.dataset, smk.params.robustbench_dir, device,
                                 smk.params.robustbench_weights)
        if defended:
            model = JpegReverseSigmoid(model, **smk.params.jpeg_rs).to(device).eval()
    one = len(smk.params.runs) == 1
    for spec, path in zip(smk.params.runs, smk.output.records, strict=True):
        record = attack_dataset(model, images, labels, spec["attack"], spec["eps"], dict(spec["settings"]),
                                path, smk.params.batch_size, device, int(labels.max()) + 1)
        metrics = {"attack_success_rate": float(record["success"].mean()),
                   "clean_accuracy": float((record["clean_scores"].argmax(1) == labels).mean()),
                   "adversarial_accuracy": float((record["adv_scores"].argmax(1) == labels).mean()),
                   "max_linf": float(record["linf"].max()), "mean_linf": float(record["linf"].mean())}
        # One run: the metrics by name; several: under <attack>/<eps>/ each.
        run.log(metrics if one else {f"{spec['attack']}/{spec['eps']}/{k}": v for k, v in metrics.items()})
