"""bench/page_groups.py: pages that share an artifact stay in one verify group (a second run of an artifact in the
same device call would count as a second run of its series)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("page_groups", ROOT / "bench" / "page_groups.py")
assert _spec and _spec.loader
page_groups = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(page_groups)


def test_pages_sharing_an_artifact_stay_together_even_when_far_apart():
    pages = [("a", ["x"]), ("b", ["y"]), ("c", ["z"]), ("d", ["x", "w"])]
    comps = page_groups.components(pages)
    assert [ids for ids, _ in comps] == [["a", "d"], ["b"], ["c"]]
    assert page_groups.pack(comps, 2) == [["a", "d"], ["b", "c"]]  # {x, w} fills a group; y and z share one


def test_every_artifact_of_the_wiki_is_in_exactly_one_group():
    groups = [line.split() for line in _lines()]
    seen: dict[str, int] = {}
    from kwiki.verify.plan import runnable_artifacts
    from kwiki.wiki.catalog import load_wiki
    by_id = {p.id: p for p in load_wiki(ROOT).pages}
    for n, group in enumerate(groups):
        for pid in group:
            for art in runnable_artifacts(by_id[pid], ROOT):
                assert seen.setdefault(art, n) == n, f"{art} in groups {seen[art]} and {n}"
    assert seen  # the wiki has measured pages


def _lines() -> list[str]:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert page_groups.main(["--max", "2"]) == 0
    return [line for line in buf.getvalue().splitlines() if line]
