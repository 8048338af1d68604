"""Typed errors and located problems shared by every kwiki module.

Imported by every command, `kwiki query` included, so it imports nothing heavier than
`typing` (a NamedTuple rather than a dataclass: `dataclasses` pulls in `inspect`).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Severity = Literal["error", "warning"]


class Problem(NamedTuple):
    """One located finding: `path:line: field: message`. Immutable, ordered by its fields."""

    path: str
    line: int
    field: str
    message: str
    severity: Severity = "error"

    def format(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        field = f" {self.field}:" if self.field else ""
        tag = "" if self.severity == "error" else " (warning)"
        return f"{where}:{field} {self.message}{tag}"

    def as_json(self) -> dict:
        return {
            "path": self.path,
            "line": self.line,
            "field": self.field,
            "message": self.message,
            "severity": self.severity,
        }


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
