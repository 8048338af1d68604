"""The audit is part of "verified" (issue 27, item 2): committed audits keyed by code and toolchain, a page with an
unaudited record stays measured and says why, the dry path lists what is missing, tolerances set from evidence."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from kwiki.cli import main
from kwiki.results.audits import FLOPS_TOLERANCE, TOLERANCE, AuditRow, Audits, append_audits, audit_key, distribution
from kwiki.results.record import Record, parse_records
from kwiki.results.standing import State, standing
from kwiki.results.store import RecordRow, read_all
from kwiki.results.trace import Store, trace
from kwiki.verify import audit as verify_audit
from kwiki.verify import series
from kwiki.verify.profile import audit
from kwiki.verify.types import PlannedArtifact
from kwiki.wiki.catalog import load_wiki
from kwiki.wiki.manifest import load_manifest

REPO = Path(__file__).resolve().parent.parent
SERIES = Path(__file__).parent / "fixtures" / "verify" / "series"
NVCC = "release 13.0, V13.0.88"


# ---------------------------------------------------------------- the key


def _key(root: Path, name: str) -> str | None:
    directory = root / "artifacts" / name
    planned = PlannedArtifact(f"artifacts/{name}", directory, load_manifest(directory, root))
    return audit_key(series.series_key(planned, "NVIDIA H200", root), NVCC, "sm_90a")


def test_the_audit_key_is_stable_across_checkouts(tmp_path):
    """Two clones of the same commit at different paths (and depths) give every artifact the same audit key; an
    edit of its code, or another nvcc, gives another."""
    clones = [tmp_path / "a", tmp_path / "deeper" / "still" / "b"]
    for clone in clones:
        clone.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "--quiet", "--shared", str(REPO), str(clone)], check=True)
    names = sorted(p.parent.name for p in (clones[0] / "artifacts").glob("*/artifact.yaml"))
    assert len(names) > 5
    for name in names:
        first = _key(clones[0], name)
        assert first is not None and first == _key(clones[1], name), name
    name = "gemv_bf16_sm90a"
    source = next((clones[1] / "artifacts" / name).glob("*.cu"))
    before = _key(clones[1], name)
    source.write_text(source.read_text() + "\n// an edit\n")
    assert _key(clones[1], name) != before
    planned = PlannedArtifact(f"artifacts/{name}", clones[0] / "artifacts" / name,
                              load_manifest(clones[0] / "artifacts" / name, clones[0]))
    key = series.series_key(planned, "NVIDIA H200", clones[0])
    assert audit_key(key, "release 13.1, V13.1.0", "sm_90a") != audit_key(key, NVCC, "sm_90a")


# ---------------------------------------------------------------- tolerances from evidence


def _honest_ratios() -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(level, declared/profiled) of every honest record of the committed store with a profile: bytes, FLOPs."""
    rows = [r for r in read_all(REPO) if isinstance(r, RecordRow) and r.passed and not r.gates]
    nbytes = [(r.bytes_level or "dram", r.figures["ncu_bytes_ratio"]) for r in rows if "ncu_bytes_ratio" in r.figures]
    flops = [("fp32", r.figures["ncu_flops_ratio"]) for r in rows if "ncu_flops_ratio" in r.figures]
    return nbytes, flops


def test_tolerances_sit_just_above_every_honest_record_and_catch_a_7_percent_skip():
    nbytes, flops = _honest_ratios()
    dist = distribution(nbytes + flops)
    assert dist["dram"]["records"] >= 100  # the evidence: results/ holds the audits that exist
    for level, tol in TOLERANCE.items():
        if level in dist:
            assert dist[level]["max"] <= 1 + tol, level  # no honest record fails
        assert 1 / 0.93 > 1 + tol, level  # a kernel that skips 7% of its bytes fails
    assert dist["fp32"]["max"] <= 1 + FLOPS_TOLERANCE


def _record(declared: float, level: str = "dram", flops: float | None = None) -> Record:
    return Record.model_validate({
        "kwiki_record": 1, "variant": "v", "params": {"n": 1}, "bytes": declared, "bytes_level": level,
        "flops": flops, "flops_dtype": "fp32" if flops else None,
        "timing": {"median_us": 1, "q1_us": 1, "q3_us": 1, "min_us": 1, "samples": 3}, "check": {"passed": True}})


def test_the_audit_holds_each_level_to_its_own_tolerance():
    figs = {"ncu_dram_owed_bytes": 1e9, "ncu_dram_read_bytes": 1e9, "ncu_dram_write_bytes": 0.0,
            "ncu_l2_bytes": 1e9, "ncu_fp32_flops": 1e9}
    assert audit(_record(1e9), figs, None, "w").finding is None  # honest: 1.00
    skipped = audit(_record(1e9 / 0.93), figs, None, "w")  # skips 7% of what it declares
    assert skipped.finding is not None and "x1.075" in skipped.finding.reason
    assert audit(_record(1e9 / 0.93), figs, 0.10, "w").finding is None  # the old 10% let it through
    assert audit(_record(1e9, flops=1.02e9), figs, None, "w").finding is not None  # FLOPs: 1%


