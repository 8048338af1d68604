"""The measured-timeline pipe: the manifest's `trace`, the untimed trace pass of `kwiki verify`
(kwiki.verify.tracepass), the committed timelines (kwiki.results.timelines) and the page's chart.

The fixture (tests/fixtures/verify/timeline_project) is host-only: its "binary" is a shell script that prints
records when timed and writes Timeline lines when given --trace-out, so the pass runs here as it does on a GPU
(an artifact runs where its target is; the pass follows every artifact that ran)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.core.errors import ManifestError
from kwiki.results.timelines import Timeline, load_timelines
from kwiki.wiki.manifest import load_manifest

ARTIFACT = "artifacts/host_traced"
STORED = Path("results/timelines/host.jsonl")  # the fixture runs on the host: its GPU model is "host"


@pytest.fixture
def project(fixture_copy) -> Path:
    return fixture_copy("verify/timeline_project", "project")


def verify(capsys, root: Path, *argv: str) -> tuple[int, dict]:
    code = main(["verify", "--quiet", "--json", "--root", str(root), *argv])
    return code, json.loads(capsys.readouterr().out)


def stored(root: Path) -> list[dict]:
    path = root / STORED
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def trace_args(root: Path, args: str) -> None:
    manifest = root / ARTIFACT / "artifact.yaml"
    text = manifest.read_text()
    manifest.write_text(text.replace('args: ["--trace-out={out}", "--shapes=1024"]', f"args: {args}"))
    assert manifest.read_text() != text


# ---------------------------------------------------------------- the manifest


def test_the_fixture_manifest_declares_a_trace_pass(project):
    m = load_manifest(project / ARTIFACT, project)
    assert m.trace is not None and m.trace.argv("/t/x.jsonl") == ["--trace-out=/t/x.jsonl", "--shapes=1024"]


@pytest.mark.parametrize("args, said", [
    ('["--shapes=1024"]', "'{out}' appears 0 times"),
    ('["--trace-out={out}", "--also={out}"]', "'{out}' appears 2 times"),
    ('["trace={out}"]', "is not an option"),
    ("[]", "at least 1 item"),
])
def test_trace_args_need_out_exactly_once_and_are_located(project, args, said):
    trace_args(project, args)
    with pytest.raises(ManifestError) as caught:
        load_manifest(project / ARTIFACT, project)
    err = caught.value
    assert err.path == f"{ARTIFACT}/artifact.yaml" and err.field == "trace.args" and said in err.message
    lines = (project / ARTIFACT / "artifact.yaml").read_text().splitlines()
    assert lines[err.line - 1].strip().startswith("args:"), err.line  # the line of trace.args


def test_kwiki_check_reports_a_trace_without_out(project, capsys):
    trace_args(project, '["--shapes=1024"]')
    assert main(["check", "--root", str(project)]) == 1
    assert f"{ARTIFACT}/artifact.yaml:" in capsys.readouterr().out


# ---------------------------------------------------------------- the pass


def test_the_pass_commits_each_timeline_with_the_run_s_gpu_and_id(project, capsys):
    code, report = verify(capsys, project)
    assert code == 0, report["problems"]
    assert report["timelines"]["written"] == 2
    assert any(n.startswith("trace: 2 timelines of 1 artifacts") for n in report["notes"])
    rows = stored(project)
    assert sorted(r["variant"] for r in rows) == ["baseline", "fast"]
    for r in rows:  # kwiki's to fill: the script's "made up" GPU is replaced
        assert r["gpu"] == "host" and r["run_id"] == report["run_id"] and r["params"] == {"n": 1024}
        Timeline.model_validate(r)
    log = project / ".kwiki" / "runs" / report["run_id"] / "host_traced-trace.log"
    assert "--trace-out=" in log.read_text() and "--shapes=1024" in log.read_text()


@pytest.mark.parametrize("mode, said", [
    ("malformed", "line 3 of its timelines file is not a Timeline: spans.0.phase"),
    ("nothing", "wrote no timelines file"),
    ("fail", "exit 3: trace: cannot stamp"),
])
def test_a_bad_trace_is_a_located_warning_and_nothing_is_stored(project, capsys, mode, said):
    (project / ARTIFACT / "TRACE_MODE").write_text(mode)
    code, report = verify(capsys, project)
    assert code == 0 and report["ok"]  # the timed results stand
    assert {c["claim"]: c["verdict"] for c in report["claims"]}["fast-vs-baseline"] == "reproduced"
    (problem,) = [p for p in report["problems"] if p["field"] == "trace"]
    assert problem["path"] == f"{ARTIFACT}/artifact.yaml" and problem["severity"] == "warning"
    assert said in problem["message"], problem["message"]
    assert "Traceback" not in problem["message"]
    assert not (project / STORED).exists()  # a half-read trace is no schedule: none of its lines is kept
    assert (project / "results" / "host.jsonl").exists()  # while the timed run's records are


def test_a_line_of_another_artifact_or_variant_is_refused():
    from kwiki.verify.tracepass import TraceFailed, parse_timelines

    line = {"artifact": "host_traced", "variant": "fast", "spans": [
        {"block": 0, "warpgroup": 0, "phase": "wgmma", "start_ns": 1, "end_ns": 2}]}
    ok = parse_timelines(json.dumps(line), name="host_traced", variants={"fast"}, gpu="G", run_id="r")
    assert [(t.gpu, t.run_id) for t in ok] == [("G", "r")]
    for bad, said in (({**line, "artifact": "other"}, "names artifact 'other'"),
                      ({**line, "variant": "slow"}, "names variant 'slow'"),
                      ({**line, "spans": []}, "has no spans")):
        with pytest.raises(TraceFailed, match=said):
            parse_timelines(json.dumps(bad), name="host_traced", variants={"fast"}, gpu="G", run_id="r")
    with pytest.raises(TraceFailed, match="empty"):
        parse_timelines("\n", name="host_traced", variants={"fast"}, gpu="G", run_id="r")


def test_a_later_run_replaces_the_stored_timeline(project, capsys):
    _, first = verify(capsys, project)
    _, second = verify(capsys, project)
    assert first["run_id"] != second["run_id"]
    rows = stored(project)
    assert len(rows) == 2 and {r["run_id"] for r in rows} == {second["run_id"]}
    # another artifact's line is kept
    path = project / STORED
    other = {"artifact": "elsewhere", "variant": "v", "gpu": "host", "spans": [
        {"block": 0, "warpgroup": 0, "phase": "wgmma", "start_ns": 1, "end_ns": 2}]}
    path.write_text(path.read_text() + json.dumps(other) + "\n")
    verify(capsys, project)
    assert sorted(r["artifact"] for r in stored(project)) == ["elsewhere", "host_traced", "host_traced"]


def test_no_write_stores_no_timeline(project, capsys):
    code, report = verify(capsys, project, "--no-write")
    assert code == 0
    assert report["timelines"]["written"] == 0 and report["timelines"]["artifacts"][0]["timelines"] == 2
    assert any("--no-write: not kept" in n for n in report["notes"])
    assert not (project / "results").exists()


# ---------------------------------------------------------------- the page


def _page(root: Path) -> tuple[str, dict[str, bytes]]:
    from kwiki.site.stage import generate

    files, _, _ = generate(root, strict=True, key="0" * 32)
    return files["traced.md"].decode(), files


def test_the_page_draws_its_artifact_s_stored_timeline_with_a_caption(project, capsys):
    _, report = verify(capsys, project)
    text, files = _page(project)
    charts = sorted(f for f in files if "/timeline-host_traced-" in f)
    assert len(charts) == 2  # one per stored (variant, params)
    assert b"what each warpgroup did when" in files[charts[0]] and files[charts[0]].startswith(b"<svg")
    assert "#### Measured timeline" in text
    assert "host\\_traced fast: what each warpgroup did when, 2 lanes, on host, n=1024" in text  # alt text
    assert ("2 lanes (each warpgroup of 1 CTA); phases tma-issue, wgmma, epilogue; 3.6 µs from the first stamp to "
            f"the last; shape n=1024; host; untimed trace pass of run {report['run_id']}") in text


def test_a_page_without_a_stored_timeline_on_its_gpu_is_unchanged(project, capsys):
    verify(capsys, project)
    path = project / STORED
    rows = stored(project)
    path.unlink()
    before, files = _page(project)
    assert "Measured timeline" not in before and not any("/timeline-" in f for f in files)
    assert any("/ladder-host_traced-" in f for f in files)  # the page still has its ladder
    # a timeline of a GPU model the page's runs were not on is not this page's
    elsewhere = project / "results" / "timelines" / "nvidia-h200.jsonl"
    elsewhere.write_text("".join(json.dumps({**r, "gpu": "NVIDIA H200"}) + "\n" for r in rows))
    assert [t.gpu for t in load_timelines(project)] == ["NVIDIA H200", "NVIDIA H200"]
    after, files = _page(project)
    assert after == before and not any("/timeline-" in f for f in files)
