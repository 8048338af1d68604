"""kwiki verify --profile on the CPU: a stand-in ncu (tests/fixtures/profile/fake_ncu) around a stand-in artifact
binary; the report parsing, the markers that give kernels to records, the one-sided audit, the cache, the gate."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kwiki.verify import profile
from kwiki.verify.build import BuildResult
from kwiki.verify.gates import Gating
from kwiki.verify.plan import PlannedArtifact
from kwiki.verify.record import Record
from kwiki.verify.run import RunOutcome
from kwiki.wiki.manifest import Manifest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "profile"
NCU = str(FIXTURES / "fake_ncu")
BINARY = str(FIXTURES / "fake_artifact")


def planned(root: Path, kernels: list[str] | None = None) -> PlannedArtifact:
    manifest = Manifest.model_validate({
        "name": "copy_sm90a", "title": "copies", "targets": ["sm_90a"], "build": {"sources": ["copy.cu"]},
        "variants": [{"name": "copy", "kernels": kernels or ["copy_kernel<*>"]}, {"name": "vec4"}]})
    directory = root / "artifacts" / "copy_sm90a"
    directory.mkdir(parents=True, exist_ok=True)
    return PlannedArtifact("artifacts/copy_sm90a", directory, manifest, run_target="sm_90a",
                           run_variants=["copy", "vec4"])


def build() -> BuildResult:
    return BuildResult("copy_sm90a", "sm_90a", True, False, "k", binary=BINARY)


def run(tmp_path: Path, monkeypatch, **env: str) -> profile.ArtifactProfile:
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return profile.profile_artifact(planned(tmp_path), build(), ncu=NCU, root=tmp_path, gpu="NVIDIA H200",
                                    gpu_index=0)


def calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "ncu.log"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def test_report_gives_each_record_its_kernels_and_figures(tmp_path, monkeypatch):
    p = run(tmp_path, monkeypatch)
    assert p.error is None and not p.cached
    assert [a.variant for a in p.audits] == ["copy", "vec4"]
    a = p.audits[0]
    assert a.kernels == ["void copy_kernel<4>(float const*, float*, int)"]  # the markers are not the record's
    f = a.figures
    assert f["ncu_dram_read_bytes"] == 4e6 and f["ncu_dram_bytes"] == 8e6 and f["ncu_kernels"] == 1
    assert f["ncu_l2_hit_rate_pct"] == 12.5 and f["ncu_occupancy_pct"] == 87.5 and f["ncu_tensor_pipe_pct"] == 0
    assert f["ncu_inst_global_ld"] == 250000 and f["ncu_fp32_flops"] == 1000
    assert a.bytes_ratio == pytest.approx(1.0) and a.finding is None


def test_ncu_runs_once_per_artifact_with_clock_control_none_and_the_profile_mode(tmp_path, monkeypatch):
    run(tmp_path, monkeypatch)
    (argv,) = calls(tmp_path)
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--kernel-name") + 1] == "regex:copy_kernel|profile_marker"
    assert argv[-1] == "--profile-mode" and argv[argv.index("--variants") + 1] == "copy,vec4"


def test_clock_control_none_is_forced_whatever_the_caller_asks():
    argv = profile.ncu_argv("ncu", ["app"], metrics=["m"], log_file="x.csv",
                            extra=["--clock-control", "base", "--clock-control=base", "--cache-control", "none"])
    assert argv.count("--clock-control") == 1 and argv[argv.index("--clock-control") + 1] == "none"
    assert [a for a in argv if "clock" in a] == ["--clock-control"] and "--cache-control" in argv


def test_declared_bytes_above_the_profiled_ones_fail_with_a_located_message(tmp_path, monkeypatch):
    p = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_READ="2,000,000", FAKE_NCU_DRAM_WRITE="2,000,000")
    a = p.audits[0]
    assert a.bytes_ratio == pytest.approx(2.0)
    assert a.finding is not None and a.finding.gate == "profile"
    assert a.finding.reason.startswith("artifacts/copy_sm90a/artifact.yaml: variant 'copy' at dtype=f32, n=1048576:")
    assert "declares 8000000 DRAM bytes, Nsight Compute saw 4000000 (x2.00; more than x1.1 fails)" in a.finding.reason


def test_the_audit_is_one_sided_and_tolerant(tmp_path, monkeypatch):
    more = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_READ="30,000,000").audits[0]  # a GEMM re-reading panels
    assert more.finding is None and more.bytes_ratio == pytest.approx(8e6 / 34e6)
    (tmp_path / ".kwiki").rename(tmp_path / "old")  # no cache
    within = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_READ="3,400,000").audits[0]  # 8e6 / 7.4e6 = 1.08 < 1.10
    assert within.finding is None


def test_declared_fp32_flops_above_the_counted_ones_fail(tmp_path, monkeypatch):
    a = run(tmp_path, monkeypatch, FAKE_FLOPS="5000").audits[0]  # 2 x 0 FFMA + 1000 FADD = 1000 counted
    assert a.flops_ratio == pytest.approx(5.0) and "FP32 FLOPs" in a.finding.reason


def test_profiles_are_cached_by_binary_hash(tmp_path, monkeypatch):
    first = run(tmp_path, monkeypatch)
    again = run(tmp_path, monkeypatch)
    assert len(calls(tmp_path)) == 1 and again.cached and not first.cached
    assert [a.figures for a in again.audits] == [a.figures for a in first.audits]
    copy = tmp_path / "bin" / "fake_artifact"  # the same path, rebuilt with other contents: profiled again
    copy.parent.mkdir()
    copy.write_bytes(Path(BINARY).read_bytes())
    copy.chmod(0o755)
    rebuilt = BuildResult("copy_sm90a", "sm_90a", True, False, "k", binary=str(copy))
    same = profile.profile_artifact(planned(tmp_path), rebuilt, ncu=NCU, root=tmp_path, gpu="NVIDIA H200",
                                    gpu_index=0)
    copy.write_bytes(copy.read_bytes() + b"\n# rebuilt\n")
    changed = profile.profile_artifact(planned(tmp_path), rebuilt, ncu=NCU, root=tmp_path, gpu="NVIDIA H200",
                                       gpu_index=0)
    assert same.cached and not changed.cached
    assert len(calls(tmp_path)) == 2  # the copy has the same bytes (cached: keyed by content); rebuilt: profiled


def test_an_ncu_failure_is_a_located_error_and_nothing_is_cached(tmp_path, monkeypatch):
    p = run(tmp_path, monkeypatch, FAKE_NCU_FAIL="1")
    assert p.error.startswith("artifacts/copy_sm90a/artifact.yaml: ncu exit 1: ==ERROR== Failed to find metric")
    assert not list((tmp_path / profile.CACHE_DIR).rglob("*.json"))


def test_a_check_failed_case_is_not_profiled(tmp_path, monkeypatch):
    p = run(tmp_path, monkeypatch, FAKE_FAIL_VARIANT="copy")
    assert [a.variant for a in p.audits] == ["vec4"]


def test_figures_reach_the_records_and_the_gate_reaches_the_claims(tmp_path, monkeypatch):
    p = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_READ="1,000,000", FAKE_NCU_DRAM_WRITE="1,000,000")
    timed = Record.model_validate({"kwiki_record": 1, "variant": "copy", "params": {"n": 1048576, "dtype": "f32"},
                                   "bytes": 8e6, "check": {"passed": True},
                                   "timing": {"median_us": 4, "q1_us": 4, "q3_us": 4, "min_us": 4, "samples": 9}})
    outcomes = {"artifacts/copy_sm90a": [RunOutcome("copy_sm90a", "sm_90a", ["copy"], "ok", [timed])]}
    profile.attach([p], outcomes, {"artifacts/copy_sm90a": "copy_sm90a"})
    assert timed.figures()["ncu_dram_bytes"] == 2e6 and timed.figures()["ncu_bytes_ratio"] == pytest.approx(4.0)

    plan = SimpleNamespace(artifacts={"artifacts/copy_sm90a": planned(tmp_path)})

    gating = Gating()
    problems = profile.gate(gating, profile.ProfileStage([p]), outcomes, plan)
    assert [f.gate for f in gating.failed(timed)] == ["profile"]
    assert [x.message.split(":")[1].strip() for x in problems] == ["variant 'vec4' at dtype=f32, n=1048576"]


def test_by_record_ignores_kernels_outside_the_markers():
    rows = [{"Kernel Name": "void init(float*)", "launch__grid_size": "64"},
            {"Kernel Name": "void kwiki::profile_marker<0>()", "launch__grid_size": "3"},
            {"Kernel Name": "k1", "launch__grid_size": "1"}, {"Kernel Name": "k2", "launch__grid_size": "1"},
            {"Kernel Name": "void kwiki::profile_marker<0>()", "launch__grid_size": "4"},
            {"Kernel Name": "void later(float*)", "launch__grid_size": "1"}]
    assert {i: [r["Kernel Name"] for r in rs] for i, rs in profile.by_record(rows).items()} == {1: ["k1", "k2"]}


def test_read_csv_drops_the_units_row_and_app_lines():
    text = ('==PROF== Connected\nsome app line\n"ID","Kernel Name","dram__bytes_read.sum"\n"","","byte"\n'
            '"0","k","1,266,100,000"\n')
    assert profile.read_csv(text) == [{"ID": "0", "Kernel Name": "k", "dram__bytes_read.sum": "1,266,100,000"}]
    assert profile.number("1,266,100,000") == 1266100000.0 and profile.number("n/a") is None
