"""fp8_gemm_sm90a's Triton kernels under Triton's CPU interpreter, against the module's fp32 reference.

Off-tile M, N and K (K's last 128-group partial), per-group scales that differ by powers of two, outputs
poisoned with NaN first, inputs unchanged afterwards. Small tiles (BM 32) keep the interpreter quick; the block
kernel keeps BN = BK = 128, its weight-block size. The interpreter models neither the tensor cores' limited
fp8 accumulation nor the promotion (its dot is an fp32 numpy product), only indexing, masks and scales.
Skipped without Triton.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

if os.environ.get("TRITON_INTERPRET") != "1":  # never set here: Triton would stay interpreted for the process
    pytest.skip("needs TRITON_INTERPRET=1 from the start", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "fp8_gemm_sm90a"


def _patch_interpreter() -> None:
    """Two defects of Triton 3.6's interpreter that the GPU does not have: it converts a 1-element array with
    int() (numpy >= 2.4 refuses), and its tl.dot multiplies float8 bit patterns (stored as uint8) as integers.
    Here a dot's fp8 operands are decoded to fp32 first (through torch's e4m3 type). For this test only."""
    import numpy as np
    import triton.language as tl
    import triton.runtime.interpreter as interp

    if getattr(interp, "_kwiki_fp8_patched", False):
        return
    lang_tensor = interp._patch_lang_tensor

    def patch_tensor(tensor: Any, scope: Any) -> None:
        lang_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patch_tensor
    builder = interp.InterpreterBuilder
    dot = builder.create_dot

    def as_f32(h: Any) -> Any:
        if h.dtype.scalar == tl.float8e4nv:
            bits = torch.from_numpy(np.ascontiguousarray(h.data).view(np.uint8))
            return interp.TensorHandle(bits.view(torch.float8_e4m3fn).float().numpy(), tl.float32)
        return h

    def create_dot(self: Any, a: Any, b: Any, d: Any, precision: Any, imprecise: Any) -> Any:
        return dot(self, as_f32(a), as_f32(b), d, precision, imprecise)

    builder.create_dot = create_dot
    interp._kwiki_fp8_patched = True


@pytest.fixture(scope="module")
def module() -> ModuleType:
    _patch_interpreter()
    sys.path.insert(0, str(ARTIFACT))
    spec = importlib.util.spec_from_file_location("fp8_gemm_under_test", ARTIFACT / "fp8_gemm.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    small = {"BM": 32, "BN": 128, "BK": 128, "GROUP_M": 2, "num_warps": 4, "num_stages": 2}
    mod.TILES = {"triton_tensor": {**small, "BN": 64}, "triton_block": small}
    return mod


CASES = [  # (variant, scaling, m, n, k): off every tile; N = 272 has a partial 128-block of weight scales
    ("triton_tensor", "tensor", 70, 144, 400),
    ("triton_block", "block", 70, 272, 400),
    ("triton_block", "block", 33, 128, 128),
]


@pytest.mark.parametrize(("variant", "scaling", "m", "n", "k"), CASES)
def test_kernel_matches_reference(module: ModuleType, variant: str, scaling: str, m: int, n: int, k: int) -> None:
    params = {"m": m, "n": n, "k": k, "scaling": scaling, "dtype": module.FP8}
    inputs = module.make_inputs(params, 9, "cpu")
    pristine = {name: t.clone() for name, t in inputs.items()}
    outputs = module.make_outputs(params, inputs)
    outputs["c"].fill_(float("nan"))
    assert module.load(variant)(inputs, outputs) is None
    c, ref = outputs["c"].double(), module.reference(params, inputs)["c"].double()
    atol, rtol, _ = module.TOLERANCES[module.FP8]
    # the interpreter rounds fp32 to bf16 toward zero (the GPU to nearest): up to 2^-7 relative, not 2^-8
    assert torch.isfinite(c).all()
    assert ((c - ref).abs() <= atol + 2 * rtol * ref.abs()).all(), (c - ref).abs().max()
    assert all(torch.equal(inputs[name].view(torch.uint8) if inputs[name].element_size() == 1 else inputs[name],
                           pristine[name].view(torch.uint8) if pristine[name].element_size() == 1 else pristine[name])
               for name in inputs)
