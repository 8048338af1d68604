"""gemm_epilogue_sm90a's CUDA rungs (epilogue_ws.cu over artifacts/common/kwiki_ws_gemm.cuh) without a GPU.

The manifest climbs from the Triton rungs to the four CUDA ones (the same epilogues on the warp-specialized bf16
GEMM), built into the module's library, and the page's claims name them at one GRID entry each; the module hands the
library what it was built for (checked by name before any CUDA call, through a fake library here; the fp8 rung's amax
zeroed by the library, not by a torch kernel the identity gate would fail) and the launcher refuses the rest itself
(on this machine a CUDA call would return a CUDA error, not -1). Compiled with nvcc as kwiki builds the library, each
rung's SASS expectation holds on its own kernel and fails on the rung below it. The kernels run only on an H200
(kwiki verify), where the harness checks them against the module's fp32 reference at a shape off every tile (4001 x
4048 x 4048: a partial 1 x 128 group, partial tiles)."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import FakeLibrary, build_library, claimed_at_one_entry, launcher_result, library_rung_checks
from triton_interpreter import artifact_module

from kwiki.wiki.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "gemm_epilogue_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "gemm-epilogue.md"
RUNGS = {"cuda_plain": "epi_plain_kernel", "cuda_bias_gelu": "epi_bias_gelu_kernel",
         "cuda_bias_gelu_residual": "epi_bias_gelu_res_kernel", "cuda_fp8_out": "epi_fp8_kernel"}
EPILOGUE = {"cuda_plain": "none", "cuda_bias_gelu": "bias_gelu", "cuda_bias_gelu_residual": "bias_gelu_residual",
            "cuda_fp8_out": "fp8"}
# kwiki_gemm_epilogue(variant, a, bt, bias, res, out, s, amax, m, n, k, stream), as epilogue_ws.cu declares it
ARGTYPES: list[Any] = [ctypes.c_int, *[ctypes.c_void_p] * 7, *[ctypes.c_int] * 3, ctypes.c_void_p]


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    return artifact_module(ART, "gemm_epilogue.py", "kwiki_test_epilogue_cuda")


def _operands(mod: Any, epilogue: str, m: int = 70, n: int = 272, k: int = 144) -> tuple[dict, dict]:
    p = {"m": m, "n": n, "k": k, "epilogue": epilogue, "dtype": mod.DTYPE[epilogue]}
    i = mod.make_inputs(p, 3, "cpu")
    return i, mod.make_outputs(p, i)


def test_the_cuda_rungs_climb_above_the_triton_ones_from_the_modules_library() -> None:
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants if v.rung and v.rung >= 4] == [
        ("triton_fp8_out", 4), ("cuda_plain", 5), ("cuda_bias_gelu", 6), ("cuda_bias_gelu_residual", 7),
        ("cuda_fp8_out", 8)]
    assert m.python is not None and m.python.cuda == ["epilogue_ws.cu"]
    by_name = {v.name: v for v in m.variants}
    for name, kernel in RUNGS.items():
        assert by_name[name].kernels == [kernel]
        sass = by_name[name].sass
        assert sass is not None and {"STL", "LDL"} <= set(sass.forbid)
        assert "HGMMA.64x256x16.F32.BF16 >= 4" in sass.require and "WARPGROUP.DEPBAR.LE.DEPTH1" in sass.require
    mod = _module()
    assert mod.CUDA_EPILOGUE == {name: i for i, name in enumerate(RUNGS)}
    for p in mod.GRID:  # each rung at its epilogue's entries, the off-tile shape included
        for name, epilogue in EPILOGUE.items():
            assert mod.applies(name, p) == (p["epilogue"] == epilogue), (name, p)
    assert any(p["m"] % 128 and p["n"] % 256 for p in mod.GRID)


def test_the_page_claims_select_the_cuda_rungs_at_one_grid_entry_each() -> None:
    mod = _module()
    assert claimed_at_one_entry(PAGE, mod.GRID, mod.applies, RUNGS) == set(RUNGS)


def test_operands_the_kernels_are_not_built_for_are_named() -> None:
    pytest.importorskip("torch")
    mod = _module()
    for name, epilogue in EPILOGUE.items():
        i, o = _operands(mod, epilogue)
        # every check but the device passes on make_inputs' and make_outputs' own tensors (on the CPU here)
        assert mod.cuda_operands_error(name, i, o) == "a is on cpu, not on a's CUDA device", name
    i, o = _operands(mod, "bias_gelu")
    assert "runs the none epilogue, not bias_gelu" in mod.cuda_operands_error("cuda_plain", i, o)
    assert "bias is (271,)" in mod.cuda_operands_error("cuda_bias_gelu", {**i, "bias": i["bias"][:271]}, o)
    r, ro = _operands(mod, "bias_gelu_residual")
    assert "res is (70, 272) torch.float32" in mod.cuda_operands_error(
        "cuda_bias_gelu_residual", {**r, "res": r["res"].float()}, ro)
    f, fo = _operands(mod, "fp8")
    assert "s is (70, 3)" in mod.cuda_operands_error("cuda_fp8_out", f, {**fo, "s": fo["s"].t()})
    assert "amax is (2,)" in mod.cuda_operands_error("cuda_fp8_out", f, {**fo, "amax": fo["s"][0, :2]})
    p, po = _operands(mod, "none")
    assert "multiples of 16" in mod.cuda_operands_error(
        "cuda_plain", {"a": p["a"][:, :136].contiguous(), "bt": p["bt"][:, :136].contiguous()}, po)


def test_each_call_hands_the_library_its_epilogue_operands_and_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    cdll = FakeLibrary.of("kwiki_gemm_epilogue")
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("Stream", (), {"cuda_stream": 0})())
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", "libepilogue.so")
    mod = _module()
    seen: list[str] = []
    monkeypatch.setattr(mod, "cuda_operands_error", lambda name, i, o: seen.append(name))  # CPU tensors pass here
    for name, epilogue in EPILOGUE.items():
        i, o = _operands(mod, epilogue)
        if "amax" in o:
            o["amax"].fill_(7.0)
        mod.load(name)(i, o)
        lib = cdll.loaded[-1]
        assert lib.argtypes == ARGTYPES
        out = o["q"] if epilogue == "fp8" else o["c"]
        ptrs = [i["bias"].data_ptr() if "bias" in i else None, i["res"].data_ptr() if "res" in i else None,
                o["s"].data_ptr() if "s" in o else None, o["amax"].data_ptr() if "amax" in o else None]
        assert lib.calls == [(mod.CUDA_EPILOGUE[name], i["a"].data_ptr(), i["bt"].data_ptr(), ptrs[0], ptrs[1],
                              out.data_ptr(), ptrs[2], ptrs[3], 70, 272, 144, 0)]
        if "amax" in o:  # the library zeroes it (a memset before its kernel): no torch kernel in the timed call
            assert o["amax"].item() == 7.0
    assert seen == list(RUNGS)
    monkeypatch.setattr(mod, "cuda_operands_error", lambda name, i, o: "a is on cpu")
    i, o = _operands(mod, "none")
    with pytest.raises(ValueError, match=r"gemm_epilogue\.py\): cuda_plain: a is on cpu"):
        mod.load("cuda_plain")(i, o)
    assert cdll.loaded[-1].calls == []  # refused before the library


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory, ART)


@pytest.mark.nvcc
@pytest.mark.parametrize(("rung", "below", "words"), [
    ("cuda_bias_gelu", "cuda_plain", "require 'MUFU.EX2 >= 128'"),             # the GELU's exponentials
    ("cuda_bias_gelu_residual", "cuda_bias_gelu", "require 'LDG.E >= 96'"),     # the residual's loads
    ("cuda_fp8_out", "cuda_bias_gelu", "require 'F2FP.SATFINITE.E4M3.F32 >= 64'"),  # the e4m3 codes
])
def test_each_cuda_rungs_sass_expectation_holds_on_it_and_fails_on_the_rung_below(library, rung, below, words):
    on_below = library_rung_checks(library, manifest().variants, RUNGS, rung, below)
    assert any(words in m for m in on_below), on_below


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"variant": 4}, "variant"), ({"n": 264}, "N not a multiple of 16"),
                                             ({"a": (1 << 20) + 8}, "a misaligned for TMA"),
                                             ({"out": (1 << 25) + 4}, "the output misaligned for TMA"),
                                             ({"variant": 1, "bias": None}, "no bias"),
                                             ({"variant": 2, "res": None}, "no residual"),
                                             ({"variant": 3, "amax": None}, "no amax"),
                                             ({"variant": 3, "s": (1 << 24) + 2}, "s misaligned")])
def test_the_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library, change, why):
    args = {"variant": 0, "a": 1 << 20, "bt": 1 << 21, "bias": 1 << 22, "res": 1 << 23, "out": 1 << 25,
            "s": 1 << 24, "amax": 1 << 26, "m": 4001, "n": 4048, "k": 4048, "stream": None} | change
    assert launcher_result(library, "kwiki_gemm_epilogue", ARGTYPES, args) == -1, why


@pytest.mark.nvcc
def test_the_staged_output_is_the_layout_tma_reads_and_each_warp_writes_it_without_bank_conflicts(library):
    """epilogue_ws.cu stages a consumer's 64-row block (a bf16 half or the e4m3 block: 256 bytes a row) before its TMA
    stores. The library's own staged_at is held here to the 128-byte swizzle as the CUDA programming guide describes
    it for TMA (a box row of 128 bytes; 16-byte chunk k of row r at chunk k ^ (r % 8); boxes 8 KiB apart, 1024-byte
    aligned): every byte lands where TMA reads it, once. And each warp's store instruction (a bf16 pair or an e4m3
    pair for each of its 32 lanes: rows 16 w + lane / 4 (+ 8), bytes of the accumulator group q at lane % 4) touches
    each of the 32 banks through one 4-byte word at most: no bank conflict."""
    fn = ctypes.CDLL(str(library)).kwiki_epilogue_staged_at
    fn.argtypes, fn.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    at = {(r, b): fn(r, b) for r in range(64) for b in range(256)}
    assert fn(64, 0) == fn(0, 256) == fn(-1, 0) == -1
    tma = {(r, b): (b // 128) * 8192 + r * 128 + (((b % 128) // 16) ^ (r % 8)) * 16 + b % 16 for r, b in at}
    assert at == tma and sorted(at.values()) == list(range(64 * 256))
    for width, groups in ((4, 16), (2, 32)):  # bf16 pairs (16 groups of 8 columns a half), e4m3 pairs (32 a block)
        for w in range(4):
            for h in range(2):
                for q in range(groups):
                    words = {lane: at[(16 * w + lane // 4 + 8 * h, 4 * width * q + width * (lane % 4))] // 4
                             for lane in range(32)}
                    banks: dict[int, set[int]] = {}
                    for word in words.values():
                        banks.setdefault(word % 32, set()).add(word)
                    assert all(len(ws) == 1 for ws in banks.values()), (width, w, h, q, banks)
