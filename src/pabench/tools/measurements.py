"""The measurements page from recorded benchmark outputs.

    python -m pabench.tools.measurements record NAME -- python benchmarks/bench_x.py [args]
    python -m pabench.tools.measurements record NAME --output out.txt --machine "..." --command "..."
    python -m pabench.tools.measurements write [docs/measurements.md] [--check]

`record` runs a benchmark (or takes the output of a run made elsewhere, e.g. on a GPU machine)
and keeps it as `benchmarks/results/NAME.md`: a header naming the machine and the command, then
what the benchmark printed.  `write` fills every block of the page

    <!-- measurement: NAME -->
    ...
    <!-- /measurement -->

with that record, so the numbers on the page are the benchmarks' own output; `--check` only
says whether the page is current (exit status 1 if not).  The prose around the blocks says what
each measurement means.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from pabench.core.threads import cpu_name
from pabench.tools.campaign import REPO

RESULTS = REPO / "benchmarks" / "results"
PAGE = REPO / "docs" / "measurements.md"
BLOCK = re.compile(r"(<!-- measurement: ([\w.-]+) -->\n)(.*?)(<!-- /measurement -->)", re.S)
NAME = re.compile(r"[\w.-]+")


def machine() -> str:
    """This machine in words: CPU model, cores, memory, and the GPU torch sees, if any."""
    words = [f"{cpu_name()}, {os.cpu_count()} cores"]
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        words.append(f"{pages / 2 ** 30:.0f} GiB memory")
    except (ValueError, OSError, AttributeError):
        pass
    gpus = _gpus()
    words.append(", ".join(gpus) if gpus else "no GPU")
    return "; ".join(words)


def _gpus() -> list[str]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] \
        if out.returncode == 0 else []


def record(name: str, output: str, machine_: str, command: str, results: Path = RESULTS) -> Path:
    """Keep one benchmark run's output as results/NAME.md, headed by its machine and command (a
    benchmark's "# " comment lines lose their marker, which the page would make headings; an
    output without a Markdown table is kept as a fenced block, its columns aligned)."""
    if not NAME.fullmatch(name):
        raise ValueError(f"measurement name {name!r}: use letters, digits, '.', '-', '_'")
    if not output.strip():
        raise ValueError(f"{name}: the benchmark printed nothing; nothing recorded")
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.md"
    text = re.sub(r"^# ", "", output.strip(), flags=re.M)
    if not re.search(r"^\|", text, flags=re.M):
        text = f"```\n{text}\n```"
    path.write_text(f"Machine: {machine_}.  \nCommand: `{command}`\n\n{text}\n")
    return path


def run_and_record(name: str, argv: list[str], results: Path = RESULTS) -> Path:
    """Run a benchmark command here (its stdout is the record; stderr passes through) and keep
    its output; a failing command records nothing."""
    if not argv:
        raise ValueError("no command to run: give it after `--`")
    done = subprocess.run(argv, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited with status {done.returncode}; "
                           "nothing recorded")
    return record(name, done.stdout, machine(), shlex.join(argv), results)


def render(page: str, results: Path = RESULTS) -> str:
    """The page with every measurement block replaced by its record."""
    missing = []

    def fill(m):
        path = results / f"{m.group(2)}.md"
        if not path.is_file():
            missing.append(m.group(2))
            return m.group(0)
        return f"{m.group(1)}{path.read_text()}{m.group(4)}"

    out = BLOCK.sub(fill, page)
    if missing:
        raise FileNotFoundError(f"no record for the measurement block(s) {missing} in {results} "
                                "(python -m pabench.tools.measurements record NAME -- ...)")
    return out


def write(page: Path = PAGE, results: Path = RESULTS, check: bool = False) -> bool:
    """Fill the page's blocks from the records; with `check`, only compare.  True when the page
    was already current."""
    text = page.read_text()
    new = render(text, results)
    if not check and new != text:
        page.write_text(new)
    return new == text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m pabench.tools.measurements",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("record", help="record a benchmark run as benchmarks/results/NAME.md")
    r.add_argument("name")
    r.add_argument("--output", help="a file holding the output of a run made elsewhere")
    r.add_argument("--machine", help="with --output: the machine it ran on, in words")
    r.add_argument("--command", help="with --output: the command that printed it")
    w = sub.add_parser("write", help="fill the measurement blocks of the page from the records")
    w.add_argument("page", nargs="?", default=str(PAGE))
    w.add_argument("--check", action="store_true", help="only say whether the page is current")
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[argv.index("--") + 1:] if "--" in argv else []   # the benchmark to run
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        if args.what == "record":
            if args.output:
                if command or not (args.machine and args.command):
                    raise ValueError("--output takes --machine and --command, and no command to run")
                path = record(args.name, Path(args.output).read_text(), args.machine, args.command)
            else:
                path = run_and_record(args.name, command)
            print(f"recorded {path}")
            return 0
        current = write(Path(args.page), check=args.check)
        print(f"{args.page}: {'current' if current else ('NOT current' if args.check else 'written')}")
        return 1 if args.check and not current else 0
    except (OSError, ValueError, RuntimeError) as err:
        print(f"measurements: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
