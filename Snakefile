# pabench: regenerate the figures and tables of the robustness papers.
#   snakemake --cores all                                   # default (quick) scale, every paper
#   snakemake --cores all pa                                # one paper
#   snakemake --cores all figures/pa/fig1.pdf              # one figure
#   snakemake --cores all --configfile workflow/config/test.yaml
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

from pabench.core import config as pabench_config
from pabench.core import paths
from pabench.runtime import allocator, jobserver, tracking
from pabench.tools import cluster
from pabench.papers import all_targets, unbuildable

min_version("8.0")


configfile: "config.yaml"


report: "workflow/report/workflow.rst"


SCHEMA = Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml"
try:
    pabench_config.check(config, SCHEMA)
except pabench_config.ConfigError as err:
    # Report the offending keys plainly and stop before any job is planned.
    sys.exit(f"pabench: {err}")
validate(config, SCHEMA)
# A figure asked for by name that this config cannot build for want of a setting only the user
# can give (ImageNet's folder for Figures 17-18): say what to set, before any job.
_unbuildable = unbuildable(config, sys.argv[1:])
if _unbuildable:
    sys.exit(f"pabench: {_unbuildable}")
# Jobs keep freed memory for reuse instead of faulting large tensors in afresh each time: set
# before any server or job starts, which all inherit it (pabench.runtime.allocator; 1.3-1.5x faster
# ResNet forward passes on CPU).
allocator.configure()
# W&B: start this invocation's W&B run server while Snakemake plans the jobs, so that jobs hand
# their runs to it instead of importing wandb (pabench.runtime.tracking; PABENCH_WANDB_SERVER=0: off).
tracking.start_server(config)
# Jobs: a job server of this invocation imports torch, pandas, scipy and matplotlib once and runs
# each job's script in a child it forks, instead of each job importing them (pabench.runtime.jobserver;
# PABENCH_JOB_SERVER=0: every job in its own process).
jobserver.start()


include: "workflow/rules/toy.smk"
include: "workflow/rules/diagvib.smk"
include: "workflow/rules/dg.smk"
include: "workflow/rules/adversarial.smk"
include: "workflow/rules/avgcase.smk"
include: "workflow/rules/oodrb.smk"
include: "workflow/rules/text.smk"
include: "workflow/rules/papers.smk"
include: "workflow/rules/checks.smk"


onstart:
    # On SLURM, check Slurm, resource keys and GPU partitions before the first job is submitted
    # (onstart runs once, in this process, after the DAG is built; pabench.tools.cluster says more).
    if workflow.executor_plugin is not None and workflow.executor_plugin.name.endswith("slurm"):
        try:
            cluster.preflight(workflow)
        except cluster.PreflightError as err:
            sys.exit(str(err))


rule all:
    input:
        all_targets(config),
        paths.check_files("claims").values(),
        paths.check_files("timings").values(),
    default_target: True
