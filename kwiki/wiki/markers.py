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


def scan(text: str, *, yaml: bool = False, first_line: int = 1) -> list[Region]:
    """All regions in `text`; raises MarkerError (with a line) for broken markers."""
    if "kwiki:" not in text:  # no marker of any kind, broken ones included
        return []
    open_re, close_re = (_YAML_OPEN, _YAML_CLOSE) if yaml else (_BODY_OPEN, _BODY_CLOSE)
    regions: list[Region] = []
    current: tuple[str, int, str | None] | None = None
    body: list[str] = []
    in_fence = False
    for i, line in enumerate(text.split("\n")):
        lineno = first_line + i
        if not yaml and line.lstrip().startswith(("```", "~~~")) and current is None:
            in_fence = not in_fence
            continue
        if in_fence:
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
