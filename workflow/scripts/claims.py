"""Rule claims: evaluate the papers' checkable claims on the tidy result tables."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)

from pabench.reporting.claims import evaluate, load, to_markdown
from pabench.core.io import read_table, write_csv, write_text
from pabench.reporting.tables import to_html
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    tables = {name: read_table(path) for name, path in smk.input.items()}
    results = evaluate(tables, load(smk.params.modules))
    write_csv(smk.output.csv, results)
    write_text(smk.output.md, to_markdown(results, smk.config["scale"]))
    write_text(smk.output.html, to_html(results, f"Claims check at the {smk.config['scale']} scale: "
                                          + smk.params.meta["caption"]))
    run.log({f"claims/{v}": int(n) for v, n in results.verdict.value_counts().items()})
    run.log_table("claims", results)
