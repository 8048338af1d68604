"""kwiki verify end to end on the CPU, with host-only fixture artifacts (no GPU needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.wiki.frontmatter import parse_page
from kwiki.wiki.markers import scan

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                               reason="needs a C++ compiler")


@pytest.fixture
def project(fixture_copy) -> Path:
    return fixture_copy("verify/project", "project")


def run_json(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["verify", "--quiet", "--json", *argv])
    out = capsys.readouterr().out
    return code, json.loads(out)


def outside_regions(raw: bytes) -> str:
    """The page text with kwiki's generated regions and measurements block removed."""
    fm = parse_page(raw)
    lines = fm.text.split("\n")
    drop: set[int] = set()
    for r in scan(fm.body, first_line=fm.body_line):
        drop.update(range(r.open_line, r.close_line + 1))
    front = "\n".join(lines[1 : fm.end_line - 1])
    for r in scan(front, yaml=True, first_line=2):
        drop.update(range(r.open_line, r.close_line + 1))
    return "\n".join(line for i, line in enumerate(lines, 1) if i not in drop).rstrip("\n")


@needs_cxx
def test_verdicts_for_good_and_faulty_artifacts(project, capsys):
    code, report = run_json(capsys, "--root", str(project))
    assert code == 1  # faulty artifacts make the run fail
    verdicts = {(c["page"], c["claim"]): c["verdict"] for c in report["claims"]}
    assert verdicts[("fixture-page", "fast-time")] == "reproduced"
    assert verdicts[("fixture-page", "fast-vs-baseline")] == "reproduced"
    assert verdicts[("fixture-page", "slow-bandwidth")] == "worse"
    assert verdicts[("fixture-page", "reported-elsewhere")] == "not-testable"
    assert verdicts[("faults-page", "hang-times-out")] == "reproduced"
    assert verdicts[("faults-page", "crash-crashes")] == "reproduced"
    assert verdicts[("faults-page", "check-fails")] == "reproduced"
    assert verdicts[("faults-page", "failed-check-time")] == "failed"
    for claim in ("garbage-time", "flood-time", "cuda-error-time", "nan-time", "badbuild-time"):
        assert verdicts[("faults-page", claim)] == "error", claim
    statuses = {tuple(r["variants"]): r["status"] for r in report["runs"]}
    assert statuses[("hang",)] == "timeout"
    assert statuses[("crash",)] == "crash"
    assert statuses[("garbage",)] == "bad-output"
    assert statuses[("flood",)] == "output-overflow"
    assert statuses[("cuda_error",)] == "cuda-error"
    (cuda_error,) = [r for r in report["runs"] if r["variants"] == ["cuda_error"]]
    assert cuda_error["message"] == "artifacts/host_faults/main.cu:42: CUDA error: an illegal memory access"
    values = {c["claim"]: c["value"] for c in report["claims"]}
    assert values["fast-time"] == pytest.approx(100.0)
    assert values["fast-vs-baseline"] == pytest.approx(1.5)
    assert values["slow-bandwidth"] == pytest.approx(5.0)
    assert all(values[c] is None for c in ("garbage-time", "flood-time", "failed-check-time", "badbuild-time"))


@needs_cxx
def test_write_back_keeps_every_other_byte(project, capsys):
    page = project / "wiki" / "fixture.md"
    before = page.read_bytes()
    code, report = run_json(capsys, "--root", str(project), "fixture-page")
    assert code == 1  # slow-bandwidth is worse than claimed
    after = page.read_bytes()
    assert after != before
    assert outside_regions(after) == outside_regions(before)
    assert after.startswith(before[: before.index(b"# Fixture")].split(b"---\n# Fixture")[0][:200])
    fm = parse_page(after)
    m = fm.data["measurements"]
    assert m["evidence_level"] == "measured"  # one claim is worse: not verified
    assert m["claims"]["fast-time"]["value"] == pytest.approx(100.0)
    assert m["claims"]["fast-time"]["provenance"]["gpu"] == "host"
    assert "reported-elsewhere" not in m["claims"]
    assert "wiki/fixture.md" in report["written"]
    # the ladder: time, ratio to the baseline, fraction of the ceiling variant's bandwidth, SM clock (none on a host)
    assert "| `fast` | the fast one | dtype=f32, n=1024 | 100.0 ±0.1% | 10.00 TB/s | 1.50x | 200% | — | 32 |" in (
        after.decode())
    assert main(["check", "--root", str(project)]) == 0


@needs_cxx
def test_crlf_and_bom_pages_keep_their_bytes(project, capsys):
    page = project / "wiki" / "fixture.md"
    original = page.read_bytes()
    page.write_bytes(b"\xef\xbb\xbf" + original.replace(b"\n", b"\r\n"))
    before = page.read_bytes()
    run_json(capsys, "--root", str(project), "fixture-page")
    after = page.read_bytes()
    assert after.startswith(b"\xef\xbb\xbf")
    assert b"\n" not in after.replace(b"\r\n", b"")  # still CRLF everywhere
    assert outside_regions(after) == outside_regions(before)


