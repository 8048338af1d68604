"""The one-time migration of renamed page ids in the results store (`kwiki.results.store.rename_pages`)."""

from __future__ import annotations

import json
from pathlib import Path

from kwiki.results.store import RENAMED_PAGES, ClaimRow, RecordRow, append_rows, read_store, rename_pages

REPO = Path(__file__).resolve().parent.parent
PROV = {"gpu": "NVIDIA H200", "date": "2026-12-01T00:00:00+00:00"}


def _claim(page: str, run: str) -> ClaimRow:
    return ClaimRow(run_id=run, artifact="a", **PROV, page=page, claim="c", verdict="reproduced", value=1.5, unit="x")


def _record(run: str) -> RecordRow:
    return RecordRow(run_id=run, artifact="a", **PROV, target="sm_90a", variant="v", passed=True,
                     figures={"time_us": 2.0})


def test_only_the_page_of_renamed_claim_rows_changes_and_every_run_still_reads(tmp_path: Path):
    store = tmp_path / "results" / "nvidia-h200.jsonl"
    append_rows(store, [_record("r1"), _claim("old-page", "r1"), _claim("kept-page", "r1")])
    append_rows(store, [_claim("old-page", "r2")])
    with store.open("a", encoding="utf-8") as fh:  # a line that is not a row mentions the old id: left alone
        fh.write('{"kind": "note", "page": "old-page"}\n')
    before = store.read_text(encoding="utf-8").splitlines()

    assert rename_pages(store, {"old-page": "technique-new-page"}) == 2
    after = store.read_text(encoding="utf-8").splitlines()
    assert len(after) == len(before)  # same rows, same commit lines (which count rows), same order
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(changed) == 2
    for a, b in changed:
        old, new = json.loads(a), json.loads(b)
        assert (old["page"], new["page"]) == ("old-page", "technique-new-page")
        assert {**old, "page": new["page"]} == new
    rows, problems = read_store(store, warn=False)
    assert [getattr(r, "page", None) for r in rows] == [None, "technique-new-page", "kept-page", "technique-new-page"]
    assert [p.line for p in problems] == [len(after)]  # only the note, as before
    assert rename_pages(store, {"old-page": "technique-new-page"}) == 0  # run twice: nothing left to change


def test_a_missing_store_is_nothing_to_migrate(tmp_path: Path):
    assert rename_pages(tmp_path / "results" / "none.jsonl", RENAMED_PAGES) == 0


def test_the_committed_store_holds_no_renamed_id_any_more():
    for path in sorted((REPO / "results").glob("*.jsonl")):
        rows, _ = read_store(path, warn=False)
        assert not {r.page for r in rows if isinstance(r, ClaimRow)} & set(RENAMED_PAGES), path.name
