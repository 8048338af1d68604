"""stream_k_gemm_sm90a's CUDA rungs (streamk_ws.cu over artifacts/common/kwiki_ws_gemm.cuh), without a GPU.

Rungs 4-6 run the page's 128 x 128 tile on the warp-specialized CTA: data-parallel, Stream-K, and data-parallel
waves plus one Stream-K wave. The plan every CTA walks is exported by the library (kwiki_streamk_plan, the same
Plan the kernels build), and checked here as the kernels would execute it: every tile's k-blocks covered once, a
CTA's partial its first job after whole tiles only and its finish its last, each finisher's peers the CTAs that hold
the rest of its tile in k order, Stream-K's ranges walked backward (a range that crosses a tile start begins at its
k-block 0, in step with the others); an execution in which finishers wait for their peers completes at every GRID shape
(no deadlock) in the iterations the wave arithmetic promises; and the fix-up, replayed in float64 on integer inputs,
gives the exact product. The module hands the library what it was built for (refused by name before any CUDA call
otherwise), the launcher refuses the rest itself, and each rung's SASS expectation holds on its kernel and names what
it adds on the rung below. The kernels run only on an H200 (kwiki verify), where the harness checks them against an
fp64 product, off the tile included, and compute-sanitizer's memcheck runs them at the manifest's sanitize entries."""

from __future__ import annotations

import ctypes
import itertools
from pathlib import Path
from typing import Any

import pytest
from cuda_artifact import FakeLibrary, build_library, claimed_at_one_entry, launcher_result, library_rung_checks
from triton_interpreter import artifact_module

from kwiki.wiki.manifest import Manifest, load_manifest

REPO = Path(__file__).resolve().parent.parent
ART = REPO / "artifacts" / "stream_k_gemm_sm90a"
PAGE = REPO / "wiki" / "nvidia" / "techniques" / "split-k-stream-k.md"
CUDA = {"cuda_dp": "ws_dp_kernel", "cuda_splitk": "ws_splitk_kernel", "cuda_streamk": "ws_streamk_kernel",
        "cuda_streamk_dp": "ws_streamk_kernel", "cuda_dp_wide": "ws_dp_wide_kernel",
        "cuda_splitk_wide": "ws_splitk_wide_kernel", "cuda_streamk_wide": "ws_streamk_wide_kernel"}
DP, STREAM_K, HYBRID, SPLIT_K = range(4)
WHOLE, PARTIAL, FINISHER, EMPTY = range(4)
BM = 128
BK = 64
# kwiki_streamk_bf16(mode, bn, splits, a, bt, c, work, flags, slots, M, N, K, stream), as streamk_ws.cu declares it
ARGTYPES: list[Any] = [*[ctypes.c_int] * 3, *[ctypes.c_void_p] * 5, ctypes.c_longlong, *[ctypes.c_int] * 3,
                       ctypes.c_void_p]


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    return artifact_module(ART, "stream_k_gemm.py", "kwiki_test_stream_k_cuda")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_the_cuda_rungs_climb_above_the_triton_ones_from_the_modules_library() -> None:
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants if v.rung] == [
        ("triton_dp", 1), ("triton_splitk", 2), ("triton_streamk", 3), ("cuda_dp", 4), ("cuda_splitk", 5),
        ("cuda_streamk", 6), ("cuda_streamk_dp", 7), ("cuda_splitk_wide", 8), ("cuda_streamk_wide", 9)]
    assert m.python is not None and m.python.cuda == ["streamk_ws.cu"]
    by_name = {v.name: v for v in m.variants}
    for name, kernel in CUDA.items():
        sass = by_name[name].sass
        assert by_name[name].kernels == [kernel] and sass is not None and {"STL", "LDL"} <= set(sass.forbid)
        assert f"HGMMA.64x{256 if 'wide' in name else 128}x16.F32.BF16 >= 4" in sass.require
    mod = _module()
    assert mod.CUDA_MODES == {"cuda_dp": (DP, 128), "cuda_splitk": (SPLIT_K, 128), "cuda_streamk": (STREAM_K, 128),
                              "cuda_streamk_dp": (HYBRID, 128), "cuda_dp_wide": (DP, 256),
                              "cuda_splitk_wide": (SPLIT_K, 256), "cuda_streamk_wide": (STREAM_K, 256)}
    # the launch the module asks for: split-K's slices by the Triton rung's rule on the rung's own tile
    assert mod.cuda_launch("cuda_splitk", 1792, 1280, 4096, 132) == (SPLIT_K, 128, 4, 140 * 3)
    assert mod.cuda_launch("cuda_splitk_wide", 1024, 1024, 32768, 132) == (SPLIT_K, 256, 4, 32 * 3 * 2)
    assert mod.cuda_launch("cuda_splitk", 1024, 1024, 32768, 132) == (SPLIT_K, 128, 2, 64)
    assert mod.cuda_launch("cuda_streamk", 1792, 1280, 4096, 132) == (STREAM_K, 128, 1, 132)
    assert mod.cuda_launch("cuda_dp_wide", 1792, 1280, 4096, 132) == (DP, 256, 1, 0)
    assert mod.cuda_launch("cuda_streamk_wide", 1024, 1024, 32768, 132) == (STREAM_K, 256, 1, 264)  # 2 units a CTA
    assert all(mod.applies(name, p) for name in CUDA for p in mod.GRID)  # every shape, the off-tile one included
    assert not mod.applies("cuda_streamk", {"m": 200, "n": 130, "k": 2500, "dtype": "bfloat16"})  # K % 8: TMA rows
    assert not mod.applies("cuda_dp", {"m": 200, "n": 131, "k": 2504, "dtype": "bfloat16"})     # odd N: bf16 pairs
    assert mod.applies("triton_streamk", {"m": 200, "n": 131, "k": 2500, "dtype": "bfloat16"})
    sanitized = [p for p in m.sanitize.params if all(mod.applies(n, p) for n in CUDA)]
    assert len(sanitized) == len(m.sanitize.params)  # memcheck runs every CUDA rung at every sanitize entry


