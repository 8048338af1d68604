"""ruff and mypy --strict pass: the README's test command (and so CI) runs both through this file.

Their settings live in pyproject.toml ([tool.ruff], [tool.mypy]); the `test` extra installs both. Both cover the
measurement Python of artifacts/common (the harness and kwiki_bench.py) as well as kwiki, tests and bench.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, check=False)


def test_ruff_finds_nothing():
    res = _run("ruff", "check", "--no-fix", "kwiki", "tests", "bench", "artifacts/common")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict_finds_nothing():
    res = _run("mypy")  # the files of [tool.mypy]: kwiki and the measurement Python of artifacts/common
    assert res.returncode == 0, res.stdout + res.stderr


def test_no_file_cites_a_style_guide_outside_the_repository():
    # the conventions live in CONTRIBUTING.md (numbered); a citation of a STYLE.md that is not in the
    # repository sends a reader nowhere (issue 25, item 8)
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=False).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    citing = []
    for rel in tracked:
        if rel.startswith("tests/fixtures/") or rel == "tests/test_lint.py" or (REPO / rel).is_symlink():
            continue
        try:
            text = (REPO / rel).read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if "STYLE.md" in text and not (REPO / "STYLE.md").exists():
            citing.append(rel)
    assert citing == []
