"""fp8_gemm_sm90a's module on a CPU: how it quantizes, where the scales live, and its reference.

The GPU kernels are not run here (tests/test_fp8_gemm_triton.py runs them under Triton's interpreter); these
tests pin what every variant is judged against: scales of amax / 448 per tensor, row, 1 x 128 group or
128 x 128 block, the block-scale layout the kernel indexes (sa as [K/128, M], sb as [N/128, K/128]), a
reference equal to the group-by-group fold the block kernel computes, exact bf16 copies for the bf16 baseline,
params refused before any work, and the promotion sweep's tolerance: wide enough for a model of the tensor
cores' unpromoted accumulator at K = 16384, narrow enough to fail a wrong result.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "artifacts" / "common"))
import kwiki_harness  # noqa: E402  (the harness's own comparison, as it judges a variant)

OFF_TILE = {"m": 70, "n": 272, "k": 400}  # K's last 128-group is partial, N's last 128-block too


@pytest.fixture(scope="module")
def module() -> ModuleType:
    path = ROOT / "artifacts" / "fp8_gemm_sm90a" / "fp8_gemm.py"
    spec = importlib.util.spec_from_file_location("fp8_gemm_under_test", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def params(mod: ModuleType, scaling: str, shape: dict[str, int] = OFF_TILE) -> dict[str, Any]:
    return {**shape, "scaling": scaling, "dtype": mod.FP8}


def test_block_reference_is_the_group_fold(module: ModuleType) -> None:
    """The reference (dequantize, then one product) equals, in fp64, what triton_block computes: per 128-deep
    group, qA qB^T times sa[group, row] times sb[row block, group], summed over the groups."""
    p = params(module, "block")
    i = module.make_inputs(p, 5, "cpu")
    m, n = p["m"], p["n"]
    assert i["sa"].shape == (4, m) and i["sb"].shape == (3, 4)
    total = torch.zeros(m, n, dtype=torch.float64)
    for g in range(4):
        ks = slice(128 * g, 128 * (g + 1))
        part = i["a"][:, ks].double() @ i["b"][:, ks].double().t()
        sb = i["sb"][:, g].double().repeat_interleave(128)[:n]
        total += part * i["sa"][g].double()[:, None] * sb[None, :]
    ref = module.reference(p, i)["c"].double()
    assert (total - ref).abs().max() <= 1e-5 * ref.abs().max()


@pytest.mark.parametrize(("scaling", "rows", "cols"), [("block", 1, 128), ("row", 1, 400), ("tensor", 70, 400)])
def test_each_group_reaches_e4m3_max(module: ModuleType, scaling: str, rows: int, cols: int) -> None:
    """scale = amax / 448 per group: the largest code of every group of A is +-448 (a wrong group size or a
    scale of the wrong group leaves some group's largest code below it); tensor scales are powers of two."""
    i = module.make_inputs(params(module, scaling), 6, "cpu")
    codes = i["a"].float()
    assert codes.abs().max() <= 448 and torch.isfinite(codes).all()
    padded = torch.nn.functional.pad(codes, (0, -(-400 // cols) * cols - 400))
    amax = padded.abs().reshape(70 // rows, rows, -1, cols).amax(dim=(1, 3))
    if scaling == "tensor":
        assert torch.equal(i["sa"], torch.exp2(torch.log2(i["sa"]).round()))
        assert 224 <= float(amax.max()) <= 448  # scale rounded up to a power of two: amax / scale in (224, 448]
    else:
        assert bool((amax == 448).all())


def test_bf16_copies_are_exact(module: ModuleType) -> None:
    p = params(module, "tensor")
    i = module.make_inputs(p, 7, "cpu")
    a, b = module.dequantized(p, i)
    assert torch.equal(i["a16"].float(), a) and torch.equal(i["b16"].float(), b)


@pytest.mark.parametrize("variant", ["bf16_cublas", "scaled_mm_tensor", "scaled_mm_rowwise", "scaled_mm_block"])
def test_torch_variant_on_cpu(module: ModuleType, variant: str) -> None:
    """The torch variants pass the harness's comparison with the module's tolerance (on CPU torch where it has
    the op; the GPU runs cuBLASLt). Outputs poisoned with NaN first, inputs unchanged afterwards."""
    scaling = next(s for s, names in module.FOR_SCALING.items() if variant in names)
    p = params(module, scaling, {**OFF_TILE, "k": 512} if variant == "scaled_mm_block" else OFF_TILE)
    assert module.applies(variant, p)
    i = module.make_inputs(p, 8, "cpu")
    pristine = {name: t.clone() for name, t in i.items()}
    o = module.make_outputs(p, i)
    o["c"].fill_(float("nan"))
    try:
        module.load(variant)(dict(i), dict(o))
    except (NotImplementedError, RuntimeError, ValueError) as exc:  # torch's TORCH_CHECK_VALUE is a ValueError
        pytest.skip(f"this CPU torch does not run {variant}: {str(exc).splitlines()[0]}")
    atol, rtol, _ = module.TOLERANCES[module.FP8]
    ok, detail, _, _ = kwiki_harness.compare(o["c"], module.reference(p, i)["c"], atol, rtol, "c")
    assert ok, detail
    assert kwiki_harness.inputs_changed(i, pristine) is None


def test_contract(module: ModuleType) -> None:
    assert sorted(module.VARIANTS) == sorted(set().union(*module.FOR_SCALING.values()))
    assert sorted(module.TOLERANCES) == sorted({e["dtype"] for e in module.GRID})
    for entry in module.GRID:
        assert sum(module.applies(v, entry) for v in module.VARIANTS) >= 1
    assert not module.applies("scaled_mm_block", params(module, "block"))  # K = 400: a partial 128-group
    assert any(e["m"] % 128 and e["n"] % 128 and e["k"] % 128 for e in module.GRID)  # one shape off every tile
    with pytest.raises(ValueError, match="multiples of 16"):
        module.make_inputs(params(module, "block", {"m": 64, "n": 64, "k": 200}), 0, "cpu")
    with pytest.raises(ValueError, match="scaling must be one of"):
        module.make_inputs(params(module, "channel"), 0, "cpu")
    with pytest.raises(ValueError, match="positive"):
        module.make_inputs(params(module, "row", {"m": 0, "n": 64, "k": 64}), 0, "cpu")


SWEEP_K = 16384  # the sweep's deep shape: 512 k32 steps


def sweep_params(mod: ModuleType, m: int = 8, n: int = 32, k: int = SWEEP_K) -> dict[str, Any]:
    return {"m": m, "n": n, "k": k, "scaling": "promote", "dtype": mod.FP8_F32}


def test_promotion_intervals(module: ModuleType) -> None:
    """Each sweep variant's PROMOTE: 32 and 64 and 128 through tl.dot (they divide the tile's K of 128), 256 and 512
    as chained dots, 0 for never; an interval that neither divides nor is a multiple of the tile's K is refused."""
    got = {name: module.promotion(name, 128) for name in module.PROMOTIONS}
    assert got == {"triton_tensor_p32": 32, "triton_tensor_p64": 64, "triton_tensor": 128, "triton_tensor_p256": 256,
                   "triton_tensor_p512": 512, "triton_tensor_never": 0}
    assert set(module.PROMOTIONS) | {"scaled_mm_tensor", "scaled_mm_fast_accum"} == module.FOR_SCALING["promote"]
    assert all(module.TILES[name]["BK"] == 128 for name in module.PROMOTIONS)  # one tile for the whole sweep
    assert module.promotion("triton_tensor_p512", 256) == 512 and module.promotion("triton_tensor_p32", 256) == 32
    for name in ("triton_tensor_p64", "triton_tensor_p256"):
        with pytest.raises(ValueError, match="tile's K depth 96"):
            module.promotion(name, 96)


def test_sweep_entries(module: ModuleType) -> None:
    """The sweep runs at every shape of the ladder and at K = 16384, per-tensor inputs as rung 1's, an fp32
    output, an fp64 reference; its dtype and its scaling go together."""
    sweep = [(e["m"], e["n"], e["k"]) for e in module.GRID if e["scaling"] == "promote"]
    assert sweep == [*module.SHAPES, (4096, 4096, SWEEP_K)]
    p = sweep_params(module, 70, 144, 400)
    assert module.applies("triton_tensor_never", p) and not module.applies("bf16_cublas", p)
    assert module.applies("scaled_mm_tensor", p) and module.applies("scaled_mm_fast_accum", p)  # cuBLASLt's two modes
    assert not any(module.applies("scaled_mm_fast_accum", e) for e in module.GRID if e["scaling"] != "promote")
    i = module.make_inputs(p, 3, "cpu")
    t = module.make_inputs({**p, "scaling": "tensor", "dtype": module.FP8}, 3, "cpu")
    assert sorted(i) == ["a", "b", "sa", "sb"] and all(torch.equal(i[n].float(), t[n].float()) for n in i)
    assert module.make_outputs(p, i)["c"].dtype == torch.float32
    assert module.reference(p, i)["c"].dtype == torch.float64
    with pytest.raises(ValueError, match="dtype must be"):
        module.make_inputs({**p, "dtype": module.FP8}, 0, "cpu")
    with pytest.raises(ValueError, match="dtype must be"):
        module.make_inputs({**p, "scaling": "tensor"}, 0, "cpu")


def unpromoted(qa: Any, qb: Any, bits: int = 14) -> Any:
    """A model of Hopper's fp8 wgmma accumulating a whole K without promotion (DeepSeek-V3: about 14 bits): every
    k32 step aligns the running sum and its 32 products to the largest of them and truncates each toward zero to
    `bits` significant bits of it before adding. A model, not the hardware: the GPU run measures the real one."""
    acc = torch.zeros(qa.shape[0], qb.shape[0], dtype=torch.float64)
    for s in range(0, qa.shape[1], 32):
        terms = torch.cat([acc[..., None], qa[:, None, s:s + 32] * qb[None, :, s:s + 32]], dim=-1)
        ulp = torch.exp2(torch.floor(torch.log2(terms.abs().amax(-1, keepdim=True).clamp_min(1e-300))) - (bits - 1))
        acc = (torch.trunc(terms / ulp) * ulp).sum(-1)
    return acc


def check(mod: ModuleType, got: Any, ref: Any) -> tuple[bool, str]:
    atol, rtol, _ = mod.TOLERANCES[mod.FP8_F32]
    ok, detail, _, _ = kwiki_harness.compare(got.float(), ref, atol, rtol, "c")
    return ok, detail


def test_sweep_tolerance_passes_the_unpromoted_model(module: ModuleType) -> None:
    """At K = 16384 (8 x 32 outputs) the model of the unpromoted accumulator is off by far more than fp32
    rounding, yet by under half the sweep's atol, with 14 bits and with 13: the figures the tolerance's reason
    extrapolates to the GPU's 16.8M outputs."""
    p = sweep_params(module)
    i = module.make_inputs(p, 21, "cpu")
    ref = module.reference(p, i)["c"]
    s = float(i["sa"]) * float(i["sb"])
    qa, qb = i["a"].double(), i["b"].double()
    for bits in (14, 13):
        got = unpromoted(qa, qb, bits) * s
        err = float((got - ref).abs().max())
        assert 1e-3 < err < module.TOLERANCES[module.FP8_F32][0] / 2, (bits, err)
        assert check(module, got, ref)[0]


def test_sweep_tolerance_fails_wrong_results(module: ModuleType) -> None:
    """The sweep's wide tolerance still fails what a broken kernel would write: NaN, one 128-deep K tile left out
    of the sum, both scales' product off by 2x, a single output off by 1."""
    p = sweep_params(module, 64, 64)
    i = module.make_inputs(p, 22, "cpu")
    ref = module.reference(p, i)["c"]
    assert check(module, ref, ref)[0]
    nan = ref.clone()
    nan[3, 5] = float("nan")
    a, b = module.dequantized(p, i)
    keep = torch.ones(SWEEP_K, dtype=torch.float64)
    keep[128 * 77: 128 * 78] = 0  # one K tile of 128 left out
    short = (a.double() * keep) @ b.double().t()
    one_off = ref.clone()
    one_off[60, 2] += 1.0
    for name, wrong in (("nan", nan), ("k tile", short), ("scale", 2 * ref), ("one output", one_off)):
        ok, detail = check(module, wrong, ref)
        assert not ok, (name, detail)


def _sass_ops(module: ModuleType, tmp_path: Path, kernel: str, variant: str) -> list[str]:
    """The SASS opcodes of one of the artifact's Triton kernels at its variant's tile, compiled for sm_90a here
    (tests/triton_aot.py)."""
    from triton_aot import compile_sm90a

    pytest.importorskip("triton")
    spec = importlib.util.spec_from_file_location("kwiki_test_fp8_kernels_aot",
                                                  ROOT / "artifacts" / "fp8_gemm_sm90a" / "kernels.py")
    assert spec is not None and spec.loader is not None
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    fn = getattr(kernels, kernel)
    cfg = module.TILES[variant]
    const = {k: cfg[k] for k in ("BM", "BN", "BK", "GROUP_M")}
    if "NUM_SMS" in fn.arg_names:
        const["NUM_SMS"] = 132
    elif "PROMOTE" in fn.arg_names:
        const["PROMOTE"] = module.promotion(variant, cfg["BK"])
    types = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "sa_ptr": "*fp32", "sb_ptr": "*fp32", "c_ptr": "*bf16"}
    sig = {n: "constexpr" if n in const else types.get(n, "i32") for n in fn.arg_names}
    return compile_sm90a(fn, sig, const, tmp_path, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"]).ops


@pytest.mark.parametrize(("variant", "below"), [("triton_tensor_tma", "triton_tensor"),
                                               ("triton_block_tma", "triton_block")])
def test_the_tma_rungs_compile_to_fp8_wgmma_fed_and_stored_by_tma_without_spills(
        module: ModuleType, tmp_path: Path, variant: str, below: str) -> None:
    """Rungs 3 and 4 at the artifact's tile: fp8 wgmma (QGMMA ... E4M3), operands loaded and C stored by TMA
    (UTMALDG, UTMASTG), no local-memory spill; the pointer-load kernel of the same scaling has no TMA load, so the
    check tells them apart. (Rung 1 spills here, 255 registers and a 992-byte stack under Triton 3.9, where the GPU
    machine's Triton 3.6 spills nothing: its manifest's note.)"""
    import re

    ops = _sass_ops(module, tmp_path, module.TMA[variant], variant)
    assert any(re.match(r"QGMMA\.\S*E4M3", op) for op in ops), sorted({op for op in ops if "GMMA" in op})
    assert any(op.startswith("UTMALDG") for op in ops) and any(op.startswith("UTMASTG") for op in ops)
    assert not any(op.startswith(("STL", "LDL")) for op in ops), "ptxas spilled registers to local memory"
    kernel = "fp8_gemm_tensor" if below == "triton_tensor" else "fp8_gemm_block"
    pointer = _sass_ops(module, tmp_path, kernel, below)
    assert any(op.startswith("QGMMA") for op in pointer) and not any(op.startswith("UTMALDG") for op in pointer)


def _loads_between_wait_and_fold(ops: list[str]) -> list[int]:
    """For each depth-0 wait on the tensor cores (WARPGROUP.DEPBAR) that the fold's FFMAs follow, the number of
    global loads (LDG, not the cp.async LDGSTS) issued between the wait and the first FFMA."""
    counts = []
    for at, op in enumerate(ops):
        if not op.startswith("WARPGROUP.DEPBAR"):
            continue
        for nxt in range(at + 1, len(ops)):
            if ops[nxt].startswith(("WARPGROUP.DEPBAR", "QGMMA")):
                break  # no fold after this wait
            if ops[nxt] == "FFMA":
                counts.append(sum(o.startswith("LDG.") for o in ops[at + 1:nxt]))
                break
    return counts


def test_rung_9_loads_the_next_groups_scales_before_the_dot_where_rung_4_loads_them_after_its_wait(
        module: ModuleType, tmp_path: Path) -> None:
    """Rung 4 (triton_block_tma) loads a group's scales after the wait for its dot and folds with them at once:
    global loads sit between the wait and the FFMAs. Rung 9 (triton_block_tma_prefetch) loads them a group ahead:
    none there, while it still loads scales (LDG) and stays fp8 wgmma fed by TMA, without spills."""
    import re

    ahead = _sass_ops(module, tmp_path, module.TMA["triton_block_tma_prefetch"], "triton_block_tma_prefetch")
    after = _sass_ops(module, tmp_path, module.TMA["triton_block_tma"], "triton_block_tma")
    assert any(re.match(r"QGMMA\.\S*E4M3", op) for op in ahead) and any(op.startswith("UTMALDG") for op in ahead)
    assert not any(op.startswith(("STL", "LDL")) for op in ahead), "ptxas spilled registers to local memory"
    assert sum(op.startswith("LDG.") for op in ahead) >= 3  # a row scale pair and the block scale, at least once
    behind, waits = _loads_between_wait_and_fold(after), _loads_between_wait_and_fold(ahead)
    assert behind and max(behind) > 0, behind
    assert waits and max(waits) == 0, waits
