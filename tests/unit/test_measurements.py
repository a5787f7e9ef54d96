"""The measurements page is generated from recorded benchmark outputs (pabench.tools.measurements)."""
import sys

import pytest

from pabench.tools import measurements as M

PAGE = """# Measurements

Prose that stays.

<!-- measurement: bench_x -->
old numbers
<!-- /measurement -->

More prose.
"""


def test_a_recorded_run_fills_its_block_and_the_prose_stays(tmp_path):
    M.record("bench_x", "# bench_x, 3 repeats\n| a | b |\n| 1 | 2 |\n", "a test machine",
             "python bench_x.py", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert not M.write(page, tmp_path, check=True)          # stale: still the old numbers
    assert page.read_text() == PAGE                          # --check writes nothing
    assert not M.write(page, tmp_path)                       # written now
    text = page.read_text()
    assert "old numbers" not in text and "| 1 | 2 |" in text
    assert "\nbench_x, 3 repeats\n" in text                  # a comment line, not a heading
    assert "Machine: a test machine." in text and "`python bench_x.py`" in text
    assert text.startswith("# Measurements\n\nProse that stays.") and "More prose." in text
    assert M.write(page, tmp_path, check=True)              # current, and stays so
    assert M.write(page, tmp_path)
    assert page.read_text() == text


def test_running_a_benchmark_records_this_machine_and_a_failure_records_nothing(tmp_path):
    path = M.run_and_record("ok", [sys.executable, "-c", "print('| n | 3 |')"], tmp_path)
    text = path.read_text()
    assert "| n | 3 |" in text and "cores" in text and sys.executable in text and "```" not in text
    plain = M.run_and_record("plain", [sys.executable, "-c", "print('a    1')"], tmp_path).read_text()
    assert "```\na    1\n```" in plain                        # columns kept aligned
    with pytest.raises(RuntimeError, match="exited with status 3"):
        M.run_and_record("bad", [sys.executable, "-c", "print('x'); raise SystemExit(3)"], tmp_path)
    assert not (tmp_path / "bad.md").exists()
    with pytest.raises(ValueError, match="printed nothing"):
        M.record("empty", "  \n", "m", "c", tmp_path)
    with pytest.raises(ValueError, match="measurement name"):
        M.record("../up", "x", "m", "c", tmp_path)


def test_a_block_without_a_record_is_named(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    with pytest.raises(FileNotFoundError, match=r"\['bench_x'\]"):
        M.write(page, tmp_path)
    assert page.read_text() == PAGE


def test_the_command_line_checks_and_refuses_by_exit_status(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert M.main(["write", str(page), "--check"]) == 2        # no record: a clear error
    assert "bench_x" in capsys.readouterr().err
    out = tmp_path / "out.txt"
    out.write_text("| t | 1 |\n")
    assert M.main(["record", "x", "--output", str(out)]) == 2  # --output needs machine, command
    assert "--machine" in capsys.readouterr().err


def test_the_projects_page_is_current_with_its_records():
    """docs/measurements.md holds what benchmarks/results records (after recording a run:
    `python -m pabench.tools.measurements write`)."""
    text = M.PAGE.read_text()
    assert M.BLOCK.search(text), "docs/measurements.md has no measurement block"
    assert M.render(text) == text, "docs/measurements.md is stale: run " \
        "`python -m pabench.tools.measurements write`"
