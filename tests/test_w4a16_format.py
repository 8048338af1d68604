"""w4a16_gemm_sm90a's int4 format and its dequantizing reference, on the CPU with torch alone (no Triton).

The module's pack, unpack, quantize and reference are what every variant is checked against on the GPU: a nibble
order that differs from the kernel's, or a scale applied to the wrong group, would make the reference agree with a
wrong kernel or refuse a right one. These tests pin the format down by its definition, written out here element by
element, and show that a swapped nibble order or a shifted group is caught.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

torch = pytest.importorskip("torch")

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "w4a16_gemm_sm90a"


@pytest.fixture(scope="module")
def module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("w4a16_gemm_under_test", ARTIFACT / "w4a16_gemm.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _every_nibble(rows: int, k: int) -> torch.Tensor:
    """int8 [rows, k] holding every value of [-8, 7] in every position of a word across the rows."""
    base = torch.arange(rows * k, dtype=torch.int64).reshape(rows, k)
    return ((base * 7 + base // 16) % 16 - 8).to(torch.int8)


def test_pack_then_unpack_returns_the_weights(module: ModuleType) -> None:
    q = _every_nibble(16, 256)
    packed = module.pack(q)
    assert packed.dtype == torch.int32 and tuple(packed.shape) == (16, 32)
    assert torch.equal(module.unpack(packed), q)


def test_nibble_i_of_word_j_is_k_8j_plus_i(module: ModuleType) -> None:
    """The layout the Triton kernel's shifts assume: q + 8 in bits 4i..4i+3 of word j holds k = 8j + i."""
    q = _every_nibble(3, 64)
    words = module.pack(q).to(torch.int64) & 0xFFFFFFFF  # the unsigned bits of each word
    for n in range(3):
        for k in range(64):
            assert (int(words[n, k // 8]) >> (4 * (k % 8))) & 0xF == int(q[n, k]) + 8


def test_a_swapped_nibble_order_fails(module: ModuleType) -> None:
    q = _every_nibble(4, 128)
    words = module.pack(q)
    shifts = torch.arange(28, -4, -4, dtype=torch.int32)  # k = 8j + i read from the high nibble down
    wrong = ((((words[:, :, None] >> shifts) & 0xF) - 8).to(torch.int8)).reshape(q.shape)
    assert not torch.equal(wrong, q)  # an unpack that reads the high nibble first does not return the weights


def test_pytorch_pairs_put_the_even_k_in_the_high_nibble(module: ModuleType) -> None:
    """torch._convert_weight_to_int4pack's input: uint8 [N, K / 2], byte b = (u[2b] << 4) | u[2b + 1], u = q + 8."""
    q = _every_nibble(2, 32)
    pairs = module.tinygemm_pairs(module.pack(q))
    assert pairs.dtype == torch.uint8 and tuple(pairs.shape) == (2, 16)
    for n in range(2):
        for b in range(16):
            assert int(pairs[n, b]) == ((int(q[n, 2 * b]) + 8) << 4) | (int(q[n, 2 * b + 1]) + 8)


def test_quantize_is_symmetric_per_group_of_128(module: ModuleType) -> None:
    g = torch.Generator().manual_seed(3)
    w = torch.randn(8, 512, generator=g)
    w[:, 128:256] *= 50.0  # one group per row far larger: its scale must not leak into the neighbours
    q, s = module.quantize(w)
    assert tuple(s.shape) == (4, 8) and s.dtype == torch.bfloat16  # group-major: [K / 128, N]
    assert int(q.min()) >= -8 and int(q.max()) <= 7
    per_group = w.reshape(8, 4, 128).abs().amax(dim=2).t()
    assert torch.allclose(s.float(), per_group / 7.0, rtol=2.0 ** -8)
    err = (module.dequantize(module.pack(q), s).float() - w).abs()
    assert (err <= s.t().float().repeat_interleave(128, dim=1) / 2 * 1.01).all()  # round to nearest, one step


def test_dequantize_applies_each_scale_to_its_own_group(module: ModuleType) -> None:
    q = _every_nibble(5, 384)
    s = torch.tensor([[1.0], [2.0], [4.0]], dtype=torch.bfloat16).repeat(1, 5)  # group g scaled by 2^g
    w = module.dequantize(module.pack(q), s)
    assert w.dtype == torch.float64
    expect = torch.cat([q[:, g * 128:(g + 1) * 128].double() * 2.0 ** g for g in range(3)], dim=1)
    assert torch.equal(w, expect)
    shifted = torch.cat([q[:, :64].double(), q[:, 64:].double() * 2.0], dim=1)  # a group boundary off by 64
    assert not torch.equal(w[:, :192], shifted[:, :192])


def test_reference_is_x_times_the_dequantized_weights(module: ModuleType) -> None:
    params = {"op": "gemm_w4a16", "m": 3, "n": 16, "k": 256, "dtype": "bfloat16"}
    inputs = module.make_inputs(params, 5, "cpu")
    assert set(inputs) == {"x", "q", "scale"}  # PyTorch's CUDA int4 layout is made only where its op runs
    ref = module.reference(params, inputs)["y"]
    q, s = module.unpack(inputs["q"]).double(), inputs["scale"].double()
    by_hand = torch.zeros(3, 16, dtype=torch.float64)
    for g in range(2):
        by_hand += inputs["x"][:, g * 128:(g + 1) * 128].double() @ (q[:, g * 128:(g + 1) * 128] * s[g][:, None]).t()
    assert torch.allclose(ref, by_hand, rtol=1e-12, atol=1e-12)
    assert ref.abs().max() > 0.1  # random, never all zeros


def test_the_eager_chain_passes_the_artifacts_own_tolerance(module: ModuleType) -> None:
    params = {"op": "gemm_w4a16", **module.OFF_TILE, "dtype": "bfloat16"}
    inputs = module.make_inputs(params, 2, "cpu")
    outputs = module.make_outputs(params, inputs)
    outputs["y"].fill_(float("nan"))
    assert module.load("torch_dequant_mm")(inputs, outputs) is None
    ref = module.reference(params, inputs)["y"]
    atol, rtol, _ = module.TOLERANCES["bfloat16"]
    assert ((outputs["y"].double() - ref).abs() <= atol + rtol * ref.abs()).all()


def test_pytorch_int4_op_is_not_applicable_on_a_cpu(module: ModuleType) -> None:
    with pytest.raises(RuntimeError, match="not applicable"):
        module.load("torch_int4pack_mm")


def test_k_off_the_group_is_refused(module: ModuleType) -> None:
    with pytest.raises(ValueError, match="multiple of the group size"):
        module.make_inputs({"op": "gemm_w4a16", "m": 1, "n": 8, "k": 200, "dtype": "bfloat16"}, 0, "cpu")
    assert module.OFF_TILE["k"] % module.GROUP == 0 and module.OFF_TILE["k"] % (2 * module.GROUP)  # whole groups, odd


def test_flops_are_declared_only_where_one_dtype_holds(module: ModuleType) -> None:
    """At M = 1 the int4 variants run their FLOPs on different units (tensor cores padded to 16 rows, fp32 FMAs),
    so the grid's M = 1 int4 cases declare bytes only; elsewhere bf16 tensor FLOPs, 2 M N K."""
    gemv = module.work({"op": "gemm_w4a16", "m": 1, "n": 14336, "k": 4096})
    assert "flops" not in gemv and gemv["bytes"] == 0.5 * 14336 * 4096 + 2.0 * 14336 * 4096 / 128 + 2 * 4096 + 2 * 14336
    dot = module.work({"op": "gemm_w4a16", "m": 16, "n": 14336, "k": 4096})
    assert dot["flops"] == 2.0 * 16 * 14336 * 4096 and dot["flops_dtype"] == "bf16"
    bf16 = module.work({"op": "gemm_bf16", "m": 1, "n": 14336, "k": 4096})
    assert bf16["flops"] == 2.0 * 14336 * 4096 and bf16["flops_dtype"] == "bf16"
    assert all(p["m"] == 1 for p in module.GRID if p["op"] == "gemm_w4a16" and "flops" not in module.work(p))
