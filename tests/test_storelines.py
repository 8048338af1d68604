"""Lines of a results store that are JSON Python will not read: located warnings, never a traceback."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from kwiki.cli import main
from kwiki.results import store as history
from kwiki.results.check import check_tree

# line 1: a record with an integer of 5000 digits (Python reads at most 4300);
# line 2: arrays nested 3000 deep (deeper than the JSON reader's recursion allows)
UNREADABLE = Path(__file__).resolve().parent / "fixtures" / "store" / "unreadable"


def test_check_names_json_python_refuses_as_unreadable_lines(tmp_path: Path, capsys):
    root = shutil.copytree(UNREADABLE, tmp_path / "project")
    code = main(["check", "--root", str(root)])
    out, err = capsys.readouterr()
    assert code == 0 and "Traceback" not in err
    lines = [ln for ln in out.splitlines() if ln.startswith("results/")]
    assert lines == [
        "results/nvidia-h200.jsonl:1: results: not a result row, skipped by kwiki verify and kwiki build: "
        "not JSON kwiki can read (Exceeds the limit (4300 digits) for integer string conversion) (warning)",
        "results/nvidia-h200.jsonl:2: results: not a result row, skipped by kwiki verify and kwiki build: "
        "not JSON kwiki can read (nested too deeply) (warning)",
    ]


def test_verify_and_build_skip_json_python_refuses(tmp_path: Path, caplog):
    root = shutil.copytree(UNREADABLE, tmp_path / "project")
    with caplog.at_level(logging.WARNING):
        rows = history.read_all(root)  # what `kwiki build` reads; `verify` reads each store the same way
    assert rows == []
    assert [r.getMessage().split(": ")[1] for r in caplog.records] == ["results/nvidia-h200.jsonl:1",
                                                                        "results/nvidia-h200.jsonl:2"]


def test_check_is_one_library_call_the_cli_prints(tmp_path: Path, capsys):
    root = shutil.copytree(UNREADABLE, tmp_path / "project")
    report = check_tree(root)
    main(["check", "--root", str(root)])
    printed = capsys.readouterr().out.splitlines()
    assert [p.format() for p in report.problems] == printed[:-1] and report.ok
    assert [p.path for p in report.problems if p.path.startswith("results/")] == ["results/nvidia-h200.jsonl"] * 2
    strict = check_tree(root, strict=True)  # under --strict a line no reader can use is an error
    assert not strict.ok and {p.severity for p in strict.problems if p.path.startswith("results/")} == {"error"}
