"""moe_grouped_gemm_bf16_sm90a's cuBLAS grouped-API baseline (cublas_grouped, cublas_grouped.cu) without a GPU.

The manifest declares it as a rung-0 baseline built from the module's CUDA library and the page's claims select it at
one GRID entry each; the module says why it is not runnable (no GPU, no library, no libcublas in the process, no
cublasGemmGroupedBatchedEx in it) before it calls anything, and refuses operands and offsets by name. Compiled with
nvcc as kwiki builds the library, the host half of the launcher is checked against cuBLAS's documented semantics:
each expert with rows becomes one column-major group whose emulation (fp64, on the CPU, through the very pointers
and leading dimensions the launcher would hand cuBLAS) gives the expert's rows of C; what the launcher is not built
for is refused before any CUDA call, and the pointers are copied before cuBLAS is called. On an H200 (marked gpu) the
variant runs against the module's reference."""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import build_library

from kwiki.wiki.manifest import Manifest, load_manifest
from kwiki.wiki.pages import load_page

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "moe_grouped_gemm_bf16_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "kernels" / "moe-grouped-gemm.md"
OFF_TILE = (0, 1, 200, 130, 0, 461, 67, 300)
DIMS = 8  # a group's description: transa, transb, m, n, k, lda, ldb, ldc
OP_N, OP_T = 0, 1
GEMM = ctypes.CFUNCTYPE(ctypes.c_int, *[ctypes.c_void_p] * 8, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                        ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int)  # cublasGemmGroupedBatchedEx


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("kwiki_test_moe_cublas", ART / "moe.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_cublas_grouped_is_a_rung_0_baseline_from_the_modules_cuda_library() -> None:
    m = manifest()
    assert m.python is not None and m.python.cuda[0] == "cublas_grouped.cu"  # the CUDA rungs' ws_grouped.cu beside it
    v = m.variant("cublas_grouped")
    assert v is not None and v.rung == 0 and v.adds is not None and "sync" in v.adds
    assert [x.name for x in m.variants if x.rung is not None and x.rung >= 1] == [
        "triton_grouped", "triton_grouped_tma_persistent", "triton_grouped_fp8", "triton_grouped_fp8_block",
        "cuda_grouped_fp8", "cuda_grouped_fp8_block", "cuda_grouped"]
    mod = _module()
    assert "cublas_grouped" in mod.VARIANTS and set(mod.VARIANTS) == {x.name for x in m.variants}
    ran = {p["case"] for p in mod.GRID if mod.applies("cublas_grouped", p)}
    assert ran == {"prefill", "decode", "offtile"}  # where the loop runs: every grouped entry, off the tile too


def test_the_page_claims_select_cublas_grouped_at_one_grid_entry_each() -> None:
    page = load_page(PAGE, REPO)
    mod = _module()
    grid = [p for p in mod.GRID if mod.applies("cublas_grouped", p)]  # the entries where it runs (as kwiki matches)
    named = {}
    for c in page.meta.claims:
        for sel in (c.measure.of, c.measure.per) if c.measure is not None else ():
            if sel is not None and sel.variant == "cublas_grouped":
                named[c.id] = [p for p in grid if all(p[k] == v for k, v in sel.params.items())]
    assert sorted(named) == ["cublas-grouped-vs-loop", "prefill-down-skew-vs-cublas-grouped",
                             "prefill-skew-vs-cublas-grouped", "prefill65k-skew-vs-cublas-grouped"]
    for cid, matches in named.items():
        assert len(matches) == 1 and matches[0]["route"] == "zipf" and matches[0]["case"] == "prefill", cid
    assert {named[c][0]["n"] for c in named} == {4096, 7168}  # the gate/up and the down shape


# ---------------------------------------------------------------- not runnable, with the reason


def test_without_a_gpu_the_variant_is_not_runnable_and_says_so() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(RuntimeError, match=r"cublas_grouped is not runnable here: no CUDA device"):
        _module().load("cublas_grouped")


def test_without_the_library_the_variant_is_not_runnable_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # past the GPU check: the library's comes next
    monkeypatch.delenv("KWIKI_CUDA_LIBRARY", raising=False)
    with pytest.raises(RuntimeError, match=r"not runnable here: no \$KWIKI_CUDA_LIBRARY"):
        _module().load("cublas_grouped")


MAPS = """\
7f10a0000000-7f10a2000000 r-xp 00000000 08:01 1234 /venv/nvidia/cu13/lib/libcublasLt.so.13
7f10b0000000-7f10b1000000 r-xp 00000000 08:01 1235 /venv/nvidia/cu13/lib/libcublas.so.13
7f10c0000000-7f10c0001000 rw-p 00000000 00:00 0
"""


def test_the_loaded_libcublas_is_found_in_the_maps_and_libcublaslt_is_not_it() -> None:
    mod = _module()
    assert mod.loaded_cublas(MAPS) == "/venv/nvidia/cu13/lib/libcublas.so.13"
    assert mod.loaded_cublas(MAPS.splitlines()[0] + "\n" + MAPS.splitlines()[2]) is None
    assert mod.loaded_cublas("") is None


def test_a_libcublas_without_the_grouped_symbol_is_not_runnable() -> None:
    libc = ctypes.util.find_library("c")
    if libc is None:
        pytest.skip("no libc to stand in for an old libcublas")
    with pytest.raises(RuntimeError, match=r"not runnable here: .* has no cublasGemmGroupedBatchedEx \(cuBLAS 12\.5"):
        _module().cublas_symbol(libc)


# ---------------------------------------------------------------- operands and offsets, refused by name


def _operands(torch: Any, rows: int = 40, e: int = 3, n: int = 24, k: int = 16) -> dict[str, Any]:
    return {"a": torch.zeros(rows, k, dtype=torch.bfloat16), "w": torch.zeros(e, n, k, dtype=torch.bfloat16),
            "c": torch.empty(rows, n, dtype=torch.bfloat16), "offs": torch.tensor([10, 10, rows], dtype=torch.int32)}


def test_operands_the_call_is_not_built_for_are_named() -> None:
    torch = pytest.importorskip("torch")
    err = _module().cublas_operands_error
    ok = _operands(torch)
    assert err(*ok.values()) == "a is on cpu, not a CUDA device; w is on cpu, not a CUDA device; c is on cpu, not a " \
                                "CUDA device"  # nothing else is wrong with them
    assert "a is torch.float16, not torch.bfloat16" in err(**{**ok, "a": ok["a"].half()})
    assert "offs is torch.int64, not torch.int32" in err(**{**ok, "offs": ok["offs"].long()})
    assert "do not agree" in err(**{**ok, "c": torch.empty(40, 32, dtype=torch.bfloat16)})
    assert "do not agree" in err(**{**ok, "offs": torch.tensor([40], dtype=torch.int32)})
    odd = _operands(torch, n=20, k=12)
    assert "n 20 and k 12 must be multiples of 8" in err(*odd.values())
    assert "a is not contiguous" in err(**{**ok, "a": torch.zeros(16, 40, dtype=torch.bfloat16).t()})
    assert "must be [T, K], [E, N, K], [T, N] and [E]" in err(**{**ok, "w": ok["w"][0]})


@pytest.mark.parametrize(("ends", "words"), [
    ([10, 5, 40], "offs[1] = 5 is below offs[0] = 10"),
    ([-1, 5, 40], "offs[0] = -1 is negative"),
    ([10, 20, 39], "the offsets end at 39, not at the 40 rows of a"),
])
def test_offsets_read_back_are_checked_before_the_library_sees_them(ends: list[int], words: str) -> None:
    mod = _module()
    assert mod.cublas_ends_error([10, 10, 40], 40) is None and mod.cublas_ends_error([0, 0, 0], 0) is None
    assert mod.cublas_ends_error(ends, 40) == words


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = manifest().library_build()
    assert build is not None and "-lcublas" not in build.flags  # nothing to link: torch's libcublas is called
    return build_library(tmp_path_factory, ART)


def _groups(lib: ctypes.CDLL) -> Any:
    fn = lib.kwiki_moe_groups
    fn.argtypes = [ctypes.POINTER(ctypes.c_int), *[ctypes.c_int] * 4, *[ctypes.c_void_p] * 3,
                   ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p)]
    fn.restype = ctypes.c_int
    return fn