def test_shared_memory_bytes_are_held_to_what_tma_loads_landed_there():
    """The "smem" level (tma_sm90a's cluster variants: each box counted once per CTA it lands in, multicast
    fan-out included) is audited against the bytes the SMs took in for TMA loads; a profile without that counter
    audits nothing at the level, and says so."""
    import re

    from kwiki.verify.ncu import METRICS, TMA_SMEM, TMA_SMEM_METRIC, figures

    assert TMA_SMEM in METRICS and re.fullmatch(TMA_SMEM.removeprefix("regex:"), TMA_SMEM_METRIC)
    rows = [{"gpu__time_duration.sum": "1", TMA_SMEM_METRIC: "0"},  # the poisoning kernel: no TMA
            {"gpu__time_duration.sum": "9", TMA_SMEM_METRIC: "536,870,912"}]
    figs = figures(rows)
    assert figs["ncu_tma_smem_bytes"] == 536870912.0
    assert "ncu_tma_smem_bytes" not in figures([{"gpu__time_duration.sum": "1"}])
    honest = audit(_record(536870912.0, "smem"), figs, None, "w")
    assert honest.finding is None and honest.bytes_measured == 536870912.0 and honest.note is None
    skipped = audit(_record(536870912.0 / 0.93, "smem"), figs, None, "w")
    assert skipped.finding is not None and "SMEM bytes" in skipped.finding.reason
    unseen = audit(_record(536870912.0, "smem"), {"ncu_l2_bytes": 1e3}, None, "w")  # the L2 is not this level
    assert unseen.finding is None and unseen.bytes_measured is None and "not audited" in (unseen.note or "")


# ---------------------------------------------------------------- an unaudited page stays measured


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> Path:
    """The series fixture, with its host artifact treated as auditable (as a GPU artifact's records are)."""
    root = tmp_path / "series"
    shutil.copytree(SERIES, root)
    monkeypatch.setenv("KWIKI_TEST_SCALE", "1")
    monkeypatch.delenv("KWIKI_TEST_FAIL", raising=False)
    monkeypatch.setattr(verify_audit, "auditable", lambda planned: True)
    monkeypatch.setattr("kwiki.results.trace.HOST", "no-such-target")
    return root


def verify(capsys, root: Path, *argv: str) -> dict:
    main(["verify", "--quiet", "--json", "--root", str(root), *argv])
    return json.loads(capsys.readouterr().out)


def page_standing(root: Path):
    page = next(p for p in load_wiki(root).pages if p.id == "series-page")
    store = Store.load(root)
    return standing(page.meta, store.history(page.meta.id, page.path), trace(page.meta, store, page.path))


def _audit_all(root: Path, passed: bool = True) -> None:
    """Audit rows for every record of the store (as a run under ncu appends them)."""
    rows = [r for r in read_all(root) if isinstance(r, RecordRow)]
    audits = {(r.variant, json.dumps(r.params, sort_keys=True)): AuditRow(
        key=audit_key(r.series, r.nvcc, r.target) or "", artifact=r.artifact, series=r.series or "", nvcc=r.nvcc,
        target=r.target, variant=r.variant, params=r.params, bytes_declared=1e9, bytes_profiled=1e9 if passed else 5e8,
        tolerance=0.02, passed=passed, reason=None if passed else "declares 1e9 DRAM bytes, Nsight Compute saw 5e8",
        gpu=r.gpu, date=r.date) for r in rows}
    append_audits(root, "host", list(audits.values()))


def shown(capsys, root: Path) -> dict:
    """`kwiki show series-page --json` (what `get_measurements` and `get_page` are cut from)."""
    main(["show", "series-page", "--json", "--root", str(root)])
    return json.loads(capsys.readouterr().out)


def test_an_unaudited_page_is_measured_and_says_why(project, capsys):
    for _ in range(3):
        report = verify(capsys, project)
    c = {c["claim"]: c for c in report["claims"]}["stream-time"]
    assert c["verdict"] == "reproduced" and c["series"]["runs"] == 3
    assert c["unaudited"] and "has no profile audit of this code" in c["unaudited"][0]
    page = project / "wiki" / "series.md"
    assert "evidence_level: measured" in page.read_text()  # every claim passed 3 runs, yet not verified
    st = page_standing(project)
    assert st.state == State.measured and "without a passing profile audit" in st.summary()
    # an agent reads the same why: `kwiki show`, the index's documents and MCP give the standing's line
    doc = shown(capsys, project)
    assert doc["state"] == "measured" and doc["state_reason"] == st.summary()
    assert "stream" in doc["state_reason"] and "has no profile audit of this code" in doc["state_reason"]
    assert any("Nsight Compute (ncu) is not found" in n and "stay measured" in n for n in report["notes"])
    # the dry path lists them, without building anything
    listed = verify(capsys, project, "--list-audits")
    assert listed["builds"] == [] and listed["runs"] == []
    missing = {(m["artifact"], m["variant"]) for m in listed["audits"]["missing"]}
    assert missing == {("drifting", "stream")}  # the baseline's time only makes "stream-vs-baseline" harder
    # audits of the same code, committed: the next run verifies it, and the dry path lists nothing
    _audit_all(project)
    assert verify(capsys, project, "--list-audits")["audits"]["missing"] == []
    verify(capsys, project)
    assert "evidence_level: verified" in page.read_text()
    assert page_standing(project).state == State.verified
    doc = shown(capsys, project)
    assert doc["state"] == "verified" and doc["state_reason"].startswith("verified on ")
    assert "not verified" not in doc["state_reason"]


