"""attention_fwd_bf16_sm90a on a CPU: its params check, its sampled fp64 reference, the zero-copy unwrapping of a
library's output, and its Triton kernel under Triton's interpreter (skipped where Triton is not installed, as in
CI) at shapes that no block divides, causal and not, with and without the split of the masked blocks."""

from __future__ import annotations

import importlib.util
import math
import os
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
    return {"batch": 1, "heads": 2, "seq": 300, "head_dim": 128, "mask": "causal", "dtype": "bfloat16", **kw}


@pytest.mark.parametrize(("bad", "says"), [({"head_dim": 96}, "head_dim 96"), ({"mask": "sliding"}, "mask 'sliding'"),
                                           ({"seq": 0}, "seq 0"), ({"dtype": "float16"}, "dtype 'float16'")])
def test_unsupported_params_are_refused_located(bad: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=r"attention\.py") as err:
        attention._check(_params(**bad))
    assert says in str(err.value)


def test_grid_flops_and_the_one_flex_shape() -> None:
    for p in attention.GRID:
        attention._check(p)
    flex = [p for p in attention.GRID if attention.applies("flex_attention", p)]
    assert len(flex) == 1 and flex[0]["mask"] == "none"
    full = attention.work(_params(mask="none"))["flops"]
    assert full == 4.0 * 2 * 300 * 300 * 128 and attention.work(_params())["flops"] == full / 2


