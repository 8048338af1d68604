"""fp8_gemm_sm90a: fp8 GEMMs on Hopper, C[M, N] = dequant(A) @ dequant(B)^T with A (M x K) and B (N x K) in float8
e4m3, both K-major (the layout fp8 wgmma requires; every baseline gets the same layout), fp32 accumulation and a bf16
output, under three scalings (the GRID's `scaling`):

- tensor: one fp32 scale for A and one for B. scaled_mm_tensor (torch._scaled_mm: cuBLASLt, the baseline) and
  triton_tensor (rung 1: a Triton fp8 tl.dot, the scales applied once in the epilogue, the accumulator promoted to
  fp32 every 128 elements of K); triton_tensor_tma (rung 3: rung 1's tile and promotion, persistent, one program
  per SM, operands and store by TMA through descriptors built on the device); bf16_cublas (torch.matmul in bf16 on
  the same values, dequantized, for the fp8-over-bf16 ratio) runs here too. cuda_tensor_ws (rung 5, fp8_ws.cu): a
  CUDA kernel, warp-specialized (a TMA producer warpgroup, two wgmma consumer warpgroups), promoting every 128.
- block: DeepSeek-V3's fine-grained scales, one per 1 x 128 group of A (a row, 128 along K) and one per 128 x 128
  block of B. triton_block (rung 2): every 128-deep group's product is scaled and added into fp32 registers;
  scaled_mm_block: torch._scaled_mm with the same scales (cuBLASLt's block scaling, where this torch and CUDA
  run it on sm_90); triton_block_tma (rung 4): rung 2's scales on rung 3's persistent, TMA-fed schedule;
  cuda_block_ws (rung 6): the block scales folded in at rung 5's promotion, in CUDA. cuda_tensor_ws_wide and
  cuda_block_ws_wide: rungs 5 and 6 at a 128 x 192 tile. cuda_tensor_ws_inflight and cuda_block_ws_inflight
  (rungs 7 and 8): rungs 5 and 6 with two partial register sets, a k-block's wgmma running while the one before is
  folded. triton_block_tma_prefetch (rung 9): rung 4 with each group's scales loaded one group ahead, under the
  dot before the one that uses them.
- row: one scale per row of A and per row of B (per token, per output channel). scaled_mm_rowwise
  (torch._scaled_mm with an (M, 1) and a (1, N) scale: the row-wise kernel of this torch where it has one), and
  cuda_row_ws (rung 5's kernel with the two scales multiplied per element in the epilogue).
- promote: the promotion sweep. Per-tensor scales and rung 1's kernel and tile, promoting the tensor cores'
  limited-precision partial sums into fp32 registers every N elements of K (PROMOTIONS: 32 to 512, and never),
  with an fp32 output (a bf16 one would add 2^-9 of rounding to every variant's error and hide the accumulator's)
  checked against an fp64 reference; triton_tensor (N = 128) runs here too, so every N is timed in one process, and so
  do cuBLASLt's two modes through torch._scaled_mm with an fp32 output: scaled_mm_tensor (its default, promoting) and
  scaled_mm_fast_accum (use_fast_accum=True: its fast accumulation, the whole K in the tensor cores).

Shapes: 4096^3, 8192^3 (the headline) and 4000 x 4048 x 4016 (M x N x K), which no tile divides: K's last
128-group is partial (masked to zeros, its scales still read); the sweep adds 4096 x 4096 x 16384, where 512
k32 steps in the tensor cores' accumulator show what promotion is for. K and N stay multiples of 16: fp8 wgmma's k-step is
32 bytes and torch._scaled_mm refuses other sizes (so does cuBLASLt's fp8 path).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

FP8 = "float8_e4m3fn"
E4M3_MAX = 448.0  # the largest finite e4m3 value: a group's amax maps to it
GROUP = 128  # the K-depth of a scale group (1 x 128 for A, 128 x 128 for B)
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4048, 4016)]  # (M, N, K)
SWEEP_SHAPES = [*SHAPES, (4096, 4096, 16384)]
SCALINGS = ("tensor", "block", "row", "promote")
FP8_F32 = "float8_e4m3fn-f32out"  # the sweep's entries: e4m3 operands, an fp32 output, a tolerance of their own
# the promotion interval of each per-tensor Triton variant, in elements of K; 0 = never (all of K in the tensor cores)
PROMOTIONS = {"triton_tensor_p32": 32, "triton_tensor_p64": 64, "triton_tensor": GROUP, "triton_tensor_p256": 256,
              "triton_tensor_p512": 512, "triton_tensor_never": 0}
GRID = [*({"m": m, "n": n, "k": k, "scaling": s, "dtype": FP8} for s in SCALINGS[:3] for (m, n, k) in SHAPES),
        *({"m": m, "n": n, "k": k, "scaling": "promote", "dtype": FP8_F32} for (m, n, k) in SWEEP_SHAPES)]
VARIANTS = ["scaled_mm_tensor", "triton_tensor", "scaled_mm_block", "triton_block", "triton_tensor_tma",
            "triton_block_tma", "triton_block_tma_prefetch", "cuda_tensor_ws", "cuda_block_ws", "cuda_tensor_ws_wide",
            "cuda_block_ws_wide",
            "cuda_tensor_ws_inflight", "cuda_block_ws_inflight", "scaled_mm_rowwise", "cuda_row_ws", "bf16_cublas",
            "scaled_mm_fast_accum",
            "triton_tensor_p32", "triton_tensor_p64", "triton_tensor_p256", "triton_tensor_p512", "triton_tensor_never"]
FOR_SCALING = {"tensor": {"scaled_mm_tensor", "triton_tensor", "triton_tensor_tma", "cuda_tensor_ws", "cuda_tensor_ws_wide",
                          "cuda_tensor_ws_inflight", "bf16_cublas"},
               "block": {"scaled_mm_block", "triton_block", "triton_block_tma", "triton_block_tma_prefetch",
                         "cuda_block_ws", "cuda_block_ws_wide", "cuda_block_ws_inflight"},
               "row": {"scaled_mm_rowwise", "cuda_row_ws"},
               "promote": {*PROMOTIONS, "scaled_mm_tensor", "scaled_mm_fast_accum"}}
TOLERANCES = {
    FP8: (2.0 ** -7, 2.0 ** -7, "every variant multiplies the same dequantized values (e4m3 codes times fp32 scales; "
          "the reference is their fp32 product without TF32): what differs is fp32 accumulation order, the tensor "
          "cores' limited-precision sums of at most 128 products before each promotion (about 2^-13 of a partial "
          "sum), and the bf16 output's rounding (at most 2^-8 relative, round to nearest); rtol 2^-7 is twice that rounding, atol "
          "2^-7 (outputs have an RMS of several units) covers sums that cancel near 0"),
    FP8_F32: (2.0 ** -1, 2.0 ** -5, "the promotion sweep: fp32 outputs of RMS about 4 against fp64, sized for the "
              "variant that never promotes, at K = 16384: 512 k32 steps each cut the running sum to about 14 bits "
              "(DeepSeek-V3), up to 2^-13 of it a step and of either sign as the sum wanders: sqrt(512) x 2^-13 x 4 "
              "= 0.011 an output if the running sum stayed at the final RMS; it wanders higher, and "
              "tests/test_fp8_gemm.py's model of that accumulator (14 bits, truncated) is off by up to 0.1 over "
              "256 outputs, a standard deviation near 0.035, so about 0.2 at 5.5 sigma over 16.8M outputs; atol "
              "2^-1 keeps 2.5x on that (1.4x for 13 bits), rtol 2^-5 the largest outputs' share. Promoted variants "
              "are tens of times closer. Still failing: NaN, one 128-deep K tile left out (an error of RMS "
              "4 / sqrt(128) = 0.35, past 1.5 at its tail), a scale off by 2x, one output off by 1"),
}
# One tile for both Triton rungs, so that rung 2 over rung 1 is the price of the block scales alone. Promotion keeps
# two accumulators (the tensor cores' partial and the fp32 total): at 128 x 256 with 8 warps that is 256 fp32
# registers a thread and ptxas spills (Triton 3.6, sm_90a); 128 x 128 needs about 160 and spills nothing. (Triton 3.9
# spills rung 1's pointer-load kernel even at 128 x 128, 255 registers and a 992-byte stack; not its TMA rungs.)
TILE = {"BM": 128, "BN": GROUP, "BK": GROUP, "GROUP_M": 8, "num_warps": 8, "num_stages": 4}
TILES = {**{name: TILE for name in PROMOTIONS}, "triton_block": TILE, "triton_tensor_tma": TILE,
         "triton_block_tma": TILE, "triton_block_tma_prefetch": TILE}
TMA = {"triton_tensor_tma": "fp8_gemm_tma_tensor", "triton_block_tma": "fp8_gemm_tma_block",  # variant -> kernel
       "triton_block_tma_prefetch": "fp8_gemm_tma_block_prefetch"}
# variant -> fp8_ws.cu's kwiki_fp8_gemm(variant, ...): 128 x 128 tiles, 128 x 192 (_wide), and 128 x 128 with a
# k-block's wgmma in flight through the fold (_inflight)
CUDA = {"cuda_tensor_ws": 0, "cuda_block_ws": 1, "cuda_tensor_ws_wide": 2, "cuda_block_ws_wide": 3, "cuda_row_ws": 4,
        "cuda_tensor_ws_inflight": 5, "cuda_block_ws_inflight": 6}


def applies(name, params):
    if name == "scaled_mm_block" and params["k"] % GROUP:
        return False  # cuBLASLt's block-scale modes are not asked for a partial K group: the aligned shapes only
    return name in FOR_SCALING[params["scaling"]]


def _validate(params):
    m, n, k = params.get("m"), params.get("n"), params.get("k")
    if params.get("scaling") not in SCALINGS:
        raise ValueError(f"fp8_gemm: params {params}: scaling must be one of {list(SCALINGS)}")
    if not all(isinstance(v, int) and v > 0 for v in (m, n, k)):
        raise ValueError(f"fp8_gemm: params {params}: m, n, k must be positive integers")
    if n % 16 or k % 16:
        raise ValueError(f"fp8_gemm: params {params}: n and k must be multiples of 16 (fp8 wgmma and _scaled_mm)")
    if params.get("dtype") != (FP8_F32 if params["scaling"] == "promote" else FP8):
        raise ValueError(f"fp8_gemm: params {params}: dtype must be {FP8_F32} for the promotion sweep, else {FP8} "
                         "(the operands are e4m3 only)")


def _cdiv(a, b):
    return -(-a // b)


def _groups(x, rows, cols):
    """x [R, C] as [ceil(R/rows), rows, ceil(C/cols), cols] blocks, zero-padded (zeros change no amax)."""
    import torch.nn.functional as F

    r, c = x.shape
    x = F.pad(x, (0, _cdiv(c, cols) * cols - c, 0, _cdiv(r, rows) * rows - r))
    return x.reshape(x.shape[0] // rows, rows, x.shape[1] // cols, cols)


def _quantize(x, scale):
    """e4m3 codes of x / scale (scale broadcast to x), saturated to +-448 (|x| / scale <= 448 by construction)."""
    import torch

    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)


def _expand(s, rows, cols, shape):
    """A per-block scale grid [R/rows, C/cols] expanded to one scale per element of shape [R, C]."""
    return s.repeat_interleave(rows, 0).repeat_interleave(cols, 1)[: shape[0], : shape[1]]


def make_inputs(params, seed, device):
    """Values with a magnitude that varies by group, as real activations and weights do: a ~ N(0, 1) and
    b ~ N(0, 1/K), each 1 x 128 group of a and 128 x 128 block of b times 2^u with u uniform in {-2, ..., 2}
    (so the output has an RMS of a few units). Quantized as the scaling says, scale = amax / 448 per group, row
    or tensor; a per-tensor scale is rounded up to a power of two, so that the bf16 copies (a16, b16) hold the
    dequantized values exactly and bf16_cublas multiplies the very numbers the fp8 kernels do."""
    import torch

    _validate(params)
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k, scaling = params["m"], params["n"], params["k"], params["scaling"]
    if scaling == "promote":  # the sweep: per-tensor scales, as rung 1 (no bf16 copies: no bf16 variant runs there)
        i = make_inputs({**params, "scaling": "tensor", "dtype": FP8}, seed, device)
        return {name: i[name] for name in ("a", "b", "sa", "sb")}

    def varied(rows, cols, block_rows, std):
        x = torch.randn(rows, cols, generator=g, device=device) * std
        u = torch.randint(-2, 3, (_cdiv(rows, block_rows), _cdiv(cols, GROUP)), generator=g, device=device)
        return x * _expand(torch.exp2(u.float()), block_rows, GROUP, x.shape)

    a, b = varied(m, k, 1, 1.0), varied(n, k, GROUP, k ** -0.5)
    if scaling == "tensor":
        sa, sb = (torch.exp2(torch.ceil(torch.log2(x.abs().amax() / E4M3_MAX))) for x in (a, b))
        qa, qb = _quantize(a, sa), _quantize(b, sb)
        return {"a": qa, "b": qb, "sa": sa.reshape(1), "sb": sb.reshape(1),
                "a16": (qa.float() * sa).to(torch.bfloat16), "b16": (qb.float() * sb).to(torch.bfloat16)}
    if scaling == "row":
        sa = a.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / E4M3_MAX  # [M, 1]
        sb = b.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / E4M3_MAX  # [N, 1]
        return {"a": _quantize(a, sa), "b": _quantize(b, sb), "sa": sa, "sb": sb.reshape(1, n).contiguous()}
    sa = _groups(a, 1, GROUP).abs().amax(dim=(1, 3)).clamp_min(1e-12) / E4M3_MAX  # [M, K/128]
    sb = _groups(b, GROUP, GROUP).abs().amax(dim=(1, 3)).clamp_min(1e-12) / E4M3_MAX  # [N/128, K/128]
    qa, qb = _quantize(a, _expand(sa, 1, GROUP, a.shape)), _quantize(b, _expand(sb, GROUP, GROUP, b.shape))
    return {"a": qa, "b": qb, "sa": sa.t().contiguous(), "sb": sb}  # sa stored [K/128, M]


def dequantized(params, inputs):
    """A and B as fp32 values: the codes times their scales (block scales expanded to every element)."""
    a, b, sa, sb = inputs["a"].float(), inputs["b"].float(), inputs["sa"], inputs["sb"]
    if params["scaling"] in ("tensor", "promote"):
        return a * sa, b * sb
    if params["scaling"] == "row":
        return a * sa, b * sb.reshape(-1, 1)
    return a * _expand(sa.t(), 1, GROUP, a.shape), b * _expand(sb, GROUP, GROUP, b.shape)


def make_outputs(params, inputs):
    import torch

    dtype = torch.float32 if params["scaling"] == "promote" else torch.bfloat16
    return {"c": torch.empty(params["m"], params["n"], dtype=dtype, device=inputs["a"].device)}


def reference(params, inputs):
    """The product of the dequantized operands: in fp32 (no TF32) for the bf16 outputs, whose own rounding is
    2^-9; in fp64 for the promotion sweep, whose fp32 outputs are judged to well under that. The sweep's
    reference covers every output (an fp64 GEMM of these sizes takes milliseconds on the GPU)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 product, not TF32
    a, b = dequantized(params, inputs)
    if params["scaling"] == "promote":
        return {"c": a.double() @ b.double().t()}
    return {"c": a @ b.t()}