@needs_cxx
def test_second_run_compiles_nothing_and_reports_same(project, capsys):
    run_json(capsys, "--root", str(project), "fixture-page")
    _, report = run_json(capsys, "--root", str(project), "fixture-page")
    assert report["builds"] and all(b["cached"] for b in report["builds"])
    changes = {c["claim"]: c["change"] for c in report["claims"] if c["value"] is not None}
    assert changes == {"fast-time": "same", "fast-vs-baseline": "same", "slow-bandwidth": "same"}
    rows = [json.loads(line) for line in (project / "results" / "host.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in rows} == {"record", "claim", "commit"}
    assert [r["run_id"] for r in rows if r["kind"] == "commit"] == list(dict.fromkeys(r["run_id"] for r in rows))
    assert len({r["run_id"] for r in rows}) == 2  # two runs, each with its own id
    assert sum(1 for r in rows if r["kind"] == "claim" and r["claim"] == "fast-time") == 2


@needs_cxx
def test_changed_source_rebuilds(project, capsys):
    run_json(capsys, "--root", str(project), "fixture-page", "--no-write")
    src = project / "artifacts" / "host_ok" / "main.cpp"
    src.write_text(src.read_text() + "\n// touched\n")
    _, report = run_json(capsys, "--root", str(project), "fixture-page", "--no-write")
    assert [b["cached"] for b in report["builds"]] == [False]


@needs_cxx
def test_hand_edit_of_generated_region_is_reported(project, capsys):
    run_json(capsys, "--root", str(project), "fixture-page")
    page = project / "wiki" / "fixture.md"
    page.write_text(page.read_text().replace("| reproduced |", "| REPRODUCED!! |", 1))
    assert main(["check", "--root", str(project)]) == 1
    out = capsys.readouterr().out
    assert "wiki/fixture.md:" in out and "edited by hand" in out


@needs_cxx
def test_no_write_and_compile_only_write_nothing(project, capsys):
    before = {p: p.read_bytes() for p in (project / "wiki").rglob("*.md")}
    code, report = run_json(capsys, "--root", str(project), "--compile-only")
    assert code == 1  # the bad build still fails the run
    assert report["runs"] == []
    verdicts = {c["claim"]: c["verdict"] for c in report["claims"]}
    assert verdicts["fast-time"] == "not-run"
    assert verdicts["badbuild-time"] == "error"
    run_json(capsys, "--root", str(project), "--no-write")
    assert {p: p.read_bytes() for p in (project / "wiki").rglob("*.md")} == before
    assert not (project / "results").exists()


def test_unknown_page_is_a_usage_error(project, capsys):
    assert main(["verify", "--root", str(project), "no-such-page"]) == 2
    assert "no page has id 'no-such-page'" in capsys.readouterr().err


def test_bad_manifest_is_an_error_of_that_artifact(project, capsys):
    (project / "artifacts" / "host_ok" / "artifact.yaml").write_text("name: host_ok\ntargets: [sm_42]\n")
    code, report = run_json(capsys, "--root", str(project), "fixture-page", "--no-write")
    assert code == 1
    assert any("artifact.yaml" in p["path"] and p["line"] >= 1 for p in report["problems"])
    assert {c["verdict"] for c in report["claims"] if c["claim"] != "reported-elsewhere"} == {"error"}


def test_pages_and_results_written_by_a_run_leave_the_tree_clean(tmp_path):
    """Provenance's `dirty` is about the measured code: the pages and store a first run wrote do not
    make a second run's tree dirty; an edit of an artifact does."""
    import subprocess

    from kwiki.verify.env import git_state

    root = tmp_path / "repo"
    (root / "wiki").mkdir(parents=True)
    (root / "results").mkdir()
    (root / "artifacts").mkdir()
    for rel in ("wiki/p.md", "results/gpu.jsonl", "artifacts/a.cu"):
        (root / rel).write_text("v1\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=root, check=True)
    (root / "wiki" / "p.md").write_text("v2\n")
    (root / "results" / "gpu.jsonl").write_text("v1\nv2\n")
    assert git_state(root)[1] is False
    (root / "artifacts" / "a.cu").write_text("v2\n")
    assert git_state(root)[1] is True


@needs_cxx
def test_the_time_line_says_overhead_per_artifact_only_when_artifacts_ran(project, capsys):
    """A run where nothing ran (--compile-only, or no GPU for GPU artifacts) reports kwiki's whole overhead, not the
    same figure "per artifact" divided by none."""
    main(["verify", "--quiet", "--no-write", "--root", str(project), "--compile-only"])
    assert "s (SASS checks included; no artifact ran)" in capsys.readouterr().out
    main(["verify", "--quiet", "--no-write", "--root", str(project)])
    out = capsys.readouterr().out
    assert "s per artifact" in out and "no artifact ran" not in out
