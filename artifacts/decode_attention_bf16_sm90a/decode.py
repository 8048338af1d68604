"""decode_attention_bf16_sm90a: attention of one query token per sequence against a long KV cache (decode), and of
4 (speculative decoding), bf16, head dim 128, 32 query heads over 8 KV heads (grouped-query attention), contiguous
and paged caches, against the read roof, SDPA (flash, efficient and cuDNN backends) and FlexAttention.

Decode reads the whole KV cache once per token and does 2 flops per byte read (bf16): it is memory-bound, and
work() counts the bytes of K and V (plus q, the output and a paged cache's block table) at the DRAM level. The
roof is measured in the same run: a Triton read of 1 GiB (triton_read) and torch's copy of it (torch_copy).
Rung 1 (triton_mha): one program per (sequence, query head) walks the whole cache, each of a group's 4 query
heads reading its KV head's cache itself (no reuse; at MHA_AT only). Rung 2 (triton_gqa): one program per
(sequence, KV head), the 4 query heads of its group sharing every K and V tile. Rung 3 (triton_split):
flash-decoding, the cache split into chunks so that about 4 programs per SM run whatever the batch, each writing a
partial (normalised output, log-sum-exp), then a combine kernel. Rung 4 (triton_paged): rung 3 reading a paged
cache (pages of 16 tokens, a block table in shuffled order, a ragged last page). Rung 5 (triton_paged64): pages of
64 tokens, one K/V tile a page, found by one scalar load of the block table a tile. Rung 6 (triton_split_fused):
rung 3 in one launch, the last program of each (sequence, KV head) pair to finish merging the pair's partials (an
atomic count a pair; one decode token, contiguous cache). Rung 7 (triton_split_graph): rung 3's two launches
captured in a CUDA graph in the untimed check call and replayed (the same entries as rung 6). Baselines: SDPA pinned to each backend with
enable_gqa=True (no expanded KV; a backend that refuses the inputs ends its variant with torch's reasons), FlexAttention
(torch.compile of flex_attention, enable_gqa=True, no block mask: its decoding path) and, on the paged cache,
FlexAttention with a block mask over the same pages (flex_paged), each compiled at the claimed shapes only (a
compile costs 10-40 s). Four query tokens (op spec_decode): the cache's last 4 tokens are the new ones, each
seeing the cache up to itself (causal among the 4, lower-right aligned).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

import math

HQ, HKV, DIM = 32, 8, 128
SHAPES = [(1, 32768), (16, 8192), (64, 8192), (3, 1007),  # (batch, kv_len); 1007 is no multiple of any tile
          (1, 65536), (128, 8192), (4, 1024)]  # the ends of the ranges: 64k tokens, batch 128, 1k tokens
PAGED = [(1, 32768), (64, 8192), (3, 1007)]  # 1007: 62 pages of 16 and a ragged 15, or 15 of 64 and 47
PAGE, PAGE64 = 16, 64  # tokens a page: rung 4 and rung 5
SPEC = [(1, 32768), (64, 8192), (3, 1007)]  # 4 query tokens (speculative decoding), contiguous and in pages of 64
Q_SPEC = 4
FLEX_AT = [(1, 32768), (64, 8192)]  # FlexAttention (contiguous) compiles at these shapes only
MHA_AT = [(64, 8192), (3, 1007)]  # rung 1 (no grouped-query reuse): its claim's shape, the off-tile check
FLEX_PAGED_AT = [(1, 32768), (64, 8192)]  # and FlexAttention over the 64-token pages at these
OTHER_SDPA_AT = [(1, 32768), (64, 8192), (3, 1007)]  # SDPA's efficient and cuDNN backends: the claims' shapes, 1007
ROOF_MIB = 1024
BLOCK_N, BLOCK_H = 64, 16  # tokens per K/V tile; query rows of a tile (tl.dot needs 16; a group has 4 heads x q_len)
PROGRAMS_PER_SM, MIN_CHUNK = 4, 256  # split-KV: enough programs to fill the GPU, chunks not shorter than 256
READ_BLOCK = 16384
COMBINE_SPLITS = 64  # splits the combine kernel merges per step: the plans here (at most 64 splits) take one step
SDPA_BACKENDS = {"sdpa_flash": "FLASH_ATTENTION", "sdpa_efficient": "EFFICIENT_ATTENTION",
                 "sdpa_cudnn": "CUDNN_ATTENTION"}

FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)


def _decode(batch, kv_len, layout, page=PAGE, q_len=1):
    """A GRID entry. One query token: op decode (the params every claim of one token names); q_len > 1: op
    spec_decode with its q_len."""
    p = {"op": "decode", "layout": layout, "batch": batch, "kv_len": kv_len, "q_heads": HQ, "kv_heads": HKV,
         "head_dim": DIM, "page": page if layout == "paged" else 0, "dtype": "bfloat16"}
    if q_len != 1:
        p.update(op="spec_decode", q_len=q_len)
    return p


GRID = [
    {"op": "read", "mib": ROOF_MIB, "dtype": "bfloat16"},
    {"op": "copy", "mib": ROOF_MIB, "dtype": "bfloat16"},
    *(_decode(b, n, "contiguous") for b, n in SHAPES),
    *(_decode(b, n, "paged") for b, n in PAGED),
    *(_decode(b, n, "paged", page=PAGE64) for b, n in PAGED),
    *(_decode(b, n, "contiguous", q_len=Q_SPEC) for b, n in SPEC),
    *(_decode(b, n, "paged", page=PAGE64, q_len=Q_SPEC) for b, n in SPEC),
]
VARIANTS = ["triton_read", "torch_copy", "sdpa_flash", "sdpa_efficient", "sdpa_cudnn", "flex", "flex_paged",
            "triton_mha", "triton_gqa", "triton_split", "triton_paged", "triton_paged64", "triton_split_fused",
            "triton_split_graph"]
GRAPHS_MAX = 4  # triton_split_graph: graphs one variant captures (one a set of buffers; the harness keeps them)
TOLERANCES = {
    "bfloat16": (2e-3, 2.0 ** -7, "fp32 scores and online softmax, the probabilities rounded to bf16 (2^-8 "
                 "relative) before the PV product as flash kernels do, a bf16 output, against an fp64 reference; "
                 "V is scaled so that outputs are about 0.03-0.06 at every length, where the probabilities' rounding "
                 "leaves up to about 5e-4 beyond 2^-7 relative (an emulation in the CPU test): 2e-3 absolute"),
}


def applies(name, params):
    op = params["op"]
    if op in ("read", "copy"):
        return name == {"read": "triton_read", "copy": "torch_copy"}[op]
    shape = (params["batch"], params["kv_len"])
    if op == "spec_decode":  # the fused combine merges a pair's 16 rows one after another: not here
        if params["layout"] == "paged":
            return name == "triton_paged64"
        return name in ("sdpa_flash", "triton_gqa", "triton_split")
    if params["layout"] == "paged":
        if params["page"] == PAGE64:
            return name == "triton_paged64" or (name == "flex_paged" and shape in FLEX_PAGED_AT)
        return name == "triton_paged"
    return name in ("sdpa_flash", "triton_gqa", "triton_split", "triton_split_fused", "triton_split_graph") or (
        name == "flex" and shape in FLEX_AT) or (name == "triton_mha" and shape in MHA_AT) or (
        name in ("sdpa_efficient", "sdpa_cudnn") and shape in OTHER_SDPA_AT)


def _validate(params):
    """Reject what the kernels do not support, with the reason, before any CUDA work."""
    op = params.get("op")

    def refuse(why):
        raise ValueError(f"decode_attention (decode.py): params {params}: {why}")

    if op in ("read", "copy"):
        if not isinstance(params.get("mib"), int) or params["mib"] <= 0:
            refuse("mib must be a positive integer")
        return
    if op not in ("decode", "spec_decode"):
        refuse("op must be read, copy, decode or spec_decode")
    hq, hkv, q_len = params["q_heads"], params["kv_heads"], params.get("q_len", 1)
    if not isinstance(q_len, int) or q_len < 1 or (op == "decode") != (q_len == 1):
        refuse("op decode has one query token (no q_len), spec_decode a q_len above 1")
    if hkv <= 0 or hq % hkv != 0 or hq // hkv * q_len > BLOCK_H:
        refuse(f"q_heads ({hq}) must be a multiple of kv_heads ({hkv}) with at most {BLOCK_H} query rows "
               f"(heads x q_len) a KV head (a group is one tile's rows)")
    if params["head_dim"] != DIM:
        refuse(f"head_dim must be {DIM}")
    if params["batch"] <= 0 or params["kv_len"] < q_len:
        refuse("batch must be positive and kv_len at least q_len (the new tokens are the cache's last)")
    if params["layout"] not in ("contiguous", "paged") or (params["layout"] == "paged") != (params["page"] > 0):
        refuse("layout contiguous (page 0) or paged (page > 0)")


def make_inputs(params, seed, device):
    import torch

    _validate(params)
    g = torch.Generator(device=device).manual_seed(seed)
    if params["op"] in ("read", "copy"):
        n = params["mib"] << 19  # bf16 elements; uniform in [0, 1): the read roof's sums are far from zero
        return {"x": torch.rand(n, generator=g, device=device).to(torch.bfloat16)}
    b, n, hq, hkv, d = params["batch"], params["kv_len"], params["q_heads"], params["kv_heads"], params["head_dim"]

    def randn(*shape):
        return torch.randn(*shape, generator=g, device=device).to(torch.bfloat16)

    def values(*shape):  # V times a power of two near sqrt(kv_len / 1024) (exact in bf16): an output, a weighted
        scale = 2.0 ** round(math.log2(n / 1024) / 2)  # mean of kv_len values, is then about as large at 1k as at 32k
        return (torch.randn(*shape, generator=g, device=device) * scale).to(torch.bfloat16)

    q = randn(b, hq, params.get("q_len", 1), d)
    if params["layout"] == "contiguous":
        return {"q": q, "k": randn(b, hkv, n, d), "v": values(b, hkv, n, d)}
    page = params["page"]
    per_seq = -(-n // page)
    table = torch.randperm(b * per_seq, generator=g, device=device).to(torch.int32).view(b, per_seq)
    lens = torch.full((b,), n, dtype=torch.int32, device=device)  # every sequence kv_len long, its last page ragged
    return {"q": q, "k": randn(b * per_seq, hkv, page, d), "v": values(b * per_seq, hkv, page, d), "table": table,
            "lens": lens, **flex_pages(table, lens, hkv, page)}


def flex_pages(table, lens, hkv, page):
    """FlexAttention's view of the paged cache, prepared with the inputs (as a serving engine prepares its
    metadata once a step for every layer) and read by flex_paged only. The cache [pages, HKV, PAGE, D] is one KV
    head of pages * HKV blocks of PAGE tokens ([1, 1, pages * HKV * PAGE, D], a view), block page * HKV + kvh
    holding KV head kvh of a page; each (sequence, KV head) pair z = b * HKV + kvh is one batch entry of the
    query ([B * HKV, GROUP, q_len, D], a view) whose block mask lists its blocks in its table's order
    (flex_blocks, flex_counts: the BlockMask's kv_indices and kv_num_blocks), and whose mask_mod keeps a token
    when its block belongs to z (flex_owner) and its slot is below the block's filled slots (flex_valid: PAGE,
    or the ragged last page's count). Every block is a partial one (no full blocks): torch's flex decoding kernel
    sizes its splits on the whole KV length when a mask has full blocks, which here is the whole pool."""
    import torch

    b, per_seq = table.shape
    z = b * hkv
    heads = torch.arange(hkv, dtype=torch.int32, device=table.device)
    blocks = (table[:, None, :] * hkv + heads[None, :, None]).reshape(z, per_seq)
    used = (lens + page - 1) // page
    slots = (lens[:, None] - page * torch.arange(per_seq, device=table.device)[None, :]).clamp(0, page)
    owner = torch.full((table.numel() * hkv,), -1, dtype=torch.int32, device=table.device)
    valid = torch.zeros((table.numel() * hkv,), dtype=torch.int32, device=table.device)
    owner[blocks.reshape(-1).long()] = torch.arange(z, dtype=torch.int32, device=table.device).repeat_interleave(
        per_seq)
    valid[blocks.reshape(-1).long()] = slots.to(torch.int32).repeat_interleave(hkv, dim=0).reshape(-1)
    return {"flex_blocks": blocks.reshape(z, 1, 1, per_seq).contiguous(),
            "flex_counts": used.to(torch.int32).repeat_interleave(hkv).reshape(z, 1, 1).contiguous(),
            "flex_owner": owner, "flex_valid": valid}


def make_outputs(params, inputs):
    import torch

    if params["op"] == "read":
        return {"s": torch.empty(-(-inputs["x"].numel() // READ_BLOCK), dtype=torch.float32,
                                 device=inputs["x"].device)}
    if params["op"] == "copy":
        return {"y": torch.empty_like(inputs["x"])}
    return {"out": torch.empty_like(inputs["q"])}


def _contiguous_kv(params, inputs):
    """K and V as [B, HKV, L, D]: a paged cache gathered through its block table (the ragged tail cut off)."""
    if params["layout"] == "contiguous":
        return inputs["k"], inputs["v"]
    b, n, hkv, d = params["batch"], params["kv_len"], params["kv_heads"], params["head_dim"]
    table = inputs["table"].long()

    def gather(pages):  # [pages, HKV, PAGE, D] -> [B, per_seq, HKV, PAGE, D] -> [B, HKV, per_seq * PAGE, D]
        return pages[table].permute(0, 2, 1, 3, 4).reshape(b, hkv, -1, d)[:, :, :n]

    return gather(inputs["k"]), gather(inputs["v"])


def reference(params, inputs):
    import torch

    if params["op"] == "read":
        x = inputs["x"].double()
        pad = (-x.numel()) % READ_BLOCK
        return {"s": torch.nn.functional.pad(x, (0, pad)).view(-1, READ_BLOCK).sum(1)}
    if params["op"] == "copy":
        return {"y": inputs["x"].clone()}
    k, v = _contiguous_kv(params, inputs)
    b, n, hq, hkv, d = params["batch"], params["kv_len"], params["q_heads"], params["kv_heads"], params["head_dim"]
    t = params.get("q_len", 1)
    q = inputs["q"].double().view(b, hkv, hq // hkv, t, d)
    # token i of the t new ones (the cache's last t) sees cache tokens 0 .. n - t + i: causal, lower-right aligned
    hidden = torch.arange(n, device=q.device)[None, :] > (n - t + torch.arange(t, device=q.device))[:, None]
    step = max(1, (1 << 29) // (hkv * k.shape[2] * d))  # sequences a step: fp64 copies of K and V of 4 GiB at most
    out = []
    for i in range(0, b, step):
        s = torch.einsum("bhgtd,bhld->bhgtl", q[i:i + step], k[i:i + step].double()) / d ** 0.5
        s = s.masked_fill(hidden, float("-inf"))
        out.append(torch.einsum("bhgtl,bhld->bhgtd", torch.softmax(s, -1), v[i:i + step].double()))
    return {"out": torch.cat(out).reshape(b, hq, t, d)}


def work(params):
    if params["op"] in ("read", "copy"):
        n = params["mib"] << 20
        return {"bytes": float(n if params["op"] == "read" else 2 * n), "bytes_level": "dram"}
    b, n, hq, hkv, d = params["batch"], params["kv_len"], params["q_heads"], params["kv_heads"], params["head_dim"]
    t = params.get("q_len", 1)
    kv = 2 * b * hkv * n * d * 2  # K and V, bf16, each byte once
    qo = 2 * b * hq * t * d * 2  # q read, out written
    table = 4 * b * (1 + -(-n // params["page"])) if params["page"] else 0  # block table and lengths, int32
    return {"bytes": float(kv + qo + table), "bytes_level": "dram",
            "flops": float(4 * b * hq * t * n * d), "flops_dtype": "bf16"}  # t x n scores (the causal few counted)


def _owned(t, out):
    """A library's result as the harness wants it: the tensor itself, or the base it is a same-shaped view of;
    otherwise (a view of something else) copied into the declared output (a copy kernel, named in `kernels`)."""
    while t._base is not None and t._base.shape == t.shape and t._base.stride() == t.stride():
        t = t._base
    if t._base is None and t.shape == out.shape:
        return {"out": t}
    out.copy_(t.reshape(out.shape))
    return None


_SMS = {}


def _sm_count(device):
    """The device's SM count (read from the device once; CPU tensors, Triton's interpreter in the tests: 8)."""
    import torch

    if device.type != "cuda":
        return 8
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _SMS:
        _SMS[index] = torch.cuda.get_device_properties(index).multi_processor_count
    return _SMS[index]


def split_plan(batch, hkv, kv_len, sms):
    """(chunk, splits) of the split-KV kernel: the number of splits nearest PROGRAMS_PER_SM programs an SM over
    batch * hkv pairs (one split when the pairs already fill the GPU), chunks a multiple of BLOCK_N and at least
    MIN_CHUNK tokens long."""
    def cdiv(a, b):
        return -(-a // b)

    pairs = batch * hkv
    want = max(1, min((PROGRAMS_PER_SM * sms + pairs // 2) // pairs, cdiv(kv_len, MIN_CHUNK)))
    chunk = cdiv(cdiv(kv_len, want), BLOCK_N) * BLOCK_N
    return chunk, cdiv(kv_len, chunk)


def _sdpa_refusal(torch, backend, q, k, v):
    """Why SDPA's `backend` refuses q, k, v with enable_gqa=True (torch's own reasons, from its debug warnings), or
    None when it takes them."""
    import warnings

    from torch.backends import cuda

    can = {"FLASH_ATTENTION": cuda.can_use_flash_attention, "EFFICIENT_ATTENTION": cuda.can_use_efficient_attention,
           "CUDNN_ATTENTION": getattr(cuda, "can_use_cudnn_attention", None)}[backend]
    if can is None:
        return f"torch {torch.__version__} has no torch.backends.cuda.can_use_cudnn_attention"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        ok = can(cuda.SDPAParams(q, k, v, None, 0.0, False, True), True)
    return None if ok else "; ".join(str(w.message) for w in said) or "no reason given"


def _sdpa(name):
    """SDPA pinned to one backend with enable_gqa=True. Before its first call at a shape it asks torch whether the
    backend takes these inputs and, where it does not, raises with torch's reasons: the variant ends as not runnable
    here (kwiki runs the others again without it). Several query tokens: a lower-right causal bias (each new token
    sees the cache up to itself), which SDPA hands to the flash kernel as its causal mode."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.bias import causal_lower_right
    from torch.nn.functional import scaled_dot_product_attention as sdpa

    backend = SDPA_BACKENDS[name]
    asked = set()

    def call(i, o):
        q, k, v = i["q"], i["k"], i["v"]
        shape = (tuple(q.shape), tuple(k.shape))
        if shape not in asked:
            why = _sdpa_refusal(torch, backend, q, k, v)
            if why is not None:
                raise RuntimeError(f"decode_attention (decode.py): {name}: not runnable here: SDPA's {backend} "
                                   f"backend refuses q {list(q.shape)}, k and v {list(k.shape)} with enable_gqa=True "
                                   f"(torch {torch.__version__}): {why}")
            asked.add(shape)
        bias = causal_lower_right(q.shape[2], k.shape[2]) if q.shape[2] > 1 else None
        with sdpa_kernel([getattr(SDPBackend, backend)]):
            return _owned(sdpa(q, k, v, attn_mask=bias, enable_gqa=True), o["out"])
    return call


