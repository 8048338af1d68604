"""attention_fwd_bf16_sm90a on a CPU: its params check (grouped heads that do not divide, refused before any CUDA
work), which variants run at which entries (the Triton rungs everywhere, the CUDA rungs at head dim 128, grouped
heads and the log-sum-exp included, the libraries where the log-sum-exp is not an output), its fp64 reference (K and
V repeated to the query heads, the log-sum-exp), the harness's comparison failing a wrong or unwritten log-sum-exp,
the zero-copy unwrapping of a library's output, and its Triton kernel under Triton's interpreter (skipped where
Triton is not installed, as in CI) at shapes that no block divides, causal and not, with and without the split of
the masked blocks."""

from __future__ import annotations

import importlib.util
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ART = Path(__file__).resolve().parents[1] / "artifacts" / "attention_fwd_bf16_sm90a"


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


attention = _load("kwiki_test_attention_fwd", ART / "attention.py")


def _params(**kw: Any) -> dict[str, Any]:
    return {"batch": 1, "heads": 2, "kv_heads": 2, "seq": 300, "head_dim": 128, "mask": "causal", "outputs": "o+lse",
            "dtype": "bfloat16", **kw}


@pytest.mark.parametrize(("bad", "says"), [({"head_dim": 96}, "head_dim 96"), ({"mask": "sliding"}, "mask 'sliding'"),
                                           ({"seq": 0}, "seq 0"), ({"dtype": "float16"}, "dtype 'float16'"),
                                           ({"kv_heads": 0}, "kv_heads 0"), ({"outputs": "lse"}, "outputs 'lse'"),
                                           ({"heads": 32, "kv_heads": 6}, "heads 32 is not a multiple of kv_heads 6")])
def test_unsupported_params_are_refused_located(bad: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=r"attention\.py") as err:
        attention._check(_params(**bad))
    assert says in str(err.value)


def test_grouped_heads_that_do_not_divide_are_refused_before_any_cuda_work() -> None:
    """make_inputs checks the params first: on a machine without CUDA, a CUDA call would raise torch's error instead."""
    pytest.importorskip("torch")
    with pytest.raises(ValueError, match=r"attention\.py.*heads 12 is not a multiple of kv_heads 8"):
        attention.make_inputs(_params(heads=12, kv_heads=8), 0, "cuda")


def test_triton_operands_that_do_not_group_are_named() -> None:
    torch = pytest.importorskip("torch")
    q, o = torch.zeros(1, 8, 40, 64), torch.zeros(1, 8, 40, 64)
    lse = torch.zeros(1, 8, 40)
    kv = torch.zeros(1, 2, 40, 64)
    assert attention.triton_operands_error(q, kv, kv, o, lse) is None
    k3 = torch.zeros(1, 3, 40, 64)
    assert "k has 3 heads, which do not divide q's 8" in attention.triton_operands_error(q, k3, k3, o, lse)
    assert "lse is (1, 8, 39)" in attention.triton_operands_error(q, kv, kv, o, lse[..., 1:])
    d96 = torch.zeros(1, 8, 40, 96)
    assert "head_dim 96" in attention.triton_operands_error(d96, d96[:, :2], d96[:, :2], d96, lse)


def test_grid_flops_bytes_and_the_one_flex_shape() -> None:
    for p in attention.GRID:
        attention._check(p)
    flex = [p for p in attention.GRID if attention.applies("flex_attention", p)]
    assert len(flex) == 1 and flex[0]["mask"] == "none" and flex[0]["head_dim"] == 128
    full = attention.work(_params(mask="none"))["flops"]
    assert full == 4.0 * 2 * 300 * 300 * 128 and attention.work(_params())["flops"] == full / 2
    gqa = _params(heads=32, kv_heads=8, outputs="o")  # FLOPs count the query heads; K and V are read once a KV head
    assert attention.work(gqa)["flops"] == 4.0 * 32 * 300 * 300 * 128 / 2
    assert attention.work(gqa)["bytes"] == 2.0 * 300 * 128 * (2 * 32 + 2 * 8)
    assert attention.work(_params())["bytes"] - attention.work(_params(outputs="o"))["bytes"] == 4.0 * 2 * 300


