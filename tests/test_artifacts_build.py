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
    # named by no page yet, so verify plans no build of it (issue 30, item 6: its timeline page comes with the trace
    # pass); tests/test_ws_timeline_artifact.py compiles its source and checks its variants, shapes and SASS meanwhile
    unpaged = {"ws_timeline_sm90a"}
    assert {name for name, _ in built} == manifests - borrowers - unpaged
    # every variant's SASS expectations hold on the binaries just built (issue 12: mechanism gate)
    mechanism = report["mechanism"]
    assert mechanism, "no variant declares SASS expectations"
    assert [f"{m['manifest']}: {m['variant']} [{m['target']}]: {m['status']} {m['note'] or ''} {m['mismatches']}"
            for m in mechanism if m["status"] != "passed"] == []
    assert code == 0


# ---------------------------------------------------------------- glue: what an artifact adds outside its kernels

GLUE_LIMIT = 40
WIDTH = 120  # a longer line counts once per 120 columns begun: glue is not shortened by joining lines
BANNER = re.compile(r"^// =+$")
OWN_SECTIONS = ("Reference", "Kernels", "Kernel", "Launchers", "Launcher")  # the artifact's own code, not glue
TABLE_START = re.compile(r"\bkVariants\[\]\s*=\s*\{\s*$")


def sections(text: str) -> list[tuple[str | None, int, str]]:
    """(title of the banner section it is in, or None in the header comment; line number; line) per line."""
    lines = text.splitlines()
    out: list[tuple[str | None, int, str]] = []
    section: str | None = None
    i = 0
    while i < len(lines):
        if BANNER.match(lines[i]) and i + 2 < len(lines) and BANNER.match(lines[i + 2]):
            section = lines[i + 1].removeprefix("//").strip()
            i += 3
            continue
        out.append((section, i + 1, lines[i]))
        i += 1
    return out


def own(section: str) -> bool:
    return re.split(r"[\s:]", section)[0] in OWN_SECTIONS


def glue_lines(text: str) -> list[str]:
    """The counting rule (CONTRIBUTING.md, convention 12): the code lines of a .cu outside its header comment
    (everything before the first banner) and outside the banner sections whose title starts with Reference, Kernels
    or Launchers (a banner is a line of `// ===...`, the title line, and another such line), less the rows of the
    variant table (the lines between `kVariants[] = {` and its `};`: data, one row per variant, names only beside
    what the launchers need). Blank lines, comment lines, preprocessor lines and the lines that open or close a
    namespace are not code. What remains is glue: the table's struct, main, and any other section; a line longer
    than WIDTH columns is listed once per WIDTH columns begun."""
    out: list[str] = []
    in_table = False
    for section, _, raw in sections(text):
        line = raw.strip()
        if section is None or own(section):
            continue
        if in_table:
            in_table = line != "};"
            if in_table:
                continue
        elif TABLE_START.search(line):
            in_table = True
        if not line or line.startswith(("//", "#", "namespace")) or re.match(r"^\}\s*//\s*namespace", line):
            continue
        out.extend([line] * max(1, -(-len(raw.rstrip()) // WIDTH)))
    return out


def misplaced(text: str) -> list[str]:
    """The variant table and main belong to glue sections: either in the header or an own section is an error."""
    return [f"line {n}: {line.strip()[:60]}" for section, n, line in sections(text)
            if (section is None or own(section)) and (TABLE_START.search(line) or line.startswith("int main("))]


def over_the_limit(root: Path) -> list[str]:
    """Every CUDA artifact under root/artifacts whose glue exceeds GLUE_LIMIT, or whose table or main sits outside
    the glue, with what was counted."""
    problems = []
    for source in sorted((root / "artifacts").glob("*/*.cu")):
        rel = source.relative_to(root / "artifacts").as_posix()
        text = source.read_text()
        if "int main(" not in text:
            continue  # a library's sources (a Python artifact's CUDA kernels): no main, no glue
        n = len(glue_lines(text))
        if n > GLUE_LIMIT:
            problems.append(f"{rel}: {n} lines of glue (at most {GLUE_LIMIT})")
        problems += [f"{rel}: {m}: the table of variants and main go in a glue section" for m in misplaced(text)]
    return problems


GLUE_RULE_TEXT = ("// header\n#include <x>\nint header_code;\n"
                  "// ====\n// Reference: fp64\n// ====\nint ref;\n"
                  "// ====\n// Kernels\n// ====\n__global__ void k() {}\n"
                  "// ====\n// Launchers\n// ====\nvoid launch() {}\n"
                  "// ====\n// The table of variants\n// ====\n"
                  "namespace {\nstruct Variant : kwiki::VariantInfo { int x; };\n"
                  "const Variant kVariants[] = {\n    {{\"a\"}, 1},\n    {{\"b\"}, 2},\n};\n}  // namespace\n"
                  "// ====\n// main\n// ====\n\n// a comment\nint main() {\n    return 0;\n}\n")


def test_the_glue_rule_counts_main_and_the_tables_struct_but_not_kernels_launchers_reference_or_rows():
    assert glue_lines(GLUE_RULE_TEXT) == ["struct Variant : kwiki::VariantInfo { int x; };",
                                          "const Variant kVariants[] = {", "};", "int main() {", "return 0;", "}"]
    assert misplaced(GLUE_RULE_TEXT) == []


def test_a_long_line_of_glue_counts_once_per_120_columns():
    text = GLUE_RULE_TEXT.replace("    return 0;", "    return 0;" + " " * 250 + "// a long line")  # 277 columns
    assert len(glue_lines(text)) == len(glue_lines(GLUE_RULE_TEXT)) + 2


def test_main_or_the_table_inside_a_launchers_section_is_refused():
    text = GLUE_RULE_TEXT.replace("// Launchers\n// ====\nvoid launch() {}\n",
                                  "// Launchers\n// ====\nvoid launch() {}\nint main() {\n    return 1;\n}\n")
    assert misplaced(text) == ["line 16: int main() {"]


def test_every_cuda_artifact_has_at_most_40_lines_of_glue():
    assert over_the_limit(REPO) == []


def test_the_glue_limit_fails_an_artifact_over_it(tmp_path):
    # the ratchet can fail: an artifact whose main grows past the limit by one line is reported
    body = "".join(f"    int x{i} = {i};\n" for i in range(GLUE_LIMIT - 5))
    fat = GLUE_RULE_TEXT.replace("    return 0;\n", body + "    return 0;\n")
    (tmp_path / "artifacts" / "fat_sm90a").mkdir(parents=True)
    (tmp_path / "artifacts" / "fat_sm90a" / "fat.cu").write_text(fat)
    assert len(glue_lines(fat)) == GLUE_LIMIT + 1
    assert over_the_limit(tmp_path) == [f"fat_sm90a/fat.cu: {GLUE_LIMIT + 1} lines of glue (at most {GLUE_LIMIT})"]
    (tmp_path / "artifacts" / "fat_sm90a" / "fat.cu").write_text(fat.replace("    int x0 = 0;\n", ""))
    assert over_the_limit(tmp_path) == []


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
