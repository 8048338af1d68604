"""The embedded page index: SQLite (FTS5 for text) at `.kwiki/index.sqlite`, no server.

Every command that reads pages by id, tag or text (`kwiki query`, `tags`, `show`, `mcp`)
opens the index through `with_index`, which first brings it up to date:

* it stats every `wiki/**/*.md` file and compares (size, mtime_ns) with the snapshot
  stored at the last refresh; when nothing changed it reads nothing else, and neither
  pydantic nor yaml is imported;
* a changed file whose front matter is byte-for-byte what was indexed (only the body
  was edited) gets its body re-indexed without parsing YAML or validating;
* a changed file whose parsed front matter differs from what was indexed only in simple
  fields (`kwiki.wiki.fields.SIMPLE`: title, summary, tags) holding plainly valid values gets
  those fields and its body patched into the stored views, without pydantic;
* any other new or changed file is read with `kwiki.wiki.pages.load_page` (in parallel for
  large batches) and stored with its query result and `show` view already serialised;
  a page with errors is left out of the index (`kwiki check` reports it), its problems
  kept for `kwiki show`;
* a page with a measurements block is stored with what the results store says about it
  (kwiki.results.trace: does each figure trace to the runs it names?), so its evidence, state
  and facets never show an untraceable block as verified; that check is cached with the page
  and done again only when the page changes or when a file of `results/` changes size or
  mtime (then every page with a block is read again; the others are not);
* a missing index, one written by another index version (`INDEX_VERSION`, held in
  SQLite's user_version), or a corrupt file is rebuilt from scratch into a temporary
  file that replaces the old one; if `.kwiki/` cannot be written the index lives in
  memory for the one command. None of this is ever an error.

A file modified within `RACY_NS` of a refresh is checked again by the next one (the
"racy git" rule), so an edit that keeps size and timestamp tick is not missed. Two
processes refreshing at once serialise on SQLite's write lock, and the second one finds
the work done. Two files declaring the same id are both indexed (`kwiki check` reports
them); `page_detail` takes the first by path.

Costs, on 10,000 pages: the stats (and a listing of `results/`) are the floor of every query;
a body edit adds reading one file; an edit of a title, summary or tags adds parsing its YAML;
any other front-matter edit adds importing pydantic and kwiki.wiki.model (about 200 ms), which
only the query after such an edit pays; a change to `results/` adds reading the store and every
page with a measurements block (about 0.4 s for this repository's wiki and store).

This module opens the index and answers lookups; kwiki.agents.refresh brings it up to date, and
kwiki.agents.entries reads a page into its entry.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from kwiki.agents.entries import Damaged, stored_json, warn
from kwiki.agents.refresh import Refreshed, refresh
from kwiki.core.errors import KwikiError

INDEX_VERSION = 11  # bump whenever the tables, the stored JSON or what a page's standing is read from change: rebuilt
# (and with PROTOCOL_VERSION: a page's code_changed is cached against the artifacts' files, not the protocol)
INDEX_DIR = ".kwiki"
INDEX_FILE = "index.sqlite"
APPLICATION_ID = 0x6B776B69  # 'kwki', so another program's SQLite file is never taken for ours

T = TypeVar("T")

_TABLES = f"""
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {INDEX_VERSION};
CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE files (
    path TEXT PRIMARY KEY,   -- relative to the project root, '/' separators
    head TEXT,               -- hash of the front matter as read (NULL: unreadable)
    raw TEXT,                -- JSON object, repr of each key -> repr of its value, as parsed (NULL: unreadable)
    page INTEGER,            -- pages.pk, NULL when the page has errors
    page_id TEXT,            -- the id the file declares, even when it has errors
    problems TEXT,           -- JSON list of 'path:line: field: message', NULL when indexed
    traced INTEGER,          -- 1: the page has a measurements block, its views depend on results/
    code TEXT                -- JSON list of the artifact folders its figures depend on (kwiki.results.freshness)
);
CREATE TABLE pages (         -- narrow, so filtering, sorting and counting read little
    pk INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    evidence INTEGER NOT NULL   -- rank on the evidence ladder (kwiki.wiki.evidence.LADDER)
);
CREATE INDEX pages_by_id ON pages (id, path);
CREATE TABLE views (
    pk INTEGER PRIMARY KEY,     -- pages.pk
    result TEXT NOT NULL,       -- kwiki.agents.views.result_view, JSON as printed (indent 2, sorted keys)
    detail TEXT NOT NULL,       -- kwiki.agents.views.detail_view, JSON
    crc INTEGER NOT NULL        -- zlib.crc32 of `result` (UTF-8): a query pastes `result` unparsed
);
CREATE TABLE facets (kind TEXT NOT NULL, value TEXT NOT NULL, page INTEGER NOT NULL);
CREATE INDEX facets_by_value ON facets (kind, value, page);
CREATE INDEX facets_by_page ON facets (page);
CREATE VIRTUAL TABLE fts USING fts5 (title, summary, tags, body, claims, tokenize = 'porter unicode61');
"""


class PageNotFound(KwikiError):
    """No page in the wiki has the id asked for (or the page with it has errors)."""

    exit_code = 1




# ---------------------------------------------------------------- opening


def index_path(root: Path) -> Path:
    return Path(root) / INDEX_DIR / INDEX_FILE


def with_index(root: Path, fn: Callable[[sqlite3.Connection], T]) -> T:
    """Run `fn` on an up-to-date index of `root`; a corrupt index is rebuilt and `fn` retried."""
    for attempt in (0, 1):
        conn = None
        try:
            conn, _ = open_index(root, rebuild=attempt > 0)
            return fn(conn)
        except sqlite3.DatabaseError as exc:
            if attempt or not _damaged(exc):
                raise
            warn(f"index {index_path(root)} is unreadable ({exc}); rebuilding it")
        finally:
            if conn is not None:
                conn.close()
    raise AssertionError("unreachable")  # pragma: no cover


def open_index(root: Path, *, rebuild: bool = False) -> tuple[sqlite3.Connection, Refreshed]:
    """A connection to the refreshed index of `root`, building it when needed."""
    root = Path(root)
    path = index_path(root)
    if not rebuild and path.is_file():
        conn = _connect(str(path))
        try:
            if _current(conn):
                return conn, refresh(conn, root)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _read_only(exc) or _cannot_open(exc):
                warn(f"cannot use {path} ({exc}); keeping the index in memory")
                return _in_memory(root)
            if not _damaged(exc):
                raise
            warn(f"index {path} is unreadable ({exc}); rebuilding it")
        conn.close()
    return _build(root)


def _damaged(exc: sqlite3.DatabaseError) -> bool:
    """Whether an SQLite error means the index file is damaged (not a bug, not a busy disk).

    Plain `sqlite3.DatabaseError` is also what kwiki raises on finding the index inconsistent
    (`Damaged`); a constraint failing or a text that is not UTF-8 means the same: a hand edit,
    or a disk that lost part of a write.
    """
    if type(exc) in (sqlite3.DatabaseError, Damaged, sqlite3.IntegrityError):
        return True
    if getattr(exc, "sqlite_errorcode", None) in (11, 26):
        return True  # SQLITE_CORRUPT, SQLITE_NOTADB
    return str(exc).startswith(("no such table", "no such column", "malformed", "Could not decode to UTF-8"))








def _cannot_open(exc: sqlite3.DatabaseError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == 14  # SQLITE_CANTOPEN (a directory, no permission)


def _read_only(exc: sqlite3.DatabaseError) -> bool:
    return getattr(exc, "sqlite_errorcode", None) == 8 or "readonly" in str(exc)  # SQLITE_READONLY


def _connect(target: str) -> sqlite3.Connection:
    # autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE. No fsync: the
    # index is a cache, its rollback journal survives a crash of the process, and what a crash
    # of the machine might leave damaged is rebuilt
    conn = sqlite3.connect(target, timeout=30, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    return conn


def _current(conn: sqlite3.Connection) -> bool:
    app: int = conn.execute("PRAGMA application_id").fetchone()[0]
    version: int = conn.execute("PRAGMA user_version").fetchone()[0]
    return app == APPLICATION_ID and version == INDEX_VERSION


def _build(root: Path) -> tuple[sqlite3.Connection, Refreshed]:
    """A new index in a temporary file that replaces the old one; in memory if that fails."""
    import tempfile

    directory = root / INDEX_DIR
    try:
        directory.mkdir(exist_ok=True)
        ignore = directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# kwiki's index: rebuilt from wiki/ whenever needed\n*\n", encoding="utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{INDEX_FILE}.", suffix=".tmp", dir=directory)
        os.close(fd)
    except OSError as exc:
        warn(f"cannot write {directory} ({exc.strerror or exc}); keeping the index in memory")
        return _in_memory(root)
    try:
        conn = _connect(tmp)
        conn.execute("PRAGMA journal_mode = OFF")
        conn.execute("PRAGMA synchronous = OFF")
        conn.executescript(_TABLES)
        done = refresh(conn, root)
        conn.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, index_path(root))
    except OSError as exc:  # index.sqlite is a directory, or .kwiki/ turned read-only meanwhile
        Path(tmp).unlink(missing_ok=True)
        warn(f"cannot write {index_path(root)} ({exc.strerror or exc}); keeping the index in memory")
        return _in_memory(root)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return _connect(str(index_path(root))), _rebuilt(done)


def _in_memory(root: Path) -> tuple[sqlite3.Connection, Refreshed]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(_TABLES)
    return conn, _rebuilt(refresh(conn, root))


def _rebuilt(done: Refreshed) -> Refreshed:
    done.rebuilt = True
    return done




# ---------------------------------------------------------------- refreshing


























# ---------------------------------------------------------------- reading pages






























# ---------------------------------------------------------------- lookups shared by show and mcp


def page_detail(conn: sqlite3.Connection, page_id: str, *, body: bool = True) -> dict[str, Any]:
    """`kwiki show`'s view of page `page_id` (the first by path if two share the id)."""
    row = conn.execute(
        "SELECT p.pk, v.detail FROM pages p JOIN views v ON v.pk = p.pk WHERE p.id = ? ORDER BY p.path LIMIT 1",
        (page_id,),
    ).fetchone()
    if row is None:
        broken = conn.execute(
            "SELECT path, problems FROM files WHERE page_id = ? AND page IS NULL ORDER BY path LIMIT 1", (page_id,)
        ).fetchone()
        if broken is not None and broken[1] is None:  # a page with no errors left out: a draft (kwiki.wiki.drafts)
            raise PageNotFound(f"page '{page_id}' ({broken[0]}) is a draft: drafts are left out until published "
                               "(set its status and replace kwiki new's placeholder summary)")
        if broken is not None:
            problems = stored_json(broken[1] or "[]")
            first = f": {problems[0]}" if problems else ""
            raise PageNotFound(f"page '{page_id}' ({broken[0]}) has errors; run 'kwiki check'{first}")
        from kwiki.core.suggest import did_you_mean

        ids = [row[0] for row in conn.execute("SELECT DISTINCT id FROM pages")]
        raise PageNotFound(f"no page with id '{page_id}'{did_you_mean(page_id, ids)}")
    detail: dict[str, Any] = stored_json(row[1])
    if body:
        detail["body"] = conn.execute("SELECT body FROM fts WHERE rowid = ?", (row[0],)).fetchone()[0]
    return detail


def skipped(conn: sqlite3.Connection) -> list[tuple[str, list[str]]]:
    """Files left out of the index because they have errors: (path, problems). Drafts, left out too, have none."""
    rows = conn.execute("SELECT path, problems FROM files WHERE page IS NULL AND problems IS NOT NULL ORDER BY path")
    return [(path, stored_json(problems or "[]")) for path, problems in rows]

