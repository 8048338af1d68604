"""fp8_gemm_sm90a's Triton kernels under Triton's CPU interpreter, against the module's fp32 reference.

Off-tile M, N and K (K's last 128-group partial), per-group scales that differ by powers of two, outputs
poisoned with NaN first, inputs unchanged afterwards. Small tiles (BM 32) keep the interpreter quick; the block
kernel keeps BN = BK = 128, its weight-block size. The interpreter models neither the tensor cores' limited
fp8 accumulation nor the promotion (its dot is an fp32 numpy product), only indexing, masks and scales: the
promotion sweep's variants are checked here for their bookkeeping (every interval added into the fp32 total once,
the last partial one too), to fp32 precision; the error that promotion removes shows only on the GPU.
Skipped without Triton.
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

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "fp8_gemm_sm90a"


@pytest.fixture(scope="module")
def module() -> ModuleType:
    patch()
    mod = load_artifact(ARTIFACT, "fp8_gemm.py", "fp8_gemm_under_test")
    small = {"BM": 32, "BN": 128, "BK": 128, "GROUP_M": 2, "num_warps": 4, "num_stages": 2}
    mod.TILES = {**{name: {**small, "BN": 64} for name in mod.PROMOTIONS}, "triton_block": small,
                 "triton_tensor_tma": {**small, "BN": 64}, "triton_block_tma": small,
                 "triton_block_tma_prefetch": small}
    return mod


CASES = [  # (variant, scaling, m, n, k): off every tile; N = 272 has a partial 128-block of weight scales
    ("triton_tensor", "tensor", 70, 144, 400),
    ("triton_tensor_tma", "tensor", 70, 144, 400),  # 3 x 3 tiles over 4 programs: a program takes a second tile
    ("triton_tensor_tma", "tensor", 200, 208, 272),
    ("triton_block", "block", 70, 272, 400),
    ("triton_block", "block", 33, 128, 128),
    ("triton_block_tma", "block", 70, 272, 400),  # 3 x 3 tiles over 4 programs; N's last weight block partial
    ("triton_block_tma", "block", 33, 128, 128),
    ("triton_block_tma_prefetch", "block", 70, 272, 400),  # a program's second tile reloads its first group's scales
    ("triton_block_tma_prefetch", "block", 33, 128, 128),  # one group: nothing to load ahead
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


SWEEP = ["triton_tensor_p32", "triton_tensor_p64", "triton_tensor", "triton_tensor_p256", "triton_tensor_p512",
         "triton_tensor_never"]


@pytest.mark.parametrize("variant", SWEEP)
def test_promotion_sweep_adds_every_interval_once(module: ModuleType, variant: str) -> None:
    """K = 1040: nine 128-deep tiles, the last of 16, so a promotion every 256 or 512 ends on a partial interval.
    The fp32 output matches the fp64 reference to fp32 rounding (the interpreter's dot is exact in fp32): an
    interval dropped or added twice would be off by a whole partial sum (an RMS near 1)."""
    assert variant in module.PROMOTIONS
    params = {"m": 70, "n": 144, "k": 1040, "scaling": "promote", "dtype": module.FP8_F32}
    inputs = module.make_inputs(params, 11, "cpu")
    outputs = module.make_outputs(params, inputs)
    assert outputs["c"].dtype == torch.float32
    outputs["c"].fill_(float("nan"))
    assert module.load(variant)(inputs, outputs) is None
    c, ref = outputs["c"].double(), module.reference(params, inputs)["c"]
    assert ref.dtype == torch.float64 and torch.isfinite(c).all()
    assert ((c - ref).abs() <= 1e-4 + 1e-5 * ref.abs()).all(), (c - ref).abs().max()
