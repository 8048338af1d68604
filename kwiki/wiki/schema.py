"""JSON Schema files generated from the models, for editors and agents (`kwiki schema`)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from kwiki.core.writefile import write_atomic

# file name -> "module:model" whose JSON schema it holds
SCHEMAS: dict[str, str] = {
    "page.schema.json": "kwiki.wiki.model:PageMeta",
    "artifact.schema.json": "kwiki.wiki.manifest:Manifest",
    "record.schema.json": "kwiki.verify.record:Record",
    "query.schema.json": "kwiki.agents.outputs:QueryOutput",
    "show.schema.json": "kwiki.agents.outputs:ShowOutput",
    "tags.schema.json": "kwiki.agents.outputs:TagsOutput",
    "ladder.schema.json": "kwiki.agents.outputs:LadderOutput",
}


def _load(spec: str) -> Any:
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def render(filename: str) -> str:
    obj = _load(SCHEMAS[filename])
    schema = obj.model_json_schema() if hasattr(obj, "model_json_schema") else obj()
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
