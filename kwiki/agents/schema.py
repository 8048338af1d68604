"""JSON Schema files generated from the models, for editors and agents (`kwiki schema`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from kwiki.agents.outputs import LadderOutput, MeasurementsOutput, PageOutput, QueryOutput, ShowOutput, TagsOutput
from kwiki.core.writefile import write_atomic
from kwiki.results.record import Record
from kwiki.wiki.manifest import Manifest
from kwiki.wiki.model import PageMeta

# file name -> the model whose JSON schema it holds (imported here, never by name: kwiki.agents sees every layer
# whose models it publishes)
SCHEMAS: dict[str, type[BaseModel]] = {
    "page.schema.json": PageMeta,
    "artifact.schema.json": Manifest,
    "record.schema.json": Record,
    "query.schema.json": QueryOutput,
    "show.schema.json": ShowOutput,
    "tags.schema.json": TagsOutput,
    "ladder.schema.json": LadderOutput,
    "measurements.schema.json": MeasurementsOutput,
    "mcp-page.schema.json": PageOutput,
}


def render(filename: str) -> str:
    schema: dict[str, Any] = SCHEMAS[filename].model_json_schema()
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": filename, **schema}
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def stale(directory: Path) -> list[str]:
    """Schema files that are missing or differ from what the models generate."""
    out = []
    for filename in sorted(SCHEMAS):
        path = directory / filename
        if not path.exists() or path.read_text(encoding="utf-8") != render(filename):
            out.append(filename)
    return out


def write(directory: Path) -> list[str]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for filename in sorted(SCHEMAS):
        text = render(filename)
        path = directory / filename
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            write_atomic(path, text.encode("utf-8"))
            written.append(filename)
    return written
