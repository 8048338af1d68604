"""Generated index pages of the site: the home page's state of the wiki, evidence, architectures, tags, nav.

Each function returns Markdown for a page in the staging directory; links are relative Markdown
links, so MkDocs checks every one of them in a strict build.

A listing must not grow with the wiki past what a first view can afford (400 KB): the evidence and
architectures indexes show each group's first `PREVIEW_ROWS` pages and link the whole group, paged
by `PAGE_ROWS` under `indexes/evidence/` and `indexes/architectures/` (out of the navigation and
the search index); the tags index is split by tag over pages of at most `TAG_LINKS` links (tagpages.py).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any

from kwiki.results.standing import Standing, State
from kwiki.results.states import ORDER, SECTION
from kwiki.results.store import ClaimRow, RecordRow
from kwiki.results.trace import PageTrace
from kwiki.site.render import (
    arch_anchor,
    evidence_badge,
    headline,
    html_text,
    md_text,
    relative,
    state_badge,
)
from kwiki.wiki.model import PageMeta
from kwiki.wiki.pages import Page

INDEX_DIR = "indexes"
EVIDENCE = f"{INDEX_DIR}/evidence.md"
ARCHITECTURES = f"{INDEX_DIR}/architectures.md"
TAGS = f"{INDEX_DIR}/tags.md"
EVIDENCE_DIR = f"{INDEX_DIR}/evidence"  # every page of a state, paged (the index shows the first few)
ARCHITECTURES_DIR = f"{INDEX_DIR}/architectures"
TAGS_DIR = f"{INDEX_DIR}/tags"
HOME = "index.md"
HOME_ROWS = 12
PREVIEW_ROWS = 10  # pages an index shows of each group before linking the whole group
PAGE_ROWS = 100  # pages listed on one page of a group
STATE_ORDER = ORDER  # the states and their words: kwiki.results.states
UPPER = {"nvidia": "NVIDIA", "amd": "AMD", "apis": "APIs", "ptx": "PTX", "cuda": "CUDA"}


@dataclass
class SitePage:
    """A page as the site shows it: where it is staged, its validated front matter, its standing."""

    page: Page
    rel: str  # path inside wiki/ (and the staging directory), '/'-separated
    meta: PageMeta | None
    standing: Standing | None
    history: list[ClaimRow] = field(default_factory=list)  # the results store's rows of its claims
    trace: PageTrace | None = None  # what the results store says about its measurements block

    @property
    def title(self) -> str:
        if self.meta:
            return self.meta.title
        raw = self.page.fm.data.get("title") if self.page.fm else None
        return str(raw) if raw else posixpath.splitext(posixpath.basename(self.rel))[0]


@dataclass
class LastRun:
    date: str
    gpu: str
    run_id: str


def last_run(rows: list[RecordRow | ClaimRow]) -> LastRun | None:
    if not rows:
        return None
    row = max(rows, key=lambda r: (r.date, r.run_id))
    return LastRun(row.date, row.gpu, row.run_id)


def link(page: SitePage, from_rel: str) -> str:
    return f"[{md_text(page.title)}]({relative(page.rel, from_rel)})"


def _measured_table(pages: list[SitePage], from_rel: str) -> list[str]:
    rows = ["| page | state | GPU | date | claims reproduced | headline figure |",
            "| --- | --- | --- | --- | --- | --- |"]
    for p in pages:
        st = p.standing
        assert st is not None
        rows.append(f"| {link(p, from_rel)} | {state_badge(st)} | {md_text(st.verified_on or '–')} "
                    f"| {md_text((st.date or '–')[:10])} | {st.passing} of {st.judged} | {headline(st)} |")
    return rows


def _by_state(pages: list[SitePage]) -> dict[State, list[SitePage]]:
    out: dict[State, list[SitePage]] = {s: [] for s in STATE_ORDER}
    for p in pages:
        if p.standing is not None:
            out[p.standing.state].append(p)
    for group in out.values():
        group.sort(key=lambda p: (p.title.casefold(), p.rel))
    return out


def _stat(number: object, label: str) -> str:
    return (f'<div class="kw-stat"><span class="kw-stat-n">{html_text(number)}</span>'
            f'<span class="kw-stat-l">{html_text(label)}</span></div>')


def home_block(pages: list[SitePage], run: LastRun | None, from_rel: str = HOME) -> str:
    """The wiki's state in one screen: counts, the last verify run and GPU, the measured pages."""
    groups = _by_state(pages)
    standings = [p.standing for p in pages if p.standing]
    claims = sum(s.claims for s in standings)
    judged = sum(s.judged for s in standings)
    passing = sum(s.passing for s in standings)
    measured = [p for s in STATE_ORDER[:-1] for p in groups[s]]
    out = ['<div class="kw-home" markdown>', "", '<div class="kw-stats">',
           _stat(len(pages), "pages"),
           _stat(f"{passing} / {judged}", "measured claims reproduced"),
           _stat(len(groups[State.verified]), "pages verified"),
           _stat(len(groups[State.drifted]) + len(groups[State.not_reproduced]), "drifted or not reproduced"),
           *([_stat(len(groups[State.below_goal]), "below goal")] if groups[State.below_goal] else []),
           *([_stat(len(groups[State.untraceable]), "untraceable")] if groups[State.untraceable] else []),
           _stat(claims, "claims in all"), "</div>", ""]
    if run:
        out.append(f"**Last verify run:** {md_text(run.date[:16].replace('T', ' '))} UTC on "
                   f"**{md_text(run.gpu)}** (run `{run.run_id}`).")
    else:
        out.append("**Last verify run:** none yet; no figure on this wiki has been measured by kwiki.")
    evidence, arches, tags = (relative(rel, from_rel) for rel in (EVIDENCE, ARCHITECTURES, TAGS))
    out += ["", f"Browse by [evidence]({evidence}), [architecture]({arches}) or [tag]({tags}).", ""]
    if measured:
        out += _measured_table(measured[:HOME_ROWS], from_rel)
        if len(measured) > HOME_ROWS:
            out += ["", f"And {len(measured) - HOME_ROWS} more measured pages in the [evidence index]({evidence})."]
        out.append("")
    out += ["</div>", ""]
    return "\n".join(out)