def test_fp32_reference_agrees_with_fp64_past_the_fp64_length(monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    p = _params(seq=attention.FP64_REF_SEQ + 52, heads=1)
    inputs = attention.make_inputs(p, 7, "cpu")
    fp32 = attention.reference(p, inputs)["o"]
    monkeypatch.setattr(attention, "FP64_REF_SEQ", 1 << 30)
    monkeypatch.setattr(attention, "SCORES_CHUNK", 1)  # one head at a time: the chunked loop
    fp64 = attention.reference(p, inputs)["o"]
    assert fp32.dtype == torch.float32 and fp64.dtype == torch.float64 and fp32.shape == fp64.shape
    assert float((fp32.double() - fp64).abs().max()) < 1e-5  # a thousandth of the tolerance's atol


def test_a_library_output_is_returned_without_a_copy_or_copied_when_strided() -> None:
    torch = pytest.importorskip("torch")
    like = torch.empty(2, 3, 5, 4)
    view = torch.randn(2, 5, 3, 4).transpose(1, 2).contiguous().transpose(1, 2).transpose(1, 2)  # whole, contiguous
    own = attention._own(view, like)
    assert own._base is None and own.data_ptr() == view.data_ptr() and torch.equal(own, view)
    strided = torch.randn(2, 5, 3, 4).transpose(1, 2)  # (B,H,S,D) of a (B,S,H,D) buffer
    assert attention._own(strided, like) is None and torch.equal(like, strided)


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


@pytest.mark.parametrize(("seq", "block_m", "block_n"), [(200, 128, 128), (77, 64, 32)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("split", [False, True])
def test_triton_kernel_matches_fp64(monkeypatch: pytest.MonkeyPatch, seq: int, block_m: int, block_n: int,
                                    causal: bool, split: bool) -> None:
    kernels = _interpreted_kernels(monkeypatch)
    import torch

    b, h, d = 1, 2, 128 if block_m == 128 else 64
    p = _params(batch=b, heads=h, seq=seq, head_dim=d, mask="causal" if causal else "none")
    g = torch.Generator().manual_seed(seq + 2 * causal + split)
    # fp16: the interpreter's tl.dot reads bf16 operands as raw bits; the kernel takes its types from its pointers
    q, k, v = (torch.randn(b, h, seq, d, generator=g).half() for _ in range(3))
    o = torch.full_like(q, float("nan"))
    lse = torch.full((b * h, seq), float("nan"))
    kernels.attn_fwd_kernel[(-(-seq // block_m), b * h)](
        q, k, v, o, lse, seq, h, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *o.stride()[:3],
        attention.LOG2E / math.sqrt(d), BLOCK_M=block_m, BLOCK_N=block_n, HEAD_DIM=d, CAUSAL=causal, SPLIT=split,
        STORE_LSE=True)
    ref = attention.reference(p, {"q": q, "k": k, "v": v})["o"]
    atol, rtol, _ = attention.TOLERANCES["bfloat16"]
    err = (o.double() - ref).abs()
    assert bool(torch.isfinite(o).all()) and bool((err <= atol + rtol * ref.abs()).all()), float(err.max())
    scores = q.double() @ k.double().transpose(-1, -2) / math.sqrt(d)
    if causal:
        scores.masked_fill_(torch.ones(seq, seq, dtype=torch.bool).triu(1), float("-inf"))
    assert float((lse.double() - torch.logsumexp(scores, -1).reshape(b * h, seq)).abs().max()) < 1e-3
    sys.modules.pop("kwiki_test_attention_fwd_kernels", None)


@pytest.mark.parametrize("split", [False, True])
def test_triton_kernel_compiles_for_sm90a_to_wgmma_without_spills(tmp_path: Path, split: bool) -> None:
    """Offline (no GPU): the artifact's configuration compiles for sm_90a, its dots become wgmma (HGMMA) and
    ptxas spills nothing (no local-memory STL/LDL). Causal: the most registers of the four builds."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("compiles for the GPU: run without TRITON_INTERPRET")
    causal = True
    pytest.importorskip("triton")
    import subprocess

    import triton
    from triton.backends.compiler import GPUTarget

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not tool.exists():
        pytest.skip("this Triton has no bundled cuobjdump")
    kernels = _load("kwiki_test_attention_fwd_kernels_aot", ART / "kernels.py")
    fn = kernels.attn_fwd_kernel
    cfg = attention.CONFIG
    const = {"BLOCK_M": cfg["BLOCK_M"], "BLOCK_N": cfg["BLOCK_N"], "HEAD_DIM": 128, "CAUSAL": causal,
             "SPLIT": split, "STORE_LSE": False}
    sig = {n: "constexpr" if n in const else "*bf16" if n.endswith("_ptr") else "fp32" if n == "qk_scale"
           else "i32" for n in fn.arg_names}
    aligned = {(fn.arg_names.index(n),): [["tt.divisibility", 16]] for n in fn.arg_names
               if n.endswith("_ptr") or n.startswith("stride")}
    src = triton.compiler.ASTSource(fn=fn, signature=sig, constexprs=const, attrs=aligned)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": cfg["num_warps"], "num_stages": cfg["num_stages"]})
    cubin = tmp_path / "attn.cubin"
    cubin.write_bytes(compiled.asm["cubin"])
    sass = subprocess.run([str(tool), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    ops = [line.split()[1] if line.split()[1][0] != "@" else line.split()[2]
           for line in sass.splitlines() if line.strip().startswith("/*") and len(line.split()) > 2]
    assert any(op.startswith("HGMMA.") for op in ops), "tl.dot did not become wgmma"
    assert not any(op.startswith(("STL", "LDL")) for op in ops), "ptxas spilled registers to local memory"
    if split:  # the rung below the CUDA ones: cuda_fa3_ws's expectations (TMA, setmaxnreg) fail on its kernel
        from kwiki.verify.sass import check_variant, parse_listing
        from kwiki.wiki.manifest import load_manifest

        ws = load_manifest(ART, ART.parents[1]).variant("cuda_fa3_ws")
        assert ws is not None
        on_triton = ws.model_copy(update={"kernels": ["attn_fwd_kernel*"]})
        mismatches = "; ".join(check_variant(on_triton, "sm_90a", parse_listing(sass), {})[1])
        assert "require 'UTMALDG.3D >= 6'" in mismatches and "USETMAXREG" in mismatches, mismatches
    sys.modules.pop("kwiki_test_attention_fwd_kernels_aot", None)