def _colmajor(flat: Any, base: int, ptr: int, rows: int, cols: int, ld: int) -> Any:
    """The column-major rows x cols matrix with leading dimension ld at byte address ptr of the bf16 `flat`."""
    import torch

    offset, rem = divmod(ptr - base, 2)
    assert rem == 0 and offset >= 0 and ld >= rows
    assert offset + (cols - 1) * ld + rows <= flat.numel()  # inside the tensor
    return torch.as_strided(flat, (rows, cols), (1, ld), offset)


@pytest.mark.nvcc
def test_each_expert_with_rows_is_one_group_whose_cublas_product_is_its_rows_of_c(library: Path) -> None:
    torch = pytest.importorskip("torch")
    fn = _groups(ctypes.CDLL(str(library)))
    n, k, e = 136, 72, len(OFF_TILE)
    ends = [sum(OFF_TILE[:i + 1]) for i in range(e)]
    rows = ends[-1]
    g = torch.Generator().manual_seed(36)
    a = (torch.rand(rows, k, generator=g) * 2 - 1).to(torch.bfloat16)
    w = ((torch.rand(e, n, k, generator=g) * 2 - 1) * k ** -0.5).to(torch.bfloat16)
    c = torch.full((rows, n), float("nan"), dtype=torch.bfloat16)
    dims = (ctypes.c_int * (DIMS * e))()
    ptrs = (ctypes.c_void_p * (3 * e))()
    groups = fn((ctypes.c_int * e)(*ends), e, rows, n, k, a.data_ptr(), w.data_ptr(), c.data_ptr(), dims, ptrs)
    assert groups == e - OFF_TILE.count(0) == 6
    flat = {"a": a.view(-1), "w": w.view(-1), "c": c.view(-1)}
    base = {x: t.data_ptr() for x, t in flat.items()}
    for i in range(groups):  # cuBLAS's semantics (column-major, op() by transa/transb), emulated in fp64
        ta, tb, m, nn, kk, lda, ldb, ldc = dims[DIMS * i:DIMS * (i + 1)]
        assert (m, kk) == (n, k) and nn == [x for x in OFF_TILE if x][i]
        pa, pb, pc = ptrs[i], ptrs[groups + i], ptrs[2 * groups + i]
        stored_a = _colmajor(flat["w"], base["w"], pa, *((m, kk) if ta == OP_N else (kk, m)), lda)
        stored_b = _colmajor(flat["a"], base["a"], pb, *((kk, nn) if tb == OP_N else (nn, kk)), ldb)
        op_a = stored_a if ta == OP_N else stored_a.t()
        op_b = stored_b if tb == OP_N else stored_b.t()
        _colmajor(flat["c"], base["c"], pc, m, nn, ldc).copy_(op_a.double() @ op_b.double())
    ref = torch.empty(rows, n, dtype=torch.float64)
    for i, end in enumerate(ends):
        start = ends[i - 1] if i else 0
        ref[start:end] = a[start:end].double() @ w[i].double().t()
    err = (c.double() - ref).abs()  # NaN (a row no group wrote) fails the comparison
    assert bool((err <= 2.0 ** -8 * ref.abs() + 1e-6).all()), float(err.max())


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [
    ({"ends": [10, 5, 40]}, "decreasing offsets"), ({"ends": [10, 10, 39]}, "offsets not ending at the rows"),
    ({"ends": [-2, 10, 40]}, "a negative offset"), ({"n": 20}, "n not a multiple of 8"),
    ({"k": 12}, "k not a multiple of 8"), ({"a": (1 << 20) + 8}, "a misaligned a"), ({"experts": 0}, "no experts"),
])
def test_the_groups_refuse_what_the_call_is_not_built_for_and_write_nothing(library: Path, change: dict[str, Any],
                                                                           why: str) -> None:
    fn = _groups(ctypes.CDLL(str(library)))
    args = {"ends": [10, 10, 40], "experts": 3, "rows": 40, "n": 24, "k": 16, "a": 1 << 20, "w": 1 << 21,
            "c": 1 << 22} | change
    dims = (ctypes.c_int * (DIMS * 3))(*[-7] * (DIMS * 3))
    ptrs = (ctypes.c_void_p * 9)()
    ends = args.pop("ends")
    assert fn((ctypes.c_int * 3)(*ends), *args.values(), dims, ptrs) == -1, why
    assert list(dims) == [-7] * (DIMS * 3) and not any(ptrs), why


