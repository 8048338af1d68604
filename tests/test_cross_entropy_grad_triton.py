"""The cross-entropy artifact's gradient kernel (ce_grad_kernel) under Triton's CPU interpreter: every gradient
rung, and the in-place twin, against the module's fp64 loss and gradient on shapes no chunk divides, rows that
the persistent grid's two programs do not share evenly, ignored targets, a late maximum that forces the
rescale, outputs poisoned with NaN first and inputs unchanged afterwards. The interpreter models no cache, so
the eviction hints and the L2-sized grid are checked for their arithmetic only. Skipped without Triton.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from triton_interpreter import load_artifact, patch

if os.environ.get("TRITON_INTERPRET") != "1":  # never set here: Triton would stay interpreted for the process
    pytest.skip("needs TRITON_INTERPRET=1 from the start", allow_module_level=True)
torch = pytest.importorskip("torch")
pytest.importorskip("triton")

ARTIFACT = Path(__file__).resolve().parents[1] / "artifacts" / "cross_entropy_bf16_sm90a"
RTOL = 2.0 ** -7 * 1.01  # one bf16 ulp: the interpreter rounds fp32 to bf16 toward zero (the GPU to nearest)
LOSS_TOL = 1e-5  # the loss stays fp32: lse from fp32 sums of 2^x, against fp64
DOMINANT_ATOL = 2.0 ** -18  # fp32's lse near 36 (base 2), 2^-24 of it, on an element near -2e-6
GRAD_VARIANTS = ["triton_grad", "triton_grad_reverse", "triton_grad_hints", "triton_grad_l2", "triton_grad_inplace"]
SHAPES = [(3, 5003, 0), (5, 20001, 0), (7, 8192, 4)]  # (rows, cols, ignore_every): 8192 fills its chunks exactly


@pytest.fixture(scope="module")
def module() -> ModuleType:
    patch()
    return load_artifact(ARTIFACT, "cross_entropy.py", "cross_entropy_grad_under_test")


def _params(rows: int, cols: int, every: int) -> dict:
    return {"op": "ce_grad", "rows": rows, "cols": cols, **({"ignore_every": every} if every else {}),
            "dtype": "bfloat16_grad"}


def _inputs(module: ModuleType, params: dict, dominant: bool = True) -> dict:
    inputs = module.make_inputs(params, 11, "cpu")
    rows, cols = params["rows"], params["cols"]
    inputs["t"][0], inputs["t"][-2] = 0, cols - 1  # the first and last column are targets (row -2 is kept)
    inputs["x"][0, cols // 2 + 3] = 30.0  # a late maximum: the running sums are rescaled, softmax(x_t) near 0
    if dominant:
        inputs["x"][rows - 2, cols - 1] = 25.0  # a dominant target: softmax(x_t) - 1 near -2e-6
    return inputs


def _dominant(got: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradient without its dominant target's element, which is checked absolutely (DOMINANT_ATOL), and that
    element's error beyond RTOL. fp32 cannot give softmax(x_t) - 1 relatively when it is -2e-6: lse (about 36
    in base 2) is known to 2^-24 of itself, 4e-6, in Liger's and Inductor's fp32 too."""
    r, c = got.shape[0] - 2, got.shape[1] - 1
    err = (got[r, c].double() - ref[r, c]).abs() - RTOL * ref[r, c].abs()
    keep = torch.ones_like(ref, dtype=torch.bool)
    keep[r, c] = False
    return got[keep], ref[keep], err


def _close(got: torch.Tensor, ref: torch.Tensor, rtol: float) -> bool:
    return bool(torch.isfinite(got).all()) and bool(((got.double() - ref).abs() <= rtol * ref.abs()).all())


def _run(module: ModuleType, variant: str, params: dict, inputs: dict) -> dict:
    outputs = module.make_outputs(params, inputs)
    for t in outputs.values():
        t.fill_(float("nan"))
    assert module.applies(variant, params)
    assert module.load(variant)(dict(inputs), dict(outputs)) is None
    return outputs