def test_the_page_claims_select_the_cuda_rungs_at_one_grid_entry_each() -> None:
    mod = _module()
    assert claimed_at_one_entry(PAGE, mod.GRID, mod.applies, CUDA) == set(CUDA)


def test_operands_the_kernels_are_not_built_for_are_named() -> None:
    torch = pytest.importorskip("torch")
    mod = _module()
    p = {"m": 300, "n": 260, "k": 200, "dtype": "bfloat16"}
    i = mod.make_inputs(p, 3, "cpu")
    o = mod.make_outputs(p, i)
    assert torch.equal(i["bt"], i["b"].t()) and i["bt"].is_contiguous()
    assert mod.cuda_operands_error(i["a"], i["bt"], o["c"]) == (
        "a is on cpu, not on a CUDA device; bt is on cpu, not on a CUDA device; c is on cpu, not on a CUDA device")
    assert "not [M, K], [N, K], [M, N]" in mod.cuda_operands_error(i["a"], i["b"], o["c"])
    assert "c is torch.float32" in mod.cuda_operands_error(i["a"], i["bt"], o["c"].float())
    assert "bt is not contiguous" in mod.cuda_operands_error(i["a"], i["b"].t(), o["c"])
    shifted = torch.empty(300 * 260 + 1, dtype=torch.bfloat16)[1:].view(300, 260)  # 2 bytes off
    assert "c is not 4-byte aligned" in mod.cuda_operands_error(i["a"], i["bt"], shifted)
    odd = torch.zeros(300, 196, dtype=torch.bfloat16)
    assert "K = 196 is not a multiple of 8" in mod.cuda_operands_error(odd, torch.zeros(260, 196, dtype=torch.bfloat16),
                                                                       o["c"])


