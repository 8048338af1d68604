"""Rung markers (kwiki.wiki.rungs): the code each rung adds, marked in an artifact's sources (issue 25, item 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.core.errors import ManifestError
from kwiki.wiki.manifest import load_manifest, rung_regions
from kwiki.wiki.rungs import parse_regions

REPO = Path(__file__).resolve().parent.parent

GOOD = """\
int shared;
// kwiki:rung naive
__global__ void naive() {}
// /kwiki:rung naive
    // kwiki:rung vec4
    __global__ void vec4() {}
    // /kwiki:rung vec4
// kwiki:rung naive
void launch_naive() {}
// /kwiki:rung naive
"""


def test_regions_come_in_file_order_with_their_lines_and_code():
    regions = parse_regions(GOOD, "a.cu")
    assert [(r.variant, r.open_line, r.close_line) for r in regions] == [("naive", 2, 4), ("vec4", 5, 7),
                                                                         ("naive", 8, 10)]
    assert regions[0].text == "__global__ void naive() {}" and (regions[0].first, regions[0].last) == (3, 3)
    assert regions[1].text == "    __global__ void vec4() {}"


@pytest.mark.parametrize("text, line, words", [
    ("// kwiki:rung a\nx\n", 1, "'kwiki:rung a' is never closed"),
    ("x\n// /kwiki:rung a\n", 2, "closes no open region"),
    ("// kwiki:rung a\n// /kwiki:rung b\n", 2, "closes the region of 'a' opened at line 1"),
    ("// kwiki:rung a\n// kwiki:rung b\n// /kwiki:rung b\n// /kwiki:rung a\n", 2, "regions do not nest"),
    ("// kwiki:rung\n// /kwiki:rung\n", 1, "wants one variant name"),
    ("// kwiki:rung a b\n", 1, "wants one variant name"),
    ("int x;  // kwiki:rung a\n", 1, "must stand alone on its line"),
])
def test_a_broken_marker_is_located(text, line, words):
    with pytest.raises(ManifestError) as err:
        parse_regions(text, "art/x.cu")
    assert (err.value.path, err.value.line) == ("art/x.cu", line) and words in err.value.message


@pytest.fixture
def project(fixture_copy) -> Path:
    return fixture_copy("verify/project", "project")


def ladder(project: Path, marker_name: str) -> Path:
    """host_ok with rungs (fast: 1) and one marked region naming `marker_name` in its source."""
    art = project / "artifacts" / "host_ok"
    manifest = art / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("{name: fast, description: the fast one}",
                                                     "{name: fast, description: the fast one, rung: 1, adds: speed}"))
    src = art / "main.cpp"
    src.write_text(src.read_text() + f"// kwiki:rung {marker_name}\nstatic int unused_marked = 0;\n"
                                     f"// /kwiki:rung {marker_name}\n")
    return src


def test_kwiki_check_accepts_a_marker_naming_a_rung(project, capsys):
    ladder(project, "fast")
    assert main(["check", "--root", str(project)]) == 0


@pytest.mark.parametrize("name, words", [
    ("fastest", "'kwiki:rung fastest' names no variant of the manifest"),
    ("slow", "'kwiki:rung slow' names a variant without a rung"),
])
def test_kwiki_check_fails_on_a_marker_naming_no_rung(project, capsys, name, words):
    src = ladder(project, name)
    line = src.read_text().splitlines().index(f"// kwiki:rung {name}") + 1
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert f"artifacts/host_ok/main.cpp:{line}: rung marker: {words}" in out and "Traceback" not in out


def test_kwiki_check_fails_on_a_broken_pair(project, capsys):
    src = project / "artifacts" / "host_ok" / "main.cpp"
    src.write_text(src.read_text() + "// kwiki:rung fast\n")
    assert main(["check", "--root", str(project)]) == 1
    assert "artifacts/host_ok/main.cpp:" in capsys.readouterr().out


@pytest.mark.parametrize("artifact, at_least", [("gemm_bf16_sm90a", 6), ("gemv_bf16_sm90a", 9),
                                                ("vector_loads_sm90a", 5)])
def test_the_three_ladders_mark_their_rungs(artifact, at_least):
    directory = REPO / "artifacts" / artifact
    manifest = load_manifest(directory, REPO)
    regions = rung_regions(manifest, directory, REPO)
    assert len({r.variant for r in regions}) >= at_least
    assert all(manifest.variant(r.variant).rung is not None for r in regions)  # type: ignore[union-attr]


def test_a_python_source_marks_its_rungs_with_hash_comments():
    text = "import triton\n# kwiki:rung triton_row\ndef kernel():\n    pass\n# /kwiki:rung triton_row\n"
    [region] = parse_regions(text, "art/kernels.py")
    assert (region.variant, region.open_line, region.close_line) == ("triton_row", 2, 5)
    assert region.text == "def kernel():\n    pass"
    with pytest.raises(ManifestError, match="'// kwiki:rung NAME'"):  # in CUDA a marker is a '//' comment
        parse_regions(text, "art/x.cu")


def test_a_marker_in_the_other_language_s_comment_is_located():
    with pytest.raises(ManifestError) as err:
        parse_regions("x = 1\n// kwiki:rung a\n", "art/kernels.py")
    assert err.value.line == 2 and "'# kwiki:rung NAME'" in err.value.message


def test_a_python_artifact_s_kernels_file_beside_its_module_is_read_for_markers(tmp_path):
    art = tmp_path / "artifacts" / "rows_f32_sm90a"
    shutil.copytree(REPO / "artifacts" / "softmax_bf16_sm90a", art)
    (art / "artifact.yaml").write_text((art / "artifact.yaml").read_text().replace("softmax_bf16_sm90a",
                                                                                    "rows_f32_sm90a"))
    for source in [*art.glob("*.py"), *art.glob("*.cu")]:  # the artifact's own markers out: one region below
        source.write_text("".join(line for line in source.read_text().splitlines(keepends=True)
                                  if "kwiki:rung" not in line))
    kernels = art / "kernels.py"
    kernels.write_text(kernels.read_text() + "\n# kwiki:rung triton_row\nMARKED = 1\n# /kwiki:rung triton_row\n")
    manifest = load_manifest(art, tmp_path)
    [region] = rung_regions(manifest, art, tmp_path)
    assert (region.variant, region.path, region.text) == ("triton_row", "artifacts/rows_f32_sm90a/kernels.py",
                                                          "MARKED = 1")
    kernels.write_text(kernels.read_text() + "# kwiki:rung torch_copy\nX = 2\n# /kwiki:rung torch_copy\n")
    with pytest.raises(ManifestError, match="names a variant without a rung"):
        rung_regions(manifest, art, tmp_path)


def test_a_shared_header_of_artifacts_common_is_read_for_markers():
    """The FA3 CTA body lives in artifacts/common/fa3_attention.cuh, shared by the attention artifact's library and
    the timeline artifact: its ping-pong and overlap regions are found from both (and checked against each one's
    rungs), while headers that no source includes are not read."""
    for artifact in ("attention_fwd_bf16_sm90a", "attention_timeline_sm90a"):
        directory = REPO / "artifacts" / artifact
        regions = rung_regions(load_manifest(directory, REPO), directory, REPO)
        shared = {r.variant for r in regions if r.path == "artifacts/common/fa3_attention.cuh"}
        assert {"cuda_fa3_pingpong", "cuda_fa3_overlap"} <= shared
    directory = REPO / "artifacts" / "gemm_bf16_sm90a"
    assert not any(r.path.startswith("artifacts/common/")
                   for r in rung_regions(load_manifest(directory, REPO), directory, REPO))
