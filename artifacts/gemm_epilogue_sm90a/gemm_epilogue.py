"""gemm_epilogue_sm90a: what fusing a GEMM's epilogue buys. C = epilogue(A @ Bt^T), A [M, K] and Bt [N, K] in
bf16 (both K-major), fp32 accumulation, under four epilogues (the GRID's `epilogue`):

- none:               C = A @ Bt^T in bf16. mm (torch.matmul: cuBLAS, the plain GEMM's cost) and triton_plain.
- bias_gelu:          C = GELU_tanh(A @ Bt^T + bias) in bf16. addmm_gelu (torch._addmm_activation(bias, A, Bt^T,
                      use_gelu=True): cuBLASLt's GELU_BIAS epilogue), unfused (torch.matmul, then the bias add
                      and the GELU as eager ops, a kernel and a bf16 round trip each), compile (torch.compile of
                      the same function) and triton_bias_gelu (bias and GELU in the registers, before the store).
- bias_gelu_residual: C = GELU_tanh(A @ Bt^T + bias) + residual, the residual [M, N] in bf16. unfused, compile,
                      triton_bias_gelu_residual.
- fp8:                y = GELU_tanh(A @ Bt^T + bias) quantized to e4m3 for the next fp8 GEMM: q = y / s with one
                      fp32 scale s = amax / 448 per 1 x 128 group of a row (stored [N/128, M]), and the tensor's
                      amax |y| (one fp32). unfused, compile, triton_fp8_out (the groups' amax and the cast in
                      registers, one atomic max per program for the tensor's amax).

Rungs 5 to 8 (cuda_plain, cuda_bias_gelu, cuda_bias_gelu_residual, cuda_fp8_out) are the same four epilogues in CUDA
on the warp-specialized bf16 GEMM of artifacts/common/kwiki_ws_gemm.cuh (a TMA producer warpgroup, two wgmma consumer
warpgroups, 128 x 256 tiles): epilogue_ws.cu, built by kwiki into the library at $KWIKI_CUDA_LIBRARY and called
through ctypes on torch's current stream; the epilogue runs on the registers while the producer loads the next tile.
The GELU is the tanh form everywhere (torch's approximate="tanh", the form cuBLASLt's epilogue and
torch._addmm_activation use). Shapes (M x N x K): 4096^3, 8192 x 8192 x 4096 and 4001 x 4048 x 4048, which no
128 x 256 x 64 tile divides (its last 1 x 128 group of a row holds 80 columns). N and K are multiples of 16: the
TMA descriptors need 16-byte row strides (e4m3 rows for the fp8 output). FLOPs are 2 M N K for every
epilogue (the epilogue's few FLOPs an element are not counted), so a rate compares times.
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

EPILOGUES = ("none", "bias_gelu", "bias_gelu_residual", "fp8")
FP8 = "float8_e4m3fn"
E4M3_MAX = 448.0
GROUP = 128  # the 1 x GROUP groups of a row that share one fp8 scale
SHAPES = [(4096, 4096, 4096), (8192, 8192, 4096), (4001, 4048, 4048)]  # (M, N, K)
CLAIMED = [(4096, 4096, 4096), (8192, 8192, 4096)]  # the claims' shapes: torch.compile compiles there only
DTYPE = {"none": "bfloat16", "bias_gelu": "bfloat16", "bias_gelu_residual": "bfloat16", "fp8": FP8}
GRID = [{"m": m, "n": n, "k": k, "epilogue": e, "dtype": DTYPE[e]} for e in EPILOGUES for (m, n, k) in SHAPES]
VARIANTS = ["mm", "addmm_gelu", "unfused", "compile", "triton_plain", "triton_bias_gelu",
            "triton_bias_gelu_residual", "triton_fp8_out", "cuda_plain", "cuda_bias_gelu", "cuda_bias_gelu_residual",
            "cuda_fp8_out"]
FOR_EPILOGUE = {"none": {"mm", "triton_plain", "cuda_plain"},
                "bias_gelu": {"addmm_gelu", "unfused", "compile", "triton_bias_gelu", "cuda_bias_gelu"},
                "bias_gelu_residual": {"unfused", "compile", "triton_bias_gelu_residual", "cuda_bias_gelu_residual"},
                "fp8": {"unfused", "compile", "triton_fp8_out", "cuda_fp8_out"}}
TRITON_EPILOGUE = {"triton_plain": 0, "triton_bias_gelu": 1, "triton_bias_gelu_residual": 2, "triton_fp8_out": 3}
CUDA_EPILOGUE = {"cuda_plain": 0, "cuda_bias_gelu": 1, "cuda_bias_gelu_residual": 2, "cuda_fp8_out": 3}  # epilogue_ws.cu
TOLERANCES = {
    "bfloat16": (2.0 ** -4, 2.0 ** -6, "bf16 outputs of magnitude up to about 8 (acc ~ N(0, 4), bias within 0.25, "
                 "residual ~ N(0, 1)) against an fp32 reference: the fused kernels round once (2^-8 relative), the "
                 "eager chain up to four times (GEMM, bias add, GELU, residual add), each 2^-8 of an intermediate "
                 "that can be larger than the output where GELU(x) and the residual cancel; atol 2^-4 covers four "
                 "roundings of an intermediate of 4, rtol 2^-6 four of the output itself"),
    FP8: (0.25, 0.08, "q in e4m3 units (up to 448): half an e4m3 ulp is at most 2^-4 relative, plus the eager "
          "chain's bf16 roundings of y (3 x 2^-8) before its quantization; atol 0.25 (of 448) covers the GEMM "
          "output's bf16 rounding where acc + bias cancels (2^-8 x 0.25 / s, s ~ 0.01). The scales (~0.01) sit "
          "inside atol and are checked through q = y / s, which a wrong scale moves by its own factor; the amax "
          "(~10) to 0.25 + 8%. tests/test_gemm_epilogue_triton.py checks the Triton scales and amax to 1e-5"),
}
TILE = {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}


def applies(name, params):
    if name == "compile" and (params["m"], params["n"], params["k"]) not in CLAIMED:
        return False  # a compile costs tens of seconds: at the claims' shapes only
    return name in FOR_EPILOGUE[params["epilogue"]]


def _validate(params):
    """Refuses what the kernels cannot run, naming the param, before any tensor is made."""
    m, n, k, epi = params.get("m"), params.get("n"), params.get("k"), params.get("epilogue")
    if epi not in EPILOGUES:
        raise ValueError(f"gemm_epilogue: params {params}: epilogue must be one of {list(EPILOGUES)}")
    if not all(isinstance(v, int) and v > 0 for v in (m, n, k)):
        raise ValueError(f"gemm_epilogue: params {params}: m, n, k must be positive integers")
    if n % 16 or k % 16:
        raise ValueError(f"gemm_epilogue: params {params}: n and k must be multiples of 16 (16-byte TMA rows)")
    if params.get("dtype") != DTYPE[epi]:
        raise ValueError(f"gemm_epilogue: params {params}: epilogue {epi} has dtype {DTYPE[epi]}")


def _cdiv(a, b):
    return -(-a // b)


def make_inputs(params, seed, device):
    """a ~ U(-1, 1) and bt ~ U(-1, 1) * 6 / sqrt(K), so acc = a @ bt^T ~ N(0, 4): most of it in GELU's curved
    region (|x| < 3), some far from it; bias ~ U(-1/4, 1/4) per column; residual ~ N(0, 1). All bf16."""
    import torch

    _validate(params)
    g = torch.Generator(device=device).manual_seed(seed)
    m, n, k = params["m"], params["n"], params["k"]

    def uniform(*shape, scale=1.0):
        return ((torch.rand(*shape, generator=g, device=device) * 2 - 1) * scale).to(torch.bfloat16)

    out = {"a": uniform(m, k), "bt": uniform(n, k, scale=6.0 / k ** 0.5)}
    if params["epilogue"] != "none":
        out["bias"] = uniform(n, scale=0.25)
    if params["epilogue"] == "bias_gelu_residual":
        out["res"] = torch.randn(m, n, generator=g, device=device).to(torch.bfloat16)
    return out


def make_outputs(params, inputs):
    import torch

    m, n, dev = params["m"], params["n"], inputs["a"].device
    if params["epilogue"] != "fp8":
        return {"c": torch.empty(m, n, dtype=torch.bfloat16, device=dev)}
    return {"q": torch.empty(m, n, dtype=torch.float8_e4m3fn, device=dev),
            "s": torch.empty(_cdiv(n, GROUP), m, dtype=torch.float32, device=dev),
            "amax": torch.empty(1, dtype=torch.float32, device=dev)}


def group_amax(y):
    """The amax of each 1 x GROUP group of y's rows as [N/GROUP, M] (a partial last group padded with zeros,
    which change no amax)."""
    import torch.nn.functional as F

    m, n = y.shape
    padded = F.pad(y.abs(), (0, _cdiv(n, GROUP) * GROUP - n))
    return padded.reshape(m, -1, GROUP).amax(dim=2).t().contiguous()


def quantize(y):
    """(q unrounded, s, amax) of fp32 y: s = group amax / 448, q = y / s (the reference keeps q unrounded)."""
    s = group_amax(y).clamp_min(1e-12) / E4M3_MAX
    q = y / s.t().repeat_interleave(GROUP, dim=1)[:, : y.shape[1]]
    return q, s, y.abs().amax().reshape(1)


def reference(params, inputs):
    """In fp32 (no TF32) from the bf16 inputs; GELU in its tanh form."""
    import torch
    import torch.nn.functional as F

    torch.backends.cuda.matmul.allow_tf32 = False
    acc = inputs["a"].float() @ inputs["bt"].float().t()
    epi = params["epilogue"]
    if epi == "none":
        return {"c": acc}
    y = F.gelu(acc + inputs["bias"].float(), approximate="tanh")
    if epi == "bias_gelu":
        return {"c": y}
    if epi == "bias_gelu_residual":
        return {"c": y + inputs["res"].float()}
    q, s, amax = quantize(y)
    return {"q": q, "s": s, "amax": amax}


def work(params):
    """2 M N K FLOPs whatever the epilogue (its few operations an element are ignored); the bytes are the
    fused kernel's minimum: the operands once, the bias and residual once, the output once."""
    m, n, k, epi = params["m"], params["n"], params["k"], params["epilogue"]
    out = {"none": 2.0 * m * n, "bias_gelu": 2.0 * m * n + 2.0 * n, "bias_gelu_residual": 4.0 * m * n + 2.0 * n,
           "fp8": 1.0 * m * n + 2.0 * n + 4.0 * m * _cdiv(n, GROUP) + 4.0}[epi]
    return {"flops": 2.0 * m * n * k, "flops_dtype": "bf16", "bytes": 2.0 * (m * k + n * k) + out,
            "bytes_level": "dram"}