def test_each_call_hands_the_library_its_launch_operands_and_one_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    cdll = FakeLibrary.of("kwiki_streamk_bf16")
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # load() sizes the launches for 132 SMs
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("Stream", (), {"cuda_stream": 0})())
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", "libstreamk.so")
    mod = _module()
    monkeypatch.setattr(mod, "WORKSPACE", {})
    seen: list[Any] = []
    monkeypatch.setattr(mod, "cuda_operands_error", lambda a, bt, c: seen.append((a, bt, c)))  # CPU tensors pass here
    p = {"m": 300, "n": 260, "k": 2048, "dtype": "bfloat16"}  # 3 x 3 tiles of 32 k-blocks (3 x 2 at 128 x 256)
    i = mod.make_inputs(p, 3, "cpu")
    o = mod.make_outputs(p, i)
    works = []
    for name, (mode, bn) in mod.CUDA_MODES.items():
        mod.load(name)(i, o)
        lib = cdll.loaded[-1]
        assert lib.argtypes == ARGTYPES
        work, flags = mod.WORKSPACE["cpu"]
        splits = {"cuda_splitk": 4, "cuda_splitk_wide": 4}.get(name, 1)  # 9 or 6 tiles: 4 slices of 8 k-blocks
        assert lib.calls[-1] == (mode, bn, splits, i["a"].data_ptr(), i["bt"].data_ptr(), o["c"].data_ptr(),
                                 work.data_ptr(), flags.data_ptr(), work.shape[0], 300, 260, 2048, 0), name
        works.append(work.shape[0])
    assert works == [132] * 6 + [264]  # Stream-K's 132 slots (split-K's 27 and 36 fit), then 132 wide ones
    assert work.dtype == torch.float32 and work.shape[1] == 128 * 128
    assert flags.shape == (264, 2) and flags.dtype == torch.int32 and not flags.any()  # zero before the first launch
    big = {"m": 1792, "n": 1280, "k": 4096, "dtype": "bfloat16"}
    i2 = mod.make_inputs(big, 3, "cpu")
    mod.load("cuda_splitk")(i2, mod.make_outputs(big, i2))  # 140 tiles x 3 slices past the first: it grows
    assert mod.WORKSPACE["cpu"][0].shape[0] == 420 and cdll.loaded[-1].calls[-1][8] == 420
    assert len(seen) == len(mod.CUDA_MODES) + 1 and all(s[1] is i["bt"] for s in seen[:-1])
    monkeypatch.setattr(mod, "cuda_operands_error", lambda a, bt, c: "a is on cpu")
    with pytest.raises(ValueError, match=r"stream_k_gemm\.py\): cuda_streamk: a is on cpu"):
        mod.load("cuda_streamk")(i, o)
    assert cdll.loaded[-1].calls == []  # refused before the library
    monkeypatch.delenv("KWIKI_CUDA_LIBRARY")
    with pytest.raises(RuntimeError, match="not runnable here: no \\$KWIKI_CUDA_LIBRARY"):
        mod.load("cuda_dp")


# ---------------------------------------------------------------- compiled (nvcc) as kwiki builds the library


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory, ART)


@pytest.mark.nvcc
@pytest.mark.parametrize(("rung", "below", "words"), [
    ("cuda_streamk", "cuda_dp", "require 'REDG.E.ADD.STRONG.GPU'"),  # the fix-up's release, missing without it
    ("cuda_dp", "cuda_streamk", "forbid 'REDG'"),                    # and present in the Stream-K kernel only
    ("cuda_splitk", "cuda_dp", "require 'STG.E.128.STRONG.GPU >= 16'"),  # the partials, to L2
    ("cuda_splitk_wide", "cuda_splitk", "require 'HGMMA.64x256x16.F32.BF16 >= 4'"),  # the wide tile
    ("cuda_streamk_wide", "cuda_dp_wide", "require 'REDG.E.ADD.STRONG.GPU'"),
])
def test_each_cuda_rungs_sass_expectation_holds_on_it_and_fails_on_the_other(library, rung, below, words):
    on_other = library_rung_checks(library, manifest().variants, CUDA, rung, below)
    assert any(words in m for m in on_other), on_other


def plan(library: Path, mode: int, m: int, n: int, k: int, sms: int, bn: int = 128,
         splits: int = 1) -> tuple[list[tuple[int, ...]], int]:
    """The jobs of a launch as the library exports them (9 ints each), and the 128 x 128 slots it takes."""
    fn = ctypes.CDLL(str(library)).kwiki_streamk_plan
    fn.argtypes = [*[ctypes.c_int] * 7, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.POINTER(ctypes.c_longlong)]
    fn.restype = ctypes.c_int
    slots = ctypes.c_longlong(-1)
    count = fn(mode, bn, splits, m, n, k, sms, None, 0, ctypes.byref(slots))
    assert count >= 0, (mode, bn, splits, m, n, k, sms)
    buf = (ctypes.c_int * (9 * count))()
    assert fn(mode, bn, splits, m, n, k, sms, buf, count, ctypes.byref(slots)) == count
    return [tuple(buf[9 * t:9 * t + 9]) for t in range(count)], slots.value


