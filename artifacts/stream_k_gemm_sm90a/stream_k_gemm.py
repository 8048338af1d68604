"""stream_k_gemm_sm90a: wave quantization, split-K and Stream-K on one Triton GEMM tile, C = A @ B in bf16
(fp32 accumulation, bf16 out), A [M, K] and B [K, N] row-major, over shapes whose 128x128 tile count falls
between one and two waves of the GPU's SMs (132 on the H200), plus a shape off every tile and a long-K shape
with too few tiles for the GPU.

Rungs (Triton, kernels.py, one tile configuration for all: 128x128 outputs, 64-deep k-blocks, 8 warps, 4
stages, so 128 KiB of shared memory and one program per SM): 1 data-parallel, one program per output tile
over the whole K; 2 split-K, each tile's K cut into S slices (S from the tile count and the SM count, below),
fp32 partials added by a second kernel in slice order; 3 Stream-K, a persistent grid of one program per SM
that divides all tiles x k-blocks evenly, crossing tile boundaries, with a flag-ordered, deterministic fix-up.
Rungs 4-9 (CUDA, streamk_ws.cu, built by kwiki into the library at $KWIKI_CUDA_LIBRARY and called through ctypes):
the same 128x128 tile on the warp-specialized CTA of artifacts/common/kwiki_ws_gemm.cuh (TMA producer, two wgmma
consumer warpgroups, a 6-stage ring), reading B K-major (bt, [N, K], made once with the inputs): 4 data-parallel,
one CTA per SM over whole tiles; 5 split-K in one kernel (rung 2's slices, the partials added by each tile's first
slice after flags); 6 Stream-K, the same even split of all iterations as rung 3, with the same flag-ordered,
deterministic fix-up; 7 data-parallel waves and then one Stream-K wave (all data-parallel where the tiles make whole
waves, all Stream-K under two waves); 8 split-K on the 128x256 tile of the wiki's bf16 GEMM, beside cuda_dp_wide,
data-parallel on that tile; 9 Stream-K on that tile.
Baselines: torch.matmul (cuBLAS/cuBLASLt with its own heuristic choice of kernel, split-K or not), on B as given and
on B K-major (torch_mm_tn: the operand the CUDA rungs read).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

BM, BN, BK, GROUP_M, WARPS, STAGES = 128, 128, 64, 8, 8, 4
REDUCE_BLOCK = 1024
MAX_SPLITS, MIN_SPLIT_BLOCKS = 4, 4  # split-K: 2..4 slices, each at least 4 k-blocks (256 of K) long
K_SWEEP = 4096
# (M, N) with tiles = cdiv(M, 128) x cdiv(N, 128) of 132, 140, 150, 180, 200, 240, 264: 1.00 to 2.00 waves of 132
SWEEP = [(1536, 1408), (1792, 1280), (1920, 1280), (1920, 1536), (2560, 1280), (2048, 1920), (2816, 1536)]
OFF_TILE = {"m": 1500, "n": 1900, "k": 4000}  # 12 x 15 = 180 tiles, the last row, column and k-block partial
LONG_K = {"m": 1024, "n": 1024, "k": 32768}   # 64 tiles for 132 SMs: split-K's case
MANY_WAVES = {"m": 4096, "n": 4096, "k": 4096}  # 1024 tiles: 7.76 waves, a last one of 100; at most 1.031x to gain

GRID = [
    *({"m": m, "n": n, "k": K_SWEEP, "dtype": "bfloat16"} for (m, n) in SWEEP),
    {**OFF_TILE, "dtype": "bfloat16"},
    {**LONG_K, "dtype": "bfloat16"},
    {**MANY_WAVES, "dtype": "bfloat16"},
]
# variant -> kwiki_streamk_bf16's (mode, tile width): 0 data-parallel, 1 Stream-K, 2 the hybrid, 3 split-K
CUDA_MODES = {"cuda_dp": (0, 128), "cuda_splitk": (3, 128), "cuda_streamk": (1, 128), "cuda_streamk_dp": (2, 128),
              "cuda_dp_wide": (0, 256), "cuda_splitk_wide": (3, 256), "cuda_streamk_wide": (1, 256)}
SLOT = BM * 128  # fp32 values of a 128 x 128 partial: the CUDA workspace is counted in these
VARIANTS = ["torch_mm", "torch_mm_tn", "triton_dp", "triton_splitk", "triton_streamk", *CUDA_MODES]
TOLERANCES = {
    "bfloat16": (0.02, 2.0 ** -7, "A, B ~ N(0, 1) scaled by K^-1/4 each, so C ~ N(0, 1); bf16 output (2^-9 "
                 "relative) after fp32 accumulation of up to 32768 products in any order (split or streamed "
                 "sums add fp32 partials: about 2^-24 * sqrt(K) relative), against an fp64 product of the same "
                 "bf16 inputs; atol covers outputs that cancel near 0"),
}
FRESH_INPUTS = False  # three pre-filled input sets (the manifest says why)
FLAGS = {}  # Stream-K's per-program flags by (device, programs); each finisher resets the flags it read
WORKSPACE = {}  # the CUDA rungs' partial slots and flags by device: grown to the largest launch, flags zeroed then


def _validate(params):
    m, n, k = params.get("m"), params.get("n"), params.get("k")
    if not all(isinstance(v, int) and v > 0 for v in (m, n, k)):
        raise ValueError(f"stream_k_gemm: params {params}: m, n, k must be positive integers")
    if params.get("dtype") != "bfloat16":
        raise ValueError(f"stream_k_gemm: params {params}: dtype must be bfloat16")


def applies(name, params):
    """The CUDA rungs read A and B by TMA (rows of K a multiple of 8 elements) and store bf16 pairs (N even)."""
    return name not in CUDA_MODES or (params["k"] % 8 == 0 and params["n"] % 2 == 0)


def make_inputs(params, seed, device):
    import torch

    _validate(params)
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k = params["m"], params["n"], params["k"]
    scale = k ** -0.25  # each operand's share of the 1/sqrt(K) that keeps C ~ N(0, 1)
    a = (torch.randn(m, k, generator=g, device=device) * scale).to(torch.bfloat16)
    b = (torch.randn(k, n, generator=g, device=device) * scale).to(torch.bfloat16)
    return {"a": a, "b": b, "bt": b.t().contiguous()}  # bt: B K-major, the same values, for the CUDA rungs


def make_outputs(params, inputs):
    import torch

    return {"c": torch.empty(params["m"], params["n"], dtype=torch.bfloat16, device=inputs["a"].device)}


def reference(params, inputs):
    return {"c": inputs["a"].double() @ inputs["b"].double()}


def work(params):
    m, n, k = params["m"], params["n"], params["k"]
    return {"bytes": 2.0 * (m * k + k * n + m * n), "bytes_level": "dram",
            "flops": 2.0 * m * n * k, "flops_dtype": "bf16"}


def _cdiv(a, b):
    return -(-a // b)


def tiles(m, n, bm=BM, bn=BN):
    return _cdiv(m, bm) * _cdiv(n, bn)


def waves(m, n, sms):
    """The wave arithmetic of one program per SM: (tiles, tiles / SMs, tiles in the last wave)."""
    t = tiles(m, n)
    return t, t / sms, t - (_cdiv(t, sms) - 1) * sms


def streamk_programs(m, n, k, sms, bm=BM, bn=BN, bk=BK):
    """Stream-K's grid: one program per SM, but never more programs than iterations (tiles x k-blocks). With more,
    some ranges are empty, and an empty program between two contributors to a split tile never raises the flag
    that the tile's finisher waits for: a hang (a single 128 x 128 tile with K = 4096 on 132 SMs)."""
    return min(sms, tiles(m, n, bm, bn) * _cdiv(k, bk))


