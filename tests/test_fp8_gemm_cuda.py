"""fp8_gemm_sm90a's warp-specialized CUDA rungs (fp8_ws.cu) without a GPU.

The manifest climbs from the Triton rungs to the two CUDA ones and the page's claims name them at GRID entries;
compiled with nvcc for sm_90a as kwiki builds the module's library, each rung's SASS expectations hold on its own
kernel and fail on the other (the per-tensor fold is FADDs, the block-scaled one FFMAs) and on the Triton rung below
(no setmaxnreg, no TMA ring of mbarriers there); a k-block's four fp8 wgmma are issued under one arrive and waited
for once, before the fold. The module hands the library what it was built for (checked by name before any CUDA
call, through a fake library here), and the library's launcher refuses the rest itself (on this machine a CUDA call
would return a CUDA error, not -1). The kernels run only on an H200 (kwiki verify), where the harness checks them
against the module's fp32 reference."""

from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import (
    FakeLibrary,
    build_library,
    claimed_at_one_entry,
    launcher_result,
    library_rung_checks,
    sass_tools,
)
from triton_interpreter import artifact_module

from kwiki.wiki.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "fp8_gemm_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "fp8-gemm.md"
RUNGS = {"cuda_tensor_ws": "fp8_ws_tensor_kernel", "cuda_block_ws": "fp8_ws_block_kernel"}
WIDE = {"cuda_tensor_ws_wide": "fp8_ws_tensor_wide_kernel", "cuda_block_ws_wide": "fp8_ws_block_wide_kernel"}
INFLIGHT = {"cuda_tensor_ws_inflight": "fp8_ws_tensor_inflight_kernel",
            "cuda_block_ws_inflight": "fp8_ws_block_inflight_kernel"}
KERNELS = {**RUNGS, **WIDE, "cuda_row_ws": "fp8_ws_row_kernel", **INFLIGHT}


def scaling_of(name: str) -> str:
    return "block" if "block" in name else "row" if "row" in name else "tensor"
# kwiki_fp8_gemm(variant, a, b, sa, sb, c, m, n, k, stream), as fp8_ws.cu declares it
ARGTYPES: list[Any] = [ctypes.c_int, *[ctypes.c_void_p] * 5, *[ctypes.c_int] * 3, ctypes.c_void_p]


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    return artifact_module(ART, "fp8_gemm.py", "kwiki_test_fp8_cuda")


def test_the_cuda_rungs_climb_above_the_first_triton_ones_and_name_their_kernels() -> None:
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants if v.rung and v.rung >= 3] == [
        ("triton_tensor_tma", 3), ("triton_block_tma", 4), ("cuda_tensor_ws", 5), ("cuda_block_ws", 6),
        ("cuda_tensor_ws_inflight", 7), ("cuda_block_ws_inflight", 8), ("triton_block_tma_prefetch", 9)]
    assert m.python is not None and m.python.cuda == ["fp8_ws.cu"]
    build = m.library_build()
    assert build is not None and build.sources == ["fp8_ws.cu"]
    by_name = {v.name: v for v in m.variants}
    for name, kernel in KERNELS.items():
        assert by_name[name].kernels == [kernel]
        sass = by_name[name].sass
        assert sass is not None and {"STL", "LDL"} <= set(sass.forbid)
        n, sites = (192 if name in WIDE else 128), (8 if name in INFLIGHT else 4)
        assert f"QGMMA.64x{n}x32.F32.E4M3.E4M3 >= {sites}" in sass.require
    assert all(by_name[n].rung is None for n in ("cuda_tensor_ws_wide", "cuda_block_ws_wide", "cuda_row_ws"))
    mod = _module()
    assert mod.CUDA == {"cuda_tensor_ws": 0, "cuda_block_ws": 1, "cuda_tensor_ws_wide": 2, "cuda_block_ws_wide": 3,
                        "cuda_row_ws": 4, "cuda_tensor_ws_inflight": 5, "cuda_block_ws_inflight": 6}
    assert set(KERNELS) <= set(mod.VARIANTS)
    for p in mod.GRID:  # per-tensor kernels at the per-tensor entries, block ones at the block ones, off-tile too
        for name in KERNELS:
            assert mod.applies(name, p) == (p["scaling"] == scaling_of(name)), (name, p)
    assert any(p["scaling"] == "block" and p["m"] % 128 and p["n"] % 128 and p["k"] % 128 for p in mod.GRID)


