"""Bringing the index (kwiki.agents.index) up to date: stat every page file and every file of `results/`, compare
with the snapshot of the last refresh, and re-index only what changed (kwiki.agents.entries)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from kwiki.agents import entries
from kwiki.agents.entries import (
    Damaged,
    Known,
    Snapshot,
    code_files,
    insert_entry,
    patch_body,
    patch_code,
    patch_simple,
    read_entries,
    store_files,
    warn,
)
from kwiki.core.paths import COMMON_DIR
from kwiki.wiki.catalog import WIKI_DIR


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
                        warn(f"{rel}/{name.encode('utf-8', 'surrogateescape').decode('utf-8', 'backslashreplace')}: "
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
    store, code = store_files(root), code_files(root)  # what a page's trace reads besides the page
    blob, store_blob, code_blob = marshal.dumps(current), marshal.dumps(store), marshal.dumps(code)
    seen, seen_store, seen_code = _snapshot_blob(conn), _snapshot_blob(conn, "store"), _snapshot_blob(conn, "code")
    if seen is None and conn.execute("SELECT 1 FROM files LIMIT 1").fetchone() is not None:
        raise Damaged("the index lists files but holds no snapshot of them")
    if seen == blob and seen_store == store_blob and seen_code == code_blob:  # the common case: nothing changed
        return Refreshed()
    stored = _loads(seen)
    if stored == current and _loads(seen_store) == store and _loads(seen_code) == code:  # listed in another order
        try:
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('snapshot', ?)", (blob,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('store', ?)", (store_blob,))
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('code', ?)", (code_blob,))
        except sqlite3.OperationalError:  # read-only or busy: only the fast path is lost
            pass
        return Refreshed()
    started = time.time_ns()
    conn.execute("BEGIN IMMEDIATE")
    try:
        now = _snapshot_blob(conn)
        if now != seen:  # another process refreshed while we waited for the lock
            stored = _loads(now)
        retrace: bool | set[str] = _loads(_snapshot_blob(conn, "store")) != store or \
            edited(_loads(_snapshot_blob(conn, "code")), code)
        done = _apply(conn, Path(root), current, stored, retrace)
        # files touched just before or during this refresh are looked at again next time
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('snapshot', ?)", (_racy(current, started),))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('store', ?)", (_racy(store, started),))
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('code', ?)", (_racy(code, started),))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return done


def _racy(snapshot: Snapshot, started: int) -> bytes:
    """`snapshot` as stored: a file modified just before or during the refresh gets mtime -1, so the
    next refresh looks at it again (an edit that keeps size and timestamp tick is not missed)."""
    import marshal

    racy = [path for path, st in snapshot.items() if st[1] >= started - entries.RACY_NS]
    if not racy:
        return marshal.dumps(snapshot)
    marked = dict(snapshot)
    for path in racy:
        marked[path] = (snapshot[path][0], -1)
    return marshal.dumps(marked)


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


def edited(before: Snapshot, after: Snapshot) -> bool | set[str]:
    """What an edit under artifacts/ makes the index read again: the artifact folders whose files changed, or True
    (every page with a measurements block) when a file outside an artifact's folder changed (`artifacts/common`,
    which every artifact's code key may cover)."""
    folders: set[str] = set()
    for path, _ in before.items() ^ after.items():
        parts = path.split("/")
        if len(parts) < 3 or parts[1] == COMMON_DIR.rsplit("/", 1)[-1]:
            return True
        folders.add("/".join(parts[:2]))
    return folders


def _apply(conn: sqlite3.Connection, root: Path, current: Snapshot, stored: Snapshot,
           retrace: bool | set[str] = False) -> Refreshed:
    """Bring the stored pages up to date; with `retrace` True (the results store changed) every page with a
    measurements block is read again, as its trace may have changed; with a set of artifact folders, the pages whose
    figures depend on one of them (an edit there may make them figures of earlier code)."""
    done = Refreshed()
    new_or_changed = [path for path, _ in current.items() - stored.items()]  # set operations, in C
    done.added = sorted(path for path in new_or_changed if path not in stored)
    done.changed = sorted(path for path in new_or_changed if path in stored)
    done.removed = sorted(stored.keys() - current.keys())
    for path in done.removed:
        _delete(conn, path)
    traced: set[str] = set()
    if retrace:
        rows = conn.execute("SELECT path, code FROM files WHERE traced = 1").fetchall()
        traced = {path for path, code in rows
                  if retrace is True or (code and not retrace.isdisjoint(json.loads(code)))}
    done.retraced = sorted(traced - set(new_or_changed) - set(done.removed))
    known = _heads(conn, done.changed)
    reread: list[str] = list(done.added)
    for path in done.retraced:
        if retrace is not True and patch_code(conn, root, path):  # code only: its trace holds, its marks change
            continue
        _delete(conn, path)
        reread.append(path)
    for path in done.changed:
        if path in traced:
            _delete(conn, path)
            reread.append(path)
        elif patch_body(conn, root, path, known.get(path)):
            done.body_only += 1
        elif patch_simple(conn, root, path, known.get(path)):
            done.simple += 1
        else:
            _delete(conn, path)
            reread.append(path)
    for record in read_entries(root, sorted(reread)):
        insert_entry(conn, record)
    return done


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
