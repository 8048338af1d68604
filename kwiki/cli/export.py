"""`kwiki export skills DIR`: the wiki as Agent Skills, one per page and a router (kwiki.agents.skills)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kwiki.wiki.catalog import find_root


def run(args: Any) -> int:
    from kwiki.agents.skills import export

    written = export(find_root(args.root), Path(args.dir))
    print(f"wrote {len(written)} skills to {args.dir} (the router 'kernelwiki' and one per page)")
    return 0
