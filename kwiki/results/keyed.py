"""Committed JSON-lines files in which a later line replaces an earlier one of the same identity: the profile
audits (kwiki.results.audits) and the measured timelines (kwiki.results.timelines). Each row's model has an
`ident` property; a line that is not one of the model's rows is kept as it is (the readers skip it)."""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError


class Keyed(Protocol):
    @property
    def ident(self) -> Hashable: ...

    def model_dump(self, *, mode: str, exclude_none: bool) -> dict[str, Any]: ...


def replace_lines(path: Path, rows: Iterable[Keyed], model: type[BaseModel]) -> int:
    """Add `rows` to `path` (created with its folder), dropping the lines of the same identity and, among `rows`,
    all but the last of each; under the file's lock, written whole or not at all. The number of lines added."""
    from kwiki.core.lock import hold_replaced
    from kwiki.core.writefile import write_atomic

    new = {r.ident: json.dumps(r.model_dump(mode="json", exclude_none=True), sort_keys=True) for r in rows}
    if not new:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with hold_replaced(path):
        kept = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                if model.model_validate_json(line).ident in new:  # type: ignore[attr-defined]
                    continue
            except ValidationError:
                pass
            kept.append(line)
        write_atomic(path, ("\n".join([*kept, *new.values()]) + "\n").encode("utf-8"))
    return len(new)
