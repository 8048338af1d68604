"""decode_gemm_sm90a's Triton kernels under Triton's CPU interpreter, against an fp64 reference.

Off-tile M, N and K (no block divides them), split-K with a partial last split, int8 weights through both
conversions, outputs poisoned with NaN first, inputs unchanged afterwards. The interpreter models no
performance; it checks indexing, masks, the split-K arithmetic and the dequantization. Skipped without Triton.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest
from triton_interpreter import load_artifact, patch

if os.environ.get("TRITON_INTERPRET") != "1":  # never set here: Triton would stay interpreted for the process
    pytest.skip("needs TRITON_INTERPRET=1 from the start", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "decode_gemm_sm90a"


def _patch_cast() -> None:
    """The interpreter's defect only these kernels meet, beside triton_interpreter.patch's: it casts integers to
    bf16 by value into bf16's uint16 storage. Cast through fp32 and keep its top 16 bits, exact for int8 values."""
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interp

    if getattr(interp, "_kwiki_int_to_bf16_patched", False):
        return
    builder = interp.InterpreterBuilder
    cast = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if dst_type.scalar == tl.bfloat16 and src.dtype.scalar.is_int():  # exact for the int8 values here
            bits = src.data.astype(np.float32).view(np.uint32) >> 16
            return interp.TensorHandle(bits.astype(np.uint16), tl.bfloat16)
        return cast(self, src, dst_type)

    builder.cast_impl = cast_impl
    builder.create_si_to_fp = lambda self, src, dst_type: self.cast_impl(src, dst_type)
    interp._kwiki_int_to_bf16_patched = True


@pytest.fixture(scope="module")
def module() -> ModuleType:
    patch()
    _patch_cast()
    return load_artifact(ARTIFACT, "decode_gemm.py", "decode_gemm_under_test")


CASES = [  # (variant, m, n, k): M, N and K off every tile; SMS = 4 makes split-K split these small K
    ("triton_bf16_tile", 7, 130, 520),
    ("triton_bf16_splitk", 1, 200, 300),
    ("triton_bf16_splitk", 33, 100, 1000),
    ("triton_w8a16_splitk", 7, 130, 520),
    ("triton_w8a16_splitk", 33, 100, 1000),
    ("triton_w8a16_fp32cvt", 5, 70, 600),
    ("triton_w8a16_fp32cvt", 33, 100, 1000),
]
SMS = 4


@pytest.mark.parametrize(("variant", "m", "n", "k"), CASES)
def test_kernel_matches_fp64(module: ModuleType, variant: str, m: int, n: int, k: int) -> None:
    op = "gemm_w8a16" if "w8a16" in variant else "gemm_bf16"
    params = {"op": op, "m": m, "n": n, "k": k, "dtype": "bfloat16"}
    inputs = module.make_inputs(params, 7, "cpu")
    pristine = {name: t.clone() for name, t in inputs.items()}
    outputs = module.make_outputs(params, inputs)
    outputs["y"].fill_(float("nan"))
    assert module.launcher(variant, SMS)(inputs, outputs) is None
    y, ref = outputs["y"].double(), module.reference(params, inputs)["y"]
    atol, rtol, _ = module.TOLERANCES["bfloat16"]
    # the interpreter rounds fp32 to bf16 toward zero (the GPU to nearest): one bf16 ulp, 2^-7, beside rtol
    assert torch.isfinite(y).all()
    assert ((y - ref).abs() <= atol + max(rtol, 2.0 ** -7) * 2 * ref.abs()).all(), (y - ref).abs().max()
    assert all(torch.equal(inputs[name], pristine[name]) for name in inputs)
    if variant != "triton_bf16_tile":
        assert module.plan(m, n, k, op == "gemm_w8a16", SMS, True)[2] > 1  # the case splits K


def test_fp32_conversion_is_exact(module: ModuleType) -> None:
    """Every int8 value through the ablation's conversion: a GEMM with x = one-hot rows reads W back."""
    k = 256
    q = torch.arange(-128, 128, dtype=torch.int8).reshape(1, k).repeat(16, 1)
    inputs = {"x": torch.eye(k, dtype=torch.bfloat16)[:16], "q": q, "scale": torch.ones(16, dtype=torch.bfloat16)}
    outputs = {"y": torch.full((16, 16), float("nan"), dtype=torch.bfloat16)}
    module.launcher("triton_w8a16_fp32cvt", SMS)(inputs, outputs)
    assert torch.equal(outputs["y"].float(), q[:, :16].float().t().contiguous())


def test_contract(module: ModuleType) -> None:
    assert sorted(module.VARIANTS) == sorted(set().union(*module.FOR_OP.values()))
    with pytest.raises(ValueError, match="op must be one of"):
        module.make_inputs({"op": "gemv", "m": 1, "n": 8, "k": 8, "dtype": "bfloat16"}, 0, "cpu")
    with pytest.raises(ValueError, match="positive"):
        module.make_inputs({"op": "gemm_bf16", "m": 0, "n": 8, "k": 8, "dtype": "bfloat16"}, 0, "cpu")
