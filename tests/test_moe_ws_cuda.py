"""moe_grouped_gemm_bf16_sm90a's warp-specialized CUDA rungs (ws_grouped.cu over artifacts/common/kwiki_ws_gemm.cuh),
e4m3 (rungs 5 and 6) and bf16 (rung 7), without a GPU.

The manifest climbs from the Triton rungs to the CUDA ones, built into the module's library beside the cuBLAS
baseline, and the page's claims name them at one GRID entry each; the module hands the library what it was built for
(checked by name before any CUDA call, through a fake library here) and the launcher refuses the rest itself (on this
machine a CUDA call would return a CUDA error, not -1). Compiled with nvcc as kwiki builds the library, each rung's
SASS expectation holds on its own kernel and fails on the other (the row-wise fold is FADDs with the scales' FMULs in
the epilogue, the block fold FFMAs) and on a kernel without warp specialization. The kernels run only on an H200
(kwiki verify), where the harness checks them against the module's fp32 reference at the off-tile routing (two empty
experts, no count a multiple of a tile, N and K off the tile)."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import FakeLibrary, build_library, claimed_at_one_entry, launcher_result, library_rung_checks
from triton_interpreter import artifact_module

from kwiki.wiki.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "moe_grouped_gemm_bf16_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "moe-grouped-gemm.md"
RUNGS = {"cuda_grouped_fp8": "moe_fp8_row_kernel", "cuda_grouped_fp8_block": "moe_fp8_block_kernel"}
CUDA = {**RUNGS, "cuda_grouped": "moe_bf16_kernel"}
# kwiki_moe_bf16(a, w, offs, c, T, N, K, E, capacity, stream)
BF16_ARGTYPES: list[Any] = [*[ctypes.c_void_p] * 4, *[ctypes.c_int] * 5, ctypes.c_void_p]
# kwiki_moe_fp8(variant, a, w, sa, sw, offs, c, T, N, K, E, stream), as ws_grouped.cu declares it
ARGTYPES: list[Any] = [ctypes.c_int, *[ctypes.c_void_p] * 6, *[ctypes.c_int] * 4, ctypes.c_void_p]


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    return artifact_module(ART, "moe.py", "kwiki_test_moe_ws_cuda")


def _off_tile(mod: Any, scaling: str) -> dict[str, Any]:
    return next(p for p in mod.GRID if p["case"] == "offtile" and p.get("scaling") == scaling)


def test_the_cuda_rungs_climb_above_the_triton_fp8_ones_from_the_modules_library() -> None:
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants if v.rung and v.rung >= 3] == [
        ("triton_grouped_fp8", 3), ("triton_grouped_fp8_block", 4), ("cuda_grouped_fp8", 5),
        ("cuda_grouped_fp8_block", 6), ("cuda_grouped", 7)]
    assert m.python is not None and m.python.cuda == ["cublas_grouped.cu", "ws_grouped.cu"]
    by_name = {v.name: v for v in m.variants}
    for name, kernel in CUDA.items():
        assert by_name[name].kernels == [kernel]
        sass = by_name[name].sass
        assert sass is not None and {"STL", "LDL"} <= set(sass.forbid)
        want = "HGMMA.64x256x16.F32.BF16 >= 4" if name == "cuda_grouped" else "QGMMA.64x128x32.F32.E4M3.E4M3 >= 4"
        assert want in sass.require
    mod = _module()
    assert mod.CUDA_FP8 == {"cuda_grouped_fp8": 0, "cuda_grouped_fp8_block": 1}
    for p in mod.GRID:  # the fp8 entries of their scaling only, the off-tile routing included
        assert mod.applies("cuda_grouped_fp8", p) == (p.get("scaling") == "row"), p
        assert mod.applies("cuda_grouped_fp8_block", p) == (p.get("scaling") == "block"), p
        assert mod.applies("cuda_grouped", p) == (p["dtype"] == mod.BF16 and p["case"] != "dense"), p
    for case in ("offtile", "decode", "masked"):  # both layouts, off the tile included
        assert any(mod.applies("cuda_grouped", p) and p["case"] == case for p in mod.GRID), case
    assert sum(mod.applies("cuda_grouped", p) and p["case"] == "offtile" and mod.masked(p) for p in mod.GRID) == 1
    sanitized = [p for p in m.sanitize.params if p.get("scaling")]
    assert {p["scaling"] for p in sanitized} == {"row", "block"}  # memcheck runs both off the tile


def test_the_page_claims_select_the_cuda_rungs_at_one_grid_entry_each() -> None:
    mod = _module()
    assert claimed_at_one_entry(PAGE, mod.GRID, mod.applies, CUDA) == set(CUDA)


def test_operands_the_kernels_are_not_built_for_are_named() -> None:
    torch = pytest.importorskip("torch")
    mod = _module()
    for name, scaling in (("cuda_grouped_fp8", "row"), ("cuda_grouped_fp8_block", "block")):
        p = _off_tile(mod, scaling)
        i = mod.make_inputs(p, 3, "cpu")
        o = mod.make_outputs(p, i)
        # every check but the device passes on make_inputs' own operands (on the CPU here)
        assert mod.fp8_operands_error(name, i, o) == "a is on cpu, not on a's CUDA device", name
    p = _off_tile(mod, "row")
    i, blk = mod.make_inputs(p, 3, "cpu"), mod.make_inputs(_off_tile(mod, "block"), 3, "cpu")
    o = mod.make_outputs(p, i)
    assert "sa is (9, 1159)" in mod.fp8_operands_error("cuda_grouped_fp8", {**i, "sa": blk["sa"]}, o)
    assert "sw is (8, 1008)" in mod.fp8_operands_error("cuda_grouped_fp8_block", {**blk, "sw": i["sw"]}, o)
    assert "offs is (8,) torch.int64" in mod.fp8_operands_error("cuda_grouped_fp8", {**i, "offs": i["offs"].long()}, o)
    assert "c is (1159, 1008) torch.float32" in mod.fp8_operands_error("cuda_grouped_fp8", i, {"c": o["c"].float()})
    assert "not [T, K] and [E, N, K]" in mod.fp8_operands_error("cuda_grouped_fp8", {**i, "w": i["w"][0]}, o)
    many = torch.empty(257, 16, 1040, dtype=torch.float8_e4m3fn)
    assert "257 experts" in mod.fp8_operands_error("cuda_grouped_fp8", {**i, "w": many}, o)


def test_each_call_hands_the_library_its_variant_operands_and_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    cdll = FakeLibrary.of("kwiki_moe_fp8")
    libs = cdll.loaded
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("Stream", (), {"cuda_stream": 0})())
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", "libmoe.so")
    mod = _module()
    seen: list[str] = []
    monkeypatch.setattr(mod, "fp8_operands_error", lambda name, i, o: seen.append(name))  # CPU tensors pass here
    for name, scaling in (("cuda_grouped_fp8", "row"), ("cuda_grouped_fp8_block", "block")):
        p = _off_tile(mod, scaling)
        i = mod.make_inputs(p, 3, "cpu")
        o = mod.make_outputs(p, i)
        mod.load(name)(i, o)
        lib = libs[-1]
        assert lib.argtypes == ARGTYPES
        assert lib.calls[-1][:7] == (mod.CUDA_FP8[name], i["a"].data_ptr(), i["w"].data_ptr(), i["sa"].data_ptr(),
                                     i["sw"].data_ptr(), i["offs"].data_ptr(), o["c"].data_ptr())
        assert lib.calls[-1][7:] == (1159, 1008, 1040, 8, 0)
    assert seen == list(RUNGS)
    monkeypatch.setattr(mod, "fp8_operands_error", lambda name, i, o: "a is on cpu")
    p = _off_tile(mod, "row")
    i = mod.make_inputs(p, 3, "cpu")
    with pytest.raises(ValueError, match=r"moe\.py\): cuda_grouped_fp8: a is on cpu"):
        mod.load("cuda_grouped_fp8")(i, mod.make_outputs(p, i))
    assert libs[-1].calls == []  # refused before the library
    monkeypatch.delenv("KWIKI_CUDA_LIBRARY")
    with pytest.raises(RuntimeError, match="not runnable here: no \\$KWIKI_CUDA_LIBRARY"):
        mod.load("cuda_grouped_fp8_block")


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory, ART)


@pytest.mark.nvcc
@pytest.mark.parametrize(("rung", "below", "words"), [
    ("cuda_grouped_fp8_block", "cuda_grouped_fp8", "require 'FFMA >= 64'"),  # the block scales' fold
    ("cuda_grouped_fp8", "cuda_grouped_fp8_block", "require 'FADD >= 64'"),  # the row-wise fold, scales after it
])
def test_each_cuda_rungs_sass_expectation_holds_on_it_and_fails_on_the_other(library, rung, below, words):
    on_other = library_rung_checks(library, manifest().variants, RUNGS, rung, below)
    assert any(words in m for m in on_other), on_other


def test_the_warp_specialization_expectations_fail_on_a_kernel_without_it() -> None:
    from kwiki.verify.sass import Kernel, check_variant

    plain = Kernel(mangled="grouped_gemm_fp8_rowwise", name="grouped_gemm_fp8_rowwise", arch="sm_90a", registers=168,
                   opcodes={"QGMMA.64x128x32.F32.E4M3.E4M3": 4, "FADD": 64, "FMUL": 128, "UTMALDG.2D": 2,
                            "SYNCS.PHASECHK.TRANS64.TRYWAIT": 2, "WARPGROUP.ARRIVE": 1})
    row = {v.name: v for v in manifest().variants}["cuda_grouped_fp8"]
    variant = row.model_copy(update={"kernels": ["grouped_gemm_fp8_rowwise"]})
    mismatches = check_variant(variant, "sm_90a", {"grouped_gemm_fp8_rowwise": plain}, {})[1]
    assert any("USETMAXREG.TRY_ALLOC.CTAPOOL" in m for m in mismatches), mismatches  # no producer handing registers


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"variant": 2}, "variant"), ({"E": 0}, "no experts"),
                                             ({"E": 257}, "more experts than the schedule holds"),
                                             ({"N": 1000}, "N not a multiple of 16"), ({"K": 1000}, "K neither"),
                                             ({"a": (1 << 20) + 8}, "a misaligned for TMA"),
                                             ({"sw": (1 << 22) + 4}, "row-wise column scales read in pairs"),
                                             ({"offs": None}, "no offsets")])
def test_the_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library, change, why):
    args = {"variant": 0, "a": 1 << 20, "w": 1 << 21, "sa": 1 << 22, "sw": 1 << 23, "offs": 1 << 24, "c": 1 << 25,
            "T": 1159, "N": 1008, "K": 1040, "E": 8, "stream": None} | change
    assert launcher_result(library, "kwiki_moe_fp8", ARGTYPES, args) == -1, why  # -1: refused before any CUDA call


def _schedule(library: Path, offs: list[int], t: int, n: int, bn: int = 128,
              capacity: int = 0) -> tuple[int, list[tuple[int, ...]]]:
    fn = ctypes.CDLL(str(library)).kwiki_moe_schedule
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int), *[ctypes.c_int] * 4, ctypes.POINTER(ctypes.c_int),
                   ctypes.c_int]
    fn.restype = ctypes.c_int
    most = 1 << 16
    jobs = (ctypes.c_int * (5 * most))()
    tiles = fn(bn, (ctypes.c_int * len(offs))(*offs), len(offs), t, n, capacity, jobs, most)
    return tiles, [tuple(jobs[5 * i:5 * i + 5]) for i in range(min(max(tiles, 0), most))]


@pytest.mark.nvcc
@pytest.mark.parametrize("bn", [128, 256])
@pytest.mark.parametrize("which", ["offtile", "zipf65k", "balanced65k"])
def test_the_schedule_covers_every_experts_rows_and_columns_once_and_stores_nothing_past_them(library, which, bn):
    """kwiki_moe_schedule runs the kernels' own schedule code (the tables thread 0 builds, each tile's job) on
    the host: every (row, column) of every expert's part of C belongs to exactly one tile, that tile reads the
    expert's weight (B rows e * N + its columns) and stores no row past the expert's last."""
    mod = _module()
    p = {"offtile": _off_tile(mod, "row"),
         "zipf65k": next(p for p in mod.GRID if p.get("scaling") == "row" and p["case"] == "prefill"),
         "balanced65k": {**next(p for p in mod.GRID if p.get("scaling") == "row" and p["case"] == "prefill"),
                         "route": "balanced"}}[which]
    counts = mod.counts(p)
    ends = [sum(counts[:e + 1]) for e in range(len(counts))]
    t, n = ends[-1], p["n"]
    tiles, jobs = _schedule(library, ends, t, n, bn)
    assert tiles == len(jobs) == sum(-(-c // 128) for c in counts) * -(-n // bn)
    seen = [0] * len(counts)
    for a_row, b_row, row_end, col0, e in jobs:
        start = ends[e - 1] if e else 0
        assert row_end == ends[e] and start <= a_row < row_end and (a_row - start) % 128 == 0
        assert col0 % bn == 0 and col0 < n and b_row == e * n + col0
        seen[e] += (min(a_row + 128, row_end) - a_row) * (min(col0 + bn, n) - col0)
    assert seen == [c * n for c in counts]  # each element once: tiles do not overlap inside an expert (asserted above)
    assert len(set(jobs)) == len(jobs)


@pytest.mark.nvcc
def test_offsets_that_fall_or_pass_the_rows_cannot_make_a_tile_store_outside_c(library):
    tiles, jobs = _schedule(library, [300, 100, 5000, 900], 1000, 256)  # falling, then past T = 1000
    assert tiles == len(jobs)
    assert all(0 <= a_row < row_end <= 1000 for a_row, _, row_end, _, _ in jobs)
    assert {e for *_, e in jobs} == {0, 2}  # expert 1 is empty (its end clamps to 300), expert 3 too (to 1000)
    assert _schedule(library, [10], 10, 0)[0] == -1 and _schedule(library, [10] * 257, 10, 16)[0] == -1
    assert _schedule(library, [10], 10, 16, bn=192)[0] == -1  # no kernel of that width
    assert _schedule(library, [10, 10], 30, 16, 256, capacity=16)[0] == -1  # masked: T must be E x capacity
    tiles, jobs = _schedule(library, [-5, 300, 7], 3 * 200, 256, 256, capacity=200)  # counts below 0 and past it
    assert all(e * 200 <= a_row < row_end <= (e + 1) * 200 for a_row, _, row_end, _, e in jobs)
    assert {e for *_, e in jobs} == {1, 2} and tiles == (2 + 1) * 1


@pytest.mark.nvcc
@pytest.mark.parametrize("which", ["offtile", "decode"])
def test_the_masked_schedule_covers_every_experts_real_rows_once_from_its_capacity_slot(library, which):
    """The masked layout (A [E, capacity, K] with counts): every real row of every expert in exactly one tile at
    each column, a tile's rows start at e x capacity + a multiple of 128 and store nothing past the expert's count,
    so the padding rows are never written."""
    mod = _module()
    p = next(p for p in mod.GRID if mod.masked(p) and p["dtype"] == mod.BF16 and
              p["case"] == ("offtile" if which == "offtile" else "masked"))
    counts, cap, n = mod.counts(p), p["capacity"], p["n"]
    tiles, jobs = _schedule(library, counts, len(counts) * cap, n, 256, capacity=cap)
    assert tiles == len(jobs) == sum(-(-c // 128) for c in counts) * -(-n // 256)
    seen = [0] * len(counts)
    for a_row, b_row, row_end, col0, e in jobs:
        assert row_end == e * cap + counts[e] and (a_row - e * cap) % 128 == 0 and e * cap <= a_row < row_end
        assert b_row == e * n + col0 and col0 % 256 == 0
        seen[e] += (min(a_row + 128, row_end) - a_row) * (min(col0 + 256, n) - col0)
    assert seen == [c * n for c in counts]


def test_bf16_operands_the_kernel_is_not_built_for_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    mod = _module()
    p = next(p for p in mod.GRID if p["case"] == "offtile" and p["dtype"] == mod.BF16 and not mod.masked(p))
    i = mod.make_inputs(p, 3, "cpu")
    o = mod.make_outputs(p, i)
    # cublas_grouped's check first (dtypes, shapes, contiguity, the device), then what the CUDA kernel adds
    assert "a is on cpu, not a CUDA device" in mod.bf16_operands_error(i["a"], i["w"], o["c"], i["offs"])
    assert "a is torch.float32" in mod.bf16_operands_error(i["a"].float(), i["w"], o["c"], i["offs"])
    monkeypatch.setattr(mod, "cublas_operands_error", lambda a, w, c, offs: None)
    assert mod.bf16_operands_error(i["a"], i["w"], o["c"], i["offs"]) is None
    many = torch.zeros(257, 8, 1000, dtype=torch.bfloat16)
    assert "257 experts" in mod.bf16_operands_error(i["a"], many, o["c"], i["offs"])
    flat = torch.zeros(1159 * 1000 + 1, dtype=torch.bfloat16)
    shifted = flat[1:].view(1159, 1000)  # 2 bytes past a 16-byte boundary
    assert "a not 16-byte aligned (TMA)" in mod.bf16_operands_error(shifted, i["w"], o["c"], i["offs"])


def test_the_bf16_rung_hands_the_library_its_operands_and_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    cdll = FakeLibrary.of("kwiki_moe_bf16")
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("Stream", (), {"cuda_stream": 0})())
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", "libmoe.so")
    mod = _module()
    monkeypatch.setattr(mod, "bf16_operands_error", lambda a, w, c, offs: None)
    p = next(p for p in mod.GRID if p["case"] == "offtile" and p["dtype"] == mod.BF16 and not mod.masked(p))
    i = mod.make_inputs(p, 3, "cpu")
    o = mod.make_outputs(p, i)
    mod.load("cuda_grouped")(i, o)
    lib = cdll.loaded[-1]
    assert lib.argtypes == BF16_ARGTYPES
    assert lib.calls == [(i["a"].data_ptr(), i["w"].data_ptr(), i["offs"].data_ptr(), o["c"].data_ptr(), 1159, 1000,
                          1000, 8, 0, 0)]
    pm = next(p for p in mod.GRID if p["case"] == "offtile" and p["dtype"] == mod.BF16 and mod.masked(p))
    im = mod.make_inputs(pm, 3, "cpu")
    om = mod.make_outputs(pm, im)
    mod.load("cuda_grouped")(im, om)  # masked: the [E, capacity, *] tensors as E x capacity rows, and the counts
    assert cdll.loaded[-1].calls == [(im["a"].data_ptr(), im["w"].data_ptr(), im["counts"].data_ptr(),
                                      om["c"].data_ptr(), 8 * 470, 1000, 1000, 8, 470, 0)]
    monkeypatch.setattr(mod, "bf16_operands_error", lambda a, w, c, offs: "a is on cpu")
    with pytest.raises(ValueError, match=r"moe\.py\): cuda_grouped: a is on cpu"):
        mod.load("cuda_grouped")(i, o)
    assert cdll.loaded[-1].calls == []  # refused before the library


@pytest.mark.nvcc
def test_the_bf16_rungs_sass_expectation_holds_on_it_and_fails_on_the_fp8_rung(library):
    on_fp8 = library_rung_checks(library, manifest().variants, CUDA, "cuda_grouped", "cuda_grouped_fp8")
    assert any("require 'HGMMA.64x256x16.F32.BF16 >= 4'" in m for m in on_fp8)
    assert any("require 'WARPGROUP.DEPBAR.LE.DEPTH1'" in m for m in on_fp8)  # the fp8 consumers wait to depth 0


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"E": 0}, "no experts"), ({"E": 257}, "too many experts"),
                                             ({"N": 1004}, "N not a multiple of 8"),
                                             ({"w": (1 << 21) + 8}, "w misaligned"), ({"offs": None}, "no offsets"),
                                             ({"c": (1 << 25) + 2}, "c misaligned"),
                                             ({"capacity": -1}, "a negative capacity"),
                                             ({"capacity": 145}, "a capacity that is not T / E")])
def test_the_bf16_launcher_refuses_what_it_is_not_built_for_before_any_cuda_call(library, change, why):
    args = {"a": 1 << 20, "w": 1 << 21, "offs": 1 << 24, "c": 1 << 25, "T": 1159, "N": 1000, "K": 1000, "E": 8,
            "capacity": 0, "stream": None} | change
    assert launcher_result(library, "kwiki_moe_bf16", BF16_ARGTYPES, args) == -1, why
