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
