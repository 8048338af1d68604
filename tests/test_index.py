"""The SQLite index: built when missing, refreshed from file stats, rebuilt when damaged.

Every test works on a copy of tests/fixtures/query (seven valid pages, one with an error).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

import kwiki.agents.entries as entries
import kwiki.agents.index as index
from kwiki.agents.index import INDEX_VERSION, index_path, open_index, skipped, with_index
from kwiki.agents.query import Query, search, search_conn

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "query"
TMA = "wiki/nvidia/techniques/tma-multicast.md"
NEW_PAGE = """---
id: technique-new-page
title: A page added after the index was built
type: technique
architectures: [sm_90]
tags: [gemm, brand-new]
---
Mentions the word zanzibar.
"""


@pytest.fixture
def root(fixture_copy) -> Path:
    return fixture_copy("query", "wiki-root")


def ids(root: Path, **kw) -> list[str]:
    return [r["id"] for r in search(root, Query(limit=0, **kw))["results"]]


def refresh(root: Path) -> index.Refreshed:
    conn, done = open_index(root)
    conn.close()
    return done


def touch_later(path: Path, text: str) -> None:
    """Rewrite `path` and move its mtime on, as an editor saving a second later would."""
    before = path.stat().st_mtime_ns
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before + 1_000_000_000, before + 1_000_000_000))


def count(root: Path, sql: str) -> int:
    return with_index(root, lambda conn: conn.execute(sql).fetchone()[0])


# ---------------------------------------------------------------- building


def test_first_use_builds_the_index(root):
    assert not index_path(root).exists()
    done = refresh(root)
    assert done.rebuilt and len(done.added) == 8
    assert index_path(root).is_file()
    assert (root / ".kwiki" / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"


def test_a_second_use_changes_nothing(root):
    refresh(root)
    done = refresh(root)
    assert not done.rebuilt and (done.added, done.changed, done.removed) == ([], [], [])


def test_pages_with_errors_are_kept_out_with_their_problems(root):
    left_out = with_index(root, skipped)
    assert [path for path, _ in left_out] == ["wiki/nvidia/broken/bad-type.md"]
    assert "type" in left_out[0][1][0]
    assert count(root, "SELECT count(*) FROM pages") == 7


def test_parallel_build_equals_serial_build(root, tmp_path, monkeypatch):
    serial = search(root, Query(limit=0))
    other = tmp_path / "other"
    shutil.copytree(FIXTURE, other)
    monkeypatch.setattr(entries, "PARALLEL_MIN", 2)
    assert search(other, Query(limit=0)) == serial


# ---------------------------------------------------------------- incremental refresh


def test_editing_the_body_reindexes_the_text_only(root):
    refresh(root)
    page = root / TMA
    touch_later(page, page.read_text(encoding="utf-8") + "\nThe word quetzal appears now.\n")
    done = refresh(root)
    assert done.changed == [TMA] and done.body_only == 1
    assert ids(root, text="quetzal") == ["technique-tma-multicast"]


def test_editing_the_front_matter_reparses_the_page(root):
    refresh(root)
    page = root / TMA
    text = page.read_text(encoding="utf-8")
    touch_later(page, text.replace("tags: [tma, cluster, gemm]", "tags: [tma, cluster, gemm, multicast]"))
    done = refresh(root)
    assert done.changed == [TMA] and done.body_only == 0
    assert ids(root, tags=["multicast"]) == ["technique-tma-multicast"]
    assert count(root, "SELECT count(*) FROM pages") == 7  # replaced, not added twice


def snapshot(root: Path) -> dict:
    """What the index holds, by path (pks differ between an index patched and one rebuilt)."""

    def read(conn):
        out = {}
        for path, head, raw, page_id, problems, pk in conn.execute(
                "SELECT path, head, raw, page_id, problems, page FROM files"):
            row = {"head": head, "raw": raw, "page_id": page_id, "problems": problems}
            if pk is not None:
                row["page"] = conn.execute("SELECT id, type, evidence FROM pages WHERE pk = ?", (pk,)).fetchone()
                row["views"] = conn.execute("SELECT result, detail FROM views WHERE pk = ?", (pk,)).fetchone()
                row["facets"] = sorted(conn.execute("SELECT kind, value FROM facets WHERE page = ?", (pk,)).fetchall())
                row["fts"] = conn.execute("SELECT title, summary, tags, body FROM fts WHERE rowid = ?",
                                          (pk,)).fetchone()
            out[path] = row
        return out

    return with_index(root, read)


def rebuilt(root: Path, tmp_path: Path) -> dict:
    """`snapshot` of an index built from scratch over the same files."""
    other = tmp_path / "from-scratch"
    shutil.copytree(root / "wiki", other / "wiki")
    shutil.copytree(root / "results", other / "results")  # the results store the pages' blocks trace to
    return snapshot(other)


TMA_TAGS = "tags: [tma, cluster, gemm]"
TMA_TITLE = "title: TMA multicast across a thread-block cluster"
TMA_SUMMARY = ("summary: Load a tile once from global memory and multicast it into the shared memory of every "
               "block in the cluster.")


@pytest.mark.parametrize("old, new", [
    (TMA_TAGS, "tags: [tma, cluster, gemm, Multi_Cast]"),                  # added, normalized by the model's rule
    (TMA_TAGS, "tags: tma"),                                                 # a lone tag
    (TMA_TAGS, "tags: [tma, tma, gemm]"),                                    # repeats dropped
    (TMA_TAGS, "tags: []"),
    (TMA_TAGS + "\n", ""),                                                   # removed
    (TMA_TITLE, "title: TMA multicast, retitled"),
    (TMA_SUMMARY, "summary: Shorter now."),
    (TMA_SUMMARY, "summary:"),                                               # null
    (TMA_SUMMARY + "\n", ""),                                                # removed
    (TMA_TAGS, "tags: [tma, cluster, gemm]  # a comment changes the text, not the data"),
])
def test_a_simple_edit_is_patched_in_as_a_rebuild_would_store_it(root, tmp_path, old, new):
    refresh(root)
    page = root / TMA
    text = page.read_text(encoding="utf-8")
    assert old in text
    touch_later(page, text.replace(old, new, 1) + "\nAnd a body edit in the same save: ocelot.\n")
    done = refresh(root)
    assert done.changed == [TMA] and done.simple == 1 and done.body_only == 0
    assert snapshot(root) == rebuilt(root, tmp_path)
    assert ids(root, text="ocelot") == ["technique-tma-multicast"]


@pytest.mark.parametrize("old, new, indexed", [
    (TMA_TAGS, "tags: [tma, 'not a tag!']", False),        # invalid: the model reports it
    (TMA_TAGS, "tags: [tma, 7]", False),
    (TMA_TITLE, "title: ''", False),
    (TMA_TITLE + "\n", "", False),                          # a required field removed
    (TMA_SUMMARY, "summary: 42", False),
    (TMA_TITLE, "title: '  padded  '", True),              # valid, but stripping is the model's to do
    (TMA_TAGS, "tags: {a: b}", False),
    ("type: technique", "type: kernel", True),             # not a simple field
    ("architectures: [sm_90a]", "architectures: [sm_90]", True),
    ("    at_least: 1.2", "    at_least: 1.3", True),        # a claim
    ("id: technique-tma-multicast", "id: technique-renamed", True),
    ("vendor: nvidia", "vendor: nvidia\nbrand_new_field: 1", True),  # unknown fields are the model's to report
])
def test_other_edits_go_through_the_page_model(root, tmp_path, old, new, indexed):
    refresh(root)
    page = root / TMA
    text = page.read_text(encoding="utf-8")
    assert old in text
    touch_later(page, text.replace(old, new, 1))
    done = refresh(root)
    assert done.changed == [TMA] and done.simple == 0
    assert snapshot(root) == rebuilt(root, tmp_path)
    assert (snapshot(root)[TMA].get("page") is not None) == indexed


def test_a_tag_edit_does_not_import_pydantic(root):
    import subprocess
    import sys

    refresh(root)
    page = root / TMA
    touch_later(page, page.read_text(encoding="utf-8").replace(TMA_TAGS, "tags: [tma, cluster, gemm, quick]"))
    probe = ("import sys; from pathlib import Path; from kwiki.agents.index import open_index; "
             f"conn, done = open_index(Path({str(root)!r})); "
             "print(done.simple, 'pydantic' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "False"]
    assert ids(root, tags=["quick"]) == ["technique-tma-multicast"]


def test_adding_a_page(root):
    refresh(root)
    (root / "wiki" / "nvidia" / "techniques" / "new-page.md").write_text(NEW_PAGE, encoding="utf-8")
    done = refresh(root)
    assert done.added == ["wiki/nvidia/techniques/new-page.md"]
    assert ids(root, tags=["brand-new"]) == ["technique-new-page"]
    assert ids(root, text="zanzibar") == ["technique-new-page"]


def test_deleting_a_page_leaves_nothing_behind(root):
    refresh(root)
    (root / TMA).unlink()
    done = refresh(root)
    assert done.removed == [TMA]
    assert "technique-tma-multicast" not in ids(root)
    assert count(root, "SELECT count(*) FROM facets WHERE kind = 'tag' AND value = 'tma'") == 0  # now unknown
    assert ids(root, text="multicast") == []
    assert count(root, "SELECT count(*) FROM facets WHERE page NOT IN (SELECT pk FROM pages)") == 0
    assert count(root, "SELECT count(*) FROM fts WHERE rowid NOT IN (SELECT pk FROM pages)") == 0
    assert count(root, "SELECT count(*) FROM views WHERE pk NOT IN (SELECT pk FROM pages)") == 0


def test_a_page_that_breaks_is_left_out_and_comes_back_when_fixed(root):
    refresh(root)
    page = root / TMA
    good = page.read_text(encoding="utf-8")
    touch_later(page, good.replace("type: technique", "type: trick"))
    assert "technique-tma-multicast" not in ids(root)
    touch_later(page, good)
    assert "technique-tma-multicast" in ids(root)


def test_a_body_edit_that_breaks_a_marker_is_caught(root):
    refresh(root)
    page = root / TMA
    touch_later(page, page.read_text(encoding="utf-8") + "\n<!-- kwiki:claims -->\nno closing marker\n")
    done = refresh(root)
    assert done.body_only == 0
    assert "technique-tma-multicast" not in ids(root)


def test_a_same_size_edit_right_after_a_refresh_is_not_missed(root, monkeypatch):
    monkeypatch.setattr(entries, "RACY_NS", 3_600 * 10**9)  # every file counts as just modified
    page = root / TMA
    page.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    refresh(root)
    st = page.stat()
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("mask.", "MASK."), encoding="utf-8")  # same size
    os.utime(page, ns=(st.st_atime_ns, st.st_mtime_ns))  # same timestamp
    assert ids(root, text="mask") == ["technique-tma-multicast"]
    body = with_index(root, lambda c: c.execute("SELECT body FROM fts WHERE body LIKE '%MASK.%'").fetchone()[0])
    assert "MASK." in body


def test_another_process_refreshing_meanwhile_is_harmless(root):
    refresh(root)
    (root / "wiki" / "new-page.md").write_text(NEW_PAGE, encoding="utf-8")
    first, _ = open_index(root)
    second, _ = open_index(root)  # sees the change already applied by the first
    assert search_conn(second, Query(tags=["brand-new"]))["total"] == 1
    first.close()
    second.close()


# ---------------------------------------------------------------- damage


def test_a_missing_index_is_rebuilt(root):
    refresh(root)
    index_path(root).unlink()
    assert refresh(root).rebuilt
    assert len(ids(root)) == 7


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "zeroed-middle"])
def test_a_damaged_index_is_rebuilt_never_an_error(root, damage, caplog):
    refresh(root)
    path = index_path(root)
    data = path.read_bytes()
    if damage == "garbage":
        path.write_bytes(b"this is not an SQLite database\n" * 100)
    elif damage == "truncated":
        path.write_bytes(data[: len(data) // 3])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(data[:4096] + b"\x00" * (len(data) - 8192) + data[-4096:])
    assert len(ids(root)) == 7
    assert ids(root, tags=["tma"]) == ["technique-tma-multicast"]
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == INDEX_VERSION
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_an_index_of_another_version_is_rebuilt(root):
    refresh(root)
    conn = sqlite3.connect(index_path(root))
    conn.execute(f"PRAGMA user_version = {INDEX_VERSION + 1}")
    conn.close()
    assert refresh(root).rebuilt


def test_another_programs_sqlite_file_is_replaced(root):
    (root / ".kwiki").mkdir()
    conn = sqlite3.connect(index_path(root))
    conn.execute("CREATE TABLE t (x)")
    conn.execute(f"PRAGMA user_version = {INDEX_VERSION}")
    conn.close()
    assert refresh(root).rebuilt
    assert len(ids(root)) == 7


def test_an_unwritable_index_directory_means_an_index_in_memory(root):
    (root / ".kwiki").write_text("a file where the directory should be\n", encoding="utf-8")
    assert len(ids(root)) == 7
    assert ids(root, text="coalescing")[0] == "concept-memory-coalescing"


def test_a_read_only_index_is_used_as_is_and_never_an_error(root, monkeypatch):
    refresh(root)
    monkeypatch.setattr(index, "_connect", lambda target: sqlite3.connect(
        f"file:{target}?mode=ro", uri=True, isolation_level=None))  # as if the file were not writable
    assert len(ids(root)) == 7  # unchanged wiki: read as it is
    (root / "wiki" / "new-page.md").write_text(NEW_PAGE, encoding="utf-8")
    assert ids(root, tags=["brand-new"]) == ["technique-new-page"]  # changed: rebuilt in memory


def test_the_stored_views_are_plain_json(root):
    rows = with_index(root, lambda c: c.execute("SELECT result, detail FROM views ORDER BY pk").fetchall())
    for result, detail in rows:
        assert json.loads(result)["id"] == json.loads(detail)["id"]


# ---------------------------------------------------------------- damage kwiki must undo by itself


def _tamper(root: Path, sql: str) -> None:
    conn = sqlite3.connect(index_path(root))
    conn.execute(sql)
    conn.commit()
    conn.close()


@pytest.mark.parametrize("sql", [
    "DELETE FROM meta",  # an emptied meta table: every file looked new, and inserting it again failed
    "UPDATE views SET result = CAST(x'7b22ff22' AS TEXT)",  # invalid UTF-8 in a stored view
    "UPDATE fts SET body = CAST(x'ff' AS TEXT)",
    "UPDATE views SET result = '{broken'",  # JSON that does not parse, which a query printed as it was
    "UPDATE views SET detail = '{broken'",
    "UPDATE files SET problems = '[broken' WHERE page IS NULL",
])
def test_a_tampered_index_is_rebuilt_on_the_next_use(root, sql, capsys):
    from kwiki.cli import main

    refresh(root)
    _tamper(root, sql)
    assert main(["query", "--root", str(root), "--json", "--limit", "0"]) == 0
    out = capsys.readouterr().out
    assert sorted(r["id"] for r in json.loads(out)["results"]) == sorted(ids(root))  # valid JSON, every page
    assert main(["show", "--root", str(root), "--json", "technique-tma-multicast"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "technique-tma-multicast"
    assert with_index(root, skipped)[0][0] == "wiki/nvidia/broken/bad-type.md"


def test_an_index_path_that_is_a_directory_means_an_index_in_memory(root):
    index_path(root).mkdir(parents=True)
    assert len(ids(root)) == 7
    assert index_path(root).is_dir() and not [p for p in index_path(root).parent.iterdir() if p.suffix == ".tmp"]


def test_a_file_name_that_is_not_utf8_is_left_out_with_a_warning(root, caplog):
    name = os.fsdecode(b"wiki/nvidia/patterns/caf\xe9.md")
    (root / name).write_text(NEW_PAGE, encoding="utf-8")
    assert len(ids(root)) == 7 and "technique-new-page" not in ids(root)
    assert "caf\\xe9.md: the file name is not UTF-8" in caplog.text
