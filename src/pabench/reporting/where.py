"""`pabench where FILE`: one hop from a result to its code.  For a figure or table file (or its
rule's name) it prints the registry entry's rule, the function that draws it (file:line), its
inputs at the configuration's scale, and the configuration keys that shape it: the keys its
entry reads (inputs, arguments, caption metadata, whether the scale builds it), recorded while
they are read, so the list cannot drift from the code."""
from __future__ import annotations

import inspect
import os
from pathlib import Path

from pabench.papers import PAPERS


class _Recording(dict):
    """A configuration that records the dotted path of every key read from it."""

    def __init__(self, data: dict, seen: set, prefix: str = ""):
        super().__init__(data)
        self._seen, self._prefix = seen, prefix

    def _wrap(self, key, value):
        path = f"{self._prefix}{key}"
        self._seen.add(path)
        return _Recording(value, self._seen, path + ".") if isinstance(value, dict) else value

    def __getitem__(self, key):
        return self._wrap(key, super().__getitem__(key))

    def get(self, key, default=None):
        return self._wrap(key, super().get(key, default)) if key in self else default


def find(target: str):
    """(paper, entry) whose rule or one of whose files is `target` (extension optional)."""
    word = os.path.normpath(os.path.relpath(target) if os.path.isabs(target) else target)
    stem = os.path.splitext(word)[0]
    for paper in PAPERS.values():
        for e in paper.entries:
            files = {os.path.splitext(p)[0] for p in e.outputs().values()}
            if word == e.rule or stem in files:
                return paper, e
    raise ValueError(f"{target}: not a registered figure or table (pabench status lists them)")


def keys_read(entry, config: dict) -> list[str]:
    """The configuration keys the entry reads, most specific only ("a.b" hides "a")."""
    seen: set[str] = set()
    rec = _Recording(config, seen)
    for part in (entry.enabled, entry.requires, entry.inputs, entry.args, entry.meta):
        try:
            part(rec)
        except Exception:        # a scale that cannot build it: what was read so far counts
            pass
    return sorted(k for k in seen if not any(o.startswith(k + ".") for o in seen))


def describe(target: str, config: dict) -> str:
    paper, e = find(target)
    fn = inspect.unwrap(e.function)
    source = Path(inspect.getsourcefile(fn))
    try:
        source = source.relative_to(Path.cwd())
    except ValueError:
        pass
    line = inspect.getsourcelines(fn)[1]
    lines = [f"{paper.title}, {e.caption.partition(':')[0] if ':' in e.caption[:30] else e.name}",
             f"rule      {e.rule}  (snakemake --cores all {e.rule})",
             f"function  {e.spec}  ({source}:{line})",
             f"outputs   {', '.join(e.outputs().values())}"]
    built = e.enabled(config)
    need = e.requires(config)
    lines.append(f"scale     {config.get('scale')}: "
                 + (f"needs {need}" if need else "built" if built else "not built at this scale"))
    if built and not need:
        for name, value in e.inputs(config).items():
            shown = value if isinstance(value, str) else f"{len(value)} files: {', '.join(value[:3])}" + (" ..." if len(value) > 3 else "")
            lines.append(f"input     {name}: {shown}")
    lines.append(f"config    {', '.join(keys_read(e, config)) or '(none)'}")
    return "\n".join(lines)
