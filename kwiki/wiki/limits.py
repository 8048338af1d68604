"""What one page may hold so that building the site stays cheap: headings and nesting, bounded.

Material's search plugin looks every section's heading up in the page's table of contents one by one, so
its cost grows with the square of a page's headings (50,000 headings: over 300 s), and the Markdown and
HTML passes recurse with a page's nesting (100,000 nested divs: over 300 s). `kwiki check` refuses a page
past these limits, so the strict build does; `kwiki serve` leaves such a page out.

Standard library only (`kwiki check` imports it).
"""

from __future__ import annotations

import re

from kwiki.wiki.markers import code_lines

MAX_HEADINGS = 1000  # per page: ATX, setext and HTML <h1>-<h6>
MAX_NESTING = 100  # levels of nested HTML elements, and of nested blockquotes (`>`), in a page's body
_ATX = re.compile(r" {0,3}#{1,6}(?:[ \t]|$)")
_SETEXT = re.compile(r" {0,3}(?:=+|-+)[ \t]*$")
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)\b(?:[^<>\"']|\"[^\"]*\"|'[^']*')*?(/?)>")
_HTML_HEADING = re.compile(r"h[1-6]", re.IGNORECASE)
_QUOTE = re.compile(r" {0,3}((?:>[ \t]?)+)")
VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                  "wbr", "param"})
IMPLIED = frozenset({"p", "li", "dt", "dd", "tr", "td", "th", "option"})


def _tags(text: str, starts: list[int]) -> tuple[int, int, int]:
    """(HTML headings, deepest nesting of elements, its line) in `text` (code blanked); `starts`: each line's offset."""
    import bisect

    headings, deepest, deepest_at = 0, 0, 0
    stack: list[str] = []
    for m in _TAG.finditer(text):
        closing, name, self_closing = m.group(1), m.group(2).lower(), m.group(3)
        if _HTML_HEADING.fullmatch(name) and not closing:
            headings += 1
        if name in VOID or self_closing:
            continue
        if not closing:
            if name in IMPLIED and stack and stack[-1] == name:
                stack.pop()  # `<li>` after an unclosed `<li>` closes it, as a browser reads it
            stack.append(name)
            if len(stack) > deepest:
                deepest, deepest_at = len(stack), bisect.bisect_right(starts, m.start())
        elif name in stack[-MAX_NESTING - 1:]:  # close the innermost open one (a bounded look back)
            while stack and stack.pop() != name:
                pass
    return headings, deepest, deepest_at


def limit_problems(body: str) -> list[tuple[int, str, str]]:
    """(line in the body, 1-based; field; message) for each limit the page's body passes: its heading count and
    its deepest nesting. Linear in the body's length."""
    lines = body.split("\n")
    code = code_lines(lines)
    headings, deepest, deepest_at = 0, 0, 0
    previous = ""
    for i, line in enumerate(lines):
        if code[i]:
            previous = ""
            continue
        if _ATX.match(line) or (previous.strip() and _SETEXT.match(line) and not _ATX.match(previous)):
            headings += 1
        quote = _QUOTE.match(line)
        if quote and quote.group(1).count(">") > deepest:
            deepest, deepest_at = quote.group(1).count(">"), i + 1
        previous = line
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    html, nested, nested_at = _tags("\n".join("" if code[i] else line for i, line in enumerate(lines)), starts)
    headings += html
    if nested > deepest:
        deepest, deepest_at = nested, nested_at
    out = []
    if headings > MAX_HEADINGS:
        out.append((1, "body", f"{headings} headings, over the limit of {MAX_HEADINGS} per page (split the page)"))
    if deepest > MAX_NESTING:
        out.append((deepest_at, "body", f"nested {deepest} levels deep, over the limit of {MAX_NESTING} (HTML "
                                        "elements or blockquotes)"))
    return out
