"""bench/gen_wiki.py: the synthetic wiki the benchmarks time is deterministic and checks clean."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from kwiki.wiki.check import check

GEN = Path(__file__).resolve().parent.parent / "bench" / "gen_wiki.py"


def _gen():
    spec = importlib.util.spec_from_file_location("gen_wiki", GEN)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_wiki", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_same_wiki_other_seed_other_wiki(tmp_path: Path):
    gen = _gen()
    gen.generate(tmp_path / "a", 40, seed=3)
    gen.generate(tmp_path / "b", 40, seed=3)
    gen.generate(tmp_path / "c", 40, seed=4)
    assert _tree(tmp_path / "a") == _tree(tmp_path / "b")
    assert _tree(tmp_path / "a") != _tree(tmp_path / "c")


def test_generated_wiki_checks_clean_and_looks_real(tmp_path: Path):
    pages = _gen().generate(tmp_path, 120, seed=0)
    assert len(pages) == 120 and all(p.suffix == ".md" for p in pages)
    report = check(tmp_path, strict=True)
    assert report.pages == 120 and report.problems == []
    text = "".join(p.read_text(encoding="utf-8") for p in pages)
    assert "claims:" in text and "related:\n- " in text and "](../" in text and "```cuda" in text
    assert any((tmp_path / "artifacts").iterdir())


def test_parallel_check_finds_what_the_serial_one_finds(tmp_path: Path):
    from kwiki.wiki.check import PARALLEL_MIN_PAGES

    _gen().generate(tmp_path, PARALLEL_MIN_PAGES + 20, seed=5)
    pages = sorted((tmp_path / "wiki").rglob("*.md"))
    first, last = pages[0], pages[-1]
    first.write_text(first.read_text().replace("\nrelated:\n- ", "\nrelated:\n- no-such-page\n- ", 1))
    last.write_text(last.read_text().replace("\ntitle:", "\nbogus_field: 1\ntitle:", 1))
    dup = pages[len(pages) // 2]
    dup_id = next(line for line in first.read_text().splitlines() if line.startswith("id:"))
    dup.write_text(dup.read_text().replace(
        next(line for line in dup.read_text().splitlines() if line.startswith("id:")), dup_id, 1))
    serial, parallel = check(tmp_path, jobs=1), check(tmp_path, jobs=2)
    assert serial.problems == parallel.problems
    assert serial.pages == parallel.pages == len(pages)
    messages = " ".join(p.message for p in parallel.problems)
    assert "no page has id 'no-such-page'" in messages and "unknown field" in messages
    assert "is already used by" in messages


def test_store_mode_pages_are_measured_and_trace_to_their_runs(tmp_path: Path):
    """--store: every measured page owns a ladder artifact, the store holds three runs of it, and the page's
    measurements block traces to them (kwiki check runs the trace), so the site shows them as measured."""
    from kwiki.results.standing import claim_rows_by_page, standing
    from kwiki.results.trace import Store, trace
    from kwiki.wiki.catalog import load_wiki

    _gen().generate(tmp_path, 40, seed=2, measured=0.75, store=True)
    report = check(tmp_path, strict=True)
    assert report.pages == 40 and report.problems == []
    store = Store.load(tmp_path)
    by_page = claim_rows_by_page(list(store.claim_rows.values()))
    measured = [p for p in load_wiki(tmp_path).pages if p.meta and p.meta.measurements]
    assert len(measured) >= 20
    for page in measured:
        assert page.meta is not None
        traced = trace(page.meta, store, page.path)
        assert traced is not None and traced.traceable, traced
        state = standing(page.meta, by_page.get(page.meta.id, []), traced).state.value
        assert state in ("verified", "measured", "not-reproduced", "below-goal"), state
        manifest = (tmp_path / page.meta.artifacts["code"] / "artifact.yaml").read_text(encoding="utf-8")
        assert "rung: 0" in manifest and "rung: 5" in manifest
