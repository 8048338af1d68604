"""The glossary: the terms the wiki assumes, one definition each, and the first use of each on a page linked to it.

A page that defines terms lists them in its front matter (`glossary`, kwiki.wiki.model.Term); the site writes
them on that page as a list of definitions, each with an anchor (`term-<slug>`) and a link to the page that
measures it. On every other page the first use of a term (or one of its aliases), in running text, links to
its definition: not in code (fenced or inline), headings, tables, admonition titles, raw HTML lines or
existing links, and each term once per page (its first use), longer terms before the shorter ones they contain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kwiki.site.listings import SitePage
from kwiki.site.render import md_text, relative
from kwiki.wiki.model import Term

_FENCE = re.compile(r"^\s*(```|~~~)")
_SKIP_LINE = re.compile(r"^\s*(#|\||<|!!!|\?\?\?|---|\[[^\]]*\]:)")
# inline code, links and images, autolinks and bare URLs, HTML tags: left as they are
_PROTECTED = re.compile(r"(`+)[^`]*?\1|!?\[[^\]]*\]\([^)]*\)|<[^>\n]*>|https?://\S+")


def anchor(term: str) -> str:
    return "term-" + re.sub(r"[^a-z0-9]+", "-", term.lower()).strip("-")


@dataclass(frozen=True)
class Entry:
    term: Term
    page_rel: str  # the staged page that defines it


def entries(pages: list[SitePage]) -> list[Entry]:
    """Every term some page defines, longest spelling first (so 'mbarrier phase' wins over 'mbarrier')."""
    out = [Entry(t, sp.rel) for sp in pages if sp.meta is not None for t in sp.meta.glossary]
    return sorted(out, key=lambda e: (-max(len(s) for s in [e.term.term, *e.term.aliases]), e.term.term))


def _pattern(e: Entry) -> re.Pattern[str]:
    words = sorted([e.term.term, *e.term.aliases], key=len, reverse=True)
    return re.compile(r"(?<![\w-])(" + "|".join(re.escape(w) for w in words) + r")(?![\w-])", re.IGNORECASE)


def link_first_uses(lines: list[str], glossary: list[Entry], page_rel: str,
                    skip: frozenset[int] = frozenset()) -> list[str]:
    """`lines` (a page's Markdown body) with the first use of each term in running text linked to its definition;
    a page's own terms are not linked on it, nor the lines of `skip` (generated regions)."""
    todo = [(e, _pattern(e)) for e in glossary if e.page_rel != page_rel]
    out: list[str] = []
    fence = None
    for n, line in enumerate(lines):
        m = _FENCE.match(line)
        if m and (fence is None or m.group(1) == fence):
            fence = None if fence else m.group(1)
            out.append(line)
            continue
        if fence or not todo or n in skip or _SKIP_LINE.match(line) or line.startswith("    "):
            out.append(line)
            continue
        for e, pattern in list(todo):
            line, found = _link_once(line, pattern, f"{relative(e.page_rel, page_rel)}#{anchor(e.term.term)}")
            if found:
                todo.remove((e, pattern))
        out.append(line)
    return out


def _link_once(line: str, pattern: re.Pattern[str], href: str) -> tuple[str, bool]:
    """The line with the first match of `pattern` outside code, links and HTML made a link to `href`."""
    pos = 0
    for protected in [*_PROTECTED.finditer(line), None]:
        stop = protected.start() if protected is not None else len(line)
        m = pattern.search(line, pos, stop)
        if m is not None:
            return line[:m.start()] + f"[{m.group(1)}]({href})" + line[m.end():], True
        if protected is None:
            break
        pos = protected.end()
    return line, False


def definitions(sp: SitePage, pages: list[SitePage]) -> str:
    """The definitions a page holds (its `glossary`), as Markdown: each term with its anchor, its definition and
    a link to the page that measures it."""
    assert sp.meta is not None
    by_id = {p.meta.id: p for p in pages if p.meta is not None}
    out = ['<div class="kw-glossary" markdown>', ""]
    for t in sorted(sp.meta.glossary, key=lambda t: t.term.casefold()):
        measured = by_id.get(t.measured_on) if t.measured_on else None
        also = f" (also: {', '.join(md_text(a) for a in t.aliases)})" if t.aliases else ""
        where = f" Measured on [{md_text(measured.title)}]({relative(measured.rel, sp.rel)})." if measured else ""
        out.append(f'- <span id="{anchor(t.term)}"></span>**{md_text(t.term)}**{also}: {md_text(t.definition)}{where}')
    out += ["", "</div>", ""]
    return "\n".join(out)
