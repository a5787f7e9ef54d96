"""ImageNet's Figures 17-18 asked for without a folder of ImageNet images: the run stops before
any job with one message naming the key to set (pabench.papers.unbuildable)."""
import pytest

from conftest import run_snakemake

pytestmark = pytest.mark.workflow


def test_imagenet_figures_without_a_folder_stop_naming_the_key(workdir):
    proc = run_snakemake(workdir, "-n", "--configfile", "workflow/config/paper.yaml", "--",
                         "pa_fig17", "figures/pa/fig18.pdf", check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert ("pabench: pa_fig17, figures/pa/fig18.pdf: cannot be built with this configuration: "
            "adversarial.imagenet.folder is null; set it to a folder of ImageNet validation "
            "images in class subfolders") in out
    assert "Job stats" not in out and "MissingRuleException" not in out
