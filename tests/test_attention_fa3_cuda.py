"""attention_fwd_bf16_sm90a's FlashAttention-3-style CUDA rungs (fa3.cu) without a GPU.

The manifest climbs from the Triton rungs to the three CUDA ones and the page's claims name them at GRID entries;
compiled with nvcc for sm_90a as kwiki builds the module's library, each rung's SASS expectations hold on its own
kernel and fail on the rung below it (the ping-pong's named-barrier arrivals, the overlap's wgmma wait of depth 1),
P V is a wgmma whose A operand is registers and whose B is transposed (which the opcode patterns cannot say), each
kernel computes the log-sum-exp (its MUFU.LG2), the module hands every call an fp32 buffer for it (the checked
output at an "o+lse" entry, a scratch of its own at an "o" one) through a fake library, and operands the kernels
are not built for are refused by name before any CUDA call: by the module, and by the library's launcher itself
(on this machine a CUDA call would return a CUDA error, not -1). The kernels run only on an H200 (kwiki verify),
where the harness checks them, the log-sum-exp included, against the module's reference."""

from __future__ import annotations

import ctypes
import importlib.util
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import build_library, claimed_at_one_entry, fake_libraries, launcher_result, rung_checks, sass_tools

from kwiki.wiki.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "attention_fwd_bf16_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "attention-fwd.md"
RUNGS = ["cuda_fa3_ws", "cuda_fa3_pingpong", "cuda_fa3_overlap"]
# kwiki_fa3_fwd(variant, q, k, v, o, lse, bh, seq, head_dim, causal, group, stream), as fa3.cu declares it
ARGTYPES: list[Any] = [ctypes.c_int, *[ctypes.c_void_p] * 5, *[ctypes.c_int] * 5, ctypes.c_void_p]


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("kwiki_test_attention_fa3", ART / "attention.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_cuda_rungs_climb_above_the_triton_ones_and_name_their_kernels() -> None:
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants if v.rung and v.rung >= 2] == [
        ("triton_fa2_split", 2), ("cuda_fa3_ws", 3), ("cuda_fa3_pingpong", 4), ("cuda_fa3_overlap", 5)]
    assert m.python is not None and m.python.cuda == ["fa3.cu"]
    by_name = {v.name: v for v in m.variants}
    for name in RUNGS:
        assert by_name[name].kernels == [name.replace("cuda_", "") + "_kernel*"]  # head dim 128, and _d64
        assert by_name[name].sass is not None and {"STL", "LDL"} <= set(by_name[name].sass.forbid)
        assert "MUFU.LG2 >= 2" in by_name[name].sass.require  # the log-sum-exp of the thread's two rows
    mod = _module()
    assert set(mod.FA3) == set(RUNGS) and set(RUNGS) <= set(mod.VARIANTS)
    assert mod.FA3_HEAD_DIMS == (128, 64)
    assert all(mod.applies(n, p) for n in RUNGS for p in mod.GRID)  # every entry, both head dims
    ours = [p for p in mod.GRID if p["head_dim"] == 128]
    assert {p["seq"] for p in ours} >= {1000, 4096, 8192, 16384}  # every head-dim-128 shape, the off-tile ones included
    for outputs in ("o", "o+lse"):  # grouped-query, off the tile: the output alone and with the log-sum-exp
        assert any(p["kv_heads"] < p["heads"] and p["seq"] % 128 and p["outputs"] == outputs for p in ours), outputs
    d64 = [p for p in mod.GRID if p["head_dim"] == 64]  # a timed shape, and grouped heads off the tile with the LSE
    assert any(p["seq"] == 8192 for p in d64)
    for mask in ("none", "causal"):
        assert any(p["kv_heads"] < p["heads"] and p["seq"] % 128 and p["outputs"] == "o+lse" and p["mask"] == mask
                   for p in d64), mask


def test_the_page_claims_select_the_cuda_rungs_at_grid_entries() -> None:
    mod = _module()
    assert claimed_at_one_entry(PAGE, mod.GRID, mod.applies, RUNGS) == set(RUNGS)
    assert any(p["seq"] == 8192 and p["mask"] == "none" for p in mod.GRID)


