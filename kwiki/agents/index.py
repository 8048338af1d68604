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
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from kwiki.core.errors import KwikiError
from kwiki.results.storelines import RESULTS_DIR
from kwiki.wiki.catalog import WIKI_DIR

INDEX_VERSION = 6  # bump whenever the tables or the stored JSON change: the index is rebuilt
INDEX_DIR = ".kwiki"
INDEX_FILE = "index.sqlite"
APPLICATION_ID = 0x6B776B69  # 'kwki', so another program's SQLite file is never taken for ours
PARALLEL_MIN = 256  # pages to (re)read before worker processes pay off
RACY_NS = 20_000_000  # files modified this close to a refresh are re-checked by the next one

T = TypeVar("T")
Snapshot = dict[str, tuple[int, int]]

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
    traced INTEGER           -- 1: the page has a measurements block, its views depend on results/
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


class Refreshed:
    """What one refresh did (a plain class: `dataclasses` is too slow to import for a warm query)."""

    def __init__(self) -> None:
        self.added: list[str] = []
        self.changed: list[str] = []
        self.removed: list[str] = []
        self.body_only = 0  # of `changed`, re-indexed from the body alone
        self.simple = 0  # of `changed`, re-indexed without the page model (kwiki.wiki.fields.SIMPLE)
        self.retraced: list[str] = []  # unchanged pages read again because the results store changed
        self.rebuilt = False

    def __repr__(self) -> str:
        return (f"Refreshed(added={len(self.added)}, changed={len(self.changed)}, removed={len(self.removed)}, "
                f"body_only={self.body_only}, simple={self.simple}, retraced={len(self.retraced)}, "
                f"rebuilt={self.rebuilt})")


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
            _warn(f"index {index_path(root)} is unreadable ({exc}); rebuilding it")
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
                _warn(f"cannot use {path} ({exc}); keeping the index in memory")
                return _in_memory(root)
            if not _damaged(exc):
                raise
            _warn(f"index {path} is unreadable ({exc}); rebuilding it")
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


class Damaged(sqlite3.DatabaseError):
    """The index holds something kwiki never writes: it is rebuilt (see `with_index`)."""