def _launcher(lib: ctypes.CDLL) -> Any:
    fn = lib.kwiki_moe_cublas_grouped
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                   *[ctypes.c_int] * 4, *[ctypes.c_void_p] * 4]
    fn.restype = ctypes.c_int
    return fn


@pytest.mark.nvcc
@pytest.mark.parametrize(("change", "why"), [({"gemm": None}, "no cuBLAS entry"), ({"handle": None}, "no handle"),
                                             ({"table": (1 << 23) + 4}, "a misaligned pointer table"),
                                             ({"n": 20}, "what the groups refuse")])
def test_the_launcher_refuses_before_any_cuda_call_and_never_calls_cublas(library: Path, change: dict[str, Any],
                                                                          why: str) -> None:
    called: list[int] = []
    gemm = GEMM(lambda *args: called.append(1) or 0)
    args = {"gemm": ctypes.cast(gemm, ctypes.c_void_p).value, "handle": 1 << 12, "stream": None,
            "ends": (ctypes.c_int * 3)(10, 10, 40), "experts": 3, "rows": 40, "n": 24, "k": 16, "a": 1 << 20,
            "w": 1 << 21, "c": 1 << 22, "table": 1 << 23} | change
    assert _launcher(ctypes.CDLL(str(library)))(*args.values()) == -1, why  # a CUDA call here would give a CUDA code
    assert not called, why