def check_plan(launch: tuple[list[tuple[int, ...]], int], m: int, n: int, k: int, bn: int = 128) -> dict[str, Any]:
    """The plan's invariants (asserted), and what it comes to: the CTAs, the roles' counts, each CTA's jobs in order,
    and the k-blocks of an execution in which each job takes its k-blocks and a finisher waits for its slots."""
    jobs, slots = launch
    iters, tiles = _cdiv(k, BK), _cdiv(m, BM) * _cdiv(n, bn)
    ctas = max(j[0] for j in jobs) + 1
    by_cta: dict[int, list[tuple[int, ...]]] = {c: [] for c in range(ctas)}
    pieces: dict[tuple[int, int], list[tuple[int, ...]]] = {}
    written: set[int] = set()
    for cta, a_row, col0, kb0, kb1, role, first, last, _round in jobs:  # in round order
        if role == EMPTY:
            assert kb0 >= kb1
            continue
        assert 0 <= a_row < m and a_row % BM == 0 and 0 <= col0 < n and col0 % bn == 0
        assert (role == WHOLE) == (kb0 == 0 and kb1 == iters)  # split tiles: a finisher and partials, below
        if role == PARTIAL:  # each slot written once, inside the workspace the launch asks for
            assert first not in written and 0 <= first and (first + 1) * bn // 128 <= slots and last == -1
            written.add(first)
        else:
            assert (first <= last) if role == FINISHER else first == last == -1
        by_cta[cta].append((a_row, col0, kb0, kb1, role, first, last))
        pieces.setdefault((a_row, col0), []).append((kb0, kb1, cta, role, first, last))
    assert len(pieces) == tiles  # every tile, each piece once, K covered without gap or overlap
    for tile, ps in pieces.items():
        ps.sort()
        assert ps[0][0] == 0 and ps[-1][1] == iters and all(a[1] == b[0] for a, b in itertools.pairwise(ps)), (tile, ps)
        if len(ps) > 1:  # one finisher, the tile's first piece (split-K) or its last (Stream-K), adds exactly the
            # tile's other pieces' slots, in k order
            fin = ps[0] if ps[0][3] == FINISHER else ps[-1]
            others = [p for p in ps if p is not fin]
            assert fin[3] == FINISHER and all(p[3] == PARTIAL for p in others), (tile, ps)
            assert list(range(fin[4], fin[5] + 1)) == [p[4] for p in others], (tile, ps)
    # the execution: every CTA runs its jobs in order; a finisher's store waits for its slots' partials; no CTA may
    # wait on a slot that is never written (a deadlock), whatever the order the CTAs get to run in
    done_at: dict[int, int] = {}
    clock = dict.fromkeys(by_cta, 0)
    at = dict.fromkeys(by_cta, 0)
    progress = True
    while progress:
        progress = False
        for c, js in by_cta.items():
            while at[c] < len(js):
                _row, _col, kb0, kb1, role, first, last = js[at[c]]
                t = clock[c] + kb1 - kb0
                if role == FINISHER:
                    if any(sl not in done_at for sl in range(first, last + 1)):
                        break
                    t = max([t] + [done_at[sl] for sl in range(first, last + 1)])
                if role == PARTIAL:
                    done_at[first] = t
                clock[c], at[c], progress = t, at[c] + 1, True
    assert all(at[c] == len(js) for c, js in by_cta.items()), "a finisher waits for a slot never written"
    return {"ctas": ctas, "roles": [sum(1 for j in jobs if j[5] == r) for r in range(4)], "span": max(clock.values()),
            "by_cta": by_cta, "tiles": tiles, "slots": slots}