def test_a_failed_audit_keeps_the_page_measured(project, capsys):
    for _ in range(2):
        verify(capsys, project)
    _audit_all(project, passed=False)
    report = verify(capsys, project)
    c = {c["claim"]: c for c in report["claims"]}["stream-time"]
    assert "failed its profile audit" in c["unaudited"][0]
    assert page_standing(project).state == State.measured


def test_committed_audits_round_trip_and_a_later_audit_replaces_an_earlier(tmp_path):
    row = AuditRow(key="k", artifact="a", series="s", target="sm_90a", variant="v", params={"n": 1},
                   bytes_declared=1.0, bytes_profiled=1.0, tolerance=0.02, passed=False, reason="r",
                   gpu="NVIDIA H200", date="2026-12-02")
    append_audits(tmp_path, "NVIDIA H200", [row])
    append_audits(tmp_path, "NVIDIA H200", [row.model_copy(update={"passed": True, "reason": None})])
    audits = Audits.load(tmp_path)
    assert len(audits.rows) == 1 and audits.why_not("k", "a", "v", {"n": 1}) is None
    assert "has no profile audit" in (audits.why_not("other", "a", "v", {"n": 1}) or "")
    assert (tmp_path / "results" / "audits" / "nvidia-h200.jsonl").is_file()


def test_tensor_path_operations_are_summed_without_their_sparsity_parts():
    from kwiki.verify.ncu import TENSOR_OPS, figures

    assert TENSOR_OPS.startswith("regex:^sm__ops_path_tensor_src_")
    row = {"gpu__time_duration.sum": "10", "sm__ops_path_tensor_src_bf16_dst_fp32.sum": "1,000",
           "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_off.sum": "1,000",
           "sm__ops_path_tensor_src_bf16_dst_fp32_sparsity_on.sum": "0",
           "sm__ops_path_tensor_src_tf32_dst_fp32.sum": "24"}
    assert figures([row, dict(row)])["ncu_tensor_ops"] == 2 * 1024
    assert "ncu_tensor_ops" not in figures([{"gpu__time_duration.sum": "10"}])


def test_shared_memory_conflicts_give_each_instruction_kind_its_degree():
    """ncu's patched-SASS shared-memory counters: instructions, wavefronts and conflicts summed over a record's
    kernels, and each kind's conflict degree (`ways`) whatever its width: an 8-way ldmatrix.x4 (4 matrices, 8
    wavefronts each) is 8, a conflict-free 16-byte store (4 wavefronts, none a conflict) is 1. Plain loads, whose
    conflicts patched SASS does not count, get wavefronts per instruction: 32 for a 32-way column read."""
    from kwiki.verify.ncu import METRICS, SMEM, SMEM_INST, figures

    assert SMEM in METRICS and SMEM_INST in METRICS
    w = "smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_"
    c = "smsp__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_"
    i = "smsp__sass_inst_executed_op_"
    inst = 1000
    row = {"gpu__time_duration.sum": "10", f"{w}ld.sum": f"{32 * inst:,}", f"{i}shared_ld.sum": f"{inst:,}",
           f"{w}ldsm.sum": str(4 * 8 * inst), f"{c}ldsm.sum": str(4 * 7 * inst), f"{i}ldsm.sum": str(inst),
           f"{w}st.sum": str(4 * inst), f"{c}st.sum": "0", f"{i}shared_st.sum": str(inst),
           f"{w}ldgsts.sum": "0", f"{c}ldgsts.sum": "0", f"{w}atom.sum": "n/a",
           f"{i}global_ld.sum": "7"}  # a global load count (SUMS'), not a shared-memory kind
    figs = figures([row, dict(row)])
    assert figs["ncu_smem_ld_wavefronts"] == 2 * 32 * inst and figs["ncu_smem_ld_inst"] == 2 * inst
    assert figs["ncu_smem_ld_wavefronts_per_inst"] == 32.0 and "ncu_smem_ld_ways" not in figs
    assert figs["ncu_smem_ldsm_ways"] == 8.0 and figs["ncu_smem_ldsm_wavefronts_per_inst"] == 32.0
    assert figs["ncu_smem_st_ways"] == 1.0 and figs["ncu_smem_st_wavefronts_per_inst"] == 4.0
    assert "ncu_smem_ldgsts_ways" not in figs  # no wavefronts: no degree
    assert "ncu_smem_atom_wavefronts" not in figs  # n/a is no count
    assert figs["ncu_inst_global_ld"] == 14 and "ncu_smem_global_ld_inst" not in figs
    assert not any(k.startswith("ncu_smem_") for k in figures([{"gpu__time_duration.sum": "10"}]))


