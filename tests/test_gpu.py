"""On the GPU: kwiki verify with the shared protocol (run these on the H200)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent
PROJECT = Path(__file__).parent / "fixtures" / "verify" / "gpu_project"

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    shutil.copytree(PROJECT, root)
    shutil.copytree(REPO / "artifacts" / "common", root / "artifacts" / "common")
    return root


def test_protocol_fixture_checks_times_and_writes_back(project, capsys):
    code = main(["verify", "--quiet", "--json", "--root", str(project)])
    report = json.loads(capsys.readouterr().out)
    verdicts = {c["claim"]: c["verdict"] for c in report["claims"]}
    assert verdicts["saxpy-passes"] == "reproduced"
    assert verdicts["wrong-saxpy-is-caught"] == "reproduced"
    assert verdicts["saxpy-bandwidth"] in ("reproduced", "ambiguous")
    assert code == (0 if verdicts["saxpy-bandwidth"] == "reproduced" else 1)
    runs = {tuple(r["variants"]): r for r in report["runs"]}
    assert runs[("saxpy_wrong",)]["status"] == "check-failed"
    log = (project / runs[("saxpy", "device_copy")]["log"]).read_text()
    assert '"sm_mhz_before"' in log
    rows = [json.loads(x) for x in next((project / "results").glob("*.jsonl")).read_text().splitlines()]
    wrong = [r for r in rows if r["kind"] == "record" and r["variant"] == "saxpy_wrong"]
    assert wrong and not wrong[0]["passed"] and "time_us" not in wrong[0]["figures"]
    assert main(["check", "--root", str(project)]) == 0


EXPLOITS = Path(__file__).parent / "fixtures" / "verify" / "exploits_gpu"


def test_cheats_end_with_no_claim_reproduced_and_the_reason_named(tmp_path, capsys):
    """The exploit suite on the GPU: every cheat's bandwidth claim (what the cheat would publish) ends
    not reproduced with its reason; the honest saxpy in the same run is unaffected."""
    root = tmp_path / "exploits"
    shutil.copytree(EXPLOITS, root)
    shutil.copytree(REPO / "artifacts" / "common", root / "artifacts" / "common")
    main(["verify", "--quiet", "--json", "--no-write", "--root", str(root)])
    report = json.loads(capsys.readouterr().out)
    claims = {c["claim"].removesuffix("-bandwidth"): c for c in report["claims"]}
    assert claims["honest"]["verdict"] == "reproduced", claims["honest"]
    for cheat in ("first-launch-only", "cache-by-address", "writes-inputs", "half-accumulate"):
        c = claims[cheat]
        assert c["verdict"] == "failed", c  # the poisoned, re-checked timed samples (or the check) catch it
        assert c["value"] is None
    over = claims["overdeclared"]
    assert over["verdict"] == "failed" and any(g["name"] == "physical" for g in over["gates"]), over
    for honest_time in ("other-stream", "l2-persisting"):  # all streams on the clock; persistence reset
        c = claims[honest_time]
        assert c["verdict"] in ("worse", "failed"), c
        assert c["value"] is None or c["value"] < 4.8 * 1.03, c
    assert [k for k, c in claims.items() if c["verdict"] in ("reproduced", "better")] == ["honest"]


EXPLOITS_P3 = Path(__file__).parent / "fixtures" / "verify" / "exploits_p3"
P3_CHEATS = ("late-8", "late-16", "late-64", "late-1000", "reuse-5", "ipc-5", "ipc-50")


def p3_report(tmp_path: Path, capsys, fresh: bool = True) -> dict:
    root = tmp_path / "exploits_p3"
    shutil.copytree(EXPLOITS_P3, root)
    shutil.copytree(REPO / "artifacts" / "common", root / "artifacts" / "common")
    if not fresh:  # the defense removed: one input set for every sample
        manifest = root / "artifacts" / "cheats3_sm90a" / "artifact.yaml"
        manifest.write_text(manifest.read_text().replace("--fresh=1", "--fresh=0"))
    main(["verify", "--quiet", "--json", "--no-write", "--root", str(root)])
    report = json.loads(capsys.readouterr().out)
    return {c["claim"].removesuffix("-bandwidth"): c for c in report["claims"]}


def test_protocol_three_cheats_under_the_roof_end_not_reproduced(tmp_path, capsys):
    """Work the timer cannot see, corners cut after honest launches, reuse of an earlier output: none reproduced;
    the honest saxpy, burst and sustained, is."""
    claims = p3_report(tmp_path, capsys)
    for honest in ("honest", "honest-sustained"):
        assert claims[honest]["verdict"] == "reproduced", claims[honest]
    for cheat in P3_CHEATS:
        assert claims[cheat]["verdict"] not in ("reproduced", "better"), claims[cheat]


def test_without_fresh_inputs_reuse_passes(tmp_path, capsys):
    """The defense shown by its removal: with one input set, copying part of an earlier output is always right."""
    claims = p3_report(tmp_path, capsys, fresh=False)
    assert claims["reuse-5"]["verdict"] == "reproduced", claims["reuse-5"]
