"""stream_k_gemm_sm90a's CUDA rungs (streamk_ws.cu over artifacts/common/kwiki_ws_gemm.cuh), without a GPU.

Rungs 4-6 run the page's 128 x 128 tile on the warp-specialized CTA: data-parallel, Stream-K, and data-parallel
waves plus one Stream-K wave. The plan every CTA walks is exported by the library (kwiki_streamk_plan, the same
Plan the kernels build), and checked here as the kernels would execute it: every tile's k-blocks covered once, a
CTA's partial its first job after whole tiles only and its finish its last, each finisher's peers the CTAs that hold
the rest of its tile in k order; an execution in which finishers wait for their peers completes at every GRID shape
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
CUDA = {"cuda_dp": "ws_dp_kernel", "cuda_streamk": "ws_streamk_kernel", "cuda_streamk_dp": "ws_streamk_kernel"}
WHOLE, PARTIAL, FINISHER, EMPTY = range(4)
BM = BN = 128
BK = 64
# kwiki_streamk_bf16(mode, a, bt, c, work, flags, slots, M, N, K, stream), as streamk_ws.cu declares it
ARGTYPES: list[Any] = [ctypes.c_int, *[ctypes.c_void_p] * 5, *[ctypes.c_int] * 4, ctypes.c_void_p]


def manifest() -> Manifest:
    return load_manifest(ART, REPO)


def _module() -> Any:
    return artifact_module(ART, "stream_k_gemm.py", "kwiki_test_stream_k_cuda")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def test_the_cuda_rungs_climb_above_the_triton_ones_from_the_modules_library() -> None:
    m = manifest()
    assert [(v.name, v.rung) for v in m.variants if v.rung] == [
        ("triton_dp", 1), ("triton_splitk", 2), ("triton_streamk", 3), ("cuda_dp", 4), ("cuda_streamk", 5),
        ("cuda_streamk_dp", 6)]
    assert m.python is not None and m.python.cuda == ["streamk_ws.cu"]
    by_name = {v.name: v for v in m.variants}
    for name, kernel in CUDA.items():
        sass = by_name[name].sass
        assert by_name[name].kernels == [kernel] and sass is not None and {"STL", "LDL"} <= set(sass.forbid)
        assert "HGMMA.64x128x16.F32.BF16 >= 4" in sass.require
    mod = _module()
    assert mod.CUDA_MODES == {"cuda_dp": 0, "cuda_streamk": 1, "cuda_streamk_dp": 2}
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
    odd = torch.zeros(300, 196, dtype=torch.bfloat16)
    assert "K = 196 is not a multiple of 8" in mod.cuda_operands_error(odd, torch.zeros(260, 196, dtype=torch.bfloat16),
                                                                       o["c"])


def test_each_call_hands_the_library_its_mode_operands_and_one_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    cdll = FakeLibrary.of("kwiki_streamk_bf16")
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # load() sizes the workspace for 132 SMs
    monkeypatch.setattr(torch.cuda, "current_stream", lambda: type("Stream", (), {"cuda_stream": 0})())
    monkeypatch.setenv("KWIKI_CUDA_LIBRARY", "libstreamk.so")
    mod = _module()
    monkeypatch.setattr(mod, "WORKSPACE", {})
    seen: list[Any] = []
    monkeypatch.setattr(mod, "cuda_operands_error", lambda a, bt, c: seen.append((a, bt, c)))  # CPU tensors pass here
    p = {"m": 300, "n": 260, "k": 200, "dtype": "bfloat16"}
    i = mod.make_inputs(p, 3, "cpu")
    o = mod.make_outputs(p, i)
    for name, mode in mod.CUDA_MODES.items():
        mod.load(name)(i, o)
        lib = cdll.loaded[-1]
        assert lib.argtypes == ARGTYPES
        work, flags = mod.WORKSPACE[("cpu", 132)]
        assert lib.calls[-1] == (mode, i["a"].data_ptr(), i["bt"].data_ptr(), o["c"].data_ptr(), work.data_ptr(),
                                 flags.data_ptr(), 132, 300, 260, 200, 0)
    assert len(mod.WORKSPACE) == 1 and work.shape == (132, BM * BN) and work.dtype == torch.float32
    assert flags.shape == (132, 2) and flags.dtype == torch.int32 and not flags.any()  # zero before the first launch
    assert [s[1] is i["bt"] for s in seen] == [True] * 3
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
])
def test_each_cuda_rungs_sass_expectation_holds_on_it_and_fails_on_the_other(library, rung, below, words):
    on_other = library_rung_checks(library, manifest().variants, CUDA, rung, below)
    assert any(words in m for m in on_other), on_other


def plan(library: Path, mode: int, m: int, n: int, k: int, sms: int) -> list[tuple[int, ...]]:
    fn = ctypes.CDLL(str(library)).kwiki_streamk_plan
    fn.argtypes = [*[ctypes.c_int] * 5, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
    fn.restype = ctypes.c_int
    count = fn(mode, m, n, k, sms, None, 0)
    assert count >= 0, (mode, m, n, k, sms)
    buf = (ctypes.c_int * (8 * count))()
    assert fn(mode, m, n, k, sms, buf, count) == count
    return [tuple(buf[8 * t:8 * t + 8]) for t in range(count)]


def check_plan(jobs: list[tuple[int, ...]], m: int, n: int, k: int) -> dict[str, Any]:
    """The plan's invariants (asserted), and what it comes to: the CTAs, the roles' counts, each tile's pieces in k
    order, each CTA's jobs in order, and the iterations of an execution in which a finisher waits for its peers."""
    iters, tiles = _cdiv(k, BK), _cdiv(m, BM) * _cdiv(n, BN)
    ctas = max(j[0] for j in jobs) + 1
    by_cta: dict[int, list[tuple[int, ...]]] = {c: [] for c in range(ctas)}
    pieces: dict[tuple[int, int], list[tuple[int, int, int, int]]] = {}
    for cta, a_row, col0, kb0, kb1, role, last, _round in jobs:  # in round order
        if role == EMPTY:
            assert kb0 >= kb1
            continue
        assert 0 <= a_row < m and a_row % BM == 0 and 0 <= col0 < n and col0 % BN == 0
        assert role == (PARTIAL if kb0 > 0 else FINISHER if kb1 < iters else WHOLE)
        assert (last > cta) if role == FINISHER else last == -1
        by_cta[cta].append((a_row, col0, kb0, kb1, role, last))
        pieces.setdefault((a_row, col0), []).append((kb0, kb1, cta, role))
    assert len(pieces) == tiles  # every tile, each piece once, K covered without gap or overlap, in CTA order
    for tile, ps in pieces.items():
        ps.sort()
        assert ps[0][0] == 0 and ps[-1][1] == iters and all(a[1] == b[0] for a, b in itertools.pairwise(ps)), (tile, ps)
        assert [p[2] for p in ps] == sorted(p[2] for p in ps)
        if len(ps) > 1:
            assert ps[0][3] == FINISHER and all(p[3] == PARTIAL for p in ps[1:])
            assert by_cta[ps[0][2]][-1][5] == ps[-1][2] == ps[0][2] + len(ps) - 1  # the peers: the CTAs after it
    for c, js in by_cta.items():  # no CTA waits before it has written what others wait for
        roles = [j[4] for j in js]
        assert roles.count(PARTIAL) <= 1 and roles.count(FINISHER) <= 1, (c, roles)
        if PARTIAL in roles:
            assert all(r == WHOLE for r in roles[:roles.index(PARTIAL)])
        if FINISHER in roles:
            assert roles[-1] == FINISHER
    # the execution: every CTA runs its jobs in order, a job taking its k-blocks; a finisher's store waits for the
    # partials of its peers (written at the end of their first Stream-K job)
    written: dict[int, int] = {}
    for c, js in by_cta.items():
        t = 0
        for _row, _col, kb0, kb1, role, _ in js:
            t += kb1 - kb0
            if role == PARTIAL:
                written[c] = t
    span = 0
    for c, js in by_cta.items():
        t = sum(j[3] - j[2] for j in js)
        if js and js[-1][4] == FINISHER:
            t = max([t] + [written[p] for p in range(c + 1, js[-1][5] + 1)])
        span = max(span, t)
    return {"ctas": ctas, "roles": [sum(1 for j in jobs if j[5] == r) for r in range(4)], "span": span,
            "pieces": pieces, "by_cta": by_cta, "iters": iters, "tiles": tiles}


