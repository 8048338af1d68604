"""The front-matter parser: lines for every field, refusals with locations, and no other exception."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from kwiki.core.errors import FrontMatterError
from kwiki.wiki.frontmatter import MAX_DEPTH, MAX_PAGE_BYTES, decode, field_name, parse_page, parse_yaml, split

PAGE = """---
id: p
title: A page
tags:
- gemm
- tma
claims:
- id: c1
  conditions: {gpu: H200, arch: sm_90a}
---
# Body
"""


def error(raw: bytes | str) -> FrontMatterError:
    with pytest.raises(FrontMatterError) as exc:
        parse_page(raw.encode("utf-8") if isinstance(raw, str) else raw)
    return exc.value


# ---------------------------------------------------------------- what it reads


def test_fields_and_their_lines():
    fm = parse_page(PAGE.encode())
    assert fm.data == {
        "id": "p",
        "title": "A page",
        "tags": ["gemm", "tma"],
        "claims": [{"id": "c1", "conditions": {"gpu": "H200", "arch": "sm_90a"}}],
    }
    assert fm.line_of(("id",)) == 2
    assert fm.line_of(("tags",)) == 4
    assert fm.line_of(("tags", 1)) == 6
    assert fm.line_of(("claims", 0)) == 8
    assert fm.line_of(("claims", 0, "conditions", "arch")) == 9
    assert fm.line_of(("claims", 0, "not-there")) == 8  # deepest known prefix
    assert fm.line_of(("nothing",)) == 1  # else the opening delimiter
    assert (fm.end_line, fm.body, fm.body_line) == (10, "# Body\n", 11)


def test_every_list_item_and_value_has_its_line_however_written():
    text = "---\na: 'q'\nb:\n- 'x'\n- \"y\"\n- plain\n- |\n  block\n- 5\n- !!str 6\n- [in, flow]\nc: !!str 7\n---\n"
    fm = parse_page(text.encode())
    assert fm.data == {"a": "q", "b": ["x", "y", "plain", "block\n", 5, "6", ["in", "flow"]], "c": "7"}
    assert [fm.lines[("b", i)] for i in range(7)] == [4, 5, 6, 7, 9, 10, 11]
    assert (fm.lines[("a",)], fm.lines[("c",)], fm.lines[("b", 6, 1)]) == (2, 12, 11)
    for _ in range(2):  # the second time, plain values come from the cache
        assert parse_page(text.encode()).lines == fm.lines


def test_crlf_and_bom_give_the_same_data_and_lines():
    plain = parse_page(PAGE.encode())
    for raw in (PAGE.replace("\n", "\r\n").encode(), b"\xef\xbb\xbf" + PAGE.encode(),
                b"\xef\xbb\xbf" + PAGE.replace("\n", "\r\n").encode()):
        other = parse_page(raw)
        assert (other.data, other.lines, other.body, other.body_line) == (plain.data, plain.lines, plain.body,
                                                                          plain.body_line)
    assert parse_page(PAGE.replace("\n", "\r\n").encode()).newline == "\r\n"
    assert parse_page(b"\xef\xbb\xbf" + PAGE.encode()).bom is True


def test_scalars_are_plain_python_values():
    fm = parse_page(b"---\na: 1\nb: 1.5\nc: true\nd: ~\ne: '1'\nf: 2024-05-01\ng: 2024-05-01 10:00:00\n"
                    b"h: |\n  x\n---\n")
    assert fm.data == {"a": 1, "b": 1.5, "c": True, "d": None, "e": "1", "f": "2024-05-01",
                       "g": "2024-05-01T10:00:00", "h": "x\n"}


def test_keys_are_the_text_written():
    assert parse_page(b"---\n1: a\ntrue: b\nnull: c\n---\n").data == {"1": "a", "true": "b", "null": "c"}


def test_anchor_without_alias_is_harmless():
    assert parse_page(b"---\na: &x 1\n---\n").data == {"a": 1}


def test_closing_with_dots_and_trailing_spaces():
    assert parse_page(b"---\na: 1\n...\nbody").body == "body"
    assert parse_page(b"--- \na: 1\n---  \nbody").body == "body"


def test_nel_and_line_separators_do_not_shift_lines():
    # YAML counts NEL, LS and PS as line breaks; a page's lines are counted by '\n' only
    fm = parse_page("---\na: 'x\u2028y'\nb: 'p\x85q'\nc: 1\n---\n".encode())
    assert fm.line_of(("c",)) == 4
    assert error("---\na: 'x\u2028y\u2029z'\nb: [\n---\n").line in (3, 4)


# ---------------------------------------------------------------- what it refuses, and where


@pytest.mark.parametrize("raw, line, field, message", [
    (b"", 1, "", "empty page"),
    (b" \n\t\n", 1, "", "empty page"),
    (b"title: x\n", 1, "", "no front matter"),
    (b"---\na: 1\n", 1, "", "unterminated front matter"),
    (b"---\n---\n", 1, "", "empty front matter"),
    (b"---\n# only a comment\n---\n", 1, "", "empty front matter"),
    (b"---\n- a\n---\n", 2, "", "not a list"),
    (b"---\n42\n---\n", 2, "", "not a int"),
    (b"---\na: 1\nb: [\n---\n", 4, "", "invalid YAML"),
    (b"---\na: 1\nb: \xff\n---\n", 3, "", "not UTF-8: byte 0xff"),
    (b"---\na: 1\n---\n\x00", 4, "", "NUL byte"),
    (b"---\na: 1\nb: x\x01\n---\n", 3, "", "control characters are not allowed"),
    (b"---\na: &x 1\nb: *x\n---\n", 3, "b", "aliases"),
    (b"---\na: &x {k: 1}\nb:\n  <<: *x\n---\n", 4, "b", "merge keys"),
    (b"---\na: 1\nb: 2\na: 3\n---\n", 4, "a", "duplicate key 'a' (first defined on line 2)"),
    (b"---\nc:\n  k: 1\n  k: 2\n---\n", 4, "c.k", "duplicate key 'k'"),
    (b"---\n? {a: 1}\n: x\n---\n", 2, "", "a key must be a plain string"),
    (b"---\n!!binary a: x\n---\n", 2, "", "unsupported YAML tag"),
    (b"---\na: !!python/name:os.system\n---\n", 2, "a", "unsupported YAML tag"),
    (b"---\na: !!set {x, y}\n---\n", 2, "a", "unsupported YAML tag 'tag:yaml.org,2002:set'"),
    (b"---\na: !local [1]\n---\n", 2, "a", "unsupported YAML tag '!local'"),
    (b"---\na: .inf\n---\n", 2, "a", "not a finite number"),
    (b"---\na: [1, -.inf]\n---\n", 2, "a[1]", "not a finite number"),
    (b"---\na: .NaN\n---\n", 2, "a", "not a finite number"),
    (b"---\na: 2024-13-45\n---\n", 2, "a", "cannot read '2024-13-45' as timestamp"),
    (b"---\na: !!int\n---\n", 2, "a", "cannot read '' as int"),
    (b"---\na: !!bool maybe\n---\n", 2, "a", "cannot read 'maybe' as bool"),
    (b"---\na: !!timestamp soon\n---\n", 2, "a", "cannot read 'soon' as timestamp"),
    (b"---\na: 1\n--- {b: 2}\n---\n", 3, "", "more than one YAML document"),
])
def test_refusals_are_located(raw: bytes, line: int, field: str, message: str):
    exc = error(raw)
    assert (exc.line, exc.field) == (line, field)
    assert message in exc.message


def test_nesting_is_limited_without_recursion():
    deep = "---\na: " + "[" * 200_000 + "]" * 200_000 + "\n---\n"  # crashed libyaml's composer
    exc = error(deep)
    # our own limit, or (PyYAML >= 6.0.4) libyaml's parser limit: either way one located error
    assert exc.line == 2
    assert f"nested more than {MAX_DEPTH} levels deep" in exc.message or "maximum nesting depth" in exc.message
    block = "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 5)) + "---\n"
    assert "nested more than" in error(block).message
    ok = "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(MAX_DEPTH - 1)) + "---\n"
    assert parse_page(ok.encode()).data["k0"] is not None


def test_alias_bomb_is_refused_at_the_first_alias():
    levels = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 30)]
    exc = error("---\n" + "\n".join(levels) + "\n---\n")
    assert (exc.line, exc.field) == (3, "a1[0]")


def test_size_limit():
    exc = error(b"---\na: 1\n---\n" + b"x" * MAX_PAGE_BYTES)
    assert exc.line == 1 and "byte limit" in exc.message


def test_decode_and_split_pieces():
    assert decode(b"a\r\nb\rc") == ("a\nb\nc", "\r\n", False)
    assert decode(b"\xef\xbb\xbfa\n") == ("a\n", "\n", True)
    assert split("---\na: 1\n---\nbody\n") == ("a: 1\n", 3, "body\n", 4)
    assert split("---\n---\n") == ("", 2, "", 3)


def test_parse_yaml_offsets_lines_and_accepts_any_root():
    data, lines = parse_yaml("a:\n  - x\n", first_line=10)
    assert data == {"a": ["x"]} and lines[("a", 0)] == 11
    assert parse_yaml("")[0] is None
    assert parse_yaml("[1, 2]")[0] == [1, 2]


def test_field_name():
    assert field_name(()) == ""
    assert field_name(("claims", 0, "measure", "artifact")) == "claims[0].measure.artifact"
    assert field_name((0, "a")) == "[0].a"


# ---------------------------------------------------------------- properties

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _lines_in_range(raw: bytes, exc: FrontMatterError) -> None:
    count = max(1, raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1)
    assert 1 <= exc.line <= count, (exc.line, count)


@SETTINGS
@given(st.binary(max_size=400))
def test_any_bytes_parse_or_raise_a_located_front_matter_error(raw: bytes):
    try:
        parse_page(raw)
    except FrontMatterError as exc:
        _lines_in_range(raw, exc)


@SETTINGS
@given(st.text(max_size=300))
def test_any_text_after_the_delimiter_parses_or_raises_a_located_error(text: str):
    raw = ("---\n" + text + "\n---\nbody\n").encode("utf-8", "surrogatepass")
    try:
        parse_page(raw)
    except FrontMatterError as exc:
        _lines_in_range(raw, exc)


# YAML-looking text: keys, indentation, flow collections, anchors, aliases, tags, quotes, comments
_TOKENS = st.sampled_from([
    "a", "b", "id", "tags", "- ", "  ", "    ", ": ", ":", "\n", "[", "]", "{", "}", ", ", "&x ", "*x", "<<: ",
    "!!str ", "!!int ", "!!python/tuple ", "!x ", "'q'", '"d\\n"', "|\n  ", ">-\n  ", "# c", "? ", "~", "1.5",
    ".nan", "0x1F", "2024-01-02", "true", "---", "...", "\t", "%YAML 1.1\n", "\u2028", "\x85", "é",
])


@st.composite
def yaml_like(draw) -> str:
    return "".join(draw(st.lists(_TOKENS, max_size=40)))


@SETTINGS
@given(yaml_like())
def test_yaml_like_text_parses_or_raises_a_located_error(text: str):
    raw = ("---\n" + text + "\n---\n").encode()
    try:
        parse_page(raw)
    except FrontMatterError as exc:
        _lines_in_range(raw, exc)


def _plain(value):
    """What our parser makes of what PyYAML constructs: dates as ISO text."""
    import datetime as dt

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


@SETTINGS
@given(yaml_like())
def test_what_it_accepts_it_reads_as_yaml_does(text: str):
    try:
        ours, _ = parse_yaml(text)
    except FrontMatterError:
        return
    try:
        theirs = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (yaml.YAMLError, ValueError, IndexError, KeyError, AttributeError, TypeError):
        return  # PyYAML fails where we read keys as text ('? !!int ' crashes its int constructor)
    if not _string_keys(theirs):  # keys are read as the text written ('1: x' has the key '1')
        return
    assert ours == _plain(theirs)


def _string_keys(value) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _string_keys(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_string_keys(v) for v in value)
    return True


_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=8)
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20)
_DATA = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=4),
                     max_leaves=20)


@SETTINGS
@given(st.dictionaries(_KEYS, _DATA, min_size=1, max_size=6), st.booleans())
def test_dumped_data_round_trips(data: dict, flow: bool):
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=True, sort_keys=False)
    assume("\n---" not in "\n" + text and "\n..." not in "\n" + text)  # would close the front matter
    fm = parse_page(("---\n" + text + "---\nbody").encode())
    assert fm.data == data
    assert set(fm.lines) == set(_paths(data))  # every field and item has its line
    assert all(2 <= line <= text.count("\n") + 1 for line in fm.lines.values())


def _paths(value, path=()):
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from _paths(item, (*path, key))


def test_nan_never_leaks():
    for raw in (b"---\na: .nan\n---\n", b"---\na: [.NAN]\n---\n"):
        with pytest.raises(FrontMatterError):
            parse_page(raw)
    assert math.isfinite(parse_page(b"---\na: 1.0e+300\n---\n").data["a"])