def test_tensor_flops_are_audited_once_the_operations_per_flop_are_calibrated(monkeypatch):
    from kwiki.verify import profile

    def bf16(flops: float) -> Record:
        return Record.model_validate({
            "kwiki_record": 1, "variant": "v", "params": {"n": 1}, "flops": flops, "flops_dtype": "bf16",
            "timing": {"median_us": 1, "q1_us": 1, "q3_us": 1, "min_us": 1, "samples": 3}, "check": {"passed": True}})

    figs = {"ncu_tensor_ops": 5e8}
    monkeypatch.setattr(profile, "TENSOR_FLOPS_PER_OP", {"tf32": 1.0})
    uncalibrated = audit(bf16(2e9), figs, None, "w")
    assert uncalibrated.finding is None and "not yet calibrated" in (uncalibrated.note or "")
    monkeypatch.setattr(profile, "TENSOR_FLOPS_PER_OP", {"bf16": 2.0})
    assert audit(bf16(1e9), figs, None, "w").finding is None  # honest: 5e8 operations x 2
    inflated = audit(bf16(1.02e9), figs, None, "w")  # 2% more FLOPs than the tensor path did
    assert inflated.finding is not None and "bf16 FLOPs" in inflated.finding.reason


def test_a_claim_audits_the_records_whose_missing_work_would_help_it_pass():
    """A record that does less than it declares looks faster (its time lower, its rate higher): a claim bounded on
    one side audits the figure that moves it towards its bound (the kernel a share of a roof or a speed-up is
    claimed for), not the roof or baseline on the other side; both sides where either way can help."""
    from kwiki.results.audits import audited
    from kwiki.wiki.model import Claim

    def claim(bound: dict, of: str, per: str | None = None) -> Claim:
        return Claim.model_validate({
            "id": "c", "statement": "s", "metric": "ratio" if per else "throughput",
            "unit": "x" if per else "TFLOP/s", **bound,
            "measure": {"artifact": "a", "of": {"variant": "ours", "figure": of},
                        **({"per": {"variant": "roof", "figure": per}} if per else {})}})

    def sides(c: Claim) -> list[str]:
        return [sel.variant for sel in audited(c)]

    assert sides(claim({"at_least": 0.85}, "gb_per_s", "gb_per_s")) == ["ours"]  # share of a copy roof
    assert sides(claim({"at_least": 1.4}, "time_us", "time_us")) == ["roof"]  # baseline time / ours: ours is `per`
    assert sides(claim({"at_most": 0.9}, "gb_per_s", "gb_per_s")) == ["roof"]  # "stays below the roof": the roof
    assert sides(claim({"at_most": 1.0}, "time_us", "time_us")) == ["ours"]
    assert sides(claim({"at_least": 600}, "tflop_per_s")) == ["ours"]
    assert sides(claim({"at_least": 0.97, "at_most": 1.03}, "gb_per_s", "gb_per_s")) == ["ours", "roof"]
    assert sides(claim({"at_least": 0.9}, "max_rel_err", "gb_per_s")) == ["ours"]  # not a time nor a rate: audited
    assert sides(claim({"at_least": 0.9}, "gb_per_s", "sm_mhz")) == ["ours", "roof"]


def test_a_variant_whose_manifest_says_its_flops_run_on_cuda_cores_is_audited_on_that_path():
    """ATen's _weight_int8pack_mm (decode GEMM's baseline) multiplies in fp32 on CUDA cores: its records declare the
    op's bf16 FLOPs, and the tensor-path audit counted none (H200, 2026-12-03). Its manifest entry's flops_dtype
    replaces the record's as the records are read, so the FP32 counters audit it; other variants keep theirs."""
    line = json.dumps({"kwiki_record": 1, "variant": "lib", "params": {"n": 1}, "flops": 2e9, "flops_dtype": "bf16",
                       "timing": {"median_us": 1, "q1_us": 1, "q3_us": 1, "min_us": 1, "samples": 3},
                       "check": {"passed": True}})
    rung = line.replace('"lib"', '"rung"')
    figs = {"ncu_tensor_ops": 0.0, "ncu_fp32_flops": 2e9}
    assert audit(parse_records(line, "a")[0], figs, None, "w").finding is not None  # as written: no tensor work
    lib, own = parse_records(f"{line}\n{rung}", "a", {"lib": "fp32"})
    assert (lib.flops_dtype, own.flops_dtype) == ("fp32", "bf16")
    assert audit(lib, figs, None, "w").finding is None
    assert audit(lib.model_copy(update={"flops": 2.1e9}), figs, None, "w").finding is not None  # still one-sided
    manifest = load_manifest(REPO / "artifacts" / "decode_gemm_sm90a", REPO)
    assert manifest.flops_dtypes == {"torch_int8pack_mm": "fp32"}