def test_operands_the_kernels_are_not_built_for_are_named() -> None:
    torch = pytest.importorskip("torch")
    mod = _module()
    ok = torch.zeros(1, 2, 40, 128, dtype=torch.bfloat16)
    lse = torch.zeros(1, 2, 40)
    assert mod.fa3_operands_error(ok, ok, ok, ok.clone(), lse) is None
    d64 = torch.zeros(1, 2, 40, 64, dtype=torch.bfloat16)
    assert mod.fa3_operands_error(d64, d64, d64, d64.clone(), lse) is None
    d96 = torch.zeros(1, 2, 40, 96, dtype=torch.bfloat16)
    assert "head_dim 96 is not one of (128, 64)" in mod.fa3_operands_error(d96, d96, d96, d96, lse)
    half = ok.half()
    assert "k is torch.float16" in mod.fa3_operands_error(ok, half, ok, ok, lse)
    strided = torch.zeros(1, 40, 2, 128, dtype=torch.bfloat16).transpose(1, 2)
    assert "v is not contiguous" in mod.fa3_operands_error(ok, ok, strided, ok, lse)
    grouped = torch.zeros(1, 1, 40, 128, dtype=torch.bfloat16)  # one KV head for q's two: grouped-query
    assert mod.fa3_operands_error(ok, grouped, grouped, ok.clone(), lse) is None
    three = torch.zeros(1, 3, 40, 128, dtype=torch.bfloat16)  # 3 KV heads do not divide 2 query heads
    assert "kv_heads dividing heads" in mod.fa3_operands_error(ok, three, three, ok, lse)
    assert "o has shape" in mod.fa3_operands_error(ok, grouped, grouped, grouped, lse)  # o is q's shape, not k's
    wide = torch.zeros(300, 300, 1, 128, dtype=torch.bfloat16)
    wide_lse = torch.zeros(300, 300, 1)
    assert "batch * heads 90000 is above 65535" in mod.fa3_operands_error(wide, wide, wide, wide, wide_lse)
    # the log-sum-exp: q's [batch, heads, seq], fp32, contiguous (the kernels write row bh * seq + i)
    assert "lse is (1, 2, 39) torch.float32, not a contiguous float32 (1, 2, 40)" in mod.fa3_operands_error(
        ok, ok, ok, ok, lse[..., 1:])
    assert "lse is (1, 2, 40) torch.bfloat16" in mod.fa3_operands_error(ok, ok, ok, ok, lse.bfloat16())
    assert "lse is (1, 2, 40)" in mod.fa3_operands_error(ok, ok, ok, ok, torch.zeros(1, 40, 2).transpose(1, 2))
    assert "lse is on meta" in mod.fa3_operands_error(ok, ok, ok, ok, lse.to("meta"))


