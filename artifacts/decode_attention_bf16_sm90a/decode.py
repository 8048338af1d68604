"""decode_attention_bf16_sm90a: attention of one query token per sequence against a long KV cache (decode), bf16,
head dim 128, 32 query heads over 8 KV heads (grouped-query attention), contiguous and paged caches, against the
read roof, SDPA (flash backend) and FlexAttention.

Decode reads the whole KV cache once per token and does 2 flops per byte read (bf16): it is memory-bound, and
work() counts the bytes of K and V (plus q, the output and a paged cache's block table) at the DRAM level. The
roof is measured in the same run: a Triton read of 1 GiB (triton_read) and torch's copy of it (torch_copy).
Rung 1 (triton_gqa): one program per (sequence, KV head) walks the whole cache, the 4 query heads of its group
sharing every K and V tile. Rung 2 (triton_split): flash-decoding, the cache split into chunks so that about
4 programs per SM run whatever the batch, each writing a partial (normalised output, log-sum-exp), then a
combine kernel. Rung 3 (triton_paged): rung 2 reading a paged cache (pages of 16 tokens, a block table in
shuffled order, a ragged last page). Baselines: SDPA pinned to its flash backend with enable_gqa=True (no
expanded KV), and FlexAttention (torch.compile of flex_attention, enable_gqa=True, no block mask: its decoding
path for one query token) compiled at one shape only (a compile costs 10-40 s).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

import math

HQ, HKV, DIM = 32, 8, 128
SHAPES = [(1, 32768), (16, 8192), (64, 8192), (3, 1007)]  # (batch, kv_len); 1007 is no multiple of any tile
PAGED = [(1, 32768), (64, 8192), (3, 1007)]  # 1007 = 62 full pages of 16 and a ragged 15-token page
PAGE = 16
FLEX_AT = (1, 32768)  # FlexAttention compiles at this shape only
ROOF_MIB = 1024
BLOCK_N, BLOCK_H = 64, 16  # tokens per K/V tile; query-head rows of a tile (tl.dot needs 16, a group has 4)
PROGRAMS_PER_SM, MIN_CHUNK = 4, 256  # split-KV: enough programs to fill the GPU, chunks not shorter than 256
READ_BLOCK = 16384
COMBINE_SPLITS = 64  # splits the combine kernel merges per step: the plans here (at most 64 splits) take one step

FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)


def _decode(batch, kv_len, layout):
    return {"op": "decode", "layout": layout, "batch": batch, "kv_len": kv_len, "q_heads": HQ, "kv_heads": HKV,
            "head_dim": DIM, "page": PAGE if layout == "paged" else 0, "dtype": "bfloat16"}


GRID = [
    {"op": "read", "mib": ROOF_MIB, "dtype": "bfloat16"},
    {"op": "copy", "mib": ROOF_MIB, "dtype": "bfloat16"},
    *(_decode(b, n, "contiguous") for b, n in SHAPES),
    *(_decode(b, n, "paged") for b, n in PAGED),
]
VARIANTS = ["triton_read", "torch_copy", "sdpa_flash", "flex", "triton_gqa", "triton_split", "triton_paged"]
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
    if params["layout"] == "paged":
        return name == "triton_paged"
    shape = (params["batch"], params["kv_len"])
    return {"triton_read": False, "torch_copy": False, "triton_paged": False,
            "flex": shape == FLEX_AT}.get(name, True)


def _validate(params):
    """Reject what the kernels do not support, with the reason, before any CUDA work."""
    op = params.get("op")
    if op in ("read", "copy"):
        if not isinstance(params.get("mib"), int) or params["mib"] <= 0:
            raise ValueError(f"decode_attention: params {params}: mib must be a positive integer")
        return
    if op != "decode":
        raise ValueError(f"decode_attention: params {params}: op must be read, copy or decode")
    hq, hkv = params["q_heads"], params["kv_heads"]
    if hkv <= 0 or hq % hkv != 0 or hq // hkv > BLOCK_H:
        raise ValueError(f"decode_attention: params {params}: q_heads ({hq}) must be a multiple of kv_heads ({hkv}) "
                         f"with at most {BLOCK_H} query heads a KV head (a group is one tile's rows)")
    if params["head_dim"] != DIM:
        raise ValueError(f"decode_attention: params {params}: head_dim must be {DIM}")
    if params["batch"] <= 0 or params["kv_len"] <= 0:
        raise ValueError(f"decode_attention: params {params}: batch and kv_len must be positive")
    if params["layout"] not in ("contiguous", "paged") or (params["layout"] == "paged") != (params["page"] > 0):
        raise ValueError(f"decode_attention: params {params}: layout contiguous (page 0) or paged (page > 0)")


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

    q = randn(b, hq, 1, d)
    if params["layout"] == "contiguous":
        return {"q": q, "k": randn(b, hkv, n, d), "v": values(b, hkv, n, d)}
    page = params["page"]
    per_seq = -(-n // page)
    table = torch.randperm(b * per_seq, generator=g, device=device).to(torch.int32).view(b, per_seq)
    lens = torch.full((b,), n, dtype=torch.int32, device=device)  # every sequence kv_len long, its last page ragged
    return {"q": q, "k": randn(b * per_seq, hkv, page, d), "v": values(b * per_seq, hkv, page, d), "table": table,
            "lens": lens}


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
    b, hq, hkv, d = params["batch"], params["q_heads"], params["kv_heads"], params["head_dim"]
    q = inputs["q"].double().view(b, hkv, hq // hkv, d)
    step = max(1, (1 << 29) // (hkv * k.shape[2] * d))  # sequences a step: fp64 copies of K and V of 4 GiB at most
    out = []
    for i in range(0, b, step):
        s = torch.einsum("bhgd,bhld->bhgl", q[i:i + step], k[i:i + step].double()) / d ** 0.5
        out.append(torch.einsum("bhgl,bhld->bhgd", torch.softmax(s, -1), v[i:i + step].double()))
    return {"out": torch.cat(out).reshape(b, hq, 1, d)}


def work(params):
    if params["op"] in ("read", "copy"):
        n = params["mib"] << 20
        return {"bytes": float(n if params["op"] == "read" else 2 * n), "bytes_level": "dram"}
    b, n, hq, hkv, d = params["batch"], params["kv_len"], params["q_heads"], params["kv_heads"], params["head_dim"]
    kv = 2 * b * hkv * n * d * 2  # K and V, bf16, each byte once
    qo = 2 * b * hq * d * 2  # q read, out written
    table = 4 * b * (1 + -(-n // params["page"])) if params["page"] else 0  # block table and lengths, int32
    return {"bytes": float(kv + qo + table), "bytes_level": "dram",
            "flops": float(4 * b * hq * n * d), "flops_dtype": "bf16"}


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


def load(name):
    if name == "torch_copy":
        def torch_copy(i, o):
            o["y"].copy_(i["x"])
        return torch_copy
    import torch

    if name == "sdpa_flash":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.functional import scaled_dot_product_attention as sdpa

        def sdpa_flash(i, o):
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return _owned(sdpa(i["q"], i["k"], i["v"], enable_gqa=True), o["out"])
        return sdpa_flash
    if name == "flex":
        from torch.nn.attention.flex_attention import flex_attention

        fn = torch.compile(lambda q, k, v: flex_attention(q, k, v, enable_gqa=True), dynamic=False)
        return lambda i, o: _owned(fn(i["q"], i["k"], i["v"]), o["out"])
    import kernels
    import triton

    def launch(i, o):
        if name == "triton_read":
            x = i["x"]
            kernels.read_kernel[(triton.cdiv(x.numel(), READ_BLOCK),)](x, o["s"], x.numel(), BLOCK=READ_BLOCK,
                                                                       num_warps=8)
            return
        q, k, v, out = i["q"], i["k"], i["v"], o["out"]
        b, hq, _, d = q.shape
        hkv = k.shape[1]
        paged = name == "triton_paged"
        table, lens = (i["table"], i["lens"]) if paged else (q, q)  # unused by a contiguous launch
        n = table.shape[1] * k.shape[2] if paged else k.shape[2]  # paged: the capacity; lens bounds each sequence
        split = name != "triton_gqa"
        chunk, splits = split_plan(b, hkv, n, _sm_count(q.device)) if split else (n, 1)
        opart = torch.empty(b * hq * splits * d if split else 1, dtype=torch.float32, device=q.device)
        lse = torch.empty(b * hq * splits if split else 1, dtype=torch.float32, device=q.device)
        kernels.decode_kernel[(b * hkv, splits)](
            q, k, v, table, lens, out, opart, lse, n, chunk, splits, table.shape[1] if paged else 0,
            1.4426950408889634 / d ** 0.5, HKV=hkv, GROUP=hq // hkv, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, D=d,
            PAGE=k.shape[2] if paged else 1, PAGED=paged, SPLIT=split, num_warps=4, num_stages=2)
        if split:
            kernels.combine_kernel[(b * hq,)](opart, lse, out, splits, D=d, SB=COMBINE_SPLITS, num_warps=4)
    return launch