def flex_paged_attention(flex_attention, block_mask_cls, q, k, v, counts, blocks, owner, valid):
    """FlexAttention over the paged cache through the views and block mask flex_pages describes (traced whole by
    torch.compile in flex_paged; called as is, eagerly, by the CPU test)."""
    b, hq, t, d = q.shape
    pages, hkv, page, _ = k.shape

    def mask_mod(z, h, q_idx, kv_idx):
        block = kv_idx // page
        return (owner[block] == z) & (kv_idx % page < valid[block])

    mask = block_mask_cls.from_kv_blocks(counts, blocks, BLOCK_SIZE=(128, page), mask_mod=mask_mod,
                                         seq_lengths=(t, pages * hkv * page), compute_q_blocks=False)
    out = flex_attention(q.view(b * hkv, hq // hkv, t, d), k.view(1, 1, -1, d), v.view(1, 1, -1, d),
                         block_mask=mask, enable_gqa=True)
    return out.view(b, hq, t, d)


def load(name):
    if name == "torch_copy":
        def torch_copy(i, o):
            o["y"].copy_(i["x"])
        return torch_copy
    import torch

    if name in SDPA_BACKENDS:
        return _sdpa(name)
    if name == "flex":
        from torch.nn.attention.flex_attention import flex_attention

        fn = torch.compile(lambda q, k, v: flex_attention(q, k, v, enable_gqa=True), dynamic=False)
        return lambda i, o: _owned(fn(i["q"], i["k"], i["v"]), o["out"])
    if name == "flex_paged":
        import inspect

        try:
            from torch.nn.attention.flex_attention import BlockMask, flex_attention
        except ImportError as exc:
            raise RuntimeError(f"decode_attention (decode.py): flex_paged: not runnable here: torch "
                               f"{torch.__version__} has no FlexAttention BlockMask ({exc})") from None
        if "compute_q_blocks" not in inspect.signature(BlockMask.from_kv_blocks).parameters:
            raise RuntimeError(f"decode_attention (decode.py): flex_paged: not runnable here: torch "
                               f"{torch.__version__}'s BlockMask.from_kv_blocks takes no compute_q_blocks")

        def paged(*args):
            return flex_paged_attention(flex_attention, BlockMask, *args)

        fn = torch.compile(paged, dynamic=False)
        names = ("q", "k", "v", "flex_counts", "flex_blocks", "flex_owner", "flex_valid")
        return lambda i, o: _owned(fn(*(i[n] for n in names)), o["out"])
    if name == "triton_split_graph":
        return _graphed(load("triton_split"), torch)
    import kernels
    import triton

    counts = {}  # triton_split_fused: one int32 a (sequence, KV head) pair, zeroed once; each launch leaves it zero

    def launch(i, o):
        if name == "triton_read":
            x = i["x"]
            kernels.read_kernel[(triton.cdiv(x.numel(), READ_BLOCK),)](x, o["s"], x.numel(), BLOCK=READ_BLOCK,
                                                                       num_warps=8)
            return
        q, k, v, out = i["q"], i["k"], i["v"], o["out"]
        b, hq, t, d = q.shape
        hkv = k.shape[1]
        paged = name in ("triton_paged", "triton_paged64")
        page_tile = name == "triton_paged64"
        if page_tile and k.shape[2] % BLOCK_N:
            raise ValueError(f"decode_attention (decode.py): triton_paged64: pages of {k.shape[2]} tokens: the "
                             f"page must hold whole tiles of {BLOCK_N}")
        table, lens = (i["table"], i["lens"]) if paged else (q, q)  # unused by a contiguous launch
        n = table.shape[1] * k.shape[2] if paged else k.shape[2]  # paged: the capacity; lens bounds each sequence
        split = name not in ("triton_gqa", "triton_mha")
        chunk, splits = split_plan(b, hkv, n, _sm_count(q.device)) if split else (n, 1)
        group, share = hq // hkv, 1
        # kwiki:rung triton_mha
        if name == "triton_mha":  # a program a query head: each of the group's heads reads the KV head itself
            group, share = 1, hq // hkv
        # /kwiki:rung triton_mha
        fused = name == "triton_split_fused"
        if fused and splits == 1:  # one split a pair (the pairs fill the GPU): nothing to merge, rung 2's kernel
            split = False
        if fused and t != 1:
            raise ValueError(f"decode_attention (decode.py): triton_split_fused: q_len {t}: the fused combine "
                             "takes one query token")
        opart = torch.empty(b * hq * t * splits * d if split else 1, dtype=torch.float32, device=q.device)
        lse = torch.empty(b * hq * t * splits if split else 1, dtype=torch.float32, device=q.device)
        count = q  # unused unless fused
        if fused and split:
            key = (q.device, b * hkv)
            if key not in counts:
                counts[key] = torch.zeros(b * hkv, dtype=torch.int32, device=q.device)
            count = counts[key]
        kernels.decode_kernel[(b * hkv * share, splits)](
            q, k, v, table, lens, out, opart, lse, count, n, chunk, splits, table.shape[1] if paged else 0,
            1.4426950408889634 / d ** 0.5, HKV=hkv, GROUP=group, QLEN=t, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, D=d,
            PAGE=k.shape[2] if paged else 1, PAGED=paged, PAGE_TILE=page_tile, SPLIT=split, FUSED=fused and split,
            SB=COMBINE_SPLITS, KV_SHARE=share, num_warps=4, num_stages=2)
        if split and not fused:
            kernels.combine_kernel[(b * hq * t,)](opart, lse, out, splits, D=d, SB=COMBINE_SPLITS, num_warps=4)
    return launch


# kwiki:rung triton_split_graph
def _graphed(plain, torch):
    """`plain` (rung 3's launch: the split kernel, then the combine kernel) captured in a CUDA graph and replayed, so
    that the host issues one launch and the combine follows the split on the GPU with no host gap between them. A
    graph holds the buffers it was captured with, so there is one a set of them (the inputs' and outputs' addresses
    and shapes), captured at its first call (the harness's untimed check call) after one plain call that compiles the
    kernels outside the capture; the partials are allocated inside the capture, from the graph's own memory pool.
    More than GRAPHS_MAX sets means the buffers move from call to call, and a capture would land in a timed sample:
    refused, located, instead."""
    graphs = {}

    def replay(i, o):
        tensors = [t for t in (*i.values(), *o.values()) if isinstance(t, torch.Tensor)]
        key = tuple((t.data_ptr(), tuple(t.shape)) for t in tensors)
        graph = graphs.get(key)
        if graph is None:
            if len(graphs) >= GRAPHS_MAX:
                raise RuntimeError(f"decode_attention (decode.py): triton_split_graph: a {len(graphs) + 1}th set of "
                                   f"buffers (at most {GRAPHS_MAX}: one a set the harness keeps)")
            plain(i, o)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                plain(i, o)
            graphs[key] = graph
        graph.replay()
    return replay
# /kwiki:rung triton_split_graph
