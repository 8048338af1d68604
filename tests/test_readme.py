"""The README's command table is generated from the parser (`python -m kwiki.cli.readme`) and kept current."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from kwiki.cli import COMMANDS, readme

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_command_table_is_current():
    text = README.read_text(encoding="utf-8")
    assert readme.rewrite(text, readme.table()) == text, (
        "README.md's command table is stale: run `python -m kwiki.cli.readme`")


def test_table_has_a_row_for_every_command_and_subcommand():
    usages = [usage for usage, _ in readme.rows()]
    firsts = {" ".join(u.split()[:2]) for u in usages}
    assert firsts == {f"kwiki {name}" for name in COMMANDS}
    assert any(u.startswith("kwiki mcp") for u in usages)
    assert any(u.startswith("kwiki new page ") and u.endswith(" ID") for u in usages)
    assert any(u.startswith("kwiki new artifact ") and u.endswith(" NAME") for u in usages)
    assert not any("-h" in u.split() or "[-h]" in u for u in usages)


def test_usage_is_one_line_whatever_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    rows = readme.rows()
    assert all("\n" not in usage for usage, _ in rows)
    monkeypatch.setenv("COLUMNS", "400")
    assert readme.rows() == rows


def test_a_pipe_in_help_text_does_not_split_the_markdown_cell():
    parser = argparse.ArgumentParser(prog="kwiki")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("x", help="a|b").add_argument("--mode", choices=["a|b"])
    (line,) = [ln for ln in readme.table(parser).splitlines() if ln.startswith("| `kwiki x")]
    assert line.count("|") - line.count("\\|") == 3


def test_stale_table_is_rewritten_between_the_markers_only(tmp_path: Path, capsys):
    path = tmp_path / "README.md"
    path.write_text(f"# Title\n\nbefore\n{readme.BEGIN}\n| old |\n{readme.END}\nafter\n", encoding="utf-8")
    assert readme.main([str(path), "--check"]) == 1
    assert "run python -m kwiki.cli.readme" in capsys.readouterr().out
    assert readme.main([str(path)]) == 0
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# Title\n\nbefore\n") and text.endswith("\nafter\n") and "| old |" not in text
    assert readme.main([str(path), "--check"]) == 0


@pytest.mark.parametrize("text", ["no markers\n", f"{readme.END}\n{readme.BEGIN}\n",
                                  f"{readme.BEGIN}\n{readme.BEGIN}\n{readme.END}\n"])
def test_missing_or_broken_markers_are_an_error(tmp_path: Path, capsys, text: str):
    path = tmp_path / "README.md"
    path.write_text(text, encoding="utf-8")
    assert readme.main([str(path)]) == 2
    assert path.read_text(encoding="utf-8") == text
    assert "needs exactly one" in capsys.readouterr().err