def _paged(rows: list[str], head: list[str], folder: str, stem: str, title: str) -> dict[str, str]:
    """A group's rows (Markdown lines below the table head `head`, or list items) over pages of `PAGE_ROWS`:
    `folder/stem.md`, `folder/stem-2.md`, ...; each page links every other."""
    chunks = [rows[i:i + PAGE_ROWS] for i in range(0, len(rows), PAGE_ROWS)] or [[]]
    paths = [f"{folder}/{stem}.md" if n == 0 else f"{folder}/{stem}-{n + 1}.md" for n in range(len(chunks))]
    out = {}
    for n, (path, chunk) in enumerate(zip(paths, chunks, strict=True)):
        pager = " · ".join(f"**{k + 1}**" if k == n else f"[{k + 1}]({relative(other, path)})"
                           for k, other in enumerate(paths))
        where = f" ({n + 1} of {len(paths)})" if len(paths) > 1 else ""
        out[path] = "\n".join(["---", f"title: {_yaml_text(title + where)}", "search:", "  exclude: true", "---", "",
                               *([f"Pages: {pager}", ""] if len(paths) > 1 else []), *head, *chunk, ""])
    return out


def _yaml_text(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _preview(rows: list[str], head: list[str], first: str, from_rel: str, what: str) -> list[str]:
    """The first `PREVIEW_ROWS` rows under `head`, and a link to the paged whole when there are more."""
    out = [*head, *rows[:PREVIEW_ROWS], ""]
    if len(rows) > PREVIEW_ROWS:
        out += [f"[All {len(rows)} {what}]({relative(first, from_rel)})", ""]
    return out


def _evidence_rows(state: State, group: list[SitePage], from_rel: str) -> tuple[list[str], list[str]]:
    """(table head, rows) of a state's pages, linked from staged page `from_rel`."""
    if state != State.not_measured:
        table = _measured_table(group, from_rel)
        return table[:2], table[2:]
    rows = []
    for p in group:
        st, meta = p.standing, p.meta
        assert st is not None and meta is not None
        rows.append(f"| {link(p, from_rel)} | {evidence_badge(st.evidence)} "
                    f"| {md_text(', '.join(meta.architectures) or '–')} | {st.claims} |")
    return ["| page | evidence | architectures | claims |", "| --- | --- | --- | --- |"], rows


def evidence_page(pages: list[SitePage]) -> str:
    """The evidence index: each state's meaning and first pages (`evidence_pages` holds the rest)."""
    groups = _by_state(pages)
    out = ["---", "title: By evidence", "search:", "  exclude: true", "---", "",
           "What kwiki measured, what drifted, what was never reproduced.", ""]
    for state in STATE_ORDER:
        name, meaning = SECTION[state]
        group = groups[state]
        out += [f"## {name} ({len(group)}) {{ #{state.value} }}", "", meaning, ""]
        if not group:
            out += ["None.", ""]
            continue
        head, rows = _evidence_rows(state, group, EVIDENCE)
        out += _preview(rows, head, f"{EVIDENCE_DIR}/{state.value}.md", EVIDENCE, "pages")
    return "\n".join(out)


def evidence_pages(pages: list[SitePage]) -> dict[str, str]:
    """Staged path -> Markdown of every evidence page: the index and, for each state with more pages than the
    index shows, all of them paged (the pages of one folder share their relative links)."""
    out = {EVIDENCE: evidence_page(pages)}
    for state, group in _by_state(pages).items():
        if len(group) > PREVIEW_ROWS:
            head, rows = _evidence_rows(state, group, f"{EVIDENCE_DIR}/{state.value}.md")
            out.update(_paged(rows, head, EVIDENCE_DIR, state.value, f"{SECTION[state][0]}: every page"))
    return out


def _by_arch(pages: list[SitePage]) -> list[tuple[str, list[SitePage]]]:
    by_arch: dict[str, list[SitePage]] = {}
    for p in pages:
        if p.meta is None:
            continue
        for arch in p.meta.architectures or ["any"]:
            by_arch.setdefault(arch, []).append(p)
    known = sorted((a for a in by_arch if a != "any"), key=lambda a: (int("".join(filter(str.isdigit, a)) or 0), a))
    return [(arch, sorted(by_arch[arch], key=lambda p: (p.title.casefold(), p.rel)))
            for arch in [*known, *(["any"] if "any" in by_arch else [])]]


def _arch_rows(group: list[SitePage], from_rel: str) -> list[str]:
    out = []
    for p in group:
        assert p.standing is not None
        out.append(f"- {link(p, from_rel)} {state_badge(p.standing)}")
    return out


def architectures_page(pages: list[SitePage]) -> str:
    """The architectures index: each architecture's first pages (`architectures_pages` holds the rest)."""
    out = ["---", "title: By architecture", "search:", "  exclude: true", "---", "",
           "Pages by the GPU architecture their code targets (`sm_90a` code runs only on sm_90 parts such as "
           "the H100 and H200; plain `sm_80` code runs on sm_80 and later).", ""]
    for arch, group in _by_arch(pages):
        name = "No architecture named" if arch == "any" else arch
        out += [f"## {md_text(name)} ({len(group)}) {{ #{arch_anchor(arch)} }}", ""]
        first = f"{ARCHITECTURES_DIR}/{arch_anchor(arch)}.md"
        out += _preview(_arch_rows(group, ARCHITECTURES), [], first, ARCHITECTURES, f"pages for {md_text(name)}")
    return "\n".join(out)


def architectures_pages(pages: list[SitePage]) -> dict[str, str]:
    """Staged path -> Markdown of every architectures page: the index and each large group, paged."""
    out = {ARCHITECTURES: architectures_page(pages)}
    for arch, group in _by_arch(pages):
        if len(group) > PREVIEW_ROWS:
            rows = _arch_rows(group, f"{ARCHITECTURES_DIR}/{arch_anchor(arch)}.md")
            name = "No architecture named" if arch == "any" else arch
            out.update(_paged(rows, [], ARCHITECTURES_DIR, arch_anchor(arch), f"{name}: every page"))
    return out


def _section_name(directory: str) -> str:
    return html_text(UPPER.get(directory, directory.replace("-", " ").replace("_", " ").capitalize()))


NAV_ITEMS = 12  # entries of one folder in the navigation before they are grouped


def nav(pages: list[SitePage]) -> list[Any]:
    """The navigation: home, the indexes, then the wiki's folders (pages by title, folders by name). A folder of
    more than `NAV_ITEMS` entries shows them in groups of `NAV_ITEMS` named by their first and last titles'
    initials: Material's `navigation.prune` keeps only the current group's entries in a page's HTML, so a
    page's navigation does not grow with its folder."""
    tree: dict[str, Any] = {}  # folder name + '/' -> subtree, page rel -> SitePage
    for p in pages:
        if p.rel == HOME:
            continue
        node = tree
        for part in p.rel.split("/")[:-1]:
            node = node.setdefault(part + "/", {})
        node[p.rel] = p

    def entries(node: dict[str, Any]) -> list[Any]:
        files = sorted((v for k, v in node.items() if not k.endswith("/")),
                       key=lambda p: (not p.rel.endswith("/index.md"), p.title.casefold(), p.rel))
        folders = sorted(k for k in node if k.endswith("/"))
        names = [p.title for p in files] + [_section_name(k[:-1]) for k in folders]
        items = [p.rel for p in files] + [{_section_name(k[:-1]): entries(node[k])} for k in folders]
        if len(items) <= NAV_ITEMS:
            return items
        return [{_initials(names[i], names[min(i + NAV_ITEMS, len(items)) - 1]): items[i:i + NAV_ITEMS]}
                for i in range(0, len(items), NAV_ITEMS)]

    return [HOME, {"Indexes": [EVIDENCE, ARCHITECTURES, TAGS]}, *entries(tree)]


def _initials(first: str, last: str) -> str:
    a, b = (html_text(t.strip()[:1].upper() or "?") for t in (first, last))
    return a if a == b else f"{a} – {b}"
