"""moe_grouped_gemm_bf16_sm90a: the grouped GEMM of a mixture-of-experts layer in bf16 (fp32 accumulation) over
ragged experts, in Triton, against a loop of torch.mm (cuBLAS), cuBLAS's grouped API, torch._grouped_mm (CUTLASS)
and one dense torch.mm.

Tokens arrive already routed and sorted by expert: A [T, K] holds the routed rows (T = tokens * top-k), W [E, N, K]
the experts' weights (nn.Linear's [out, in] per expert), offs int32 [E] the cumulative end row of each expert
(torch._grouped_mm's convention). C [T, N] = for each expert e, A[rows of e] @ W[e]^T, in bf16.
The routing is part of the shape, so it is drawn from the params alone (seeded, in pure Python): each token picks
top-k distinct experts with probability proportional to Zipf weights 1 / rank^skew over a seeded ranking of the
experts (route "zipf"), or every expert gets T / E rows (route "balanced", the control with the same total), or
the counts are given (route "fixed": the off-tile case, with empty experts). The seed of an input set draws only
the values of A and W. Shapes are DeepSeek-V3's experts (arXiv:2412.19437): the fused gate/up projection
(N 4096, K 7168) and the down projection (N 7168, K 2048), 64 local experts; prefill is 8192 tokens top-8
(65536 rows, the issue's size) and 2048 tokens top-8 (16384 rows, the first part's), decode 256 tokens top-8
(2048 rows). The dense entry is one expert holding all 16384 rows: the same FLOPs as the 2048-token prefill
entries in one cuBLAS call, the roof-like reference.
Two layouts. Contiguous (prefill, and decode as a control): A [T, K] with the experts' rows back to back, offs
int32 [E] their cumulative ends. Masked (decode; entries with a "capacity" param): every expert owns `capacity`
rows, A [E, capacity, K] and C [E, capacity, N], and `counts` int32 [E] says how many of them are real (the
layout DeepGEMM calls masked: no prefix sum, a fixed address per expert, the rows past the count are whatever
the dispatch left there, random values here). Only the real rows of C are checked: the reference is sampled
(the flat indices of those rows and their values), so a variant may write the padding or leave it.
Rungs: 0 a Python loop of torch.mm over the experts (what one writes first; the offsets go to the host first),
cuBLAS's grouped API (one cublasGemmGroupedBatchedEx call, below), torch._grouped_mm (one CUTLASS grouped launch;
batched, over every expert's whole capacity, in the masked layout), torch.bmm over the whole capacity (masked
layout only), torch.mm on the dense entry; 1 a Triton grouped GEMM: one launch,
the (expert, m-tile, n-tile) schedule found on the device from offs, pointer tiles, masked edges; 2 a persistent
Triton grouped GEMM, one program per SM walking the schedule in grouped order inside each expert, TMA loads; the
same kernel reads either layout (its schedule takes each expert's first row from offs, or from e * capacity).
cublas_grouped calls cublasGemmGroupedBatchedEx (cuBLAS 12.5 and later) once, one group of one problem per expert
with rows, through cublas_grouped.cu (built by kwiki into the library at $KWIKI_CUDA_LIBRARY, called through ctypes
on torch's current stream). cuBLAS takes each group's sizes in host arrays, so the call reads the offsets back first
(a device-to-host copy and a sync, as the loop does) and copies the per-expert pointer arrays to the device. How it
reaches cuBLAS: kwiki's CUDA-in-Python build has no link flags and the toolkit kwiki compiles with need not ship
cuBLAS, so the library links no cuBLAS and includes no cuBLAS header; this module finds the libcublas that torch has
already loaded (its path in /proc/self/maps) and hands the library the address of cublasGemmGroupedBatchedEx in it,
with torch's own handle (torch.cuda.current_blas_handle(): torch's workspace, bound to the current stream). So the
baseline runs the very cuBLAS build the torch.mm loop runs, no second copy is loaded, and kwiki needed no change.
Where torch has no CUDA, no libcublas is loaded, or it lacks the symbol, the variant is not runnable and says why.
fp8 (the entries whose dtype is float8_e4m3fn): A and W in e4m3, bf16 out, under two scalings (the `scaling` param).
Row-wise: one fp32 scale per routed row of A and one per output channel of each expert (scale = amax / 448);
torch_scaled_grouped_mm (torch._scaled_grouped_mm, PyTorch's CUTLASS row-wise fp8 grouped GEMM on sm_90) is the
baseline, and rung 3 is rung 2's persistent schedule on e4m3 tiles, promoting the tensor cores' partial sums every
128 elements of K and scaling in the epilogue. Block: DeepSeek-V3's, one scale per 1 x 128 group of a routed row and
one per 128 x 128 block of each expert's weight; rung 4 scales each 128-deep partial as it promotes it (no library
runs these scales grouped on sm_90 in this torch: rung 4 is held against rung 3 and against bf16). Rungs 5 and 6
(cuda_grouped_fp8, cuda_grouped_fp8_block): the same two scalings in CUDA, ws_grouped.cu, the warp-specialized CTA
of artifacts/common/kwiki_ws_gemm.cuh (a TMA producer warpgroup, two wgmma consumers promoting every 128) walking every
expert's tiles; built into the library beside cublas_grouped.cu. Rung 7 (cuda_grouped): the same schedule and
warp-specialized CTA in bf16 (128 x 256 tiles, one k-block of wgmma kept in flight), at every bf16 prefill, decode
and off-tile entry, in both layouts (masked: each expert's rows from e x capacity, its count of them in the tables). The reference is the fp32 product of the dequantized operands (codes times scales), so the
check judges the arithmetic, not the quantization; the fp8 entries sit beside bf16 ones of the same routing and
shape, so that a claim can set the two side by side.
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

import functools
import random

ROUTE_SEED = 36  # the seed of every drawn routing (the shape's, not an input set's)
SKEW = 1.2  # Zipf exponent over expert ranks
PREFILL = {"experts": 64, "tokens": 2048, "topk": 8}  # 16384 rows
PREFILL_8K = {"experts": 64, "tokens": 8192, "topk": 8}  # 65536 rows: 8192 tokens top-8
DECODE = {"experts": 64, "tokens": 256, "topk": 8}
CAPACITY = 256  # the masked decode layout's rows an expert: the decode routing's largest expert (248) fits
BF16, FP8 = "bfloat16", "float8_e4m3fn"
FP8_SCALINGS = ("row", "block")
SCALE_GROUP = 128  # block scaling: 1 x 128 groups of A's rows, 128 x 128 blocks of W
E4M3_MAX = 448.0  # the largest finite e4m3 value: a row's amax maps to it
UP, DOWN = {"n": 4096, "k": 7168}, {"n": 7168, "k": 2048}  # DeepSeek-V3: fused gate/up, and down
OFF_TILE_COUNTS = (0, 1, 200, 130, 0, 461, 67, 300)  # no count a multiple of 64 or 128, two empty experts
GRID = [
    {"case": "prefill", "route": "zipf", **PREFILL, **UP, "dtype": "bfloat16"},
    {"case": "prefill", "route": "balanced", **PREFILL, **UP, "dtype": "bfloat16"},
    {"case": "prefill", "route": "zipf", **PREFILL, **DOWN, "dtype": "bfloat16"},
    {"case": "dense", "route": "balanced", "experts": 1, "tokens": 16384, "topk": 1, **UP, "dtype": "bfloat16"},
    {"case": "prefill", "route": "zipf", **PREFILL_8K, **UP, "dtype": "bfloat16"},
    {"case": "prefill", "route": "balanced", **PREFILL_8K, **UP, "dtype": "bfloat16"},
    {"case": "prefill", "route": "zipf", **PREFILL_8K, **DOWN, "dtype": "bfloat16"},
    {"case": "decode", "route": "zipf", **DECODE, **DOWN, "dtype": "bfloat16"},
    {"case": "masked", "route": "zipf", **DECODE, **DOWN, "capacity": CAPACITY, "dtype": "bfloat16"},
    {"case": "offtile", "route": "fixed", "experts": len(OFF_TILE_COUNTS), "tokens": sum(OFF_TILE_COUNTS),
     "topk": 1, "n": 1000, "k": 1000, "dtype": "bfloat16"},
    {"case": "offtile", "route": "fixed", "experts": len(OFF_TILE_COUNTS), "tokens": sum(OFF_TILE_COUNTS),
     "topk": 1, "n": 1000, "k": 1000, "capacity": 470, "dtype": "bfloat16"},  # masked: no capacity a tile's multiple
    *({"case": "prefill", "route": "zipf", **PREFILL_8K, **UP, "scaling": sc, "dtype": FP8} for sc in FP8_SCALINGS),
    *({"case": "offtile", "route": "fixed", "experts": len(OFF_TILE_COUNTS), "tokens": sum(OFF_TILE_COUNTS),
       "topk": 1, "n": 1008, "k": 1040, "scaling": sc, "dtype": FP8}  # e4m3 rows of 16 bytes, of no tile: N and K
      for sc in FP8_SCALINGS),  # multiples of 16; K's last 128-group partial
]
VARIANTS = ["torch_mm_loop", "cublas_grouped", "torch_grouped_mm", "torch_bmm", "torch_mm_dense", "triton_grouped",
            "triton_grouped_tma_persistent", "torch_scaled_grouped_mm", "triton_grouped_fp8", "triton_grouped_fp8_block",
            "cuda_grouped_fp8", "cuda_grouped_fp8_block", "cuda_grouped"]
FP8_VARIANTS = {"row": ("torch_scaled_grouped_mm", "triton_grouped_fp8", "cuda_grouped_fp8"),
                "block": ("triton_grouped_fp8_block", "cuda_grouped_fp8_block")}
CUDA_FP8 = {"cuda_grouped_fp8": 0, "cuda_grouped_fp8_block": 1}  # variant -> ws_grouped.cu's kwiki_moe_fp8(variant, ...)
MAX_EXPERTS = 256  # ws_grouped.cu's schedule in shared memory
CUBLAS_SYMBOL = "cublasGemmGroupedBatchedEx"  # cuBLAS 12.5 and later
TOLERANCES = {
    "bfloat16": (0.01, 2.0 ** -7, "a bf16 output (one rounding, 2^-9 relative) of an fp32 sum over K <= 7168 in "
                                  "another order than the fp32 reference; outputs are O(1/3) by construction, "
                                  "atol covers sums that cancel near 0"),
    FP8: (0.01, 2.0 ** -7, "the same bf16 output and tolerance as the bf16 entries: every variant multiplies the same "
                           "dequantized values (e4m3 codes times their row and channel scales; the reference is "
                           "their fp32 product), and the tensor cores' limited-precision fp8 sums are promoted to "
                           "fp32 every 128 elements of K (about 2^-13 of a partial sum each), far under the bf16 "
                           "rounding"),
}
# rung 3's tile: the fp8 GEMM page's (128 x 128 x 128, 8 warps, 4 stages: promotion keeps no second accumulator
# here, max_num_imprecise_acc does it in the tensor cores' loop); e4m3 is one byte, so BK 128 is a 128-byte row
FP8_TILE = {"BM": 128, "BN": 128, "BK": 128, "num_warps": 8, "num_stages": 4}
# Tiles: 128x256x64 with 8 warps (the shape of the dense Triton GEMM page) when experts average 128 rows or more,
# else 64x128x64 with 4 warps: a 128-row tile would be mostly padding at a few dozen rows an expert.
BIG = {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 3}
SMALL = {"BM": 64, "BN": 128, "BK": 64, "num_warps": 4, "num_stages": 4}
GROUP_M = 8


def masked(params):
    """Whether a params entry is in the masked layout (it has a capacity)."""
    return bool(params.get("capacity"))


def applies(name, params):
    fp8 = [v for names in FP8_VARIANTS.values() for v in names]
    if (name in fp8) != (params["dtype"] == FP8):  # the fp8 entries run the fp8 variants only
        return False
    if name in fp8:
        return name in FP8_VARIANTS[params["scaling"]]
    if name == "torch_mm_dense" or params["case"] == "dense":
        return (name == "torch_mm_dense") == (params["case"] == "dense")
    if name == "cuda_grouped":  # rung 7: both layouts, at prefill, decode and off the tile
        return params["case"] in ("prefill", "decode", "masked", "offtile")
    if name in ("cublas_grouped", "triton_grouped", "torch_bmm"):
        if masked(params):  # cuBLAS's grouped call and rung 1 read offsets; bmm runs the padded batch only
            return name == "torch_bmm"
        if name == "torch_bmm":
            return False
    if name == "triton_grouped":  # rung 1 is timed where rung 2 is compared with it (the 16384-row prefill) and
        return params["case"] == "offtile" or params["tokens"] == PREFILL["tokens"]  # checked off the tile
    return True


@functools.cache
def _counts(route, experts, tokens, topk):
    """Rows per expert, a function of the params only (pure Python, so work() needs no torch)."""
    if route == "fixed":
        return OFF_TILE_COUNTS
    if route == "balanced":
        return tuple([tokens * topk // experts] * experts)
    rng = random.Random(ROUTE_SEED)
    rank = list(range(experts))
    rng.shuffle(rank)
    weight = [1.0 / (rank[e] + 1) ** SKEW for e in range(experts)]
    counts = [0] * experts
    for _ in range(tokens):  # top-k distinct experts, weighted (Efraimidis-Spirakis keys u^(1/w))
        keys = sorted(range(experts), key=lambda e: rng.random() ** (1.0 / weight[e]), reverse=True)
        for e in keys[:topk]:
            counts[e] += 1
    return tuple(counts)


def counts(params):
    """The rows of each expert for a params entry (validated: a located message before any CUDA work)."""
    p = params
    if p["route"] not in ("zipf", "balanced", "fixed") or min(p["experts"], p["tokens"], p["topk"]) <= 0:
        raise ValueError(f"moe: params {p}: route must be zipf, balanced or fixed; experts, tokens, topk positive")
    if p["route"] == "balanced" and (p["tokens"] * p["topk"]) % p["experts"]:
        raise ValueError(f"moe: params {p}: a balanced route needs tokens * topk divisible by experts")
    if p["route"] == "fixed" and (p["experts"], p["tokens"] * p["topk"]) != (len(OFF_TILE_COUNTS),
                                                                           sum(OFF_TILE_COUNTS)):
        raise ValueError(f"moe: params {p}: a fixed route has {len(OFF_TILE_COUNTS)} experts and "
                         f"{sum(OFF_TILE_COUNTS)} rows")
    if p["topk"] > p["experts"] or p["n"] % 8 or p["k"] % 8:
        raise ValueError(f"moe: params {p}: topk <= experts, and n and k multiples of 8 (16-byte rows for TMA "
                         "and torch._grouped_mm)")
    fp8 = p.get("dtype") == FP8
    if p.get("dtype") not in (BF16, FP8) or (fp8 and (p["n"] % 16 or p["k"] % 16 or masked(p))) \
            or ("scaling" in p) != fp8 or (fp8 and p["scaling"] not in FP8_SCALINGS):
        raise ValueError(f"moe: params {p}: dtype {BF16} or {FP8}; fp8 in the contiguous layout, with n and k "
                         "multiples of 16 (16-byte e4m3 rows, as TMA and torch._scaled_grouped_mm want) and a "
                         f"scaling of {FP8_SCALINGS} (bf16 without one)")
    c = _counts(p["route"], p["experts"], p["tokens"], p["topk"])
    cap = p.get("capacity")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool) or cap < max(c)):
        raise ValueError(f"moe: params {p}: capacity must be an integer of at least the largest expert's "
                         f"{max(c)} rows (the masked layout holds every expert's rows)")
    return c


def tiles(rows, experts, is_masked=False):
    """The tile configuration of a shape (from the tensors' sizes: no host sync). The masked layout is decode's,
    and its A's size is the capacity, not the rows: it always takes the small tile."""
    return SMALL if is_masked or rows < 128 * experts else BIG


def lanes(experts):
    """The vector width that holds every expert's offsets in a program (at least 16 lanes)."""
    return max(16, 1 << (experts - 1).bit_length())


def make_inputs(params, seed, device):
    import torch

    c = counts(params)
    rows, n, k = sum(c), params["n"], params["k"]
    g = torch.Generator(device=device).manual_seed(seed)
    if params["dtype"] == FP8:
        return _fp8_inputs(c, n, k, g, device, params["scaling"])
    shape = (len(c), params["capacity"], k) if masked(params) else (rows, k)
    a = torch.rand(*shape, generator=g, device=device).mul_(2).sub_(1).to(torch.bfloat16)  # uniform(-1, 1)
    w = torch.rand(len(c), n, k, generator=g, device=device).mul_(2).sub_(1).mul_(k ** -0.5).to(torch.bfloat16)
    if masked(params):  # every row is drawn, the padding too: a kernel that reads it into a real row is wrong
        return {"a": a, "w": w, "counts": torch.tensor(c, dtype=torch.int32, device=device)}
    ends = [sum(c[:e + 1]) for e in range(len(c))]
    return {"a": a, "w": w, "offs": torch.tensor(ends, dtype=torch.int32, device=device)}


def _blocks(x, rows, cols):
    """x [R, C] as [R/rows, rows, C/cols, cols] blocks, zero-padded (zeros change no amax)."""
    import torch.nn.functional as F

    r, c = x.shape
    x = F.pad(x, (0, -c % cols, 0, -r % rows))
    return x.reshape(x.shape[0] // rows, rows, x.shape[1] // cols, cols)


def _expand(s, rows, cols, shape):
    """A per-block scale grid [R/rows, C/cols] expanded to one scale per element of shape [R, C]."""
    return s.repeat_interleave(rows, 0).repeat_interleave(cols, 1)[: shape[0], : shape[1]]


def _fp8_inputs(c, n, k, g, device, scaling):
    """The same distributions as the bf16 entries, quantized to e4m3 (scale = amax / 448 over what a scale covers, so
    its largest value becomes +-448). Row-wise: sa[T] for A's rows, sw[E, N] for each expert's output channels.
    Block: sa[K/128, T] per 1 x 128 group (stored K-group-major), sw[E, N/128, K/128] per 128 x 128 block."""
    import torch

    rows, q = sum(c), SCALE_GROUP
    a = torch.rand(rows, k, generator=g, device=device).mul_(2).sub_(1)
    if scaling == "row":
        sa = a.abs().amax(1).clamp_min(1e-12) / E4M3_MAX
        qa = (a / sa[:, None]).to(torch.float8_e4m3fn)
    else:
        sa = _blocks(a, 1, q).abs().amax(dim=(1, 3)).clamp_min(1e-12) / E4M3_MAX  # [T, K/128]
        qa = (a / _expand(sa, 1, q, a.shape)).to(torch.float8_e4m3fn)
        sa = sa.t().contiguous()
    del a
    qw = torch.empty(len(c), n, k, dtype=torch.float8_e4m3fn, device=device)
    sw = torch.empty(len(c), *((n,) if scaling == "row" else (-(-n // q), -(-k // q))), dtype=torch.float32,
                     device=device)
    for e in range(len(c)):  # one expert at a time: the fp32 weights of all 64 would take 7.5 GB
        w = torch.rand(n, k, generator=g, device=device).mul_(2).sub_(1).mul_(k ** -0.5)
        if scaling == "row":
            sw[e] = w.abs().amax(1).clamp_min(1e-12) / E4M3_MAX
            qw[e] = (w / sw[e][:, None]).to(torch.float8_e4m3fn)
        else:
            sw[e] = _blocks(w, q, q).abs().amax(dim=(1, 3)).clamp_min(1e-12) / E4M3_MAX
            qw[e] = (w / _expand(sw[e], q, q, w.shape)).to(torch.float8_e4m3fn)
    ends = [sum(c[:e + 1]) for e in range(len(c))]
    return {"a": qa, "w": qw, "sa": sa, "sw": sw, "offs": torch.tensor(ends, dtype=torch.int32, device=device)}


def _dequantized(inputs, s, m, e):
    """Rows s .. s+m of A and expert e's weight as fp32 values: the codes times their scales."""
    a, w, sa, sw, q = inputs["a"][s:s + m].float(), inputs["w"][e].float(), inputs["sa"], inputs["sw"], SCALE_GROUP
    if sw.dim() == 2:  # row-wise
        return a * sa[s:s + m, None], w * sw[e][:, None]
    return a * _expand(sa.t()[s:s + m], 1, q, a.shape), w * _expand(sw[e], q, q, w.shape)


def make_outputs(params, inputs):
    import torch

    a, w = inputs["a"], inputs["w"]
    return {"c": torch.empty(*a.shape[:-1], w.shape[1], dtype=torch.bfloat16, device=a.device)}


def _spans(inputs):
    """(expert, first row, rows) of every expert, rows counted in A viewed as 2-D (host lists)."""
    if "counts" in inputs:
        cap = inputs["a"].shape[1]
        return [(e, e * cap, m) for e, m in enumerate(inputs["counts"].tolist())]
    ends = inputs["offs"].tolist()
    return [(e, ends[e - 1] if e else 0, end - (ends[e - 1] if e else 0)) for e, end in enumerate(ends)]


def reference(params, inputs):
    """fp32 per expert. In the masked layout, a sampled reference: the flat indices of the real rows of C and
    their values (the padding rows are no one's output)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference, not TF32
    a, w = inputs["a"], inputs["w"]
    a2, n = a.reshape(-1, a.shape[-1]), w.shape[1]
    spans = [(e, s, m) for e, s, m in _spans(inputs) if m]
    ref = torch.empty(sum(m for _, _, m in spans) if "counts" in inputs else a2.shape[0], n,
                      dtype=torch.float32, device=a.device)
    at = 0
    for e, s, m in spans:
        where = slice(at, at + m) if "counts" in inputs else slice(s, s + m)
        if "sa" not in inputs:
            ref[where] = a2[s:s + m].float() @ w[e].float().t()
        else:  # fp8: the codes times their scales
            da, dw = _dequantized(inputs, s, m, e)
            ref[where] = da @ dw.t()
        at += m
    if "counts" not in inputs:
        return {"c": ref}
    rows = torch.cat([torch.arange(s, s + m, device=a.device) for _, s, m in spans])
    index = (rows[:, None] * n + torch.arange(n, device=a.device)[None, :]).reshape(-1)
    return {"c": (index, ref.reshape(-1))}


def work(params):
    c = counts(params)
    rows, n, k = sum(c), params["n"], params["k"]
    used = sum(1 for x in c if x)  # an empty expert's weights need not be read
    if params["dtype"] == FP8:  # one byte an operand element, fp32 scales, a bf16 output
        q = SCALE_GROUP
        scales = rows + used * n if params["scaling"] == "row" else (rows + used * -(-n // q)) * -(-k // q)
        return {"flops": 2.0 * rows * n * k, "flops_dtype": "fp8", "bytes_level": "dram",
                "bytes": 1.0 * (rows * k + used * n * k) + 4.0 * scales + 2.0 * rows * n}
    return {"flops": 2.0 * rows * n * k, "flops_dtype": "bf16",
            "bytes": 2.0 * (rows * k + used * n * k + rows * n), "bytes_level": "dram"}


def _loop(i, o):
    """Rung 0: one torch.mm (cuBLAS) per non-empty expert, on views of A and C; the offsets (or the masked
    layout's counts) go to the host."""
    import torch

    a, w, c = i["a"].reshape(-1, i["a"].shape[-1]), i["w"], o["c"].reshape(-1, i["w"].shape[1])
    for e, s, m in _spans(i):
        if m:
            torch.mm(a[s:s + m], w[e].t(), out=c[s:s + m])


def cublas_operands_error(a, w, c, offs):
    """What cublas_grouped is not built for in these tensors, or None (checked before any CUDA call)."""
    import torch

    bad = [f"{x} is {t.dtype}, not torch.bfloat16" for x, t in (("a", a), ("w", w), ("c", c))
           if t.dtype != torch.bfloat16]
    if offs.dtype != torch.int32:
        bad.append(f"offs is {offs.dtype}, not torch.int32")
    if (a.dim(), w.dim(), c.dim(), offs.dim()) != (2, 3, 2, 1):
        return "; ".join([*bad, "a, w, c and offs must be [T, K], [E, N, K], [T, N] and [E]"])
    (t, k), (e, n, kw) = a.shape, w.shape
    if kw != k or tuple(c.shape) != (t, n) or offs.shape[0] != e:
        bad.append(f"shapes a {tuple(a.shape)}, w {tuple(w.shape)}, c {tuple(c.shape)}, offs {tuple(offs.shape)} "
                   "do not agree")
    if n % 8 or k % 8:
        bad.append(f"n {n} and k {k} must be multiples of 8 (16-byte rows, as cuBLAS wants bf16 pointers aligned)")
    bad += [f"{x} is not contiguous" for x, t in (("a", a), ("w", w), ("c", c), ("offs", offs))
            if not t.is_contiguous()]
    if max(t, n, k) >= 2 ** 31:
        bad.append("a size does not fit cuBLAS's 32-bit m, n, k")
    bad += [f"{x} is on {t.device}, not a CUDA device" for x, t in (("a", a), ("w", w), ("c", c)) if not t.is_cuda]
    if len({str(t.device) for t in (a, w, c, offs)}) > 1:
        bad.append("a, w, c and offs are not on one device")
    return "; ".join(bad) or None


def cublas_ends_error(ends, rows):
    """What is wrong with the offsets read back to the host (cumulative end rows, ending at T), or None."""
    start = 0
    for e, end in enumerate(ends):
        if end < start:
            return f"offs[{e}] = {end} is below offs[{e - 1}] = {start}" if e else f"offs[0] = {end} is negative"
        start = end
    return None if start == rows else f"the offsets end at {start}, not at the {rows} rows of a"


def loaded_cublas(maps):
    """The path of the libcublas (not libcublasLt) mapped into a process, from the text of its /proc/PID/maps; None
    where there is none."""
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].strip().rsplit("/", 1)[-1].startswith("libcublas.so"):
            return parts[5].strip()
    return None


def cublas_symbol(path):
    """The address of cublasGemmGroupedBatchedEx in the library at `path`; RuntimeError (not runnable) without it."""
    import ctypes

    try:
        return ctypes.cast(getattr(ctypes.CDLL(path), CUBLAS_SYMBOL), ctypes.c_void_p).value
    except AttributeError:
        raise RuntimeError(f"cublas_grouped is not runnable here: {path} has no {CUBLAS_SYMBOL} (cuBLAS 12.5 or "
                           "later has it)") from None


# kwiki:rung cublas_grouped
def _cublas_grouped():
    """Rung 0: one cublasGemmGroupedBatchedEx call through cublas_grouped.cu, with torch's cuBLAS (see the module's
    docstring). Not runnable, with the reason, before anything is called where that cannot work here."""
    import ctypes
    import os

    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("cublas_grouped is not runnable here: no CUDA device in this torch "
                           f"({torch.__version__}); cuBLAS's grouped GEMM runs on the GPU only")
    library = os.environ.get("KWIKI_CUDA_LIBRARY")
    if not library:
        raise RuntimeError("cublas_grouped is not runnable here: no $KWIKI_CUDA_LIBRARY (kwiki builds "
                           "cublas_grouped.cu into it)")
    torch.cuda.current_blas_handle()  # torch's handle for this device, made now if it was not yet
    with open("/proc/self/maps", encoding="utf-8", errors="replace") as fh:
        path = loaded_cublas(fh.read())
    if path is None:
        raise RuntimeError(f"cublas_grouped is not runnable here: torch {torch.__version__} has loaded no libcublas")
    gemm = cublas_symbol(path)
    fn = ctypes.CDLL(library).kwiki_moe_cublas_grouped
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int),
                   *[ctypes.c_int] * 4, *[ctypes.c_void_p] * 4]
    fn.restype = ctypes.c_int

    def grouped(i, o):
        a, w, c, offs = i["a"], i["w"], o["c"], i["offs"]
        where = "moe_grouped_gemm_bf16_sm90a (moe.py): cublas_grouped"
        why = cublas_operands_error(a, w, c, offs)
        if why:
            raise ValueError(f"{where}: {why}")
        ends = offs.tolist()  # the device-to-host copy and sync: cuBLAS takes each group's m on the host
        why = cublas_ends_error(ends, a.shape[0])
        if why:
            raise ValueError(f"{where}: {why}")
        e, (t, k), n = len(ends), a.shape, w.shape[1]
        table = torch.empty(3 * e, dtype=torch.int64, device=a.device)  # the device's pointer arrays (stream-ordered)
        err = fn(gemm, torch.cuda.current_blas_handle(), torch.cuda.current_stream().cuda_stream,
                 (ctypes.c_int * e)(*ends), e, t, n, k, a.data_ptr(), w.data_ptr(), c.data_ptr(), table.data_ptr())
        if err:
            raise RuntimeError(f"{where}: kwiki_moe_cublas_grouped returned {err} (-1: operands refused; -1000 - s: "
                               "cuBLAS status s; else a CUDA error code of the pointers' copy)")
    return grouped
# /kwiki:rung cublas_grouped


def _torch(name):
    """The torch baselines (rung 0, and the dense reference)."""
    import torch

    if name == "torch_mm_loop":
        return _loop
    if name == "torch_mm_dense":
        def dense(i, o):
            torch.mm(i["a"], i["w"][0].t(), out=o["c"])
        return dense
    if name == "torch_bmm":
        def bmm(i, o):  # the masked layout's padded batch: every expert's whole capacity, one cuBLAS call
            torch.bmm(i["a"], i["w"].transpose(1, 2), out=o["c"])
        return bmm
    if name == "torch_scaled_grouped_mm":
        if not hasattr(torch, "_scaled_grouped_mm"):
            raise RuntimeError(f"torch {torch.__version__} has no torch._scaled_grouped_mm (not applicable here)")

        def scaled(i, o):  # row-wise fp8: sa[T] per routed row, sw[E, N] per expert and output channel
            return {"c": torch._scaled_grouped_mm(i["a"], i["w"].transpose(-2, -1), i["sa"], i["sw"], offs=i["offs"],
                                                  out_dtype=torch.bfloat16)}
        return scaled
    if not hasattr(torch, "_grouped_mm"):
        raise RuntimeError(f"torch {torch.__version__} has no torch._grouped_mm (not applicable here)")

    def grouped_mm(i, o):  # batched over the whole capacity in the masked layout (it takes no counts)
        if "counts" in i:
            return {"c": torch._grouped_mm(i["a"], i["w"].transpose(-2, -1))}
        return {"c": torch._grouped_mm(i["a"], i["w"].transpose(-2, -1), offs=i["offs"])}
    return grouped_mm


def fp8_operands_error(name, i, o):
    """What ws_grouped.cu's fp8 launcher is not built for in these tensors, or None (checked before any CUDA call): e4m3
    a [T, K] and w [E, N, K], the scales in the layout of the variant's scaling (make_inputs'), int32 offs [E], bf16
    c [T, N], all contiguous on one CUDA device, N and K multiples of 16, at most 256 experts."""
    import torch

    a, w, c, offs, sa, sw = i["a"], i["w"], o["c"], i["offs"], i["sa"], i["sw"]
    if a.dim() != 2 or w.dim() != 3 or a.shape[1] != w.shape[2]:
        return f"a {tuple(a.shape)} and w {tuple(w.shape)} are not [T, K] and [E, N, K]"
    (t, k), (e, n, _) = a.shape, w.shape
    if n % 16 or k % 16:
        return f"n {n} and k {k} must be multiples of 16 (16-byte e4m3 rows for TMA, bf16 pairs)"
    if e > MAX_EXPERTS:
        return f"{e} experts: the kernel's schedule holds at most {MAX_EXPERTS}"
    q = SCALE_GROUP
    row = CUDA_FP8[name] == 0
    scales = {"sa": (t,) if row else (-(-k // q), t), "sw": (e, n) if row else (e, -(-n // q), -(-k // q))}
    operands = (("a", a, torch.float8_e4m3fn, (t, k)), ("w", w, torch.float8_e4m3fn, (e, n, k)),
                ("c", c, torch.bfloat16, (t, n)), ("offs", offs, torch.int32, (e,)),
                ("sa", sa, torch.float32, scales["sa"]), ("sw", sw, torch.float32, scales["sw"]))
    for label, x, dtype, shape in operands:
        if x.dtype != dtype or tuple(x.shape) != shape or not x.is_contiguous():
            return f"{label} is {tuple(x.shape)} {x.dtype}, not a contiguous {dtype} {shape}"
    for label, x, _, _ in operands:
        if x.device != a.device or x.device.type != "cuda":
            return f"{label} is on {x.device}, not on a's CUDA device"
    for label, x, align in (("a", a, 16), ("w", w, 16), ("sw", sw, 8 if row else 4)):
        if x.data_ptr() % align:
            return f"{label} is not {align}-byte aligned ({'TMA' if align == 16 else 'column scales read in pairs'})"
    return None


# kwiki:rung cuda_grouped_fp8
def _cuda_fp8(name):
    """Rungs 5 and 6: kwiki_moe_fp8 from the artifact's library (ws_grouped.cu), on torch's current stream; operands it
    is not built for are refused here, by name, before any CUDA call."""
    import ctypes
    import os

    import torch

    library = os.environ.get("KWIKI_CUDA_LIBRARY")
    if not library:
        raise RuntimeError(f"{name} is not runnable here: no $KWIKI_CUDA_LIBRARY (kwiki builds ws_grouped.cu into it)")
    fn = ctypes.CDLL(library).kwiki_moe_fp8
    fn.argtypes = [ctypes.c_int, *[ctypes.c_void_p] * 6, *[ctypes.c_int] * 4, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def cuda_fp8(i, o):
        where = f"moe_grouped_gemm_bf16_sm90a (moe.py): {name}"
        why = fp8_operands_error(name, i, o)
        if why:
            raise ValueError(f"{where}: {why}")
        a, w, c = i["a"], i["w"], o["c"]
        (t, k), (e, n, _) = a.shape, w.shape
        err = fn(CUDA_FP8[name], a.data_ptr(), w.data_ptr(), i["sa"].data_ptr(), i["sw"].data_ptr(),
                 i["offs"].data_ptr(), c.data_ptr(), t, n, k, e, torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"{where}: kwiki_moe_fp8 returned {err} (-1: operands refused, -2: tensor map refused, "
                               "else a CUDA error code)")
    return cuda_fp8
# /kwiki:rung cuda_grouped_fp8


def bf16_operands_error(a, w, c, offs):
    """What ws_grouped.cu's bf16 launcher is not built for in these tensors, or None: what cublas_grouped needs (bf16
    [T, K], [E, N, K], [T, N] and int32 [E], contiguous, on one CUDA device, N and K multiples of 8), at most 256
    experts, a and w 16-byte aligned for TMA."""
    why = cublas_operands_error(a, w, c, offs)
    if why:
        return why
    if w.shape[0] > MAX_EXPERTS:
        return f"{w.shape[0]} experts: the kernel's schedule holds at most {MAX_EXPERTS}"
    bad = [x for x, t in (("a", a), ("w", w)) if t.data_ptr() % 16]
    return f"{' and '.join(bad)} not 16-byte aligned (TMA)" if bad else None


# kwiki:rung cuda_grouped
def _cuda_bf16():
    """Rung 7: kwiki_moe_bf16 from the artifact's library (ws_grouped.cu), on torch's current stream; operands it is
    not built for are refused here, by name, before any CUDA call."""
    import ctypes
    import os

    import torch

    library = os.environ.get("KWIKI_CUDA_LIBRARY")
    if not library:
        raise RuntimeError("cuda_grouped is not runnable here: no $KWIKI_CUDA_LIBRARY (kwiki builds ws_grouped.cu into it)")
    fn = ctypes.CDLL(library).kwiki_moe_bf16
    fn.argtypes = [*[ctypes.c_void_p] * 4, *[ctypes.c_int] * 5, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def cuda_bf16(i, o):
        where = "moe_grouped_gemm_bf16_sm90a (moe.py): cuda_grouped"
        a, w, c = i["a"], i["w"], o["c"]
        cap = a.shape[1] if "counts" in i else 0  # masked: [E, capacity, K] read as E x capacity rows, with counts
        if cap and (a.dim() != 3 or c.dim() != 3 or tuple(c.shape[:2]) != tuple(a.shape[:2])):
            raise ValueError(f"{where}: masked a {tuple(a.shape)} and c {tuple(c.shape)} are not [E, capacity, K] "
                             "and [E, capacity, N]")
        if cap:
            a, c = a.reshape(-1, a.shape[-1]), c.reshape(-1, c.shape[-1])
        offs = i["counts"] if cap else i["offs"]
        why = bf16_operands_error(a, w, c, offs)
        if why:
            raise ValueError(f"{where}: {why}")
        (t, k), (e, n, _) = a.shape, w.shape
        err = fn(a.data_ptr(), w.data_ptr(), offs.data_ptr(), c.data_ptr(), t, n, k, e, cap,
                 torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"{where}: kwiki_moe_bf16 returned {err} (-1: operands refused, -2: tensor map refused, "
                               "else a CUDA error code)")
    return cuda_bf16
# /kwiki:rung cuda_grouped


def load(name):
    import torch

    if name in CUDA_FP8:
        return _cuda_fp8(name)
    if name == "cuda_grouped":
        return _cuda_bf16()
    if name in ("torch_mm_loop", "torch_mm_dense", "torch_bmm", "torch_grouped_mm", "torch_scaled_grouped_mm"):
        return _torch(name)
    if name == "cublas_grouped":
        return _cublas_grouped()
    import kernels
    import triton

    if name == "triton_grouped":
        def tiled(i, o):
            a, w, c, offs = i["a"], i["w"], o["c"], i["offs"]
            (t, k), (e, n, _) = a.shape, w.shape
            cfg = tiles(t, e)
            grid = ((triton.cdiv(t, cfg["BM"]) + e) * triton.cdiv(n, cfg["BN"]),)  # the worst case of the schedule
            kernels.grouped_gemm_tiled[grid](a, w, c, offs, t, n, k, e, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"],
                                             E_POW2=lanes(e), EVEN_K=k % cfg["BK"] == 0,
                                             num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
        return tiled
    if not hasattr(triton, "set_allocator"):
        raise RuntimeError(f"Triton {triton.__version__} has no device-side TMA descriptors (triton.set_allocator)")
    if not torch.cuda.is_available():  # the persistent grid is the device's SM count
        raise RuntimeError(f"{name} is not runnable here: no CUDA device in this torch ({torch.__version__}); its "
                           "persistent grid is one program per SM of the GPU")

    def scratch(size, alignment, stream):  # where the kernel writes its TMA descriptors
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(scratch)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    if name in ("triton_grouped_fp8", "triton_grouped_fp8_block"):
        kernel = kernels.grouped_gemm_fp8_rowwise if name == "triton_grouped_fp8" else kernels.grouped_gemm_fp8_block

        def fp8(i, o):
            a, w, c = i["a"], i["w"], o["c"]
            (t, k), (e, n, _) = a.shape, w.shape
            cfg = FP8_TILE
            kernel[(sms,)](
                a, w, i["sa"], i["sw"], c, i["offs"], t, n, k, e, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"],
                E_POW2=lanes(e), GROUP_M=GROUP_M, NUM_SMS=sms, num_warps=cfg["num_warps"],
                num_stages=cfg["num_stages"])
        return fp8

    def persistent(i, o):
        a, w, c = i["a"], i["w"], o["c"]
        cap = a.shape[1] if "counts" in i else 0  # the masked layout: expert e's rows start at e * cap
        (e, n, k), t = w.shape, a.numel() // a.shape[-1]
        cfg = tiles(t, e, is_masked=cap > 0)
        kernels.grouped_gemm_tma_persistent[(sms,)](
            a, w, c, i["counts"] if cap else i["offs"], t, n, k, e, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"],
            E_POW2=lanes(e), CAP=cap, GROUP_M=GROUP_M, NUM_SMS=sms, num_warps=cfg["num_warps"],
            num_stages=cfg["num_stages"])
    return persistent