@pytest.mark.parametrize(("rows", "cols", "every"), SHAPES)
@pytest.mark.parametrize("variant", GRAD_VARIANTS)
def test_loss_and_gradient_match_fp64(module: ModuleType, variant: str, rows: int, cols: int, every: int) -> None:
    params = _params(rows, cols, every)
    inputs = _inputs(module, params)
    pristine = {k: t.clone() for k, t in inputs.items()}
    out, ref = _run(module, variant, params, inputs), module.reference(params, inputs)
    assert torch.equal(inputs["x"].view(torch.int16), pristine["x"].view(torch.int16))  # the logits untouched
    assert torch.equal(inputs["t"], pristine["t"])
    assert torch.allclose(out["loss"].double(), ref["loss"], rtol=LOSS_TOL, atol=LOSS_TOL)
    got, want, err = _dominant(out["grad"], ref["grad"])
    assert _close(got, want, RTOL) and err <= DOMINANT_ATOL
    ignored = inputs["t"] == module.IGNORE_INDEX
    assert int(ignored.sum()) == module.ignored_rows(params)
    assert (out["grad"][ignored] == 0).all() and (out["loss"][ignored] == 0).all()  # zeros, not NaN


def test_the_check_fails_on_a_wrong_gradient(module: ModuleType) -> None:
    """The comparison the tests above make rejects a gradient a little off: the softmax 2% high (a stale or
    rounded log-sum-exp), the target's -1 left out, and one row's gradient given to its neighbour."""
    params = _params(3, 5003, 0)
    inputs = _inputs(module, params)
    out, ref = _run(module, "triton_grad_l2", params, inputs), module.reference(params, inputs)["grad"]
    softmax = ref.clone()
    softmax[torch.arange(3), inputs["t"]] += 1.0
    wrong = {"right": ref, "softmax 2% high": softmax * 1.02 - (softmax - ref), "no one-hot": softmax,
             "rows rolled": ref.roll(1, 0)}
    passed = {name: _close(*_dominant(out["grad"], g)[:2], RTOL) for name, g in wrong.items()}
    assert passed == {"right": True, "softmax 2% high": False, "no one-hot": False, "rows rolled": False}


@pytest.mark.parametrize("block", [4096, 16384])  # 16384: triton_grad_l2's chunk at one program an SM
def test_mean_scales_every_element(module: ModuleType, block: int) -> None:
    """The kernel's scale argument: reduction mean is the sum's gradient over n non-ignored rows."""
    import kernels

    params = _params(7, 5003, 4)
    inputs = _inputs(module, params)
    outputs = module.make_outputs(params, inputs)
    for o in outputs.values():
        o.fill_(float("nan"))
    n = params["rows"] - module.ignored_rows(params)
    kernels.ce_grad_kernel[(2,)](inputs["x"], inputs["t"], outputs["loss"], outputs["grad"], 5003, 7, 1.0 / n,
                                 IGNORE=module.IGNORE_INDEX, BLOCK=block, REVERSE=True, HINTS=block > 4096)
    ref = module.reference(params, inputs)
    assert _close(*_dominant(outputs["grad"], ref["grad"] / n)[:2], RTOL)
    assert not _close(*_dominant(outputs["grad"], ref["grad"])[:2], RTOL)
    assert torch.allclose(outputs["loss"].double(), ref["loss"], rtol=LOSS_TOL, atol=LOSS_TOL)  # unscaled


def test_module_tolerance_holds_ours(module: ModuleType) -> None:
    """The harness's comparison under the module's TOLERANCES passes the kernel's outputs (the GPU rounds to
    nearest, so half the interpreter's error) and refuses the softmax without its one-hot."""
    sys.path.insert(0, str(ARTIFACT.parent / "common"))
    import kwiki_harness as kh

    params = _params(7, 8192, 4)
    inputs = _inputs(module, params, dominant=False)  # random logits never make one (the GPU's inputs)
    out, ref = _run(module, "triton_grad_hints", params, inputs), module.reference(params, inputs)
    atol, rtol, _ = module.TOLERANCES[params["dtype"]]
    for name in ("loss", "grad"):
        assert kh.compare(out[name], ref[name], atol, rtol, name)[0]
    no_onehot = ref["grad"].clone()
    keep = inputs["t"] != module.IGNORE_INDEX
    no_onehot[torch.arange(7)[keep], inputs["t"][keep]] += 1.0
    assert not kh.compare(out["grad"], no_onehot, atol, rtol, "grad")[0]