def test_a_library_that_picks_its_path_by_shape_is_audited_on_both_paths_together(monkeypatch):
    """cuBLAS's GEMV baseline runs a tensor-core kernel at the aligned shapes and its CUDA-core gemv kernel at
    4099x4104, where Nsight Compute counted no tensor-path operation and 36.4 M FP32 FLOPs for 33.6 M declared bf16
    ones (H200, 2026-12-06): the audit failed in every run. Its manifest counts both paths (Variant.flops_paths);
    the sum still holds the record to the work done, and the record itself (its dtype, so its roof) is unchanged."""
    from kwiki.verify import profile

    def rec(flops: float, variant: str = "cublas") -> Record:
        return Record.model_validate({
            "kwiki_record": 1, "variant": variant, "params": {"shape": "4099x4104"}, "flops": flops,
            "flops_dtype": "bf16", "timing": {"median_us": 1, "q1_us": 1, "q3_us": 1, "min_us": 1, "samples": 3},
            "check": {"passed": True}})

    manifest = load_manifest(REPO / "artifacts" / "gemv_bf16_sm90a", REPO)
    both = manifest.flops_paths["cublas"]
    assert both == ("tensor", "fp32") and manifest.flops_paths["cublaslt_best"] == both
    assert "tuned" not in manifest.flops_paths and manifest.flops_dtypes == {}  # its rungs and the series as before
    declared, gemv = 33644592.0, {"ncu_tensor_ops": 0.0, "ncu_fp32_flops": 36401685.0}
    assert audit(rec(declared), gemv, None, "w").finding is not None  # its dtype's path alone: no tensor work
    honest = audit(rec(declared), gemv, None, "w", both)
    assert honest.finding is None and honest.flops_measured == 36401685.0
    aligned = {"ncu_tensor_ops": 478150656.0, "ncu_fp32_flops": 1.2e5}  # 4096x7168: the tensor path (n padded to 8)
    assert audit(rec(58720256.0), aligned, None, "w", both).finding is None
    inflated = audit(rec(36401685.0 * 1.05), gemv, None, "w", both)
    assert inflated.finding is not None and "on the tensor and fp32 paths together" in inflated.finding.reason
    unread = audit(rec(declared), {"ncu_tensor_ops": 0.0}, None, "w", both)  # no FP32 counter: said, not passed
    assert unread.flops_measured is None and "no FP32 counter" in (unread.note or "")

    # the profiled run's records reach the audit with their manifest's paths (the audit stage's own call)
    monkeypatch.setattr(profile, "cases", lambda records, rows: [(r, []) for r in records])
    monkeypatch.setattr(profile, "figures", lambda rows: dict(gemv))
    stdout = "\n".join(rec(declared, v).model_dump_json() for v in ("cublas", "naive"))
    out = profile.ArtifactProfile("gemv_bf16_sm90a")
    assert profile._audit_all(out, stdout, "", None, "a.yaml", manifest.flops_dtypes, manifest.flops_paths)
    assert [(a.variant, a.finding is None) for a in out.audits] == [("cublas", True), ("naive", False)]


def test_a_manifests_flops_paths_are_two_distinct_paths(tmp_path):
    from kwiki.core.errors import ManifestError

    directory = tmp_path / "artifacts" / "a"
    shutil.copytree(REPO / "artifacts" / "gemv_bf16_sm90a", directory)
    text = (directory / "artifact.yaml").read_text()
    for bad, words in [("[tensor, tensor]", "names a path twice"), ("[tensor]", "at least 2"),
                       ("[tensor, fp16]", "'tensor' or 'fp32'")]:
        edited = text.replace("flops_paths: [tensor, fp32]}", f"flops_paths: {bad}}}", 1)
        (directory / "artifact.yaml").write_text(edited)
        with pytest.raises(ManifestError) as e:
            load_manifest(directory, tmp_path)
        assert words in str(e.value) and "flops_paths" in str(e.value), bad


