"""moe_grouped_gemm_bf16_sm90a off the GPU: the routing is a function of the params, bad params are refused before
any tensor is made, the torch baselines agree with the reference on the off-tile entries (both layouts), the masked
layout's sampled reference covers exactly the real rows, and both Triton kernels (in Triton's interpreter, where
Triton is installed) agree with an fp64 reference on ragged shapes with empty experts and N, K off the tile, at
small tiles and at the artifact's own tiles, the persistent one in both layouts."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from triton_interpreter import artifact_module

ARTIFACT = Path(__file__).resolve().parent.parent / "artifacts" / "moe_grouped_gemm_bf16_sm90a"


def _module(name: str, monkeypatch: pytest.MonkeyPatch | None = None) -> ModuleType:
    return artifact_module(ARTIFACT, f"{name}.py", f"moe_test_{name}", monkeypatch)


def test_routing_is_fixed_skewed_and_sums_to_the_rows() -> None:
    moe = _module("moe")
    for p in moe.GRID:
        c = moe.counts(p)
        assert len(c) == p["experts"] and sum(c) == p["tokens"] * p["topk"]
        assert moe._counts.__wrapped__(p["route"], p["experts"], p["tokens"], p["topk"]) == c  # no hidden state
    zipf = moe.counts(moe.GRID[0])
    assert max(zipf) > 20 * min(zipf) > 0
    big = [p for p in moe.GRID
           if p["case"] == "prefill" and p["tokens"] * p["topk"] == 65536 and p["dtype"] == moe.BF16]
    assert len(big) == 3 and {p["route"] for p in big} == {"zipf", "balanced"}  # the 8192 tokens top-8
    off = [p for p in moe.GRID if p["case"] == "offtile" and p["dtype"] == moe.BF16]
    assert len(off) == 2 and [moe.masked(p) for p in off] == [False, True]
    for p in off:
        c = moe.counts(p)
        assert c.count(0) == 2 and all(x % 64 for x in c if x)
        assert not moe.masked(p) or (p["capacity"] >= max(c) and p["capacity"] % 64)
    (dec,) = [p for p in moe.GRID if p["case"] == "masked"]
    assert moe.counts(dec) == moe.counts({**dec, "case": "decode"})  # the masked and contiguous decode: one routing


@pytest.mark.parametrize("bad", [{"route": "uniform"}, {"topk": 0}, {"n": 1001}, {"experts": 7, "route": "balanced"},
                                 {"capacity": 100}, {"capacity": 256.0}])
def test_bad_params_are_refused(bad: dict[str, Any]) -> None:
    moe = _module("moe")
    with pytest.raises(ValueError, match="moe: params"):
        moe.counts({**moe.GRID[0], **bad})


def test_work_counts_useful_flops_and_routed_weights_only() -> None:
    moe = _module("moe")
    for p in (q for q in moe.GRID if q["case"] == "offtile" and q["dtype"] == moe.BF16):  # padding is not work
        w = moe.work(p)
        assert w["flops"] == 2.0 * 1159 * 1000 * 1000
        assert w["bytes"] == 2.0 * (1159 * 1000 + 6 * 1000 * 1000 + 1159 * 1000)  # 2 of 8 experts are empty


def test_which_variants_run_in_which_layout() -> None:
    moe = _module("moe")
    runs = {(p["case"], p["tokens"], moe.masked(p)): [v for v in moe.VARIANTS if moe.applies(v, p)] for p in moe.GRID
            if p["dtype"] == moe.BF16}
    fp8 = [(p["scaling"], [v for v in moe.VARIANTS if moe.applies(v, p)]) for p in moe.GRID if p["dtype"] == moe.FP8]
    assert sorted(fp8) == sorted([(sc, list(names)) for sc, names in moe.FP8_VARIANTS.items()] * 2)
    assert runs[("masked", 256, True)] == ["torch_mm_loop", "torch_grouped_mm", "torch_bmm",
                                           "triton_grouped_tma_persistent", "cuda_grouped"]
    assert "cuda_grouped" in runs[("decode", 256, False)]
    assert runs[("offtile", 1159, True)] == runs[("masked", 256, True)]
    assert runs[("offtile", 1159, False)] == ["torch_mm_loop", "cublas_grouped", "torch_grouped_mm", "triton_grouped",
                                              "triton_grouped_tma_persistent", "cuda_grouped"]
    assert runs[("prefill", 2048, False)] == runs[("offtile", 1159, False)]
    assert "triton_grouped" not in runs[("prefill", 8192, False)] + runs[("decode", 256, False)]
    assert runs[("dense", 16384, False)] == ["torch_mm_dense"]


def _masked_rows(moe: ModuleType, p: dict[str, Any]) -> list[int]:
    c, cap = moe.counts(p), p["capacity"]
    return [e * cap + r for e, m in enumerate(c) for r in range(m)]


def test_masked_reference_covers_the_real_rows_only() -> None:
    torch = pytest.importorskip("torch")
    moe = _module("moe")
    (p,) = [q for q in moe.GRID if q["case"] == "offtile" and q["dtype"] == moe.BF16 and moe.masked(q)]
    p = {**p, "n": 24, "k": 40}
    inputs = moe.make_inputs(p, 0, "cpu")
    assert inputs["a"].shape == (8, p["capacity"], 40) and inputs["counts"].tolist() == list(moe.counts(p))
    index, values = moe.reference(p, inputs)["c"]
    rows = _masked_rows(moe, p)
    assert index.tolist() == [r * 24 + j for r in rows for j in range(24)]
    a, w = inputs["a"].reshape(-1, 40).double(), inputs["w"].double()
    want = torch.cat([a[e * p["capacity"]:e * p["capacity"] + m] @ w[e].t() for e, m in enumerate(moe.counts(p))])
    assert torch.allclose(values.double(), want.reshape(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["contiguous", "masked"])
def test_torch_baselines_match_the_reference_off_tile(layout: str) -> None:
    torch = pytest.importorskip("torch")
    moe = _module("moe")
    (p,) = [q for q in moe.GRID if q["case"] == "offtile" and q["dtype"] == moe.BF16
            and moe.masked(q) == (layout == "masked")]
    p = {**p, "n": 136, "k": 72}  # the off-tile routing at a smaller N and K (a CPU's bf16 GEMM is slow)
    inputs = moe.make_inputs(p, 0, "cpu")
    ref = moe.reference(p, inputs)["c"]
    names = [v for v in ("torch_mm_loop", "torch_bmm", "torch_grouped_mm") if moe.applies(v, p)
             and (v != "torch_grouped_mm" or hasattr(torch, "_grouped_mm"))]
    assert names
    for name in names:
        out = moe.make_outputs(p, inputs)
        out["c"].fill_(float("nan"))
        got = (moe.load(name)(inputs, out) or out)["c"].double()
        if isinstance(ref, tuple):  # the masked layout: the real rows only (the padding is no one's output)
            index, want = ref
            got, want = got.reshape(-1)[index], want.double()
        else:
            want = ref.double()
        assert bool(((got - want).abs() <= 0.01 + 2.0 ** -7 * want.abs()).all()), name


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


@pytest.mark.parametrize("kernel", ["grouped_gemm_tiled", "grouped_gemm_tma_persistent", "masked"])
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
        e = len(counts)
        # the masked layout: each expert owns a capacity off every tile (the largest count plus 5 rows)
        cap = max(counts) + 5 if kernel == "masked" else 0
        starts = [i * cap for i in range(e)] if cap else [sum(counts[:i]) for i in range(e)]
        t = e * cap or sum(counts)
        g = torch.Generator().manual_seed(7)
        a = (torch.rand(t, k, generator=g) * 2 - 1).to(torch.bfloat16)  # the padding rows too
        w = ((torch.rand(e, n, k, generator=g) * 2 - 1) * k ** -0.5).to(torch.bfloat16)
        offs = list(counts) if cap else [sum(counts[:i + 1]) for i in range(e)]
        c = torch.full((t, n), float("nan"), dtype=torch.bfloat16)
        tile = {"BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "E_POW2": moe.lanes(e)}
        args = (a, w, c, torch.tensor(offs, dtype=torch.int32), t, n, k, e)
        if kernel == "grouped_gemm_tiled":
            grid = ((-(-t // cfg["BM"]) + e) * -(-n // cfg["BN"]),)
            kernels.grouped_gemm_tiled[grid](*args, **tile, EVEN_K=k % cfg["BK"] == 0)
        else:
            kernels.grouped_gemm_tma_persistent[(3,)](*args, **tile, CAP=cap, GROUP_M=2, NUM_SMS=3)
        ref = torch.full((t, n), float("nan"), dtype=torch.float64)  # the padding stays NaN: never compared
        for i, (start, m) in enumerate(zip(starts, counts, strict=True)):
            ref[start:start + m] = a[start:start + m].double() @ w[i].double().t()
        real = ~ref.isnan()
        assert not cap or bool((c.isnan() | real).all()), "the masked layout's padding was written"
        err = (c.double() - ref).abs()[real]  # NaN (a real row never written) fails the comparison
        assert bool((err <= 0.01 + 2.0 ** -7 * ref[real].abs()).all()), (kernel, counts, n, k, float(err.max()))


@pytest.mark.parametrize(("cap", "tiles"), [(0, "BIG"), (0, "SMALL"), (256, "SMALL")])
def test_the_persistent_kernel_compiles_to_wgmma_fed_by_tma_in_both_layouts(cap: int, tiles: str,
                                                                            tmp_path: Path) -> None:
    """At the timed tiles, contiguous (prefill, decode) and masked (decode): wgmma, TMA loads, no spills. The
    masked layout changes the schedule's arithmetic only, never the main loop."""
    from triton_aot import compile_sm90a

    pytest.importorskip("triton")
    moe = _module("moe")
    kernels = _module("kernels")
    fn, cfg = kernels.grouped_gemm_tma_persistent, getattr(moe, tiles)
    const = {"BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "E_POW2": moe.lanes(64), "CAP": cap,
             "GROUP_M": moe.GROUP_M, "NUM_SMS": 132}
    types = {"a_ptr": "*bf16", "w_ptr": "*bf16", "c_ptr": "*bf16", "offs_ptr": "*i32"}
    sig = {n: "constexpr" if n in const else types.get(n, "i32") for n in fn.arg_names}
    done = compile_sm90a(fn, sig, const, tmp_path, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                         aligned=lambda n: n.endswith("_ptr") or n in ("N", "K"))
    ops = done.ops
    wgmma = f"HGMMA.64x{cfg['BN']}x16.F32.BF16"
    assert any(op.startswith(wgmma) for op in ops), sorted({o for o in ops if "GMMA" in o})
    assert any(op.startswith("UTMALDG") for op in ops)
    assert not any(op.startswith(("STL", "LDL")) for op in ops), "ptxas spilled registers to local memory"


