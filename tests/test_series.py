"""Verdicts over runs: the series key, the median and band, provisional pages, drift, --until-runs.

`tests/fixtures/verify/series/` holds a host-only artifact whose stream time is 250 us x
$KWIKI_TEST_SCALE, so a test can make the runs of one series move as boards and clocks do.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.results.judge import judge
from kwiki.results.record import PROTOCOL_VERSION
from kwiki.results.series import drift_text, stats
from kwiki.results.standing import State, standing
from kwiki.verify import series
from kwiki.verify.types import PlannedArtifact
from kwiki.wiki.catalog import load_wiki
from kwiki.wiki.frontmatter import parse_page
from kwiki.wiki.manifest import Manifest, Variant
from kwiki.wiki.model import Claim
from kwiki.wiki.verdict import Verdict

SERIES = Path(__file__).parent / "fixtures" / "verify" / "series"


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    root = tmp_path / "series"
    shutil.copytree(SERIES, root)
    monkeypatch.setenv("KWIKI_TEST_SCALE", "1")
    return root


def verify_json(capsys, root: Path, *argv: str) -> dict:
    main(["verify", "--quiet", "--json", "--root", str(root), *argv])
    return json.loads(capsys.readouterr().out)


def claims_of(report: dict) -> dict[str, dict]:
    return {c["claim"]: c for c in report["claims"]}


def page_state(root: Path) -> State:
    page = next(p for p in load_wiki(root).pages if p.id == "series-page")
    assert page.meta is not None
    return standing(page.meta).state


def measurements(root: Path) -> dict:
    return parse_page((root / "wiki" / "series.md").read_bytes()).data["measurements"]


# ---------------------------------------------------------------- statistics


def test_band_is_k_mad_with_a_2_percent_floor():
    steady = stats([1.0, 1.0, 1.1])
    assert (steady.median, steady.band, steady.runs) == (1.0, 0.02, 3)  # MAD 0: the floor
    assert steady.drift(1.1) == pytest.approx(0.1)
    assert steady.drift(1.01) is None
    noisy = stats([1.0, 1.05, 0.95])  # MAD 0.05 -> 3 x 1.4826 x 0.05 = 22%
    assert noisy.band == pytest.approx(0.2224, abs=1e-4) and noisy.drift(0.95) is None
    assert stats([5.0]).drift(5.0) is None  # one run cannot drift
    assert drift_text(0.0843) == "+8.4% vs the series median"


# ---------------------------------------------------------------- the key


def keyed_project(tmp_path: Path) -> tuple[Path, PlannedArtifact]:
    root = tmp_path / "p"
    (root / "artifacts" / "common").mkdir(parents=True)
    (root / "artifacts" / "common" / "used.cuh").write_text("// used\n")
    (root / "artifacts" / "common" / "unused.cuh").write_text("// unused\n")
    (root / "artifacts" / "a").mkdir()
    (root / "artifacts" / "a" / "a.cu").write_text('#include "used.cuh"\nint main() {}\n')
    manifest = Manifest.model_validate({"name": "a", "title": "t", "targets": ["sm_90a"],
                                        "build": {"sources": ["a.cu"]}, "variants": [{"name": "v"}]})
    return root, PlannedArtifact("artifacts/a", root / "artifacts" / "a", manifest)


def test_series_key_follows_the_artifacts_own_sources_and_includes_only(tmp_path, monkeypatch):
    root, planned = keyed_project(tmp_path)
    key = series.series_key(planned, "NVIDIA H200", root)
    assert key is not None and key.startswith(f"nvidia-h200/p{PROTOCOL_VERSION}/")
    (root / "artifacts" / "common" / "unused.cuh").write_text("// edited, included by nobody here\n")
    assert series.series_key(planned, "NVIDIA H200", root) == key  # a shared header it does not include
    (root / "artifacts" / "common" / "used.cuh").write_text("// edited\n")
    edited = series.series_key(planned, "NVIDIA H200", root)
    assert edited != key  # a header it includes
    assert series.series_key(planned, "NVIDIA H100 80GB HBM3", root) != edited  # another GPU model
    monkeypatch.setattr(series, "PROTOCOL_VERSION", PROTOCOL_VERSION + 1)
    assert series.series_key(planned, "NVIDIA H200", root).startswith(f"nvidia-h200/p{PROTOCOL_VERSION + 1}/")  # type: ignore[union-attr]


def test_a_declared_flops_dtype_starts_a_series_of_its_own(tmp_path):
    """What a manifest says a variant's FLOPs run in (Variant.flops_dtype) changes what its records declare: a
    series is one code and one declaration of its work. A manifest that says none keeps the key it had."""
    root, planned = keyed_project(tmp_path)
    key = series.series_key(planned, "NVIDIA H200", root)
    assert planned.manifest is not None
    plain = planned.manifest.model_copy(update={"variants": [Variant(name="v", description="restated")]})
    assert series.series_key(PlannedArtifact(planned.path, planned.directory, plain), "NVIDIA H200", root) == key
    declared = planned.manifest.model_copy(update={"variants": [Variant(name="v", flops_dtype="fp32")]})
    assert series.series_key(PlannedArtifact(planned.path, planned.directory, declared), "NVIDIA H200", root) != key


# ---------------------------------------------------------------- verdicts over runs, end to end


def test_fewer_than_three_runs_is_provisional_never_verified(project, capsys):
    for n in (1, 2):
        c = claims_of(verify_json(capsys, project))["stream-time"]
        assert c["verdict"] == "reproduced"
        assert c["series"]["runs"] == n and c["series"]["provisional"] is True
        assert measurements(project)["evidence_level"] == "measured"  # every claim passes, yet not verified
        assert page_state(project) == State.provisional
    assert "| 2 of 3 runs, 250.0–250.0: provisional |" in (project / "wiki" / "series.md").read_text()
    c = claims_of(verify_json(capsys, project))["stream-time"]
    assert c["series"]["runs"] == 3 and c["series"]["provisional"] is False
    assert measurements(project)["evidence_level"] == "verified"
    assert page_state(project) == State.verified
    shown = json.loads(_show(capsys, project))["claims"][0]["measured"]
    assert (shown["runs"], shown["range"], shown.get("provisional", False), shown.get("gates", [])) == (
        3, [250.0, 250.0], False, [])  # compact JSON: what is false or empty is left out


def _show(capsys, root: Path) -> str:
    assert main(["show", "--json", "--root", str(root), "series-page"]) == 0
    return capsys.readouterr().out


def test_the_verdict_is_the_series_median_and_drift_lies_outside_the_band(project, capsys, monkeypatch):
    for _ in range(3):
        verify_json(capsys, project)
    monkeypatch.setenv("KWIKI_TEST_SCALE", "1.12")  # this board runs 12% slow: 280 us, beyond the 5% tolerance
    claim = Claim.model_validate({"id": "c", "statement": "s", "metric": "time", "unit": "us", "value": 250,
                                  "tolerance": 0.05})
    assert judge(claim, 280.0, 0.001) == Verdict.worse  # what one run alone would say
    c = claims_of(verify_json(capsys, project, "--no-write"))["stream-time"]
    assert c["value"] == pytest.approx(280.0)
    assert c["verdict"] == "reproduced"  # the median of 250, 250, 280
    assert c["series"]["median"] == pytest.approx(250.0)
    assert c["series"]["drift"] == pytest.approx(0.12) and c["change"] == "slower"
    main(["verify", "--quiet", "--root", str(project)])  # the same run again, written, for people
    assert "stream-time: drifted: this run 280.0 us is +12.0% vs the series median" in capsys.readouterr().out
    m = measurements(project)["claims"]["stream-time"]
    assert m["value"] == pytest.approx(250.0) and m["range"] == [250.0, 280.0] and m["drift"] == pytest.approx(0.12)
    assert page_state(project) == State.drifted
    assert "(latest run +12.0% vs the series median)" in (project / "wiki" / "series.md").read_text()


def test_a_move_inside_the_band_is_not_a_drift(project, capsys, monkeypatch):
    for _ in range(3):
        verify_json(capsys, project)
    monkeypatch.setenv("KWIKI_TEST_SCALE", "1.015")  # 1.5%: inside the 2% floor
    c = claims_of(verify_json(capsys, project))["stream-time"]
    assert c["series"]["drift"] is None and c["change"] == "same"
    assert page_state(project) == State.verified


def test_runs_from_other_sessions_count_and_new_code_starts_a_new_series(project, capsys):
    verify_json(capsys, project)
    store = project / "results" / "host.jsonl"
    # another session, on another board of the same model, committed its run of the same code
    other = [json.loads(line) for line in store.read_text().splitlines()]
    for row in other:
        row["run_id"], row["date"] = "20261201T000000Z-0badcafe", "2026-12-01T00:00:00+00:00"
    store.write_text(store.read_text() + "".join(json.dumps(r) + "\n" for r in other))
    assert claims_of(verify_json(capsys, project))["stream-time"]["series"]["runs"] == 3
    source = project / "artifacts" / "drifting" / "drifting.py"
    source.write_text(source.read_text() + "\n# a new kernel: a new series\n")
    c = claims_of(verify_json(capsys, project))["stream-time"]
    assert c["series"]["runs"] == 1 and c["series"]["provisional"] is True


def test_until_runs_runs_only_the_short_series(project, capsys):
    verify_json(capsys, project)
    report = verify_json(capsys, project, "--until-runs", "2")
    assert claims_of(report)["stream-time"]["series"]["runs"] == 2  # 1 < 2: it ran
    store = project / "results" / "host.jsonl"
    page = project / "wiki" / "series.md"
    before = (store.read_bytes(), page.read_bytes())
    report = verify_json(capsys, project, "--until-runs", "2")
    c = claims_of(report)["stream-time"]
    assert c["verdict"] == "not-run" and "--until-runs 2" in c["detail"]
    assert report["runs"] == [] and report["builds"] == []
    assert any("--until-runs 2: 1 artifacts" in n for n in report["notes"])
    assert (store.read_bytes(), page.read_bytes()) == before  # nothing ran, nothing written


def add_steady(root: Path) -> None:
    """A second artifact on the page (a copy of drifting), with a claim of its own."""
    shutil.copytree(root / "artifacts" / "drifting", root / "artifacts" / "steady")
    manifest = root / "artifacts" / "steady" / "artifact.yaml"
    manifest.write_text(manifest.read_text().replace("name: drifting", "name: steady"))
    page = root / "wiki" / "series.md"
    page.write_text(page.read_text().replace(
        "  drifting: artifacts/drifting\n", "  drifting: artifacts/drifting\n  steady: artifacts/steady\n").replace(
        "claims:\n", "claims:\n- id: steady-time\n  statement: The steady stream takes 250 us.\n  metric: time\n"
                     "  unit: us\n  value: 250\n  tolerance: 0.05\n"
                     "  measure: {artifact: steady, of: {variant: stream, figure: time_us}}\n", 1))


def test_a_claim_left_out_by_until_runs_keeps_its_page_verified(project, capsys):
    add_steady(project)
    for _ in range(3):
        verify_json(capsys, project)
    assert measurements(project)["evidence_level"] == "verified"
    source = project / "artifacts" / "drifting" / "drifting.py"  # new code: a new series for drifting alone
    source.write_text(source.read_text() + "\n# a new kernel: a new series\n")
    for _ in range(3):
        c = claims_of(verify_json(capsys, project, "--until-runs", "3"))  # steady (3 runs) is left out each time
    assert c["steady-time"]["verdict"] == "not-run" and c["stream-time"]["series"]["runs"] == 3
    m = measurements(project)
    assert m["claims"]["steady-time"]["verdict"] == "reproduced" and m["claims"]["steady-time"]["runs"] == 3
    assert m["evidence_level"] == "verified"  # the kept entry is of steady's current series: it still stands


def hashes(provenance: str) -> list[str]:
    return provenance.split("; artifact ")[1].split(";")[0].split(", ")


def ladder_region(root: Path) -> str:
    from kwiki.wiki import markers

    return next(r.content for r in markers.scan(parse_page((root / "wiki" / "series.md").read_bytes()).body)
                if r.name == "ladder")


def test_an_artifact_left_out_by_until_runs_keeps_its_ladder_with_the_run_that_measured_it(project, capsys):
    """A run that left one of a page's two artifacts out wrote the page's ladders from its own runs alone, and the
    other's ladder was gone (the fp8 technique page's quantization ladder, H200, 2026-12-06)."""
    add_steady(project)
    for _ in range(3):
        verify_json(capsys, project)
    both = ladder_region(project)
    steady = both[both.index("(`artifacts/steady`, target"):both.index("*Measured by")].strip()
    source = project / "artifacts" / "drifting" / "drifting.py"  # new code: a new series for drifting alone
    source.write_text(source.read_text() + "\n# a new kernel: a new series\n")
    for _ in range(2):
        assert claims_of(verify_json(capsys, project, "--until-runs", "3"))["steady-time"]["verdict"] == "not-run"
        region = ladder_region(project)
        assert "(`artifacts/drifting`, target" in region and steady in region  # steady's table as it was written
        kept = [line for line in region.split("\n") if line.startswith("*The ladder above is an earlier run's")]
        assert len(kept) == 1 and "left `artifacts/steady` out" in kept[0]  # said once, however many runs leave it
        assert region.index(steady) < region.index(kept[0]) < region.rindex("*Measured by `kwiki verify`")
        foot = region[region.rindex("*Measured by `kwiki verify`"):]
        assert ", ".join(sorted(hashes(kept[0]))) not in foot and len(hashes(foot)) == 1  # the code that ran
    assert page_state(project) in (State.verified, State.provisional)  # the page still parses and validates


def test_until_runs_runs_the_artifact_a_short_series_claim_compares_with(project, capsys):
    """A claim of one artifact against another's figure compares records of one run. --until-runs left the
    other out when its series was full (NVFP4's GEMV against the bf16 GEMV, H200, 2026-12-05): the claim ended
    not-run and its page kept a figure of earlier code. The other artifact now runs with it; an artifact no
    running claim needs is still left out."""
    for name in ("steady", "idle"):
        shutil.copytree(project / "artifacts" / "drifting", project / "artifacts" / name)
        manifest = project / "artifacts" / name / "artifact.yaml"
        manifest.write_text(manifest.read_text().replace("name: drifting", f"name: {name}"))
    page = project / "wiki" / "series.md"
    page.write_text(page.read_text().replace(
        "  drifting: artifacts/drifting\n",
        "  drifting: artifacts/drifting\n  steady: artifacts/steady\n  idle: artifacts/idle\n").replace(
        "claims:\n", "claims:\n- id: drifting-over-steady\n  statement: The two streams take the same time.\n"
                     "  metric: ratio\n  unit: x\n  at_least: 0.5\n  at_most: 2\n"
                     "  measure: {artifact: drifting, of: {variant: stream, figure: time_us},"
                     " per: {artifact: steady, variant: stream, figure: time_us}}\n"
                     "- id: idle-time\n  statement: The idle stream takes 250 us.\n  metric: time\n"
                     "  unit: us\n  value: 250\n  tolerance: 0.05\n"
                     "  measure: {artifact: idle, of: {variant: stream, figure: time_us}}\n", 1))
    for _ in range(3):
        verify_json(capsys, project)
    source = project / "artifacts" / "drifting" / "drifting.py"  # new code: a new series for drifting alone
    source.write_text(source.read_text() + "\n# a new kernel: a new series\n")
    report = verify_json(capsys, project, "--until-runs", "3")
    c = claims_of(report)
    assert c["drifting-over-steady"]["verdict"] != "not-run" and c["drifting-over-steady"]["series"]["runs"] == 1
    assert c["idle-time"]["verdict"] == "not-run"  # no claim that runs reads idle: left out
    assert any("--until-runs 3: 1 artifacts" in n and "(idle)" in n for n in report["notes"])


def test_until_runs_must_be_a_positive_number(project, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["verify", "--root", str(project), "--until-runs", "0"])
    assert exc.value.code == 2 and "give at least 1" in capsys.readouterr().err


def test_a_page_drifts_only_when_its_latest_run_leaves_the_band():
    """Under series, a claim that passed the run before and is ambiguous now is not a drift by itself
    (the old reading showed an orange 'drifted' for moves within ordinary run-to-run noise)."""
    from kwiki.results.store import ClaimRow
    from kwiki.wiki.model import PageMeta

    def meta(drift: float | None) -> PageMeta:
        claim = {"statement": "s", "metric": "bandwidth", "unit": "TB/s", "at_least": 4.0}
        measured = {"unit": "TB/s", "runs": 3, "range": [4.0, 4.1]}
        return PageMeta.model_validate({
            "id": "p", "title": "t", "type": "technique",
            "claims": [{"id": "a", **claim}, {"id": "b", **claim}],
            "measurements": {"evidence_level": "measured", "date": "2026-12-01", "claims": {
                "a": {"verdict": "reproduced", "value": 4.4, **measured},
                "b": {"verdict": "ambiguous", "value": 4.05, "drift": drift, **measured}}}})

    def row(date: str, verdict: str) -> ClaimRow:
        return ClaimRow(run_id=date, date=date, gpu="NVIDIA H200", artifact="x", page="p", claim="b",
                        value=4.05, verdict=verdict)

    history = [row("2026-11-30T00:00:00Z", "reproduced"), row("2026-12-01T00:00:00Z", "ambiguous")]
    assert standing(meta(None), history).state == State.measured
    drifted = standing(meta(-0.05), history)
    assert drifted.state == State.drifted and drifted.moved == ["b"]


def test_kwiki_show_and_the_evidence_index_know_provisional_pages(project, capsys):
    from kwiki.cli.show import render_text
    from kwiki.site.listings import SitePage, evidence_page

    verify_json(capsys, project)
    text = render_text(json.loads(_show(capsys, project)))
    assert "250 us (1 run, provisional)" in text
    page = next(p for p in load_wiki(project).pages if p.id == "series-page")
    assert page.meta is not None
    index = evidence_page([SitePage(page, "series.md", page.meta, standing(page.meta))])
    assert "## Provisional (1)" in index