def test_the_calibrated_tensor_path_holds_bf16_tf32_and_fp8_flops_to_their_operations():
    """As calibrated on the H200 (the wgmma loops counted exactly their declared FLOPs, the fp8 ones on 2026-12-03):
    an honest record passes, one declaring 5% more FLOPs than the tensor path did fails, whatever the spelling of
    its dtype (a torch name, an output suffix); fp16 is counted, not audited, until a kernel calibrates it."""
    def rec(flops: float, dtype: str, where: str = "flops_dtype") -> Record:
        return Record.model_validate({
            "kwiki_record": 1, "variant": "v", "params": {"n": 1, **({"dtype": dtype} if where == "params" else {})},
            "flops": flops, **({"flops_dtype": dtype} if where == "flops_dtype" else {}),
            "timing": {"median_us": 1, "q1_us": 1, "q3_us": 1, "min_us": 1, "samples": 3}, "check": {"passed": True}})

    ops = 2267742732288.0  # wgmma e4m3_n256_wg2: its declared FLOPs, and the operations Nsight Compute counted
    figs = {"ncu_tensor_ops": ops}
    for dtype, where in [("bf16", "flops_dtype"), ("tf32", "flops_dtype"), ("e4m3", "params"),
                         ("float8_e4m3fn", "params"), ("float8_e4m3fn-f32out", "params"), ("bfloat16", "params")]:
        honest = audit(rec(ops, dtype, where), figs, None, "w")
        assert honest.finding is None and honest.flops_measured == ops, dtype
        inflated = audit(rec(ops * 1.05, dtype, where), figs, None, "w")
        assert inflated.finding is not None and "on the tensor path" in inflated.finding.reason, dtype
    fp16 = audit(rec(ops * 1.05, "fp16"), figs, None, "w")
    assert fp16.finding is None and "not yet calibrated" in (fp16.note or "")


def test_list_audits_prints_a_listing_without_a_gpu(capsys, project):
    """--list-audits in human form on a machine with no GPU: the listing, exit 0, no traceback and no 'nothing
    verified' (it builds and runs nothing by design)."""
    code = main(["verify", "--quiet", "--root", str(project), "--list-audits"])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    assert "--list-audits: 1 records" in out.out and "drifting stream" in out.out
    assert "nothing verified" not in out.out.lower() and "internal error" not in out.err
    assert "kwiki verify: listed (nothing built or run)" in out.out and "built only" not in out.out


def test_list_audits_without_a_gpu_reads_the_stored_gpu_models_runs(capsys, project):
    """A machine with no GPU (a laptop, CI) lists what the committed runs of each GPU model in results/ lack: the
    series keys are that model's, not this machine's 'host' (which has no runs and would list every record as never
    measured, audited or not)."""
    verify(capsys, project)
    host = project / "results" / "host.jsonl"
    text = host.read_text().replace('"gpu":"host"', '"gpu":"NVIDIA H200"').replace('"series":"host/',
                                                                                   '"series":"nvidia-h200/')
    (project / "results" / "nvidia-h200.jsonl").write_text(text)
    host.unlink()
    listed = verify(capsys, project, "--list-audits")
    assert {(m["artifact"], m["variant"], m["gpu"]) for m in listed["audits"]["missing"]} == {
        ("drifting", "stream", "NVIDIA H200")}
    assert any("no GPU here" in n and "NVIDIA H200" in n for n in listed["notes"])
    _audit_all(project)  # audits of the H200 records' code: nothing is missing any more
    assert verify(capsys, project, "--list-audits")["audits"]["missing"] == []


def test_an_audit_that_counted_none_of_the_declared_work_audits_nothing():
    """A record whose work Nsight Compute cannot see (cudaMemcpyAsync runs on a copy engine, no kernel) 'passes'
    its audit with no mismatch found because nothing was counted: that is no audit, and its page is not verified."""
    seen = AuditRow(key="k", artifact="a", series="s", target="sm_90a", variant="copy", params={},
                    bytes_declared=8e9, bytes_profiled=8e9, tolerance=0.02, passed=True, gpu="NVIDIA H200",
                    date="2026-12-02")
    unseen = seen.model_copy(update={"variant": "device_copy", "bytes_profiled": None})
    audits = Audits([seen, unseen])
    assert audits.why_not("k", "a", "copy", {}) is None
    why = audits.why_not("k", "a", "device_copy", {})
    assert why is not None and "counted none of its declared work" in why
    flops_only = unseen.model_copy(update={"variant": "mma", "bytes_declared": None, "flops_declared": 1e12,
                                           "flops_profiled": 1e12})
    assert Audits([flops_only]).why_not("k", "a", "mma", {}) is None


# ------------------------------------------------------- a selection pass: the timed kernel is the profiled one


