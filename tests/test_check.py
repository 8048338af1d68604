"""`kwiki check`: every kind of bad page in tests/fixtures/bad is reported where it is, as it is.

Each fixture is copied into a small wiki beside two valid pages, and `kwiki.cli.main` runs on it
as a user would: the test asserts the located problem, exit code 1, no traceback, the `--json`
shape, and that no file changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kwiki import SCHEMA_VERSION
from kwiki.cli import main
from kwiki.wiki.check import _links, check, check_links, inside
from kwiki.wiki.frontmatter import MAX_PAGE_BYTES
from kwiki.wiki.pages import load_page

FIXTURES = Path(__file__).resolve().parent / "fixtures"
BAD = FIXTURES / "bad"

SIBLING_A = """---
id: technique-sibling-a
title: Sibling A
type: technique
related: [concept-sibling-b]
---
See [B](sibling-b.md).
"""
SIBLING_B = """---
id: concept-sibling-b
title: Sibling B
type: concept
artifacts:
  code: artifacts/demo/demo.cu
---
See [A](sibling-a.md) and [the guide](https://docs.nvidia.com/cuda/).
"""

# fixture -> (line, field, part of the message[, path of the page reported when not the fixture])
EXPECTED: dict[str, tuple] = {
    "empty.md": (1, "", "empty page"),
    "whitespace-only.md": (1, "", "empty page"),
    "broken-yaml.md": (7, "", "invalid YAML: did not find expected ',' or ']'"),
    "unterminated-front-matter.md": (1, "", "unterminated front matter"),
    "list-front-matter.md": (2, "", "front matter must be a mapping of fields, not a list"),
    "scalar-front-matter.md": (2, "", "front matter must be a mapping of fields, not a str"),
    "no-front-matter.md": (1, "", "no front matter: the first line must be '---'"),
    "empty-front-matter.md": (1, "", "empty front matter"),
    "not-utf8.md": (4, "", "not UTF-8: byte 0xe9"),
    "nul-byte.md": (7, "", "NUL byte"),
    "alias-bomb.md": (7, "lol1[0]", "YAML aliases (*name) are not allowed"),
    "merge-key.md": (7, "", "YAML merge keys (<<) are not allowed"),
    "duplicate-key.md": (8, "tags", "duplicate key 'tags' (first defined on line 6)"),
    "python-tag.md": (6, "summary", "unsupported YAML tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
    "key-not-string.md": (6, "", "a key must be a plain string"),
    "nested-too-deep.md": (6, "summary" + "[0]" * 31, "nested more than 32 levels deep"),
    "multiple-documents.md": (7, "", "more than one YAML document"),
    "nan-value.md": (13, "claims[0].value", "'.nan' is not a finite number"),
    "unknown-architecture.md": (8, "architectures[1]", "'sm_42' is not a known architecture"),
    "bad-arch-suffix.md": (6, "architectures[1]", "'sm_80a': suffix 'a' does not exist for sm_80"),
    "bad-id-slug.md": (3, "id", "'Bad ID!' is not a slug"),
    "missing-title.md": (1, "title", "required field is missing"),
    "unknown-type.md": (5, "type", "Input should be 'technique'"),
    "bad-evidence-level.md": (6, "evidence_level",
                              "Input should be 'spec', 'source-reported', 'measured' or 'verified'"),
    "verified-by-hand.md": (6, "evidence_level", "'verified' is set only by kwiki verify"),
    "tags-not-strings.md": (8, "tags[1]", "a tag must be a non-empty string, not 42"),
    "claim-value-and-bound.md": (12, "claims[0].at_least", "give either 'value' or a bound"),
    "claim-no-value.md": (7, "claims[0]", "a claim needs either 'value' (with 'tolerance') or a bound"),
    "claim-source-missing.md": (7, "claims[0].source", "a source-reported claim needs its 'source'"),
    "claim-duplicate-ids.md": (12, "claims[1].id", "claim id 'same' appears twice"),
    "claim-unknown-artifact.md": (15, "claims[0].measure.artifact",
                                  "measures artifact 'kernel', which is not a key of 'artifacts'"),
    "claim-unit-mismatch.md": (12, "claims[0].unit", "figure 'time_us' is in us, but the claim's unit is 'ms'"),
    "claim-missing-metric.md": (7, "claims[0].metric", "required field is missing"),
    "unknown-field-strict.md": (6, "colour", "unknown field"),
    "measurements-by-hand.md": (6, "measurements", "measurements block outside its '# kwiki:measurements' markers"),
    "artifact-absolute.md": (7, "artifacts.code", "'/etc/passwd' is an absolute path"),
    "artifact-dotdot.md": (7, "artifacts.code", "leaves the repository ('..')"),
    "artifact-symlink-out.md": (7, "artifacts.code", "is a link that leads out of the repository"),
    "artifact-missing.md": (8, "artifacts.build", "'artifacts/demo/build.sh' does not exist"),
    "related-unresolved.md": (8, "related[1]", "no page has id 'no-such-page'"),
    "link-broken.md": (9, "link", "link '../good/no-such-page.md#part' leads to a file that does not exist"),
    "link-leaves-wiki.md": (7, "link", "link '../../README.md' leaves wiki/"),
    "link-absolute.md": (7, "link", "link '/wiki/good/sibling-a.md' is absolute"),
    "duplicate-page-id.md": (3, "id", "id 'technique-sibling-a' is already used by wiki/good/sibling-a.md"),
    "marker-unknown.md": (9, "kwiki-marker", "unknown generated region 'kwiki:weather'"),
    "marker-unclosed.md": (9, "kwiki-marker", "region 'kwiki:claims' is never closed"),
    "marker-malformed.md": (9, "kwiki-marker", "malformed kwiki marker"),
    "marker-edited.md": (9, "kwiki:claims", "generated region was edited by hand (checksum mismatch)"),
    "marker-hidden-by-fence.md": (13, "kwiki:claims", "generated region was edited by hand (checksum mismatch)"),
    "yaml-marker-malformed.md": (6, "kwiki-marker", "malformed kwiki marker"),
    "crlf-unknown-architecture.md": (6, "architectures[0]", "'sm_42' is not a known architecture"),
    "bom-unknown-architecture.md": (6, "architectures[0]", "'sm_42' is not a known architecture"),
}
STRICT_ONLY = {"unknown-field-strict.md"}


def make_wiki(root: Path) -> Path:
    """A project with two valid pages, one artifact, a README, and a link out of the repository."""
    (root / "wiki" / "good").mkdir(parents=True)
    (root / "wiki" / "bad").mkdir()
    (root / "wiki" / "good" / "sibling-a.md").write_text(SIBLING_A, encoding="utf-8")
    (root / "wiki" / "good" / "sibling-b.md").write_text(SIBLING_B, encoding="utf-8")
    for name in ("sibling-a.md", "sibling-b.md"):  # older than any bad page copied beside them
        os.utime(root / "wiki" / "good" / name, (1_000_000_000, 1_000_000_000))
    (root / "artifacts" / "demo").mkdir(parents=True)
    (root / "artifacts" / "demo" / "demo.cu").write_text("// demo\n", encoding="utf-8")
    (root / "README.md").write_text("outside wiki/\n", encoding="utf-8")
    outside = root.parent / f"{root.name}-outside"
    outside.mkdir()
    (outside / "kernel.cu").write_text("// not in the repository\n", encoding="utf-8")
    (root / "artifacts" / "escape").symlink_to(outside, target_is_directory=True)
    return root


def snapshot(*dirs: Path) -> dict[str, str]:
    """Hash of every file (links followed) and the target of every link under `dirs`."""
    out = {}
    for top in dirs:
        for dirpath, dirnames, filenames in os.walk(top):
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                if path.is_symlink():
                    out[str(path)] = "link:" + os.readlink(path)
                elif path.is_file():
                    out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def wiki(tmp_path: Path) -> Path:
    return make_wiki(tmp_path / "project")


def test_fixture_corpus_is_large_and_fully_described():
    names = {p.name for p in BAD.iterdir()}
    assert len(names) >= 30
    assert names == set(EXPECTED), "every fixture needs an expectation, and every expectation a fixture"


def test_the_wiki_without_a_bad_page_is_clean(wiki: Path, capsys):
    code, out, err = run_cli(capsys, "check", "--root", str(wiki))
    assert (code, err) == (0, "")
    assert out == "kwiki check: ok: 2 pages, 0 errors, 0 warnings\n"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bad_page_is_reported_where_it_is(name: str, wiki: Path, capsys):
    shutil.copyfile(BAD / name, wiki / "wiki" / "bad" / name)
    line, field, message, *where = EXPECTED[name]
    path = where[0] if where else f"wiki/bad/{name}"
    prefix = f"{path}:{line}: {field}: " if field else f"{path}:{line}: "
    before = snapshot(wiki, wiki.parent / f"{wiki.name}-outside")
    strict = ["--strict"] if name in STRICT_ONLY else []

    code, out, err = run_cli(capsys, "check", "--root", str(wiki), *strict)
    assert code == 1, out + err
    assert "Traceback" not in out + err
    problems = [ln for ln in out.splitlines() if ln.startswith(prefix)]
    assert any(message in ln for ln in problems), f"no line starting {prefix!r} with {message!r} in:\n{out}"
    assert out.splitlines()[-1].startswith("kwiki check: FAILED: 3 pages, ")

    code, out, err = run_cli(capsys, "check", "--root", str(wiki), "--json", *strict)
    assert code == 1
    report = json.loads(out)
    assert set(report) == {"schema_version", "ok", "pages", "problems"}
    assert (report["schema_version"], report["ok"], report["pages"]) == (SCHEMA_VERSION, False, 3)
    assert all(set(p) == {"path", "line", "field", "message", "severity"} for p in report["problems"])
    assert any(
        (p["path"], p["line"], p["field"], p["severity"]) == (path, line, field, "error") and message in p["message"]
        for p in report["problems"]
    ), report["problems"]

    assert snapshot(wiki, wiki.parent / f"{wiki.name}-outside") == before


def test_only_the_bad_page_is_blamed(wiki: Path):
    """The valid siblings stay clean whatever is beside them, the page whose id a newer page took included."""
    for name in sorted(EXPECTED):
        shutil.copyfile(BAD / name, wiki / "wiki" / "bad" / name)
    report = check(wiki, strict=True)
    blamed = {p.path for p in report.problems}
    assert blamed == {f"wiki/bad/{n}" for n in EXPECTED}


def test_unknown_field_is_a_warning_without_strict(wiki: Path, capsys):
    shutil.copyfile(BAD / "unknown-field-strict.md", wiki / "wiki" / "bad" / "x.md")
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 0
    assert "wiki/bad/x.md:6: colour: unknown field (warning)" in out.splitlines()
    assert out.splitlines()[-1] == "kwiki check: ok: 3 pages, 0 errors, 1 warnings"


def test_huge_page_is_refused_without_reading_it_all(wiki: Path, capsys):
    page = wiki / "wiki" / "bad" / "huge.md"
    head = b"---\nid: huge\ntitle: Huge\ntype: technique\n---\n"
    page.write_bytes(head + b"word " * (MAX_PAGE_BYTES // 4))
    before = snapshot(wiki)
    code, out, err = run_cli(capsys, "check", "--root", str(wiki))
    assert code == 1 and "Traceback" not in out + err
    assert f"wiki/bad/huge.md:1: file is {page.stat().st_size} bytes, over the {MAX_PAGE_BYTES} byte limit" in out
    assert snapshot(wiki) == before


def test_large_page_under_the_limit_is_read(wiki: Path):
    page = wiki / "wiki" / "bad" / "large.md"
    body = "A line of text with a [link](../good/sibling-a.md).\n" * (MAX_PAGE_BYTES // 60)
    page.write_text(f"---\nid: large\ntitle: Large\ntype: technique\n---\n{body}", encoding="utf-8")
    assert page.stat().st_size < MAX_PAGE_BYTES
    report = check(wiki)
    assert report.ok and report.pages == 3


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_pipe_or_device_named_like_a_page_is_not_read(wiki: Path):
    os.mkfifo(wiki / "wiki" / "bad" / "pipe.md")  # opening it would block forever
    if os.path.exists("/dev/zero"):
        (wiki / "wiki" / "bad" / "zero.md").symlink_to("/dev/zero")  # reading it would never end
    report = check(wiki)
    assert {(p.path, p.message) for p in report.problems} >= {("wiki/bad/pipe.md", "not a regular file")}
    assert all(p.message == "not a regular file" for p in report.problems)


def test_check_json_on_a_clean_wiki(wiki: Path, capsys):
    code, out, _ = run_cli(capsys, "check", "--root", str(wiki), "--json")
    assert code == 0
    assert json.loads(out) == {"schema_version": SCHEMA_VERSION, "ok": True, "pages": 2, "problems": []}


def test_problems_are_sorted_and_unique(wiki: Path):
    for name in ("claim-duplicate-ids.md", "related-unresolved.md", "tags-not-strings.md"):
        shutil.copyfile(BAD / name, wiki / "wiki" / "bad" / name)
    problems = check(wiki).problems
    assert problems == sorted(set(problems))


# ---------------------------------------------------------------- usage errors


def test_unknown_option_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check", "--no-such-option"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_root_that_does_not_exist_is_a_usage_error(tmp_path: Path, capsys):
    code, out, err = run_cli(capsys, "check", "--root", str(tmp_path / "nowhere"))
    assert (code, out) == (2, "")
    assert err == f"kwiki check: --root {tmp_path / 'nowhere'}: no such directory\n"


def test_root_without_wiki_is_a_usage_error(tmp_path: Path, capsys):
    code, out, err = run_cli(capsys, "check", "--root", str(tmp_path))
    assert (code, out) == (2, "")
    assert "no 'wiki/' directory there" in err and "Traceback" not in err


def test_root_that_is_a_file_is_a_usage_error(tmp_path: Path, capsys):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    code, _, err = run_cli(capsys, "check", "--root", str(tmp_path / "file"))
    assert code == 2 and "no such directory" in err


# ---------------------------------------------------------------- the reference pages

REFERENCE = FIXTURES / "reference"
# ids the reference pages name that live on pages not among them
REFERENCED_IDS = ("kernel-nvfp4-gemv", "pattern-memory-bound", "tma-ptx", "wgmma-ptx", "gemm-aligned",
                  "persistent-kernel")


def reference_wiki(root: Path, transform=lambda raw: raw) -> Path:
    for src in sorted(REFERENCE.rglob("*.md")):
        dst = root / src.relative_to(REFERENCE)
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_bytes(transform(src.read_bytes()))
    for page_id in REFERENCED_IDS:
        (root / "wiki" / "stubs" / f"{page_id}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / "wiki" / "stubs" / f"{page_id}.md").write_text(
            f"---\nid: {page_id}\ntitle: {page_id}\ntype: concept\n---\nStub.\n", encoding="utf-8"
        )
    return root


def _crlf(raw: bytes) -> bytes:
    return raw.replace(b"\n", b"\r\n")


def _bom(raw: bytes) -> bytes:
    return b"\xef\xbb\xbf" + raw


def test_reference_pages_are_copies_of_the_originals():
    originals = Path("/work/shared/reference/kernelwiki-pages")
    if not originals.is_dir():
        pytest.skip("the reference pages are not on this machine")
    for ours in REFERENCE.rglob("*.md"):
        assert ours.read_bytes() == (originals / ours.relative_to(REFERENCE)).read_bytes()


@pytest.mark.parametrize("transform", [lambda raw: raw, _crlf, _bom, lambda raw: _bom(_crlf(raw))],
                         ids=["as-is", "crlf", "bom", "bom-crlf"])
def test_reference_pages_validate(tmp_path: Path, transform):
    root = reference_wiki(tmp_path, transform)
    for file in sorted(root.rglob("*.md")):
        page = load_page(file, root)
        assert page.meta is not None, page.problems
        assert [p for p in page.problems if p.severity == "error"] == []


def _reference_problems(root: Path) -> list[tuple]:
    return [(p.path, p.line, p.field, p.message, p.severity) for p in check(root).problems]


# what the replaced wiki cites that no reader can open (issue 13: a source is public or in the repository)
UNOPENABLE_SOURCES = [
    ("wiki/nvidia/techniques/vectorized-loads.md", 22, "sources[0]"),
    ("wiki/nvidia/techniques/vectorized-loads.md", 23, "sources[1]"),
    ("wiki/nvidia/techniques/vectorized-loads.md", 24, "sources[2]"),
    ("wiki/nvidia/techniques/warp-specialization/algo-warp-specialization.md", 21, "source[0].path"),
    ("wiki/nvidia/techniques/warp-specialization/algo-warp-specialization.md", 23, "source[1].path"),
    *[("wiki/nvidia/techniques/warp-specialization/algo-warp-specialization.md", 57 + 3 * i,
       f"source_refs[{i}].source_id") for i in range(6)],
    ("wiki/nvidia/techniques/warp-specialization/pitfalls.md", 22, "source[0].path"),
]


def _is_source(problem: tuple) -> bool:
    return problem[2].startswith(("sources[", "source[", "source_refs["))


def test_reference_pages_cite_sources_no_reader_can_open(tmp_path: Path):
    problems = _reference_problems(reference_wiki(tmp_path))
    assert [(p[0], p[1], p[2]) for p in problems if _is_source(p)] == UNOPENABLE_SOURCES
    assert all(p[4] == "error" for p in problems if _is_source(p))


def test_reference_pages_check_clean_apart_from_missing_artifacts(tmp_path: Path):
    problems = [p for p in _reference_problems(reference_wiki(tmp_path)) if not _is_source(p)]
    errors = [p for p in problems if p[4] == "error"]
    assert errors, "the reference pages name artifacts that do not exist here"
    for path, _, field, message, _ in errors:
        assert path == "wiki/nvidia/techniques/warp-specialization/algo-warp-specialization.md"
        assert field.startswith("artifacts.") or field == "artifact_dir"
        assert message.endswith("does not exist")
    assert [(p[1], p[2]) for p in errors] == [(26, "artifacts.code"), (27, "artifacts.build"),
                                              (28, "artifacts.introspection"), (29, "artifacts.profile"),
                                              (30, "artifacts.ablation"), (97, "artifact_dir")]
    warnings = [p for p in problems if p[4] == "warning"]
    assert [(p[1], p[2]) for p in warnings] == [(4, "evidence_level")]  # 'measured' set by hand


@pytest.mark.parametrize("transform", [_crlf, _bom, lambda raw: _bom(_crlf(raw))], ids=["crlf", "bom", "bom-crlf"])
def test_reference_pages_with_other_line_endings_give_the_same_problems(tmp_path: Path, transform):
    plain = _reference_problems(reference_wiki(tmp_path / "plain"))
    other = _reference_problems(reference_wiki(tmp_path / "other", transform))
    assert other == plain


def test_reference_pages_check_clean_once_their_artifacts_exist(tmp_path: Path):
    root = reference_wiki(tmp_path)
    for rel in ("gemm_compare_ws.cu", "build_warpspec.sh", "device.json",
                "2026-04-28-warp-specialization-ablation.csv"):
        target = root / "artifacts" / "experience" / "api-probes" / "gemm" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("x\n", encoding="utf-8")
    report = check(root)
    errors = [p for p in report.errors if not p.field.startswith(("sources[", "source[", "source_refs["))]
    assert errors == [], [p.format() for p in errors]


# ---------------------------------------------------------------- the checks, one by one


def test_inside_accepts_a_file_or_folder_in_the_repository(tmp_path: Path):
    (tmp_path / "artifacts" / "x").mkdir(parents=True)
    (tmp_path / "artifacts" / "x" / "k.cu").write_text("", encoding="utf-8")
    assert inside(tmp_path, "artifacts/x/k.cu") is None
    assert inside(tmp_path, "artifacts/x") is None
    assert inside(tmp_path, "artifacts/./x/k.cu") is None


@pytest.mark.parametrize("rel, why", [
    ("/abs/k.cu", "is an absolute path"),
    ("~/k.cu", "is an absolute path"),
    ("artifacts/../k.cu", "leaves the repository ('..')"),
    ("../k.cu", "leaves the repository ('..')"),
    ("artifacts/none.cu", "does not exist"),
])
def test_inside_refuses(tmp_path: Path, rel: str, why: str):
    (tmp_path / "k.cu").write_text("", encoding="utf-8")
    assert why in inside(tmp_path, rel)


def test_inside_refuses_links_out_broken_and_looping(tmp_path: Path):
    root = tmp_path / "repo"
    root.mkdir()
    (tmp_path / "secret").write_text("", encoding="utf-8")
    (root / "out").symlink_to(tmp_path / "secret")
    (root / "broken").symlink_to(root / "gone")
    (root / "loop").symlink_to(root / "loop")
    (root / "in").symlink_to(root / "real")
    (root / "real").write_text("", encoding="utf-8")
    assert "leads out of the repository" in inside(root, "out")
    assert "broken" in inside(root, "broken")
    assert "link" in inside(root, "loop")
    assert inside(root, "in") is None


def test_links_skip_code_fences_inline_code_and_images():
    body = "\n".join([
        "[a](a.md) and ![img](pic.png) and `[b](b.md)`",
        "```",
        "[c](c.md)",
        "```",
        "~~~",
        "[d](d.md)",
        "~~~",
        '[e](<e f.md> "title") [g](g.md#h)',
    ])
    assert list(_links(body, 10)) == [(10, "a.md"), (17, "e f.md"), (17, "g.md#h")]


def _page_with_body(root: Path, body: str):
    file = root / "wiki" / "p.md"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"---\nid: p\ntitle: P\ntype: concept\n---\n{body}", encoding="utf-8")
    return load_page(file, root)


def test_links_external_anchors_and_percent_encoding(tmp_path: Path):
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "my page.md").write_text("---\nid: q\ntitle: Q\ntype: concept\n---\n", encoding="utf-8")
    page = _page_with_body(tmp_path, "[w](https://x.org/a.md) [m](mailto:a@b.c) [s](#section) "
                                     "[q](my%20page.md#x) [q2](<my page.md>)\n")
    assert check_links(page, tmp_path) == []


@pytest.mark.parametrize("target, why", [
    ("nope.md", "leads to a file that does not exist"),
    ("%00.md", "cannot be resolved to a file"),
    ("x" * 5000 + ".md", "cannot be resolved to a file"),
], ids=["missing", "nul", "name-too-long"])
def test_links_that_do_not_lead_to_a_file(tmp_path: Path, target: str, why: str):
    page = _page_with_body(tmp_path, f"[t]({target})\n")
    problems = check_links(page, tmp_path)
    assert len(problems) == 1 and why in problems[0].message and problems[0].line == 6


def test_links_fast_path_agrees_with_resolving(tmp_path: Path):
    """A link through a symlinked folder is judged on where it leads, with or without known pages."""
    root = tmp_path / "repo"
    (root / "wiki" / "a").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "docs" / "x.md").write_text("x", encoding="utf-8")
    (root / "wiki" / "to-docs").symlink_to(root / "docs", target_is_directory=True)
    (root / "wiki" / "a" / "t.md").write_text("---\nid: t\ntitle: T\ntype: concept\n---\n", encoding="utf-8")
    page = _page_with_body(root, "[t](a/t.md) [x](to-docs/x.md) [n](a/../a/t.md)\n")
    slow = check_links(page, root)
    fast = check_links(page, root, frozenset({str(root / "wiki" / "a" / "t.md"), str(root / "wiki" / "p.md")}))
    assert slow == fast
    assert [p.message for p in slow] == [
        "link 'to-docs/x.md' leaves wiki/; the site cannot serve it (link to the source on the web or embed it)"
    ]


def test_measurements_inside_their_markers_are_accepted(tmp_path: Path):
    from kwiki.wiki.markers import checksum

    block = "measurements:\n  evidence_level: measured\n  date: '2026-01-01'\n"
    text = (f"---\nid: m\ntitle: M\ntype: concept\n# kwiki:measurements sha256={checksum(block)}\n"
            f"{block}# /kwiki:measurements\n---\nBody.\n")
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "m.md").write_text(text, encoding="utf-8")
    report = check(tmp_path)
    assert report.problems == []


def test_measurements_beside_an_empty_marker_pair_are_refused(tmp_path: Path):
    text = ("---\nid: m\ntitle: M\ntype: concept\n# kwiki:measurements\n# /kwiki:measurements\n"
            "measurements:\n  evidence_level: measured\n  date: '2026-01-01'\n---\nBody.\n")
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "m.md").write_text(text, encoding="utf-8")
    assert [(p.line, p.field) for p in check(tmp_path).problems] == [(7, "measurements")]


def test_measured_by_hand_is_a_warning_and_strict_makes_it_an_error(tmp_path: Path):
    (tmp_path / "wiki").mkdir()
    (tmp_path / "wiki" / "m.md").write_text(
        "---\nid: concept-m\ntitle: M\ntype: concept\nevidence_level: measured\n---\n", encoding="utf-8")
    assert [(p.line, p.severity) for p in check(tmp_path).problems] == [(5, "warning")]
    assert [(p.line, p.severity) for p in check(tmp_path, strict=True).problems] == [(5, "error")]


MEASURED_PAGE = """---
id: kernel-m
title: M
type: kernel
{status}artifacts:
  code: artifacts/m
{headline}claims:
  - id: cited
    statement: A blog reports 900 TFLOP/s.
    metric: throughput
    unit: TFLOP/s
    value: 900
    evidence: source-reported
    source: blog
  - id: measured
    statement: The kernel reaches 800 TFLOP/s.
    metric: throughput
    unit: TFLOP/s
    at_least: 800
    measure: {{artifact: code, of: {{variant: v, figure: tflop_per_s}}}}
---
Body.
"""


@pytest.mark.parametrize(("front", "expected"), [
    ({}, [(7, "names no headline")]),  # at `claims:`
    ({"headline": "headline: cited\n"}, [(7, "headline 'cited' is a claim kwiki does not measure")]),
    ({"headline": "headline: measured\n"}, []),
    ({"status": "status: draft\n"}, []),  # a draft is left out of the site: no answer box to fill
])
def test_a_page_whose_claims_are_measured_names_a_measured_headline_under_strict(tmp_path: Path, front, expected):
    (tmp_path / "wiki").mkdir()
    page = MEASURED_PAGE.format(status=front.get("status", ""), headline=front.get("headline", ""))
    (tmp_path / "wiki" / "m.md").write_text(page, encoding="utf-8")
    found = [p for p in check(tmp_path, strict=True).problems if p.field == "headline"]
    assert [(p.line, p.severity) for p in found] == [(line, "error") for line, _ in expected]
    assert all(part in p.message for p, (_, part) in zip(found, expected, strict=True))
    assert [p for p in check(tmp_path).problems if p.field == "headline"] == []  # like the id convention


# ---------------------------------------------------------------- fuzzing real pages

_REFERENCE_PAGES = sorted(p.read_bytes() for p in REFERENCE.rglob("*.md"))
_EDIT = st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.floats(0, 1),
                  st.sampled_from([b"", b"\n", b"\r\n", b":", b"- ", b"  ", b"[", b"{", b"&a ", b"*a", b"<<: ",
                                   b"!!python/tuple ", b"\xff", b"\x00", b"\xef\xbb\xbf", b"---\n",
                                   b"<!-- kwiki:claims -->", b"](../x.md)", b"sm_42", b"'", b'"', b"#", b"\t",
                                   b"\xe2\x80\xa8"]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(_REFERENCE_PAGES))), st.lists(_EDIT, min_size=1, max_size=6))
def test_mangled_reference_pages_give_located_problems_never_exceptions(which: int, edits):
    raw = bytearray(_REFERENCE_PAGES[which])
    for op, where, chunk in edits:
        at = int(where * len(raw))
        if op == "insert":
            raw[at:at] = chunk
        elif op == "delete":
            del raw[at:at + max(1, len(chunk))]
        else:
            raw[at:at + len(chunk)] = chunk
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "wiki").mkdir()
        (root / "wiki" / "page.md").write_bytes(bytes(raw))
        report = check(root)
        assert (root / "wiki" / "page.md").read_bytes() == bytes(raw)
    lines = bytes(raw).replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1
    for p in report.problems:
        assert p.path == "wiki/page.md" and 0 <= p.line <= lines, p


# ---------------------------------------------------------------- page id convention


def test_an_id_without_its_type_prefix_is_a_located_error_under_strict(wiki: Path):
    (wiki / "wiki" / "good" / "loose.md").write_text(
        "---\nid: persistent-kernel\ntitle: Loose\ntype: technique\n---\nBody.\n", encoding="utf-8")
    report = check(wiki, strict=True)
    found = sorted((p.path, p.line, p.field, p.severity) for p in report.problems)
    assert found == [("wiki/good/loose.md", 2, "id", "error")]
    loose = next(p for p in report.problems if p.path == "wiki/good/loose.md")
    assert "'<type>-<slug>'" in loose.message and "'technique-persistent-kernel'" in loose.message
    assert check(wiki).problems == []  # without --strict the convention is not checked


def test_the_wikis_home_page_is_the_one_exemption(wiki: Path):
    home = "---\nid: home\ntitle: Home\ntype: guide\n---\nWelcome.\n"
    (wiki / "wiki" / "index.md").write_text(home, encoding="utf-8")
    (wiki / "wiki" / "good" / "index.md").write_text(home.replace("id: home", "id: section-home"), encoding="utf-8")
    assert [(p.path, p.field) for p in check(wiki, strict=True).problems] == [("wiki/good/index.md", "id")]