def stored_json(text: Any) -> Any:
    """A JSON value the index stored; raises Damaged when it does not parse."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        raise Damaged("the index holds a JSON value that does not parse") from None


def crc(text: str) -> int:
    import zlib

    return zlib.crc32(text.encode("utf-8"))


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
        _warn(f"cannot write {directory} ({exc.strerror or exc}); keeping the index in memory")
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
        _warn(f"cannot write {index_path(root)} ({exc.strerror or exc}); keeping the index in memory")
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


def _warn(message: str) -> None:
    import logging

    logging.getLogger(__name__).warning("kwiki: %s", message)


# ---------------------------------------------------------------- refreshing


def scan(root: Path) -> Snapshot:
    """Every page file under wiki/ (as `catalog.page_files` finds them): path -> (size, mtime_ns).

    The hot loop of a warm query: one stat per page, made relative to an open directory.
    """
    out: Snapshot = {}
    base = str(root)
    if os.scandir not in os.supports_fd or os.stat not in os.supports_dir_fd:  # pragma: no cover - Windows
        for path in _scan_paths(base):
            try:
                st = os.stat(os.path.join(base, path))
                out[path] = (st.st_size, st.st_mtime_ns)
            except OSError:
                out[path] = (-1, 0)
        return out
    stack = [WIKI_DIR]
    while stack:
        rel = stack.pop()
        try:
            fd = os.open(os.path.join(base, rel), os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.isascii() and not _utf8(name):
                        _warn(f"{rel}/{name.encode('utf-8', 'surrogateescape').decode('utf-8', 'backslashreplace')}: "
                              "the file name is not UTF-8, so it is left out of the index (rename it)")
                        continue
                    try:
                        if entry.is_dir():
                            if not name.startswith(".") and not entry.is_symlink():
                                stack.append(f"{rel}/{name}")
                            continue
                        if not name.endswith(".md"):
                            continue
                        st = entry.stat()
                        out[f"{rel}/{name}"] = (st.st_size, st.st_mtime_ns)
                    except OSError:  # a dangling link: load_page reports it
                        out[f"{rel}/{name}"] = (-1, 0)
        finally:
            os.close(fd)
    return out


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes, held as surrogates
        return False
    return True


def _scan_paths(base: str) -> list[str]:  # pragma: no cover - Windows
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(base, WIKI_DIR)):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        rel = os.path.relpath(dirpath, base).replace(os.sep, "/")
        out.extend(f"{rel}/{name}" for name in filenames if name.endswith(".md"))
    return out


def refresh(conn: sqlite3.Connection, root: Path) -> Refreshed:
    """Bring the index up to date with the files under `root`/wiki."""
    import marshal
    import time

    current = scan(root)
    store = store_files(root)
    blob, store_blob = marshal.dumps(current), marshal.dumps(store)
    seen, seen_store = _snapshot_blob(conn), _snapshot_blob(conn, "store")
    if seen is None and conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None:
        raise Damaged("the index lists files but holds no snapshot of them")
    if seen == blob and seen_store == store_blob:  # the common case: nothing changed, listed in the same order
        return Refreshed()
    stored = _loads(seen)
    if stored == current and _loads(seen_store) == store:  # the same files, listed in another order
        try:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('snapshot', ?)", (blob,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('store', ?)", (store_blob,))
        except sqlite3.OperationalError:  # read-only or busy: only the fast path is lost
            pass
        return Refreshed()
    started = time.time_ns()
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = _snapshot_blob(conn)
        if now != seen:  # another process refreshed while we waited for the lock
            stored = _loads(now)
        retrace = _loads(_snapshot_blob(conn, "store")) != store
        done = _apply(conn, Path(root), current, stored, retrace)
        # files touched just before or during this refresh are looked at again next time
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('snapshot', ?)", (_racy(current, started),))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('store', ?)", (_racy(store, started),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return done


def _racy(snapshot: Snapshot, started: int) -> bytes:
    """`snapshot` as stored: a file modified just before or during the refresh gets mtime -1, so the
    next refresh looks at it again (an edit that keeps size and timestamp tick is not missed)."""
    import marshal

    racy = [path for path, st in snapshot.items() if st[1] >= started - RACY_NS]
    if not racy:
        return marshal.dumps(snapshot)
    marked = dict(snapshot)
    for path in racy:
        marked[path] = (snapshot[path][0], -1)
    return marshal.dumps(marked)


def store_files(root: Path) -> Snapshot:
    """The results store's files (`results/*.jsonl`): name -> (size, mtime_ns). A page's trace is cached
    against them: when any changes, every page with a measurements block is traced again."""
    out: Snapshot = {}
    try:
        entries = os.scandir(os.path.join(str(root), RESULTS_DIR))
    except OSError:
        return out
    with entries:
        for entry in entries:
            if entry.name.endswith(".jsonl"):
                try:
                    st = entry.stat()
                except OSError:  # a dangling link: read_all skips it too
                    continue
                out[entry.name] = (st.st_size, st.st_mtime_ns)
    return out


def _snapshot_blob(conn: sqlite3.Connection, key: str = "snapshot") -> bytes | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def _loads(blob: bytes | None) -> Snapshot:
    import marshal

    if blob is None:
        return {}
    try:
        value = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}


def _apply(conn: sqlite3.Connection, root: Path, current: Snapshot, stored: Snapshot, retrace: bool = False
           ) -> Refreshed:
    """Bring the stored pages up to date; with `retrace` (the results store changed) every page with a
    measurements block is read again, as its trace may have changed."""
    done = Refreshed()
    new_or_changed = [path for path, _ in current.items() - stored.items()]  # set operations, in C
    done.added = sorted(path for path in new_or_changed if path not in stored)
    done.changed = sorted(path for path in new_or_changed if path in stored)
    done.removed = sorted(stored.keys() - current.keys())
    for path in done.removed:
        _delete(conn, path)
    traced = {row[0] for row in conn.execute("SELECT path FROM files WHERE traced = 1")} if retrace else set()
    done.retraced = sorted(traced - set(new_or_changed) - set(done.removed))
    known = _heads(conn, done.changed)
    reread: list[str] = list(done.added)
    for path in done.retraced:
        _delete(conn, path)
        reread.append(path)
    for path in done.changed:
        if path in traced:
            _delete(conn, path)
            reread.append(path)
        elif _body_only(conn, root, path, known.get(path)):
            done.body_only += 1
        elif _simple_edit(conn, root, path, known.get(path)):
            done.simple += 1
        else:
            _delete(conn, path)
            reread.append(path)
    for record in _read_many(root, sorted(reread)):
        _insert(conn, record)
    return done


Known = tuple[str | None, int | None, str | None]  # (head, page pk, raw) of an indexed file


def _heads(conn: sqlite3.Connection, paths: list[str]) -> dict[str, Known]:
    out = {}
    for i in range(0, len(paths), 500):
        chunk = paths[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(f"SELECT path, head, page, raw FROM files WHERE path IN ({marks})", chunk)
        for path, head, page, raw in rows:
            out[path] = (head, page, raw)
    return out


def _delete(conn: sqlite3.Connection, path: str) -> None:
    row = conn.execute("SELECT page FROM files WHERE path = ?", (path,)).fetchone()
    if row is not None and row[0] is not None:
        pk = row[0]
        conn.execute("DELETE FROM facets WHERE page = ?", (pk,))
        conn.execute("DELETE FROM fts WHERE rowid = ?", (pk,))
        conn.execute("DELETE FROM views WHERE pk = ?", (pk,))
        conn.execute("DELETE FROM pages WHERE pk = ?", (pk,))
    conn.execute("DELETE FROM files WHERE path = ?", (path,))


# ---------------------------------------------------------------- reading pages


_GENERATED = re.compile(r"<!-- kwiki:([a-z]+)\b[^>]*?-->.*?<!-- /kwiki:\1 -->", re.S)


def searchable(body: str) -> str:
    """A page body without kwiki's generated regions (claims tables, ladders, charts), each kept as a
    one-line marker: what the index searches and `show --json` returns. The claims are searched (and
    shown) from the front matter; ladders come from `get_ladder`, as data."""
    return _GENERATED.sub(lambda m: f"<!-- kwiki:{m.group(1)}: generated by kwiki verify, left out here -->", body)


def tag_words(tags: list[str], page_type: str) -> str:
    """The fts `tags` column: the page's tags and its type (a search for 'pitfalls' finds the pitfalls page)."""
    return " ".join([*tags, page_type])