def test_an_audit_of_another_configuration_of_a_selection_pass_neither_passes_nor_lends_its_counters():
    """A variant with a selection pass (w4_tuned, cublaslt_best) names its choice in extra.selected. The profiled
    run only checks, so it takes the first candidate that passes; the timed run takes the fastest. Where the two
    differ (or the timed choice is not known: `kwiki verify --profile` alone), the audit is of another kernel: its
    row does not pass and its counters are not copied onto the timed record."""
    from kwiki.verify.profile import ArtifactProfile, Audit, attach, audit_rows
    from kwiki.verify.types import RunOutcome

    def profiled() -> ArtifactProfile:
        return ArtifactProfile("a", [Audit("v", {"n": 1}, {"ncu_dram_read_bytes": 1e9}, [], bytes_declared=1e9,
                                           bytes_measured=1e9, selected="cfg0")])

    def rows(p: ArtifactProfile):
        return audit_rows(p, series="s", key="k", nvcc=None, target="sm_90a", gpu="H200", date="2026-12-04")

    def timed(choice: str) -> tuple[Record, dict]:
        r = _record(1e9).model_copy(update={"extra": {"selected": choice}})
        return r, {"artifacts/a": [RunOutcome("a", "sm_90a", ["v"], "ok", records=[r])]}

    for choice, same in (("cfg3", False), ("cfg0", True)):
        p, (r, outcomes) = profiled(), timed(choice)
        attach([p], outcomes, {"artifacts/a": "a"})
        assert ("ncu_dram_read_bytes" in r.extra) is same
        [row] = rows(p)
        assert row.passed is same and row.selection == ("cfg0" if same else None)
        assert same or "not an audit of the timed kernel" in (row.reason or "")
    [alone] = rows(profiled())  # --profile without a timed run: the timed choice is not known
    assert not alone.passed and "a choice not known here" in (alone.reason or "")
    plain = ArtifactProfile("a", [Audit("v", {"n": 1}, {}, [], bytes_declared=1e9, bytes_measured=1e9)])
    assert rows(plain)[0].passed  # no selection pass: as before


def test_a_record_chosen_by_a_selection_pass_needs_an_audit_that_matched_the_choice():
    """Audit rows written before kwiki compared the profiled choice with the timed one (no `selection`) do not audit
    a record that carries `selected_from`; a row that matched does; a record without a selection pass is as before."""
    from kwiki.results.audits import selected

    def row(selection: str | None) -> AuditRow:
        return AuditRow(key="k", artifact="a", series="s", target="sm_90a", variant="tuned", params={"n": 1},
                        bytes_declared=1e9, bytes_profiled=1e9, tolerance=0.02, passed=True, gpu="H200",
                        date="2026-12-04", selection=selection)

    chosen = selected({"selected_from": 18.0, "time_us": 1.0})
    assert chosen and not selected({"time_us": 1.0})
    old = Audits([row(None)]).why_not("k", "a", "tuned", {"n": 1}, selected=chosen)
    assert old is not None and "may be of another kernel" in old
    assert Audits([row("n1_w8_u1_s1")]).why_not("k", "a", "tuned", {"n": 1}, selected=chosen) is None
    assert Audits([row(None)]).why_not("k", "a", "tuned", {"n": 1}) is None


def _chosen(variant: str, shape: str, choice: str, passed: bool = True) -> Record:
    r = _record(1e9)
    return r.model_copy(update={
        "variant": variant, "params": {"shape": shape, "M": 1}, "extra": {"selected": choice, "selected_from": 9},
        "check": r.check.model_copy(update={"passed": passed})})


def test_the_profiled_run_is_told_what_the_timed_run_chose():
    """A profiled run times nothing, so its selection pass would take the first candidate that passes, and the audit
    would be of another kernel (the test above). kwiki tells it the timed records' choices (`--choose`,
    kwiki_choice.cuh): one VARIANT@SHAPE=CHOICE per selection; a variant and shape chosen two ways, a failed record
    and a text the option cannot carry are left out."""
    from kwiki.verify.profile import CHOOSE, PROFILE_MODE, ArtifactProfile, _app, told_choices
    from kwiki.verify.types import BuildResult

    records = [_chosen("tuned", "7168x16384x1", "r4_u1_t128"), _chosen("cublaslt_best", "4096x7168",
               "heuristic algorithm 2"), _chosen("tuned", "8x8", "a"), _chosen("tuned", "8x8", "b"),
               _chosen("tuned", "9x9", "z", passed=False), _chosen("tuned", "7x7", "x;y"), _record(1e9)]
    told = told_choices(records)
    assert told == "cublaslt_best@4096x7168=heuristic algorithm 2;tuned@7168x16384x1=r4_u1_t128"
    assert told_choices([_record(1e9)]) is None  # no selection pass: nothing told, the command as before
    root = REPO
    directory = root / "artifacts" / "gemv_bf16_sm90a"
    planned = PlannedArtifact("artifacts/gemv_bf16_sm90a", directory, load_manifest(directory, root),
                              run_variants=["tuned", "cublaslt_best"])
    build = BuildResult("gemv_bf16_sm90a", "sm_90a", True, False, "k", binary="/bin/gemv_bf16")
    app = _app(planned, build, ArtifactProfile("gemv_bf16_sm90a"), root, told)
    assert app is not None and PROFILE_MODE in app and app[-1] == f"{CHOOSE}={told}"
    plain = _app(planned, build, ArtifactProfile("gemv_bf16_sm90a"), root)
    assert plain is not None and not any(a.startswith(CHOOSE) for a in plain)


