"""`build.binary_of`: an artifact that runs another artifact's binary (the tile-order profiler runs the
GEMM's) compiles nothing of its own; the code is built once, by its owner."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main

FIXTURES = Path(__file__).parent / "fixtures"
needs_cxx = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    shutil.copytree(FIXTURES / "verify" / "project", root)
    shutil.copytree(FIXTURES / "binary_of", root, dirs_exist_ok=True)
    return root


def verify(capsys, *args: str) -> tuple[int, dict]:
    code = main(["verify", "--quiet", "--json", "--no-write", *args])
    return code, json.loads(capsys.readouterr().out)


@needs_cxx
def test_the_borrowed_binary_is_built_once_and_run_by_the_borrower(project: Path, capsys):
    _, report = verify(capsys, "--root", str(project), "driver-page", "fixture-page")
    assert [(b["artifact"], b["target"]) for b in report["builds"]] == [("host_ok", "host")]
    runs = {r["artifact"]: r for r in report["runs"]}
    assert runs["host_driver"]["status"] == "ok" and runs["host_driver"]["records"] > 0
    claim = next(c for c in report["claims"] if c["claim"] == "driven-fast-time")
    assert claim["verdict"] != "error" and claim["value"] == pytest.approx(100, rel=0.01)


@needs_cxx
def test_a_borrower_alone_still_gets_the_owners_build(project: Path, capsys):
    _, report = verify(capsys, "--root", str(project), "driver-page")
    assert [b["artifact"] for b in report["builds"]] == ["host_ok"]
    assert {r["artifact"] for r in report["runs"]} == {"host_driver"}  # the owner's page was not selected


def test_a_variant_the_owner_lacks_is_a_located_problem(project: Path, capsys):
    manifest = project / "artifacts" / "host_driver" / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("- {name: fast,", "- {name: turbo,"))
    page = project / "wiki" / "driver.md"
    page.write_text(page.read_text().replace("variant: fast", "variant: turbo"))
    code, report = verify(capsys, "--root", str(project), "--compile-only", "driver-page")
    problems = [p for p in report["problems"] if p["field"] == "build.binary_of"]
    assert problems and "turbo" in problems[0]["message"]
    assert problems[0]["path"] == "artifacts/host_driver/artifact.yaml"
    assert code == 1


def test_binary_of_may_not_lead_out_of_the_repository(project: Path, capsys, tmp_path: Path):
    outside = tmp_path / "elsewhere"
    shutil.copytree(project / "artifacts" / "host_ok", outside)
    manifest = project / "artifacts" / "host_driver" / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("binary_of: ../host_ok", "binary_of: ../../../elsewhere"))
    _, report = verify(capsys, "--root", str(project), "--compile-only", "driver-page")
    assert report["builds"] == []  # nothing outside the repository is built
    assert any(p["field"] == "build.binary_of" and "leaves the repository" in p["message"] for p in report["problems"])
