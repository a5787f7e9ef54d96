"""Every figure and table rule (one per paper registry entry): call the entry's function with
the rule's inputs, write the outputs, log them to W&B.  Only the function's own module is
imported, so a figure drawn from CSVs never imports PyTorch."""
from pabench.runtime.jobserver import delegate; delegate()  # noqa: E702 - first (runtime.jobserver)
from pabench.core.io import read_table
from pabench.reporting.registry import load_function
from pabench.runtime.workflow import job

with job(snakemake) as run:  # noqa: F821 - `snakemake` is injected by Snakemake
    smk = snakemake  # noqa: F821
    draw = load_function(smk.params.function)
    inputs = {k: v if isinstance(v, str) else list(v) for k, v in smk.input.items() if k != "style"}
    if "pdf" in smk.output.keys():  # a figure (pdf, png, csv); else a table (md, csv, tex, html)
        from pabench.reporting.plotting import use_style

        use_style(smk.input.style)
        draw(inputs, (smk.output.pdf, smk.output.png, smk.output.csv), dict(smk.params.meta),
             **smk.params.args)
        # a figure whose every panel says why it is empty at this scale plots no rows
        run.log_table(f"{smk.params.name}_data", read_table(smk.output.csv, rows_optional=True))
        run.log_image(smk.params.name, smk.output.png)
    else:
        from pabench.reporting.tables import write_table

        meta = dict(smk.params.meta)
        caption = meta.pop("caption")
        frame = draw(inputs, **smk.params.args)
        write_table(frame, caption, meta, smk.params.name, smk.output.md, smk.output.csv,
                    smk.output.tex, smk.output.html)
        run.log_table(smk.params.name, frame.astype(str))
