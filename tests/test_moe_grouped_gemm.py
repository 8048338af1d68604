"""moe_grouped_gemm_bf16_sm90a off the GPU: the routing is a function of the params, bad params are refused before
any tensor is made, the torch baselines agree with the reference on the off-tile entry, and both Triton kernels
(in Triton's interpreter, where Triton is installed) agree with an fp64 reference on ragged shapes with empty
experts and N, K off the tile, at small tiles and at the artifact's own tiles."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ARTIFACT = Path(__file__).resolve().parent.parent / "artifacts" / "moe_grouped_gemm_bf16_sm90a"


def _module(name: str, monkeypatch: pytest.MonkeyPatch | None = None) -> ModuleType:
    """The artifact's module `name`, loaded from its file (registered in sys.modules for the test's duration when
    monkeypatch is given: Triton's interpreter finds a kernel's helpers through its module)."""
    spec = importlib.util.spec_from_file_location(f"moe_test_{name}", ARTIFACT / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    if monkeypatch is not None:
        monkeypatch.setitem(sys.modules, spec.name, mod)
    spec.loader.exec_module(mod)
    return mod


def test_routing_is_fixed_skewed_and_sums_to_the_rows() -> None:
    moe = _module("moe")
    for p in moe.GRID:
        c = moe.counts(p)
        assert len(c) == p["experts"] and sum(c) == p["tokens"] * p["topk"]
        assert moe._counts.__wrapped__(p["route"], p["experts"], p["tokens"], p["topk"]) == c  # no hidden state
    zipf = moe.counts(moe.GRID[0])
    assert max(zipf) > 20 * min(zipf) > 0
    off = moe.counts(moe.GRID[-1])
    assert off.count(0) == 2 and all(x % 64 for x in off if x)


@pytest.mark.parametrize("bad", [{"route": "uniform"}, {"topk": 0}, {"n": 1001}, {"experts": 7, "route": "balanced"}])
def test_bad_params_are_refused(bad: dict[str, Any]) -> None:
    moe = _module("moe")
    with pytest.raises(ValueError, match="moe: params"):
        moe.counts({**moe.GRID[0], **bad})


def test_work_counts_useful_flops_and_routed_weights_only() -> None:
    moe = _module("moe")
    p = moe.GRID[-1]
    w = moe.work(p)
    assert w["flops"] == 2.0 * 1159 * 1000 * 1000
    assert w["bytes"] == 2.0 * (1159 * 1000 + 6 * 1000 * 1000 + 1159 * 1000)  # 2 of 8 experts are empty


def test_torch_baselines_match_the_reference_off_tile() -> None:
    torch = pytest.importorskip("torch")
    moe = _module("moe")
    p = {**moe.GRID[-1], "n": 136, "k": 72}  # the off-tile routing at a smaller N and K (a CPU's bf16 GEMM is slow)
    inputs = moe.make_inputs(p, 0, "cpu")
    ref = moe.reference(p, inputs)["c"].double()
    names = ["torch_mm_loop"] + (["torch_grouped_mm"] if hasattr(torch, "_grouped_mm") else [])
    for name in names:
        out = moe.make_outputs(p, inputs)
        out["c"].fill_(float("nan"))
        got = (moe.load(name)(inputs, out) or out)["c"].double()
        assert bool(((got - ref).abs() <= 0.01 + 2.0 ** -7 * ref.abs()).all()), name


def _interpreter_fixes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two gaps of Triton 3.6's interpreter, not of the kernels: it multiplies bf16 tiles as their raw uint16
    bits, and it turns a one-element array into an index with int(), which NumPy 2.4 refuses."""
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter as interp

    dot, patch = interp.InterpreterBuilder.create_dot, interp._patch_lang_tensor

    def widen(h: Any) -> Any:
        if h.dtype.scalar != tl.bfloat16:
            return h
        return interp.TensorHandle(interp._convert_float(h.data, tl.bfloat16, tl.float32, None).view(np.float32),
                                   tl.float32)

    def create_dot(self: Any, a: Any, b: Any, d: Any, *args: Any) -> Any:
        return dot(self, widen(a), widen(b), d, *args)

    def patch_tensor(tensor: Any, scope: Any) -> None:
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    monkeypatch.setattr(interp.InterpreterBuilder, "create_dot", create_dot)
    monkeypatch.setattr(interp, "_patch_lang_tensor", patch_tensor)


CASES = [  # (rows per expert, N, K, tiles): empty experts first, last and between; N and K off the tile
    ((0, 1, 37, 16, 0, 50, 3), 40, 56, {"BM": 16, "BN": 32, "BK": 16}),
    ((33,), 64, 48, {"BM": 16, "BN": 32, "BK": 16}),
    ((20, 0), 24, 24, {"BM": 16, "BN": 16, "BK": 16}),
    ((0, 1, 70, 0, 5), 136, 72, "SMALL"),
    ((0, 130, 3), 200, 72, "BIG"),
]


@pytest.mark.parametrize("kernel", ["grouped_gemm_tiled", "grouped_gemm_tma_persistent"])
def test_triton_kernels_in_the_interpreter(kernel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 from the start (never set here: it would hold for the whole process)")
    pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(sys.modules["triton.language.standard"].cdiv, InterpretedFunction):
        pytest.skip("Triton was imported in this process before TRITON_INTERPRET was set")
    _interpreter_fixes(monkeypatch)
    moe = _module("moe")
    kernels = _module("kernels", monkeypatch)
    for counts, n, k, tiles in CASES:
        cfg = getattr(moe, tiles) if isinstance(tiles, str) else tiles
        e, t = len(counts), sum(counts)
        g = torch.Generator().manual_seed(7)
        a = (torch.rand(t, k, generator=g) * 2 - 1).to(torch.bfloat16)
        w = ((torch.rand(e, n, k, generator=g) * 2 - 1) * k ** -0.5).to(torch.bfloat16)
        ends = [sum(counts[:i + 1]) for i in range(e)]
        c = torch.full((t, n), float("nan"), dtype=torch.bfloat16)
        tile = {"BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "E_POW2": moe.lanes(e)}
        args = (a, w, c, torch.tensor(ends, dtype=torch.int32), t, n, k, e)
        if kernel == "grouped_gemm_tiled":
            grid = ((-(-t // cfg["BM"]) + e) * -(-n // cfg["BN"]),)
            kernels.grouped_gemm_tiled[grid](*args, **tile, EVEN_K=k % cfg["BK"] == 0)
        else:
            kernels.grouped_gemm_tma_persistent[(3,)](*args, **tile, GROUP_M=2, NUM_SMS=3)
        ref = torch.empty(t, n, dtype=torch.float64)
        for i, end in enumerate(ends):
            start = ends[i - 1] if i else 0
            ref[start:end] = a[start:end].double() @ w[i].double().t()
        err = (c.double() - ref).abs()  # NaN (a row never written) fails the comparison
        assert bool((err <= 0.01 + 2.0 ** -7 * ref.abs()).all()), (kernel, counts, n, k, float(err.max()))