def test_an_audit_after_a_timed_run_tells_the_profiler_its_choices(tmp_path, monkeypatch):
    """run_missing (the audit stage of a timed `kwiki verify`) hands the profiler the timed records' choices."""
    from kwiki.results.gpu import Gpu
    from kwiki.verify import profile as profiler
    from kwiki.verify.types import BuildResult, Plan, RunOutcome

    root = REPO
    directory = root / "artifacts" / "gemv_bf16_sm90a"
    planned = PlannedArtifact("artifacts/gemv_bf16_sm90a", directory, load_manifest(directory, root),
                              run_target="sm_90a", run_variants=["tuned"])
    plan = Plan(tmp_path, [], {planned.path: planned}, [], Gpu(0, "NVIDIA H200", None, 90), False)
    build = BuildResult("gemv_bf16_sm90a", "sm_90a", True, False, "k", binary="/bin/gemv_bf16")
    timed = [RunOutcome("gemv_bf16_sm90a", "sm_90a", ["tuned"], "ok", records=[_chosen("tuned", "8x8", "r2")])]
    seen: dict = {}

    def profile_artifact(p, b, **kw):
        seen.update(kw)
        return profiler.ArtifactProfile(p.name)

    monkeypatch.setattr(profiler, "profile_artifact", profile_artifact)
    verify_audit.run_missing(plan, [build], {planned.path: timed}, {planned.path: "nvidia-h200/p3/abc"}, NVCC,
                             tmp_path, "2026-12-06", write=False, progress=lambda _: None, ncu="ncu")
    assert seen.get("choices") == "tuned@8x8=r2"


def _audited_variants(tmp_path: Path, monkeypatch, variants: list[str]):
    """`audit(records, sweep)`, which runs run_missing over one outcome of gemv_bf16_sm90a holding those records, and
    the list that gathers the variants each profile call was asked for (nothing is profiled)."""
    from kwiki.results.gpu import Gpu
    from kwiki.verify import profile as profiler
    from kwiki.verify.types import BuildResult, Plan, RunOutcome

    root = REPO
    directory = root / "artifacts" / "gemv_bf16_sm90a"
    planned = PlannedArtifact("artifacts/gemv_bf16_sm90a", directory, load_manifest(directory, root),
                              run_target="sm_90a", run_variants=variants)
    plan = Plan(tmp_path, [], {planned.path: planned}, [], Gpu(0, "NVIDIA H200", None, 90), False)
    build = BuildResult("gemv_bf16_sm90a", "sm_90a", True, False, "k", binary="/bin/gemv_bf16")
    profiled: list[list[str]] = []

    def profile_artifact(p, b, **kw):
        profiled.append(p.run_variants)
        return profiler.ArtifactProfile(p.name)

    monkeypatch.setattr(profiler, "profile_artifact", profile_artifact)

    def audit(records: list[Record], sweep: bool = False) -> None:
        outcome = RunOutcome("gemv_bf16_sm90a", "sm_90a", variants, "ok", records=records, sweep=sweep)
        verify_audit.run_missing(plan, [build], {planned.path: [outcome]}, {planned.path: "nvidia-h200/p3/abc"}, NVCC,
                                 tmp_path, "2026-12-06", write=False, progress=lambda _: None, ncu="ncu")
    return audit, profiled


def test_the_sweeps_records_are_not_audited_the_profiled_run_never_reaches_their_sizes(tmp_path, monkeypatch):
    """The profiled run is the shared process at its own shapes: a sweep size never gets an audit, so counting the
    sweep's records as unaudited re-audited the sweep's variants in every run (gemv_bf16_sm90a, H200, 2026-12-06)."""
    audit, profiled = _audited_variants(tmp_path, monkeypatch, ["cublas", "tuned"])
    swept = _record(1e9).model_copy(update={"variant": "cublas", "params": {"shape": "1024x1024", "M": 1024}})
    audit([swept], sweep=True)
    assert profiled == []  # the sweep's record alone: nothing to audit
    audit([swept])
    assert profiled == [["cublas"]]  # the same record from the shared process is audited


def test_a_record_that_timed_no_launch_is_not_profiled_alone(tmp_path, monkeypatch):
    """A read roof's record (bytes declared, no timing: fitted over a sweep of its own) gets no case in the profiled
    run, so an audit of it alone failed every run after the first (nvfp4_gemv_sm90a, H200, 2026-12-06); a timed
    record beside it is still audited."""
    audit, profiled = _audited_variants(tmp_path, monkeypatch, ["cublas", "read_ceiling"])
    roof = _record(1e9).model_copy(update={"variant": "read_ceiling", "timing": None})
    timed = _record(1e9).model_copy(update={"variant": "cublas"})
    assert roof.bytes and timed.timing is not None
    audit([roof])
    audit([roof, timed])
    assert profiled == [["cublas"]]  # nothing for the roof alone; the timed record's variant once beside it