def _raw(data: Any) -> str:
    """The parsed front matter, field by field, in a form that tells different values apart
    (repr keeps 1 and '1', a date and its string apart), to find which fields an edit changed."""
    items = data.items() if isinstance(data, dict) else [("", data)]
    return json.dumps({repr(k): repr(v) for k, v in items}, sort_keys=True)


def _head_hash(text: str, end_line: int) -> str:
    """Hash of a decoded page's lines up to its closing front-matter delimiter."""
    import hashlib

    head = "\n".join(text.split("\n", end_line)[:end_line])
    return hashlib.blake2b(head.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _body_only(conn: sqlite3.Connection, root: Path, path: str, known: Known | None) -> bool:
    """Re-index an indexed page whose front matter did not change; False when it needs a full read.

    Same front-matter text means the same parsed and validated front matter; what else
    `load_page` checks (decoding the whole file, the body's generated-region markers) is
    checked here again.
    """
    if known is None or known[0] is None or known[1] is None:
        return False
    if os.path.islink(root / path):  # a link: the full read applies the containment rule
        return False
    from kwiki.core.errors import FrontMatterError, MarkerError
    from kwiki.wiki.frontmatter import decode, split
    from kwiki.wiki.markers import scan as scan_markers

    try:
        text, _, _ = decode((root / path).read_bytes())
        _, end_line, body, body_line = split(text)
        if _head_hash(text, end_line) != known[0]:
            return False
        scan_markers(body, first_line=body_line)
    except (OSError, FrontMatterError, MarkerError):
        return False
    conn.execute("UPDATE fts SET body = ? WHERE rowid = ?", (searchable(body), known[1]))
    return True


def _simple_edit(conn: sqlite3.Connection, root: Path, path: str, known: Known | None) -> bool:
    """Re-index an indexed page whose edit changed only simple fields (`kwiki.wiki.fields.SIMPLE`:
    title, summary, tags) to plainly valid values, without the page model; False otherwise.

    Everything else the model would see is unchanged (compared field by field on the parsed
    front matter), so the page stays valid and its stored views only need those fields
    replaced. What `load_page` checks beyond validation (reading, decoding, generated-region
    markers) `read_page` checks again. Any doubt returns False: the page is read in full.
    """
    if known is None or known[1] is None or known[2] is None:
        return False
    from kwiki.wiki.fields import SIMPLE, Unsure
    from kwiki.wiki.pages import read_page

    page = read_page(root / path, root)
    if page.problems or page.fm is None or not isinstance(page.fm.data, dict):
        return False
    data = page.fm.data
    raw = _raw(data)
    before, now = stored_json(known[2]), json.loads(raw)
    changed = {k for k in before.keys() | now.keys() if before.get(k) != now.get(k)}
    names = {repr(name): name for name in SIMPLE}
    if not changed <= names.keys():
        return False
    values: dict[str, Any] = {}
    try:
        for key in changed:
            name = names[key]
            normalize, required = SIMPLE[name]
            if name in data:
                values[name] = normalize(data[name])
            elif required:
                return False
            else:
                values[name] = _UNSET
    except Unsure:
        return False
    pk = known[1]
    result_text, detail_text = conn.execute("SELECT result, detail FROM views WHERE pk = ?", (pk,)).fetchone()
    result, detail = stored_json(result_text), stored_json(detail_text)
    front = detail["front_matter"]
    for name, value in values.items():
        if value is _UNSET:
            front.pop(name, None)
            result.pop(name, None)  # the views are compact: no nulls, no empty lists
        elif value in (None, []):
            front.pop(name, None)
            result.pop(name, None)
        else:
            front[name] = value
            result[name] = value
        if name == "title":
            detail["title"] = value
    # stored as _read_one stores them
    result_text = json.dumps(result, indent=2, sort_keys=True)
    conn.execute("UPDATE views SET result = ?, detail = ?, crc = ? WHERE pk = ?",
                 (result_text, json.dumps(detail, sort_keys=True, ensure_ascii=False), crc(result_text), pk))
    if "tags" in values:
        conn.execute("DELETE FROM facets WHERE page = ? AND kind = 'tag'", (pk,))
        conn.executemany("INSERT INTO facets VALUES ('tag', ?, ?)", [(t, pk) for t in result.get("tags", [])])
    conn.execute("UPDATE fts SET title = ?, summary = ?, tags = ?, body = ? WHERE rowid = ?",
                 (result["title"], result.get("summary") or "", tag_words(result.get("tags", []), result["type"]),
                  searchable(page.fm.body), pk))
    conn.execute("UPDATE files SET head = ?, raw = ? WHERE path = ?",
                 (_head_hash(page.fm.text, page.fm.end_line), raw, path))
    return True


_UNSET = object()  # a simple field the edit removed


class _Record(NamedTuple):
    """What the index keeps of one file (plain data: it crosses process boundaries)."""

    path: str
    head: str | None
    raw: str | None
    page_id: str | None
    problems: list[str]
    page: dict[str, Any] | None  # None when the page has errors


_STORES: dict[str, tuple[Snapshot, Any]] = {}  # root -> (its store files, kwiki.results.trace.Store of them)


def _trace_store(root: Path) -> Any:
    """The results store of `root`, indexed for tracing; read once per process while its files stay the same
    (not trusted while a file was modified within RACY_NS: a second write may keep its size and mtime)."""
    import time

    from kwiki.results.trace import Store

    files = store_files(root)
    cached = _STORES.get(str(root))
    if cached is None or cached[0] != files:
        cached = (files, Store.load(root))
        recent = time.time_ns() - RACY_NS
        if all(mtime < recent for _, mtime in files.values()):
            _STORES[str(root)] = cached
    return cached[1]


def _read_many(root: Path, paths: list[str]) -> Iterator[_Record]:
    if not paths:
        return
    from kwiki.wiki.pages import load_page  # noqa: F401  (imported once here, inherited by workers)

    workers = min(os.cpu_count() or 1, 8)
    import sys
    import threading

    if len(paths) >= PARALLEL_MIN and workers > 1 and sys.platform == "linux" and threading.active_count() == 1:
        import multiprocessing

        if store_files(root):
            _trace_store(root)  # read once here, inherited by the workers

        chunk = max(16, len(paths) // (workers * 8))
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            yield from pool.imap(_read_one, [(str(root), p) for p in paths], chunksize=chunk)
    else:
        for path in paths:
            yield _read_one((str(root), path))


def _read_one(job: tuple[str, str]) -> _Record:
    from kwiki.agents.views import detail_view, result_view
    from kwiki.wiki.pages import load_page

    root, path = Path(job[0]), job[1]
    page = load_page(root / path, root)
    head = _head_hash(page.fm.text, page.fm.end_line) if page.fm is not None else None
    raw = _raw(page.fm.data) if page.fm is not None else None
    declared = page.fm.data.get("id") if page.fm is not None else None
    page_id = declared if isinstance(declared, str) else None
    errors = [p.format() for p in page.problems if p.severity == "error"]
    if errors or page.meta is None or page.fm is None:
        return _Record(path, head, raw, page_id, errors or [f"{path}: not a page"], None)
    meta = page.meta
    facets = {("tag", t) for t in meta.tags} | {("arch", a) for a in meta.architectures}
    facets |= {("op", op.strip().lower()) for op in meta.applies_to_ops if op.strip()}
    block = meta.measurements
    trace = st = None
    rank = meta.effective_evidence.rank
    if block is not None:  # what the results store says about it (only such pages import kwiki.results)
        from kwiki.results.standing import standing
        from kwiki.results.trace import evidence
        from kwiki.results.trace import trace as trace_page

        store = _trace_store(root)
        trace = trace_page(meta, store, path)
        st = standing(meta, store.history(meta.id, path), trace)
        rank = evidence(meta, trace)[1]
        if trace is not None and trace.traceable:  # an untraceable block was verified on no GPU
            gpus = {block.verified_on} | {m.provenance.gpu for m in block.claims.values() if m.provenance}
            facets |= {("gpu", g.strip().lower()) for g in gpus if g and g.strip()}
    dump = json.dumps
    return _Record(path, head, raw, meta.id, [], {
        "id": meta.id,
        "type": meta.type.value,
        "evidence": rank,
        # indented as `kwiki query --json` prints it, so a query only pastes stored text together
        "result": dump(result_view(meta, path, trace, st), indent=2, sort_keys=True),
        "detail": dump(detail_view(meta, path, trace, st), sort_keys=True, ensure_ascii=False),
        "traced": int(block is not None),
        "facets": sorted(facets),
        "title": meta.title,
        "summary": meta.summary or "",
        "tags": tag_words(meta.tags, meta.type.value),
        "body": searchable(page.fm.body),
        "claims": " ".join(f"{c.id} {c.statement}" for c in meta.claims),
    })


def _insert(conn: sqlite3.Connection, record: _Record) -> None:
    pk = None
    page = record.page
    if page is not None:
        cur = conn.execute(
            "INSERT INTO pages (path, id, type, evidence) VALUES (?, ?, ?, ?)",
            (record.path, page["id"], page["type"], page["evidence"]),
        )
        pk = cur.lastrowid
        conn.execute("INSERT INTO views VALUES (?, ?, ?, ?)", (pk, page["result"], page["detail"], crc(page["result"])))
        conn.executemany("INSERT INTO facets VALUES (?, ?, ?)", [(k, v, pk) for k, v in page["facets"]])
        conn.execute(
            "INSERT INTO fts (rowid, title, summary, tags, body, claims) VALUES (?, ?, ?, ?, ?, ?)",
            (pk, page["title"], page["summary"], page["tags"], page["body"], page["claims"]),
        )
    traced = 1 if page is not None and page.get("traced") else None
    conn.execute(
        "INSERT INTO files (path, head, raw, page, page_id, problems, traced) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (record.path, record.head, record.raw, pk, record.page_id,
         json.dumps(record.problems) if page is None else None, traced),
    )


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
    """Files left out of the index because they have errors: (path, problems)."""
    rows = conn.execute("SELECT path, problems FROM files WHERE page IS NULL ORDER BY path")
    return [(path, stored_json(problems or "[]")) for path, problems in rows]

