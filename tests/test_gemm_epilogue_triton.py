"""gemm_epilogue_sm90a's Triton kernel under Triton's CPU interpreter, every epilogue, against the module's fp32
reference and a GELU written here in fp64.

Off-tile M and N (N = 272: a partial 128 x 256 tile and a partial 1 x 128 group of 16 columns), K = 80 (a partial
BK = 32 step), outputs poisoned first, inputs unchanged afterwards, 4 persistent programs for 6 tiles (two programs
walk two tiles, so the running amax and its atomic across programs are exercised). The interpreter's tl.dot
multiplies bf16 operands' raw bits (Triton 3.6): A and Bt are given as fp32 holding the same bf16 values. Skipped
without Triton.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from triton_interpreter import load_artifact, patch

if os.environ.get("TRITON_INTERPRET") != "1":  # never set here: Triton would stay interpreted for the process
    pytest.skip("needs TRITON_INTERPRET=1 from the start", allow_module_level=True)
torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "gemm_epilogue_sm90a"
sys.path.insert(0, str(ARTIFACT))
kernels = importlib.import_module("kernels")  # the artifact's kernels (one artifact per process: see CONTRIBUTING)


@triton.jit
def _gelu_probe(x_ptr, bias_ptr, y_ptr, N, BLOCK: tl.constexpr):
    """The epilogue's _bias_gelu on one row of fp32 x, stored in fp32 (no bf16 rounding)."""
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols[None, :], mask=cols[None, :] < N, other=0.0)
    tl.store(y_ptr + cols[None, :], kernels._bias_gelu(x, bias_ptr, cols, N), mask=cols[None, :] < N)


def _patch_fp8_cast() -> None:
    """The interpreter's defect only these kernels meet, beside triton_interpreter.patch's: its fp32 -> e4m3
    rounding drops the carry of a mantissa that rounds up into the next binade (125.3 becomes 64, not 128). The
    cast to e4m3 goes through torch's float8_e4m3fn here (round to nearest even, as cvt.rn.satfinite; the kernel
    clamps first)."""
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interp

    if getattr(interp, "_kwiki_epilogue_patched", False):
        return
    builder = interp.InterpreterBuilder
    fp_to_fp = builder.create_fp_to_fp

    def create_fp_to_fp(self: Any, src: Any, dst_type: Any, rounding_mode: Any) -> Any:
        if dst_type.scalar == tl.float8e4nv and src.dtype.scalar == tl.float32:
            f8 = torch.from_numpy(np.ascontiguousarray(src.data)).to(torch.float8_e4m3fn)
            return interp.TensorHandle(f8.view(torch.uint8).numpy(), tl.float8e4nv)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    builder.create_fp_to_fp = create_fp_to_fp
    interp._kwiki_epilogue_patched = True


@pytest.fixture(scope="module")
def module() -> ModuleType:
    patch()
    _patch_fp8_cast()
    mod = load_artifact(ARTIFACT, "gemm_epilogue.py", "gemm_epilogue_under_test")
    mod.TILE = {"BM": 32, "BN": 256, "BK": 32, "GROUP_M": 2, "num_warps": 4, "num_stages": 2}
    return mod


