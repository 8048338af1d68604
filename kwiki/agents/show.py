"""`kwiki show ID`: a page's front matter, each claim with its latest measurement, and its body.

The JSON (schema/show.schema.json) is what scripts and agents read results from::

    kwiki show technique-vectorized-loads --json | jq '.claims[] | {id, verdict, value: .measured.value}'

It comes from the index (kwiki/agents/index.py), which stored it when it last read the page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kwiki.agents.index import page_detail, with_index


def show(root: Path, page_id: str, *, body: bool = True) -> dict[str, Any]:
    """The `kwiki show --json` document of page `page_id`; raises index.PageNotFound."""
    return with_index(root, lambda conn: page_detail(conn, page_id, body=body))