def cuda_launch(name, m, n, k, sms):
    """(mode, tile width, splits, 128 x 128 slots) of a CUDA rung's launch: split-K's slices by split_factor on its own
    tile (as many as ceil(I / ceil(I / S)) really hold k-blocks), a slot per CTA for Stream-K, per split slice after
    the first for split-K (two at the 128 x 256 tile); streamk_ws.cu's plan_launch works out the same."""
    mode, bn = CUDA_MODES[name]
    iters = _cdiv(k, BK)
    if mode == 3:
        s = min(split_factor(tiles(m, n, BM, bn), iters, sms), sms)  # never more slices than CTAs: the launcher's rule
        s = _cdiv(iters, _cdiv(iters, s))
        return mode, bn, s, tiles(m, n, BM, bn) * (s - 1) * (bn // 128)
    return mode, bn, 1, 0 if mode == 0 else min(sms, tiles(m, n, BM, bn) * iters) * (bn // 128)


def split_factor(t, iters, sms):
    """Split-K's S: of 2..MAX_SPLITS slices of at least MIN_SPLIT_BLOCKS k-blocks, the one whose units
    (S x t, at one per SM) finish in the fewest tile-times, ceil(S t / sms) / S; the smallest S on a tie."""
    best = 1
    for s in range(2, MAX_SPLITS + 1):
        if _cdiv(iters, s) < MIN_SPLIT_BLOCKS:
            break
        if best == 1 or _cdiv(s * t, sms) * best < _cdiv(best * t, sms) * s:
            best = s
    return best


def launcher(name, sms, bm=BM, bn=BN, bk=BK, warps=WARPS, stages=STAGES):
    """fn(inputs, outputs) of a Triton variant. `sms` is the persistent grid of Stream-K and sizes split-K (the
    device's SM count on a GPU; the interpreter's tests pass small ones, and small tiles)."""
    import torch
    import triton

    import kernels

    def dp(i, o):
        (m, k), n = i["a"].shape, i["b"].shape[1]
        kernels.dp_kernel[(tiles(m, n, bm, bn),)](i["a"], i["b"], o["c"], m, n, k, BM=bm, BN=bn, BK=bk,
                                                  GROUP_M=GROUP_M, num_warps=warps, num_stages=stages)

    def splitk(i, o):
        (m, k), n = i["a"].shape, i["b"].shape[1]
        t, iters = tiles(m, n, bm, bn), _cdiv(k, bk)
        s = split_factor(t, iters, sms)
        kb_per = _cdiv(iters, s)
        part = torch.empty(s, m, n, dtype=torch.float32, device=i["a"].device)
        kernels.splitk_kernel[(t, _cdiv(iters, kb_per))](i["a"], i["b"], part, m, n, k, kb_per, BM=bm, BN=bn,
                                                          BK=bk, GROUP_M=GROUP_M, num_warps=warps,
                                                          num_stages=stages)
        kernels.reduce_kernel[(_cdiv(m * n, REDUCE_BLOCK),)](part, o["c"], m * n, _cdiv(iters, kb_per),
                                                             BLOCK=REDUCE_BLOCK, num_warps=4)

    def streamk(i, o):
        (m, k), n = i["a"].shape, i["b"].shape[1]
        dev = i["a"].device
        flags = FLAGS.get((str(dev), sms))
        if flags is None:  # allocated and zeroed once (a fill kernel in the first, checked, call only)
            flags = FLAGS[(str(dev), sms)] = torch.zeros(sms, dtype=torch.int32, device=dev)
        p = streamk_programs(m, n, k, sms, bm, bn, bk)
        part = torch.empty(p, bm * bn, dtype=torch.float32, device=dev)  # one slot per program
        kernels.streamk_kernel[(p,)](i["a"], i["b"], o["c"], part, flags, m, n, k, p, BM=bm, BN=bn,
                                     BK=bk, GROUP_M=GROUP_M, num_warps=warps, num_stages=stages)

    return {"triton_dp": dp, "triton_splitk": splitk, "triton_streamk": streamk}[name]


def cuda_operands_error(a, bt, c):
    """What streamk_ws.cu is not built for in these tensors, or None (checked before any CUDA call): bf16 a [M, K],
    bt [N, K] and c [M, N], contiguous, on the current CUDA device, K a multiple of 8, N even, a and bt 16-byte
    aligned, c 4-byte aligned."""
    import torch

    if a.dim() != 2 or bt.dim() != 2 or c.dim() != 2 or a.shape[1] != bt.shape[1] or \
            tuple(c.shape) != (a.shape[0], bt.shape[0]):
        return f"a {tuple(a.shape)}, bt {tuple(bt.shape)}, c {tuple(c.shape)} are not [M, K], [N, K], [M, N]"
    bad = [f"{x} is {t.dtype}" for x, t in (("a", a), ("bt", bt), ("c", c)) if t.dtype != torch.bfloat16]
    bad += [f"{x} is not contiguous" for x, t in (("a", a), ("bt", bt), ("c", c)) if not t.is_contiguous()]
    bad += [f"{x} is on {t.device}, not on a CUDA device" for x, t in (("a", a), ("bt", bt), ("c", c))
            if t.device.type != "cuda"]
    if not bad and len({t.device for t in (a, bt, c)}) > 1:
        bad.append(f"a, bt and c are on {a.device}, {bt.device} and {c.device}, not one device")
    if not bad and a.device.index != torch.cuda.current_device():
        bad.append(f"the operands are on {a.device}, not on the current device (cuda:{torch.cuda.current_device()})")
    if a.shape[1] % 8 or bt.shape[0] % 2:
        bad.append(f"K = {a.shape[1]} is not a multiple of 8 or N = {bt.shape[0]} is odd")
    bad += [f"{x} is not 16-byte aligned (TMA)" for x, t in (("a", a), ("bt", bt)) if t.data_ptr() % 16]
    bad += ["c is not 4-byte aligned (bf16 pairs)"] if c.data_ptr() % 4 else []
    return "; ".join(bad) or None


# kwiki:rung cuda_dp
def _cuda(name, sms):
    """Rungs 4-9: kwiki_streamk_bf16 from the artifact's library (streamk_ws.cu), on torch's current stream, with one
    workspace per device (128 x 128 fp32 partials and two flags each, as many as the largest launch so far takes;
    the flags zeroed when it grows, and every launch leaves them zero). Operands it is not built for are refused
    here, by name, before any CUDA call."""
    import ctypes
    import os

    import torch

    library = os.environ.get("KWIKI_CUDA_LIBRARY")
    if not library:
        raise RuntimeError(f"{name} is not runnable here: no $KWIKI_CUDA_LIBRARY (kwiki builds streamk_ws.cu into it)")
    fn = ctypes.CDLL(library).kwiki_streamk_bf16
    fn.argtypes = [*[ctypes.c_int] * 3, *[ctypes.c_void_p] * 5, ctypes.c_longlong, *[ctypes.c_int] * 3,
                   ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def cuda(i, o):
        where = f"stream_k_gemm_sm90a (stream_k_gemm.py): {name}"
        a, bt, c = i["a"], i["bt"], o["c"]
        why = cuda_operands_error(a, bt, c)
        if why:
            raise ValueError(f"{where}: {why}")
        (m, k), n = a.shape, bt.shape[0]
        mode, bn, splits, slots = cuda_launch(name, m, n, k, sms)
        key = str(a.device)
        if key not in WORKSPACE or WORKSPACE[key][0].shape[0] < max(slots, 1):  # in a first, checked, call only
            WORKSPACE[key] = (torch.empty(max(slots, sms), SLOT, dtype=torch.float32, device=a.device),
                              torch.zeros(max(slots, sms), 2, dtype=torch.int32, device=a.device))
        work, flags = WORKSPACE[key]
        err = fn(mode, bn, splits, a.data_ptr(), bt.data_ptr(), c.data_ptr(), work.data_ptr(), flags.data_ptr(),
                 work.shape[0], m, n, k, torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"{where}: kwiki_streamk_bf16 returned {err} (-1: operands refused, -2: tensor map "
                               "refused, else a CUDA error code)")
    return cuda
# /kwiki:rung cuda_dp


def load(name):
    import torch

    if name not in VARIANTS:
        raise ValueError(f"stream_k_gemm: unknown variant {name!r}")
    if name == "torch_mm":
        def torch_mm(i, o):
            torch.matmul(i["a"], i["b"], out=o["c"])
        return torch_mm
    if name == "torch_mm_tn":
        def torch_mm_tn(i, o):
            torch.matmul(i["a"], i["bt"].t(), out=o["c"])
        return torch_mm_tn
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count \
        if torch.cuda.is_available() else 132
    return _cuda(name, sms) if name in CUDA_MODES else launcher(name, sms)
