"""The search index Material wrote, cut to what a first view can afford and ranked by title and summary.

Material fetches `search/search_index.json` on every first view, with its theme; the whole site's
text would be most of what a reader waits for (600 KB, two thirds of a page view, before this
pass). kwiki's generated tables, badges and artifact sources are kept out of it at the source
(`data-search-exclude`, `search: exclude`); this pass then keeps, for each section, its title only (the
site's weight budget: 400 KB a first view, 271 of them Material's CSS and scripts), and for each page:

- its summary, shown under the page's hit and indexed as a `summary` field that lunr boosts below
  the title and above everything else (`FIELDS`);
- its tags, once (Material repeats them on every section);
- its `terms`: every distinct code span of the page (`cp.async.bulk`, `mbarrier`, `ldmatrix`), the
  words an engineer searches for.

`kwiki query` and the MCP tools search the full text; the site's search finds pages and sections.

The index loads on first use of search, not with every page (`defer_index`): a first view's weight
must not grow with the wiki (324.7 KB of index at 300 pages). The search worker starts then too (39.5 KB).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from kwiki.core.writefile import write_atomic

INDEX = "search/search_index.json"
BUNDLE = "assets/javascripts/bundle.*.min.js"
# Material's search start-up (setupSearchWorker in its bundle) fetches the index at page load over http(s),
# and under file:// only once the search dialog opens: `merge(of(location.protocol !== "file:"),
# watchToggle("search")).pipe(first(active => active), switchMap(() => index$))`. `defer_index` makes every
# protocol take the file:// path by rewriting that one expression to `false` in the bundle the site serves
# (a file of the site itself, like the rest of Material: nothing inline, nothing from another host). Chosen
# over a split index, which needs a search worker and an index format of kwiki's own: this keeps Material's
# worker, index and ranking (search finds what it found before) and runs a code path Material itself ships.
# The first focus of the search box (a click, or the `/`, `s`, `f` keys) opens the dialog and loads it.
_EAGER = re.compile(r'([\w$]+\()location\.protocol!=="file:"(\),[\w$]+\("search"\)\))')
_DEFERRED = re.compile(r'[\w$]+\(!1\),[\w$]+\("search"\)\)')  # what `defer_index` leaves
# The worker that runs the search is created at start-up too (`setupSearchWorker(url, index$)` calls
# `watchWorker(url, worker = new Worker(url))`): 39.5 KB of script that every first view fetched and no page
# uses before its reader searches (a tenth of the 400 KB a first view may weigh). `defer_index` gives that
# default a stand-in with the three members Material uses (`fromEvent` adds and removes the listeners,
# `postMessage` sends): it creates the worker on the first message, which is the index sent on first use of
# search, and hands it the listeners added before.
_WORKER = re.compile(r"(function [\w$]+\(([\w$]+),[\w$]+=)new Worker\(\2\)\)")
_LAZY = ("((kwW,kwL=[])=>({{addEventListener(...kwA){{kwL.push(kwA);kwW&&kwW.addEventListener(...kwA)}},"
         "removeEventListener(...kwA){{kwL=kwL.filter(kwX=>kwX[1]!==kwA[1]);kwW&&kwW.removeEventListener(...kwA)}},"
         "postMessage(kwM){{kwW||(kwW=new Worker({url}),kwL.forEach(kwA=>kwW.addEventListener(...kwA)));"
         "kwW.postMessage(kwM)}}}}))()")  # names no minifier writes: the function's own parameter stays in sight
# lunr boosts per field: a title match first, then the page's summary, its terms and tags, then the text
FIELDS = {"title": {"boost": 1000.0}, "summary": {"boost": 100.0}, "terms": {"boost": 20.0},
          "tags": {"boost": 20.0}, "text": {"boost": 1.0}}
SENTENCE = 0  # characters of a section's text kept (0: none; its title names it)
# sections kwiki writes on every page (render.py's sources and artifact-source lists, the measurements
# heading of every page): the same few titles on each page, which a search hit never needs
GENERATED = frozenset({"Measurements", "Sources", "Artifact sources"})
_CODE = re.compile(r"<code>(.*?)</code>", re.DOTALL)
_MARKUP = re.compile(r"<[^>]*>")
_SPACE = re.compile(r"\s+")
_END = re.compile(r"(?<=[.:;!?])\s")


def plain(text: str) -> str:
    """An entry's text as words: markup dropped, whitespace collapsed."""
    return _SPACE.sub(" ", _MARKUP.sub(" ", text)).strip()


def first_sentence(text: str, limit: int = SENTENCE) -> str:
    if limit <= 0:
        return ""
    sentence = _END.split(text, maxsplit=1)[0]
    return sentence if len(sentence) <= limit else sentence[: limit - 1].rsplit(" ", 1)[0] + "…"