def _op(i, o):
    """The epilogue these inputs and outputs belong to (the harness hands a variant those, not the params)."""
    return "fp8" if "q" in o else "bias_gelu_residual" if "res" in i else "bias_gelu" if "bias" in i else "none"


def _chain(torch):
    """The eager chain, op -> fn(a, bt, bias[, res]) -> outputs: torch.matmul (cuBLAS, a bf16 C), then each
    epilogue step as its own op on bf16 tensors (the fp8 step in fp32 from the bf16 y). torch.compile compiles
    the same functions."""
    import torch.nn.functional as F

    def bias_gelu(a, bt, bias):
        return {"c": F.gelu(torch.matmul(a, bt.t()) + bias, approximate="tanh")}

    def bias_gelu_residual(a, bt, bias, res):
        return {"c": F.gelu(torch.matmul(a, bt.t()) + bias, approximate="tanh") + res}

    def fp8(a, bt, bias):
        y = F.gelu(torch.matmul(a, bt.t()) + bias, approximate="tanh").float()
        m, n = y.shape
        amax_g = F.pad(y.abs(), (0, _cdiv(n, GROUP) * GROUP - n)).reshape(m, -1, GROUP).amax(dim=2)  # [M, N/128]
        s = amax_g.clamp_min(1e-12) / E4M3_MAX
        # each column's scale by a gather (column // 128): torch 2.13's Inductor on CPU miscasts to e4m3 the
        # padded-group form (y padded, divided group-wise, sliced back) past the last full group
        q = (y / s[:, torch.arange(n, device=y.device) // GROUP]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        return {"q": q, "s": s.t().contiguous(), "amax": amax_g.reshape(1, -1).amax(dim=1)}

    return {"bias_gelu": bias_gelu, "bias_gelu_residual": bias_gelu_residual, "fp8": fp8}


def _library(name, torch):
    fns = _chain(torch)
    if name == "compile":
        fns = {op: torch.compile(fn, dynamic=False) for op, fn in fns.items()}  # compiled at its first call

    def library(i, o):
        op = _op(i, o)
        if op == "none":
            raise ValueError(f"gemm_epilogue: variant {name} has no plain GEMM (that is mm)")
        names = ("a", "bt", "bias", "res") if op == "bias_gelu_residual" else ("a", "bt", "bias")
        return fns[op](*(i[k] for k in names))
    return library


def _addmm_gelu(torch):
    """torch._addmm_activation(bias, a, bt.t(), use_gelu=True): on CUDA torch routes it to cublasLtMatmul with
    the GELU_BIAS epilogue (its fallback is addmm, then a tanh GELU in place: the manifest's `kernels` fail the
    identity gate on that second kernel)."""
    op = getattr(torch, "_addmm_activation", None)
    if op is None:
        raise RuntimeError(f"not applicable: torch {torch.__version__} has no torch._addmm_activation")

    def addmm_gelu(i, o):
        if "bias" not in i or "res" in i or "q" in o:
            raise ValueError("gemm_epilogue: addmm_gelu runs the bias_gelu epilogue only")
        op(i["bias"], i["a"], i["bt"].t(), use_gelu=True, out=o["c"])
    return addmm_gelu


def _triton(name, torch):
    import triton

    import kernels

    epilogue = TRITON_EPILOGUE[name]
    cfg = TILE
    on_gpu = torch.cuda.is_available()

    def scratch(size, alignment, stream):  # where the kernel writes its TMA descriptors
        return torch.empty(size, dtype=torch.int8, device="cuda" if on_gpu else "cpu")

    triton.set_allocator(scratch)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count if on_gpu else 4

    def gemm(i, o):
        a, bt = i["a"], i["bt"]
        (m, k), n = a.shape, bt.shape[0]
        if (_op(i, o) == "fp8") != (epilogue == 3) or (epilogue > 0) != ("bias" in i):
            raise ValueError(f"gemm_epilogue: variant {name} does not run the {_op(i, o)} epilogue")
        out = o["q"] if epilogue == 3 else o["c"]
        if epilogue == 3:
            o["amax"].zero_()  # the kernel's atomic max starts from 0 (|y| >= 0)
        tiles = triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"])
        kernels.gemm_epilogue[(min(sms, tiles),)](
            a, bt, out, i.get("bias", a), i.get("res", out), o.get("s", a), o.get("amax", a), m, n, k,
            EPILOGUE=epilogue, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"], GROUP=GROUP,
            NUM_SMS=sms, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return gemm


def cuda_operands_error(name, i, o):
    """What epilogue_ws.cu's launcher is not built for in these tensors, or None (checked before any CUDA call): bf16
    a [M, K] and bt [N, K], the bias [N] and residual [M, N] its epilogue reads, the outputs make_outputs gives,
    everything contiguous on one CUDA device, N and K multiples of 16, a, bt and the output (c or q) 16-byte aligned
    for TMA."""
    import torch

    epilogue = CUDA_EPILOGUE[name]
    if _op(i, o) != EPILOGUES[epilogue]:
        return f"it runs the {EPILOGUES[epilogue]} epilogue, not {_op(i, o)}"
    a, bt = i["a"], i["bt"]
    if a.dim() != 2 or bt.dim() != 2 or a.shape[1] != bt.shape[1]:
        return f"a {tuple(a.shape)} and bt {tuple(bt.shape)} are not [M, K] and [N, K]"
    (m, k), n = a.shape, bt.shape[0]
    if n % 16 or k % 16:
        return f"n {n} and k {k} must be multiples of 16 (16-byte TMA rows)"
    want = [("a", a, torch.bfloat16, (m, k)), ("bt", bt, torch.bfloat16, (n, k))]
    if epilogue:
        want.append(("bias", i["bias"], torch.bfloat16, (n,)))
    if epilogue == 2:
        want.append(("res", i["res"], torch.bfloat16, (m, n)))
    if epilogue == 3:
        want += [("q", o["q"], torch.float8_e4m3fn, (m, n)), ("s", o["s"], torch.float32, (_cdiv(n, GROUP), m)),
                 ("amax", o["amax"], torch.float32, (1,))]
    else:
        want.append(("c", o["c"], torch.bfloat16, (m, n)))
    for label, t, dtype, shape in want:
        if t.dtype != dtype or tuple(t.shape) != shape or not t.is_contiguous():
            return f"{label} is {tuple(t.shape)} {t.dtype}, not a contiguous {dtype} {shape}"
    for label, t, _, _ in want:
        if t.device != a.device or t.device.type != "cuda":
            return f"{label} is on {t.device}, not on a's CUDA device"
    out = ("q", o["q"]) if epilogue == 3 else ("c", o["c"])
    bad = [label for label, t in (("a", a), ("bt", bt), out) if t.data_ptr() % 16]
    if bad:
        return f"{' and '.join(bad)} not 16-byte aligned (TMA)"
    bad = [label for label, t, _, _ in want[2:] if t.data_ptr() % 4]
    return f"{' and '.join(bad)} not 4-byte aligned (pairs of bf16 or e4m3, fp32 scales)" if bad else None


# kwiki:rung cuda_plain
def _cuda(name, torch):
    """Rungs 5 to 8: kwiki_gemm_epilogue from the artifact's library (epilogue_ws.cu), on torch's current stream;
    operands it is not built for are refused here, by name, before any CUDA call. The fp8 rung's amax is zeroed by the
    library, a memset on the stream before its kernel (triton_fp8_out's by torch's fill kernel, which its `kernels`
    name)."""
    import ctypes
    import os

    library = os.environ.get("KWIKI_CUDA_LIBRARY")
    if not library:
        raise RuntimeError(f"{name} is not runnable here: no $KWIKI_CUDA_LIBRARY (kwiki builds epilogue_ws.cu into it)")
    fn = ctypes.CDLL(library).kwiki_gemm_epilogue
    fn.argtypes = [ctypes.c_int, *[ctypes.c_void_p] * 7, *[ctypes.c_int] * 3, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def cuda_gemm(i, o):
        why = cuda_operands_error(name, i, o)
        if why:
            raise ValueError(f"gemm_epilogue_sm90a (gemm_epilogue.py): {name}: {why}")
        a, bt, epilogue = i["a"], i["bt"], CUDA_EPILOGUE[name]
        (m, k), n = a.shape, bt.shape[0]
        out = o["q"] if epilogue == 3 else o["c"]
        ptr = [t.data_ptr() if t is not None else None for t in (i.get("bias"), i.get("res"), o.get("s"), o.get("amax"))]
        err = fn(epilogue, a.data_ptr(), bt.data_ptr(), ptr[0], ptr[1], out.data_ptr(), ptr[2], ptr[3], m, n, k,
                 torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"gemm_epilogue_sm90a (epilogue_ws.cu): kwiki_gemm_epilogue({name}) returned {err} (-1: "
                               "operands refused, -2: tensor map refused, else a CUDA error code)")
    return cuda_gemm
# /kwiki:rung cuda_plain


def load(name):
    import torch

    if name not in VARIANTS:
        raise ValueError(f"gemm_epilogue: no variant {name!r}; the variants are {VARIANTS}")
    if name == "mm":
        def mm(i, o):
            if "bias" in i:
                raise ValueError("gemm_epilogue: mm runs the plain GEMM (epilogue none) only")
            torch.matmul(i["a"], i["bt"].t(), out=o["c"])
        return mm
    if name == "addmm_gelu":
        return _addmm_gelu(torch)
    if name in ("unfused", "compile"):
        return _library(name, torch)
    if name in CUDA_EPILOGUE:
        return _cuda(name, torch)
    return _triton(name, torch)