@pytest.mark.nvcc
def test_every_grid_shape_is_covered_once_and_finishes_in_the_waves_the_arithmetic_promises(library):
    mod = _module()
    for p in mod.GRID:
        m, n, k = p["m"], p["n"], p["k"]
        iters, tiles = _cdiv(k, BK), _cdiv(m, BM) * _cdiv(n, 128)
        dp = check_plan(plan(library, DP, m, n, k, 132), m, n, k)
        assert dp["roles"][PARTIAL] == dp["roles"][FINISHER] == dp["slots"] == 0 and dp["ctas"] == min(tiles, 132)
        assert dp["span"] == _cdiv(tiles, 132) * iters  # ceil(T / W) waves of whole tiles
        sk = check_plan(plan(library, STREAM_K, m, n, k, 132), m, n, k)
        assert sk["ctas"] == sk["slots"] == 132 and sk["span"] == _cdiv(tiles * iters, 132)  # an even share
        hy = check_plan(plan(library, HYBRID, m, n, k, 132), m, n, k)
        assert hy["span"] <= sk["span"] + 1, p
        if tiles % 132 == 0 or tiles < 2 * 132:  # whole waves: data-parallel; under two waves: Stream-K
            assert hy["roles"] == (dp["roles"] if tiles % 132 == 0 else sk["roles"]), p
        for name, bn in (("cuda_splitk", 128), ("cuda_splitk_wide", 256)):
            _, _, s, slots = mod.cuda_launch(name, m, n, k, 132)  # the module's launch, as the library plans it
            sp = check_plan(plan(library, SPLIT_K, m, n, k, 132, bn, s), m, n, k, bn)
            t = _cdiv(m, BM) * _cdiv(n, bn)
            assert sp["slots"] == slots and sp["roles"][PARTIAL] == t * (s - 1) and sp["roles"][FINISHER] == t * (s > 1)
            assert sp["span"] >= _cdiv(t * s, 132) * _cdiv(iters, s)
        wide = check_plan(plan(library, STREAM_K, m, n, k, 132, 256), m, n, k, 256)
        t = _cdiv(m, BM) * _cdiv(n, 256)
        assert wide["slots"] == 2 * wide["ctas"] == 2 * min(132, t * iters)
        assert wide["span"] == _cdiv(t * iters, wide["ctas"])
    at = check_plan(plan(library, HYBRID, 4096, 4096, 4096, 132), 4096, 4096, 4096)  # 7.76 waves: 6 whole, then 1.76
    assert at["roles"][WHOLE] >= 6 * 132 and at["span"] == 6 * 64 + _cdiv(232 * 64, 132)
    worst = check_plan(plan(library, DP, 1792, 1280, 4096, 132), 1792, 1280, 4096)["span"]
    assert worst / check_plan(plan(library, STREAM_K, 1792, 1280, 4096, 132), 1792, 1280, 4096)["span"] == 128 / 68
    long_k = [check_plan(plan(library, mode, 1024, 1024, 32768, 132, 256, 4), 1024, 1024, 32768, 256)["span"]
              for mode in (DP, SPLIT_K, STREAM_K)]
    assert long_k == [512, 128, 125]  # 32 wide tiles: one wave of 512 k-blocks, 128 quarter-tiles, or an even share


@pytest.mark.nvcc
def test_stream_k_walks_each_range_backward_so_that_ranges_crossing_a_tile_start_begin_in_step(library):
    """A CTA's first Stream-K piece is the one holding its range's last iteration: where the range crosses a tile
    start, that piece starts at k-block 0, so those CTAs read their panels' first k-blocks together (L2 reuse). The
    piece that ends a split tile finishes it, the pieces before it, each its CTA's first, hand over partials."""
    mod = _module()
    for p in [*mod.GRID, {"m": 1024, "n": 1024, "k": 32768}]:
        m, n, k = p["m"], p["n"], p["k"]
        iters = _cdiv(k, BK)
        for bn in (128, 256):
            sk = check_plan(plan(library, STREAM_K, m, n, k, 132, bn), m, n, k, bn)
            for js in sk["by_cta"].values():
                assert all(j[4] != PARTIAL for j in js[1:]) and all(j[4] != FINISHER for j in js[:-1]), js
                assert all(j[3] == iters for j in js if j[4] == FINISHER)  # a finisher ends its tile
                assert len(js) == 1 or js[0][2] == 0, js  # a range that crosses a tile start: a head first
            if sk["tiles"] >= sk["ctas"]:  # every range holds a tile start: every CTA starts at k-block 0
                assert all(js[0][2] == 0 for js in sk["by_cta"].values()), p


@pytest.mark.nvcc
@pytest.mark.parametrize(("m", "n", "k", "sms"), [(200, 130, 2504, 132), (1000, 700, 1000, 132), (300, 260, 200, 7),
                                                  (130, 130, 72, 5), (2100, 2052, 264, 132), (129, 258, 64, 3),
                                                  (1000, 1000, 2000, 9)])