@pytest.mark.nvcc
def test_every_grid_shape_is_covered_once_and_finishes_in_the_waves_the_arithmetic_promises(library):
    mod = _module()
    for p in mod.GRID:
        m, n, k = p["m"], p["n"], p["k"]
        iters, tiles = _cdiv(k, BK), _cdiv(m, BM) * _cdiv(n, BN)
        dp = check_plan(plan(library, 0, m, n, k, 132), m, n, k)
        assert dp["roles"][PARTIAL] == dp["roles"][FINISHER] == 0 and dp["ctas"] == min(tiles, 132)
        assert dp["span"] == _cdiv(tiles, 132) * iters  # ceil(T / W) waves of whole tiles
        sk = check_plan(plan(library, 1, m, n, k, 132), m, n, k)
        assert sk["ctas"] == 132 and sk["span"] == _cdiv(tiles * iters, 132)  # an even share; no finisher waits
        hy = check_plan(plan(library, 2, m, n, k, 132), m, n, k)
        assert hy["span"] <= sk["span"] + 1, p
        if tiles % 132 == 0 or tiles < 2 * 132:  # whole waves: data-parallel; under two waves: Stream-K
            assert hy["roles"] == (dp["roles"] if tiles % 132 == 0 else sk["roles"]), p
    at = check_plan(plan(library, 2, 4096, 4096, 4096, 132), 4096, 4096, 4096)  # 7.76 waves: 6 whole, then 1.76
    assert at["roles"][WHOLE] >= 6 * 132 and at["span"] == 6 * 64 + _cdiv(232 * 64, 132)
    worst = check_plan(plan(library, 0, 1792, 1280, 4096, 132), 1792, 1280, 4096)["span"]
    assert worst / check_plan(plan(library, 1, 1792, 1280, 4096, 132), 1792, 1280, 4096)["span"] == 128 / 68  # 1.88x