def _terms(texts: list[str]) -> str:
    seen: dict[str, str] = {}
    for text in texts:
        for m in _CODE.finditer(text):
            term = plain(m.group(1))
            if term and len(term) <= 40:
                seen.setdefault(term.lower(), term)
    return " ".join(seen.values())


def slim(data: dict[str, object], summaries: dict[str, str]) -> dict[str, object]:
    """The index `data` cut down (see the module's docstring); `summaries` maps a page's location to its summary."""
    docs = data.get("docs")
    config = data.get("config")
    if not isinstance(docs, list) or not isinstance(config, dict):
        return data
    entries = [e for e in docs if isinstance(e, dict) and isinstance(e.get("location"), str)]
    by_page: dict[str, list[str]] = {}
    for e in entries:
        by_page.setdefault(e["location"].split("#")[0], []).append(str(e.get("text", "")))
    out = []
    for e in entries:
        location = e["location"]
        if "#" in location and plain(str(e.get("title", ""))) in GENERATED:
            continue
        item: dict[str, object] = {"location": location, "title": plain(str(e.get("title", ""))),
                                   "text": first_sentence(plain(str(e.get("text", ""))))}
        if "#" not in location:  # the page's first entry carries what belongs to the whole page
            summary = summaries.get(location)
            if summary:
                item["summary"] = summary
                item["text"] = summary
            terms = _terms(by_page[location])
            if terms:
                item["terms"] = terms
            if e.get("tags"):
                item["tags"] = e["tags"]
        if "boost" in e:
            item["boost"] = e["boost"]
        out.append(item)
    return {"config": {**config, "fields": FIELDS}, "docs": out}


def rewrite(site_dir: Path, summaries: dict[str, str]) -> int:
    """Rewrite the site's search index in place (see `slim`); its size in bytes (0: the site has none)."""
    path = site_dir / INDEX
    if not path.is_file():
        return 0
    data = json.loads(path.read_text(encoding="utf-8"))
    text = json.dumps(slim(data, summaries), separators=(",", ":"), ensure_ascii=False)
    write_atomic(path, text.encode("utf-8"))
    return len(text.encode("utf-8"))


_KEEP = re.compile(r"(<(pre|script|style|textarea)\b.*?</\2\s*>)", re.IGNORECASE | re.DOTALL)
_INDENT = re.compile(r"[ \t\r\f]*\n\s*")


def compact_html(text: str) -> str:
    """HTML with each run of whitespace that holds a line break (the templates' indentation and blank lines)
    cut to one line break, outside <pre>, <script>, <style> and <textarea>: renders the same (HTML collapses
    such runs), weighs a third less."""
    parts = _KEEP.split(text)
    out = []
    for i, part in enumerate(parts):
        kind = i % 3  # re.split with two groups: text, whole kept element, its tag name
        if kind == 0:
            out.append(_INDENT.sub("\n", part))
        elif kind == 1:
            out.append(part)
    return "".join(out)


def compact_site(site_dir: Path) -> None:
    """`compact_html` over every HTML page of the site, in place."""
    for path in sorted(site_dir.rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        compact = compact_html(text)
        if compact != text:
            write_atomic(path, compact.encode("utf-8"))


def deferred(bundle: str) -> tuple[str, str | None]:
    """Material's bundle with the search index and its worker loaded on first use of search (`_EAGER`, `_WORKER`),
    and why it could not be (an expression not found exactly once: the bundle returned as it was) or None."""
    patched, n = _EAGER.subn(r"\g<1>!1\g<2>", bundle)
    if n != 1:
        return bundle, (f"Material's search start-up not found as expected ({n} matches); the search index would "
                        "load with every page (kwiki.site.searchindex._EAGER)")
    patched, n = _WORKER.subn(lambda m: m.group(1) + _LAZY.format(url=m.group(2)) + ")", patched)
    if n != 1:
        return bundle, (f"Material's search worker not found as expected ({n} matches); it would load with every "
                        "page (kwiki.site.searchindex._WORKER)")
    return patched, None


def defer_index(site_dir: Path) -> str | None:
    """Make the site's Material bundle fetch the search index and start its worker on first use of search
    (`deferred`); why it could not (Material's bundle missing, or not as expected), or None."""
    bundles = sorted(site_dir.glob(BUNDLE))
    if len(bundles) != 1:
        return f"{BUNDLE}: {len(bundles)} files, expected Material's one bundle; the search index loads with every page"
    text = bundles[0].read_text(encoding="utf-8")
    if _DEFERRED.search(text) and not _EAGER.search(text) and not _WORKER.search(text):
        return None  # deferred already
    patched, why = deferred(text)
    if why is not None:
        return f"{bundles[0].relative_to(site_dir).as_posix()}: {why}"
    write_atomic(bundles[0], patched.encode("utf-8"))
    return None
