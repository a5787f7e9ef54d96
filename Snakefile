# pabench: regenerate the figures and tables of the Posterior Agreement papers.
#   snakemake --cores all                                   # default (quick) scale
#   snakemake --cores all --configfile workflow/config/test.yaml
#   snakemake --cores all figures/pa/fig01.pdf              # one figure
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

from pabench import config as pabench_config

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


include: "workflow/rules/common.smk"
include: "workflow/rules/toy.smk"
include: "workflow/rules/diagvib.smk"
include: "workflow/rules/dg.smk"
include: "workflow/rules/adversarial.smk"


# Every figure and table of the papers (and the datasets they are drawn from).
RESULTS = [
    figure_files("pa", "fig01"),
    figure_files("pa", "fig02"),
    figure_files("pa", "fig07"),
    figure_files("pa", "fig08"),
    figure_files("pa", "fig11"),
    figure_files("pa", "fig12"),
    figure_files("pa", "fig13"),
    table_files("pa", "table1"),
    table_files("pa", "table2"),
    table_files("pa", "table3"),
    [figure_files("pa", name) for name in ADV_FIGURES],
    table_files("pa", f"models-{ADV_DATA}"),
    table_files("pa", "models-imagenet") if IMAGENET_ON else [],
    rules.shift_ratio_views.output.views,
    [split_dir(study, split) for study, cfg in config["diagvib"]["studies"].items()
     for split in cfg["splits"]],
]


include: "workflow/rules/checks.smk"


rule all:
    input:
        RESULTS,
        rules.claims.output,
        rules.timings.output,
    default_target: True
