"""The site's error."""

from __future__ import annotations

from kwiki.core.errors import KwikiError


class SiteError(KwikiError):
    """The site could not be built: page errors, MkDocs warnings in strict mode, or remote resources."""

    exit_code = 1

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = problems or []

