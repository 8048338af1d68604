"""Read one page file into a validated `Page`, turning every failure into located problems.

pydantic and the page model are imported only by `validate`, so `read_page` (everything but
validation: reading, decoding, front matter, generated regions) is cheap to import.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kwiki.core.errors import FrontMatterError, MarkerError, Problem, Severity
from kwiki.core.paths import within
from kwiki.wiki.frontmatter import MAX_PAGE_BYTES, FrontMatter, field_name, parse_page
from kwiki.wiki.markers import Region, scan

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

    from kwiki.wiki.model import PageMeta


@dataclass
class Page:
    """A page as read from disk: its relative path, parsed parts, and what is wrong with it."""

    path: str  # relative to the project root, with '/' separators
    file: Path
    fm: FrontMatter | None = None
    meta: PageMeta | None = None
    regions: list[Region] = field(default_factory=list)
    yaml_regions: list[Region] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def id(self) -> str | None:
        return self.meta.id if self.meta else None

    def problem(self, line: int, field_: str, message: str, severity: Severity = "error") -> None:
        self.problems.append(Problem(self.path, line, field_, message, severity))

    def line_of(self, *path: str | int) -> int:
        return self.fm.line_of(tuple(path)) if self.fm else 1


def _data_path(data: Any, err: ErrorDetails) -> tuple[Any, ...]:
    """The path in the data an error concerns: the parts of its pydantic location that walk the
    data (union and type labels dropped), then the missing field's name or the sub-location a
    model validator gave (`FieldError.loc`)."""
    from kwiki.wiki.model import FieldError

    loc = tuple(err["loc"])
    out: list[Any] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
            out.append(part)
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
            out.append(part)
    if err["type"] == "missing" and loc and isinstance(loc[-1], str) and isinstance(node, dict):
        out.append(loc[-1])
    error = (err.get("ctx") or {}).get("error")
    if isinstance(error, FieldError):
        out.extend(error.loc)
    return tuple(out)


def _message(err: ErrorDetails) -> str:
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    if err["type"] == "missing":
        return "required field is missing"
    if err["type"] == "extra_forbidden":
        return "unknown field"
    if err["type"] == "string_pattern_mismatch" and "a-z0-9" in str(err.get("ctx", {}).get("pattern", "")):
        return f"{err.get('input')!r} is not a slug (lower-case letters, digits and '-')"
    return msg


def validate(page: Page, strict: bool = False) -> None:
    from pydantic import ValidationError

    from kwiki.wiki.model import PageMeta

    assert page.fm is not None
    data = page.fm.data
    try:
        page.meta = PageMeta.model_validate(data)
    except ValidationError as exc:
        seen: set[tuple[tuple[Any, ...], str]] = set()
        for err in exc.errors(include_url=False):
            path = _data_path(data, err)
            key = (path, _message(err))
            if key in seen:
                continue
            seen.add(key)
            page.problem(page.fm.line_of(path), field_name(path), _message(err))
        return
    severity: Severity = "error" if strict else "warning"
    for name in page.meta.unknown_fields:
        page.problem(page.fm.line_of((name,)), name, "unknown field", severity)


def load_page(file: Path, root: Path, strict: bool = False) -> Page:
    """Parse and validate one page; never raises for bad content."""
    page = _parse(file, root)
    if page.fm is not None:
        validate(page, strict)
        _scan_regions(page)
    return page


def read_page(file: Path, root: Path) -> Page:
    """`load_page` without validation (`page.meta` stays None): the file's checks, its front matter
    and its generated regions, for callers that validate some other way."""
    page = _parse(file, root)
    if page.fm is not None:
        _scan_regions(page)
    return page


def _in_wiki(root: Path, file: Path) -> bool:
    """Whether the link `file` resolves inside wiki/ to a path without a dot-component."""
    from kwiki.core.tracked import dotted

    top_name = Path(os.path.relpath(file, root)).parts[0]  # wiki/: every page lies under it (kwiki.wiki.catalog)
    real, top = os.path.realpath(file), os.path.realpath(root / top_name)
    return real.startswith(top + os.sep) and not dotted(os.path.relpath(real, top))


def _parse(file: Path, root: Path) -> Page:
    try:
        rel = file.relative_to(root).as_posix()
    except ValueError:
        rel = file.as_posix()
    page = Page(path=rel, file=file)
    try:
        info = file.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block, /dev/zero would never end
            page.problem(0, "", "not a regular file")
            return page
        if file.is_symlink() and not within(root, file):  # the containment rule (kwiki.core.paths)
            page.problem(0, "", "a link that leads out of the repository; not read")
            return page
        if file.is_symlink() and not _in_wiki(root, file):  # kwiki.core.tracked: never `wiki/a.md -> ../.env`
            page.problem(0, "", "a link that leads out of wiki/ or to a path with a dot-component; not read")
            return page
        with open(file, "rb") as fh:
            raw = fh.read(MAX_PAGE_BYTES + 1)
    except OSError as exc:
        page.problem(0, "", f"cannot read file: {exc.strerror or exc}")
        return page
    if len(raw) > MAX_PAGE_BYTES:
        size = max(info.st_size, len(raw))
        page.problem(1, "", f"file is {size} bytes, over the {MAX_PAGE_BYTES} byte limit for a page")
        return page
    try:
        page.fm = parse_page(raw)
    except FrontMatterError as exc:
        page.problem(exc.line, exc.field, exc.message)
    return page


def _scan_regions(page: Page) -> None:
    assert page.fm is not None
    try:
        page.regions = scan(page.fm.body, first_line=page.fm.body_line)
        page.yaml_regions = scan(_front_matter_text(page.fm), yaml=True, first_line=2)
    except MarkerError as exc:
        page.problem(exc.line, "kwiki-marker", exc.message)


def _front_matter_text(fm: FrontMatter) -> str:
    lines = fm.text.split("\n")
    return "\n".join(lines[fm.start_line : fm.end_line - 1])