# ---------------------------------------------------------------- fp8, row-wise scales


def test_fp8_inputs_are_row_scaled_codes_and_the_reference_their_dequantized_product() -> None:
    torch = pytest.importorskip("torch")
    moe = _module("moe")
    (p,) = [q for q in moe.GRID if q["case"] == "offtile" and q["dtype"] == moe.FP8 and q["scaling"] == "row"]
    p = {**p, "n": 48, "k": 64}
    i = moe.make_inputs(p, 0, "cpu")
    assert i["a"].dtype == torch.float8_e4m3fn and i["w"].dtype == torch.float8_e4m3fn
    assert i["sa"].shape == (1159,) and i["sw"].shape == (8, 48)
    assert float(i["a"].float().abs().amax(1).min()) == moe.E4M3_MAX  # each row's largest code is +-448
    ref = moe.reference(p, i)["c"]
    e, s = 2, 1  # expert 2's rows start after expert 1's single row
    want = (i["a"][s:s + 200].double() * i["sa"][s:s + 200, None].double()) @ \
        (i["w"][e].double() * i["sw"][e][:, None].double()).t()
    assert torch.allclose(ref[s:s + 200].double(), want, rtol=1e-5, atol=1e-5)
    w = moe.work(p)
    assert w["flops_dtype"] == "fp8" and w["bytes"] == 1159 * 64 + 6 * 48 * 64 + 4.0 * (1159 + 6 * 48) + 2.0 * 1159 * 48


