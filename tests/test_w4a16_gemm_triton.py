"""w4a16_gemm_sm90a's Triton kernels under Triton's CPU interpreter, against the module's fp64 reference.

M and N off every tile, K a whole number of groups split unevenly (split-K's last slice shorter), both ways of
applying the scale, the bf16 rung, the M = 1 GEMV rung, outputs poisoned with NaN first and inputs unchanged
afterwards. The interpreter models no performance: it checks the unpacking, the group of each scale, the masks
and the split-K arithmetic. Skipped without Triton.
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

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "w4a16_gemm_sm90a"
SMS = 4  # few SMs, so that split-K splits these small K


@pytest.fixture(scope="module")
def module() -> ModuleType:
    patch()
    return load_artifact(ARTIFACT, "w4a16_gemm.py", "w4a16_gemm_under_test")


CASES = [  # (variant, m, n, k): M and N off every tile; K whole groups, split into uneven slices
    ("triton_bf16_splitk", 7, 130, 640),
    ("triton_w4a16", 1, 70, 640),
    ("triton_w4a16", 33, 100, 1152),
    ("triton_w4a16_scale_acc", 5, 130, 640),
    ("triton_w4a16_scale_acc", 33, 100, 1152),
    ("triton_w4a16_gemv", 1, 70, 640),
    ("triton_w4a16_gemv", 1, 1000, 3968),  # the manifest's check shape of the GEMV rung: 31 groups, split unevenly
]


def _run(module: ModuleType, variant: str, params: dict, inputs: dict) -> torch.Tensor:
    outputs = module.make_outputs(params, inputs)
    outputs["y"].fill_(float("nan"))
    assert module.launcher(variant, SMS)(inputs, outputs) is None
    return outputs["y"].double()


@pytest.mark.parametrize(("variant", "m", "n", "k"), CASES)
def test_kernel_matches_fp64(module: ModuleType, variant: str, m: int, n: int, k: int) -> None:
    op = "gemm_w4a16" if "w4a16" in variant else "gemm_bf16"
    params = {"op": op, "m": m, "n": n, "k": k, "dtype": "bfloat16"}
    inputs = module.make_inputs(params, 7, "cpu")
    pristine = {name: t.clone() for name, t in inputs.items()}
    y, ref = _run(module, variant, params, inputs), module.reference(params, inputs)["y"]
    atol, rtol, _ = module.TOLERANCES["bfloat16"]
    # the interpreter rounds fp32 to bf16 toward zero (the GPU to nearest): one bf16 ulp, 2^-7, beside rtol
    assert torch.isfinite(y).all()
    assert ((y - ref).abs() <= atol + max(rtol, 2.0 ** -7) * 2 * ref.abs()).all(), (y - ref).abs().max()
    assert all(torch.equal(inputs[name], pristine[name]) for name in inputs)
    if variant == "triton_w4a16_gemv":
        splits, k_per = module.gemv_plan(n, k, SMS)
    else:
        _, splits, k_per, _, _ = module.plan(m, n, k, SMS, op == "gemm_w4a16")
    assert splits > 1 and k % k_per  # the case splits K, and its last slice is shorter


@pytest.mark.parametrize("variant", ["triton_w4a16", "triton_w4a16_scale_acc", "triton_w4a16_gemv"])
def test_every_nibble_and_group_reads_back(module: ModuleType, variant: str) -> None:
    """x = one-hot rows reads W back exactly: every value of [-8, 7] at every position of a word, each group with its
    own power-of-two scale (exact in bf16), so a wrong nibble order or a scale of the wrong group shows. The GEMV
    rung takes one row: one launch a one-hot row."""
    n, k = 16, 512
    base = torch.arange(n * k).reshape(n, k)
    q = ((base * 7 + base // 16) % 16 - 8).to(torch.int8)
    s = (2.0 ** torch.arange(k // 128, dtype=torch.float32))[:, None].repeat(1, n).to(torch.bfloat16)
    cols = torch.arange(0, k, k // 16)  # 16 k spread over every group and word position
    x = torch.zeros(16, k, dtype=torch.bfloat16)
    x[torch.arange(16), cols] = 1.0
    inputs = {"q": module.pack(q), "scale": s}
    if variant == "triton_w4a16_gemv":
        params = {"op": "gemm_w4a16", "m": 1, "n": n, "k": k, "dtype": "bfloat16"}
        y = torch.cat([_run(module, variant, params, {**inputs, "x": row[None, :].contiguous()}) for row in x])
    else:
        params = {"op": "gemm_w4a16", "m": 16, "n": n, "k": k, "dtype": "bfloat16"}
        y = _run(module, variant, params, {**inputs, "x": x})
    expect = (q.double() * s.double().t().repeat_interleave(128, dim=1))[:, cols].t()
    assert torch.equal(y, expect)
