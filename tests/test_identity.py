"""Kernel identity: the kernels CUPTI saw in a record's timed samples against its variant's `kernels:` globs."""

from __future__ import annotations

from pathlib import Path

from kwiki.verify import gates
from kwiki.verify.env import Gpu
from kwiki.verify.kernels import forms, matches, prefilter
from kwiki.verify.plan import Plan, PlannedArtifact
from kwiki.verify.record import Record
from kwiki.verify.run import RunOutcome
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


def test_a_declared_kernel_that_never_ran_fails():
    r = record("custom", [CUBLAS])
    g = gate([r], [{"name": "custom", "kernels": ["gemv_block<*>", "*_cublas"]}])
    (f,) = g.failed(r)
    assert "`kernels` names gemv_block<*>, which ran in none of its timed samples" in f.reason


def test_a_kernel_that_runs_at_one_shape_only_is_enough():
    rs = [record("cublas", [CUBLAS], 4096), record("cublas", [CUBLAS, "void splitKreduce_kernel<32>(float*)"], 8192)]
    g = gate(rs, [{"name": "cublas", "kernels": ["*_cublas", "splitKreduce_kernel<*>"]}])
    assert g.findings == []


def test_without_cupti_or_without_kernels_the_gate_says_not_checked():
    g = gate([record("custom", None), record("other", [GEMV])],
             [{"name": "custom", "kernels": ["gemv_block<*>"]}, {"name": "other"}])
    assert g.findings == []
    assert ("identity gate: not checked for gemv_sm90a (custom): no kernel list in the records (timed without CUPTI)"
            in g.notes)
    assert "identity gate: not checked for gemv_sm90a (other): the manifest names no `kernels` for them" in g.notes
