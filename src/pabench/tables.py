"""Tables as Markdown, CSV and LaTeX, written atomically, with the caption and provenance."""
from __future__ import annotations

import pandas as pd

from .figures.common import caption_text
from .io import write_csv, write_text


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


def write_table(frame: pd.DataFrame, md, csv, tex, caption: str, meta: dict, label: str) -> None:
    text = caption_text(caption, meta)
    write_text(md, to_markdown(frame, text))
    write_csv(csv, frame)
    write_text(tex, to_latex(frame, text, label))
