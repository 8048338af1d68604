"""`kwiki mcp`: serve the wiki to coding agents over MCP (stdio)."""

from __future__ import annotations

from typing import Any

from kwiki.agents.index import with_index
from kwiki.agents.mcp import build_server
from kwiki.wiki.catalog import find_root


def run(args: Any) -> int:
    root = find_root(args.root)
    server = build_server(root)
    with_index(root, lambda conn: None)  # build or refresh before serving (and before threads exist)
    server.run("stdio")
    return 0
