"""online_softmax_sm90a off the GPU: its params are checked, its inputs are what the orders say (the ascending rows
raise the maximum at every element), and the three Triton kernels (in Triton's interpreter, where Triton is installed)
agree with a float64 softmax on rows no chunk divides, in both orders, at small chunks and at the artifact's own; a
kernel that drops the rescale, or lets a lane that never saw an element make a NaN, fails."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from triton_interpreter import artifact_module

ARTIFACT = Path(__file__).resolve().parent.parent / "artifacts" / "online_softmax_sm90a"


def _module(name: str, monkeypatch: pytest.MonkeyPatch | None = None) -> ModuleType:
    return artifact_module(ARTIFACT, f"{name}.py", f"online_softmax_test_{name}", monkeypatch)


def test_every_shape_holds_the_same_elements_and_both_orders() -> None:
    mod = _module("online_softmax")
    full = [p for p in mod.GRID if p["rows"] * p["cols"] == mod.ELEMENTS]
    assert {(p["order"], p["cols"]) for p in full} == {(o, n) for o in mod.ORDERS for n in mod.LENGTHS}
    off = [p for p in mod.GRID if p not in full]
    assert len(off) == 2 and all(p["cols"] % mod.CHUNK for p in off)


def test_bad_params_are_refused_before_any_tensor() -> None:
    pytest.importorskip("torch")  # make_inputs imports it before it looks at the params
    mod = _module("online_softmax")
    with pytest.raises(ValueError, match="online_softmax: params"):
        mod.make_inputs({**mod.GRID[0], "order": "sorted"}, 0, "cpu")


def test_ascending_rows_raise_the_maximum_everywhere_and_the_reference_is_float64() -> None:
    pytest.importorskip("torch")
    mod = _module("online_softmax")
    p = {"order": "ascending", "rows": 3, "cols": 50, "dtype": "float32"}
    x = mod.make_inputs(p, 1, "cpu")["x"]
    assert bool((x[:, 1:] >= x[:, :-1]).all()) and x.is_contiguous()
    ref = mod.reference(p, {"x": x})["y"]
    assert str(ref.dtype) == "torch.float64" and bool((ref.sum(-1) - 1).abs().max() < 1e-12)


def test_torch_baseline_matches_the_reference() -> None:
    pytest.importorskip("torch")
    mod = _module("online_softmax")
    p = {"order": "random", "rows": 4, "cols": 300, "dtype": "float32"}
    i = mod.make_inputs(p, 0, "cpu")
    got = mod.load("torch_eager")(i, mod.make_outputs(p, i))["y"].double()
    ref = mod.reference(p, i)["y"]
    assert bool(((got - ref).abs() <= 1e-4 * ref.abs()).all())


KERNELS = ["two_pass_kernel", "online_kernel", "online_lanes_kernel"]


def _run(kernels: ModuleType, name: str, x, block: int):  # type: ignore[no-untyped-def]
    import torch

    y = torch.full_like(x, float("nan"))
    getattr(kernels, name)[(x.shape[0],)](x, y, x.shape[1], BLOCK=block)
    return y


def _interpreted(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 from the start (never set here: it would hold for the whole process)")
    pytest.importorskip("triton")
    from triton.runtime.interpreter import InterpretedFunction

    if not isinstance(sys.modules["triton.language.standard"].cdiv, InterpretedFunction):
        pytest.skip("Triton was imported in this process before TRITON_INTERPRET was set")
    return _module("kernels", monkeypatch)


# online_lanes computes -inf - -inf on a lane that never saw an element and then selects 0 in its place (tl.where):
# the GPU's NaN is discarded, while NumPy, under the interpreter, warns about it
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("name", KERNELS)
def test_the_kernels_match_float64_in_the_interpreter(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    kernels = _interpreted(monkeypatch)
    mod = _module("online_softmax")
    for order, rows, cols, block in [("random", 3, 50, 16), ("ascending", 3, 50, 16), ("ascending", 2, 7, 16),
                                      ("random", 2, 5000, mod.CHUNK), ("ascending", 2, 5000, mod.CHUNK)]:
        p = {"order": order, "rows": rows, "cols": cols, "dtype": "float32"}
        x = mod.make_inputs(p, 3, "cpu")["x"] * 8  # a wide range: exponentials from 1 down to e^-60 and below
        ref = torch.softmax(x.double(), -1)
        got = _run(kernels, name, x, block).double()
        assert bool(((got - ref).abs() <= 1e-5 * ref.abs() + 1e-30).all()), (name, order, cols, block)


def test_a_kernel_without_its_rescale_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above can fail: the online kernel with its rescale left out (a copy of it, here) is wrong on
    ascending rows, where every chunk raises the maximum."""
    torch = pytest.importorskip("torch")
    _interpreted(monkeypatch)
    import triton
    import triton.language as tl

    @triton.jit
    def no_rescale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        base = tl.program_id(0).to(tl.int64) * n
        c = tl.arange(0, BLOCK)
        mx = -float("inf")
        d = tl.zeros((BLOCK,), tl.float32)
        for s in range(0, n, BLOCK):
            x = tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf"))
            new = tl.maximum(mx, tl.max(x, 0))
            d = d + tl.exp(x - new)  # the rescale by exp(mx - new) left out
            mx = new
        den = tl.sum(d, 0)
        for s in range(0, n, BLOCK):
            x = tl.load(x_ptr + base + s + c, mask=s + c < n, other=-float("inf"))
            tl.store(y_ptr + base + s + c, tl.exp(x - mx) / den, mask=s + c < n)

    x = torch.arange(40, dtype=torch.float32).reshape(2, 20) / 4
    ref = torch.softmax(x.double(), -1)
    y = torch.full_like(x, float("nan"))
    no_rescale[(2,)](x, y, 20, BLOCK=4)
    assert not bool(((y.double() - ref).abs() <= 1e-5 * ref.abs()).all())


@pytest.mark.parametrize("name", KERNELS)
def test_the_kernels_compile_for_sm90a_without_spills(name: str, tmp_path: Path) -> None:
    """At the artifact's chunk and warps: exponentials on the MUFU unit, no local-memory spill; the per-lane kernel
    keeps its two per-lane vectors (m, d) in registers."""
    from triton_aot import compile_sm90a

    pytest.importorskip("triton")
    mod = _module("online_softmax")
    fn = getattr(_module("kernels"), name)
    sig = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    ops = compile_sm90a(fn, sig, {"BLOCK": mod.CHUNK}, tmp_path, num_warps=8, num_stages=3).ops
    assert any(op.startswith("MUFU.EX2") for op in ops), sorted(set(ops))[:40]
    assert not any(op.startswith(("STL", "LDL")) for op in ops), "ptxas spilled registers to local memory"
