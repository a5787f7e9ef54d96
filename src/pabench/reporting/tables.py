"""Tables as Markdown, CSV and LaTeX, written atomically, with the caption and provenance."""
from __future__ import annotations

import html

import pandas as pd

from pabench.reporting.plotting import caption_text
from pabench.core.io import write_csv, write_text


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def to_markdown(frame: pd.DataFrame, caption: str) -> str:
    cols = [str(c) for c in frame.columns]
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v) for v in row) + " |")
    return "\n".join(lines) + f"\n\n{caption}\n"


def _tex_escape(text: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"),
                 ("#", r"\#"), ("$", r"\$"), ("{", r"\{"), ("}", r"\}")):
        text = text.replace(a, b)
    return text


def to_latex(frame: pd.DataFrame, caption: str, label: str) -> str:
    cols = "l" * len(frame.columns)
    body = [" & ".join(_tex_escape(str(c)) for c in frame.columns) + r" \\", r"\midrule"]
    body += [" & ".join(_tex_escape(_cell(v)) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    return "\n".join([r"\begin{table}[t]", r"\centering", rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
                      *body, r"\bottomrule", r"\end{tabular}", rf"\caption{{{_tex_escape(caption)}}}",
                      rf"\label{{tab:{label}}}", r"\end{table}", ""])


def to_html(frame: pd.DataFrame, caption: str) -> str:
    """A standalone page (the Snakemake report shows HTML, not CSV)."""
    table = frame.to_html(index=False, border=0, float_format=_cell, escape=True)
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>"
            "body{font-family:sans-serif;font-size:13px}table{border-collapse:collapse}"
            "td,th{border:1px solid #bbb;padding:3px 6px;text-align:left;vertical-align:top}"
            "</style></head><body>\n" + table + f"\n<p>{html.escape(caption)}</p>\n</body></html>\n")


def write_table(frame: pd.DataFrame, caption: str, meta: dict, label: str, md, csv, tex=None,
                html_path=None) -> None:
    """Markdown and CSV, and LaTeX / HTML when their paths are given."""
    text = caption_text(caption, meta)
    write_text(md, to_markdown(frame, text))
    write_csv(csv, frame)
    if tex is not None:
        write_text(tex, to_latex(frame, text, label))
    if html_path is not None:
        write_text(html_path, to_html(frame, text))
