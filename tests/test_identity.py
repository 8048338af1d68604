"""Kernel identity: the kernels CUPTI saw in a record's timed samples against its variant's `kernels:` globs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from kwiki.results.gpu import Gpu
from kwiki.results.record import Record
from kwiki.verify import gates
from kwiki.verify.kernels import forms, matches, prefilter
from kwiki.verify.types import IdentityPass, Plan, PlannedArtifact, RunOutcome
from kwiki.wiki.manifest import Manifest

GEMV = "void gemv_block<128>(__nv_bfloat16 const*, __nv_bfloat16 const*, float*, int, int)"
CUBLAS = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_kernel__5x_cublas"


def record(variant: str, kernels: list[str] | None, n: int = 4096) -> Record:
    return Record.model_validate({
        "kwiki_record": 1, "variant": variant, "params": {"n": n}, "check": {"passed": True}, "kernels": kernels,
        "timing": {"median_us": 5, "q1_us": 5, "q3_us": 5, "min_us": 5, "samples": 20}})


def gate(records: list[Record], variants: list[dict]) -> gates.Gating:
    m = Manifest.model_validate({"name": "gemv_sm90a", "title": "t", "targets": ["sm_90a"],
                                 "build": {"sources": ["g.cu"]}, "variants": variants})
    a = PlannedArtifact("artifacts/gemv_sm90a", Path("/nonexistent"), m, run_target="sm_90a")
    gpu = Gpu(index=0, name="NVIDIA H200", uuid="GPU-1", cc=90, sm_count=132)
    plan = Plan(Path("/nonexistent"), [], {a.path: a}, [], gpu, False)
    return gates.check(plan, {a.path: [RunOutcome("gemv_sm90a", "sm_90a", [r.variant for r in records], "ok",
                                                  records)]})


def test_kernel_names_match_globs_by_any_form():
    assert forms(GEMV)[1:] == ("gemv_block<128>",)
    assert matches("gemv_block<*>", GEMV) and matches("*gemv_block*", GEMV) and matches("void gemv_block<*", GEMV)
    assert matches("k", "(anonymous namespace)::k(float*)") and not matches("gemv_block<*>", CUBLAS)
    assert prefilter(["gemv_block<*>", "*_cublas"]) == "_cublas|gemv_block" and prefilter(["*"]) is None


def test_declared_kernels_that_ran_pass():
    g = gate([record("custom", [GEMV])], [{"name": "custom", "kernels": ["gemv_block<*>"]}])
    assert g.findings == [] and not [n for n in g.notes if n.startswith("identity")]


def test_a_hidden_library_kernel_fails_the_identity_gate_with_its_location():
    r = record("custom", [GEMV, CUBLAS])
    g = gate([r], [{"name": "custom", "kernels": ["gemv_block<*>"]}])
    (f,) = g.failed(r)
    assert f.gate == "identity"
    assert f.reason.startswith("artifacts/gemv_sm90a/artifact.yaml: variant 'custom' kernels: ran 1 kernel its "
                               "`kernels` (gemv_block<*>) do not name: sm90_xmma_gemm")


def test_a_variant_whose_own_kernel_never_ran_fails():
    r = record("custom", [CUBLAS])
    g = gate([r], [{"name": "custom", "kernels": ["gemv_block<*>"]}])
    (f,) = g.failed(r)
    assert "none of the kernels its `kernels` (gemv_block<*>) name ran in its timed samples" in f.reason
    empty = record("custom", [])  # timed samples that ran no kernel at all
    (f,) = gate([empty], [{"name": "custom", "kernels": ["gemv_block<*>"]}]).failed(empty)
    assert f.reason.endswith("name ran in its timed samples (no kernel ran)")


# The H200 run of 2026-11-30: 46 identity failures, every library record, because a glob
# that matched nothing failed the variant. cuBLAS picks nvjet_* for bf16/fp8 and sm90_xmma_* for tf32, with or
# without a split-K reduction: the globs are alternatives.
LIBRARY = ["nvjet_*", "*sm90_xmma_*", "cutlass*", "*splitKreduce*"]
NVJET = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"
TF32 = ("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x256x32_warpgroupsize2x1x1_execute_segment_k_off_"
        "kernel__5x_cublas")
SPLITK = ("void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, float, "
          "__nv_bfloat16, __nv_bfloat16, true, false, false, false>(cublasLt::cublasSplitKParams<float>, float const*, "
          "__nv_bfloat16 const*, float*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, "
          "__nv_bfloat16 const*, __nv_bfloat16*, void*, long, float*, int*, float*, float*, float const*, "
          "float const*)")


def test_library_globs_are_alternatives_not_a_list_that_must_all_run():
    bf16 = [record("bf16_random", [NVJET], 2048), record("bf16_random", [NVJET, SPLITK], 8192)]
    tf32 = [record("tf32_random", [TF32], 2048)]
    g = gate(bf16 + tf32, [{"name": "bf16_random", "kernels": LIBRARY}, {"name": "tf32_random", "kernels": LIBRARY}])
    assert g.findings == []


def test_a_library_kernel_outside_the_alternatives_still_fails():
    r = record("bf16_random", [NVJET, GEMV])
    (f,) = gate([r], [{"name": "bf16_random", "kernels": LIBRARY}]).failed(r)
    assert f"do not name: {GEMV}" in f.reason


def test_kernels_all_makes_every_glob_a_kernel_that_must_run():
    variants = [{"name": "custom", "kernels": ["gemv_block<*>", "*_cublas"], "kernels_all": True}]
    r = record("custom", [GEMV])
    (f,) = gate([r], variants).failed(r)
    assert "`kernels_all`: `kernels` names *_cublas, which ran in none of its timed samples" in f.reason
    shapes = [record("custom", [GEMV], 4096), record("custom", [GEMV, CUBLAS], 8192)]  # one shape runs both: enough
    assert gate(shapes, variants).findings == []


def test_without_cupti_or_without_kernels_the_gate_says_not_checked():
    g = gate([record("custom", None), record("other", [GEMV])],
             [{"name": "custom", "kernels": ["gemv_block<*>"]}, {"name": "other"}])
    assert g.findings == []
    assert ("identity gate: not checked for gemv_sm90a (custom): no kernel list in the records (timed without CUPTI)"
            in g.notes)
    assert "identity gate: not checked for gemv_sm90a (other): the manifest names no `kernels` for them" in g.notes


def test_kernels_all_without_kernels_is_a_manifest_error():
    with pytest.raises(ValidationError, match="has 'kernels_all' but no 'kernels'"):
        gate([], [{"name": "custom", "kernels_all": True}])


# ---------------------------------------------------------------- events-timed records: the identity pass


def events_record(variant: str, n: int = 4096) -> Record:
    """A record timed by CUDA events (launch-cost artifacts): no kernel list of its own."""
    return record(variant, None, n).model_copy(update={"timing_source": "events"})


def _plan_and_outcomes(timed: list[Record], passes: list[IdentityPass | None]) -> tuple[Plan, dict]:
    """One events-timed artifact whose run had one group per pass in `passes` (the timed records in the first)."""
    m = Manifest.model_validate({"name": "chain_sm90a", "title": "t", "targets": ["sm_90a"],
                                 "build": {"sources": ["c.cu"]}, "run": {"args": ["--timing=events"]},
                                 "variants": [{"name": "graph", "kernels": ["step<*>"]}]})
    a = PlannedArtifact("artifacts/chain_sm90a", Path("/nonexistent"), m, run_target="sm_90a")
    gpu = Gpu(index=0, name="NVIDIA H200", uuid="GPU-1", cc=90, sm_count=132)
    plan = Plan(Path("/nonexistent"), [], {a.path: a}, [], gpu, False)
    outcomes = [RunOutcome("chain_sm90a", "sm_90a", ["graph"], "ok", timed if n == 0 else [], identity=p)
                for n, p in enumerate(passes)]
    return plan, {a.path: outcomes}


def gate_with_pass(timed: list[Record], identity: IdentityPass | None) -> gates.Gating:
    return gates.check(*_plan_and_outcomes(timed, [identity]))


STEP = "void step<4>(float const*, float*, int)"


def test_an_events_timed_record_is_judged_by_its_twin_in_the_identity_pass():
    clean = IdentityPass("ok", [record("graph", [STEP, STEP])])
    g = gate_with_pass([events_record("graph")], clean)
    assert g.findings == [] and not any("not checked" in n for n in g.notes)
    hidden = IdentityPass("ok", [record("graph", [STEP, CUBLAS])])  # its pass ran a kernel the globs do not name
    (finding,) = [f for _, _, f in gate_with_pass([events_record("graph")], hidden).findings]
    assert finding.gate == "identity" and "identity pass, CUPTI" in finding.reason and "ran 1 kernel" in finding.reason


def test_an_events_timed_record_without_a_clean_twin_fails():
    other_size = IdentityPass("ok", [record("graph", [STEP], n=8192)])
    (f,) = [f for _, _, f in gate_with_pass([events_record("graph")], other_size).findings]
    assert "has no passing record at n=4096" in f.reason
    failed = IdentityPass("check-failed", [], "correctness check failed: graph")
    (f,) = [f for _, _, f in gate_with_pass([events_record("graph")], failed).findings]
    assert "ended check-failed (correctness check failed: graph) with no passing record at n=4096" in f.reason
    other_group = IdentityPass("crash", [], "exit 2")  # another group's pass crashed; this record's twin is clean
    clean = IdentityPass("ok", [record("graph", [STEP])])
    g = gates.check(*_plan_and_outcomes([events_record("graph")], [other_group, clean]))
    assert g.findings == []
    unchecked = Record.model_validate({**record("graph", [STEP]).model_dump(exclude_none=True),
                                       "check": {"passed": False}, "timing": None})
    wrong = IdentityPass("ok", [unchecked])  # its twin failed its check: it vouches for nothing
    assert [f.gate for _, _, f in gate_with_pass([events_record("graph")], wrong).findings] == ["identity"]


def test_without_an_identity_pass_an_events_record_is_only_noted():
    g = gate_with_pass([events_record("graph")], None)
    assert g.findings == []
    assert any("not checked for chain_sm90a (graph)" in n for n in g.notes)


def _timed_twin(busy: float, span: float, bracket: float) -> Record:
    """An identity pass's record with what its timer saw: busy time, span, and the event bracket around it."""
    r = record("graph", [STEP])
    return Record.model_validate({**r.model_dump(exclude_none=True),
                                  "timing": {"median_us": busy, "q1_us": busy, "q3_us": busy, "min_us": busy,
                                             "samples": 20},
                                  "timer": {"event_median_us": bracket, "span_median_us": span, "kernels": 20,
                                            "fixed_us": 4, "per_launch_us": 2}})


def test_gpu_work_outside_the_twins_event_bracket_fails_the_events_timed_record():
    """A chain that hands work to a stream the launch stream does not wait for: its events-timed samples leave that
    work out, and its identity pass shows the span passing the bracket; an honest chain's span stays inside."""
    honest = IdentityPass("ok", [_timed_twin(busy=60.0, span=90.0, bracket=100.0)])
    assert gate_with_pass([events_record("graph")], honest).findings == []
    skew = IdentityPass("ok", [_timed_twin(busy=60.0, span=101.5, bracket=100.0)])  # clock skew: within 2% + 2 us
    assert gate_with_pass([events_record("graph")], skew).findings == []
    escaped = IdentityPass("ok", [_timed_twin(busy=60.0, span=140.0, bracket=100.0)])
    (f,) = [f for _, _, f in gate_with_pass([events_record("graph")], escaped).findings]
    assert "spanned 140.0 us, more than the event bracket of 100.0 us" in f.reason
