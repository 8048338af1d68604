"""Split the wiki's measured pages into groups for `bench/gpu_pages.sh`: pages that share an artifact stay in one
group (a verify run per group, and an artifact run twice would count as two runs of its series), and a group holds
at most `--max` artifacts, so that a cut-short device call loses little.

    python3 bench/page_groups.py              # one quoted group per line, all measured pages
    python3 bench/page_groups.py --max 3      # smaller groups
    BUDGET_S=560 bash bench/gpu_pages.sh $(python3 bench/page_groups.py --shell)

Pages without a runnable artifact are left out (nothing to run). Groups keep the wiki's page order.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kwiki.verify.plan import runnable_artifacts  # noqa: E402
from kwiki.wiki.catalog import load_wiki  # noqa: E402


def components(pages: list[tuple[str, list[str]]]) -> list[tuple[list[str], set[str]]]:
    """Pages joined by shared artifacts: (page ids, artifacts) per connected component, in first-page order."""
    groups: list[tuple[list[str], set[str]]] = []
    for page, arts in pages:
        joined = [g for g in groups if g[1] & set(arts)]
        ids, found = [page], set(arts)
        for g in joined:
            ids = g[0] + ids
            found |= g[1]
            groups.remove(g)
        groups.append((ids, found))
    order = {page: n for n, (page, _) in enumerate(pages)}
    for ids, _ in groups:
        ids.sort(key=order.__getitem__)
    return sorted(groups, key=lambda g: order[g[0][0]])


def pack(comps: list[tuple[list[str], set[str]]], most: int) -> list[list[str]]:
    """Consecutive components packed into groups of at most `most` artifacts (a larger component stays whole)."""
    out: list[tuple[list[str], int]] = []
    for ids, arts in comps:
        if out and out[-1][1] + len(arts) <= most:
            out[-1] = (out[-1][0] + ids, out[-1][1] + len(arts))
        else:
            out.append((list(ids), len(arts)))
    return [ids for ids, _ in out]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=4, help="artifacts per group at most (default 4)")
    ap.add_argument("--shell", action="store_true", help="print the groups quoted on one line, for gpu_pages.sh")
    args = ap.parse_args(argv)
    wiki = load_wiki(ROOT)
    pages = [(p.id, runnable_artifacts(p, ROOT)) for p in wiki.pages if p.meta is not None]
    groups = pack(components([(pid, arts) for pid, arts in pages if arts]), max(1, args.max))
    if args.shell:
        print(" ".join(shlex.quote(" ".join(g)) for g in groups))
    else:
        for g in groups:
            print(" ".join(g))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
