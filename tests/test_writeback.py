"""Write-back: only kwiki's places change, byte-exactly, atomically, even under SIGKILL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kwiki.core.errors import WriteBackError
from kwiki.verify.writeback import apply, write_page
from kwiki.wiki.frontmatter import parse_page
from kwiki.wiki.markers import scan

PAGE = (b"---\nid: p\ntitle: P\ntype: technique\n---\n# P\n\nAuthor text.\n\n"
        b"<!-- kwiki:claims -->\n<!-- /kwiki:claims -->\n\nMore author text.\n")


def test_apply_inserts_then_replaces_only_kwiki_places():
    once = apply(PAGE, "measurements:\n  evidence_level: measured\n  date: '2026-01-01'\n", {"claims": "T1\n"})
    assert once.startswith(b"---\nid: p\ntitle: P\ntype: technique\n# kwiki:measurements sha256=")
    assert b"# P\n\nAuthor text.\n\n<!-- kwiki:claims sha256=" in once
    assert once.endswith(b"<!-- /kwiki:claims -->\n\nMore author text.\n")
    twice = apply(once, "measurements:\n  evidence_level: verified\n  date: '2026-01-02'\n", {"claims": "T2\n"})
    assert twice.replace(b"T2", b"T1").replace(b"verified", b"measured").replace(b"01-02", b"01-01").split(
        b"sha256=")[0] == once.split(b"sha256=")[0]
    fm = parse_page(twice)
    assert fm.data["measurements"]["evidence_level"] == "verified"
    assert [r.name for r in scan(fm.body)] == ["claims"] and not scan(fm.body)[0].edited


def test_apply_appends_missing_region_at_the_end():
    out = apply(PAGE, None, {"ladder": "L\n"})
    assert out.startswith(PAGE)
    assert out[len(PAGE):].startswith(b"\n<!-- kwiki:ladder sha256=")


def test_apply_refuses_mixed_newlines_and_hand_written_measurements():
    with pytest.raises(WriteBackError, match="mixes line endings"):
        apply(PAGE.replace(b"Author text.\n", b"Author text.\r\n"), None, {"claims": "x\n"})
    with pytest.raises(WriteBackError, match="outside kwiki's markers"):
        apply(PAGE.replace(b"type: technique\n", b"type: technique\nmeasurements: {}\n"), "measurements: {}\n", {})


def test_apply_refuses_broken_markers():
    broken = PAGE.replace(b"<!-- /kwiki:claims -->\n", b"")
    with pytest.raises(WriteBackError, match="never closed"):
        apply(broken, None, {"claims": "x\n"})


def test_write_page_refuses_a_page_changed_during_the_run(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_bytes(PAGE)
    with pytest.raises(WriteBackError, match="changed on disk"):
        write_page(page, "p.md", PAGE.decode() + "old", None, {"claims": "x\n"})
    assert page.read_bytes() == PAGE


WRITER = r"""
import sys
from pathlib import Path
from kwiki.wiki.frontmatter import decode
from kwiki.verify.writeback import write_page
page = Path(sys.argv[1])
i = 0
while True:
    cur = page.read_bytes()
    content = "A\n" * 2000 if b"\nA\n" not in cur else "B\n" * 3000
    write_page(page, "p.md", decode(cur)[0], "measurements:\n  evidence_level: measured\n  date: '2026-01-01'\n",
               {"claims": content})
    i += 1
"""


def test_sigkill_at_any_moment_leaves_old_or_new_page(tmp_path: Path):
    page = tmp_path / "p.md"
    page.write_bytes(PAGE)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    rng = random.Random(7)
    for _ in range(30):
        proc = subprocess.Popen([sys.executable, str(script), str(page)], env=env)
        time.sleep(rng.uniform(0.15, 0.6))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        raw = page.read_bytes()
        fm = parse_page(raw)  # always a whole, valid page
        regions = {r.name: r for r in scan(fm.body)}
        assert not regions["claims"].edited
        assert regions["claims"].content in ("", "A\n" * 2000, "B\n" * 3000)
        assert raw.startswith(b"---\nid: p\ntitle: P\ntype: technique\n")
        assert b"# P\n\nAuthor text.\n\n" in raw and raw.endswith(b"\n\nMore author text.\n")
    # a killed write can leave its temporary file; it is hidden and never read as a page
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".p.md.")]
    assert all(name.endswith(".tmp") for name in leftovers)


def test_a_region_after_a_fence_markdown_has_closed_is_replaced_not_appended_again():
    """'````' holding a '```' line ends at the next '````': the claims region after it is the page's,
    so write-back replaces it, run after run, instead of appending another one each time."""
    fixture = Path(__file__).resolve().parent / "fixtures" / "bad" / "marker-hidden-by-fence.md"
    raw = fixture.read_bytes()
    once = apply(raw, None, {"claims": "T1\n"})
    twice = apply(once, None, {"claims": "T2\n"})
    for out in (once, twice):
        assert out.count(b"<!-- kwiki:claims ") == 1 and out.count(b"<!-- /kwiki:claims -->") == 1
        [region] = scan(parse_page(out).body)
        assert region.name == "claims" and not region.edited
    assert b"99 us" not in once and b"T2" in twice and len(twice) == len(once)


def test_a_run_on_another_gpu_model_leaves_the_pages_measurements_as_they_are(fixture_copy):
    """A page measured on an H200 keeps its figures when a run lands on an H100 (the device lent one on 2026-12-05,
    and the run wrote the H100's figures over the H200's): the page is not written, a note says why, and
    --other-gpu writes over it."""
    from kwiki.results.gpu import Gpu
    from kwiki.verify.types import ClaimResult, Plan
    from kwiki.verify.writeback import write_back
    from kwiki.wiki.catalog import load_wiki
    from kwiki.wiki.model import Provenance
    from kwiki.wiki.verdict import Verdict

    root = fixture_copy("verify/project", "project")
    page = root / "wiki" / "fixture.md"

    def run_on(name: str, value: float, **kw) -> tuple[list[str], list[str]]:
        plan = Plan(root, [p for p in load_wiki(root).pages if p.meta and p.meta.id == "fixture-page"], {}, [],
                    Gpu(index=0, name=name, uuid=None, cc=90), False)
        claim = ClaimResult("fixture-page", "fast-time", Verdict.reproduced, value=value, unit="us",
                            artifact="artifacts/host_ok")
        notes: list[str] = []
        written, problems = write_back(root, plan, {}, [claim], Provenance(gpu=name, date="2026-12-05"),
                                       lambda _: None, notes=notes, **kw)
        assert problems == []
        return written, notes

    assert run_on("NVIDIA H200", 100.0) == (["wiki/fixture.md"], [])
    h200 = page.read_bytes()
    assert parse_page(h200).data["measurements"]["verified_on"] == "NVIDIA H200"
    written, notes = run_on("NVIDIA H100 80GB HBM3", 97.0)
    assert written == [] and page.read_bytes() == h200
    assert len(notes) == 1 and "wiki/fixture.md" in notes[0] and "--other-gpu" in notes[0]
    assert run_on("NVIDIA H200", 101.0)[0] == ["wiki/fixture.md"]  # the same model writes as before
    assert run_on("NVIDIA H100 80GB HBM3", 97.0, other_gpu=True)[0] == ["wiki/fixture.md"]
    m = parse_page(page.read_bytes()).data["measurements"]
    assert m["verified_on"] == "NVIDIA H100 80GB HBM3" and m["claims"]["fast-time"]["value"] == 97.0
