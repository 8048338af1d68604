"""What a page's first view fetches, read from the built site's files: its HTML and the stylesheets and scripts it
names. Images are not counted (charts load when they scroll into view), nor Material's search index and worker, which
load on first use of search (kwiki.site.searchindex.defer_index). The browser tests hold this figure to be no less
than what a browser fetches on the reader views, and every page of the repository's wiki to the budget.
"""

from __future__ import annotations

import re
from pathlib import Path

FIRST_VIEW_BYTES = 400_000  # HTML, CSS and JS a first view fetches, uncompressed
_FETCHED = re.compile(r'<(?:link[^>]*\brel="stylesheet"[^>]*\bhref|script[^>]*\bsrc)="([^"]+)"')


def first_view(site: Path, page: Path) -> int:
    """The bytes of `page` (an HTML file of the built site `site`) and of the site's stylesheets and scripts it names
    (a name from the site's root, as 404.html's, included; one on another host is not the site's and never is)."""
    html = page.read_text(encoding="utf-8", errors="replace")
    named: set[Path] = {((site if href.startswith("/") else page.parent)
                         / href.split("?")[0].split("#")[0].lstrip("/")).resolve()
                        for href in _FETCHED.findall(html) if "//" not in href}
    base = site.resolve()
    sizes: list[int] = [p.stat().st_size for p in named if p.is_relative_to(base) and p.is_file()]
    return page.stat().st_size + sum(sizes)


def over_budget(site: Path, budget: int = FIRST_VIEW_BYTES) -> list[str]:
    """A line for each page of the built site whose first view weighs more than `budget` bytes."""
    out = []
    for page in sorted(site.rglob("*.html")):
        weight = first_view(site, page)
        if weight > budget:
            out.append(f"{page.relative_to(site).as_posix()}: a first view of {weight:,} bytes, over the site's "
                       f"{budget:,} (its HTML {page.stat().st_size:,}): fold or move what it shows")
    return out
