"""kwiki check looks into artifact manifests and the variants claims select."""

from __future__ import annotations

from pathlib import Path

import pytest

from kwiki.cli import main


@pytest.fixture
def project(fixture_copy) -> Path:
    return fixture_copy("verify/project", "project")


def test_fixture_project_checks_clean(project, capsys):
    assert main(["check", "--root", str(project)]) == 0


def test_unknown_variant_in_a_claim_is_located(project, capsys):
    page = project / "wiki" / "fixture.md"
    page.write_text(page.read_text().replace("{variant: slow,", "{variant: slowest,"))
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert ("wiki/fixture.md:34: claims[2].measure.of.variant: variant 'slowest' is not in "
            "artifacts/host_ok/artifact.yaml") in out


def test_invalid_manifest_is_located_in_the_manifest(project, capsys):
    manifest = project / "artifacts" / "host_ok" / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("targets: [host]", "targets: [sm_42]"))
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert "artifacts/host_ok/artifact.yaml:3: targets.0:" in out and "sm_42" in out
    assert "Traceback" not in out


def test_unquoted_comma_list_in_args_is_caught(project, capsys):
    manifest = project / "artifacts" / "host_ok" / "artifact.yaml"
    manifest.write_text(manifest.read_text() + "run:\n  args: [--shapes=1x2,3x4]\n")
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert "artifacts/host_ok/artifact.yaml:" in out
    assert "args[1] '3x4' is not an option" in out and "quote the whole option" in out
