"""On the GPU: kwiki's Python harness with Triton (run these on the H200, where torch and Triton are)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent
CHEATS = Path(__file__).parent / "fixtures" / "python_gpu"

pytestmark = [pytest.mark.gpu]  # the harness's Python ($KWIKI_PYTHON, default this one) needs torch and Triton


def test_triton_cheats_fail_and_the_honest_copy_is_timed(tmp_path: Path, capsys):
    root = tmp_path / "cheats"
    shutil.copytree(CHEATS, root)
    shutil.copytree(REPO / "artifacts" / "common", root / "artifacts" / "common")
    main(["verify", "--quiet", "--json", "--no-write", "--root", str(root)])
    report = json.loads(capsys.readouterr().out)
    runs = {r["variants"][0]: r for r in report["runs"]}
    claims = {c["claim"]: c for c in report["claims"]}
    assert runs["honest"]["status"] == "ok", runs["honest"]
    assert claims["honest-bandwidth"]["verdict"] == "reproduced", claims["honest-bandwidth"]
    for cheat in ("cached_return", "skips_launch"):
        assert runs[cheat]["status"] == "check-failed", runs[cheat]
        assert "timed sample" in runs[cheat]["message"], runs[cheat]
    assert claims["cached-return-bandwidth"]["verdict"] == "failed"
    assert claims["skips-launch-bandwidth"]["verdict"] == "failed"
    log = (root / runs["honest"]["log"]).read_text()
    record = json.loads(next(ln for ln in log.splitlines() if ln.startswith('{"kwiki_record"') and '"honest"' in ln))
    assert record["timing_source"] == "cupti", record  # the torch profiler saw the kernels
    assert record["extra"]["triton"] and record["extra"]["torch"]
    assert (root / ".kwiki" / "triton-cache").is_dir()  # Triton's kernels cached under .kwiki/


def test_a_cuda_kernel_from_the_artifacts_library_is_timed_beside_torch_in_one_process(tmp_path: Path, capsys):
    root = tmp_path / "cuda"
    shutil.copytree(Path(__file__).parent / "fixtures" / "python_cuda", root)
    shutil.copytree(REPO / "artifacts" / "common", root / "artifacts" / "common")
    main(["verify", "--quiet", "--json", "--no-write", "--root", str(root)])
    report = json.loads(capsys.readouterr().out)
    runs = {r["variants"][0]: r for r in report["runs"]}
    assert runs["cuda_vec4"]["status"] == "ok" and runs["torch_mul"]["status"] == "ok", runs
    assert runs["cuda_vec4"]["log"] == runs["torch_mul"]["log"]  # one harness process timed both, interleaved
    (mech,) = report["mechanism"]
    assert mech["status"] == "passed", mech  # the SASS gate read the library
    (claim,) = report["claims"]
    assert claim["verdict"] in ("reproduced", "better") and not claim["gates"], claim  # the identity gate passed
    log = (root / runs["cuda_vec4"]["log"]).read_text()
    record = json.loads(next(ln for ln in log.splitlines() if ln.startswith('{"kwiki_record"') and '"cuda_vec4"' in ln))
    assert record["timing_source"] == "cupti" and any("scale_vec4_kernel" in k for k in record["kernels"]), record
