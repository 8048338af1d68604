"""`kwiki verify --profile` / `--sanitize` run build -> that stage only: no timed runs before them (on the H200 the
whole timed verify, ~120 s, ran first), no claims judged, nothing written; `--variants` narrows them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.verify import pipeline
from kwiki.verify.types import Options


@pytest.fixture
def project(fixture_copy) -> Path:
    return fixture_copy("verify/project", "project")


def fixture_page(project: Path, capsys, *argv: str) -> tuple[int, dict]:
    code = main(["verify", "fixture-page", "--quiet", "--json", "--no-write", "--root", str(project), *argv])
    out = capsys.readouterr().out
    return code, json.loads(out) if out.strip() else {}


@pytest.mark.parametrize("stage", [["--profile"], ["--sanitize=memcheck"]])
def test_a_stage_runs_no_timed_run_and_judges_no_claim(project, capsys, monkeypatch, stage):
    def no_timed_run(*_a, **_k):
        raise AssertionError("a timed run before an opt-in stage")

    monkeypatch.setattr(pipeline, "_run_stage", no_timed_run)
    _, report = fixture_page(project, capsys, *stage)
    assert report["runs"] == [] and report["claims"] == [] and report["record_changes"] == []
    assert [b["artifact"] for b in report["builds"]] == ["host_ok"]  # built all the same
    assert any("build, then only that stage: no timed runs" in n for n in report["notes"])
    assert not (project / "results").exists()


def test_without_a_stage_the_timed_run_happens(project, capsys, monkeypatch):
    ran = []
    monkeypatch.setattr(pipeline, "_run_stage", lambda *a, **k: ran.append(1) or ({}, 0.0, 0))
    fixture_page(project, capsys)
    assert ran == [1]


def test_variants_needs_a_stage_and_known_names(project, capsys):
    assert main(["verify", "fixture-page", "--quiet", "--no-write", "--root", str(project), "--variants=fast"]) == 2
    assert "--variants selects what --profile and --sanitize run" in capsys.readouterr().err
    assert main(["verify", "fixture-page", "--quiet", "--no-write", "--root", str(project), "--profile",
                 "--variants=fsat"]) == 2
    assert "--variants: fsat: no artifact of the selected pages has such a variant (did you mean 'fast'?)" in \
        capsys.readouterr().err


def test_variants_narrows_what_a_stage_runs(project, monkeypatch):
    seen = []
    real = pipeline.make_plan
    monkeypatch.setattr(pipeline, "make_plan", lambda *a, **k: seen.append(real(*a, **k)) or seen[-1])
    pipeline.verify(project, Options(ids=("fixture-page",), write=False, jobs=1, profile=True,
                                     variants=("fast", "baseline")), lambda _m: None)
    (a,) = seen[0].artifacts.values()
    assert a.run_variants == ["fast", "baseline"] and a.isolated == []


def test_profile_hands_on_each_artifact_as_it_finishes(monkeypatch, tmp_path):
    """--profile commits each artifact's audits when that artifact is profiled: a run stopped part-way (a time
    limit's SIGTERM, on the H200 on 2026-12-02, lost every audit of the artifacts it had finished) keeps them."""
    from types import SimpleNamespace

    import kwiki.verify.profile as profiler

    plan = SimpleNamespace(gpu=SimpleNamespace(name="NVIDIA H200", index=0), artifacts={})
    monkeypatch.setattr(profiler, "_gpu_builds", lambda *_a: [("a", SimpleNamespace(name="first"), None),
                                                             ("b", SimpleNamespace(name="second"), None)])

    def profile_artifact(planned, _build, **_k):
        if planned.name == "second":
            raise KeyboardInterrupt  # stopped while the second artifact is under ncu
        return profiler.ArtifactProfile(planned.name)

    monkeypatch.setattr(profiler, "profile_artifact", profile_artifact)
    handed = []
    with pytest.raises(KeyboardInterrupt):
        profiler.run_stage(plan, [], tmp_path, lambda _m: None, ncu="ncu", each=lambda p: handed.append(p.artifact))
    assert handed == ["first"]
