"""kwiki verify --profile on the CPU: a stand-in ncu (tests/fixtures/profile/fake_ncu) around a stand-in artifact
binary; the report parsing, the markers that give kernels to records, the one-sided audit, the cache, the gate."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from kwiki.results.record import Record, parse_records
from kwiki.verify import ncu, profile
from kwiki.verify.types import BuildResult, Gating, PlannedArtifact, RunOutcome
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
    assert "--kernel-name" not in argv  # vec4 names no kernels: a filter from copy's patterns could drop its own
    both = planned(tmp_path)
    both.manifest.variants[1].kernels = ["vec4_kernel*"]  # type: ignore[union-attr]
    assert profile.kernel_regex(both, ["copy", "vec4"]) == "copy_kernel|vec4_kernel|profile_marker"
    assert argv[-1] == "--profile-mode" and argv[argv.index("--variants") + 1] == "copy,vec4"


def test_clock_control_none_is_forced_whatever_the_caller_asks():
    argv = ncu.ncu_argv("ncu", ["app"], metrics=["m"], log_file="x.csv",
                            extra=["--clock-control", "base", "--clock-control=base", "--cache-control", "none"])
    assert argv.count("--clock-control") == 1 and argv[argv.index("--clock-control") + 1] == "none"
    assert [a for a in argv if "clock" in a] == ["--clock-control"] and "--cache-control" in argv


def test_declared_bytes_above_the_profiled_ones_fail_with_a_located_message(tmp_path, monkeypatch):
    p = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_READ="2,000,000", FAKE_NCU_DRAM_WRITE="2,000,000")
    a = p.audits[0]
    assert a.bytes_ratio == pytest.approx(2.0)
    assert a.finding is not None and a.finding.gate == "profile"
    assert a.finding.reason.startswith("artifacts/copy_sm90a/artifact.yaml: variant 'copy' at dtype=f32, n=1048576:")
    assert "declares 8000000 DRAM bytes, Nsight Compute saw 4000000 (x2.000; more than x1.02 fails)" in a.finding.reason


def test_the_audit_is_one_sided_and_tolerant(tmp_path, monkeypatch):
    more = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_READ="30,000,000").audits[0]  # a GEMM re-reading panels
    assert more.finding is None and more.bytes_ratio == pytest.approx(8e6 / 34e6)
    (tmp_path / ".kwiki").rename(tmp_path / "old")  # no cache
    within = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_READ="3,900,000").audits[0]  # 8e6 / 7.9e6 = 1.013 < 1.02
    assert within.finding is None


def test_an_output_left_in_the_l2_counts_as_the_dram_writes_it_owes(tmp_path, monkeypatch):
    # 2048^3 cuBLAS: the output stays in the 60 MiB L2 and is written back after the kernel ends (DRAM writes ~0);
    # the SMs wrote 125,000 sectors (4 MB) into the L2, which the DRAM-level audit counts instead
    a = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_WRITE="0", FAKE_NCU_L2_WRITE_SECTORS="125,000").audits[0]
    assert a.figures["ncu_l2_write_bytes"] == 4e6 and a.figures["ncu_dram_bytes"] == 4e6
    assert a.figures["ncu_dram_owed_bytes"] == 8e6 and a.bytes_measured == 8e6
    assert a.finding is None and a.bytes_ratio == pytest.approx(1.0)
    (tmp_path / ".kwiki").rename(tmp_path / "old")
    # without the L2 write counter the same launch fails: the DRAM counters alone undercount it
    monkeypatch.delenv("FAKE_NCU_L2_WRITE_SECTORS")
    b = run(tmp_path, monkeypatch, FAKE_NCU_DRAM_WRITE="0").audits[0]
    assert "ncu_dram_owed_bytes" not in b.figures and b.finding is not None
    (tmp_path / "old").rename(tmp_path / "old2")
    (tmp_path / ".kwiki").rename(tmp_path / "old")
    # the larger of the two write counts: DRAM writes above the L2 writes (evictions of a large output) count
    monkeypatch.delenv("FAKE_NCU_DRAM_WRITE")
    c = run(tmp_path, monkeypatch, FAKE_NCU_L2_WRITE_SECTORS="1,000").audits[0]
    assert c.figures["ncu_dram_owed_bytes"] == 8e6 and c.finding is None


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


# The H200 run of 2026-11-30: "bf16_random[K=2048, M=2048, N=2048] declared 25165824 /
# profiled 1.91e+09 dram B". cublas_gemm calls Runner::run() once per shape, and the runner numbered its markers per
# call: every shape's launch of a variant was summed into the first shape's record. The reports below are what ncu
# writes for two shapes of two variants (bf16 at 4096^3 is two kernels: the GEMM and its split-K reduction).
CUBLAS_STDOUT = (FIXTURES / "cublas_two_shapes.stdout").read_text()
NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"


def dram(report: str) -> dict[tuple[str, int], tuple[float, float]]:
    """(variant, M) -> (profiled DRAM bytes, kernels) of each record, from `report`."""
    out = {}
    for r, rows in profile.cases(parse_records(CUBLAS_STDOUT, "cublas_gemm_sm90a"), ncu.read_csv(report)):
        f = ncu.figures(rows)
        out[(r.variant, r.params["M"])] = (f["ncu_dram_bytes"], f["ncu_kernels"])
    return out


EXACT = {("bf16_random", 2048): (16_920_576 + 8_392_704, 1), ("tf32_random", 2048): (34_078_720 + 16_785_408, 1),
         ("bf16_random", 4096): (68_157_440 + 67_108_864 + 67_174_400 + 33_570_816, 2),
         ("tf32_random", 4096): (136_577_024 + 67_141_632, 1)}


def test_each_record_gets_the_dram_bytes_of_its_one_launch_in_bytes():
    assert dram((FIXTURES / "ncu_cublas_two_shapes.csv").read_text()) == EXACT


def test_a_report_without_a_units_row_reads_the_same():
    lines = (FIXTURES / "ncu_cublas_two_shapes.csv").read_text().splitlines()
    assert lines[2].startswith('"","",')  # the units row
    assert dram("\n".join(lines[:2] + lines[3:])) == EXACT


def test_scaled_units_are_turned_back_into_bytes():
    got = dram((FIXTURES / "ncu_cublas_two_shapes_auto_units.csv").read_text())  # Mbyte, usecond, Minst
    for key, (exact, kernels) in EXACT.items():
        assert got[key][1] == kernels and got[key][0] == pytest.approx(exact, abs=kernels * 2 * 5e3)  # 2 decimals
    assert ncu.unit_scale("Mbyte") == 1e6 and ncu.unit_scale("Gbyte/second") == 1e9
    assert ncu.unit_scale("usecond") == 1e3 and ncu.unit_scale("byte") == 1 and ncu.unit_scale("%") == 1
    assert ncu.unit_scale("Kinst") == 1e3 and ncu.unit_scale("inst") == 1
    assert ncu.unit_scale("msecond") == 1e6


def test_the_audit_of_the_reproduction_passes():
    records = parse_records(CUBLAS_STDOUT, "cublas_gemm_sm90a")
    (r, rows), *_ = profile.cases(records, ncu.read_csv((FIXTURES / "ncu_cublas_two_shapes.csv").read_text()))
    a = profile.audit(r, ncu.figures(rows), 0.1, "x")
    assert a.bytes_declared == 25_165_824 and a.bytes_measured == 25_313_280 and a.finding is None
    assert a.bytes_ratio == pytest.approx(0.994, abs=1e-3)


def test_a_marker_seen_twice_is_an_error_not_a_sum():
    old = (FIXTURES / "ncu_old_runner_two_shapes.csv").read_text()  # 2i+1/2i+2 markers, i restarting per shape
    with pytest.raises(profile.ReportError, match="profile marker 0 appears twice"):
        profile.by_case(ncu.read_csv(old))


def test_records_without_a_profile_case_are_an_error_when_markers_exist():
    old_stdout = CUBLAS_STDOUT.replace(', "profile_case": 0', "").replace(', "profile_case": 1', "")
    old_stdout = old_stdout.replace(', "profile_case": 2', "").replace(', "profile_case": 3', "")
    assert "profile_case" not in old_stdout
    with pytest.raises(profile.ReportError, match=r"no record carries extra\.profile_case"):
        profile.cases(parse_records(old_stdout, "c"), ncu.read_csv((FIXTURES / "ncu_cublas_two_shapes.csv")
                                                                       .read_text()))


def test_records_whose_case_numbers_match_no_marker_say_both_numberings():
    shifted = re.sub(r'"profile_case": (\d+)', lambda m: f'"profile_case": {int(m[1]) + 10}', CUBLAS_STDOUT)
    assert '"profile_case": 10' in shifted and '"profile_case": 0' not in shifted
    with pytest.raises(profile.ReportError, match=r"carry extra\.profile_case 10-13, the report's markers are 0-3"):
        profile.cases(parse_records(shifted, "c"), ncu.read_csv((FIXTURES / "ncu_cublas_two_shapes.csv")
                                                                    .read_text()))
    assert profile._numbers([7, 0, 1, 2, 3, 3, 9]) == "0-3, 7, 9"


def test_kernels_before_the_first_marker_belong_to_no_record():
    rows = [{"Kernel Name": "void init(float*)", "launch__grid_size": "64"},
            {"Kernel Name": "void kwiki::profile_marker<0>()", "launch__grid_size": "3"},
            {"Kernel Name": "k1", "launch__grid_size": "1"}, {"Kernel Name": "k2", "launch__grid_size": "1"},
            {"Kernel Name": "void kwiki::profile_marker<0>()", "launch__grid_size": "1"},
            {"Kernel Name": "k3", "launch__grid_size": "1"}]
    assert {i: [r["Kernel Name"] for r in rs] for i, rs in profile.by_case(rows).items()} == {2: ["k1", "k2"],
                                                                                              0: ["k3"]}


def test_shapes_of_one_process_keep_their_own_launches(tmp_path, monkeypatch):
    p = run(tmp_path, monkeypatch, FAKE_SHAPES="1048576,2097152")
    assert [(a.variant, a.params["n"], a.figures["ncu_kernels"]) for a in p.audits] == [
        ("copy", 1048576, 1), ("vec4", 1048576, 1), ("copy", 2097152, 1), ("vec4", 2097152, 1)]


def test_a_timed_run_reads_the_cached_profile_of_the_same_binary_without_ncu(tmp_path, monkeypatch):
    plan = SimpleNamespace(gpu=SimpleNamespace(name="NVIDIA H200"),
                           artifacts={"artifacts/copy_sm90a": planned(tmp_path)})
    timed = Record.model_validate({"kwiki_record": 1, "variant": "copy", "params": {"n": 1048576, "dtype": "f32"},
                                   "bytes": 8e6, "check": {"passed": True},
                                   "timing": {"median_us": 4, "q1_us": 4, "q3_us": 4, "min_us": 4, "samples": 9}})
    outcomes = {"artifacts/copy_sm90a": [RunOutcome("copy_sm90a", "sm_90a", ["copy"], "ok", [timed])]}
    monkeypatch.setenv("KWIKI_NCU", str(NCU))  # the profiler this machine has is part of the cache key (issue 40)
    assert profile.cached_stage(plan, [build()], outcomes, tmp_path) is None  # never profiled: nothing
    run(tmp_path, monkeypatch)  # kwiki verify --profile
    stage = profile.cached_stage(plan, [build()], outcomes, tmp_path)
    assert stage is not None and stage.profiles[0].cached and len(calls(tmp_path)) == 1
    assert timed.figures()["ncu_dram_bytes"] == 8e6
    other = SimpleNamespace(gpu=SimpleNamespace(name="NVIDIA H100"), artifacts=plan.artifacts)
    assert profile.cached_stage(other, [build()], outcomes, tmp_path) is None  # another GPU model


def test_read_csv_drops_the_units_row_and_app_lines():
    text = ('==PROF== Connected\nsome app line\n"ID","Kernel Name","dram__bytes_read.sum"\n"","","byte"\n'
            '"0","k","1,266,100,000"\n')
    assert ncu.read_csv(text) == [{"ID": "0", "Kernel Name": "k", "dram__bytes_read.sum": "1,266,100,000"}]
    assert ncu.number("1,266,100,000") == 1266100000.0 and ncu.number("n/a") is None


def test_ncu_wraps_the_interpreter_running_the_harness_never_the_module(tmp_path, monkeypatch):
    # the H200 run of 2026-11-30: ncu was handed the module and failed ("not an executable binary")
    manifest = Manifest.model_validate({
        "name": "tri_sm90a", "title": "a Triton kernel", "kind": "python", "python": {"module": "ops.py"},
        "targets": ["sm_90a"], "variants": [{"name": "tri", "kernels": ["tri_kernel*"]}]})
    directory = tmp_path / "artifacts" / "tri_sm90a"
    directory.mkdir(parents=True)
    (directory / "ops.py").write_text("# a module without its contract: the harness refuses it\n")
    p = PlannedArtifact("artifacts/tri_sm90a", directory, manifest, run_target="sm_90a", run_variants=["tri"])
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    b = BuildResult("tri_sm90a", "sm_90a", True, False, "k", binary=str(directory / "ops.py"))
    out = profile.profile_artifact(p, b, ncu=NCU, root=tmp_path, gpu="NVIDIA H200", gpu_index=0)
    (argv,) = calls(tmp_path)
    app = argv[argv.index("--log-file") + 2:]
    assert app[1].endswith("kwiki_harness.py") and app[2:4] == ["run", str(directory / "ops.py")]
    assert app[-1] == "--profile-mode" and out.skipped is None


# ---------------------------------------------------------------- the audits a timed run runs (issue 27, item 2)


def timed_copy_run(tmp_path: Path, monkeypatch) -> tuple:
    """A timed run's records of the copy artifact (variants copy and vec4), its plan on an H200, its series, the
    compiler and the audit key of that code."""
    from kwiki.results.audits import audit_key
    from kwiki.results.gpu import Gpu

    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    timed = [Record.model_validate({"kwiki_record": 1, "variant": v, "params": {"n": 1048576, "dtype": "f32"},
                                    "bytes": 8e6, "check": {"passed": True},
                                    "timing": {"median_us": 4, "q1_us": 4, "q3_us": 4, "min_us": 4, "samples": 9}})
             for v in ("copy", "vec4")]
    outcomes = {"artifacts/copy_sm90a": [RunOutcome("copy_sm90a", "sm_90a", ["copy", "vec4"], "ok", timed)]}
    plan = SimpleNamespace(artifacts={"artifacts/copy_sm90a": planned(tmp_path)}, pages=[],
                           gpu=Gpu(0, "NVIDIA H200", "GPU-x", 90))
    series = {"artifacts/copy_sm90a": "nvidia-h200/p2/abc"}
    nvcc = "release 13.0, V13.0.88"
    return timed, outcomes, plan, series, nvcc, audit_key(series["artifacts/copy_sm90a"], nvcc, "sm_90a")


def test_a_timed_run_audits_only_what_its_records_lack_and_commits_the_audits(tmp_path, monkeypatch):
    from kwiki.results.audits import Audits
    from kwiki.verify import audit

    timed, outcomes, plan, series, nvcc, key = timed_copy_run(tmp_path, monkeypatch)
    stage = audit.run_missing(plan, [build()], outcomes, series, nvcc, tmp_path, "2026-12-02", write=True,
                              progress=lambda _: None, ncu=NCU)
    (argv,) = calls(tmp_path)
    assert argv[argv.index("--variants") + 1] == "copy,vec4"  # both lack an audit
    audits = Audits.load(tmp_path)
    assert stage.written == 2 and audits.why_not(key, "copy_sm90a", "copy", timed[0].params) is None
    assert [p.artifact for p in stage.profiles] == ["copy_sm90a"]  # for the run's profile gate
    # the next run finds them committed: no ncu
    again = audit.run_missing(plan, [build()], outcomes, series, nvcc, tmp_path, "2026-12-02", write=True,
                              progress=lambda _: None, ncu=NCU)
    assert again.artifacts == [] and len(calls(tmp_path)) == 1
    # another compiler is other code: its key has no audit yet (the same binary here: ncu's profile is cached)
    stage = audit.run_missing(plan, [build()], outcomes, series, "release 13.1", tmp_path, "2026-12-02",
                              write=True, progress=lambda _: None, ncu=NCU)
    assert stage.written == 2 and stage.artifacts[0]["cached"] is True


def test_a_record_a_claim_reads_a_count_from_is_profiled_in_every_timed_run(tmp_path, monkeypatch):
    """A claim on a profiler's count (`ncu_smem_ld_wavefronts_per_inst`, the shared-memory page's bank conflicts)
    reads it from the run's own records. Its audit committed, a later run on a fresh machine profiled nothing, its
    records had no count, and the claim stayed "not run" in every run after the first (the H200, 2026-12-05): a
    count is measured in each run, as a time is, so the records a claim counts are profiled in every timed run,
    and only those; a record whose audit counted nothing is still not profiled again."""
    from kwiki.results.audits import AuditRow, Audits, append_audits
    from kwiki.verify import audit
    from kwiki.wiki.model import Claim

    timed, outcomes, plan, series, nvcc, key = timed_copy_run(tmp_path, monkeypatch)
    rows = [AuditRow(key=key, artifact="copy_sm90a", series=series["artifacts/copy_sm90a"], nvcc=nvcc,
                     target="sm_90a", variant=r.variant, params=r.params, bytes_declared=8e6, bytes_profiled=8e6,
                     tolerance=0.02, passed=True, gpu="NVIDIA H200", date="2026-12-02") for r in timed]
    append_audits(tmp_path, "NVIDIA H200", rows)  # both audited: nothing lacks an audit of its code
    count = Claim.model_validate({
        "id": "counted", "statement": "s", "metric": "count", "unit": "wavefronts", "value": 1, "tolerance": 0.02,
        "measure": {"artifact": "copy", "of": {"variant": "copy", "params": {"n": 1048576},
                                               "figure": "ncu_smem_ld_wavefronts_per_inst"}}})
    timing = count.model_copy(update={"id": "timed", "measure": count.measure.model_copy(
        update={"of": count.measure.of.model_copy(update={"figure": "time_us"})})})
    page = SimpleNamespace(meta=SimpleNamespace(claims=[timing]), path="wiki/p.md", id="p")
    plan.pages = [page]
    plan.artifact_for = lambda _page, name: plan.artifacts["artifacts/copy_sm90a"] if name == "copy" else None

    def profiled() -> list[tuple[int, bool]]:  # (records audited, from ncu's cache) of each artifact profiled
        stage = audit.run_missing(plan, [build()], outcomes, series, nvcc, tmp_path, "2026-12-02", write=True,
                                  progress=lambda _: None, ncu=NCU)
        return [(a["audited"], a["cached"]) for a in stage.artifacts]

    assert profiled() == [] and calls(tmp_path) == []  # a timed figure only: the committed audits stand for the code
    page.meta.claims.append(count)
    assert profiled() == [(1, False)]  # the count's record, not vec4's
    (argv,) = calls(tmp_path)
    assert argv[argv.index("--variants") + 1] == "copy"
    assert profiled() == [(1, True)]  # again in the next run (a count is the run's own), from this machine's cache
    append_audits(tmp_path, "NVIDIA H200", [rows[0].model_copy(update={"bytes_profiled": None})])
    assert "counted none" in (Audits.load(tmp_path).why_not(key, "copy_sm90a", "copy", timed[0].params) or "")
    assert profiled() == []  # its audit counted nothing: profiling it again would count nothing


def test_a_record_whose_audit_of_the_same_code_counted_nothing_is_not_profiled_again(tmp_path, monkeypatch):
    """A copy-engine transfer (cudaMemcpyAsync, torch's copy_) runs no kernel: its audit counts nothing and leaves
    it unaudited. Profiling the same code again would count nothing again: a timed run asks ncu for the others."""
    from kwiki.results.audits import AuditRow, Audits, append_audits
    from kwiki.verify import audit

    timed, outcomes, plan, series, nvcc, key = timed_copy_run(tmp_path, monkeypatch)
    params = timed[0].params
    nothing = AuditRow(key=key, artifact="copy_sm90a", series=series["artifacts/copy_sm90a"], nvcc=nvcc,
                       target="sm_90a", variant="copy", params=params, bytes_declared=8e6, tolerance=0.02,
                       passed=True, gpu="NVIDIA H200", date="2026-12-02")
    uncalibrated = nothing.model_copy(update={"variant": "vec4", "bytes_declared": None, "flops_declared": 1e6,
                                              "note": "fp16 FLOPs are counted but not audited"})
    append_audits(tmp_path, "NVIDIA H200", [nothing, uncalibrated])
    assert "counted none" in (Audits.load(tmp_path).why_not(key, "copy_sm90a", "copy", params) or "")
    audit.run_missing(plan, [build()], outcomes, series, nvcc, tmp_path, "2026-12-02", write=True,
                      progress=lambda _: None, ncu=NCU)
    (argv,) = calls(tmp_path)
    assert argv[argv.index("--variants") + 1] == "vec4"  # not the copy again; FLOPs a later kwiki may calibrate
    assert "counted none" in (Audits.load(tmp_path).why_not(key, "copy_sm90a", "copy", params) or "")  # unaudited


def test_kwiki_verify_profile_commits_its_audits(tmp_path, monkeypatch):
    from kwiki.results.audits import Audits, audit_key
    from kwiki.results.gpu import Gpu
    from kwiki.verify import audit

    p = run(tmp_path, monkeypatch)
    plan = SimpleNamespace(artifacts={"artifacts/copy_sm90a": planned(tmp_path)}, gpu=Gpu(0, "NVIDIA H200", None, 90))
    series = {"artifacts/copy_sm90a": "nvidia-h200/p2/abc"}
    assert audit.commit(plan, [p], series, "release 13.0", tmp_path, "2026-12-02") == 2
    key = audit_key("nvidia-h200/p2/abc", "release 13.0", "sm_90a")
    assert Audits.load(tmp_path).why_not(key, "copy_sm90a", "copy", {"n": 1048576, "dtype": "f32"}) is None


# ---------------------------------------------------------------- Python artifacts: the harness's profile mode


def test_a_python_artifact_is_profiled_through_its_harness_in_profile_mode(tmp_path):
    """Nsight Compute wraps the interpreter running kwiki_harness.py in --profile-mode over the shared-process
    variants (it once skipped every Python artifact, so no page of one could reach 'verified')."""
    from kwiki.verify.types import PlannedArtifact
    from kwiki.wiki.manifest import load_manifest

    repo = Path(__file__).resolve().parent.parent
    directory = repo / "artifacts" / "softmax_bf16_sm90a"
    planned = PlannedArtifact("artifacts/softmax_bf16_sm90a", directory, load_manifest(directory, repo),
                              run_target="sm_90a", run_variants=["triton_row", "torch_eager"])
    build = BuildResult("softmax_bf16_sm90a", "sm_90a", True, False, "python", binary=str(directory / "softmax.py"))
    out = profile.ArtifactProfile("softmax_bf16_sm90a")
    app = profile._app(planned, build, out, repo)
    assert app is not None and out.skipped is None
    assert app[1].endswith("artifacts/common/kwiki_harness.py") and app[2:4] == ["run", str(directory / "softmax.py")]
    assert app[app.index("--variants") + 1] == "triton_row,torch_eager" and app[-1] == "--profile-mode"
    assert app[app.index("--device") + 1] == "cuda"
    # the key covers the whole directory (kernels.py beside the module), not the module file alone
    key = profile._key(planned, build, app, "NVIDIA H200", "ncu 2025", repo)
    assert key != profile.cache_key(build.binary, app, "NVIDIA H200", "ncu 2025")
    # a kernels pattern on some variants only would filter the others' kernels out: no filter then
    assert profile.kernel_regex(planned, ["triton_row", "torch_copy"]) is None
    assert "softmax_row_kernel" in (profile.kernel_regex(planned, ["triton_row"]) or "")


def test_the_harness_profile_mode_marks_each_checked_case_once(monkeypatch):
    """One marker of n + 1 programs before each checked case's profiled call, n counting the profiled cases of
    the process across params; a case whose check fails is not profiled and its record says so."""
    pytest.importorskip("torch")
    import importlib.util
    import sys

    repo = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("kwiki_harness_prof", repo / "artifacts" / "common" /
                                                  "kwiki_harness.py")
    assert spec is not None and spec.loader is not None
    h = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = h
    spec.loader.exec_module(h)
    import torch

    calls: list[tuple[str, object]] = []

    class Marker:
        def __getitem__(self, grid):
            return lambda: calls.append(("marker", grid[0]))

    monkeypatch.setattr(h, "profile_marker", lambda: Marker())
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda.profiler, "start", lambda: calls.append(("start", None)))
    monkeypatch.setattr(torch.cuda.profiler, "stop", lambda: calls.append(("stop", None)))
    mod = h.load_module(str(repo / "tests" / "fixtures" / "python" / "artifacts" / "host_py" / "ops.py"))
    harness = h.Harness(mod, "cpu", h.kb.Options(), 1, {"good": 5.0, "wrong": 5.0}, h.Events(None), h.Parent())
    records = []
    for params in mod.GRID:
        records += harness.profile_params(dict(params), ["good", "wrong"])
    good = [r for r in records if r["variant"] == "good"]
    wrong = [r for r in records if r["variant"] == "wrong"]
    assert [r["extra"]["profile_case"] for r in good] == list(range(len(mod.GRID)))
    assert all("profile_case" not in r["extra"] and not r["check"]["passed"] for r in wrong)
    assert [c for c in calls if c[0] == "marker"] == [("marker", n + 1) for n in range(len(mod.GRID))]
    assert all(r["timing"] is None for r in records)
