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


# ---------------------------------------------------------------- shapes: the manifest is their one source


def with_shapes(project: Path, extra: str = "") -> Path:
    manifest = project / "artifacts" / "host_ok" / "artifact.yaml"
    manifest.write_text(manifest.read_text() + "shapes:\n  - {option: sizes, dims: [n], values: ['1024', '4099']}\n"
                        + extra)
    return manifest


def test_claim_params_that_name_a_declared_shape_pass(project, capsys):
    with_shapes(project)
    assert main(["check", "--root", str(project)]) == 0  # the fixture's claims select n: 1024


def test_claim_params_that_match_no_declared_shape_are_located(project, capsys):
    with_shapes(project)
    page = project / "wiki" / "fixture.md"
    text = page.read_text()
    page.write_text(text.replace("{variant: slow, params: {n: 1024}", "{variant: slow, params: {n: 2048}"))
    line = next(i for i, ln in enumerate(page.read_text().splitlines(), 1) if "n: 2048" in ln)
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert (f"wiki/fixture.md:{line}: claims[2].measure.of.params: params {{'n': 2048}} match no shape of "
            "artifacts/host_ok/artifact.yaml (--sizes: n in 1024, 4099)") in out


def test_run_args_may_not_repeat_a_shapes_option(project, capsys):
    with_shapes(project, "run:\n  args: [--sizes=8]\n")
    assert main(["check", "--root", str(project)]) == 1
    assert "run.args '--sizes=8' repeats an option of `shapes`" in capsys.readouterr().out


@pytest.mark.parametrize("values, words", [("['1024x2']", "is not 1 positive integers joined by 'x' (n)"),
                                           ("['1024', '1024']", "a value repeats"), ("['0']", "is not 1 positive")])
def test_bad_shape_values_are_located(project, capsys, values, words):
    manifest = project / "artifacts" / "host_ok" / "artifact.yaml"
    manifest.write_text(manifest.read_text() + f"shapes:\n  - {{option: sizes, dims: [n], values: {values}}}\n")
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert "artifacts/host_ok/artifact.yaml:" in out and words in out


def test_the_binary_gets_the_shapes_before_run_args():
    from kwiki.wiki.manifest import Manifest

    m = Manifest.model_validate({"name": "a", "title": "t", "targets": ["sm_90a"], "build": {"sources": ["a.cu"]},
                                 "run": {"args": ["--iters=2"]}, "variants": [{"name": "v"}],
                                 "shapes": [{"dims": ["M", "K"], "values": ["4096x7168", "4099x4104"]},
                                            {"option": "full", "dims": ["M"], "values": ["7"]}]})
    assert m.run_args() == ["--shapes=4096x7168,4099x4104", "--full=7", "--iters=2"]
    assert m.declares_shape({"M": 4099, "K": 4104}) is True
    assert m.declares_shape({"M": 4099, "K": 7168}) is False
    assert m.declares_shape({"M": 7}) is True  # the second entry names only M
    assert m.declares_shape({"dtype": "bf16"}) is None