def _run(module: ModuleType, epilogue: str) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(inputs as the kernel read them, its outputs, the module's reference) at 70 x 272 x 80."""
    params = {"m": 70, "n": 272, "k": 80, "epilogue": epilogue, "dtype": module.DTYPE[epilogue]}
    inputs = module.make_inputs(params, 5, "cpu")
    inputs["a"], inputs["bt"] = inputs["a"].float(), inputs["bt"].float()  # the same values, a dot the
    pristine = {name: t.clone() for name, t in inputs.items()}              # interpreter computes right
    outputs = module.make_outputs(params, inputs)
    for t in outputs.values():
        t.view(torch.uint8).fill_(0xFF)  # NaN in bf16 and fp32, NaN in e4m3
    variant = next(v for v, e in module.TRITON_EPILOGUE.items() if v in module.FOR_EPILOGUE[epilogue])
    assert module.load(variant)(inputs, outputs) is None
    assert all(torch.equal(inputs[name], pristine[name]) for name in inputs)
    return inputs, outputs, module.reference(params, inputs)


def _gelu64(x: Any) -> Any:
    """GELU's tanh form in fp64, written from its definition (not torch's)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("epilogue", ["none", "bias_gelu", "bias_gelu_residual"])
def test_bf16_epilogues_match_fp64(module: ModuleType, epilogue: str) -> None:
    inputs, outputs, ref = _run(module, epilogue)
    acc = inputs["a"].double() @ inputs["bt"].double().t()
    want = acc if epilogue == "none" else _gelu64(acc + inputs["bias"].double())
    if epilogue == "bias_gelu_residual":
        want = want + inputs["res"].double()
    c = outputs["c"].double()
    assert torch.isfinite(c).all()
    # the interpreter rounds fp32 to bf16 toward zero (the GPU to nearest): up to 2^-7 relative, not 2^-8
    assert ((c - want).abs() <= 1e-5 + 2.0**-7 * want.abs()).all(), (c - want).abs().max()
    assert ((ref["c"].double() - want).abs() <= 1e-5 * (1 + want.abs())).all()  # the module's reference agrees


def test_gelu_in_registers_is_the_tanh_form(module: ModuleType) -> None:
    """The epilogue's GELU (x / (1 + exp(-2u))) in fp32, before any bf16 rounding, against the tanh form in fp64
    to 1e-6: tight enough to tell it from the erf form, which differs by more than 1e-4 here."""
    x = torch.linspace(-12.0, 12.0, 1000, dtype=torch.float32)
    bias = torch.full((1000,), 0.25, dtype=torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    _gelu_probe[(1,)](x, bias, y, 1000, BLOCK=1024)
    want = _gelu64(x.double() + 0.25)
    assert torch.isfinite(y).all()
    assert ((y.double() - want).abs() <= 1e-6 * (1 + want.abs())).all(), (y.double() - want).abs().max()
    z = x.double() + 0.25
    assert ((0.5 * z * (1.0 + torch.erf(z / math.sqrt(2.0))) - want).abs() > 1e-4).any()


def test_fp8_codes_scales_and_amax(module: ModuleType) -> None:
    inputs, outputs, ref = _run(module, "fp8")
    q, s, amax = outputs["q"].float().double(), outputs["s"].double(), outputs["amax"].double()
    y = _gelu64(inputs["a"].double() @ inputs["bt"].double().t() + inputs["bias"].double())
    m, n = y.shape
    groups = -(-n // module.GROUP)
    assert s.shape == (groups, m) and torch.isfinite(q).all() and torch.isfinite(s).all()
    want_s = module.group_amax(y) / module.E4M3_MAX  # [N/128, M], the last group over its 16 real columns
    assert ((s - want_s).abs() <= 1e-5 * want_s).all(), (s - want_s).abs().max()
    expanded = s.t().repeat_interleave(module.GROUP, dim=1)[:, :n]
    # q within half an e4m3 ulp of y / s (2^-4 relative among the normals, 2^-10 among the subnormals)
    exact = y / expanded
    assert ((q - exact).abs() <= 2.0**-10 + 2.0**-4 * exact.abs() + 1e-4).all(), (q - exact).abs().max()
    # every group's largest code is 448 (its amax maps to the top of e4m3's range)
    top = torch.nn.functional.pad(q.abs(), (0, groups * module.GROUP - n)).reshape(m, groups, -1).amax(-1)
    assert (top == module.E4M3_MAX).all()
    # the tensor's amax: the largest group amax to one fp32 rounding of the scales, and |y|'s max to 1e-5
    assert abs(float(amax[0]) - float(s.max()) * module.E4M3_MAX) <= 2.0**-22 * float(amax[0])
    assert abs(float(amax[0]) - float(y.abs().max())) <= 1e-5 * float(y.abs().max())
    assert ((ref["s"].double() - want_s).abs() <= 1e-5 * want_s).all()  # the module's reference agrees


def test_refuses_a_wrong_epilogue(module: ModuleType) -> None:
    params = {"m": 70, "n": 272, "k": 80, "epilogue": "bias_gelu", "dtype": "bfloat16"}
    inputs = module.make_inputs(params, 5, "cpu")
    outputs = module.make_outputs(params, inputs)
    with pytest.raises(ValueError, match="does not run the bias_gelu epilogue"):
        module.load("triton_plain")(inputs, outputs)
