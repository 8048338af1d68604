"""decode_gemm_sm90a: decode-sized GEMMs, y[M, N] = x[M, K] @ W[N, K]^T with M = 1..64, bf16 activations, W a
model-sized linear layer in bf16 or in int8 with one bf16 scale per output channel (weight-only quantization).

At these M the GEMM reads W once and does 2M FLOPs per weight: memory-bound on W's bytes, so the records count
bytes at the dram level (W + x + y, + the scales) and are compared with a copy and a read of 128 MiB timed in
the same run. Rungs (Triton, kernels.py): 1 one program per 64 output channels over the whole K (few programs
when N is 4096); 2 the same tile with K split so that about 4 programs per SM run, fp32 partials added by a
second kernel in a fixed order (deterministic); 3 rung 2 on int8 weights, converted to bf16 in registers and
scaled once per output channel after the K loop. An ablation of rung 3 (triton_w8a16_fp32cvt, no rung): int8 to
bf16 through fp32 (xor into 0x4B000080, an fp32 subtract, a bf16x2 convert), FasterTransformer's route, against
Triton 3.6's own cast, which its PTX shows as byte permutes, masks and one bf16x2 subtract per two weights.
Baselines: torch.mm (cuBLAS/cuBLASLt) on bf16 weights; on int8
weights torch._weight_int8pack_mm (PyTorch's CUDA kernel, where this torch has one) and the eager chain people
write without a kernel (gpt-fast's weight-only int8 linear): mm(x, W.to(bf16)^T) * scales.
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

ROOF_ELEMENTS = 1 << 26  # 128 MiB of bf16: the copy and read roofs, the size of the largest weights here
WEIGHTS = [(4096, 4096), (14336, 4096), (4096, 14336)]  # (N, K): attention o_proj; MLP up/gate; MLP down (8B-class)
ROWS = [1, 16, 64]
OFF_TILE = {"m": 33, "n": 1000, "k": 4000}  # no tile divides M, N or K: every mask is exercised on the GPU
OPS = {"copy", "read", "gemm_bf16", "gemm_w8a16"}
BN, BK_BF16, BK_INT8, READ_BLOCK, REDUCE_BLOCK = 64, 128, 256, 4096, 1024
PROGRAMS_PER_SM = 4  # split-K's target: splits = ceil(4 * SMs / output tiles), each split at least 2 BK long

GRID = [
    {"op": "copy", "m": 0, "n": ROOF_ELEMENTS // 4096, "k": 4096, "dtype": "bfloat16"},
    {"op": "read", "m": 0, "n": ROOF_ELEMENTS // 4096, "k": 4096, "dtype": "bfloat16"},
    *({"op": op, "m": m, "n": n, "k": k, "dtype": "bfloat16"}
      for op in ("gemm_bf16", "gemm_w8a16") for (n, k) in WEIGHTS for m in ROWS),
    {"op": "gemm_bf16", **OFF_TILE, "dtype": "bfloat16"},
    {"op": "gemm_w8a16", **OFF_TILE, "dtype": "bfloat16"},
]
VARIANTS = ["torch_copy", "triton_read", "torch_mm", "triton_bf16_tile", "triton_bf16_splitk",
            "torch_int8pack_mm", "torch_dequant_mm", "triton_w8a16_splitk", "triton_w8a16_fp32cvt"]
FOR_OP = {"copy": {"torch_copy"}, "read": {"triton_read"},
          "gemm_bf16": {"torch_mm", "triton_bf16_tile", "triton_bf16_splitk"},
          "gemm_w8a16": {"torch_int8pack_mm", "torch_dequant_mm", "triton_w8a16_splitk", "triton_w8a16_fp32cvt"}}
TOLERANCES = {
    "bfloat16": (0.01, 2.0 ** -7, "y ~ N(0, 1) (W ~ N(0, 1/K)); bf16 output (2^-9 relative) after fp32 accumulation, "
                 "against an fp64 product with the same (dequantized) weights; the eager int8 chain rounds x.q to "
                 "bf16 before the scale (2^-8 in all); atol 0.01 covers about 5x the error of rounding each weight "
                 "to bf16 (2^-9 * ||x*w||, about 0.002) where y cancels near 0; the read roof's sums of 4096 values "
                 "are fp32"),
}
FRESH_INPUTS = False  # three pre-filled input sets (the manifest says why)


FP32CVT_AT = {(14336, 4096), (OFF_TILE["n"], OFF_TILE["k"])}  # the ablation: one weight, and the off-tile check


def applies(name, params):
    if name == "triton_w8a16_fp32cvt" and (params["n"], params["k"]) not in FP32CVT_AT:
        return False
    return name in FOR_OP[params["op"]]


def _validate(params):
    op, m, n, k = params.get("op"), params.get("m"), params.get("n"), params.get("k")
    if op not in OPS:
        raise ValueError(f"decode_gemm: params {params}: op must be one of {sorted(OPS)}")
    if not all(isinstance(v, int) for v in (m, n, k)) or n <= 0 or k <= 0 or (m <= 0 and op.startswith("gemm")):
        raise ValueError(f"decode_gemm: params {params}: m, n, k must be positive integers")
    if params.get("dtype") != "bfloat16":
        raise ValueError(f"decode_gemm: params {params}: activations are bfloat16 only")


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
    scale = (w.abs().amax(dim=1) / 127.0).to(torch.bfloat16)  # symmetric, per output channel
    q = torch.round(w / scale.float()[:, None]).clamp_(-127, 127).to(torch.int8)
    return {"x": x, "q": q, "scale": scale}


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
    return {"y": (x.double() @ inputs["q"].double().t()) * inputs["scale"].double()}  # = x @ (q * s)^T


def work(params):
    op, m, n, k = params["op"], params["m"], params["n"], params["k"]
    if op == "copy":
        return {"bytes": 4.0 * n * k, "bytes_level": "dram"}  # one read, one write
    if op == "read":
        return {"bytes": 2.0 * n * k + 4.0 * n * k // READ_BLOCK, "bytes_level": "dram"}
    weights = 1.0 * n * k + 2.0 * n if op == "gemm_w8a16" else 2.0 * n * k  # int8 + a bf16 scale, or bf16
    return {"bytes": weights + 2.0 * m * k + 2.0 * m * n, "bytes_level": "dram",
            "flops": 2.0 * m * n * k, "flops_dtype": "bf16"}


def _cdiv(a, b):
    return -(-a // b)


def plan(m, n, k, quant, sms, split):
    """The launch of rungs 1-3 and the ablation: (BM, BK, splits, k_per_split, warps, stages)."""
    bm = min(64, max(16, 1 << (m - 1).bit_length()))  # one row tile holds every row up to 64: W is read once
    bk = BK_INT8 if quant else BK_BF16
    tiles = _cdiv(n, BN) * _cdiv(m, bm)
    splits = max(1, min(_cdiv(PROGRAMS_PER_SM * sms, tiles), _cdiv(k, 2 * bk))) if split else 1
    k_per = _cdiv(_cdiv(k, splits), bk) * bk  # a multiple of BK, so every split but the last runs whole tiles
    return bm, bk, _cdiv(k, k_per), k_per, 4, 4 if bm <= 16 else 3


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
    quant, via_fp32, split = name.startswith("triton_w8a16"), name == "triton_w8a16_fp32cvt", name != "triton_bf16_tile"

    def gemm(i, o):
        x, y = i["x"], o["y"]
        w = i["q"] if quant else i["w"]
        (m, k), n = x.shape, w.shape[0]
        bm, bk, splits, k_per, warps, stages = plan(m, n, k, quant, sms, split)
        scale = i["scale"] if quant else x  # not read without QUANT
        grid = (triton.cdiv(n, BN), triton.cdiv(m, bm), splits)
        part = torch.empty(splits, m, n, dtype=torch.float32, device=x.device) if splits > 1 else y
        kernels.decode_gemm_kernel[grid](x, w, scale, part, m, n, k, k_per, BM=bm, BN=BN, BK=bk, QUANT=quant,
                                         VIA_FP32=via_fp32, PARTIAL=splits > 1, num_warps=warps, num_stages=stages)
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
        def dequant_mm(i, o):  # gpt-fast's eager WeightOnlyInt8Linear: F.linear(x, q.to(x.dtype)) * scales
            torch.mul(torch.mm(i["x"], i["q"].to(i["x"].dtype).t()), i["scale"], out=o["y"])
        return dequant_mm
    if name == "torch_int8pack_mm":
        op = getattr(torch, "_weight_int8pack_mm", None)
        if op is None:
            raise RuntimeError(f"not applicable: torch {torch.__version__} has no torch._weight_int8pack_mm")
        if torch.cuda.is_available():
            try:  # the op exists on every build, its CUDA kernel only in newer ones
                op(torch.ones(1, 16, dtype=torch.bfloat16, device="cuda"),
                   torch.ones(16, 16, dtype=torch.int8, device="cuda"),
                   torch.ones(16, dtype=torch.bfloat16, device="cuda"))
            except (NotImplementedError, RuntimeError) as exc:
                raise RuntimeError(f"not applicable: torch {torch.__version__}'s _weight_int8pack_mm does not run "
                                   f"on CUDA here ({str(exc).splitlines()[0]})") from exc
        return lambda i, o: {"y": op(i["x"], i["q"], i["scale"])}
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count \
        if torch.cuda.is_available() else 132
    return launcher(name, sms)
