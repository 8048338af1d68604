"""w4a16_gemm_sm90a: weight-only int4 GEMMs (W4A16) at decode sizes, y[M, N] = x[M, K] @ dequant(W)[N, K]^T with
x bf16 and W stored in 4 bits with one bf16 scale per group of 128 weights along K (symmetric: no zero points).

The format, chosen so that the kernel reads W as it is stored, with no offline reordering:
- q = round(w / s) clamped to [-8, 7], s = max|w| / 7 over each group of 128 consecutive k of one output channel,
  rounded to bf16 first so that q * s is exactly the weight every variant and the reference use;
- the nibble stored is q + 8 (0..15, offset binary), eight to an int32 along K: word j of row n holds k = 8j + i in
  bits 4i..4i+3 (the low nibble first). int32 rather than two nibbles a uint8: one 32-bit register holds eight
  weights, the unit GPTQ's and Marlin's formats use, and the kernel's shifts and masks act on 32-bit words anyway;
- the scales are stored group-major, [K / 128, N], so that one K step's scales of 64 output channels are one
  contiguous 128-byte load (the layout PyTorch's int4 op and Marlin also keep).
W is row-major [N, K / 8] int32: rows of the plain (GPTQ-like) packing, not Marlin's layout, which is permuted offline
so that one 16-byte load gives a thread its whole tensor-core fragment. torch._weight_int4pack_mm needs its own
tiled layout: make_inputs converts the same nibbles to it once per input set (torch._convert_weight_to_int4pack),
outside the timed calls, and says so; that conversion is an offline reorder, the Triton kernel has none.
K must be a multiple of the group (128), as it must in GPTQ's and Marlin's formats; the kernel's K step is one group,
so the shape off the tile is M 33, N 1000 and K 3968 (31 groups), where split-K's last slice is shorter than the rest.

Variants. Roofs: torch_copy and triton_read of 128 MiB, as in decode_gemm_sm90a. bf16: torch_mm (cuBLAS/cuBLASLt),
the baseline, and triton_bf16_splitk (the same tiles and split-K as the int4 rung on bf16 weights: like for like).
int4: torch_dequant_mm (eager: unpack, scale, torch.mm), torch_int4pack_mm (PyTorch's tinygemm op, where this torch
runs it on CUDA), triton_w4a16 (the rung: nibbles converted and scaled in registers between the load and tl.dot,
Marlin's order), the ablation triton_w4a16_scale_acc (the nibbles converted without the scale, which multiplies
the fp32 product of each group instead: BN x BM multiplies per group in place of BN x 128), and at M = 1
triton_w4a16_gemv (no tensor cores: fp32 FMAs, the scale on each group's sum).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

ROOF_ELEMENTS = 1 << 26  # 128 MiB of bf16: the copy and read roofs, as in decode_gemm_sm90a
WEIGHTS = [(4096, 4096), (14336, 4096), (4096, 14336)]  # (N, K): decode_gemm_sm90a's WEIGHTS (8B-class layers)
ROWS = [1, 16, 64, 128]  # 128: past the M where a 4x cut in weight bytes can still pay against bf16 tensor cores
OFF_TILE = {"m": 33, "n": 1000, "k": 3968}  # no tile divides M or N; K is 31 groups, and split-K's slices are uneven
GEMV_OFF_TILE = {"m": 1, "n": 1000, "k": 3968}  # the GEMV rung's own shape off its tile (it runs at M = 1 only)
OPS = {"copy", "read", "gemm_bf16", "gemm_w4a16"}
GROUP = 128  # weights per scale along K
PACK = 8  # int4 values per int32 word
BN, BK, READ_BLOCK, REDUCE_BLOCK = 64, GROUP, 4096, 1024  # BK = GROUP: each K step meets exactly one scale
PROGRAMS_PER_SM = 4  # split-K's target, as in decode_gemm_sm90a
INNER_K_TILES = 8  # torch._convert_weight_to_int4pack's tiling (gpt-fast's default); K must be a multiple of 128

GRID = [
    {"op": "copy", "m": 0, "n": ROOF_ELEMENTS // 4096, "k": 4096, "dtype": "bfloat16"},
    {"op": "read", "m": 0, "n": ROOF_ELEMENTS // 4096, "k": 4096, "dtype": "bfloat16"},
    *({"op": op, "m": m, "n": n, "k": k, "dtype": "bfloat16"}
      for op in ("gemm_bf16", "gemm_w4a16") for (n, k) in WEIGHTS for m in ROWS),
    {"op": "gemm_bf16", **OFF_TILE, "dtype": "bfloat16"},
    {"op": "gemm_w4a16", **OFF_TILE, "dtype": "bfloat16"},
    {"op": "gemm_w4a16", **GEMV_OFF_TILE, "dtype": "bfloat16"},
]
VARIANTS = ["torch_copy", "triton_read", "torch_mm", "triton_bf16_splitk", "torch_dequant_mm", "torch_int4pack_mm",
            "triton_w4a16", "triton_w4a16_scale_acc", "triton_w4a16_gemv"]
FOR_OP = {"copy": {"torch_copy"}, "read": {"triton_read"},
          "gemm_bf16": {"torch_mm", "triton_bf16_splitk"},
          "gemm_w4a16": {"torch_dequant_mm", "torch_int4pack_mm", "triton_w4a16", "triton_w4a16_scale_acc",
                         "triton_w4a16_gemv"}}
TOLERANCES = {
    "bfloat16": (0.01, 2.0 ** -7, "y ~ N(0, 1) (W ~ N(0, 1/K)); bf16 output (2^-9 relative) after fp32 accumulation, "
                 "against an fp64 product with the same dequantized weights q * s; every int4 variant but the "
                 "ablation rounds each q * s to bf16 before its product (at most 2^-9 relative a weight, independent "
                 "signs): about 0.0014 rms on y, under 0.008 at 5.5 sigma (the largest of 1.8 million outputs), which "
                 "atol 0.01 covers where y cancels near 0; the read roof's sums of 4096 values are fp32"),
}
FRESH_INPUTS = False  # three pre-filled input sets (the manifest says why)

SCALE_ACC_AT = {(14336, 4096), (OFF_TILE["n"], OFF_TILE["k"])}  # the ablation: one weight, and the off-tile check


def applies(name, params):
    if name == "triton_w4a16_scale_acc" and (params["n"], params["k"]) not in SCALE_ACC_AT:
        return False
    if name == "triton_w4a16_gemv" and params["m"] != 1:
        return False
    if params == {**GEMV_OFF_TILE, "op": "gemm_w4a16", "dtype": "bfloat16"} and name != "triton_w4a16_gemv":
        return False  # the GEMV rung's check shape; the others have theirs at M = 33
    return name in FOR_OP[params["op"]]


def _validate(params):
    op, m, n, k = params.get("op"), params.get("m"), params.get("n"), params.get("k")
    if op not in OPS:
        raise ValueError(f"w4a16_gemm: params {params}: op must be one of {sorted(OPS)}")
    if not all(isinstance(v, int) for v in (m, n, k)) or n <= 0 or k <= 0 or (m <= 0 and op.startswith("gemm")):
        raise ValueError(f"w4a16_gemm: params {params}: m, n, k must be positive integers")
    if op == "gemm_w4a16" and k % GROUP:
        raise ValueError(f"w4a16_gemm: params {params}: k must be a multiple of the group size {GROUP}")
    if params.get("dtype") != "bfloat16":
        raise ValueError(f"w4a16_gemm: params {params}: activations are bfloat16 only")


def quantize(w, group=GROUP):
    """(q int8 [N, K] in [-8, 7], s bf16 [K / group, N]) with q * s the dequantized weights: symmetric, one scale a
    group of `group` consecutive k. The scale is rounded to bf16 before dividing, so q * s is exact in fp32."""
    import torch

    n, k = w.shape
    if k % group:
        raise ValueError(f"w4a16_gemm: quantize: K = {k} is not a multiple of the group size {group}")
    groups = w.float().reshape(n, k // group, group)
    s = (groups.abs().amax(dim=2) / 7.0).clamp_min(1e-8).to(torch.bfloat16)  # a zero group still divides
    q = torch.round(groups / s.float()[:, :, None]).clamp_(-8, 7).to(torch.int8).reshape(n, k)
    return q, s.t().contiguous()


def pack(q):
    """int8 [N, K] in [-8, 7] -> int32 [N, K / 8]: q + 8 in 4 bits, k = 8j + i in bits 4i..4i+3 of word j."""
    import torch

    n, k = q.shape
    if k % PACK or q.dtype != torch.int8:
        raise ValueError(f"w4a16_gemm: pack: expected int8 [N, K] with K a multiple of {PACK}, got {q.dtype} "
                         f"{tuple(q.shape)}")
    nib = (q.to(torch.int64) + 8).reshape(n, k // PACK, PACK)
    shifts = torch.arange(0, 4 * PACK, 4, dtype=torch.int64, device=q.device)
    words = (nib << shifts).sum(dim=2)  # disjoint bits: the sum is the bitwise or
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)  # two's complement, no overflow


def unpack(packed):
    """int32 [N, K / 8] -> int8 [N, K] in [-8, 7], the inverse of pack."""
    import torch

    n, words = packed.shape
    shifts = torch.arange(0, 4 * PACK, 4, dtype=torch.int32, device=packed.device)
    nib = (packed[:, :, None] >> shifts) & 0xF  # an arithmetic shift: the mask drops the sign bits
    return (nib - 8).to(torch.int8).reshape(n, words * PACK)


def dequantize(packed, s, dtype=None):
    """W [N, K] = q * s in `dtype` (default float64): the reference's weights, on packed's device."""
    import torch

    q = unpack(packed).to(dtype or torch.float64)
    return q * s.t().to(q.dtype).repeat_interleave(GROUP, dim=1)


def tinygemm_pairs(packed):
    """The same nibbles as torch._convert_weight_to_int4pack takes them: uint8 [N, K / 2], the even k in the high
    nibble (the opposite of pack's order within a byte)."""
    import torch

    u = (unpack(packed).to(torch.int32) + 8).to(torch.uint8)
    return ((u[:, 0::2] << 4) | u[:, 1::2]).contiguous()


def tinygemm_operands(packed, s):
    """(weight, scales_and_zeros) of torch._weight_int4pack_mm from the same nibbles, reordered into its tiled layout
    (offline); its kernel dequantizes (u - 8) * scale + zero, so a zero of 0 gives q * s."""
    import torch

    weight = torch._convert_weight_to_int4pack(tinygemm_pairs(packed), INNER_K_TILES)
    return weight, torch.stack([s, torch.zeros_like(s)], dim=2).contiguous()  # [K / 128, N, 2] bf16


_INT4PACK_RUNS = {}  # device -> None, or why torch's int4 op does not run there (probed once a process)


def int4pack_problem(device):
    """None where torch._weight_int4pack_mm runs on `device`, else why not (a missing op, no CUDA kernel here)."""
    import torch

    key = str(device)
    if key not in _INT4PACK_RUNS:
        why = None
        if getattr(torch, "_weight_int4pack_mm", None) is None or getattr(torch, "_convert_weight_to_int4pack",
                                                                           None) is None:
            why = f"torch {torch.__version__} has no torch._weight_int4pack_mm"
        elif torch.device(device).type != "cuda":
            why = f"torch._weight_int4pack_mm's tiled layout is CUDA's; this run is on {device}"
        else:
            try:  # the op exists on every build; its CUDA kernel needs sm_80 or later and a build that has it
                q, s = quantize(torch.ones(16, 256, device=device))
                weight, sz = tinygemm_operands(pack(q), s)
                torch._weight_int4pack_mm(torch.ones(1, 256, dtype=torch.bfloat16, device=device), weight, GROUP, sz)
            except (NotImplementedError, RuntimeError) as exc:
                why = f"torch {torch.__version__}'s _weight_int4pack_mm does not run here ({str(exc).splitlines()[0]})"
        _INT4PACK_RUNS[key] = why
    return _INT4PACK_RUNS[key]


def make_inputs(params, seed, device):
    import torch

    _validate(params)
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k = params["m"], params["n"], params["k"]
    if params["op"] in ("copy", "read"):
        return {"x": torch.randn(n, k, generator=g, device=device).to(torch.bfloat16)}
    x = torch.randn(m, k, generator=g, device=device).to(torch.bfloat16)
    w = torch.randn(n, k, generator=g, device=device) / k ** 0.5
    if params["op"] == "gemm_bf16":
        return {"x": x, "w": w.to(torch.bfloat16)}
    q, s = quantize(w)
    inputs = {"x": x, "q": pack(q), "scale": s}
    if int4pack_problem(device) is None:  # the offline reorder of PyTorch's op, once a set, never timed
        inputs["tg_w"], inputs["tg_sz"] = tinygemm_operands(inputs["q"], s)
    return inputs


def make_outputs(params, inputs):
    import torch

    x = inputs["x"]
    if params["op"] == "copy":
        return {"y": torch.empty_like(x)}
    if params["op"] == "read":
        return {"y": torch.empty(x.numel() // READ_BLOCK, dtype=torch.float32, device=x.device)}
    return {"y": torch.empty(params["m"], params["n"], dtype=torch.bfloat16, device=x.device)}


def reference(params, inputs):
    x = inputs["x"]
    if params["op"] == "copy":
        return {"y": x.clone()}
    if params["op"] == "read":
        return {"y": x.double().reshape(-1, READ_BLOCK).sum(1)}
    if params["op"] == "gemm_bf16":
        return {"y": x.double() @ inputs["w"].double().t()}
    return {"y": x.double() @ dequantize(inputs["q"], inputs["scale"]).t()}


def work(params):
    op, m, n, k = params["op"], params["m"], params["n"], params["k"]
    if op == "copy":
        return {"bytes": 4.0 * n * k, "bytes_level": "dram"}  # one read, one write
    if op == "read":
        return {"bytes": 2.0 * n * k + 4.0 * n * k // READ_BLOCK, "bytes_level": "dram"}
    # int4 and a bf16 scale per 128 weights (PyTorch's op reads a zero beside each scale: 2 bytes more a group)
    weights = 0.5 * n * k + 2.0 * n * k / GROUP if op == "gemm_w4a16" else 2.0 * n * k
    moved = {"bytes": weights + 2.0 * m * k + 2.0 * m * n, "bytes_level": "dram"}
    if op == "gemm_w4a16" and m == 1:
        # no FLOPs at M = 1: the int4 variants run them on different units (the tensor-core rung pads x to 16 rows,
        # the GEMV rung uses fp32 FMAs, torch's op its own), so no one dtype is true of them all, and the profile
        # audit holds a declared dtype to its counter (a GEMV declared as bf16 tensor FLOPs failed it on the H200,
        # 2026-12-02); a GEMV's measure is its bytes
        return moved
    return {**moved, "flops": 2.0 * m * n * k, "flops_dtype": "bf16"}


def _cdiv(a, b):
    return -(-a // b)


def plan(m, n, k, sms, quant):
    """The launch of the Triton GEMMs: (BM, splits, k_per_split, warps, stages). One row tile holds every row up to
    128, so W is read once at every M here; K is split so that about PROGRAMS_PER_SM programs an SM stream W."""
    bm = min(128, max(16, 1 << (m - 1).bit_length()))  # tl.dot needs 16 or more on each side
    tiles = _cdiv(n, BN) * _cdiv(m, bm)
    splits = max(1, min(_cdiv(PROGRAMS_PER_SM * sms, tiles), _cdiv(k, 2 * BK)))
    k_per = _cdiv(_cdiv(k, splits), BK) * BK  # whole groups in every slice: a slice never cuts a scale's group
    # bf16 at BM = 128: 8 warps, the 64 x 128 accumulator being a large share of one thread's registers at 4. int4: 4
    # warps at every M (its unpacked tiles are 64 x 16): in one tuning run on the H200 (2026-12-02) 8 warps took
    # 1.6x as long at M = 1 to 64 and 1.7x at 128
    warps = 8 if bm == 128 and not quant else 4
    return bm, _cdiv(k, k_per), k_per, warps, 4 if bm <= 16 else 3


GEMV_PROGRAMS_PER_SM = 8  # the GEMV rung's split-K target (one tuning run: 8 to 16 beat 4 by 1.1-1.3x at M = 1)


def gemv_plan(n, k, sms):
    """The GEMV rung's launch: (splits, k_per_split), whole groups in every slice."""
    splits = max(1, min(_cdiv(GEMV_PROGRAMS_PER_SM * sms, _cdiv(n, BN)), _cdiv(k, 2 * BK)))
    k_per = _cdiv(_cdiv(k, splits), BK) * BK
    return _cdiv(k, k_per), k_per


def launcher(name, sms):
    """fn(inputs, outputs) of a Triton variant; `sms` sizes split-K (the device's SM count)."""
    import torch
    import triton

    import kernels

    if name == "triton_read":
        def read(i, o):
            x = i["x"]
            kernels.read_kernel[(x.numel() // READ_BLOCK,)](x, o["y"], x.numel(), BLOCK=READ_BLOCK, num_warps=8)
        return read
    if name == "triton_w4a16_gemv":
        def gemv(i, o):
            x, w, y = i["x"], i["q"], o["y"]
            n, k = w.shape[0], x.shape[1]
            if x.shape[0] != 1:
                raise ValueError(f"w4a16_gemm: triton_w4a16_gemv runs at M = 1 only, got M = {x.shape[0]}")
            splits, k_per = gemv_plan(n, k, sms)
            part = torch.empty(splits, n, dtype=torch.float32, device=x.device) if splits > 1 else y
            kernels.w4a16_gemv_kernel[(triton.cdiv(n, BN), splits)](x, w, i["scale"], part, n, k, k_per, BN=BN, BK=BK,
                                                                    PACK=PACK, PARTIAL=splits > 1, num_warps=4,
                                                                    num_stages=3)
            if splits > 1:
                kernels.reduce_kernel[(triton.cdiv(n, REDUCE_BLOCK),)](part, y, n, splits, BLOCK=REDUCE_BLOCK,
                                                                       num_warps=4)
        return gemv
    quant, scale_acc = name.startswith("triton_w4a16"), name == "triton_w4a16_scale_acc"

    def gemm(i, o):
        x, y = i["x"], o["y"]
        w = i["q"] if quant else i["w"]
        m, k = x.shape
        n = w.shape[0]
        bm, splits, k_per, warps, stages = plan(m, n, k, sms, quant)
        scale = i["scale"] if quant else x  # not read without QUANT
        grid = (triton.cdiv(n, BN), triton.cdiv(m, bm), splits)
        part = torch.empty(splits, m, n, dtype=torch.float32, device=x.device) if splits > 1 else y
        kernels.w4a16_gemm_kernel[grid](x, w, scale, part, m, n, k, k_per, BM=bm, BN=BN, BK=BK, PACK=PACK,
                                        QUANT=quant, SCALE_ACC=scale_acc, PARTIAL=splits > 1,
                                        num_warps=warps, num_stages=stages)
        if splits > 1:
            kernels.reduce_kernel[(triton.cdiv(m * n, REDUCE_BLOCK),)](part, y, m * n, splits,
                                                                       BLOCK=REDUCE_BLOCK, num_warps=4)
    return gemm


def load(name):
    import torch

    if name == "torch_copy":
        def torch_copy(i, o):
            o["y"].copy_(i["x"])
        return torch_copy
    if name == "torch_mm":
        def torch_mm(i, o):
            torch.mm(i["x"], i["w"].t(), out=o["y"])
        return torch_mm
    if name == "torch_dequant_mm":
        def dequant_mm(i, o):  # what people write without a kernel: unpack, scale, then a bf16 torch.mm
            torch.mm(i["x"], dequantize(i["q"], i["scale"], torch.bfloat16).t(), out=o["y"])
        return dequant_mm
    if name == "torch_int4pack_mm":
        device = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cpu"
        why = int4pack_problem(device)
        if why is not None:
            raise RuntimeError(f"not applicable: {why}")
        return lambda i, o: {"y": torch._weight_int4pack_mm(i["x"], i["tg_w"], GROUP, i["tg_sz"])}
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count \
        if torch.cuda.is_available() else 132
    return launcher(name, sms)
