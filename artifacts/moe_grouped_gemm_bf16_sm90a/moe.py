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
(N 4096, K 7168) and the down projection (N 7168, K 2048), 64 local experts; prefill is 2048 tokens top-8
(16384 rows), decode 256 tokens top-8 (2048 rows). The dense entry is one expert holding all 16384 rows: the
same FLOPs as the prefill entries in one cuBLAS call, the roof-like reference.
Rungs: 0 a Python loop of torch.mm over the experts (what one writes first; the offsets go to the host first),
cuBLAS's grouped API (one cublasGemmGroupedBatchedEx call, below), torch._grouped_mm (one CUTLASS grouped launch),
torch.mm on the dense entry; 1 a Triton grouped GEMM: one launch,
the (expert, m-tile, n-tile) schedule found on the device from offs, pointer tiles, masked edges; 2 a persistent
Triton grouped GEMM, one program per SM walking the schedule in grouped order inside each expert, TMA loads.
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
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

import functools
import random

ROUTE_SEED = 36  # the seed of every drawn routing (the shape's, not an input set's)
SKEW = 1.2  # Zipf exponent over expert ranks
PREFILL = {"experts": 64, "tokens": 2048, "topk": 8}
DECODE = {"experts": 64, "tokens": 256, "topk": 8}
UP, DOWN = {"n": 4096, "k": 7168}, {"n": 7168, "k": 2048}  # DeepSeek-V3: fused gate/up, and down
OFF_TILE_COUNTS = (0, 1, 200, 130, 0, 461, 67, 300)  # no count a multiple of 64 or 128, two empty experts
GRID = [
    {"case": "prefill", "route": "zipf", **PREFILL, **UP, "dtype": "bfloat16"},
    {"case": "prefill", "route": "balanced", **PREFILL, **UP, "dtype": "bfloat16"},
    {"case": "prefill", "route": "zipf", **PREFILL, **DOWN, "dtype": "bfloat16"},
    {"case": "dense", "route": "balanced", "experts": 1, "tokens": 16384, "topk": 1, **UP, "dtype": "bfloat16"},
    {"case": "decode", "route": "zipf", **DECODE, **DOWN, "dtype": "bfloat16"},
    {"case": "offtile", "route": "fixed", "experts": len(OFF_TILE_COUNTS), "tokens": sum(OFF_TILE_COUNTS),
     "topk": 1, "n": 1000, "k": 1000, "dtype": "bfloat16"},
]
VARIANTS = ["torch_mm_loop", "cublas_grouped", "torch_grouped_mm", "torch_mm_dense", "triton_grouped",
            "triton_grouped_tma_persistent"]
CUBLAS_SYMBOL = "cublasGemmGroupedBatchedEx"  # cuBLAS 12.5 and later
TOLERANCES = {
    "bfloat16": (0.01, 2.0 ** -7, "a bf16 output (one rounding, 2^-9 relative) of an fp32 sum over K <= 7168 in "
                                  "another order than the fp32 reference; outputs are O(1/3) by construction, "
                                  "atol covers sums that cancel near 0"),
}
# Tiles: 128x256x64 with 8 warps (the shape of the dense Triton GEMM page) when experts average 128 rows or more,
# else 64x128x64 with 4 warps: a 128-row tile would be mostly padding at a few dozen rows an expert.
BIG = {"BM": 128, "BN": 256, "BK": 64, "num_warps": 8, "num_stages": 3}
SMALL = {"BM": 64, "BN": 128, "BK": 64, "num_warps": 4, "num_stages": 4}
GROUP_M = 8


def applies(name, params):
    if name == "triton_grouped" and params["case"] == "decode":
        return False  # rung 1 is timed where rung 2 is compared with it (prefill) and checked off the tile
    return (name == "torch_mm_dense") == (params["case"] == "dense")


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
    return _counts(p["route"], p["experts"], p["tokens"], p["topk"])


def tiles(rows, experts):
    """The tile configuration of a shape (from the tensors' sizes: no host sync)."""
    return BIG if rows >= 128 * experts else SMALL


def lanes(experts):
    """The vector width that holds every expert's offsets in a program (at least 16 lanes)."""
    return max(16, 1 << (experts - 1).bit_length())


def make_inputs(params, seed, device):
    import torch

    c = counts(params)
    rows, n, k = sum(c), params["n"], params["k"]
    g = torch.Generator(device=device).manual_seed(seed)
    a = torch.rand(rows, k, generator=g, device=device).mul_(2).sub_(1).to(torch.bfloat16)  # uniform(-1, 1)
    w = torch.rand(len(c), n, k, generator=g, device=device).mul_(2).sub_(1).mul_(k ** -0.5).to(torch.bfloat16)
    ends = [sum(c[:e + 1]) for e in range(len(c))]
    return {"a": a, "w": w, "offs": torch.tensor(ends, dtype=torch.int32, device=device)}


def make_outputs(params, inputs):
    import torch

    a, w = inputs["a"], inputs["w"]
    return {"c": torch.empty(a.shape[0], w.shape[1], dtype=torch.bfloat16, device=a.device)}


def reference(params, inputs):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference, not TF32
    a, w = inputs["a"], inputs["w"]
    ref = torch.empty(a.shape[0], w.shape[1], dtype=torch.float32, device=a.device)
    start = 0
    for e, end in enumerate(inputs["offs"].tolist()):
        ref[start:end] = a[start:end].float() @ w[e].float().t()
        start = end
    return {"c": ref}


def work(params):
    c = counts(params)
    rows, n, k = sum(c), params["n"], params["k"]
    used = sum(1 for x in c if x)  # an empty expert's weights need not be read
    return {"flops": 2.0 * rows * n * k, "flops_dtype": "bf16",
            "bytes": 2.0 * (rows * k + used * n * k + rows * n), "bytes_level": "dram"}


def _loop(i, o):
    """Rung 0: one torch.mm (cuBLAS) per non-empty expert, on views of A and C; the offsets go to the host."""
    import torch

    a, w, c = i["a"], i["w"], o["c"]
    start = 0
    for e, end in enumerate(i["offs"].tolist()):
        if end > start:
            torch.mm(a[start:end], w[e].t(), out=c[start:end])
        start = end


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


def load(name):
    import torch

    if name == "torch_mm_loop":
        return _loop
    if name == "torch_mm_dense":
        def dense(i, o):
            torch.mm(i["a"], i["w"][0].t(), out=o["c"])
        return dense
    if name == "cublas_grouped":
        return _cublas_grouped()
    if name == "torch_grouped_mm":
        if not hasattr(torch, "_grouped_mm"):
            raise RuntimeError(f"torch {torch.__version__} has no torch._grouped_mm (not applicable here)")
        return lambda i, o: {"c": torch._grouped_mm(i["a"], i["w"].transpose(-2, -1), offs=i["offs"])}
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

    def scratch(size, alignment, stream):  # where the kernel writes its TMA descriptors
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(scratch)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    def persistent(i, o):
        a, w, c, offs = i["a"], i["w"], o["c"], i["offs"]
        (t, k), (e, n, _) = a.shape, w.shape
        cfg = tiles(t, e)
        kernels.grouped_gemm_tma_persistent[(sms,)](
            a, w, c, offs, t, n, k, e, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], E_POW2=lanes(e),
            GROUP_M=GROUP_M, NUM_SMS=sms, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return persistent
