"""The tags index, split by tag over pages of at most `TAG_LINKS` page links, so that none grows with the wiki.

Material's tags plugin fills each page's listing (`<!-- material/tags { include: [...] } -->`) and links
a page's tag chips to the listing that features the tag; every tag is included in exactly one listing, so
each chip has one place to lead to. A wiki whose tags fit one page gets the one plain listing of every tag.
"""

from __future__ import annotations

import json

from kwiki.site.listings import TAGS, TAGS_DIR, SitePage
from kwiki.site.render import html_text, md_text, relative

TAG_LINKS = 120  # page links on one page of the tags index (about 25 KB of HTML at this wiki's titles, ~200 B a link)
DIRECTIVE = "material/tags"
INTRO = "Every tag with its pages."


def page_tags(sp: SitePage) -> list[str]:
    """The page's tags as the staged front matter gives them to Material (HTML-escaped: it prints them raw)."""
    if sp.meta is not None:
        tags = list(sp.meta.tags)
    else:
        raw = sp.page.fm.data.get("tags") if sp.page.fm else None
        tags = [str(t) for t in (raw if isinstance(raw, list) else [raw] if raw else [])]
    return [html_text(t) for t in tags]


def _groups(pages: list[SitePage]) -> list[list[str]]:
    """Tags in name order, cut into runs whose page links add up to at most `TAG_LINKS` (a larger tag alone)."""
    counts: dict[str, int] = {}
    for sp in pages:
        for tag in dict.fromkeys(page_tags(sp)):
            counts[tag] = counts.get(tag, 0) + 1
    groups: list[list[str]] = [[]]
    links = 0
    for tag in sorted(counts):
        if groups[-1] and links + counts[tag] > TAG_LINKS:
            groups.append([])
            links = 0
        groups[-1].append(tag)
        links += counts[tag]
    return groups


def _quoted(tag: str) -> str:
    """A tag as a YAML string inside the listing's HTML comment: no '>' (so no '-->' ends the comment early)."""
    return json.dumps(tag).replace("<", "\\u003c").replace(">", "\\u003e")


def tags_pages(pages: list[SitePage]) -> dict[str, str]:
    """Staged path -> Markdown of each page of the tags index (out of the search index: it names every tag and
    title, so it would match nearly every query)."""
    groups = _groups(pages)
    if len(groups) == 1:
        return {TAGS: f"---\ntitle: Tags\nsearch:\n  exclude: true\n---\n\n{INTRO}\n\n<!-- {DIRECTIVE} -->\n"}
    paths = [TAGS if n == 0 else f"{TAGS_DIR}/{n + 1}.md" for n in range(len(groups))]
    out = {}
    for n, (path, group) in enumerate(zip(paths, groups, strict=True)):
        pager = " · ".join(
            f"**{md_text(g[0])} – {md_text(g[-1])}**" if k == n
            else f"[{md_text(g[0])} – {md_text(g[-1])}]({relative(other, path)})"
            for k, (other, g) in enumerate(zip(paths, groups, strict=True)))
        include = ", ".join(_quoted(t) for t in group)
        out[path] = (f"---\ntitle: Tags ({n + 1} of {len(groups)})\nsearch:\n  exclude: true\n---\n\n{INTRO} "
                     f"Tags by name: {pager}\n\n<!-- {DIRECTIVE} {{ include: [{include}] }} -->\n")
    return out
