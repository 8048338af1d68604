"""decode_attention_bf16_sm90a on a CPU, without Triton: its params check (a head count the KV heads do not divide
is refused, located, before any CUDA work), its GRID and applies (which variant runs where), its fp64 reference for
4 query tokens against SDPA's lower-right causal bias (the convention the SDPA baseline is called with), the bytes it
declares, and the FlexAttention baseline over the paged cache (flex_paged's views, block mask and mask_mod) run
eagerly against the reference, with the mask_mod's ragged-page cut shown to matter. The Triton kernels run under
Triton's interpreter in test_decode_attention_triton.py."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from triton_interpreter import load_artifact

ART = Path(__file__).resolve().parents[1] / "artifacts" / "decode_attention_bf16_sm90a"
decode = load_artifact(ART, "decode.py", "decode_attention_under_test")


def _params(batch: int, kv_len: int, layout: str = "contiguous", **kw: Any) -> dict[str, Any]:
    p: dict[str, Any] = decode._decode(batch, kv_len, layout, page=kw.pop("page", 16), q_len=kw.pop("q_len", 1))
    p.update(kw)
    return p


def _close(got: Any, want: Any) -> bool:
    atol, rtol, _ = decode.TOLERANCES["bfloat16"]
    return bool(((got.double() - want).abs() <= atol + rtol * want.abs()).all())


def test_uneven_head_count_is_refused_before_any_cuda_work() -> None:
    """30 query heads over 8 KV heads: refused by make_inputs, with the file and params named, before it touches a
    device (asked for CUDA on a machine that may have none, the error is still the params check's)."""
    pytest.importorskip("torch")  # make_inputs imports it first (importorskip quiets its import's warnings)
    for device in ("cpu", "cuda"):
        with pytest.raises(ValueError, match=r"decode\.py.*q_heads \(30\) must be a multiple of kv_heads \(8\)"):
            decode.make_inputs(_params(1, 1007, q_heads=30), 0, device)


@pytest.mark.parametrize(("bad", "says"), [
    ({"head_dim": 96}, "head_dim must be 128"),
    ({"op": "spec_decode"}, "spec_decode a q_len above 1"),
    ({"q_len": 4, "op": "decode"}, "op decode has one query token"),
    ({"length": 3, "q_len": 4}, "kv_len at least q_len"),
    ({"q_heads": 64, "q_len": 4}, "at most 16 query rows"),
    ({"layout": "paged", "page": 0}, "layout contiguous"),
])
def test_unsupported_params_are_refused_located(bad: dict[str, Any], says: str) -> None:
    with pytest.raises(ValueError, match=r"decode_attention \(decode\.py\): params") as err:
        decode._validate(_params(1, bad.pop("length", 1007), **bad))
    assert says in str(err.value)


def test_grid_entries_and_where_each_variant_runs() -> None:
    for p in decode.GRID:
        decode._validate(p)
    runs = {v: [p for p in decode.GRID if decode.applies(v, p)] for v in decode.VARIANTS}
    shape = [(p["batch"], p["kv_len"]) for p in runs["flex_paged"]]
    assert shape == decode.FLEX_PAGED_AT and all(p["page"] == 64 for p in runs["flex_paged"])
    assert [(p["batch"], p["kv_len"]) for p in runs["flex"]] == decode.FLEX_AT
    assert {p["page"] for p in runs["triton_paged"]} == {16} and {p["page"] for p in runs["triton_paged64"]} == {64}
    spec = [p for p in decode.GRID if p["op"] == "spec_decode"]
    assert spec and all(p["q_len"] == 4 for p in spec)
    for p in spec:  # contiguous: the baseline beside the kernels; pages of 64: rung 5
        want = ["triton_paged64"] if p["layout"] == "paged" else ["sdpa_flash", "triton_gqa", "triton_split"]
        assert [v for v in decode.VARIANTS if decode.applies(v, p)] == want
    assert {(p["layout"], p["page"]) for p in spec} == {("contiguous", 0), ("paged", 64)}
    one = [(p["batch"], p["kv_len"]) for p in decode.GRID if p["op"] == "decode" and p["layout"] == "contiguous"]
    assert min(b for b, _ in one) == 1 and max(b for b, _ in one) == 128  # the ranges: batch 1-128
    assert min(n for _, n in one) <= 1024 and max(n for _, n in one) == 65536  # and 1k-64k tokens
    assert all("q_len" not in p for p in decode.GRID if p["op"] == "decode")  # the one-token claims' params stand
    for v in ("sdpa_efficient", "sdpa_cudnn"):
        assert [(p["op"], p["layout"], p["batch"], p["kv_len"]) for p in runs[v]] == [
            ("decode", "contiguous", b, n) for b, n in decode.OTHER_SDPA_AT]
    assert any(p["kv_len"] % 64 and p["kv_len"] % 16 for v in decode.VARIANTS[2:] for p in runs[v]
               if v not in ("flex", "flex_paged"))


def test_four_tokens_reference_is_sdpa_lower_right_causal() -> None:
    """reference() at q_len 4 equals SDPA's math backend with causal_lower_right (the bias the SDPA baseline passes)
    on K and V repeated per query head, and differs from the same without the bias."""
    torch = pytest.importorskip("torch")
    from torch.nn.attention.bias import causal_lower_right

    p = _params(2, 203, q_len=4, op="spec_decode", q_heads=8, kv_heads=2)
    inputs = decode.make_inputs(p, 3, "cpu")
    ref = decode.reference(p, inputs)["out"]
    q, k, v = (inputs[n].double() for n in ("q", "k", "v"))
    k, v = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
    mask = causal_lower_right(4, 203)._materialize(q.device)
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    blind = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert ref.shape == (2, 8, 4, 128) and float((ref - want).abs().max()) < 1e-12
    assert not _close(blind, ref)


def test_work_counts_every_token() -> None:
    one, four = decode.work(_params(64, 8192)), decode.work(_params(64, 8192, q_len=4, op="spec_decode"))
    assert four["flops"] == 4 * one["flops"]
    assert four["bytes"] - one["bytes"] == 3 * 2 * 64 * 32 * 128 * 2  # q and out of 3 more tokens; K and V once


def _flex_paged(inputs: dict[str, Any]) -> Any:
    torch = pytest.importorskip("torch")
    fa = pytest.importorskip("torch.nn.attention.flex_attention")
    wide = {n: t.float() if t.dtype == torch.bfloat16 else t for n, t in inputs.items()}
    names = ("q", "k", "v", "flex_counts", "flex_blocks", "flex_owner", "flex_valid")
    with warnings.catch_warnings():  # flex_attention run eagerly (no torch.compile) says it is slow
        warnings.simplefilter("ignore")
        return decode.flex_paged_attention(fa.flex_attention, fa.BlockMask, *(wide[n] for n in names))


@pytest.mark.parametrize(("batch", "kv_len", "page"), [(3, 1007, 64), (2, 203, 64), (2, 203, 16), (1, 128, 64)])
def test_flex_paged_matches_the_reference(batch: int, kv_len: int, page: int) -> None:
    """FlexAttention over the shuffled pages, through flex_pages' block mask and mask_mod, agrees with the fp64
    reference (eager here, compiled in the variant; the block mask is the same)."""
    pytest.importorskip("torch")
    p = _params(batch, kv_len, "paged", page=page, q_heads=8, kv_heads=2)
    inputs = decode.make_inputs(p, 1, "cpu")
    assert _close(_flex_paged(inputs), decode.reference(p, inputs)["out"])


def test_flex_paged_mask_cuts_the_ragged_page() -> None:
    """The mask_mod's cut matters: every slot of the last page marked filled (the 17 stale slots of 1007 = 15 x 64
    + 47 attended) and the outputs leave the tolerance; the blocks' owners matter the same way."""
    torch = pytest.importorskip("torch")
    p = _params(3, 1007, "paged", page=64, q_heads=8, kv_heads=2)
    inputs = decode.make_inputs(p, 2, "cpu")
    ref = decode.reference(p, inputs)["out"]
    valid = inputs["flex_valid"]
    assert sorted(set(valid.tolist())) == [47, 64] and int((valid == 47).sum()) == 3 * 2
    assert not _close(_flex_paged(dict(inputs, flex_valid=torch.full_like(valid, 64))), ref)
    assert not _close(_flex_paged(dict(inputs, flex_owner=torch.zeros_like(inputs["flex_owner"]))), ref)


def _sass_ops(const: dict[str, Any], tmp: Path) -> list[str]:
    """decode_kernel compiled offline for sm_90a (no GPU) with the launch's constants; its SASS opcodes."""
    from triton_aot import compile_sm90a

    pytest.importorskip("triton")
    kernels = load_artifact(ART, "kernels.py", "decode_attention_kernels_aot")
    fn = kernels.decode_kernel
    ints = ("L", "chunk", "splits", "pages_per_seq")
    ptr = {"table_ptr": "*i32", "lens_ptr": "*i32", "opart_ptr": "*fp32", "lse_ptr": "*fp32", "count_ptr": "*i32"}
    sig = {n: "constexpr" if n in const else ptr.get(n, "*bf16") if n.endswith("_ptr") else "i32" if n in ints
           else "fp32" for n in fn.arg_names}
    return compile_sm90a(fn, sig, const, tmp, num_warps=4, num_stages=2).ops


def _skip_under_interpreter() -> None:
    import os

    if os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("compiles for the GPU: run without TRITON_INTERPRET")


def test_pages_of_64_load_the_table_once_a_tile(tmp_path: Path) -> None:
    """Offline (no GPU; skipped without Triton, and under its interpreter): rung 5's kernel (PAGE_TILE, pages of 64)
    issues a few 4-byte table loads where rung 4's (pages of 16, an entry a token) issues one a token slice of the
    tile; both keep their dots on the tensor cores and spill nothing."""
    _skip_under_interpreter()
    base = {"HKV": 8, "GROUP": 4, "QLEN": 1, "BLOCK_H": 16, "BLOCK_N": 64, "D": 128, "PAGED": True, "SPLIT": True,
            "FUSED": False, "SB": 64, "KV_SHARE": 1}
    rung3 = _sass_ops({**base, "PAGE": 16, "PAGE_TILE": False}, tmp_path)
    rung4 = _sass_ops({**base, "PAGE": 64, "PAGE_TILE": True}, tmp_path)
    for ops in (rung3, rung4):
        assert any(op.startswith("HMMA.") for op in ops) and not any(op.startswith(("STL", "LDL")) for op in ops)
    table3, table4 = rung3.count("LDG.E"), rung4.count("LDG.E")  # 4-byte loads: the block table's (and lens)
    assert table4 * 4 <= table3, (table3, table4)


def test_the_fused_combine_counts_with_release_and_acquire_after_a_barrier(tmp_path: Path) -> None:
    """Offline (no GPU): rung 6's kernel orders its partials before the pair's count and the count before the last
    program's reads of the others' partials. In its SASS the partial stores come first, then a CTA barrier (every
    thread's stores before the one thread's count), the GPU-scope release fence (MEMBAR.ALL.GPU), the atomic add
    (ATOMG .STRONG.GPU), the acquire's L1 invalidation (CCTL.IVALL), and the barrier behind which every thread reads
    the count; the count's reset is an atomic exchange. With sem="relaxed" the fence and the invalidation vanish
    (checked when this test was written): this is what fails if the ordering is dropped. Rung 3's kernel has none
    of it."""
    _skip_under_interpreter()
    base = {"HKV": 8, "GROUP": 4, "QLEN": 1, "BLOCK_H": 16, "BLOCK_N": 64, "D": 128, "PAGE": 1, "PAGED": False,
            "PAGE_TILE": False, "SPLIT": True, "SB": 64, "KV_SHARE": 1}
    fused = _sass_ops({**base, "FUSED": True}, tmp_path)
    plain = _sass_ops({**base, "FUSED": False}, tmp_path)
    assert not any(op.startswith(("ATOM", "RED", "MEMBAR", "CCTL")) for op in plain)

    def at(prefix: str, after: int = 0) -> int:
        return next(i for i, op in enumerate(fused) if i >= after and op.startswith(prefix))

    add = at("ATOMG.E.ADD.STRONG.GPU")
    last_store = max(i for i, op in enumerate(fused[:add]) if op.startswith("STG"))
    barrier = at("BAR.SYNC", last_store)
    fence = at("MEMBAR.ALL.GPU", barrier)
    assert last_store < barrier < fence < add < at("CCTL.IVALL", add) < at("BAR.SYNC", add)
    assert fused.count("ATOMG.E.ADD.STRONG.GPU") == 1 and "ATOMG.E.EXCH.STRONG.GPU" in fused
    assert not any(op.startswith(("STL", "LDL")) for op in fused)


def test_the_rung_without_reuse_runs_at_its_claims_shape_and_off_the_tile() -> None:
    runs = [p for p in decode.GRID if decode.applies("triton_mha", p)]
    assert all(p["op"] == "decode" and p["layout"] == "contiguous" for p in runs)
    assert {(p["batch"], p["kv_len"]) for p in runs} == set(decode.MHA_AT) >= {(64, 8192), (3, 1007)}


def test_the_fused_rung_runs_where_one_token_meets_a_contiguous_cache() -> None:
    runs = [p for p in decode.GRID if decode.applies("triton_split_fused", p)]
    assert runs == [p for p in decode.GRID if decode.applies("triton_split", p) and p["op"] == "decode"
                    and p["layout"] == "contiguous"]
    assert {(p["batch"], p["kv_len"]) for p in runs} >= {(1, 32768), (64, 8192), (3, 1007)}
    assert runs == [p for p in decode.GRID if decode.applies("triton_split_graph", p)]


def test_the_graph_rung_captures_once_a_set_of_buffers_and_then_only_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    """triton_split_graph without a GPU, through a fake CUDA graph: the first call with a set of buffers runs rung 3's
    launch once outside the capture (its compile) and once inside it, then replays; later calls with the same
    buffers only replay; new buffers capture again, up to GRAPHS_MAX sets, and one more is refused by name."""
    torch = pytest.importorskip("torch")
    events: list[str] = []

    class Graph:
        def replay(self) -> None:
            events.append("replay")

    class Capture:
        def __init__(self, graph: Graph) -> None:
            pass

        def __enter__(self) -> None:
            events.append("capture")

        def __exit__(self, *exc: object) -> None:
            events.append("captured")

    monkeypatch.setattr(torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(torch.cuda, "graph", Capture)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    call = decode._graphed(lambda i, o: events.append("plain"), torch)

    def buffers() -> tuple[dict[str, Any], dict[str, Any]]:
        return {"q": torch.zeros(1, 4, 1, 8), "causal": True}, {"out": torch.zeros(1, 4, 1, 8)}

    first = buffers()
    call(*first)
    assert events == ["plain", "capture", "plain", "captured", "replay"]
    events.clear()
    call(*first)
    call(*first)
    assert events == ["replay", "replay"]
    kept = [first] + [buffers() for _ in range(decode.GRAPHS_MAX - 1)]  # held: their addresses stay theirs
    for b in kept[1:]:
        call(*b)
    with pytest.raises(RuntimeError, match=r"triton_split_graph: a 5th set of buffers \(at most 4"):
        call(*buffers())


def test_a_refusing_sdpa_backend_ends_with_torchs_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend torch refuses for these inputs: the variant raises, before any SDPA call, a located 'not runnable
    here' with the reasons torch gave as debug warnings (kwiki then gives the variant that verdict alone)."""
    torch = pytest.importorskip("torch")
    from torch.backends import cuda

    def refuse(params: Any, debug: bool = False) -> bool:
        assert debug and params.enable_gqa
        warnings.warn("Efficient attention does not support grouped query attention", UserWarning, stacklevel=1)
        return False

    def never(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("SDPA was called")

    monkeypatch.setattr(cuda, "can_use_efficient_attention", refuse)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", never)
    p = _params(1, 100, q_heads=8, kv_heads=2)
    inputs = decode.make_inputs(p, 0, "cpu")
    with pytest.raises(RuntimeError, match=r"decode\.py\): sdpa_efficient: not runnable here: SDPA's "
                                           r"EFFICIENT_ATTENTION backend refuses .*does not support grouped query"):
        decode.load("sdpa_efficient")(inputs, decode.make_outputs(p, inputs))