def test_the_page_claims_select_the_cuda_rungs_at_grid_entries() -> None:
    mod = _module()
    assert claimed_at_one_entry(PAGE, mod.GRID, mod.applies, KERNELS) == set(KERNELS)


def _operands(torch: Any, mod: Any, scaling: str, m: int = 70, n: int = 272, k: int = 400) -> tuple[dict, dict]:
    p = {"m": m, "n": n, "k": k, "scaling": scaling, "dtype": mod.FP8}
    i = mod.make_inputs(p, 3, "cpu")
    return i, mod.make_outputs(p, i)


def test_operands_the_kernels_are_not_built_for_are_named() -> None:
    torch = pytest.importorskip("torch")
    mod = _module()
    for name in KERNELS:
        i, o = _operands(torch, mod, scaling_of(name))
        # every check but the device passes on make_inputs' own operands (on the CPU here)
        assert mod.cuda_operands_error(name, i, o) == "a is on cpu, not on a's CUDA device", name
    i, o = _operands(torch, mod, "block")
    assert "sa is (1,)" in mod.cuda_operands_error("cuda_block_ws_wide", {**i, "sa": i["sa"][:1, 0]}, o)
    assert "sa is (70, 4)" in mod.cuda_operands_error("cuda_block_ws", {**i, "sa": i["sa"].t()}, o)  # [M, K/128]
    assert "not a contiguous" in mod.cuda_operands_error("cuda_block_ws", {**i, "sb": i["sb"].t().contiguous().t()}, o)
    t, ot = _operands(torch, mod, "tensor")
    assert "sa is (4, 70)" in mod.cuda_operands_error("cuda_tensor_ws", {**t, "sa": i["sa"]}, ot)  # block scales
    assert "c is (70, 272) torch.float32" in mod.cuda_operands_error("cuda_tensor_ws", t, {"c": ot["c"].float()})
    assert "b is (272, 400) torch.bfloat16" in mod.cuda_operands_error("cuda_tensor_ws", {**t, "b": t["b16"]}, ot)
    assert "are not [M, K] and [N, K]" in mod.cuda_operands_error("cuda_tensor_ws", {**t, "b": t["b"][:, :384]}, ot)
    odd = {"a": t["a"][:, :392].contiguous(), "b": t["b"][:, :392].contiguous()}
    assert "multiples of 16" in mod.cuda_operands_error("cuda_tensor_ws", {**t, **odd}, ot)


def test_each_call_hands_the_library_its_variant_operands_and_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    cdll = FakeLibrary.of("kwiki_fp8_gemm")
    libs = cdll.loaded
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("Stream", (), {"cuda_stream": 0})())
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", "libfp8_ws.so")
    mod = _module()
    seen: list[str] = []
    monkeypatch.setattr(mod, "cuda_operands_error", lambda name, i, o: seen.append(name))  # CPU tensors pass here
    for name in KERNELS:
        i, o = _operands(torch, mod, scaling_of(name))
        mod.load(name)(i, o)
        lib = libs[-1]
        assert lib.argtypes == ARGTYPES
        assert lib.calls[-1][:6] == (mod.CUDA[name], i["a"].data_ptr(), i["b"].data_ptr(), i["sa"].data_ptr(),
                                     i["sb"].data_ptr(), o["c"].data_ptr())
        assert lib.calls[-1][6:] == (70, 272, 400, 0)
    assert seen == list(KERNELS)
    monkeypatch.setattr(mod, "cuda_operands_error", lambda name, i, o: "a is on cpu")
    i, o = _operands(torch, mod, "block")
    with pytest.raises(ValueError, match=r"fp8_gemm\.py\): cuda_block_ws: a is on cpu"):
        mod.load("cuda_block_ws")(i, o)
    assert len(libs[-1].calls) == 0  # refused before the library
    monkeypatch.delenv("KWIKI_CUDA_LIBRARY")
    with pytest.raises(RuntimeError, match="not runnable here: no \\$KWIKI_CUDA_LIBRARY"):
        mod.load("cuda_row_ws")


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory, ART)


