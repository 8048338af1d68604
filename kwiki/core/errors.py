"""Typed errors and located problems shared by every kwiki module.

Imported by every command, `kwiki query` included, so it imports nothing heavier than
`typing` (a NamedTuple rather than a dataclass: `dataclasses` pulls in `inspect`).
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

Severity = Literal["error", "warning"]


class Problem(NamedTuple):
    """One located finding: `path:line: field: message`. Immutable, ordered by its fields."""

    path: str
    line: int
    field: str
    message: str
    severity: Severity = "error"

    def format(self) -> str:
        """One line, whatever the path, field or message hold: a file named 'x.md\\nwiki/y.md:1: ...'
        cannot print a line that looks like a problem of another page."""
        path = printable(self.path)
        where = f"{path}:{self.line}" if self.line else path
        field = f" {printable(self.field)}:" if self.field else ""
        tag = "" if self.severity == "error" else " (warning)"
        return f"{where}:{field} {printable(self.message)}{tag}"

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "line": self.line,
            "field": self.field,
            "message": self.message,
            "severity": self.severity,
        }


def printable_lines(text: str) -> str:
    """Text for a terminal, line by line: each line `printable`, the line breaks kept (a page title's escape
    sequence cannot retitle the window, move the cursor or recolour what follows)."""
    return "\n".join(printable(line) for line in text.split("\n"))


def printable(text: str) -> str:
    """`text` with every character that is not printable escaped (line breaks, other control and
    format characters, bidi overrides); a byte of a name that is not UTF-8 shows as \\xNN."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif 0xDC80 <= ord(ch) <= 0xDCFF:  # os.fsdecode's stand-in for an undecodable byte
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(ch.encode("unicode_escape").decode("ascii"))
    return "".join(out)


class KwikiError(Exception):
    """Base of every error kwiki raises on purpose; the CLI prints it as one line."""

    exit_code = 2

    def __init__(self, message: str, *, path: str = "", line: int = 0, field: str = ""):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.field = field

    def problem(self) -> Problem:
        return Problem(self.path, self.line, self.field, self.message)

    def __str__(self) -> str:
        return self.problem().format() if self.path else self.message


class FrontMatterError(KwikiError):
    """A page's front matter cannot be read as a YAML mapping."""

    exit_code = 1


class UsageError(KwikiError):
    """The command line or its arguments are wrong."""


class EnvironmentProblem(KwikiError):
    """The machine lacks something kwiki needs (a tool, a GPU, a writable directory)."""


class ManifestError(KwikiError):
    """An artifact manifest is missing or invalid."""

    exit_code = 1


class RecordError(KwikiError):
    """An artifact printed output that is not a valid result record."""

    exit_code = 1


class MarkerError(KwikiError):
    """A generated region's markers are broken, unknown or nested."""

    exit_code = 1


class WriteBackError(KwikiError):
    """A page could not be written back safely; it was left as it was."""

    exit_code = 1
