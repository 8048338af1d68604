"""`kwiki show ID`: a page's front matter, each claim with its latest measurement, and its body.

The JSON (schema/show.schema.json) is what scripts and agents read results from::

    kwiki show technique-vectorized-loads --json | jq '.claims[] | {id, verdict, value: .measured.value}'

It comes from the index (kwiki/index.py), which stored it when it last read the page.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .index import page_detail, with_index


def show(root: Path, page_id: str, *, body: bool = True) -> dict[str, Any]:
    """The `kwiki show --json` document of page `page_id`; raises index.PageNotFound."""
    return with_index(root, lambda conn: page_detail(conn, page_id, body=body))


def main(args: Any) -> int:
    from .catalog import find_root

    doc = show(find_root(args.root), args.id)
    if getattr(args, "json", False) or not sys.stdout.isatty():
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(doc))
    return 0


def render_text(doc: dict[str, Any]) -> str:
    fm = doc["front_matter"]
    block = doc.get("measurements")
    evidence = doc["evidence_level"]
    if block:
        evidence += f" (kwiki verify on {block.get('verified_on') or 'unknown GPU'}, {block['date']})"
    lines = [f"{doc['id']}: {doc['title']}", ""]
    for label, value in (
        ("path", doc["path"]),
        ("type", doc["type"]),
        ("evidence", evidence),
        ("arch", " ".join(fm.get("architectures", []))),
        ("tags", " ".join(fm.get("tags", []))),
        ("summary", fm.get("summary") or ""),
    ):
        if value:
            lines.append(f"  {label:<9} {value}")
    if doc["claims"]:
        lines += ["", "Claims:"]
        rows = [["ID", "CLAIMED", "MEASURED", "VERDICT", "GPU", "DATE"]]
        for c in doc["claims"]:
            m = c["measured"]
            measured = "-"
            if m is not None and m["value"] is not None:
                measured = f"{m['value']:g} {m['unit'] or c['unit']}"
            rows.append([c["id"], c["claimed"]["text"], measured, c["verdict"] or "not measured", c["gpu"] or "-", c["date"] or "-"])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    body = doc.get("body")
    if body:
        lines += ["", body.strip("\n")]
    return "\n".join(lines) + "\n"
