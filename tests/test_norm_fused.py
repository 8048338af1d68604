"""The fused-norm artifact's module on CPU torch, no Triton: what it refuses before any tensor, where its
baselines run, the bytes it declares, and its eager functions against its own fp64 reference."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ART = Path(__file__).resolve().parent.parent / "artifacts" / "norm_fused_bf16_sm90a"


def _module():
    sys.path.insert(0, str(ART))
    spec = importlib.util.spec_from_file_location("norm_fused_cpu", ART / "norm_fused.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize(("params", "message"), [
    ({"op": "softmax", "rows": 2, "hidden": 10, "dtype": "bfloat16"}, "op 'softmax' is not one of"),
    ({"op": "rmsnorm", "rows": 2, "hidden": 20000, "dtype": "bfloat16"}, "hidden must be 1..16384"),
    ({"op": "layernorm", "rows": 0, "hidden": 64, "dtype": "bfloat16"}, "rows positive"),
    ({"op": "rmsnorm_fp8", "rows": 2, "hidden": 64, "dtype": "bfloat16"}, "has dtype float8_e4m3fn"),
])
def test_unsupported_params_are_refused_before_any_tensor(params: dict[str, object], message: str):
    with pytest.raises(ValueError, match=message):
        _module().make_inputs(params, 0, "cpu")


def test_compile_runs_only_at_the_claimed_shapes_and_the_copy_only_as_the_roof():
    mod = _module()
    ran = {(p["op"], p["rows"]): [v for v in mod.VARIANTS if mod.applies(v, p)] for p in mod.GRID}
    assert ran[("copy", 4099)] == ["copy"]
    assert "compile" in ran[("layernorm", 16384)] and "compile" not in ran[("layernorm", 4099)]
    assert "liger_fused" in ran[("rmsnorm_fp8", 32768)] and "liger_fused" not in ran[("layernorm", 32768)]


def test_the_declared_bytes_are_the_compulsory_ones():
    mod = _module()
    n, h, rows = 16384 * 8192, 8192, 16384
    assert mod.work({"op": "copy", "rows": rows, "hidden": h})["bytes"] == 8 * n
    assert mod.work({"op": "layernorm", "rows": rows, "hidden": h})["bytes"] == 8 * n + 4 * h
    assert mod.work({"op": "rmsnorm_fp8", "rows": rows, "hidden": h})["bytes"] == 7 * n + 2 * h + 4 * rows


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm", "rmsnorm_fp8"])
def test_eager_matches_the_fp64_reference_off_the_tile(op: str):
    mod = _module()
    params = {"op": op, "rows": 5, "hidden": 1000, "dtype": mod.DTYPE[op]}
    inputs = mod.make_inputs(params, 3, "cpu")
    got = mod.load("eager")(dict(inputs), mod.make_outputs(params, inputs))
    ref = mod.reference(params, inputs)
    atol, rtol, _ = mod.TOLERANCES[params["dtype"]]
    assert sorted(got) == sorted(ref)
    for k, want in ref.items():
        assert torch.allclose(got[k].double(), want.double(), rtol=rtol, atol=atol), k


def test_without_liger_its_variants_say_how_to_install_it():
    if importlib.util.find_spec("liger_kernel") is not None:
        pytest.skip("Liger-Kernel is installed here")
    with pytest.raises(RuntimeError, match="pip install liger-kernel"):
        _module().load("liger_fused")