def test_the_fix_up_replayed_on_the_host_gives_the_exact_product(library, m, n, k, sms):
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(m * n + k)
    a = rng.integers(-3, 4, size=(m, k)).astype(np.float64)  # small integers: every sum exact, in any order
    bt = rng.integers(-3, 4, size=(n, k)).astype(np.float64)
    launches = [(mode, 128, 1) for mode in (DP, STREAM_K, HYBRID)] + [(STREAM_K, 256, 1)]
    launches += [(SPLIT_K, bn, s) for bn in (128, 256) for s in (2, 3, 4) if s <= min(sms, _cdiv(k, BK))]
    for mode, bn, splits in launches:
        p = check_plan(plan(library, mode, m, n, k, sms, bn, splits), m, n, k, bn)
        c = np.full((m, n), np.nan)
        slots: dict[int, Any] = {}
        stored = 0
        for first_pass in (True, False):  # partials first (written before any wait for them), then the rest
            for js in p["by_cta"].values():
                for a_row, col0, kb0, kb1, role, first, last in js:
                    if (role == PARTIAL) != first_pass:
                        continue
                    part = a[a_row:a_row + BM, kb0 * BK:kb1 * BK] @ bt[col0:col0 + bn, kb0 * BK:kb1 * BK].T
                    if role == PARTIAL:
                        slots[first] = part
                        continue
                    for sl in range(first, last + 1) if role == FINISHER else ():
                        part = part + slots.pop(sl)  # each slot read once, by its tile's finisher
                    assert np.isnan(c[a_row:a_row + BM, col0:col0 + bn]).all()  # stored once
                    c[a_row:a_row + BM, col0:col0 + bn] = part
                    stored += 1
        assert slots == {} and stored == p["tiles"]
        assert np.array_equal(c, a @ bt.T), (mode, bn, splits, m, n, k, sms)


@pytest.mark.nvcc
def test_split_k_is_refused_where_a_finisher_could_wait_for_a_slice_behind_it(library):
    fn = ctypes.CDLL(str(library)).kwiki_streamk_plan
    fn.argtypes = [*[ctypes.c_int] * 7, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.POINTER(ctypes.c_longlong)]
    fn.restype = ctypes.c_int
    slots = ctypes.c_longlong()
    # 9 tiles x 4 slices on 3 CTAs: more slices than CTAs, and more units, so a tile's slices could queue on its own
    assert fn(SPLIT_K, 128, 4, 384, 384, 1024, 3, None, 0, ctypes.byref(slots)) == -1
    assert fn(SPLIT_K, 128, 3, 384, 384, 1024, 3, None, 0, ctypes.byref(slots)) > 0   # S = CTAs: deadlock-free
    assert fn(SPLIT_K, 128, 4, 128, 128, 1024, 5, None, 0, ctypes.byref(slots)) > 0   # 4 units on 4 CTAs: one round
    check_plan(plan(library, SPLIT_K, 384, 384, 1024, 3, 128, 3), 384, 384, 1024)  # and it finishes
    check_plan(plan(library, SPLIT_K, 384, 128, 1024, 9, 128, 4), 384, 128, 1024)  # a tile's slices across rounds


@pytest.mark.nvcc
def test_the_launcher_refuses_what_the_kernels_are_not_built_for_before_any_cuda_call(library):
    buf = (ctypes.c_char * 64)()
    aligned = (ctypes.addressof(buf) + 15) // 16 * 16
    ok = {"mode": STREAM_K, "bn": 128, "splits": 1, "a": aligned, "bt": aligned, "c": aligned, "work": aligned,
          "flags": aligned, "slots": 132, "m": 256, "n": 256, "k": 256, "stream": None}
    for bad in ({"mode": 4}, {"bn": 192}, {"mode": HYBRID, "bn": 256}, {"k": 260}, {"n": 255}, {"m": 0},
                {"a": aligned + 8}, {"c": aligned + 2}, {"work": None}, {"flags": aligned + 2}, {"bt": None},
                {"mode": SPLIT_K, "splits": 0}, {"mode": SPLIT_K, "splits": 5}):  # 4 k-blocks: at most 4 slices
        assert launcher_result(library, "kwiki_streamk_bf16", ARGTYPES, {**ok, **bad}) == -1, bad
    for good in ({"mode": DP, "work": None, "flags": None, "slots": 0}, {"mode": SPLIT_K, "bn": 256, "splits": 4},
                 {}):  # past its checks, a launcher reaches the device: a CUDA error here
        assert launcher_result(library, "kwiki_streamk_bf16", ARGTYPES, {**ok, **good}) not in (0, -1), good