def test_the_triton_and_cuda_rungs_run_everywhere_the_libraries_where_the_lse_is_not_checked() -> None:
    for p in attention.GRID:
        ours = p["outputs"] == "o+lse"
        assert all(attention.applies(n, p) for n in attention.TRITON)  # interleaved with the libraries at "o"
        assert attention.applies("sdpa_flash", p) == (not ours)
        assert attention.applies("sdpa_efficient", p) == (not ours)
        assert all(attention.applies(n, p) for n in attention.FA3)  # O and the LSE, head dims 128 and 64
    claimed = [(4, 16, 8192, 64, 16, "none"), (1, 32, 8192, 128, 8, "none")]  # head dim 64; 32 query heads over 8
    for b, h, s, d, kv, mask in claimed:
        at = [p for p in attention.GRID if (p["batch"], p["heads"], p["seq"], p["head_dim"], p["kv_heads"],
                                            p["mask"]) == (b, h, s, d, kv, mask)]
        assert [p["outputs"] for p in at] == ["o"]  # one entry: the claims' ratios come from one timing loop
        lib = at[0]
        assert attention.applies("sdpa_cudnn", lib)
        assert all(attention.applies(n, lib) for n in attention.FA3)  # grouped too, and head dim 64
    off = [p for p in attention.GRID if p["outputs"] == "o+lse" and p["seq"] % 128]  # our rungs' LSE, off the tile
    assert {(p["head_dim"], p["kv_heads"] < p["heads"], p["mask"]) for p in off} >= {
        (128, False, "none"), (128, False, "causal"), (64, True, "none"), (64, True, "causal"), (128, True, "causal")}
    for p in off:  # each head dim 128 one beside its "o" twin: claims may select the "o" one
        assert p["head_dim"] != 128 or {**p, "outputs": "o"} in attention.GRID


