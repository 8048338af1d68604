"""The output schemas the MCP tool list carries: trimmed to names and types, the described ones referenced.

Pydantic's schema of a tool's output model is 8-10 KB with every field described, and the tool list sends
it for each tool (55 KB in all, 87% of it output schemas). The list carries instead each model's structure
two levels deep (properties and their types, required fields, enums; `$ref`s inlined, nullable types as
their non-null type since compact replies leave nulls out), and a `description` that names the schema file
`kwiki schema` writes with every field described. A client still validates each reply's structured content
against it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

DEPTH = 2  # levels of nested properties kept
KEEP = ("type", "enum", "const")


def trimmed(model: type[BaseModel], filename: str) -> dict[str, Any]:
    """`model`'s JSON schema as the tool list carries it, referring to schema/`filename` for the rest."""
    schema = model.model_json_schema()
    defs: dict[str, Any] = schema.get("$defs", {})

    def trim(node: dict[str, Any], depth: int) -> dict[str, Any]:
        while "$ref" in node:
            node = defs[node["$ref"].rsplit("/", 1)[-1]]
        if "anyOf" in node:
            alternatives = [a for a in node["anyOf"] if a.get("type") != "null"]
            if len(alternatives) == 1:
                return trim(alternatives[0], depth)
            return {"anyOf": [trim(a, depth) for a in alternatives]}
        out = {k: node[k] for k in KEEP if k in node}
        if "properties" in node:
            if depth <= 0:
                return out
            out["properties"] = {k: trim(v, depth - 1) for k, v in node["properties"].items()}
            if node.get("required"):
                out["required"] = node["required"]
        elif "items" in node and depth > 0:
            out["items"] = trim(node["items"], depth - 1)
        elif isinstance(node.get("additionalProperties"), dict) and depth > 0:
            out["additionalProperties"] = trim(node["additionalProperties"], depth - 1)
        return out

    out = trim(schema, DEPTH)
    first = (model.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
    return {"description": f"{first} Names and types only; every field described: schema/{filename} "
                           "(`kwiki schema`).", **out}


def slim_input(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema without the titles pydantic gives every property (the name says it)."""
    out = {k: v for k, v in schema.items() if k != "title"}
    if "properties" in out:
        out["properties"] = {name: {k: v for k, v in prop.items() if k != "title"}
                             for name, prop in out["properties"].items()}
    return out