@pytest.mark.nvcc
def test_the_launcher_copies_the_pointer_table_before_it_calls_cublas(library: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: the copy to a made-up device address would be attempted")
    called: list[int] = []
    gemm = GEMM(lambda *args: called.append(1) or 0)
    rc = _launcher(ctypes.CDLL(str(library)))(ctypes.cast(gemm, ctypes.c_void_p).value, 1 << 12, None,
                                              (ctypes.c_int * 3)(10, 10, 40), 3, 40, 24, 16, 1 << 20, 1 << 21,
                                              1 << 22, 1 << 23)
    assert rc > 0 and not called  # the copy failed (no GPU here) with a CUDA error, and cuBLAS was never reached


# ---------------------------------------------------------------- on the H200


@pytest.mark.gpu
@pytest.mark.nvcc
def test_cublas_grouped_matches_the_reference_off_the_tile(library: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", str(library))
    mod = _module()
    p = {**mod.GRID[-1], "n": 136, "k": 72}  # the off-tile routing (two empty experts) at a small N and K
    inputs = mod.make_inputs(p, 0, "cuda")
    ref = mod.reference(p, inputs)["c"].double()
    out = mod.make_outputs(p, inputs)
    out["c"].fill_(float("nan"))
    assert mod.load("cublas_grouped")(inputs, out) is None
    torch.cuda.synchronize()
    err = (out["c"].double() - ref).abs()
    assert bool((err <= 0.01 + 2.0 ** -7 * ref.abs()).all()), float(err.max())
