"""attention_fwd_bf16_sm90a: the forward (prefill) pass of softmax attention, bf16 in and out, fp32 softmax state,
head dim 128, causal and not, against SDPA's cuDNN and flash backends and FlexAttention.

O = softmax(Q K^T / sqrt(d)) V per (batch, head); Q, K, V and O are [batch, heads, seq, head_dim], contiguous
(SDPA's layout). Rungs: 1 a FlashAttention-2-style Triton kernel (kernels.py: one program per 128 query rows of
one head, online softmax over 64-key blocks, wgmma through tl.dot, causal programs stop at the diagonal block),
with the masks computed in every block; 2 the same kernel with the unmasked blocks split from the masked ones
(the causal diagonal block, the partial last block). Baselines (rung 0): torch.nn.functional.scaled_dot_product_
attention restricted to one backend with torch.nn.attention.sdpa_kernel (SDPBackend.CUDNN_ATTENTION, at the
tile-aligned shapes only; SDPBackend.FLASH_ATTENTION, FlashAttention-2, everywhere), and FlexAttention
(torch.compile of flex_attention, default mode, dynamic=False, compiled in the untimed check call, at one claimed
shape: a compile costs 10-40 s).

The causal flag reaches a variant as the input `causal` (a bool beside the tensors: the harness hands a variant its
inputs, not the params). The reference is fp64 attention on the GPU: over every row where seq <= FULL_REF_SEQ,
else over a sample of query rows (the first and last row, and one row of every 64 at an offset that moves from
block to block), returned as (flat indices, values).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

HEAD_DIMS = (128,)  # what the kernels are built and checked for here (HEAD_DIM is a power of two in kernels.py)
MASKS = ("none", "causal")
FULL_REF_SEQ = 2048  # up to this the fp64 reference covers every row; past it, a sample of rows
SAMPLE_EVERY = 64  # one sampled query row per this many rows
CONFIG = {"BLOCK_M": 128, "BLOCK_N": 64, "num_warps": 8, "num_stages": 3}  # two warpgroups of 64 rows each
FLEX_AT = {"batch": 4, "heads": 16, "seq": 4096, "head_dim": 128, "mask": "none"}  # the one compiled shape
LOG2E = 1.4426950408889634


def _shape(b, h, s, mask):
    return {"batch": b, "heads": h, "seq": s, "head_dim": 128, "mask": mask, "dtype": "bfloat16"}


GRID = [
    _shape(4, 16, 4096, "none"),
    _shape(4, 16, 4096, "causal"),
    _shape(1, 16, 16384, "causal"),
    _shape(2, 4, 1000, "none"),  # off the tile: no 128-row or 128-key block divides 1000
    _shape(2, 4, 1000, "causal"),
]
VARIANTS = ["sdpa_cudnn", "sdpa_flash", "flex_attention", "triton_fa2", "triton_fa2_split"]
TOLERANCES = {
    "bfloat16": (4e-3, 2.0 ** -7, "bf16 output (2^-9 relative rounding) of fp32 scores and softmax state, with P "
                 "rounded to bf16 before P V as flash kernels do, against fp64 attention of the same bf16 inputs: "
                 "an emulation of those roundings stays under a fifth of this bound at seq 4096, PyTorch's CPU bf16 "
                 "path (scores rounded to bf16 too) about half of it; dropping one 128-key block of 4096 moves "
                 "every row past it"),
}


def applies(name, params):
    if name == "flex_attention":
        return all(params[k] == v for k, v in FLEX_AT.items())
    if name == "sdpa_cudnn":
        return params["seq"] % 128 == 0  # the baseline's claims are at aligned shapes; the off-tile rows check ours
    return True


def _check(params):
    """Reject what the kernels are not built for, located, before any CUDA work."""
    bad = []
    if params.get("head_dim") not in HEAD_DIMS:
        bad.append(f"head_dim {params.get('head_dim')!r} is not one of {HEAD_DIMS}")
    if params.get("mask") not in MASKS:
        bad.append(f"mask {params.get('mask')!r} is not one of {MASKS}")
    for k in ("batch", "heads", "seq"):
        if not (isinstance(params.get(k), int) and params[k] > 0):
            bad.append(f"{k} {params.get(k)!r} must be a positive integer")
    if params.get("dtype") != "bfloat16":
        bad.append(f"dtype {params.get('dtype')!r} is not bfloat16")
    if bad:
        raise ValueError(f"attention_fwd_bf16_sm90a (attention.py): params {params}: " + "; ".join(bad))


def make_inputs(params, seed, device):
    import torch

    _check(params)
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (params["batch"], params["heads"], params["seq"], params["head_dim"])
    qkv = {n: torch.randn(shape, generator=g, device=device).to(torch.bfloat16) for n in ("q", "k", "v")}
    return {**qkv, "causal": params["mask"] == "causal"}


def make_outputs(params, inputs):
    import torch

    return {"o": torch.empty_like(inputs["q"])}


def sampled_rows(seq):
    """The query rows the reference covers past FULL_REF_SEQ: row 0, the last row, and one row in every
    SAMPLE_EVERY at an offset that moves from block to block (so the rows land at every position of a tile)."""
    rows = {0, seq - 1}
    rows.update(min(seq - 1, j * SAMPLE_EVERY + (j * 37 + 11) % SAMPLE_EVERY) for j in range(-(-seq // SAMPLE_EVERY)))
    return sorted(rows)


def reference(params, inputs):
    import torch

    q, k, v, causal = inputs["q"], inputs["k"], inputs["v"], params["mask"] == "causal"  # inputs: tensors only
    b_n, h_n, s, d = q.shape
    full = s <= FULL_REF_SEQ
    rows = torch.arange(s, device=q.device) if full else torch.tensor(sampled_rows(s), device=q.device)
    cols = torch.arange(s, device=q.device)
    out = torch.empty(b_n, h_n, rows.numel(), d, dtype=torch.float64, device=q.device)
    for b in range(b_n):  # one batch at a time: its fp64 scores are heads x rows x seq
        scores = q[b][:, rows].double() @ k[b].double().transpose(-1, -2) / d ** 0.5
        if causal:
            scores.masked_fill_(cols[None, :] > rows[:, None], float("-inf"))
        out[b] = torch.softmax(scores, -1) @ v[b].double()
        del scores
    if full:
        return {"o": out}
    bh = torch.arange(b_n * h_n, device=q.device)[:, None, None]
    index = (bh * s + rows[None, :, None]) * d + torch.arange(d, device=q.device)[None, None, :]
    return {"o": (index.reshape(-1), out.reshape(-1))}


def work(params):
    b, h, s, d = params["batch"], params["heads"], params["seq"], params["head_dim"]
    flops = 4.0 * b * h * s * s * d  # two GEMMs (Q K^T, P V) of 2 s^2 d each; half of it under a causal mask
    return {"flops": flops / 2 if params["mask"] == "causal" else flops, "flops_dtype": "bf16",
            "bytes": 4.0 * b * h * s * d * 2, "bytes_level": "dram"}  # Q, K, V read once, O written once


def _own(t, like):
    """A library's fresh output as a plain tensor of `like`'s shape: itself, or (a view of a whole contiguous
    buffer, e.g. a transpose back from the library's layout) the same memory without the view; None when it is
    laid out otherwise (then it was copied into `like`, which the caller returns)."""
    import torch

    if t.shape == like.shape and t._base is None and t.stride() == like.stride():
        return t
    if t.shape == like.shape and t.is_contiguous():
        return torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage(), t.storage_offset(),
                                                                   t.shape, t.stride())
    like.copy_(t)
    return None


def _library(fn):
    def call(i, o):
        t = _own(fn(i["q"], i["k"], i["v"], i["causal"]), o["o"])
        return None if t is None else {"o": t}
    return call


def load(name):
    import torch
    import torch.nn.functional as F

    if name in ("sdpa_cudnn", "sdpa_flash"):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = SDPBackend.CUDNN_ATTENTION if name == "sdpa_cudnn" else SDPBackend.FLASH_ATTENTION

        def sdpa(q, k, v, causal):
            with sdpa_kernel([backend]):  # that backend or an error: no silent fallback to another
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return _library(sdpa)
    if name == "flex_attention":
        from torch.nn.attention.flex_attention import flex_attention

        compiled = torch.compile(flex_attention, dynamic=False)

        def flex(q, k, v, causal):
            if causal:
                raise ValueError("flex_attention runs at the non-causal claimed shape only (applies())")
            return compiled(q, k, v)
        return _library(flex)
    import triton

    import kernels

    split = name == "triton_fa2_split"
    cfg = CONFIG

    def fa2(i, o):
        q, k, v, out = i["q"], i["k"], i["v"], o["o"]
        b, h, s, d = q.shape
        grid = (triton.cdiv(s, cfg["BLOCK_M"]), b * h)
        kernels.attn_fwd_kernel[grid](
            q, k, v, out, out, s, h, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3], *out.stride()[:3],
            LOG2E / d ** 0.5, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], HEAD_DIM=d, CAUSAL=i["causal"],
            SPLIT=split, STORE_LSE=False, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return fa2
