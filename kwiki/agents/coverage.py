"""Whether the wiki covers what a lookup asks about, and what is nearest when it does not (the MCP tools).

A page covers a lookup through its title, tags (and type), ops or summary: it matched a tag or op the
lookup asked for, or one of the lookup's topic words is there. A topic word is a word of `text` that names
no GPU, architecture or number and is no common English word ('on', 'how', 'does'). A page whose only
match is its body or claims merely mentions the words: it is listed under `mentions`, not as a result.

A lookup no page covers answers `covered: false` with the nearest tags and ops (`nearest_tags`: the
known ones closest to its words), the nearest pages (`nearest_pages`: those naming the most topic words in
their title, tags or summary) and `mentions`: never a page that only mentions the words presented as
the answer, and never an error for a tag or op no page has.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from kwiki.agents.gpus import ALIASES

MENTIONS = 5  # pages listed under `mentions` at most
NEAREST = 3  # nearest pages and tags at most
_WORD = re.compile(r"[^\W_]+")
_NOT_TOPIC = re.compile(r"^(?:\d+[a-z]?|\d+(?:x\d+)+|sm\d*|sm_?\d+[af]?|compute|nvidia|gpu|gpus)$")
STOP = frozenset("""a an and are as at be by can do does for from get gets has have how i in into is it its kernel
kernels make makes much of on or over than that the their this to use uses using vs was what when where which who
why with without per about against best buy buys fast faster fastest good""".split())


def topic_words(text: str | None) -> list[str]:
    """The words of `text` that name a topic (lower case, in order, once each)."""
    words = [w.lower() for w in _WORD.findall(text or "")]
    return list(dict.fromkeys(w for w in words if w not in STOP and w not in ALIASES and not _NOT_TOPIC.match(w)))


def _quoted(word: str) -> str:
    return '"' + word.replace('"', '""') + '"'


def named(conn: sqlite3.Connection, pks: list[int], words: list[str]) -> dict[int, int]:
    """How many of `words` each of `pks` names in its title, tags, type, summary or ops."""
    count = dict.fromkeys(pks, 0)
    ops: dict[int, set[str]] = {pk: set() for pk in pks}
    if pks:
        marks = ",".join("?" * len(pks))
        for pk, value in conn.execute(f"SELECT page, value FROM facets WHERE kind = 'op' AND page IN ({marks})",
                                      pks):
            ops[pk].update(_WORD.findall(value))
    for word in words:
        found = {pk for (pk,) in conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?",
                                              ("{title summary tags} : " + _quoted(word),))}
        for pk in pks:
            if pk in found or word in ops[pk]:
                count[pk] += 1
    return count


def covering(conn: sqlite3.Connection, hits: list[int], text: str | None,
             by_filter: bool) -> tuple[list[int], list[int]]:
    """`hits` split into those that cover the lookup and those that only mention its words (order kept).
    `by_filter`: the hits matched a tag or op the lookup asked for, so every one covers it."""
    words = topic_words(text)
    if by_filter or not words or not hits:
        return hits, []
    count = named(conn, hits, words)
    return [pk for pk in hits if count[pk]], [pk for pk in hits if not count[pk]]


def _pages(conn: sqlite3.Connection, pks: list[int]) -> list[dict[str, str]]:
    out = []
    for pk in pks:
        row = conn.execute("SELECT id FROM pages WHERE pk = ?", (pk,)).fetchone()
        title = conn.execute("SELECT title FROM fts WHERE rowid = ?", (pk,)).fetchone()
        if row is not None:
            out.append({"id": row[0], "title": title[0] if title else row[0]})
    return out


def mentioning(conn: sqlite3.Connection, words: list[str], exclude: set[int]) -> list[int]:
    """Pages whose text holds the most of `words` (any one will do), best first, at most MENTIONS."""
    count: dict[int, int] = {}
    for word in words:
        for (pk,) in conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (_quoted(word),)):
            if pk not in exclude:
                count[pk] = count.get(pk, 0) + 1
    return sorted(count, key=lambda pk: (-count[pk], pk))[:MENTIONS]


def miss(conn: sqlite3.Connection, text: str | None, asked: list[str], mentions: list[int]) -> dict[str, Any]:
    """What a lookup no page covers answers besides `covered: false`: the tags and ops nearest to its words and to
    the tags or ops `asked` for, the pages naming most of its topic words, and the pages that mention them."""
    from kwiki.core.suggest import close_names

    words = topic_words(" ".join([text or "", *asked]))
    known = sorted({row[0] for row in conn.execute("SELECT DISTINCT value FROM facets WHERE kind IN ('tag', 'op')")})
    tags: list[str] = []
    for word in [*asked, *words]:
        tags += close_names(word, known, NEAREST)
    all_pages = [row[0] for row in conn.execute("SELECT pk FROM pages ORDER BY id, path")]
    count = named(conn, all_pages, words) if words else {}
    nearest = sorted((pk for pk in all_pages if count.get(pk)), key=lambda pk: -count[pk])[:NEAREST]
    if not mentions and words:
        mentions = mentioning(conn, words, set(nearest))
    out: dict[str, Any] = {"covered": False}
    if tags:
        out["nearest_tags"] = list(dict.fromkeys(tags))[:NEAREST * 2]
    if nearest:
        out["nearest_pages"] = _pages(conn, nearest)
    if mentions:
        out["mentions"] = _pages(conn, mentions[:MENTIONS])
    return out


def mentions_view(conn: sqlite3.Connection, pks: list[int]) -> list[dict[str, str]]:
    return _pages(conn, pks[:MENTIONS])