@pytest.mark.nvcc
@pytest.mark.parametrize(("rung", "below", "words"), [
    ("cuda_block_ws", "cuda_tensor_ws", "require 'FFMA >= 64'"),     # the block scales' fold
    ("cuda_tensor_ws", "cuda_block_ws", "require 'FADD >= 64'"),     # the per-tensor fold
    ("cuda_tensor_ws_wide", "cuda_tensor_ws", "QGMMA.64x192x32"),      # the wide tile
    ("cuda_block_ws_wide", "cuda_tensor_ws_wide", "require 'FFMA >= 96'"),
    ("cuda_row_ws", "cuda_tensor_ws", "require 'LDG.E.64'"),           # the column scales, read in pairs
    ("cuda_tensor_ws_inflight", "cuda_tensor_ws", "WARPGROUP.DEPBAR.LE.DEPTH1"),  # a k-block left in flight
    ("cuda_tensor_ws_inflight", "cuda_tensor_ws", "QGMMA.64x128x32.F32.E4M3.E4M3 >= 8"),  # two partials' sites
    ("cuda_block_ws_inflight", "cuda_tensor_ws_inflight", "require 'FFMA >= 128'"),
])
def test_each_cuda_rungs_sass_expectation_holds_on_it_and_fails_on_the_other(library, rung, below, words):
    on_other = library_rung_checks(library, manifest().variants, KERNELS, rung, below)
    assert any(words in m for m in on_other), on_other


def test_the_warp_specialization_expectations_fail_on_a_triton_style_kernel() -> None:
    """What the CUDA rungs' expectations add over the Triton rung below them: a kernel with fp8 wgmma and its fold
    but no producer warpgroup (no setmaxnreg, no mbarrier waits, no TMA) fails them, as triton_tensor's does."""
    from kwiki.verify.sass import Kernel, check_variant

    plain = Kernel(mangled="fp8_gemm_tensor", name="fp8_gemm_tensor", arch="sm_90a", registers=168,
                   opcodes={"QGMMA.64x128x32.F32.E4M3.E4M3": 4, "FADD": 64, "LDGSTS.E.BYPASS.128": 16,
                            "BAR.SYNC.DEFER_BLOCKING": 1, "WARPGROUP.ARRIVE": 1})
    ws = {v.name: v for v in manifest().variants}["cuda_tensor_ws"]
    variant = ws.model_copy(update={"kernels": ["fp8_gemm_tensor*"]})
    mismatches = check_variant(variant, "sm_90a", {"fp8_gemm_tensor": plain}, {})[1]
    for op in ("UTMALDG.2D", "USETMAXREG.TRY_ALLOC.CTAPOOL", "SYNCS.PHASECHK.TRANS64.TRYWAIT"):
        assert any(op in m for m in mismatches), (op, mismatches)


@pytest.mark.nvcc
def test_a_k_blocks_four_wgmma_are_issued_together_and_waited_for_once_before_the_fold(library) -> None:
    listing = subprocess.run([sass_tools().cuobjdump, "-sass", str(library)], capture_output=True, text=True,
                             check=True, timeout=120).stdout
    bodies = dict(re.findall(r"Function : (fp8_ws_\w+_kernel)\n(.*?)(?=\n\s+Function : |\Z)", listing, re.S))
    assert sorted(bodies) == sorted(KERNELS.values())
    for name, body in bodies.items():
        if name in INFLIGHT.values():
            continue
        ops = re.findall(r"\b(WARPGROUP\.ARRIVE|QGMMA\.64x1[29][28]x32\.F32\.E4M3\.E4M3|"
                         r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0|FADD|FFMA)\b", body)
        loop = "".join("A" if o == "WARPGROUP.ARRIVE" else "Q" if o.startswith("QGMMA") else "W" if "DEPBAR" in o
                       else "f" for o in ops)
        assert "AQQQQW" in loop, (name, loop)  # no fold or wait between a k-block's wgmma (none serialized)
        assert loop.count("Q") == 4, (name, loop)
        fold = loop[loop.index("W") + 1:]
        assert fold.startswith("f" * (96 if "wide" in name else 64)), (name, loop)  # the fold follows the wait
        assert re.search(r"QGMMA\.64x1[29][28]x32\.F32\.E4M3\.E4M3 R\d+, gdesc\[UR\d+\], RZ, !UPT", body), name