def work(params):
    m, n, k, scaling = params["m"], params["n"], params["k"], params["scaling"]
    scales = {"tensor": 2, "promote": 2, "row": m + n,
              "block": m * _cdiv(k, GROUP) + _cdiv(n, GROUP) * _cdiv(k, GROUP)}[scaling]
    out = 4.0 if scaling == "promote" else 2.0
    return {"flops": 2.0 * m * n * k, "flops_dtype": "fp8",
            "bytes": 1.0 * (m * k + n * k) + 4.0 * scales + out * m * n, "bytes_level": "dram"}


def _scales(i, scaling):
    """The scales as torch._scaled_mm takes them: per tensor and per row as stored; for blocks, A's as (M, K/128)
    and B's as (K/128, N/128) (B is passed as its K x N view), both transposed views of the stored ones (M-major
    and K-group-major: the outer-dimension-major layout torch's blockwise path asks for)."""
    if scaling == "block":
        return i["sa"].t(), i["sb"].t()
    return i["sa"], i["sb"]


def _probe(torch, op, scaling):
    """Row-wise and block scales need kernels of their own (row-wise in recent torch on sm_89 and later; blocks
    through cuBLASLt's VEC128 / BLK128x128 scale modes where this CUDA offers them on sm_90): one small call
    tells whether this torch runs them here, before any timed work."""
    m = n = k = 256
    dev = "cuda"
    a = torch.ones(m, k, dtype=torch.float8_e4m3fn, device=dev)
    if scaling == "row":
        sa, sb = torch.ones(m, 1, device=dev), torch.ones(1, n, device=dev)
    else:
        probe = {"sa": torch.ones(k // 128, m, device=dev), "sb": torch.ones(n // 128, k // 128, device=dev)}
        sa, sb = _scales(probe, "block")
    try:
        op(a, a.t(), sa, sb, out_dtype=torch.bfloat16)
    except (NotImplementedError, RuntimeError, ValueError) as exc:
        raise RuntimeError(f"not applicable: torch {torch.__version__}'s _scaled_mm does not run {scaling} scales "
                           f"on this device ({str(exc).splitlines()[0]})") from exc


def _scaled_mm(torch, scaling, fast=False):
    """fn(inputs, outputs) over torch._scaled_mm (cuBLASLt for per-tensor and block scales; for row-wise scales the
    kernel this torch has). B is passed as b.t(): a column-major K x N view, as _scaled_mm wants it; the output in
    the dtype make_outputs gave (fp32 in the promotion sweep). fast: cuBLASLt's fast accumulation."""
    op = getattr(torch, "_scaled_mm", None)
    if op is None:
        raise RuntimeError(f"not applicable: torch {torch.__version__} has no torch._scaled_mm")
    if scaling != "tensor" and torch.cuda.is_available():
        _probe(torch, op, scaling)

    def scaled_mm(i, o):
        sa, sb = _scales(i, scaling)
        op(i["a"], i["b"].t(), sa, sb, out_dtype=o["c"].dtype, use_fast_accum=fast, out=o["c"])
    return scaled_mm


def promotion(name, bk):
    """The PROMOTE of a per-tensor Triton variant (its interval along K, 0 for never) at a tile of K depth bk: a
    multiple of wgmma's k32 that divides bk (tl.dot's max_num_imprecise_acc), or a multiple of bk (the kernel
    chains that many dots before it promotes)."""
    n = PROMOTIONS[name]
    if n and (n % 32 or (bk % n and n % bk)):
        raise ValueError(f"fp8_gemm: {name}: a promotion every {n} elements neither divides nor is a multiple of the "
                         f"tile's K depth {bk} (and wgmma's k32)")
    return n


def _triton(name):
    import triton

    import kernels

    cfg = TILES[name]
    kernel = kernels.fp8_gemm_tensor if name in PROMOTIONS else kernels.fp8_gemm_block
    extra = {"PROMOTE": promotion(name, cfg["BK"])} if name in PROMOTIONS else {}

    def gemm(i, o):
        a, b, c = i["a"], i["b"], o["c"]
        (m, k), n = a.shape, b.shape[0]
        grid = (triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"]),)
        kernel[grid](a, b, i["sa"], i["sb"], c, m, n, k, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"],
                     GROUP_M=cfg["GROUP_M"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"], **extra)
    return gemm


def _triton_tma(name):
    """Rungs 3, 4 and 9: the persistent kernels, one program per SM (a few where there is no GPU, under the
    interpreter), their TMA descriptors written by the kernel into scratch memory from Triton's allocator."""
    import torch
    import triton
    import triton.language as tl

    import kernels

    if not hasattr(tl, "make_tensor_descriptor") or not hasattr(triton, "set_allocator"):
        raise RuntimeError(f"Triton {triton.__version__} has no device-side TMA descriptors "
                           "(tl.make_tensor_descriptor, triton.set_allocator)")
    cfg = TILES[name]
    device = "cuda" if torch.cuda.is_available() else "cpu"

    def scratch(size, alignment, stream):  # where the kernel writes its TMA descriptors
        return torch.empty(size, dtype=torch.int8, device=device)

    triton.set_allocator(scratch)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count if device == "cuda" else 4

    def persistent(i, o):
        a, b, c = i["a"], i["b"], o["c"]
        (m, k), n = a.shape, b.shape[0]
        tiles = triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"])
        getattr(kernels, TMA[name])[(min(sms, tiles),)](
            a, b, i["sa"], i["sb"], c, m, n, k, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"],
            NUM_SMS=sms, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return persistent


def cuda_operands_error(name, i, o):
    """Why fp8_ws.cu's launcher cannot take these operands, in words, or None: what it is built for (e4m3 a [M, K] and
    b [N, K], K-major; a bf16 c [M, N]; fp32 scales, one each per tensor or the block layouts make_inputs stores;
    everything contiguous on one CUDA device, a and b 16-byte aligned for TMA), checked before any CUDA call."""
    import torch

    a, b, c, sa, sb = i["a"], i["b"], o["c"], i["sa"], i["sb"]
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[1]:
        return f"a {tuple(a.shape)} and b {tuple(b.shape)} are not [M, K] and [N, K]"
    (m, k), n = a.shape, b.shape[0]
    if n % 16 or k % 16:
        return f"N {n} and K {k} must be multiples of 16 (TMA rows of 16 bytes, bf16 pairs)"
    scales = {"block": {"sa": (_cdiv(k, GROUP), m), "sb": (_cdiv(n, GROUP), _cdiv(k, GROUP))},
              "row": {"sa": (m, 1), "sb": (1, n)}, "tensor": {"sa": (1,), "sb": (1,)}}[
        next(s for s in ("block", "row", "tensor") if name in FOR_SCALING[s])]
    operands = (("a", a, torch.float8_e4m3fn, (m, k)), ("b", b, torch.float8_e4m3fn, (n, k)),
                ("c", c, torch.bfloat16, (m, n)), ("sa", sa, torch.float32, scales["sa"]),
                ("sb", sb, torch.float32, scales["sb"]))
    for label, t, dtype, shape in operands:
        if t.dtype != dtype or tuple(t.shape) != shape or not t.is_contiguous():
            return f"{label} is {tuple(t.shape)} {t.dtype}, not a contiguous {dtype} {shape}"
    for label, t, _, _ in operands:
        if t.device != a.device or t.device.type != "cuda":
            return f"{label} is on {t.device}, not on a's CUDA device"
    for label, t, align in (("a", a, 16), ("b", b, 16), ("sb", sb, 8 if name == "cuda_row_ws" else 4)):
        if t.data_ptr() % align:
            why = {16: "TMA", 8: "per-row scales read in pairs", 4: "fp32"}[align]
            return f"{label} is not {align}-byte aligned ({why})"
    return None


def _cuda(name):
    """Rungs 5 and 6 and their wide and row-wise variants: kwiki_fp8_gemm from the artifact's library
    ($KWIKI_CUDA_LIBRARY, built by kwiki from fp8_ws.cu), on torch's current stream. Operands it is not built for are
    refused here, by name, before any CUDA call."""
    import ctypes
    import os

    import torch

    library = os.environ.get("KWIKI_CUDA_LIBRARY")
    if not library:
        raise RuntimeError(f"{name} is not runnable here: no $KWIKI_CUDA_LIBRARY (kwiki builds fp8_ws.cu into it)")
    lib = ctypes.CDLL(library)
    fn = lib.kwiki_fp8_gemm
    fn.argtypes = [ctypes.c_int, *[ctypes.c_void_p] * 5, *[ctypes.c_int] * 3, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def cuda_ws(i, o):
        why = cuda_operands_error(name, i, o)
        if why:
            raise ValueError(f"fp8_gemm_sm90a (fp8_gemm.py): {name}: {why}")
        a, b, c = i["a"], i["b"], o["c"]
        (m, k), n = a.shape, b.shape[0]
        err = fn(CUDA[name], a.data_ptr(), b.data_ptr(), i["sa"].data_ptr(), i["sb"].data_ptr(), c.data_ptr(), m, n, k,
                 torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"fp8_gemm_sm90a (fp8_ws.cu): kwiki_fp8_gemm({name}) returned {err} (-1: operands "
                               "refused, -2: tensor map refused, else a CUDA error code)")
    return cuda_ws


def load(name):
    import torch

    if name == "scaled_mm_fast_accum":
        return _scaled_mm(torch, "tensor", fast=True)
    if name.startswith("scaled_mm_"):
        return _scaled_mm(torch, {"scaled_mm_tensor": "tensor", "scaled_mm_block": "block",
                                  "scaled_mm_rowwise": "row"}[name])
    if name == "bf16_cublas":
        def bf16_cublas(i, o):
            torch.matmul(i["a16"], i["b16"].t(), out=o["c"])
        return bf16_cublas
    if name in CUDA:
        return _cuda(name)
    return _triton_tma(name) if name in TMA else _triton(name)
