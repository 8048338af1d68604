"""The profile audits as committed, on the page tagged `profile-audit`: a chart of declared / profiled per level with
each level's tolerance, the distribution as a table, a line of words; read from results/audits/, never typed in."""

from __future__ import annotations

import json
from pathlib import Path

from kwiki.results.audits import AuditRow, Audits
from kwiki.site.auditchart import audit_spec, audit_table, caption, draw_audits


def _row(variant: str, declared: float, profiled: float | None, passed: bool = True, **kw: object) -> AuditRow:
    return AuditRow.model_validate({
        "key": "k" + variant, "artifact": kw.pop("artifact", "copy_sm90a"), "series": "s", "target": "sm_90a",
        "variant": variant, "params": {"n": 1}, "bytes_declared": declared, "bytes_profiled": profiled,
        "tolerance": 0.02, "passed": passed, "gpu": "NVIDIA H200", "date": "2026-12-02", **kw})


def test_every_counted_audit_is_a_point_and_the_table_gives_its_distribution():
    audits = Audits([_row("a", 100.0, 100.0), _row("b", 50.0, 100.0), _row("c", 110.0, 100.0, passed=False),
                     _row("copy", 100.0, None), _row("l2", 98.0, 100.0, bytes_level="l2", artifact="other")])
    spec = audit_spec(audits)
    assert spec is not None
    dram, l2 = spec["levels"]
    assert (dram["label"], len(dram["points"]), dram["failed"], dram["tolerance"]) == ("DRAM bytes", 3, 1, 0.02)
    assert (l2["label"], len(l2["points"]), l2["artifacts"]) == ("L2 bytes", 1, 1)  # the uncounted copy: no point
    table = audit_table(spec)
    assert table[1] == ["DRAM bytes", "3", "1", "0.500", "1.00", "1.100", "1.100", "1.02", "1"]
    words = caption(spec)
    assert "DRAM bytes: 3 audits of 1 artifacts, the highest 1.100 against a limit of 1.02, 1 failed" in words
    svg = draw_audits(spec)
    assert svg.startswith(b"<svg") and svg.count(b"<circle") == 4 and svg.count(b'stroke="#c62828"') == 2
    assert b"copy_sm90a c: declared / profiled 1.100" in svg
    assert audit_spec(Audits([_row("copy", 100.0, None)])) is None  # nothing counted: nothing drawn


def test_the_tagged_page_shows_the_committed_audits_and_no_other_page_does(fixture_copy):
    from kwiki.site.stage import generate

    root: Path = fixture_copy("site", "site")
    page = root / "wiki" / "patterns" / "spec-only.md"
    page.write_text(page.read_text().replace("tags: [memory-bound, hbm]", "tags: [memory-bound, hbm, profile-audit]"))
    (root / "results" / "audits").mkdir(parents=True)
    (root / "results" / "audits" / "nvidia-h200.jsonl").write_text(
        "".join(json.dumps(r.model_dump(mode="json", exclude_none=True)) + "\n"
                for r in (_row("a", 100.0, 100.0), _row("b", 80.0, 100.0))))
    files, _, _ = generate(root, strict=False, key="0" * 32)
    text = files["patterns/spec-only.md"].decode()
    assert "## Profile audits, as committed" in text
    assert "| DRAM bytes | 2 | 1 | 0.800 | 0.900 | 1.000 | 1.000 | 1.02 | 0 |" in text
    assert files["assets/kwiki/charts/spec-only/audits.svg"].startswith(b"<svg")
    assert "Profile audits" not in files["techniques/vector-copy.md"].decode()

    (root / "results" / "audits" / "nvidia-h200.jsonl").unlink()
    files, _, _ = generate(root, strict=False, key="0" * 32)
    assert "No profile audit is committed yet" in files["patterns/spec-only.md"].decode()
