"""Generated regions: render, scan and replace round-trip; hand edits and broken markers are caught."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwiki.core.errors import MarkerError
from kwiki.wiki.markers import KNOWN_REGIONS, _commonmark_code, checksum, code_lines, render, replace, scan

TABLE = "| claim | value |\n| --- | --- |\n| c1 | 22.4 us |\n"


def page(*middle: str) -> str:
    return "\n".join(["# Title", "", "Intro.", "", *middle, "", "Outro."])


def test_render_then_scan_is_sealed_and_unedited():
    text = page(render("claims", TABLE).rstrip("\n"))
    [region] = scan(text)
    assert (region.name, region.open_line, region.close_line) == ("claims", 5, 9)
    assert region.content == TABLE and region.sealed == checksum(TABLE) and not region.edited


def test_render_adds_the_final_newline():
    assert render("status", "x") == render("status", "x\n")
    assert render("status", "").endswith("<!-- /kwiki:status -->\n")
    assert not scan(render("status", ""))[0].edited


def test_any_edit_inside_a_sealed_region_shows():
    sealed = render("claims", TABLE)
    edits = (sealed.replace("22.4", "12.4"), sealed.replace("| c1", "|  c1"), sealed.replace(TABLE, TABLE + "\n"))
    for edited in edits:
        assert scan(edited)[0].edited


def test_placeholder_pair_is_not_an_edit_unless_filled():
    assert not scan("<!-- kwiki:chart -->\n<!-- /kwiki:chart -->\n")[0].edited
    assert not scan("<!-- kwiki:chart -->\n\n<!-- /kwiki:chart -->\n")[0].edited
    assert scan("<!-- kwiki:chart -->\nhand-written\n<!-- /kwiki:chart -->\n")[0].edited


def test_replace_round_trip_changes_only_the_region():
    text = page(render("claims", TABLE).rstrip("\n"), "", render("status", "old").rstrip("\n"))
    new = replace(text, "claims", "| claim | value |\n| c1 | 20 us |\n")
    assert new is not None
    regions = {r.name: r for r in scan(new)}
    assert regions["claims"].content == "| claim | value |\n| c1 | 20 us |\n" and not regions["claims"].edited
    assert regions["status"].content == "old\n"
    before, after = text.split("<!-- kwiki:claims")[0], text.split("<!-- /kwiki:claims -->")[1]
    assert new.startswith(before) and new.endswith(after)
    assert replace(new, "claims", TABLE) == text  # and back


def test_replace_fills_a_placeholder_and_returns_none_when_absent():
    text = page("<!-- kwiki:ladder -->", "<!-- /kwiki:ladder -->")
    filled = replace(text, "ladder", "rung\n")
    assert filled == page(render("ladder", "rung").rstrip("\n"))
    assert replace(text, "chart", "x") is None


def test_yaml_regions():
    block = "measurements:\n  evidence_level: measured\n  date: '2026-01-01'\n"
    text = "id: p\n" + render("measurements", block, yaml=True) + "title: T\n"
    [region] = scan(text, yaml=True, first_line=2)
    assert (region.open_line, region.close_line, region.edited) == (3, 7, False)
    assert scan(text.replace("measured", "verified"), yaml=True)[0].edited
    assert replace(text, "measurements", block.replace("measured", "verified"), yaml=True).count("verified") == 1


def test_markers_in_code_fences_are_examples_not_regions():
    text = page("```", "<!-- kwiki:weather -->", "```", "~~~", "<!-- /kwiki:claims -->", "~~~")
    assert scan(text) == []


# ---------------------------------------------------------------- fences as Markdown reads them


@pytest.mark.parametrize("lines, code", [
    # a fence closes only with the same character, at least as many: '```' inside '````' is code
    (["````", "```", "x", "```", "````", "after"], [1, 1, 1, 1, 1, 0]),
    (["```", "`````", "after"], [1, 1, 0]),
    (["~~~", "```", "x", "~~~", "after"], [1, 1, 1, 1, 0]),
    (["~~~~", "~~~", "~~~~ ", "after"], [1, 1, 1, 0]),
    # up to 3 spaces of indentation, on either fence; 4 make an indented code block, not a fence
    (["   ```", "x", "  ```", "after"], [1, 1, 1, 0]),
    (["    ```", "x", "    ```"], [0, 0, 0]),
    (["```", "x", "    ```", "y", "```", "after"], [1, 1, 1, 1, 1, 0]),
    # a closing fence has nothing after it; a backtick fence's info string has no backtick
    (["```", "``` x", "```", "after"], [1, 1, 1, 0]),
    (["``` a`b", "x", "``"], [0, 0, 0]),
    (["~~~ a`b", "x", "~~~"], [1, 1, 1]),
    # an unclosed fence runs to the end
    (["text", "```", "x", "y"], [0, 1, 1, 1]),
])
def test_commonmark_fences(lines, code):
    assert _commonmark_code(lines) == [bool(c) for c in code]


def test_markers_in_a_four_backtick_fence_stay_examples_past_a_three_backtick_line():
    text = page("````markdown", "```", "<!-- kwiki:weather -->", "```", "<!-- /kwiki:claims -->", "````")
    assert scan(text) == []


@pytest.mark.parametrize("middle", [
    ["````", "```", "````"],  # '````' ends the fence: the region after it is shown, so it is read
    ["```"],  # an unclosed fence: the site's renderer shows what follows as text
    ["  ```", "x"],  # the renderer drops a fence whose lines lose its indentation
    ["```", "````"],  # '````' does not close '```' for the renderer, which then drops the unclosed fence
    ["```py title=\"a\"", "```"],  # options kwiki cannot validate: fences are not trusted from here on
    ["> ```", "> x", "> ```"],  # a fence in a quote
])
def test_a_region_that_any_renderer_shows_is_read(middle):
    sealed = render("claims", TABLE).rstrip("\n")
    [region] = scan(page(*middle, sealed.replace("22.4", "12.4")))
    assert region.name == "claims" and region.edited


_SITE_EXTENSIONS = ["admonition", "attr_list", "md_in_html", "tables", "toc", "pymdownx.details",
                    "pymdownx.superfences", "pymdownx.highlight"]
_PIECES = ["```", "````", "~~~", "~~~~", "`````", "``` python", "```py title=\"x\"", "``` {.c}", "``` a`b", "```x y",
           "", "word"]
_PREFIXES = ["", " ", "  ", "   ", "    ", "\t", "> ", ">", " > "]


@pytest.mark.parametrize("lines, code", [
    # a block opening with an indented code line: its processor restores the fences stashed in the block
    (["    ``` a`b", "```", "x", "```"], [0, 0, 0, 0]),
    (["    word", "```", "x", "```"], [0, 0, 0, 0]),
    (["    word", "```", "x", "```", "```", "y", "```"], [0, 0, 0, 0, 0, 0, 0]),
    (["    ", "```", "x", "```"], [0, 0, 0, 0]),  # a first line of spaces is not blanked
    # a blank line (spaces only, past the first line) ends that block: the next fence is code
    (["    word", "", "```", "x", "```"], [0, 0, 1, 1, 1]),
    (["    word", "  ", "```", "x", "```"], [0, 0, 1, 1, 1]),
    (["text", "```", "x", "```"], [0, 1, 1, 1]),  # a paragraph keeps its fence
    (["```", "", "    x", "```", "    y"], [1, 1, 1, 1, 0]),  # a blank line inside a fence is the fence's
])
def test_fences_in_a_block_that_opens_indented_are_not_code(lines, code):
    assert code_lines(lines) == [bool(c) for c in code]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_PREFIXES), st.sampled_from(_PIECES)), min_size=1, max_size=10))
def test_a_line_kwiki_takes_for_code_is_code_on_the_site(parts):
    """Against the renderer itself: whatever `code_lines` skips, Python-Markdown with the site's
    extensions puts in a code block (the converse need not hold: kwiki may read more)."""
    markdown = pytest.importorskip("markdown")
    pytest.importorskip("pymdownx.superfences")
    lines = [prefix + (f"tok{i}x" if piece == "word" else piece) for i, (prefix, piece) in enumerate(parts)]
    html = markdown.markdown("\n".join(lines) + "\n", extensions=_SITE_EXTENSIONS)
    blocks = " ".join(re.findall(r"<pre.*?</pre>", html, re.S))
    for line, code in zip(lines, code_lines(lines), strict=True):
        token = re.search(r"tok\d+x", line)
        if code and token:
            assert token.group(0) in blocks, (lines, html)


def test_body_markers_are_ignored_in_yaml_and_yaml_markers_in_the_body():
    assert scan("# kwiki:claims\n", yaml=False) == []
    assert scan("<!-- kwiki:claims -->\n", yaml=True) == []


@pytest.mark.parametrize("text, line, message", [
    ("a\n<!-- kwiki:weather -->\n<!-- /kwiki:weather -->", 2, "unknown generated region 'kwiki:weather'"),
    ("a\n<!-- kwiki:claims -->\nx", 2, "region 'kwiki:claims' is never closed"),
    ("a\nb\n<!-- /kwiki:claims -->", 3, "closes a region that was never opened"),
    ("<!-- kwiki:claims -->\n<!-- kwiki:status -->", 2, "opens inside 'kwiki:claims'"),
    ("<!-- kwiki:claims -->\n<!-- /kwiki:status -->", 2, "'/kwiki:status' closes region 'kwiki:claims'"),
    ("<!-- kwiki:claims sha256=XYZ -->\n<!-- /kwiki:claims -->", 1, "malformed kwiki marker"),
    ("text <!-- kwiki:claims --> inline", 1, "malformed kwiki marker"),
    ("<!--kwiki:Claims-->", 1, "malformed kwiki marker"),
    ("<!-- kwiki:claims -->\n<!-- /kwiki:claims -->\n<!-- kwiki:claims -->\n<!-- /kwiki:claims -->", 3,
     "appears more than once"),
])
def test_broken_body_markers(text: str, line: int, message: str):
    with pytest.raises(MarkerError) as exc:
        scan(text, first_line=1)
    assert exc.value.line == line and message in exc.value.message


@pytest.mark.parametrize("text, line, message", [
    ("a: 1\n# kwiki:weather\n# /kwiki:weather\n", 12, "unknown generated region"),
    ("a: 1\n# kwiki:measurements\n", 12, "never closed"),
    ("a: 1\n  # kwiki:measurements\n", 12, "malformed kwiki marker"),
    ("a: 1\n# kwiki:measurements sha256=nothex\n# /kwiki:measurements\n", 12, "malformed kwiki marker"),
])
def test_broken_yaml_markers(text: str, line: int, message: str):
    with pytest.raises(MarkerError) as exc:
        scan(text, yaml=True, first_line=11)
    assert exc.value.line == line and message in exc.value.message


def test_line_offset():
    [region] = scan(render("history", "h"), first_line=40)
    assert (region.open_line, region.close_line) == (40, 42)


def test_text_without_markers_is_fast_path_and_empty():
    assert scan("no markers here\n" * 1000) == []


_LINE = st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=30).filter(
    lambda s: "kwiki:" not in s)


@settings(max_examples=200, deadline=None)
@given(st.lists(_LINE, max_size=8), st.sampled_from(sorted(KNOWN_REGIONS)), st.lists(_LINE, max_size=4))
def test_any_content_round_trips(content_lines, name, around):
    content = "".join(line + "\n" for line in content_lines)
    text = "\n".join([*around, "<!-- kwiki:" + name + " -->", "<!-- /kwiki:" + name + " -->", *around])
    if any(line.lstrip().startswith(("```", "~~~")) for line in around):
        return  # a fence in the surrounding text may hide the markers, as intended
    new = replace(text, name, content)
    [region] = scan(new)
    assert region.content == content and not region.edited
