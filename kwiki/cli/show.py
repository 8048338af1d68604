"""`kwiki show ID`: one page with its claims and latest measurements, as text or JSON."""

from __future__ import annotations

import json
import sys
from typing import Any

from kwiki.agents.show import show
from kwiki.wiki.catalog import find_root


def run(args: Any) -> int:
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
    untraceable = doc.get("untraceable") or []
    if untraceable:  # never "verified": the block does not trace to the results store
        evidence += " (kwiki's measurements do not trace to results/; re-run kwiki verify)"
    elif block:
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
                if m.get("runs"):  # the median over its series' runs, with their range
                    low, high = m.get("range") or (m["value"], m["value"])
                    runs = f"{m['runs']} runs {low:g}-{high:g}" if m["runs"] > 1 else "1 run"
                    measured += f" ({runs}{', provisional' if m.get('provisional') else ''})"
            elif m is not None and m.get("gates"):
                measured = "refused by gate " + ", ".join(g["name"] for g in m["gates"])
            verdict = c["verdict"] or "not measured"
            if c.get("traceable") is False:
                verdict = f"UNTRACEABLE (says {verdict})"
            rows.append([c["id"], c["claimed"]["text"], measured, verdict, c["gpu"] or "-", c["date"] or "-"])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    if untraceable:
        lines += ["", "Untraceable (nothing on this page counts as verified):"]
        lines += [f"  - {reason}" for reason in untraceable]
    body = doc.get("body")
    if body:
        lines += ["", body.strip("\n")]
    return "\n".join(lines) + "\n"
