"""stream_k_gemm_sm90a's Triton kernels under Triton's CPU interpreter, against an fp64 reference.

Small tiles (32x32, 16-deep k-blocks) and few "SMs" so that the small shapes here cut tiles the way the GPU's
shapes do: M, N and K off every tile, split-K with a short last slice, Stream-K ranges that cross tile
boundaries, that lie inside one tile (a tile split among three or more programs), and grids of more "SMs" than
iterations (capped: an empty program inside a split tile would never raise its flag, and its finisher would
wait forever). Outputs are poisoned with NaN first; inputs must be unchanged afterwards.

The interpreter runs the programs of a grid one at a time, in order: Stream-K's fix-up is written so that the
program that finishes a split tile has the highest id of its contributors (see streamk_kernel), so every flag
it waits for is already raised here. The interpreter checks indexing, masks and the fix-up's arithmetic; it
cannot check the memory ordering of the flags (release, acquire, the barriers): that is the GPU's check, the
harness's, on every shape of the GRID. Skipped without Triton.
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

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "stream_k_gemm_sm90a"
SMALL = {"bm": 32, "bn": 32, "bk": 16, "warps": 4, "stages": 1}


@pytest.fixture(scope="module")
def module() -> ModuleType:
    patch()
    return load_artifact(ARTIFACT, "stream_k_gemm.py", "stream_k_gemm_under_test")


def _run(module: ModuleType, variant: str, m: int, n: int, k: int, sms: int) -> tuple[object, object]:
    params = {"m": m, "n": n, "k": k, "dtype": "bfloat16"}
    inputs = module.make_inputs(params, 11, "cpu")
    pristine = {name: t.clone() for name, t in inputs.items()}
    outputs = module.make_outputs(params, inputs)
    outputs["c"].fill_(float("nan"))
    assert module.launcher(variant, sms, **SMALL)(inputs, outputs) is None
    assert all(torch.equal(inputs[name], pristine[name]) for name in inputs)
    return outputs["c"], module.reference(params, inputs)["c"]


CASES = [  # (variant, m, n, k, sms): 32x32 tiles, 16-deep k-blocks; no block divides M, N or K
    ("triton_dp", 70, 50, 100, 4),
    ("triton_splitk", 70, 50, 100, 4),      # 6 tiles x 7 k-blocks: S = 2, the last slice 3 k-blocks
    ("triton_splitk", 40, 90, 300, 5),      # 6 tiles x 19 k-blocks: S = 4, the last slice 4 k-blocks
    ("triton_streamk", 70, 50, 100, 4),     # 42 iterations on 4 programs: ranges of 10 or 11 cross tiles
    ("triton_streamk", 70, 50, 100, 13),    # ranges of 3 or 4 inside a 7-iteration tile: 2 to 4 per tile
    ("triton_streamk", 40, 90, 300, 5),     # long tiles, each split between two programs at most
    ("triton_streamk", 33, 20, 40, 8),      # 2 tiles x 3 k-blocks on 8 programs: capped at 6, none empty
    ("triton_streamk", 33, 20, 40, 20),     # on 20 "SMs": uncapped, empty programs inside a split tile hang
    ("triton_streamk", 70, 50, 100, 60),    # 42 iterations on 60 "SMs": the same, capped at 42
    ("triton_streamk", 64, 64, 64, 4),      # on the tile: 4 tiles x 4 k-blocks, one whole tile per program
]


@pytest.mark.parametrize(("variant", "m", "n", "k", "sms"), CASES)
def test_kernel_matches_fp64(module: ModuleType, variant: str, m: int, n: int, k: int, sms: int) -> None:
    c, ref = _run(module, variant, m, n, k, sms)
    y = c.double()  # type: ignore[attr-defined]
    atol, rtol, _ = module.TOLERANCES["bfloat16"]
    # the interpreter rounds fp32 to bf16 toward zero (the GPU to nearest): one bf16 ulp, 2^-7, beside rtol
    assert torch.isfinite(y).all()
    err = (y - ref).abs()  # type: ignore[operator]
    assert (err <= atol + max(rtol, 2.0 ** -7) * ref.abs()).all(), err.max()  # type: ignore[attr-defined]


def test_streamk_leaves_flags_down(module: ModuleType) -> None:
    """Every flag a call raises is reset by the finisher that reads it, so the next call starts from zeros."""
    _run(module, "triton_streamk", 70, 50, 100, 13)
    flags = module.FLAGS[("cpu", 13)]
    assert int(flags.abs().sum()) == 0


def test_streamk_is_deterministic(module: ModuleType) -> None:
    first, _ = _run(module, "triton_streamk", 70, 50, 100, 13)
    again, _ = _run(module, "triton_streamk", 70, 50, 100, 13)
    assert torch.equal(first, again)


def test_split_factor_and_waves(module: ModuleType) -> None:
    assert module.waves(1792, 1280, 132) == (140, 140 / 132, 8)          # the sweep's worst last wave
    assert module.split_factor(140, 64, 132) == 4                         # 560 units: 5 waves of a quarter tile
    assert module.split_factor(64, 512, 132) == 2                         # 128 units: one wave of half tiles
    assert module.split_factor(6, 3, 4) == 1                              # slices under 4 k-blocks: no split
    sweep = [p for p in module.GRID if (p["m"], p["n"]) in module.SWEEP]
    assert len(sweep) == len(module.SWEEP) and all(p["k"] == module.K_SWEEP for p in sweep)
    assert all(1.0 <= module.waves(p["m"], p["n"], 132)[1] <= 2.0 for p in sweep)
    assert module.waves(4096, 4096, 132) == (1024, 1024 / 132, 100)       # MANY_WAVES: at most 1.031x to gain


def test_contract(module: ModuleType) -> None:
    with pytest.raises(ValueError, match="positive"):
        module.make_inputs({"m": 0, "n": 8, "k": 8, "dtype": "bfloat16"}, 0, "cpu")
    with pytest.raises(ValueError, match="bfloat16"):
        module.make_inputs({"m": 8, "n": 8, "k": 8, "dtype": "float16"}, 0, "cpu")
