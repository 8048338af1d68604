"""The README works as written: each command block runs in a new shell, and its query examples exit 0."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
READERS = ("query", "show", "tags", "check")  # the commands that read the wiki and write nothing in it


def _blocks(text: str) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang == "bash"]


def _commands(block: str) -> list[str]:
    """Each line of a block without its comment, a pipe's tail and the activation before `&&`."""
    out = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        if "|" in words:
            words = words[: words.index("|")]
        out.append(" ".join(shlex.quote(w) for w in words))
    return [c for c in out if c]


def test_every_block_that_runs_kwiki_or_pip_says_which_python():
    """A new shell has no venv on PATH: a block activates it first, or spells .venv/bin/ on every command."""
    bare = []
    for block in _blocks(README.read_text(encoding="utf-8")):
        lines = _commands(block)
        if lines and lines[0].startswith(". .venv/bin/activate"):
            continue
        bare += [c for c in lines if re.match(r"(kwiki|pip|python)\b", c)]
    assert bare == []


def test_readme_query_examples_exit_zero(tmp_path: Path, monkeypatch, capsys):
    for name in ("wiki", "artifacts", "results"):
        shutil.copytree(REPO / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    examples = [c for block in _blocks(README.read_text(encoding="utf-8")) for c in _commands(block)
                if c.startswith(tuple(f"kwiki {r}" for r in READERS))]
    assert len(examples) >= 6, examples
    failed = {}
    for command in examples:
        rc = main(shlex.split(command)[1:])
        err = capsys.readouterr().err
        if rc != 0:
            failed[command] = (rc, err.strip())
    assert failed == {}


@pytest.mark.parametrize("line, expected", [
    ("kwiki tags   # with a comment", ["kwiki tags"]),
    ("kwiki show x --json | jq '.claims[]'", ["kwiki show x --json"]),
])
def test_commands_strip_comments_and_pipes(line: str, expected: list[str]):
    assert _commands(line) == expected
