"""`kwiki query` and `kwiki tags`: find pages by tag, architecture, type, evidence, op, GPU, text.

Filters combine with AND. Within `--tag`, every tag must match unless `--any` is given.

* ``--tag T``: tags are compared as the page model normalises them (lower case, spaces and
  underscores become '-'), so ``--tag "Warp Specialization"`` finds ``warp-specialization``;
  a tag no page has is a usage error that names the closest ones (so is an unknown ``--op``).
* ``--arch A``: pages with at least one architecture whose code runs on A-class hardware,
  by `kwiki.core.arch.compatible`: the query names hardware, so its own suffix is ignored;
  ``sm_90a`` pages run on sm_90 GPUs (H100, H200) and match ``--arch sm_90``, ``sm_100a``
  pages do not; family pages (``sm_100f``) match later minors of the same major; generic
  pages (``sm_80``) match every later GPU. A page that names no architecture is not matched.
* ``--type T``: the page type, exactly (technique, kernel, pattern, ...); a name that is not a
  page type is a usage error.
* ``--evidence L``: effective evidence level at least L on spec < source-reported <
  measured < verified (kwiki's measurements block wins over what the author wrote).
* ``--op OP``: one of the page's ``applies_to_ops``, case-insensitive.
* ``--verified-on GPU``: the page has measurements on a GPU whose name contains the words of
  GPU, whole and in order, case-insensitive (``--verified-on h200`` finds "NVIDIA H200",
  ``--verified-on h20`` does not).
* ``--text WORDS``: full-text search (SQLite FTS5, Porter stemming) over titles, summaries,
  tags, page types, claims and bodies (without kwiki's generated tables); every word must
  occur; results are ranked by BM25 with a title weighing 10 times, a summary, tag or type 4
  times, a claim twice what the body says. Without ``--text`` results are sorted by id.
* ``--detail brief|full``: brief (the default of ``--json`` and of the MCP tools) gives each
  hit's id, title, type, evidence level, state, the summary's leading sentences (300 characters at
  most) and the (at most 3) claims that match the text, measured ones first; full gives every field
  and every claim, with each run's provenance once (``runs``).
* ``--limit N``: at most N results (0: all); ``total`` in the JSON says how many matched.

Bounds, so that no query can take the index hostage: ``--text`` at most `MAX_TEXT_CHARS`
characters and `MAX_TEXT_WORDS` distinct words, at most `MAX_TAGS` tags, ``--limit`` at most
`MAX_LIMIT`; more is a usage error (a tool error over MCP).

Output is JSON when stdout is not a terminal or with ``--json`` (schema/query.schema.json),
a table otherwise. This module runs on every query: it imports neither pydantic nor yaml,
and prints what the index stored when it read the pages.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

from kwiki import SCHEMA_VERSION
from kwiki.agents.entries import Damaged, crc, stored_json
from kwiki.agents.index import with_index
from kwiki.core.errors import UsageError
from kwiki.core.sentences import lead

# BM25 column weights: title, summary, tags (and type), body, claims (the order of the fts table's columns)
RANK = "bm25(fts, 10.0, 4.0, 4.0, 1.0, 2.0)"
_WORD = re.compile(r"[^\W_]+")  # letters and digits, as FTS5's unicode61 tokenizer splits words
_GPU_WORD = re.compile(r"[a-z0-9]+")
MAX_TEXT_CHARS = 1000
MAX_TEXT_WORDS = 64
MAX_TAGS = 64
MAX_LIMIT = 1_000_000
# how an error names each filter: the CLI's flags, or (`Query(names=TOOL_NAMES)`) the MCP tools' parameters
CLI_NAMES = {"tags": "--tag", "arch": "--arch", "type": "--type", "evidence": "--evidence", "op": "--op",
             "verified_on": "--verified-on", "text": "--text", "limit": "--limit", "detail": "--detail"}
TOOL_NAMES = {key: key for key in CLI_NAMES}


class Query:
    """What `kwiki query` (and the MCP tools) ask the index for. A plain class, not a dataclass:
    importing `dataclasses` costs a warm query about 8 ms."""

    __slots__ = (
        "any_tag",
        "arch",
        "best_first",
        "by_match",
        "coverage",
        "detail",
        "evidence",
        "limit",
        "names",
        "op",
        "tags",
        "text",
        "type",
        "types",
        "verified_on",
    )

    def __init__(self, *, tags: list[str] | None = None, any_tag: bool = False, arch: str | None = None,
                 type: str | None = None, evidence: str | None = None, op: str | None = None,
                 text: str | None = None, verified_on: str | None = None, limit: int = 50,
                 types: list[str] | None = None, best_first: bool = False, by_match: bool = False,
                 detail: str = "full", names: dict[str, str] | None = None, coverage: bool = False):
        self.tags = list(tags or [])
        self.any_tag = any_tag
        self.arch = arch
        self.type = type
        self.evidence = evidence
        self.op = op
        self.text = text
        self.verified_on = verified_on
        self.limit = limit  # 0: no limit
        self.types = list(types or [])  # any of these page types (with `type`, both apply)
        self.best_first = best_first  # highest evidence level first (before rank or id)
        self.by_match = by_match  # pages whose tags and ops match the query best first (before evidence)
        self.detail = detail  # "brief": id, title, type, evidence, summary, the matching claims; "full": all
        self.names = names or CLI_NAMES  # how errors name the filters
        self.coverage = coverage  # say whether pages cover the lookup (kwiki.agents.coverage); a tag or op no page
        # has is then `covered: false`, not an error

    def __repr__(self) -> str:
        return "Query(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__) + ")"


def normalize_tag(text: str) -> str:
    """A tag as the model stores it (`kwiki.wiki.fields.tag`, without its validation)."""
    return re.sub(r"[\s_]+", "-", text.strip().lower())


def fts_query(words: str, name: str = "--text") -> str:
    """FTS5 query text in which every word must occur; never a syntax error, whatever `words` holds (`name`: how an
    error names the text)."""
    if len(words) > MAX_TEXT_CHARS:
        raise UsageError(f"{name}: the search text is {len(words)} characters long; a search takes at most "
                         f"{MAX_TEXT_CHARS} characters ({MAX_TEXT_WORDS} words)")
    tokens = list(dict.fromkeys(t.lower() for t in _WORD.findall(words)))  # FTS5 folds case; a repeat adds nothing
    if not tokens:
        raise UsageError(f"{name} {words!r}: no words to search for")
    if len(tokens) > MAX_TEXT_WORDS:
        raise UsageError(f"{name}: the search text has {len(tokens)} different words; a search takes at most "
                         f"{MAX_TEXT_WORDS}")
    return " ".join('"' + t.replace('"', '""') + '"' for t in tokens)


def _where(conn: sqlite3.Connection, q: Query) -> tuple[list[str], list[Any]]:
    where: list[str] = []
    params: list[Any] = []
    if len(q.tags) > MAX_TAGS:
        raise UsageError(f"{q.names['tags']}: {len(q.tags)} tags given; a query takes at most {MAX_TAGS}")
    tags = sorted({normalize_tag(t) for t in q.tags if t.strip()})
    _known(conn, "tag", tags, q.names["tags"], "no page has this tag")
    if tags:
        marks = ",".join("?" * len(tags))
        having = "" if q.any_tag or len(tags) == 1 else f" GROUP BY page HAVING count(*) = {len(tags)}"
        where.append(f"p.pk IN (SELECT page FROM facets WHERE kind = 'tag' AND value IN ({marks}){having})")
        params += tags
    if q.arch:
        from kwiki.agents.gpus import hardware_arch
        from kwiki.core.arch import ArchError, compatible, parse_arch

        arch = hardware_arch(q.arch)
        try:
            parse_arch(arch)
        except ArchError as exc:
            raise UsageError(f"{q.names['arch']}: {exc}; or a GPU such as 'H100', 'H200', 'Hopper', 'B200', "
                             "'Blackwell', 'A100'") from None
        known = [row[0] for row in conn.execute("SELECT DISTINCT value FROM facets WHERE kind = 'arch'")]
        archs = sorted(a for a in known if compatible(a, arch))
        marks = ",".join("?" * len(archs))
        where.append(f"p.pk IN (SELECT page FROM facets WHERE kind = 'arch' AND value IN ({marks}))")
        params += archs
    if q.type:
        where.append("p.type = ?")
        params += _page_types(conn, [q.type], q.names["type"])
    if q.types:
        where.append(f"p.type IN ({','.join('?' * len(q.types))})")
        params += _page_types(conn, q.types, q.names["type"])
    if q.evidence:
        from kwiki.wiki.evidence import EvidenceLevel

        try:
            rank = EvidenceLevel(q.evidence.strip().lower()).rank
        except ValueError:
            levels = ", ".join(level.value for level in EvidenceLevel)
            raise UsageError(f"{q.names['evidence']} {q.evidence!r}: not an evidence level "
                             f"(one of: {levels})") from None
        where.append("p.evidence >= ?")
        params.append(rank)
    if q.op:
        _known(conn, "op", [q.op.strip().lower()], q.names["op"], "no page applies to this operation")
        where.append("p.pk IN (SELECT page FROM facets WHERE kind = 'op' AND value = ?)")
        params.append(q.op.strip().lower())
    if q.verified_on:
        want = _GPU_WORD.findall(q.verified_on.lower())
        if not want:
            raise UsageError(f"{q.names['verified_on']} {q.verified_on!r}: no GPU name to look for")
        known = [row[0] for row in conn.execute("SELECT DISTINCT value FROM facets WHERE kind = 'gpu'")]
        gpus = sorted(g for g in known if _has_words(_GPU_WORD.findall(g), want))
        where.append(f"p.pk IN (SELECT page FROM facets WHERE kind = 'gpu' AND value IN ({','.join('?' * len(gpus))}))")
        params += gpus
    return where, params


class NotCovered(UsageError):
    """A tag or op no page has: a usage error for `kwiki query`, `covered: false` for the MCP tools."""

    def __init__(self, message: str, value: str):
        super().__init__(message)
        self.value = value


def _known(conn: sqlite3.Connection, kind: str, values: list[str], option: str, why: str) -> None:
    """A usage error, with the closest known values, for a tag or op no page has (it would match nothing)."""
    if not values:
        return
    known = {row[0] for row in conn.execute("SELECT DISTINCT value FROM facets WHERE kind = ?", (kind,))}
    for value in values:
        if value not in known:
            from kwiki.core.suggest import did_you_mean

            raise NotCovered(f"{option} {value!r}: {why}{did_you_mean(value, sorted(known))}", value)


def _has_words(words: list[str], want: list[str]) -> bool:
    """Whether `want` occurs in `words` as a run of whole words ('h200' in 'nvidia h200', 'h20' not)."""
    n = len(want)
    return any(words[i : i + n] == want for i in range(len(words) - n + 1))


def _page_types(conn: sqlite3.Connection, names: list[str], option: str = "--type") -> list[str]:
    """`names` as page types; a name that is no page type is a usage error that lists them."""
    wanted = [name.strip().lower() for name in names]
    present = {row[0] for row in conn.execute("SELECT DISTINCT type FROM pages")}
    if all(name in present for name in wanted):
        return wanted
    from kwiki.core.suggest import did_you_mean
    from kwiki.wiki.model import PageType  # only when no indexed page has the type: the model is slow to import

    valid = [t.value for t in PageType]
    for name, given in zip(wanted, names, strict=True):
        if name not in valid:
            raise UsageError(f"{option} {given!r}: not a page type (one of: {', '.join(valid)})"
                             + did_you_mean(name, valid))
    return wanted


def search_conn(conn: sqlite3.Connection, q: Query, *, raw: bool = False) -> dict[str, Any]:
    """The JSON document of `kwiki query` (schema/query.schema.json), from an open index.

    With `raw`, each result is left as the JSON text the index stored (for `render_json`).
    """
    if not 0 <= q.limit <= MAX_LIMIT:
        raise UsageError(f"{q.names['limit']} {q.limit}: must be 0 (no limit) to {MAX_LIMIT}")
    if q.detail not in DETAILS:
        raise UsageError(f"{q.names['detail']} {q.detail!r}: one of {', '.join(DETAILS)}")
    try:
        where, params = _where(conn, q)
    except NotCovered as exc:
        if not q.coverage:
            raise
        from kwiki.agents.coverage import miss

        return {"schema_version": SCHEMA_VERSION, "detail": q.detail, "total": 0, "results": [],
                **miss(conn, q.text, [exc.value], [])}
    doc = _search(conn, q, list(where), list(params), raw)
    if q.coverage and q.text and doc.get("covered") is False:
        doc = _relaxed(conn, q, where, params, raw) or doc
    return doc


def _relaxed(conn: sqlite3.Connection, q: Query, where: list[str], params: list[Any], raw: bool
             ) -> dict[str, Any] | None:
    """The lookup again with its topic words only (kwiki.agents.coverage.topic_words: no numbers, shapes or GPU
    names, which a page's text seldom holds with the rest), when that finds a page that covers it; the words
    left out are named in `ignored_words`. None when it finds none either."""
    from kwiki.agents.coverage import topic_words

    topic = topic_words(q.text)
    every = list(dict.fromkeys(w.lower() for w in _WORD.findall(q.text or "")))
    if not topic or len(topic) == len(every):
        return None
    relaxed = Query(**{k: getattr(q, k) for k in Query.__slots__ if k != "text"}, text=" ".join(topic))
    doc = _search(conn, relaxed, list(where), list(params), raw, claim_words=q.text)
    if not doc.get("covered"):
        return None
    doc["ignored_words"] = [w for w in every if w not in topic]
    return doc


def _search(conn: sqlite3.Connection, q: Query, where: list[str], params: list[Any], raw: bool,
            claim_words: str | None = None) -> dict[str, Any]:
    """The query over the index (`claim_words`: the words a brief hit's claims are matched with, if not `q.text`)."""
    cover: dict[str, Any] = {}
    if q.text:
        source = "pages p JOIN fts ON fts.rowid = p.pk"
        where.insert(0, "fts MATCH ?")
        params.insert(0, fts_query(q.text, q.names["text"]))
        order = f"{RANK}, p.id, p.path"
    else:
        source, order = "pages p", "p.id, p.path"
    if q.best_first:
        order = "p.evidence DESC, " + order
    condition = (" WHERE " + " AND ".join(where)) if where else ""
    sql = f"SELECT p.pk FROM {source}{condition} ORDER BY {order}"
    if q.by_match or q.text:  # every hit, ranked here, then cut
        hits = [row[0] for row in conn.execute(sql, params)]
        if q.text:
            hits = _by_coverage(conn, hits, q.text)
        if q.by_match:
            hits = _by_match(conn, hits, q)
        if q.coverage:
            cover = _coverage(conn, q, hits)
            hits = cover.pop("hits")
        total = len(hits)
        hits = hits[: q.limit] if q.limit else hits
    else:
        hits = [row[0] for row in conn.execute(sql + (f" LIMIT {int(q.limit)}" if q.limit else ""), params)]
        if q.limit and len(hits) == q.limit:
            total = conn.execute(f"SELECT count(*) FROM {source}{condition}", params).fetchone()[0]
        else:
            total = len(hits)
    if q.coverage and not cover:
        cover = {"covered": True} if hits else _coverage(conn, q, [])
        cover.pop("hits", None)
    results = _results(conn, q, hits, raw, claim_words or q.text)
    return {"schema_version": SCHEMA_VERSION, "detail": q.detail, "total": total, "results": results, **cover}


def _results(conn: sqlite3.Connection, q: Query, hits: list[int], raw: bool, text: str | None) -> list[Any]:
    """The stored views of `hits`, brief or full (raw: as the JSON text the index stored)."""
    stored: dict[int, tuple[str, int]] = {}
    for i in range(0, len(hits), 500):
        chunk = hits[i : i + 500]
        marks = ",".join("?" * len(chunk))
        stored.update((pk, (text, sum_)) for pk, text, sum_ in
                      conn.execute(f"SELECT pk, result, crc FROM views WHERE pk IN ({marks})", chunk))
    if q.detail == "brief":
        words = [w.lower() for w in _WORD.findall(text or "")]
        results: list[Any] = [brief(stored_json(stored[pk][0]), words) for pk in hits]
    elif raw:  # pasted as they are: each must be what the index wrote (a damaged index is rebuilt)
        results = [stored[pk][0] for pk in hits]
        if any(crc(text) != sum_ for text, sum_ in stored.values()):
            raise Damaged("a stored query result does not match its checksum")
    else:
        results = [stored_json(stored[pk][0]) for pk in hits]
    return results


def _coverage(conn: sqlite3.Connection, q: Query, hits: list[int]) -> dict[str, Any]:
    """`covered`, the hits that cover the lookup (`hits`) and, apart, those that only mention its words; with no
    hit that covers it, the nearest tags and pages (kwiki.agents.coverage)."""
    from kwiki.agents.coverage import covering, mentions_view, miss

    covers, mentioned = covering(conn, hits, q.text, by_filter=bool(q.tags or q.op))
    if not covers:
        return {"hits": [], **miss(conn, q.text, [*q.tags, *([q.op] if q.op else [])], mentioned)}
    out: dict[str, Any] = {"hits": covers, "covered": True}
    if mentioned:
        out["mentions"] = mentions_view(conn, mentioned)
    return out


def _by_coverage(conn: sqlite3.Connection, hits: list[int], text: str) -> list[int]:
    """`hits` (in BM25 order) with the pages whose title, tags or type name more of the words first, then
    those whose summary does: on a small wiki a word every page has somewhere ('pitfalls' in a link) weighs nothing in
    BM25, though the page titled with it is the one asked for. Stable within a count."""
    if len(hits) < 2:
        return hits
    named = dict.fromkeys(hits, 0)  # words in the title, tags or type
    summed = dict.fromkeys(hits, 0)  # words in the summary
    for token in fts_query(text).split(" "):
        for count, columns in ((named, "{title tags}"), (summed, "summary")):
            for (pk,) in conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (f"{columns} : {token}",)):
                if pk in count:
                    count[pk] += 1
    position = {pk: n for n, pk in enumerate(hits)}
    return sorted(hits, key=lambda pk: (-named[pk], -summed[pk], position[pk]))


def _by_match(conn: sqlite3.Connection, hits: list[int], q: Query) -> list[int]:
    """`hits` with the pages that match the query most specifically first: a page tagged with the op
    asked for, then one that applies to fewer ops (a bf16 GEMV kernel before a technique for every
    memory-bound op), then more of the tags asked for; then the highest evidence; then as they came."""
    if not hits:
        return hits
    tags = {normalize_tag(t) for t in q.tags}
    op = q.op.strip().lower() if q.op else None
    page_tags: dict[int, set[str]] = {pk: set() for pk in hits}
    page_ops: dict[int, set[str]] = {pk: set() for pk in hits}
    evidence: dict[int, int] = {}
    for i in range(0, len(hits), 500):
        chunk = hits[i : i + 500]
        marks = ",".join("?" * len(chunk))
        for kind, value, pk in conn.execute(
                f"SELECT kind, value, page FROM facets WHERE kind IN ('tag', 'op') AND page IN ({marks})", chunk):
            (page_tags if kind == "tag" else page_ops)[pk].add(value)
        evidence.update(conn.execute(f"SELECT pk, evidence FROM pages WHERE pk IN ({marks})", chunk).fetchall())

    def score(pk: int) -> float:
        value = float(len(tags & page_tags[pk]))
        if op is not None:
            value += (op in page_tags[pk]) + 1 / max(1, len(page_ops[pk]))
        return value

    position = {pk: n for n, pk in enumerate(hits)}
    return sorted(hits, key=lambda pk: (-score(pk), -evidence.get(pk, 0), position[pk]))


DETAILS = ("brief", "full")
BRIEF_FIELDS = ("id", "title", "type", "evidence_level", "state", "summary")
BRIEF_CLAIMS = 3  # claims a brief hit shows at most
BRIEF_SUMMARY = 200  # characters of the summary a brief hit shows: its leading sentences (full: all of it); 240 until
# 2026-12-06, when one more page verified on the H200 (the TMA page) took the agent benchmark's median over 4 KB


def brief(result: dict[str, Any], words: list[str]) -> dict[str, Any]:
    """A search hit as an agent needs it (about half a kilobyte): the page's id, title, type, evidence
    level, state and the leading sentences of its summary (BRIEF_SUMMARY characters at most), and the claims
    that match `words` best (those measured first), each as its claimed and measured figure and verdict;
    `claims_total` counts all of the page's claims."""
    claims = result.get("claims") or []
    out = {k: result[k] for k in BRIEF_FIELDS if result.get(k) is not None}
    if out.get("summary"):
        out["summary"] = lead(out["summary"], BRIEF_SUMMARY)
    picked = _matching(claims, words)
    if picked:
        out["claims"] = [_brief_claim(c) for c in picked]
    if claims:
        out["claims_total"] = len(claims)
    return out


def _stem(word: str) -> str:
    """A word cut to what its inflections share ('stages' -> 'stag', 'specialized' -> 'specializ')."""
    return word if len(word) <= 4 else word[: max(4, len(word) - 2)]


def _matching(claims: list[dict[str, Any]], words: list[str]) -> list[dict[str, Any]]:
    """The claims that name most of `words` (in their id, counted twice, statement or conditions), measured
    ones first;
    without words, or when none names one, the measured claims in page order."""
    stems = [_stem(w) for w in dict.fromkeys(words)]

    def hits(c: dict[str, Any]) -> int:  # a word in the id (the claim's headline) counts twice
        hay = " ".join([c.get("statement", ""), *map(str, (c.get("conditions") or {}).values())]).lower()
        return sum((s in hay) + 2 * (s in c["id"]) for s in stems)

    def measured(c: dict[str, Any]) -> bool:
        return (c.get("measured") or {}).get("value") is not None or c.get("verdict") is not None

    ranked = sorted(enumerate(claims), key=lambda ic: (-hits(ic[1]), not measured(ic[1]), ic[0]))
    best = [c for _, c in ranked if hits(c) > 0]
    if not best:
        best = [c for _, c in ranked if measured(c)]
    return best[:BRIEF_CLAIMS]


def _brief_claim(c: dict[str, Any]) -> dict[str, Any]:
    m = c.get("measured") or {}
    out: dict[str, Any] = {"id": c["id"], "claimed": c["claimed"]["text"]}
    if m.get("value") is not None:
        out["measured"] = m["value"]
        out["unit"] = m.get("unit") or c["unit"]
    for key in ("verdict", "evidence"):
        if c.get(key) is not None:
            out[key] = c[key]
    if m.get("provisional"):
        out["provisional"] = True
    if c.get("code_changed"):  # a figure of earlier code (kwiki.results.freshness)
        out["code_changed"] = True
    if c.get("state") and c["state"] != c.get("verdict"):  # 'below goal by 4.3%', 'failed (caught ...)'
        out["state"] = c["state"]
    return out


def render_json(doc: dict[str, Any]) -> str:
    """`json.dumps(doc, indent=2, sort_keys=True)` of a raw `search_conn` document, without parsing it."""
    items = "[]"
    if doc["results"]:
        items = "[\n    " + ",\n    ".join(text.replace("\n", "\n    ") for text in doc["results"]) + "\n  ]"
    return (f'{{\n  "detail": "{doc["detail"]}",\n  "results": {items},\n  "schema_version": {doc["schema_version"]},\n'
            f'  "total": {doc["total"]}\n}}')


def search(root: Path, q: Query) -> dict[str, Any]:
    return with_index(root, lambda conn: search_conn(conn, q))


def tags_conn(conn: sqlite3.Connection) -> dict[str, Any]:
    """The JSON document of `kwiki tags`: every tag with its page count, most used first."""
    rows = conn.execute(
        "SELECT value, count(*) AS n FROM facets WHERE kind = 'tag' GROUP BY value ORDER BY n DESC, value"
    )
    return {"schema_version": SCHEMA_VERSION, "tags": [{"tag": tag, "pages": n} for tag, n in rows]}
