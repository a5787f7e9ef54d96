"""Rules oodrb_data (the ID split: training and ID test images) and oodrb_shift (one dataset
shift: a corruption at every severity, or a natural shift)."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
import numpy as np

from pabench.core.io import atomic_path, load_npz
from pabench.experiments.oodrb import compute
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    o = smk.params.settings
    shift = smk.wildcards.get("shift", "id")
    if shift == "id":
        arrays = compute.id_data(o)
    elif shift in o["corruptions"]:
        d = load_npz(smk.input.data, ["test_x", "test_y"])
        with compute.frost_textures(o, shift):
            arrays = compute.corruption_data(o, shift, d["test_x"], d["test_y"])
    else:
        arrays = compute.natural_data(o, shift)
    with atomic_path(smk.output.data) as tmp, open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    run.log({f"{k}_shape": list(v.shape) for k, v in arrays.items()})
