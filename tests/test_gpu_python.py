"""On the GPU: kwiki's Python harness with Triton (run these on the H200, where torch and Triton are)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from kwiki.cli import main

REPO = Path(__file__).resolve().parent.parent
CHEATS = Path(__file__).parent / "fixtures" / "python_gpu"

pytestmark = [pytest.mark.gpu]  # the harness's Python ($KWIKI_PYTHON, default this one) needs torch and Triton


def test_triton_cheats_fail_and_the_honest_copy_is_timed(tmp_path: Path, capsys):
    root = tmp_path / "cheats"
    shutil.copytree(CHEATS, root)
    shutil.copytree(REPO / "artifacts" / "common", root / "artifacts" / "common")
    main(["verify", "--quiet", "--json", "--no-write", "--root", str(root), "triton-cheats"])
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


# ---------------------------------------------------------------- protocol 3's cheats (tests/fixtures/python_gpu, p3-*)

HONEST = ["honest_torch", "honest_eager_chain", "honest_compile", "honest_triton"]
LATE = ["late_8", "late_16", "late_64", "late_1000"]
HELPER = ["helper_05", "helper_10", "helper_25", "helper_50"]


@pytest.fixture(scope="module")
def p3(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from contextlib import redirect_stdout
    from io import StringIO

    root = tmp_path_factory.mktemp("p3") / "cheats"
    shutil.copytree(CHEATS, root)
    shutil.copytree(REPO / "artifacts" / "common", root / "artifacts" / "common")
    out = StringIO()
    with redirect_stdout(out):
        main(["verify", "--quiet", "--json", "--no-write", "--root", str(root), "p3-python-cheats"])
    report = json.loads(out.getvalue())
    report["by_variant"] = {r["variants"][0]: r for r in report["runs"]}
    report["by_claim"] = {c["claim"]: c for c in report["claims"]}
    report["root"] = root
    return report


def note(**fields: Any) -> None:
    """One JSON line per verdict into $KWIKI_P3_SUMMARY (bench/p3_python_gpu.sh collects them over its runs)."""
    path = os.environ.get("KWIKI_P3_SUMMARY")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(fields, default=str) + "\n")


def p3_record(p3: dict[str, Any], variant: str) -> dict[str, Any]:
    log = Path(p3["root"], p3["by_variant"][variant]["log"]).read_text()
    return next(json.loads(ln) for ln in log.split("--- records")[1].splitlines() if f'"variant":"{variant}"' in ln)


def claim_of(variant: str) -> str:
    return f"{variant.replace('_', '-')}-bandwidth"


@pytest.mark.parametrize("variant", HONEST)
def test_p3_honest_python_variants_are_reproduced_under_the_unseen_gate(p3, variant: str):
    """torch eager, a chain of five eager ops, torch.compile and Triton: their bracket (Python dispatch included)
    stays within this process's own fixed and per-launch cost, measured with torch ops."""
    assert p3["by_variant"][variant]["status"] == "ok", p3["by_variant"][variant]
    claim = p3["by_claim"][claim_of(variant)]
    assert claim["verdict"] == "reproduced" and not claim["gates"], claim
    rec = p3_record(p3, variant)
    t = rec["timer"]
    assert t["kernels"] >= 1 and t["fixed_us"] > 0 and t["event_median_us"] >= rec["timing"]["median_us"], t
    assert t["contexts"] in ("listed", "own-not-listed", "unavailable")
    assert rec["extra"]["fresh_inputs"] == 1 and rec["rechecked"] >= 2
    note(variant=variant, busy_us=rec["timing"]["median_us"], timer=t, parent_us=rec["extra"].get("parent_median_us"))


@pytest.mark.parametrize("variant", [*LATE, "reuse_5pct"])
def test_p3_cheats_that_cut_corners_late_or_reuse_are_not_reproduced(p3, variant: str):
    run = p3["by_variant"][variant]
    assert run["status"] == "check-failed", run
    assert p3["by_claim"][claim_of(variant)]["verdict"] != "reproduced"
    note(variant=variant, status=run["status"], message=run["message"])


@pytest.mark.parametrize("variant", HELPER)
def test_p3_work_handed_to_a_helper_process_is_not_reproduced(p3, variant: str):
    run = p3["by_variant"][variant]
    claim = p3["by_claim"][claim_of(variant)]
    assert run["status"] != "ok" or claim["gates"], (run, claim)  # NVML's listing fails the run, else `unseen`
    assert claim["verdict"] != "reproduced", claim
    note(variant=variant, status=run["status"], message=run["message"], gates=claim["gates"])
