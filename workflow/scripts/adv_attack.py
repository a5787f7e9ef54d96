"""Rule adv_attack: one attack run (model, attack, eps) over the test images; writes the
per-sample record (adversarial image, clean and adversarial scores, L-inf norm, success)."""
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
        model = robustbench.load(model_id, smk.wildcards.dataset, smk.params.robustbench_dir, device,
                                 smk.params.robustbench_weights)
        if defended:
            model = JpegReverseSigmoid(model, **smk.params.jpeg_rs).to(device).eval()
    record = attack_dataset(model, images, labels, smk.wildcards.attack, smk.params.eps, dict(smk.params.settings),
                            smk.output.record, smk.params.batch_size, device, int(labels.max()) + 1)
    run.log({"attack_success_rate": float(record["success"].mean()),
             "clean_accuracy": float((record["clean_scores"].argmax(1) == labels).mean()),
             "adversarial_accuracy": float((record["adv_scores"].argmax(1) == labels).mean()),
             "max_linf": float(record["linf"].max()), "mean_linf": float(record["linf"].mean())})