def _explicit(q: Any, k: Any, v: Any, causal: bool, kv_of: Any) -> tuple[Any, Any]:
    """Attention head by head in fp64, query head h reading KV head kv_of(h): (o, lse)."""
    import torch

    b, h, s, d = q.shape
    o = torch.empty(b, h, s, d, dtype=torch.float64)
    lse = torch.empty(b, h, s, dtype=torch.float64)
    for i in range(b):
        for j in range(h):
            sc = q[i, j].double() @ k[i, kv_of(j)].double().T / math.sqrt(d)
            if causal:
                sc.masked_fill_(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
            lse[i, j] = torch.logsumexp(sc, -1)
            o[i, j] = torch.softmax(sc, -1) @ v[i, kv_of(j)].double()
    return o, lse


@pytest.mark.parametrize("causal", [False, True])
def test_the_reference_reads_kv_head_h_over_group_and_gives_the_natural_log_lse(causal: bool) -> None:
    torch = pytest.importorskip("torch")
    p = _params(batch=2, heads=8, kv_heads=2, seq=70, head_dim=64, mask="causal" if causal else "none")
    inputs = attention.make_inputs(p, 3, "cpu")
    assert inputs["k"].shape == inputs["v"].shape == (2, 2, 70, 64) and inputs["q"].shape == (2, 8, 70, 64)
    ref = attention.reference(p, inputs)
    outs = attention.make_outputs(p, inputs)
    assert set(ref) == set(outs) == {"o", "lse"} and outs["lse"].shape == ref["lse"].shape == (2, 8, 70)
    assert outs["lse"].dtype == torch.float32
    o, lse = _explicit(inputs["q"], inputs["k"], inputs["v"], causal, lambda h: h // 4)
    assert float((ref["o"] - o).abs().max()) < 1e-12 and float((ref["lse"] - lse).abs().max()) < 1e-12
    wrong, _ = _explicit(inputs["q"], inputs["k"], inputs["v"], causal, lambda h: h % 2)  # heads dealt round-robin
    assert float((ref["o"] - wrong).abs().max()) > 0.1
    assert set(attention.reference({**p, "outputs": "o"}, inputs)) == {"o"}


def test_the_harness_fails_an_unwritten_or_wrong_lse() -> None:
    """The comparison the harness makes (kwiki_harness.compare, under the module's one bf16 tolerance): the reference
    itself passes; an LSE left poisoned, in log2 instead of ln, without the row maximum, or of the scores without the
    softmax scale does not."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(ART.parent / "common"))
    import kwiki_harness as harness
    p = _params(seq=1000, heads=4, kv_heads=2, mask="none")
    inputs = attention.make_inputs(p, 5, "cpu")
    ref = attention.reference(p, inputs)["lse"]
    atol, rtol, _ = attention.TOLERANCES["bfloat16"]
    assert harness.compare(ref.float(), ref, atol, rtol, "lse")[0]
    q, k = inputs["q"].double(), inputs["k"].double().repeat_interleave(2, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(128)
    m = scores.amax(-1)
    wrong = {"poisoned": torch.full_like(ref, float("nan")), "log2": ref / math.log(2),
             "no row maximum": torch.log(torch.exp(scores - m[..., None]).sum(-1)),
             "no softmax scale": torch.logsumexp(scores * math.sqrt(128), -1)}
    for why, lse in wrong.items():
        assert not harness.compare(lse.float(), ref, atol, rtol, "lse")[0], why


def test_fp32_reference_agrees_with_fp64_past_the_fp64_length(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    p = _params(seq=attention.FP64_REF_SEQ + 52, heads=2, kv_heads=1)
    inputs = attention.make_inputs(p, 7, "cpu")
    fp32 = attention.reference(p, inputs)
    monkeypatch.setattr(attention, "FP64_REF_SEQ", 1 << 30)
    monkeypatch.setattr(attention, "SCORES_CHUNK", 1)  # one head at a time: the chunked loop
    fp64 = attention.reference(p, inputs)
    for name in ("o", "lse"):
        assert fp32[name].dtype == torch.float32 and fp64[name].dtype == torch.float64
        assert fp32[name].shape == fp64[name].shape
        assert float((fp32[name].double() - fp64[name]).abs().max()) < 1e-5  # a thousandth of the tolerance's atol


def test_a_library_output_is_returned_without_a_copy_or_copied_when_strided() -> None:
    torch = pytest.importorskip("torch")
    like = torch.empty(2, 3, 5, 4)
    view = torch.randn(2, 5, 3, 4).transpose(1, 2).contiguous().transpose(1, 2).transpose(1, 2)  # whole, contiguous
    own = attention._own(view, like)
    assert own._base is None and own.data_ptr() == view.data_ptr() and torch.equal(own, view)
    strided = torch.randn(2, 5, 3, 4).transpose(1, 2)  # (B,H,S,D) of a (B,S,H,D) buffer
    assert attention._own(strided, like) is None and torch.equal(like, strided)


@pytest.mark.parametrize("name, backend", [("sdpa_cudnn", "CUDNN_ATTENTION"), ("sdpa_flash", "FLASH_ATTENTION"),
                                           ("sdpa_efficient", "EFFICIENT_ATTENTION")])
def test_each_sdpa_baseline_is_restricted_to_its_own_backend(monkeypatch: pytest.MonkeyPatch, name: str,
                                                             backend: str) -> None:
    torch = pytest.importorskip("torch")
    import contextlib

    import torch.nn.attention as tna

    seen = []

    @contextlib.contextmanager
    def only(backends: list[Any]) -> Any:
        seen.append(list(backends))
        yield

    monkeypatch.setattr(tna, "sdpa_kernel", only)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", lambda q, k, v, **kw: q.clone())
    q, kv = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16)
    o = {"o": torch.empty_like(q)}
    attention.load(name)({"q": q, "k": kv, "v": kv, "causal": False}, o)
    assert seen == [[getattr(tna.SDPBackend, backend)]]  # that backend alone: no silent fallback to another


def _interpreted_kernels(monkeypatch: pytest.MonkeyPatch) -> Any:
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 from the start (never set here: it would hold for the whole process)")
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    import triton.runtime.interpreter as interp

    patch = getattr(interp, "_patch_lang_tensor", None)
    if patch is not None:  # the interpreter's int() of a scalar fails on NumPy 2 (its scalars are 1-element arrays)
        def patched(tensor: Any, scope: Any) -> None:
            patch(tensor, scope)
            scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
        monkeypatch.setattr(interp, "_patch_lang_tensor", patched)
    return _load("kwiki_test_attention_fwd_kernels", ART / "kernels.py")


@pytest.mark.parametrize(("seq", "block_m", "block_n", "heads", "kv_heads"),
                         [(200, 128, 128, 2, 2), (77, 64, 32, 2, 2), (150, 64, 64, 4, 2)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("split", [False, True])
def test_triton_kernel_matches_fp64(monkeypatch: pytest.MonkeyPatch, seq: int, block_m: int, block_n: int, heads: int,
                                    kv_heads: int, causal: bool, split: bool) -> None:
    kernels = _interpreted_kernels(monkeypatch)
    import torch

    b, h, d = 1, heads, 128 if block_m == 128 else 64
    p = _params(batch=b, heads=h, kv_heads=kv_heads, seq=seq, head_dim=d, mask="causal" if causal else "none")
    g = torch.Generator().manual_seed(seq + 2 * causal + split)
    # fp16: the interpreter's tl.dot reads bf16 operands as raw bits; the kernel takes its types from its pointers
    q = torch.randn(b, h, seq, d, generator=g).half()
    k, v = (torch.randn(b, kv_heads, seq, d, generator=g).half() for _ in range(2))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b, h, seq), float("nan"))
    kernels.attn_fwd_kernel[(-(-seq // block_m), b * h)](
        q, k, v, o, lse, seq, h, h // kv_heads, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
        attention.LOG2E / math.sqrt(d), BLOCK_M=block_m, BLOCK_N=block_n, HEAD_DIM=d, CAUSAL=causal, SPLIT=split,
        STORE_LSE=True)
    ref = attention.reference(p, {"q": q, "k": k, "v": v})
    atol, rtol, _ = attention.TOLERANCES["bfloat16"]
    err = (o.double() - ref["o"]).abs()
    assert bool(torch.isfinite(o).all()) and bool((err <= atol + rtol * ref["o"].abs()).all()), float(err.max())
    assert float((lse.double() - ref["lse"]).abs().max()) < 1e-3
    sys.modules.pop("kwiki_test_attention_fwd_kernels", None)


def test_the_launcher_writes_the_lse_to_a_scratch_of_its_own_at_an_entry_that_does_not_check_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    kernels = _interpreted_kernels(monkeypatch)
    import torch

    monkeypatch.setitem(sys.modules, "kernels", kernels)  # the launcher imports its kernels by module name
    small = {64: {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1}}
    fa2 = attention.triton_launcher("triton_fa2_split", configs=small)
    p = _params(batch=1, heads=2, kv_heads=1, seq=77, head_dim=64, mask="causal", outputs="o")
    g = torch.Generator().manual_seed(77)
    q = torch.randn(1, 2, 77, 64, generator=g).half()
    k, v = (torch.randn(1, 1, 77, 64, generator=g).half() for _ in range(2))
    o = torch.full_like(q, float("nan"))
    fa2({"q": q, "k": k, "v": v, "causal": True}, {"o": o})  # no "lse" among the outputs: the kernel's own scratch
    ref = attention.reference(p, {"q": q, "k": k, "v": v})
    assert set(ref) == {"o"}
    atol, rtol, _ = attention.TOLERANCES["bfloat16"]
    err = (o.double() - ref["o"]).abs()
    assert bool(torch.isfinite(o).all()) and bool((err <= atol + rtol * ref["o"].abs()).all()), float(err.max())
    sys.modules.pop("kwiki_test_attention_fwd_kernels", None)


@pytest.mark.parametrize("head_dim", [128, 64])
@pytest.mark.parametrize("split", [False, True])
def test_triton_kernel_compiles_for_sm90a_to_wgmma_without_spills(tmp_path: Path, split: bool, head_dim: int) -> None:
    """Offline (no GPU): the artifact's configuration of each head dim compiles for sm_90a, its dots become wgmma
    (HGMMA) and ptxas spills nothing (no local-memory STL/LDL). Causal: the most registers of the four builds."""
    from triton_aot import compile_sm90a

    causal = True
    pytest.importorskip("triton")
    kernels = _load("kwiki_test_attention_fwd_kernels_aot", ART / "kernels.py")
    fn = kernels.attn_fwd_kernel
    cfg = attention.CONFIGS[head_dim]
    const = {"BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"], "HEAD_DIM": head_dim, "CAUSAL": causal,
             "SPLIT": split, "STORE_LSE": True}
    sig = {n: "constexpr" if n in const else "*fp32" if n == "lse_ptr" else "*bf16" if n.endswith("_ptr")
           else "fp32" if n == "qk_scale" else "i32" for n in fn.arg_names}
    compiled = compile_sm90a(fn, sig, const, tmp_path, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"],
                             aligned=lambda n: n.endswith("_ptr") or n.startswith("stride"))
    ops = compiled.ops
    assert any(op.startswith("HGMMA.") for op in ops), "tl.dot did not become wgmma"
    assert not any(op.startswith(("STL", "LDL")) for op in ops), "ptxas spilled registers to local memory"
    if head_dim == 64:  # two CTAs an SM: registers (allocated 8 at a time) and shared memory for two, the page's reason
        usage = compiled.resources()
        found = re.search(r"REG:(\d+)", usage)
        assert found is not None, usage
        regs = -(-int(found.group(1)) // 8) * 8
        assert regs * 32 * cfg["num_warps"] * 2 <= 65536, regs
        assert compiled.shared * 2 <= 227 * 1024, compiled.shared
    if split and head_dim == 128:  # the rung below the CUDA ones: cuda_fa3_ws's expectations fail on its kernel
        from kwiki.verify.sass import check_variant, parse_listing
        from kwiki.wiki.manifest import load_manifest

        ws = load_manifest(ART, ART.parents[1]).variant("cuda_fa3_ws")
        assert ws is not None
        on_triton = ws.model_copy(update={"kernels": ["attn_fwd_kernel*"]})
        mismatches = "; ".join(check_variant(on_triton, "sm_90a", parse_listing(compiled.sass), {})[1])
        assert "require 'UTMALDG.3D >= 3'" in mismatches and "USETMAXREG" in mismatches, mismatches
    sys.modules.pop("kwiki_test_attention_fwd_kernels_aot", None)


SMALL = {64: {"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 1},  # interpreted: small tiles, still off
         128: {"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4, "num_stages": 1}}  # the shapes below
LAUNCHED = [  # (variant, params): head dim 64 and grouped heads, every sequence off the tiles
    ("triton_fa2_split", {"batch": 1, "heads": 4, "kv_heads": 2, "seq": 150, "head_dim": 64, "mask": "none"}),
    ("triton_fa2_split", {"batch": 2, "heads": 4, "kv_heads": 1, "seq": 100, "head_dim": 64, "mask": "causal"}),
    ("triton_fa2", {"batch": 1, "heads": 6, "kv_heads": 3, "seq": 90, "head_dim": 64, "mask": "causal"}),
    ("triton_fa2_split", {"batch": 1, "heads": 4, "kv_heads": 2, "seq": 130, "head_dim": 128, "mask": "causal"}),
]


def _need_interpreter() -> None:
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("needs TRITON_INTERPRET=1 from the start (never set here: it would hold for the whole process)")
    pytest.importorskip("torch")
    pytest.importorskip("triton")


def _launched(monkeypatch: pytest.MonkeyPatch, variant: str, params: dict[str, Any],
              kernels: Any = None) -> tuple[bool, str, bool, str, float]:
    """The module's own path, interpreted: make_inputs (bf16), poisoned make_outputs, triton_launcher(variant) (with
    `kernels` in place of kernels.py where given), then the harness's comparison of o and of the LSE with the
    reference: (o passed, its detail, lse passed, its detail, the LSE's largest error, NaN counted as 1)."""
    _need_interpreter()
    from triton_interpreter import patch

    patch()  # the interpreter's tl.dot of bf16 operands, and its int() on NumPy 2
    sys.path.insert(0, str(ART.parent / "common"))
    import kwiki_harness as harness

    monkeypatch.syspath_prepend(str(ART))
    if kernels is not None:
        monkeypatch.setitem(sys.modules, "kernels", kernels)
    p = _params(**params)
    inputs = attention.make_inputs(p, 11, "cpu")
    pristine = {k: v.clone() for k, v in inputs.items() if k != "causal"}
    outputs = attention.make_outputs(p, inputs)
    for t in outputs.values():
        t.fill_(float("nan"))
    assert attention.triton_launcher(variant, SMALL)(inputs, outputs) is None
    assert all(bool((inputs[k] == v).all()) for k, v in pristine.items())
    ref = attention.reference(p, inputs)
    atol, rtol, _ = attention.TOLERANCES["bfloat16"]
    o_ok, o_detail, _, _ = harness.compare(outputs["o"], ref["o"], atol, rtol, "o")
    lse_ok, lse_detail, _, _ = harness.compare(outputs["lse"], ref["lse"], atol, rtol, "lse")
    lse_err = float((outputs["lse"].double() - ref["lse"]).abs().nan_to_num(1.0).max())
    return o_ok, o_detail, lse_ok, lse_detail, lse_err


@pytest.mark.parametrize(("variant", "params"), LAUNCHED)
def test_the_launched_kernel_writes_o_and_the_lse_at_head_dim_64_and_grouped_heads(
        monkeypatch: pytest.MonkeyPatch, variant: str, params: dict[str, Any]) -> None:
    o_ok, o_detail, lse_ok, lse_detail, lse_err = _launched(monkeypatch, variant, params)
    assert o_ok, o_detail
    assert lse_ok and lse_err < 1e-4, (lse_detail, lse_err)  # fp32 state: far inside the harness's tolerance


@pytest.mark.parametrize(("change", "fails"), [
    (("kv = h // group", "kv = h % (heads // group)"), "o"),  # query heads dealt round-robin to the KV heads
    (("(m_i + tl.math.log2(l_i)) * 0.6931471805599453", "m_i + tl.math.log2(l_i)"), "lse"),  # log2, not ln
    (("(m_i + tl.math.log2(l_i)) * 0.6931471805599453", "tl.math.log2(l_i) * 0.6931471805599453"), "lse"),  # no max
])
def test_a_kernel_with_the_wrong_kv_head_or_lse_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                               change: tuple[str, str], fails: str) -> None:
    """kernels.py with one line changed, launched as the variant is: the comparison the harness makes fails the output
    the change breaks (the LSE of a wrong KV head is itself off by little: the output is what shows that one)."""
    _need_interpreter()
    source = (ART / "kernels.py").read_text(encoding="utf-8")
    assert source.count(change[0]) == 1
    mutated = tmp_path / "kernels_mutated.py"
    mutated.write_text(source.replace(change[0], change[1]), encoding="utf-8")
    kernels = _load("kwiki_test_attention_fwd_kernels_mutated", mutated)
    o_ok, _, lse_ok, _, _ = _launched(monkeypatch, "triton_fa2_split", LAUNCHED[0][1], kernels)  # 4 heads over 2
    assert not (o_ok if fails == "o" else lse_ok)
    sys.modules.pop("kwiki_test_attention_fwd_kernels_mutated", None)


def test_a_backend_refusing_grouped_heads_gets_them_expanded_in_the_call_and_said(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """sdpa_cudnn passes enable_gqa with K and V of fewer heads; a backend that refuses it (PyTorch's 'No available
    kernel') gets them expanded to the query heads inside the call from then on, said on stderr; any other error
    is raised."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    real = F.scaled_dot_product_attention
    calls: list[bool] = []

    def refusing(q: Any, k: Any, v: Any, is_causal: bool = False, enable_gqa: bool = False) -> Any:
        calls.append(enable_gqa)
        if enable_gqa:
            raise RuntimeError("No available kernel.  Aborting execution.")
        assert k.shape[1] == q.shape[1]
        with torch.nn.attention.sdpa_kernel([torch.nn.attention.SDPBackend.MATH]):
            return real(q.float(), k.float(), v.float(), is_causal=is_causal).to(q.dtype)

    monkeypatch.setattr(F, "scaled_dot_product_attention", refusing)
    p = _params(heads=4, kv_heads=2, seq=64, outputs="o")
    inputs = attention.make_inputs(p, 1, "cpu")
    fn = attention.load("sdpa_cudnn")
    ref = attention.reference(p, inputs)["o"]
    for _ in range(2):
        out = attention.make_outputs(p, inputs)
        got = fn(inputs, out)
        o = out["o"] if got is None else got["o"]
        assert float((o.double() - ref).abs().max()) < 2e-2
    assert calls == [True, False, False]  # refused once; expanded from then on
    assert "refused enable_gqa" in capsys.readouterr().err

    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(F, "scaled_dot_product_attention", broken)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        attention.load("sdpa_cudnn")(inputs, attention.make_outputs(p, inputs))
