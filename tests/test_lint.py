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
