"""Regions of a page that kwiki generates, fenced by markers and sealed by a checksum.

In the Markdown body::

    <!-- kwiki:claims sha256=0123456789abcdef -->
    ...generated Markdown...
    <!-- /kwiki:claims -->

In the YAML front matter (comments, so the YAML stays valid)::

    # kwiki:measurements sha256=0123456789abcdef
    measurements:
      ...
    # /kwiki:measurements

An author may place an empty pair (no checksum) to choose where a region goes. Any other
change inside a sealed region shows as a checksum mismatch, which `kwiki check` reports.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from kwiki.core.errors import MarkerError

# region names kwiki writes; anything else between kwiki markers is an error
KNOWN_REGIONS = frozenset(
    {"measurements", "status", "claims", "ladder", "chart", "history", "environment", "artifact", "registers"}
)

_BODY_OPEN = re.compile(r"^\s*<!--\s*kwiki:([a-z0-9-]+)(?:\s+sha256=([0-9a-f]*))?\s*-->\s*$")
_BODY_CLOSE = re.compile(r"^\s*<!--\s*/kwiki:([a-z0-9-]+)\s*-->\s*$")
_YAML_OPEN = re.compile(r"^#\s*kwiki:([a-z0-9-]+)(?:\s+sha256=([0-9a-f]*))?\s*$")
_YAML_CLOSE = re.compile(r"^#\s*/kwiki:([a-z0-9-]+)\s*$")
_ANY_BODY = re.compile(r"<!--\s*/?kwiki:")
_ANY_YAML = re.compile(r"^\s*#\s*/?kwiki:")


def checksum(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Region:
    name: str
    open_line: int  # 1-based line numbers within the text scanned (plus its offset)
    close_line: int
    sealed: str | None  # the checksum written in the opening marker, None for a placeholder
    content: str  # lines strictly between the markers, '\n'-joined, with a final '\n' if any

    @property
    def edited(self) -> bool:
        """Whether the content no longer matches its seal (a hand edit)."""
        if self.sealed is None:
            return bool(self.content.strip())
        return checksum(self.content) != self.sealed


# ---------------------------------------------------------------- fenced code blocks
#
# A marker inside a fenced code block is an example, not a region. That rule is safe only where every
# reader of the page agrees on what is code: if kwiki skipped a line that a renderer shows as text, a
# hand-edited table could hide there from `kwiki check` (and write-back, finding no region, would
# append another one on every run). So a line counts as code only when both CommonMark (GitHub,
# editors) and the site's renderer (Python-Markdown's pymdownx.superfences) make it code; where they
# differ, kwiki reads the line.

_TAB = 4  # Python-Markdown's tab length; it expands tabs before any block is found
_CM_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
# pymdownx.superfences' RE_NESTED_FENCE_START (9.x/10.x), as its search_nested applies it
_SF_FENCE = re.compile(
    r"""(?x)
    (?P<fence>~{3,}|`{3,})
    (?:[ \t]*\.?(?P<lang>[\w#.+-]+)(?=[\t ]|$))?
    (?:
        [ \t]*(\{(?P<attrs>[^\n]*)\}) |
        (?P<options>(?:(?:[ \t]*[a-zA-Z][a-zA-Z0-9_]*(?:=(?P<quot>"|').*?(?P=quot))?)(?=[\t ]|$))+) |
        (?P<unrecognized>(?:([ \t]*[^\s]+)(?=[\t ]|$))+)
    )?[ \t]*$
    """
)
_SF_PREFIX = " \t>"


def code_lines(lines: list[str]) -> list[bool]:
    """For each line, whether it is part of a fenced code block (its fences included) for CommonMark
    and for the site's renderer alike."""
    return [a and b for a, b in zip(_commonmark_code(lines), _superfences_code(lines), strict=True)]


def _commonmark_code(lines: list[str]) -> list[bool]:
    """CommonMark fences at the top level: up to 3 spaces of indentation, 3 or more '`' or '~' (a
    backtick fence's info string has no backtick); closed by the same character, at least as many,
    followed by nothing but spaces; an unclosed fence runs to the end."""
    out: list[bool] = []
    fence: tuple[str, int] | None = None
    for line in lines:
        m = _CM_FENCE.match(line.expandtabs(_TAB)) if ("`" in line or "~" in line) else None
        if fence is None:
            if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
                fence = (m.group(1)[0], len(m.group(1)))
            out.append(fence is not None)
            continue
        out.append(True)
        if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip(" \t"):
            fence = None
    return out


def _superfences_code(lines: list[str]) -> list[bool]:
    """pymdownx.superfences' fences (its `search_nested`): any indentation or '>' prefix, closed only by
    the very same fence at the same indentation; a fence whose lines lose that indentation, or that
    is never closed, is not code at all. After an opening line whose options or attributes
    superfences might refuse, nothing further counts as code (kwiki cannot tell what it renders)."""
    spans: list[tuple[int, int]] = []  # closed fences, first and last line
    start = -1  # the open fence's first line, -1 when none is open
    fence = ""
    width = 0
    for i, raw in enumerate(lines):
        line = raw.expandtabs(_TAB)
        if start < 0:
            ws = len(line) - len(line.lstrip(_SF_PREFIX))
            m = _SF_FENCE.match(line, ws) if ("`" in line or "~" in line) else None
            if m is None or m.group("unrecognized"):
                continue  # superfences refuses an unrecognized header (relaxed_headers is off)
            if m.group("attrs") is not None or m.group("options") or ">" in line[:ws]:
                break  # options and attributes pass validators kwiki does not run, and a fence in a
                # quote is rendered as the quote's parser sees it: stop trusting fences from here on
            start, fence, width = i, m.group("fence"), ws
            continue
        k = 0
        while k < len(line) and k < width and line[k] in _SF_PREFIX:
            k += 1
        prefix, content = line[:k], line[k:]
        closed = abandoned = False
        if ">" in prefix:
            abandoned = True
        elif not (prefix + content).strip():
            pass
        elif k != width:
            abandoned = True
        elif re.match(re.escape(fence) + r"[ \t]*$", content) and not content.startswith((" ", "\t")):
            closed = True
        if closed:
            spans.append((start, i))
        if abandoned:
            break  # superfences may look at the abandoning line again as an opening fence, or not:
            # kwiki cannot tell what it renders from here on, so nothing further counts as code
        if closed:
            start = -1
    return _kept_by_the_block_parser(lines, spans)


def _kept_by_the_block_parser(lines: list[str], spans: list[tuple[int, int]]) -> list[bool]:
    """Superfences stashes each fence as one placeholder line (at the fence's indentation) before
    Python-Markdown splits the text into blocks at blank lines; a block that opens with an indented code
    line (4 columns or more) is an indented code block, and its processor restores every stashed fence
    in that block to plain text, which then renders as a paragraph, not as code."""
    out = [False] * len(lines)
    starts = dict(spans)
    block_indented = False  # does the block the current line belongs to open with an indented line
    fences: list[tuple[int, int]] = []  # the fences of the current block

    def end_block() -> None:
        for a, b in fences:
            if not block_indented:
                out[a : b + 1] = [True] * (b + 1 - a)
        fences.clear()

    i, first = 0, True
    while i < len(lines):
        line = lines[i].expandtabs(_TAB)
        if i not in starts and not line.strip() and (i > 0 or not line):  # Python-Markdown blanks a line
            # of spaces only after a newline: a first line of spaces stays, and opens the first block
            end_block()
            first = True
            i += 1
            continue
        if first:
            block_indented = len(line) - len(line.lstrip(" ")) >= _TAB
            first = False
        if i in starts:
            fences.append((i, starts[i]))
            i = starts[i] + 1
        else:
            i += 1
    end_block()
    return out


def scan(text: str, *, yaml: bool = False, first_line: int = 1) -> list[Region]:  # noqa: C901  (a line state machine)
    """All regions in `text`; raises MarkerError (with a line) for broken markers."""
    if "kwiki:" not in text:  # no marker of any kind, broken ones included
        return []
    open_re, close_re = (_YAML_OPEN, _YAML_CLOSE) if yaml else (_BODY_OPEN, _BODY_CLOSE)
    regions: list[Region] = []
    current: tuple[str, int, str | None] | None = None
    body: list[str] = []
    lines = text.split("\n")
    code = [False] * len(lines) if yaml else code_lines(lines)
    for i, line in enumerate(lines):
        lineno = first_line + i
        if code[i]:
            continue
        m_open, m_close = open_re.match(line), close_re.match(line)
        if m_open:
            name = m_open.group(1)
            if name not in KNOWN_REGIONS:
                raise MarkerError(f"unknown generated region 'kwiki:{name}'", line=lineno)
            if current is not None:
                raise MarkerError(f"region 'kwiki:{name}' opens inside 'kwiki:{current[0]}'", line=lineno)
            current, body = (name, lineno, m_open.group(2)), []
        elif m_close:
            name = m_close.group(1)
            if current is None:
                raise MarkerError(f"'/kwiki:{name}' closes a region that was never opened", line=lineno)
            if name != current[0]:
                raise MarkerError(f"'/kwiki:{name}' closes region 'kwiki:{current[0]}'", line=lineno)
            content = "".join(part + "\n" for part in body)
            regions.append(Region(current[0], current[1], lineno, current[2], content))
            current = None
        elif current is not None:
            body.append(line)
        elif yaml and _ANY_YAML.search(line):
            raise MarkerError("malformed kwiki marker (expected '# kwiki:NAME sha256=...' at the start of a line)",
                              line=lineno)
        elif not yaml and _ANY_BODY.search(line):
            raise MarkerError("malformed kwiki marker (expected '<!-- kwiki:NAME sha256=... -->')", line=lineno)
    if current is not None:
        raise MarkerError(f"region 'kwiki:{current[0]}' is never closed", line=current[1])
    seen: set[str] = set()
    for r in regions:  # blame the second of two regions with one name
        if r.name in seen:
            raise MarkerError(f"region 'kwiki:{r.name}' appears more than once", line=r.open_line)
        seen.add(r.name)
    return regions


def render(name: str, content: str, *, yaml: bool = False) -> str:
    """A sealed region, markers included, ending with a newline."""
    if content and not content.endswith("\n"):
        content += "\n"
    seal = checksum(content)
    if yaml:
        return f"# kwiki:{name} sha256={seal}\n{content}# /kwiki:{name}\n"
    return f"<!-- kwiki:{name} sha256={seal} -->\n{content}<!-- /kwiki:{name} -->\n"


def replace(text: str, name: str, content: str, *, yaml: bool = False) -> str | None:
    """`text` with region `name` replaced by `content`; None when the region is absent."""
    regions = {r.name: r for r in scan(text, yaml=yaml)}
    region = regions.get(name)
    if region is None:
        return None
    lines = text.split("\n")
    before = lines[: region.open_line - 1]
    after = lines[region.close_line :]
    block = render(name, content, yaml=yaml).rstrip("\n").split("\n")
    return "\n".join(before + block + after)
