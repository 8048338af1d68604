"""`kwiki show ID`: one page with its claims and latest measurements, as text or JSON."""

from __future__ import annotations

import json
import sys
from typing import Any

from kwiki.agents.show import show
from kwiki.core.errors import UsageError, printable_lines
from kwiki.wiki.catalog import find_root


def _ladder(args: Any) -> int:
    """`kwiki show ID --ladder`: the page's ladders (kwiki.agents.show), JSON or one table per shape."""
    from kwiki.agents.show import page_ladders

    doc = page_ladders(find_root(args.root), args.id, args.shape, every_row=True)  # a reader's table: every row
    if getattr(args, "json", False) or not sys.stdout.isatty():
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    else:
        sys.stdout.write(printable_lines(render_ladders(doc)))
    return 0


def render_ladders(doc: dict[str, Any]) -> str:
    """The ladders for a terminal: per artifact and GPU, one table per shape, rows in the manifest's order."""
    from kwiki.core.numbers import fmt

    lines = [f"{doc['id']}: {doc['title']}"]
    if not doc["ladders"]:
        lines.append("  no measured ladder in results/")
    for ladder in doc["ladders"]:
        where = ", ".join(filter(None, (ladder.get("gpu"), (ladder.get("date") or "")[:10], ladder.get("run_id"))))
        lines += ["", f"{ladder['artifact']} ({where}); baseline {ladder.get('baseline', '-')}"]
        for group in ladder["groups"]:
            rows = [["VARIANT", "TIME US", "RATE", "VS BASE", "OF SOL", "REGS"]]
            for r in group["rows"]:
                rate = f"{fmt(r['rate'])} {r['rate_unit']}" if "rate" in r else r["status"]
                rows.append([r["variant"], fmt(r.get("time_us")), rate,
                             f"{fmt(r['vs_baseline'], 3)}x" if "vs_baseline" in r else "-",
                             f"{r['of_speed_of_light']:.0%}" if "of_speed_of_light" in r else "-",
                             str(r.get("registers", "-"))])
            widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
            lines += ["", f"  {group['label']}"]
            lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


def run(args: Any) -> int:
    if getattr(args, "shape", None) and not getattr(args, "ladder", False):
        raise UsageError("--shape goes with --ladder")
    if getattr(args, "ladder", False):
        return _ladder(args)
    doc = show(find_root(args.root), args.id)
    if getattr(args, "json", False) or not sys.stdout.isatty():
        sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(printable_lines(render_text(doc)))
    return 0


def _measured_cell(m: dict[str, Any] | None, unit: str) -> str:
    """'4.41 TB/s (3 runs 4.38-4.45, 2 boards 1.2% apart)': the median over its series' runs, their range and
    the boards behind them; or the gate that refused the figure."""
    if m is not None and m.get("value") is not None:
        measured = f"{m['value']:g} {m.get('unit') or unit}"
        if m.get("runs"):
            low, high = m.get("range") or (m["value"], m["value"])
            runs = f"{m['runs']} runs {low:g}-{high:g}" if m["runs"] > 1 else "1 run"
            boards = m.get("boards") or []
            if boards:
                runs += f", {len(boards)} board{'s' if len(boards) != 1 else ''}"
                runs += f" {m['board_spread']:.1%} apart" if m.get("board_spread") is not None else ""
            measured += f" ({runs}{', provisional' if m.get('provisional') else ''})"
        return measured
    if m is not None and m.get("gates"):
        return "refused by gate " + ", ".join(g["name"] for g in m["gates"])
    return "-"


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
        ("state", doc.get("state_reason") or ""),
        ("arch", " ".join(fm.get("architectures", []))),
        ("tags", " ".join(fm.get("tags", []))),
        ("summary", fm.get("summary") or ""),
    ):
        if value:
            lines.append(f"  {label:<9} {value}")
    if doc.get("claims"):  # a page without claims has none in its document
        lines += ["", "Claims:"]
        rows = [["ID", "CLAIMED", "MEASURED", "VERDICT", "GPU", "DATE"]]
        why: list[str] = []  # a failed, caught or tainted claim's reason, below the table
        run_of = doc.get("runs") or {}
        for c in doc["claims"]:
            m = c.get("measured")
            prov = run_of.get(m.get("run", ""), {}) if m is not None else {}
            measured = _measured_cell(m, c["unit"])
            verdict = c.get("state") or c.get("verdict") or "not measured"
            reason = c.get("caught") or (m or {}).get("detail")
            if reason and (verdict.startswith(("failed", "below")) or str(reason).startswith("follows series")):
                why.append(f"  {c['id']}: {reason}")
            if c.get("traceable") is False:
                verdict = f"UNTRACEABLE (says {verdict})"
            rows.append([c["id"], c["claimed"]["text"], measured, verdict, prov.get("gpu") or "-",
                         prov.get("date") or "-"])
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows]
        if why:
            lines += ["", "Why:", *why]
    if untraceable:
        lines += ["", "Untraceable (nothing on this page counts as verified):"]
        lines += [f"  - {reason}" for reason in untraceable]
    body = doc.get("body")
    if body:
        lines += ["", body.strip("\n")]
    return "\n".join(lines) + "\n"
