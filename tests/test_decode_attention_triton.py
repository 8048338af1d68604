"""decode_attention_bf16_sm90a's Triton kernels under Triton's CPU interpreter: every Triton variant against the
module's fp64 reference, on outputs poisoned with NaN, at small shapes off every tile (a KV length no block
divides, a ragged last page, more splits than one combine block), and the module's rejections. Needs Triton and
torch (CI has neither: skipped).

The interpreter's tl.dot of bf16 operands returns garbage (it multiplies their raw bits), so the kernels get the
inputs' exact values as fp32 here: the indexing, masks, paging, splits and merges are what this checks; the
bf16 rounding of the probabilities before the PV product is the GPU's, and
test_tolerance_covers_bf16_probabilities bounds its error in torch."""

import importlib
import math
import os
import sys
from pathlib import Path

import pytest

ART = Path(__file__).resolve().parent.parent / "artifacts" / "decode_attention_bf16_sm90a"


@pytest.fixture(scope="module")
def mod():
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 from the start (never set here: it would hold for the whole process)")
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    from triton.runtime import interpreter

    patch = interpreter._patch_lang_tensor

    def index_of_one_element(tensor, scope):  # the interpreter's scalars are 1-element arrays, which numpy 2
        patch(tensor, scope)  # no longer converts with int(): a loop bound from an argument would raise
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interpreter._patch_lang_tensor = index_of_one_element
    sys.path.insert(0, str(ART))
    try:
        yield importlib.import_module("decode")
    finally:
        sys.path.remove(str(ART))
        interpreter._patch_lang_tensor = patch


def params(mod, batch, kv_len, layout, hq=8, hkv=2):
    p = mod._decode(batch, kv_len, layout)
    p.update(q_heads=hq, kv_heads=hkv)
    return p


def run(mod, name, p, seed=0):
    import torch

    inputs = mod.make_inputs(p, seed, "cpu")
    pristine = {k: t.clone() for k, t in inputs.items()}
    outputs = mod.make_outputs(p, inputs)
    for t in outputs.values():
        t.fill_(float("nan"))
    wide = {k: t.float() if t.dtype == torch.bfloat16 else t for k, t in inputs.items()}
    mod.load(name)(wide, outputs)
    for k, t in inputs.items():
        assert torch.equal(t, pristine[k]), f"{name} changed input {k}"
    ref = mod.reference(p, inputs)
    atol, rtol, _ = mod.TOLERANCES[p["dtype"]]
    for k, want in ref.items():
        got = outputs[k].double()
        assert torch.isfinite(got).all(), f"{name}: non-finite output"
        err = (got - want).abs()
        assert bool((err <= atol + rtol * want.abs()).all()), f"{name} {p}: max error {float(err.max()):.3g}"
    return outputs, ref


@pytest.mark.parametrize("name", ["triton_gqa", "triton_split"])
@pytest.mark.parametrize("batch,kv_len", [(2, 203), (1, 1100)])
def test_contiguous(mod, name, batch, kv_len, monkeypatch):
    monkeypatch.setattr(mod, "MIN_CHUNK", 64)  # 1100 tokens: 18 splits, merged in two steps of 16
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    run(mod, name, params(mod, batch, kv_len, "contiguous"))


@pytest.mark.parametrize("batch,kv_len", [(2, 203), (1, 1100), (3, 64)])
def test_paged(mod, batch, kv_len, monkeypatch):
    monkeypatch.setattr(mod, "MIN_CHUNK", 64)
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    run(mod, "triton_paged", params(mod, batch, kv_len, "paged"))


def test_split_plan_covers(mod):
    for b, n in [*mod.SHAPES, (128, 65536), (1, 1024), (1, 65536)]:
        chunk, splits = mod.split_plan(b, mod.HKV, n, 132)
        assert chunk % mod.BLOCK_N == 0 and (splits - 1) * chunk < n <= splits * chunk
        assert splits <= mod.COMBINE_SPLITS


def test_read_roof(mod):
    run(mod, "triton_read", {"op": "read", "mib": 1, "dtype": "bfloat16"})


def test_tolerance_catches_a_dropped_tile(mod):
    """The tolerance is tight enough: a kernel that skipped one 64-token tile of 1100 would fail it."""
    p = params(mod, 1, 1100, "contiguous")
    inputs = mod.make_inputs(p, 3, "cpu")
    ref = mod.reference(p, inputs)["out"]
    cut = dict(inputs, k=inputs["k"][:, :, 64:].contiguous(), v=inputs["v"][:, :, 64:].contiguous())
    wrong = mod.reference(dict(p, kv_len=1100 - 64), cut)["out"]
    atol, rtol, _ = mod.TOLERANCES["bfloat16"]
    assert not bool(((wrong - ref).abs() <= atol + rtol * ref.abs()).all())
    assert math.isclose(float(ref.abs().mean()), float(wrong.abs().mean()), rel_tol=0.5)


def test_rejects(mod):
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        mod.make_inputs(params(mod, 1, 64, "contiguous", hq=12, hkv=8), 0, "cpu")
    with pytest.raises(ValueError, match="head_dim"):
        mod.make_inputs(dict(params(mod, 1, 64, "contiguous"), head_dim=96), 0, "cpu")


def test_tolerance_covers_bf16_probabilities(mod):
    """The GPU kernels round the probabilities to bf16 before the PV product (fp32 accumulation) and the output
    to bf16: emulated in torch at the longest claimed KV length and the shortest, their error stays within half
    the tolerance."""
    import torch

    atol, rtol, _ = mod.TOLERANCES["bfloat16"]
    for n in (32768, 1007):
        p = params(mod, 1, n, "contiguous", hq=4, hkv=1)
        inputs = mod.make_inputs(p, 5, "cpu")
        ref = mod.reference(p, inputs)["out"].reshape(4, -1)
        q, k, v = (inputs[x].float().reshape(-1, 128) for x in ("q", "k", "v"))
        s = (q @ k.T) / 128 ** 0.5
        e = torch.exp(s - s.max(1, keepdim=True).values)
        got = ((e.bfloat16().float() @ v) / e.sum(1, keepdim=True)).bfloat16().double()
        assert bool(((got - ref).abs() <= (atol + rtol * ref.abs()) / 2).all()), n