@pytest.mark.nvcc
@pytest.mark.parametrize(("m", "n", "k", "sms"), [(200, 130, 2504, 132), (1000, 700, 1000, 132), (300, 260, 200, 7),
                                                  (130, 130, 72, 5), (2100, 2052, 264, 132), (129, 258, 64, 3)])
def test_the_fix_up_replayed_on_the_host_gives_the_exact_product(library, m, n, k, sms):
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(m * n + k)
    a = rng.integers(-3, 4, size=(m, k)).astype(np.float64)  # small integers: every sum exact, in any order
    bt = rng.integers(-3, 4, size=(n, k)).astype(np.float64)
    for mode in (0, 1, 2):
        p = check_plan(plan(library, mode, m, n, k, sms), m, n, k)
        c = np.full((m, n), np.nan)
        slots: dict[int, Any] = {}
        done: list[tuple[int, int, int]] = []
        for first in (True, False):  # partials first (a CTA writes its one partial before it waits), then the rest
            for cta, js in p["by_cta"].items():
                for a_row, col0, kb0, kb1, role, _ in js:
                    if (role == PARTIAL) != first:
                        continue
                    part = a[a_row:a_row + BM, kb0 * BK:kb1 * BK] @ bt[col0:col0 + BN, kb0 * BK:kb1 * BK].T
                    if role == PARTIAL:
                        assert cta not in slots
                        slots[cta] = part
                        continue
                    done.append((cta, a_row, col0))
                    if role == FINISHER:
                        for peer in range(cta + 1, js[-1][5] + 1):
                            part = part + slots.pop(peer)  # each slot read once, by its tile's finisher
                    assert np.isnan(c[a_row:a_row + BM, col0:col0 + BN]).all()  # stored once
                    c[a_row:a_row + BM, col0:col0 + BN] = part
        assert slots == {} and len(done) == p["tiles"]
        assert np.array_equal(c, a @ bt.T), (mode, m, n, k, sms)


@pytest.mark.nvcc
def test_the_launcher_refuses_what_the_kernels_are_not_built_for_before_any_cuda_call(library):
    buf = (ctypes.c_char * 64)()
    aligned = (ctypes.addressof(buf) + 15) // 16 * 16
    ok = {"mode": 1, "a": aligned, "bt": aligned, "c": aligned, "work": aligned, "flags": aligned, "slots": 132,
          "m": 256, "n": 256, "k": 256, "stream": None}
    for bad in ({"mode": 3}, {"k": 260}, {"n": 255}, {"m": 0}, {"a": aligned + 8}, {"c": aligned + 2},
                {"work": None}, {"flags": aligned + 2}, {"slots": 0}, {"bt": None}):
        assert launcher_result(library, "kwiki_streamk_bf16", ARGTYPES, {**ok, **bad}) == -1, bad
    dp = {**ok, "mode": 0, "work": None, "flags": None, "slots": 0}  # data-parallel takes no workspace
    assert launcher_result(library, "kwiki_streamk_bf16", ARGTYPES, dp) not in (0, -1)  # a CUDA error: no GPU here
