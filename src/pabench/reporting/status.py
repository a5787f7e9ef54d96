"""What is built, read from the registries and the configurations (not written by hand, so that
it cannot drift from the code): per paper, which results the quick and the paper scale build
(the README's summary), and every registered figure and table with its status (docs/results.md).

    pabench status                          # print the full table
    pabench status --write README.md docs/results.md   # replace the blocks between their markers
"""
from __future__ import annotations

import re
from pathlib import Path

from pabench.papers import PAPERS

END = "<!-- pabench status: end -->"
BLOCKS = ("summary", "table")       # <!-- pabench status: summary --> ... END
SCALES = {"quick": ["config.yaml"], "paper": ["config.yaml", "workflow/config/paper.yaml"]}
ARXIV = "workflow/config/arxiv-v1.yaml"   # the PA paper's arXiv v1: an overlay on either scale


def begin(block: str) -> str:
    return f"<!-- pabench status: {block} (generated: pabench status --write FILE) -->"


def _label(caption: str) -> tuple[str, str]:
    """("Figure 2a", "absolute (left) and relative ...") from "Figure 2a: absolute ...": the
    paper's own name of a result and the first clause of what it shows."""
    head, _, rest = caption.partition(": ")
    if not rest or len(head) > 30:          # a caption without the paper's name in front
        head, rest = "", caption
    what = _first_clause(rest)
    return head, what if len(what) <= 110 else what[:107].rsplit(" ", 1)[0] + " ..."


def _first_clause(text: str) -> str:
    """Up to the first "; " or ". " outside parentheses."""
    depth = 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch in ";." and text[i + 1:i + 2] in (" ", ""):
            return text[:i]
    return text.rstrip(".")


def _cell(entry, config: dict) -> str:
    need = entry.requires(config)
    if need:                 # the setting to give comes first in the message
        return f"needs `{need.split()[0]}`"
    return "yes" if entry.enabled(config) else "-"


def rows(root: Path = Path(".")) -> list[dict]:
    """One row per registry entry: its paper's key, file, the paper's name, what it shows, and
    whether each scale (quick, paper) builds it ("yes", "-", or "needs <setting>")."""
    from pabench.core.config import load

    configs = {s: load([root / f for f in files]) for s, files in SCALES.items()}
    out = []
    for paper in PAPERS.values():
        for e in paper.entries:
            name, what = _label(e.caption)
            out.append({"key": paper.key, "file": f"figures/{paper.key}/{e.name}",
                        "name": name or e.kind, "what": what,
                        **{s: _cell(e, c) for s, c in configs.items()}})
    return out


def table(root: Path = Path(".")) -> str:
    lines = ["| file | in the paper | what it shows | quick | paper |",
             "| --- | --- | --- | --- | --- |"]
    for r in rows(root):
        lines.append(f"| `{r['file']}` | {r['name']} | {r['what'].replace('|', '/')} | "
                     f"{r['quick']} | {r['paper']} |")
    return "\n".join(lines)


def _names(rows: list[dict]) -> str:
    """"Figures 1-6, 9; Table 1; models" from the rows' paper names (runs of numbers joined)."""
    numbered: dict[str, list[tuple[int, str]]] = {}
    other = []
    for r in rows:
        m = re.match(r"(Figure|Table) (\d+)([a-z]?)\b", r["name"])
        if m:
            numbered.setdefault(m[1], []).append((int(m[2]), m[3]))
        else:
            other.append(r["name"] if r["name"] not in ("figure", "table")
                         else r["file"].rsplit("/", 1)[1])
    parts = []
    for kind, items in numbered.items():
        runs: list[list] = []
        for n, suffix in sorted(set(items)):
            if not suffix and runs and not runs[-1][2] and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n, suffix])
        spans = ", ".join(f"{a}{x}" if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}"
                          for a, b, x in runs)
        parts.append(f"{kind}{'s' if len(items) > 1 else ''} {spans}")
    return "; ".join(parts + sorted(set(other)))


def summary(root: Path = Path(".")) -> str:
    """Per paper (the PA paper's arXiv v1 as its own row): what the quick scale builds, what
    only the paper scale builds, and what needs a setting only the user can give."""
    from pabench.core.config import load

    all_rows = rows(root)
    arxiv = {s: load([root / f for f in (*files, ARXIV)]) for s, files in SCALES.items()}
    lines = ["| paper | built at quick and paper scale | quick only | paper scale only | "
             "needs your data |", "| --- | --- | --- | --- | --- |"]
    for paper in PAPERS.values():
        variants = [(paper.title, None)]
        if paper.key == "pa":
            variants.append(("PA robustness paper (arXiv v1)", arxiv))
        for title, configs in variants:
            mine = [r for r in all_rows if r["key"] == paper.key]
            if configs is not None:   # the overlay's status, entry by entry
                entries = {f"figures/{paper.key}/{e.name}": e for e in paper.entries}
                mine = [{**r, **{s: _cell(entries[r["file"]], c) for s, c in configs.items()}}
                        for r in mine]
            both = [r for r in mine if r["quick"] == "yes" and r["paper"] == "yes"]
            paper_only = [r for r in mine if r["quick"] != "yes" and r["paper"] == "yes"]
            quick_only = [r for r in mine if r["quick"] == "yes" and r["paper"] == "-"]
            # v1 has no ImageNet experiment: its overlay leaves the folder unset, which the
            # registry cannot tell from a user's missing folder
            needs = [r for r in mine if r["paper"].startswith("needs") and configs is None]
            keys = sorted({r["paper"].split()[1] for r in needs})
            lines.append(f"| {title} | {_names(both) or '-'} | {_names(quick_only) or '-'} | "
                         f"{_names(paper_only) or '-'} | "
                         + (f"{_names(needs)} ({', '.join(keys)})" if needs else "-") + " |")
    return "\n".join(lines)


def write(path: Path, root: Path = Path(".")) -> bool:
    """Replace every status block in `path` (summary, table) by its current text; True if the
    file changed."""
    text = path.read_text()
    found = [b for b in BLOCKS if begin(b) in text]
    if not found:
        raise ValueError(f"{path}: no status block (a line {begin('summary')} or "
                         f"{begin('table')}, then {END})")
    new = text
    for block in found:
        head, rest = new.split(begin(block), 1)
        _, tail = rest.split(END, 1)
        body = summary(root) if block == "summary" else table(root)
        new = f"{head}{begin(block)}\n{body}\n{END}{tail}"
    if new != text:
        path.write_text(new)
    return new != text