def test_each_call_hands_the_kernels_an_lse_buffer_checked_or_a_scratch_of_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At an "o+lse" entry the checked output's pointer; at an "o" entry a fp32 [batch, heads, seq] scratch made at
    the first (untimed) call of a shape and reused after it, so the timed work is the same at both entries."""
    torch = pytest.importorskip("torch")
    libs = fake_libraries(monkeypatch, torch, "kwiki_fa3_fwd")
    mod = _module()
    call = mod.load("cuda_fa3_overlap")
    lib = libs[-1]
    assert lib.argtypes == ARGTYPES
    q = torch.zeros(2, 8, 40, 128, dtype=torch.bfloat16)
    kv = torch.zeros(2, 2, 40, 128, dtype=torch.bfloat16)
    inputs = {"q": q, "k": kv, "v": kv, "causal": True}
    lse = torch.zeros(2, 8, 40)
    out = {"o": torch.empty_like(q), "lse": lse}
    assert call(inputs, out) is None
    assert lib.calls[-1][:6] == (2, q.data_ptr(), kv.data_ptr(), kv.data_ptr(), out["o"].data_ptr(), lse.data_ptr())
    assert lib.calls[-1][6:11] == (16, 40, 128, 1, 4)  # bh, seq, head_dim, causal, group
    cell = call.__closure__[call.__code__.co_freevars.index("scratch")]

    def scratch() -> Any:
        (t,) = cell.cell_contents.values()
        assert t.dtype == torch.float32 and t.is_contiguous()
        return t

    call(inputs, {"o": torch.empty_like(q)})
    first = scratch()
    call(inputs, {"o": torch.empty_like(q)})
    assert scratch() is first and first.shape == (2, 8, 40)
    assert lib.calls[1][5] == lib.calls[2][5] == first.data_ptr() != lse.data_ptr()
    other = torch.zeros(1, 2, 40, 128, dtype=torch.bfloat16)  # another shape: a scratch of its size
    call({"q": other, "k": other, "v": other, "causal": False}, {"o": torch.empty_like(other)})
    assert scratch().shape == (1, 2, 40) and lib.calls[-1][5] == scratch().data_ptr()
    with pytest.raises(ValueError, match=r"cuda_fa3_overlap: lse is \(2, 8, 40\) torch.float64"):
        call(inputs, {"o": torch.empty_like(q), "lse": lse.double()})
    assert len(lib.calls) == 4  # refused before the library


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory, ART)


@pytest.mark.nvcc
@pytest.mark.parametrize(("rung", "below", "words"), [
    ("cuda_fa3_pingpong", "cuda_fa3_ws", "require 'BAR.ARV >= 2'"),                   # the turns' arrivals
    ("cuda_fa3_overlap", "cuda_fa3_pingpong", "require 'WARPGROUP.DEPBAR.LE.DEPTH1'"),  # S_j waited for alone
])
def test_each_cuda_rungs_sass_expectation_holds_on_it_and_fails_on_the_rung_below(library, rung, below, words):
    from kwiki.verify.sass import check_variant, disassemble

    kernels = disassemble(library, sass_tools())[0]
    by_name = {v.name: v for v in manifest().variants}
    for name in RUNGS:
        assert check_variant(by_name[name], "sm_90a", kernels, {})[1] == [], name
    mismatches = rung_checks(manifest().variants, kernels, rung, below)[1]
    assert any(words in m for m in mismatches), mismatches


# HGMMA.64x128x16.F32.BF16 R24, R152, gdesc[UR16].tnspB, R24 : A from registers, B transposed (N-major V); P V is
# 64 x 128 (head dim 128) or 64 x 64 (the _d64 kernels), Q K^T 64 x 128 (128 keys) at both head dims
_RS = {128: re.compile(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, R\d+, gdesc\[UR\d+\]\.tnspB,"),
       64: re.compile(r"HGMMA\.64x64x16\.F32\.BF16 R\d+, R\d+, gdesc\[UR\d+\]\.tnspB,")}
_SS = re.compile(r"HGMMA\.64x128x16\.F32\.BF16 R\d+, gdesc\[UR\d+\], (R\d+|RZ)")


@pytest.mark.nvcc
def test_p_v_takes_p_from_registers_and_v_transposed_and_q_k_both_from_shared_memory_and_the_lse_is_computed(library):
    listing = subprocess.run([sass_tools().cuobjdump, "-sass", str(library)], capture_output=True, text=True,
                             check=True, timeout=120).stdout
    bodies = dict(re.findall(r"Function : (fa3_\w+_kernel(?:_d64)?)\n(.*?)(?=\n\s+Function : |\Z)", listing, re.S))
    assert sorted(bodies) == sorted(n.replace("cuda_", "") + "_kernel" + d for n in RUNGS for d in ("", "_d64"))
    for name, body in bodies.items():
        d = 64 if name.endswith("_d64") else 128
        assert len(_RS[d].findall(body)) >= 16, name  # 8 k16 steps of P V, in the loop and after it
        assert not _RS[192 - d].search(body), name  # never the other head dim's P V
        assert len(_SS.findall(body)) >= 8 * d // 64, name  # Q K^T: d / 64 boxes x 4 k16 steps, first tile and loop
        assert len(re.findall(r"MUFU\.LG2 R\d+, R\d+", body)) == 2, name  # log2 l of the thread's two rows


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"head_dim": 96}, "head dim"), ({"head_dim": 256}, "head dim"),
                                             ({"variant": 3}, "variant"),
                                             ({"q": 8}, "misaligned q"), ({"group": 0}, "no query heads a KV head"),
                                             ({"group": 3}, "8 query heads are not groups of 3"),
                                             ({"lse": (1 << 22) + 2}, "an lse not 4-byte aligned")])
def test_the_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library, change, why):
    args = {"variant": 0, "q": 1 << 20, "k": 1 << 20, "v": 1 << 20, "o": 1 << 21, "lse": 1 << 22, "bh": 8,
            "seq": 1000, "head_dim": 128, "causal": 0, "group": 4, "stream": None} | change
    assert launcher_result(library, "kwiki_fa3_fwd", ARGTYPES, args) == -1, why  # -1: refused before any CUDA call


@pytest.mark.nvcc
def test_the_module_refuses_operands_by_name_before_calling_the_library(library, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", str(library))
    call = _module().load("cuda_fa3_pingpong")
    q = torch.zeros(1, 2, 40, 96, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"attention\.py\): cuda_fa3_pingpong: .*head_dim 96 is not one of"):
        call({"q": q, "k": q, "v": q, "causal": False}, {"o": torch.empty_like(q)})
