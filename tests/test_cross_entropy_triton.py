"""The cross-entropy artifact's Triton kernels under Triton's CPU interpreter: every rung against an fp64
reference on shapes no chunk divides, outputs poisoned with NaN first (skipped where Triton is absent, as in CI)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")
interpreter = pytest.importorskip("triton.runtime.interpreter")


def _index_of_a_scalar(tensor, scope):  # a runtime int argument is a 1-element array there, and numpy >= 2.4
    _patch_lang_tensor(tensor, scope)  # refuses int() of it: `range(0, V, BLOCK)` needs the one element
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_patch_lang_tensor = interpreter._patch_lang_tensor
if getattr(_patch_lang_tensor, "__name__", "") != "_index_of_a_scalar":
    interpreter._patch_lang_tensor = _index_of_a_scalar

ART = Path(__file__).resolve().parent.parent / "artifacts" / "cross_entropy_bf16_sm90a"
pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                reason="needs TRITON_INTERPRET=1 from the start (never set here: it would hold for the "
                                       "whole process)")


def _module():
    sys.path.insert(0, str(ART))
    spec = importlib.util.spec_from_file_location("cross_entropy_art", ART / "cross_entropy.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("rows,cols", [(3, 5003), (2, 8192), (3, 20001)])
@pytest.mark.parametrize("variant", ["triton_online", "triton_prefetch", "triton_split"])
def test_every_rung_matches_fp64(rows: int, cols: int, variant: str):
    mod = _module()
    params = {"op": "ce", "rows": rows, "cols": cols, "dtype": "bfloat16"}
    inputs = mod.make_inputs(params, 7, "cpu")
    inputs["t"][0], inputs["t"][-1] = 0, cols - 1  # the first and last column are targets too
    inputs["x"][1 % rows, cols // 2] = 30.0  # a late maximum: the running sums are rescaled
    outputs = mod.make_outputs(params, inputs)
    outputs["loss"].fill_(float("nan"))
    assert mod.applies(variant, params)
    mod.load(variant)(dict(inputs), dict(outputs))
    ref = mod.reference(params, inputs)["loss"]
    got = outputs["loss"].double()
    assert torch.isfinite(got).all()
    assert torch.allclose(got, ref, rtol=1e-5, atol=1e-5), (got, ref)


def test_the_roofs_are_exact():
    mod = _module()
    for op, variant in (("copy", "triton_copy"), ("read", "triton_read")):
        params = {"op": op, "rows": 3, "cols": 12000, "dtype": "bfloat16"}  # 18000 words: a partial block
        inputs = mod.make_inputs(params, 1, "cpu")
        outputs = mod.make_outputs(params, inputs)
        for t in outputs.values():
            t.fill_(float("nan") if t.dtype.is_floating_point else -7)
        mod.load(variant)(dict(inputs), dict(outputs))
        ref = mod.reference(params, inputs)
        assert all(torch.equal(outputs[k].double(), ref[k].double()) for k in ref)


def test_unsupported_params_are_refused_before_any_kernel():
    mod = _module()
    with pytest.raises(ValueError, match="cols 200000"):
        mod.make_inputs({"op": "ce", "rows": 2, "cols": 200000, "dtype": "bfloat16"}, 0, "cpu")
    with pytest.raises(ValueError, match="op must be"):
        mod.make_inputs({"op": "softmax", "rows": 2, "cols": 10, "dtype": "bfloat16"}, 0, "cpu")
