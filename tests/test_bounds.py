"""Inputs that used to take time without bound: every command stays linear in what a page holds.

A page with 200,000 distinct tags hung every command (tag de-duplication compared each tag with
all before it); these tests give each command a deadline, so they fail rather than hang.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.wiki.fields import unique

REPO = Path(__file__).resolve().parent.parent
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "query"


def within(seconds: float, *argv: str) -> str:
    """stdout of `python argv...`, which must end within `seconds` (a test fails rather than hangs)."""
    try:
        done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=seconds,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(argv[:4])} ... took more than {seconds} s")
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done.stdout


def test_unique_is_linear():
    code = ("from kwiki.wiki.fields import unique; tags = [f't{i}' for i in range(200_000)]; "
            "assert unique(tags + tags[:10]) == tags; print('ok')")
    assert within(10, "-c", code) == "ok\n"
    assert unique(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
    assert unique([["x"], ["y"], ["x"]]) == [["x"], ["y"]]  # unhashable values still work


@pytest.fixture
def many_tags(tmp_path: Path) -> Path:
    root = tmp_path / "wiki-root"
    shutil.copytree(FIXTURE, root)
    tags = ", ".join(f"t{i}" for i in range(50_000))  # 40,000 took 11.6 s per command when it was quadratic
    (root / "wiki" / "nvidia" / "patterns" / "many-tags.md").write_text(
        f"---\nid: pattern-many-tags\ntitle: Many tags\ntype: pattern\ntags: [{tags}]\n---\nBody.\n",
        encoding="utf-8")
    return root


def test_a_page_with_50000_tags_does_not_hang_any_command(many_tags: Path):
    root = str(many_tags)
    within(30, "-m", "kwiki.cli", "check", "--root", root)
    found = json.loads(within(30, "-m", "kwiki.cli", "query", "--root", root, "--tag", "t49999", "--json"))
    assert [r["id"] for r in found["results"]] == ["pattern-many-tags"]
    assert json.loads(within(30, "-m", "kwiki.cli", "show", "--root", root, "--json", "pattern-many-tags"))["id"]
    assert len(json.loads(within(30, "-m", "kwiki.cli", "tags", "--root", root, "--json"))["tags"]) > 50_000


def test_a_huge_max_output_bytes_is_a_located_manifest_error(tmp_path: Path, capsys):
    project = tmp_path / "project"
    shutil.copytree(Path(__file__).resolve().parent / "fixtures" / "verify" / "project", project)
    manifest = project / "artifacts" / "host_ok" / "artifact.yaml"
    manifest.write_text(manifest.read_text() + "run:\n  max_output_bytes: 99999999999999999999\n")
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert "artifacts/host_ok/artifact.yaml:" in out
    assert "run.max_output_bytes: Input should be less than or equal to" in out
    assert main(["verify", "--root", str(project), "--no-write", "--compile-only", "--quiet", "fixture-page"]) == 1
    captured = capsys.readouterr()
    assert "internal error" not in captured.err and "run.max_output_bytes" in captured.out
