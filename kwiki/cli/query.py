"""`kwiki query` and `kwiki tags`: find pages in the index; a table for people, JSON for machines."""

from __future__ import annotations

import json
import sys
from typing import Any

from kwiki.agents.index import skipped, with_index
from kwiki.agents.query import Query, render_json, search_conn, tags_conn
from kwiki.core.errors import printable
from kwiki.wiki.catalog import find_root


def _wants_json(args: Any) -> bool:
    return bool(getattr(args, "json", False)) or not sys.stdout.isatty()


def _print_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n")


def run(args: Any) -> int:
    root = find_root(args.root)
    q = Query(
        tags=list(args.tag or []),
        any_tag=bool(args.any),
        arch=args.arch,
        type=args.type,
        evidence=args.evidence,
        op=args.op,
        text=args.text,
        verified_on=args.verified_on,
        limit=args.limit,
        detail=getattr(args, "detail", "brief"),
    )
    as_json = _wants_json(args)
    if not as_json:
        q.detail = "full"  # the table shows every page's architectures (a page may name none: no key)
    raw = as_json and q.detail == "full"  # the stored results, pasted unparsed
    doc, left_out = with_index(
        root, lambda conn: (search_conn(conn, q, raw=raw), 0 if as_json else len(skipped(conn)))
    )
    if as_json:
        sys.stdout.write((render_json(doc) if raw else json.dumps(doc, indent=2, sort_keys=True)) + "\n")
        return 0
    _print_table(
        ["ID", "TYPE", "EVIDENCE", "ARCH", "TITLE"],
        [[r["id"], r["type"], r["evidence_level"], " ".join(r.get("architectures", [])), r["title"]]
         for r in doc["results"]],
    )
    shown, total = len(doc["results"]), doc["total"]
    print(f"{shown} of {total} pages" if shown < total else f"{total} page{'s' * (total != 1)}")
    if left_out:
        print(f"({left_out} page{'s' * (left_out != 1)} with errors left out; 'kwiki check' lists them)",
              file=sys.stderr)
    return 0


def run_tags(args: Any) -> int:
    doc = with_index(find_root(args.root), tags_conn)
    if _wants_json(args):
        _print_json(doc)
        return 0
    _print_table(["TAG", "PAGES"], [[t["tag"], str(t["pages"])] for t in doc["tags"]])
    return 0


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    """Columns as wide as their widest cell; the last one cut to the terminal's width."""
    import shutil

    if not rows:
        return
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header) - 1)]
    room = max(20, shutil.get_terminal_size((120, 24)).columns - sum(widths) - 2 * len(widths))
    rows = [[printable(str(c)) for c in row] for row in rows]  # a title's escape sequence is shown, not run
    for row in [header, *rows]:
        last = str(row[-1])
        if len(last) > room:
            last = last[: room - 3] + "..."
        print("  ".join([*(str(c).ljust(w) for c, w in zip(row, widths, strict=False)), last]).rstrip())
