"""Loading one page: validation errors become problems that name the field and its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kwiki.wiki.pages import load_page


def load(tmp_path: Path, front: str, body: str = "Body.\n", strict: bool = False):
    file = tmp_path / "wiki" / "p.md"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(f"---\n{front}---\n{body}", encoding="utf-8")
    return load_page(file, tmp_path, strict)


def located(page) -> list[tuple[int, str, str]]:
    return [(p.line, p.field, p.severity) for p in page.problems]


def test_valid_page(tmp_path: Path):
    page = load(tmp_path, "id: p\ntitle: P\ntype: concept\n")
    assert page.meta is not None and page.problems == [] and page.id == "p" and page.path == "wiki/p.md"


def test_missing_nested_field_is_named(tmp_path: Path):
    page = load(tmp_path, "id: p\ntitle: P\ntype: concept\nclaims:\n- id: c\n  unit: us\n  value: 1\n")
    assert (6, "claims[0].statement", "error") in located(page)
    assert (6, "claims[0].metric", "error") in located(page)
    assert all(p.message == "required field is missing" for p in page.problems)


def test_missing_top_level_fields(tmp_path: Path):
    page = load(tmp_path, "summary: no id, title or type\n")
    assert sorted(p.field for p in page.problems) == ["id", "title", "type"]
    assert {p.line for p in page.problems} == {1}


def test_union_member_errors_keep_the_data_path(tmp_path: Path):
    page = load(tmp_path, "id: p\ntitle: P\ntype: concept\nsources:\n- title: no id\n")
    fields = {p.field for p in page.problems}
    assert "sources[0].id" in fields
    assert all(p.line == 6 for p in page.problems)


def test_nested_type_error_points_at_its_line(tmp_path: Path):
    page = load(tmp_path, "id: p\ntitle: P\ntype: concept\nclaims:\n- id: c\n  statement: S\n  metric: time\n"
                          "  unit: us\n  value: fast\n")
    assert located(page) == [(10, "claims[0].value", "error")]


def test_unknown_fields_warn_or_fail(tmp_path: Path):
    assert located(load(tmp_path, "id: p\ntitle: P\ntype: concept\nfoo: 1\n")) == [(5, "foo", "warning")]
    assert located(load(tmp_path, "id: p\ntitle: P\ntype: concept\nfoo: 1\n", strict=True)) == [(5, "foo", "error")]


def test_front_matter_error_keeps_its_field(tmp_path: Path):
    page = load(tmp_path, "id: p\ntitle: P\ntype: concept\ntitle: Q\n")
    assert located(page) == [(5, "title", "error")] and page.meta is None


def test_marker_error_is_a_problem_after_validation(tmp_path: Path):
    page = load(tmp_path, "id: p\ntitle: P\ntype: concept\n", "x\n<!-- kwiki:nope -->\n")
    assert page.meta is not None
    assert located(page) == [(7, "kwiki-marker", "error")]


def test_unreadable_page(tmp_path: Path):
    file = tmp_path / "wiki" / "dir.md"
    file.mkdir(parents=True)
    page = load_page(file, tmp_path)
    assert [(p.line, p.message) for p in page.problems] == [(0, "not a regular file")]
    page = load_page(tmp_path / "wiki" / "gone.md", tmp_path)
    assert page.problems[0].message.startswith("cannot read file")


@pytest.mark.parametrize("raw", [b"\xef\xbb\xbf---\r\nid: p\r\ntitle: P\r\ntype: concept\r\ntags: 5\r\n---\r\n"])
def test_bom_and_crlf_lines(tmp_path: Path, raw: bytes):
    file = tmp_path / "p.md"
    file.write_bytes(raw)
    assert located(load_page(file, tmp_path)) == [(5, "tags", "error")]