def _k_block_loop(body: str) -> str:
    """A kernel's wgmma pipeline in one letter an instruction: A arrive, Q an fp8 wgmma, 0 and 1 a wait for all
    groups or all but the last, f a fold's FADD or FFMA."""
    ops = re.findall(r"\b(WARPGROUP\.ARRIVE|QGMMA\.64x128x32\.F32\.E4M3\.E4M3|WARPGROUP\.DEPBAR\.LE gsb0, 0x[01]|"
                     r"FADD|FFMA)\b", body)
    return "".join("A" if o == "WARPGROUP.ARRIVE" else "Q" if o.startswith("QGMMA") else o[-1] if "DEPBAR" in o
                   else "f" for o in ops)


@pytest.mark.nvcc
def test_the_inflight_rungs_fold_a_partial_while_the_next_k_blocks_wgmma_run(library) -> None:
    """Rungs 7 and 8: in the steady loop a k-block's four wgmma are issued (into one partial), then the wait leaves
    that group in flight (depth 1) and the other partial is folded: AQQQQ1 then 64 folds, twice (p1, then p0), and
    ptxas serialized nothing (no wait of depth 0 between the wgmma and the fold there). The plain rung 5 waits for
    all (depth 0) before each fold."""
    listing = subprocess.run([sass_tools().cuobjdump, "-sass", str(library)], capture_output=True, text=True,
                             check=True, timeout=120).stdout
    bodies = dict(re.findall(r"Function : (fp8_ws_\w+_kernel)\n(.*?)(?=\n\s+Function : |\Z)", listing, re.S))
    steady = "AQQQQ1" + "f" * 64
    for name in INFLIGHT.values():
        loop = _k_block_loop(bodies[name])
        assert loop.count(steady) >= 2, (name, loop)  # the loop's two halves
        assert loop.count("Q") == 16 and "AQQQQ0" not in loop, (name, loop)  # four issue sites, none serialized
    assert steady not in _k_block_loop(bodies["fp8_ws_tensor_kernel"])


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"variant": 7}, "variant"), ({"variant": -1}, "variant"),
                                             ({"variant": 4, "sb": (1 << 23) + 4}, "row scales read in pairs"),
                                             ({"n": 264}, "N not a multiple of 16"),
                                             ({"k": 392}, "K not a multiple of 16"), ({"m": 0}, "no rows"),
                                             ({"a": (1 << 20) + 8}, "a misaligned for TMA"),
                                             ({"c": (1 << 22) + 2}, "c not 4-byte aligned"), ({"sb": None}, "no sb")])
def test_the_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library, change, why):
    args = {"variant": 1, "a": 1 << 20, "b": 1 << 21, "sa": 1 << 22, "sb": 1 << 23, "c": 1 << 24, "m": 70, "n": 272,
            "k": 400, "stream": None} | change
    assert launcher_result(library, "kwiki_fp8_gemm", ARGTYPES, args) == -1, why  # -1: refused before any CUDA call


@pytest.mark.nvcc
def test_the_module_refuses_operands_by_name_before_calling_the_library(library, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", str(library))
    mod = _module()
    i, o = _operands(torch, mod, "tensor")
    with pytest.raises(ValueError, match=r"fp8_gemm\.py\): cuda_tensor_ws: a is on cpu"):
        mod.load("cuda_tensor_ws")(i, o)