@pytest.mark.parametrize("bad", [{"n": 1000}, {"k": 1000}, {"capacity": 470}, {"dtype": "float16"},
                                 {"scaling": "tensor"}, {"dtype": "bfloat16"}])
def test_fp8_params_off_its_rules_are_refused(bad: dict[str, Any]) -> None:
    moe = _module("moe")
    (p,) = [q for q in moe.GRID if q["case"] == "offtile" and q["dtype"] == moe.FP8 and q["scaling"] == "row"]
    with pytest.raises(ValueError, match="moe: params"):
        moe.counts({**p, **bad})


@pytest.mark.parametrize("scaling", ["row", "block"])
def test_the_fp8_rungs_match_the_dequantized_product_in_the_interpreter(scaling: str) -> None:
    """Off-tile N and K (1008 and 1040 at full size; 176 and 400 here: N's and K's last 128-blocks partial), two empty
    experts, several tiles a program; the interpreter decodes the e4m3 codes exactly and has no limited-precision
    accumulator, so this checks the schedule, the TMA boxes and the scales, not the promotion."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 from the start (never set here: it would hold for the whole process)")
    pytest.importorskip("triton")
    torch = pytest.importorskip("torch")
    from triton_interpreter import load_artifact, patch

    patch()
    moe = load_artifact(ARTIFACT, "moe.py", "moe_fp8_under_test")
    import kernels

    (p,) = [q for q in moe.GRID if q["case"] == "offtile" and q["dtype"] == moe.FP8 and q["scaling"] == scaling]
    p = {**p, "n": 176, "k": 400}
    i = moe.make_inputs(p, 5, "cpu")
    if scaling == "block":  # the scales differ by group and block, so a scale applied to the wrong one shows
        assert len(set(i["sa"][:, 300].tolist())) == 4 and len(set(i["sw"][2].reshape(-1).tolist())) == 8
    c = torch.full((1159, 176), float("nan"), dtype=torch.bfloat16)
    kernel = kernels.grouped_gemm_fp8_rowwise if scaling == "row" else kernels.grouped_gemm_fp8_block
    kernel[(3,)](i["a"], i["w"], i["sa"], i["sw"], c, i["offs"], 1159, 176, 400, 8,
                 BM=64, BN=128, BK=128, E_POW2=moe.lanes(8), GROUP_M=2, NUM_SMS=3)
    ref = moe.reference(p, i)["c"].double()
    err = (c.double() - ref).abs()  # NaN (a row never written) fails
    assert bool((err <= 0.01 + 2 * 2.0 ** -7 * ref.abs()).all()), float(err.max())  # the interpreter's bf16 truncates


@pytest.mark.parametrize("kernel", ["grouped_gemm_fp8_rowwise", "grouped_gemm_fp8_block"])
def test_the_fp8_rungs_compile_to_fp8_wgmma_fed_by_tma_without_spills(kernel: str, tmp_path: Path) -> None:
    from triton_aot import compile_sm90a

    pytest.importorskip("triton")
    moe = _module("moe")
    fn, cfg = getattr(_module("kernels"), kernel), moe.FP8_TILE
    const = {"BM": cfg["BM"], "BN": cfg["BN"], "BK": cfg["BK"], "E_POW2": moe.lanes(64), "GROUP_M": moe.GROUP_M,
             "NUM_SMS": 132}
    types = {"a_ptr": "*fp8e4nv", "w_ptr": "*fp8e4nv", "sa_ptr": "*fp32", "sw_ptr": "*fp32", "c_ptr": "*bf16",
             "offs_ptr": "*i32"}
    sig = {n: "constexpr" if n in const else types.get(n, "i32") for n in fn.arg_names}
    ops = compile_sm90a(fn, sig, const, tmp_path, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                        aligned=lambda n: n.endswith("_ptr") or n in ("N", "K")).ops
    assert any(op.startswith("QGMMA") and "E4M3" in op for op in ops), sorted({o for o in ops if "GMMA" in o})
    assert any(op.startswith("UTMALDG") for op in ops)
    assert not any(op.startswith(("STL", "LDL")) for op in ops), "ptxas spilled registers to local memory"


def test_the_persistent_triton_rungs_are_not_runnable_without_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Their grid is the device's SM count: under a torch without CUDA, load() says the rung is not runnable (before,
    torch's own assertion, 'Torch not compiled with CUDA enabled', ended the variant)."""
    from types import SimpleNamespace

    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setitem(sys.modules, "kernels", ModuleType("kernels"))
    monkeypatch.setitem(sys.modules, "triton", SimpleNamespace(__version__="3.x", set_allocator=lambda alloc: None))
    moe = _module("moe")
    for name in ("triton_grouped_tma_persistent", "triton_grouped_fp8", "triton_grouped_fp8_block"):
        with pytest.raises(RuntimeError, match=f"^{name} is not runnable here: no CUDA device"):
            moe.load(name)
