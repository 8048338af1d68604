"""Rung markers: the code each rung of an artifact's ladder adds, marked in its sources.

A region opens with a line `// kwiki:rung NAME` and closes with `// /kwiki:rung NAME` (in a Python source,
`# kwiki:rung NAME` and `# /kwiki:rung NAME`), each alone on its line (indentation allowed), NAME being a
variant of the artifact's manifest that has a `rung`. A variant may own several regions (its kernel, its
launcher); regions neither nest nor overlap. The manifest stays the one source of the rung's number and of what
it adds: the marker names the variant only. `parse_regions` returns the regions of one file (for the site's
"what rung N adds over N-1" excerpts); `check_markers` also checks the names
against the manifest. A broken pair or an unknown name is a ManifestError located at the marker's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kwiki.core.errors import ManifestError

OPEN = "kwiki:rung"
CLOSE = "/kwiki:rung"
FIELD = "rung marker"  # the field of the errors: path:line: rung marker: message
_MARKERS = {"//": re.compile(r"^\s*//\s*(/?)kwiki:rung\b(.*)$"), "#": re.compile(r"^\s*#\s*(/?)kwiki:rung\b(.*)$")}


def comment_of(path: str) -> str:
    """The line comment a marker is written in: '#' in a Python source, '//' in CUDA and C++."""
    return "#" if path.endswith(".py") else "//"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class RungRegion:
    """The lines of one marked region: `first`..`last` (1-based, inclusive) are the code between the markers."""

    variant: str
    path: str
    open_line: int
    close_line: int
    text: str

    @property
    def first(self) -> int:
        return self.open_line + 1

    @property
    def last(self) -> int:
        return self.close_line - 1


def parse_regions(text: str, path: str) -> list[RungRegion]:
    """The rung regions of one source file, in file order; ManifestError (path:line) on a broken marker."""
    out: list[RungRegion] = []
    lines = text.splitlines()
    current: tuple[str, int] | None = None
    comment = comment_of(path)
    for number, line in enumerate(lines, start=1):
        m = _MARKERS[comment].match(line)
        if m is None:
            if re.search(r"kwiki:rung", line):
                raise ManifestError(f"a rung marker must stand alone on its line as '{comment} kwiki:rung NAME' or "
                                    f"'{comment} /kwiki:rung NAME'", path=path, line=number, field=FIELD)
            continue
        closing, name = m.group(1) == "/", m.group(2).strip()
        marker = CLOSE if closing else OPEN
        if not _NAME.match(name):
            raise ManifestError(f"'{marker}' wants one variant name after it, got {name!r}", path=path, line=number,
                                field=FIELD)
        if not closing:
            if current is not None:
                raise ManifestError(f"'{OPEN} {name}' opens inside the region of {current[0]!r} opened at line "
                                    f"{current[1]} (regions do not nest: close it first)", path=path, line=number,
                                    field=FIELD)
            current = (name, number)
            continue
        if current is None:
            raise ManifestError(f"'{CLOSE} {name}' closes no open region", path=path, line=number, field=FIELD)
        if current[0] != name:
            raise ManifestError(f"'{CLOSE} {name}' closes the region of {current[0]!r} opened at line {current[1]}",
                                path=path, line=number, field=FIELD)
        out.append(RungRegion(name, path, current[1], number, "\n".join(lines[current[1]:number - 1])))
        current = None
    if current is not None:
        raise ManifestError(f"'{OPEN} {current[0]}' is never closed ('{CLOSE} {current[0]}')", path=path,
                            line=current[1], field=FIELD)
    return out


def check_markers(sources: list[tuple[Path, str]], rungs: dict[str, int | None]) -> list[RungRegion]:
    """Every region of `sources` ((file, path as shown)), each naming a variant of `rungs` (variant -> its rung,
    None when it has none); ManifestError at the first marker that names no variant or a variant without a rung."""
    regions: list[RungRegion] = []
    for file, shown_path in sources:
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ManifestError(f"cannot read it for rung markers: {exc}", path=shown_path, field=FIELD) from None
        for region in parse_regions(text, shown_path):
            if region.variant not in rungs:
                raise ManifestError(f"'{OPEN} {region.variant}' names no variant of the manifest", path=shown_path,
                                    line=region.open_line, field=FIELD)
            if rungs[region.variant] is None:
                raise ManifestError(f"'{OPEN} {region.variant}' names a variant without a rung (give it `rung` in "
                                    "the manifest, or drop the marker)", path=shown_path, line=region.open_line,
                                    field=FIELD)
            regions.append(region)
    return regions
