"""decode_attention_bf16_sm90a's Triton kernels under Triton's CPU interpreter: every Triton variant against the
module's fp64 reference, on outputs poisoned with NaN, at small shapes off every tile (a KV length no block
divides, a ragged last page of 16 or of 64 tokens, more splits than one combine block, 4 query tokens causal among
themselves), and the module's rejections. Needs Triton and torch (CI has neither: skipped).

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


def params(mod, batch, kv_len, layout, hq=8, hkv=2, page=16, q_len=1):
    p = mod._decode(batch, kv_len, layout, page=page, q_len=q_len)
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


@pytest.mark.parametrize("name", ["triton_mha", "triton_gqa", "triton_split", "triton_split_fused"])
@pytest.mark.parametrize("batch,kv_len", [(2, 203), (1, 1100)])
def test_contiguous(mod, name, batch, kv_len, monkeypatch):
    monkeypatch.setattr(mod, "MIN_CHUNK", 64)  # 1100 tokens: 18 splits, merged in two steps of 16
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    run(mod, name, params(mod, batch, kv_len, "contiguous"))


def _counts(launch):
    """triton_split_fused's counts (one int32 a pair, by device and pairs) from its launcher's closure."""
    return launch.__closure__[launch.__code__.co_freevars.index("counts")].cell_contents


def test_fused_leaves_its_counts_at_zero_and_is_right_again(mod, monkeypatch):
    """The pair's last program merges and sets the pair's count back to 0, so the next launch (the harness times
    hundreds on the same buffers) merges again: twice on fresh inputs, 18 splits merged 16 at a time, the counts
    0 after each, no other kernel. At one split a pair it writes the output directly: no count at all."""
    import torch

    monkeypatch.setattr(mod, "MIN_CHUNK", 64)
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    launched = []
    kernels = importlib.import_module("kernels")
    monkeypatch.setattr(kernels.combine_kernel, "run", lambda *a, **k: launched.append("combine"))
    launch = mod.load("triton_split_fused")
    p = params(mod, 1, 1100, "contiguous")
    for seed in (0, 1):
        inputs = mod.make_inputs(p, seed, "cpu")
        out = mod.make_outputs(p, inputs)
        out["out"].fill_(float("nan"))
        launch({k: t.float() for k, t in inputs.items()}, out)
        ref = mod.reference(p, inputs)["out"]
        atol, rtol, _ = mod.TOLERANCES["bfloat16"]
        assert bool(((out["out"].double() - ref).abs() <= atol + rtol * ref.abs()).all()), seed
        (count,) = _counts(launch).values()
        assert count.shape == (2,) and not bool(count.any())
    assert launched == []
    mod.load("triton_split")({k: t.float() for k, t in inputs.items()}, out)  # the patch sees rung 3's combine
    assert launched == ["combine"]
    assert mod.split_plan(64, 2, 203, 8)[1] == 1
    run(mod, "triton_split_fused", params(mod, 64, 203, "contiguous"))
    assert set(_counts(launch)) == {(torch.device("cpu"), 2)}  # the one-split launch made none


def test_fused_refuses_four_query_tokens(mod):
    p = params(mod, 1, 203, "contiguous", q_len=4)
    assert not mod.applies("triton_split_fused", p)
    inputs = mod.make_inputs(p, 0, "cpu")
    with pytest.raises(ValueError, match="triton_split_fused: q_len 4"):
        mod.load("triton_split_fused")(inputs, mod.make_outputs(p, inputs))


@pytest.mark.parametrize("batch,kv_len", [(2, 203), (1, 1100), (3, 64)])
def test_paged(mod, batch, kv_len, monkeypatch):
    monkeypatch.setattr(mod, "MIN_CHUNK", 64)
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    run(mod, "triton_paged", params(mod, batch, kv_len, "paged"))


@pytest.mark.parametrize("batch,kv_len", [(2, 203), (1, 1100), (3, 64), (2, 1007)])
def test_paged64(mod, batch, kv_len, monkeypatch):
    """Pages of 64 (one tile a page, one table load a tile): a ragged last page (203 = 3 x 64 + 11, 1100 = 17 x 64 +
    12, 1007 = 15 x 64 + 47), one exact page (64), 18 splits merged in two steps."""
    monkeypatch.setattr(mod, "MIN_CHUNK", 64)
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    run(mod, "triton_paged64", params(mod, batch, kv_len, "paged", page=64))


def test_paged64_rejects_a_page_that_splits_a_tile(mod):
    p = params(mod, 1, 100, "paged", page=16)
    inputs = mod.make_inputs(p, 0, "cpu")
    with pytest.raises(ValueError, match="triton_paged64: pages of 16 tokens"):
        mod.load("triton_paged64")(inputs, mod.make_outputs(p, inputs))


@pytest.mark.parametrize("name", ["triton_gqa", "triton_split"])
@pytest.mark.parametrize("batch,kv_len", [(2, 203), (1, 1100), (1, 1027), (2, 4)])
def test_four_query_tokens(mod, name, batch, kv_len, monkeypatch):
    """4 query tokens, each seeing the cache up to itself: 16 rows a tile (4 heads x 4 tokens). 1027 tokens in splits
    of 256 leave a last split of 3 tokens that the first new token (which sees up to token 1023) never reaches:
    its partial is empty (-inf) and the combine must weigh it 0; 4 tokens: each new token sees only the new ones."""
    monkeypatch.setattr(mod, "MIN_CHUNK", 64 if kv_len == 1100 else 256)
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    if kv_len == 1027 and name == "triton_split":
        chunk, splits = mod.split_plan(batch, 2, kv_len, mod._sm_count(__import__("torch").device("cpu")))
        assert (splits - 1) * chunk > kv_len - 4  # the last split lies past the first new token's reach
    run(mod, name, params(mod, batch, kv_len, "contiguous", q_len=4))


def test_four_query_tokens_paged64(mod, monkeypatch):
    monkeypatch.setattr(mod, "MIN_CHUNK", 64)
    monkeypatch.setattr(mod, "COMBINE_SPLITS", 16)
    run(mod, "triton_paged64", params(mod, 2, 203, "paged", page=64, q_len=4))


def test_causal_mask_is_needed(mod):
    """The check would catch a kernel that let the 4 new tokens see each other's future: without the mask the
    outputs of the first three tokens leave the tolerance."""
    import torch

    p = params(mod, 1, 203, "contiguous", q_len=4)
    inputs = mod.make_inputs(p, 4, "cpu")
    ref = mod.reference(p, inputs)["out"]
    q = inputs["q"].double().view(1, 2, 4, 4, 128)
    s = torch.einsum("bhgtd,bhld->bhgtl", q, inputs["k"].double()) / 128 ** 0.5
    blind = torch.einsum("bhgtl,bhld->bhgtd", torch.softmax(s, -1), inputs["v"].double()).reshape(ref.shape)
    atol, rtol, _ = mod.TOLERANCES["bfloat16"]
    within = (blind - ref).abs() <= atol + rtol * ref.abs()
    assert bool(within[:, :, 3].all())  # the last new token sees the whole cache either way
    assert not bool(within[:, :, :3].all())


def test_shuffled_table_is_needed(mod):
    """The check would catch a kernel that read pages in storage order instead of through the block table."""
    p = params(mod, 2, 203, "paged", page=64)
    inputs = mod.make_inputs(p, 6, "cpu")
    ref = mod.reference(p, inputs)["out"]
    import torch

    inorder = dict(inputs, table=torch.arange(inputs["table"].numel(), dtype=torch.int32).view_as(inputs["table"]))
    wrong = mod.reference(p, inorder)["out"]
    atol, rtol, _ = mod.TOLERANCES["bfloat16"]
    assert not bool(((wrong - ref).abs() <= atol + rtol * ref.abs()).all())


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
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        mod.make_inputs(params(mod, 1, 64, "contiguous", hq=30, hkv=8), 0, "cpu")
    with pytest.raises(ValueError, match="at most 16 query rows"):
        mod.make_inputs(params(mod, 1, 64, "contiguous", hq=32, hkv=2, q_len=4), 0, "cpu")
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
