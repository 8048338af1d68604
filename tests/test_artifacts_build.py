"""CI compiles every artifact of the wiki for every target it declares, and checks each CUDA binary's
`--list-variants` against its manifest (issue 12, item 5): a broken artifact or shared header fails
here, on a machine without a GPU, instead of on the H200."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.nvcc
def test_every_artifact_of_the_wiki_builds_and_lists_its_manifests_variants(capsys, shared_build_cache):
    # shared_build_cache: where CI sets $KWIKI_BUILD_CACHE, an artifact compiled by an earlier run with the same
    # sources, headers, flags and nvcc is taken from there (checked again all the same: variants, shapes, SASS)
    assert shutil.which("nvcc") is not None
    code = main(["verify", "--compile-only", "--no-write", "--quiet", "--json", "--root", str(REPO)])
    report = json.loads(capsys.readouterr().out)
    failed = [f"{b['artifact']} [{b['target']}]: {b['error']}" for b in report["builds"] if not b["ok"]]
    assert failed == []
    assert [p for p in report["problems"] if p["severity"] == "error"] == []
    built = {(b["artifact"], b["target"]) for b in report["builds"]}
    manifests = {p.parent.name for p in (REPO / "artifacts").glob("*/artifact.yaml")}
    borrowers = {"tile_order_sm90a"}  # runs gemm_bf16_sm90a's binary (build.binary_of): nothing of its own
    assert {name for name, _ in built} == manifests - borrowers
    # every variant's SASS expectations hold on the binaries just built (issue 12: mechanism gate)
    mechanism = report["mechanism"]
    assert mechanism, "no variant declares SASS expectations"
    assert [f"{m['manifest']}: {m['variant']} [{m['target']}]: {m['status']} {m['note'] or ''} {m['mismatches']}"
            for m in mechanism if m["status"] != "passed"] == []
    assert code == 0


# ---------------------------------------------------------------- glue: what an artifact adds outside its kernels

GLUE_LIMIT = 40
BANNER = re.compile(r"^// =+$")
OWN_SECTIONS = ("Reference", "Kernels", "Kernel", "Launchers", "Launcher")  # the artifact's own code, not glue
# The CUDA artifacts written before the shared main (kwiki_main.cuh): their glue today, which may only shrink as
# they move onto it (issue 25 left them as they were: rewriting every main without a GPU risks every check).
GLUE_BEFORE_THE_SHARED_MAIN = {
    "cublas_gemm_sm90a/cublas_gemm.cu": 138, "gemm_bf16_sm90a/gemm.cu": 216, "gemv_bf16_sm90a/gemv_bf16.cu": 138,
    "nvfp4_gemv_sm90a/nvfp4_gemv.cu": 177, "protocol_sm90a/protocol.cu": 151, "tma_sm90a/tma.cu": 130,
    "vector_loads_sm90a/vector_loads.cu": 101, "wgmma_sm90a/wgmma.cu": 88, "ws_pitfalls_sm90a/pitfalls.cu": 171,
}


def glue_lines(text: str) -> list[str]:
    """The counting rule: the code lines of a .cu outside its header comment (everything before the first banner)
    and outside the banner sections whose title starts with Reference, Kernels or Launchers (a banner is a line of
    `// ===...`, the title line, and another such line). Blank lines, comment lines, preprocessor lines and the
    lines that open or close a namespace are not code. What remains is glue: the variant table, main, and any
    other section."""
    lines = text.splitlines()
    section: str | None = None
    out: list[str] = []
    i = 0
    while i < len(lines):
        if BANNER.match(lines[i]) and i + 2 < len(lines) and BANNER.match(lines[i + 2]):
            section = lines[i + 1].removeprefix("//").strip()
            i += 3
            continue
        line = lines[i].strip()
        i += 1
        if section is None or re.split(r"[\s:]", section)[0] in OWN_SECTIONS:
            continue
        if not line or line.startswith(("//", "#", "namespace")) or re.match(r"^\}\s*//\s*namespace", line):
            continue
        out.append(line)
    return out


def test_the_glue_rule_counts_main_and_the_table_but_not_kernels_launchers_or_the_reference():
    text = ("// header\n#include <x>\nint header_code;\n"
            "// ====\n// Reference: fp64\n// ====\nint ref;\n"
            "// ====\n// Kernels\n// ====\n__global__ void k() {}\n"
            "// ====\n// Launchers\n// ====\nvoid launch() {}\n"
            "// ====\n// The table of variants\n// ====\n"
            "namespace {\nconst V kVariants[] = {{\"a\"}};\n}  // namespace\n"
            "// ====\n// main\n// ====\n\n// a comment\nint main() {\n    return 0;\n}\n")
    assert glue_lines(text) == ['const V kVariants[] = {{"a"}};', "int main() {", "return 0;", "}"]


@pytest.mark.parametrize("rel", sorted(GLUE_BEFORE_THE_SHARED_MAIN))
def test_an_artifact_written_before_the_shared_main_only_loses_glue(rel):
    assert len(glue_lines((REPO / "artifacts" / rel).read_text())) <= GLUE_BEFORE_THE_SHARED_MAIN[rel]


def test_a_new_cuda_artifact_has_at_most_40_lines_of_glue():
    for source in sorted((REPO / "artifacts").glob("*/*.cu")):
        rel = source.relative_to(REPO / "artifacts").as_posix()
        if rel not in GLUE_BEFORE_THE_SHARED_MAIN:
            assert len(glue_lines(source.read_text())) <= GLUE_LIMIT, rel


def test_the_artifact_skeleton_is_on_the_shared_main_within_the_glue_limit():
    from kwiki.wiki.skeletons import render_source

    text = render_source("scale_f32_sm90a", "sm_90a")
    assert "kwiki::Main m(" in text and "kwiki::run_ladder(" in text and "kwiki::InputSets<" in text
    assert len(glue_lines(text)) <= GLUE_LIMIT


# ---------------------------------------------------------------- the build cache outside the clone (CI)


def _compile(root: Path, capsys) -> list[bool]:
    main(["verify", "--quiet", "--json", "--compile-only", "--root", str(root), "fixture-page"])
    return [b["cached"] for b in json.loads(capsys.readouterr().out)["builds"]]


def test_a_build_is_reused_from_the_shared_cache_by_a_fresh_clone_at_the_same_path(fixture_copy, tmp_path,
                                                                                     monkeypatch, capsys):
    monkeypatch.setenv("KWIKI_BUILD_CACHE", str(tmp_path / "cache"))
    root = fixture_copy("verify/project", "p")
    assert _compile(root, capsys) == [False]
    shutil.rmtree(root)  # a new clone at the same path: nothing under .kwiki
    root = fixture_copy("verify/project", "p")
    assert _compile(root, capsys) == [True]
    assert list((root / ".kwiki" / "build" / "host_ok").glob("host-*/host_ok"))  # copied into the clone
    (root / "artifacts" / "host_ok" / "main.cpp").write_text(
        (root / "artifacts" / "host_ok" / "main.cpp").read_text() + "// changed\n")
    assert _compile(root, capsys) == [False]  # a changed source is a new key
    other = fixture_copy("verify/project", "elsewhere")
    assert _compile(other, capsys) == [False]  # another checkout's binary embeds another path: not shared


def test_without_the_variable_nothing_is_written_outside_the_clone(fixture_copy, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = fixture_copy("verify/project", "p")
    assert _compile(root, capsys) == [False]
    assert not (tmp_path / "home").exists() and not (tmp_path / "xdg").exists()


def test_no_cuda_source_restates_its_manifests_rung_numbers():
    # the manifest is the one source of the ladder (issue 25): a header line "//   4 warp_r4_v16  ..." drifts
    from kwiki.wiki.manifest import load_manifest

    restated = []
    for manifest_path in sorted((REPO / "artifacts").glob("*/artifact.yaml")):
        manifest = load_manifest(manifest_path.parent, REPO)
        rungs = {v.name: v.rung for v in manifest.variants if v.rung is not None}
        for source in manifest.build.sources:
            for n, line in enumerate((manifest_path.parent / source).read_text().splitlines(), 1):
                m = re.match(r"^//\s+(\d+)\s+([A-Za-z0-9_.-]+)\s", line)
                if m and m.group(2) in rungs:
                    restated.append(f"{manifest_path.parent.name}/{source}:{n}")
    assert restated == []
