"""norm_fused_bf16_sm90a: the pre-norm transformer block's normalization fused with its residual add, bf16 in
and out, fp32 statistics, against the copy roof and what people use.

Every op (the `op` param) takes x and the residual, writes r = x + residual in bf16 (the next layer's
residual, as a pre-norm block carries it) and normalizes r:
  `rmsnorm`      y = r * rsqrt(mean(r^2) + eps) * w                        (outputs y, r)
  `layernorm`    y = (r - mean) * rsqrt(var + eps) * w + b                 (outputs y, r)
  `rmsnorm_fp8`  y as for rmsnorm, kept in fp32; one scale per row s = amax|y| / 448 and
                 q = y / s in float8 e4m3, the input of an fp8 GEMM with per-token scaling (outputs q, s, r)
  `copy`         the roof: a device-to-device copy (torch's copy_, a cudaMemcpyAsync) of a rows x 2*hidden
                 bf16 tensor, which reads and writes exactly the bytes of rmsnorm's and layernorm's rows.
The harness hands a variant its inputs and poisoned outputs, not the params: each callable tells the op
from their names (a bias: layernorm; a q output: rmsnorm_fp8; no residual: copy).

Variants: `eager` (PyTorch eager: the add, then F.rms_norm / F.layer_norm; for fp8 the norm in fp32 and the
quantization as eager ops), `compile` (torch.compile of the same functions, default mode, dynamic=False,
compiled in the untimed check call, only at the two claimed shapes: a compile costs tens of seconds),
`liger` (Liger-Kernel's functional liger_rms_norm / liger_layer_norm, the residual added by torch before it
and, for fp8, the quantization by eager ops after it), `liger_fused` (Liger-Kernel's own fused add + RMSNorm,
liger_fused_add_rms_norm, for the two RMSNorm ops), `triton` (one Triton kernel per op, one program per
row, the row in registers: kernels.py) and `copy` (the roof, op copy only).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

SHAPES = [(32768, 4096), (16384, 8192), (4099, 5000)]  # rows x hidden: 8B-class and 70B-class hidden sizes at
# 256 MiB a tensor, and an off-tile shape that no power-of-two block divides (the masks are checked)
CLAIMED = [(32768, 4096), (16384, 8192)]  # the shapes the page's claims name: the compiled baseline runs there
MAX_HIDDEN = 16384  # a row lives in registers: past this a program would spill
OPS = ("rmsnorm", "layernorm", "rmsnorm_fp8")
EPS = {"rmsnorm": 1e-6, "rmsnorm_fp8": 1e-6, "layernorm": 1e-5}
FP8 = "float8_e4m3fn"
E4M3_MAX = 448.0
DTYPE = {"copy": "bfloat16", "rmsnorm": "bfloat16", "layernorm": "bfloat16", "rmsnorm_fp8": FP8}

FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)
GRID = [
    *({"op": "copy", "rows": r, "hidden": h, "dtype": DTYPE["copy"]} for r, h in SHAPES),
    *({"op": op, "rows": r, "hidden": h, "dtype": DTYPE[op]} for op in OPS for r, h in SHAPES),
]
VARIANTS = ["copy", "eager", "compile", "liger", "liger_fused", "triton"]
TOLERANCES = {
    "bfloat16": (1e-3, 2.0 ** -7, "bf16 outputs of an fp32 computation against fp64: one rounding (2^-9 relative) "
                 "for eager, compile and Triton, two for Liger-Kernel's 'llama' casting (r * rstd rounded to bf16 "
                 "before the weight); r = x + residual is one bf16 rounding everywhere, the same bits as the "
                 "reference's"),
    FP8: (2.0 ** -9, 0.08, "float8 e4m3 keeps 3 mantissa bits: q within half an ulp (2^-4 relative; 2^-9 absolute "
          "among the subnormals) of the unrounded fp64 y / s, plus about 1.5% for Liger-Kernel's bf16 y, which it "
          "rounds twice before the eager quantization scales it (and takes its amax); the scales and r are far "
          "inside it"),
}


def applies(name, params):
    op, shape = params["op"], (params["rows"], params["hidden"])
    if op == "copy" or name == "copy":
        return op == "copy" and name == "copy"
    if name == "compile":
        return shape in CLAIMED
    if name == "liger_fused":
        return op in ("rmsnorm", "rmsnorm_fp8")
    return True


def _check(params):
    """Refuses what the kernels cannot run, naming the param, before any tensor is made."""
    op, rows, h = params.get("op"), params.get("rows", 0), params.get("hidden", 0)
    if op not in DTYPE:
        raise ValueError(f"norm_fused: params {params}: op {op!r} is not one of {sorted(DTYPE)}")
    if not (0 < h <= MAX_HIDDEN) or rows <= 0:
        raise ValueError(f"norm_fused: params {params}: hidden must be 1..{MAX_HIDDEN} (a row lives in one "
                         "program's registers) and rows positive")
    if params.get("dtype") != DTYPE[op]:
        raise ValueError(f"norm_fused: params {params}: op {op} has dtype {DTYPE[op]} (the tolerance's key)")


def make_inputs(params, seed, device):
    import torch

    _check(params)
    g = torch.Generator(device=device).manual_seed(seed)
    rows, h = params["rows"], params["hidden"]

    def normal(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, device=device) * scale

    if params["op"] == "copy":
        return {"x": normal(rows, 2 * h).to(torch.bfloat16)}
    # the residual stream has a per-row mean (uniform in [-1, 1]): a LayerNorm that skipped centring, or took
    # the variance as E[r^2] - E[r]^2 with cancellation, would show it
    shift = 2 * torch.rand(rows, 1, generator=g, device=device) - 1
    # weights in [0.5, 1.5], never zero; for fp8 times 64 (exact in bf16; q does not change), so that the scales
    # are near 1 and the tolerance's absolute term (2^-9, for q's subnormals) cannot hide a wrong scale
    w = (torch.rand(h, generator=g, device=device) + 0.5) * (64 if params["op"] == "rmsnorm_fp8" else 1)
    out = {"x": normal(rows, h).to(torch.bfloat16), "res": (normal(rows, h) + shift).to(torch.bfloat16),
           "w": w.to(torch.bfloat16)}
    if params["op"] == "layernorm":
        out["b"] = normal(h, scale=0.1).to(torch.bfloat16)
    return out


def make_outputs(params, inputs):
    import torch

    x = inputs["x"]
    if params["op"] == "copy":
        return {"y": torch.empty_like(x)}
    if params["op"] != "rmsnorm_fp8":
        return {"y": torch.empty_like(x), "r": torch.empty_like(x)}
    return {"q": torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device),
            "s": torch.empty(x.shape[0], dtype=torch.float32, device=x.device), "r": torch.empty_like(x)}


def reference(params, inputs):
    """In fp64 from the bf16-rounded sum r, which every variant normalizes (it is what it stores)."""
    import torch

    op = params["op"]
    if op == "copy":
        return {"y": inputs["x"].clone()}
    r = (inputs["x"].double() + inputs["res"].double()).to(torch.bfloat16)
    rd, w, eps = r.double(), inputs["w"].double(), EPS[op]
    if op == "layernorm":
        d = rd - rd.mean(-1, keepdim=True)
        return {"y": d * torch.rsqrt(d.square().mean(-1, keepdim=True) + eps) * w + inputs["b"].double(), "r": r}
    y = rd * torch.rsqrt(rd.square().mean(-1, keepdim=True) + eps) * w
    if op == "rmsnorm":
        return {"y": y, "r": r}
    s = y.abs().amax(-1).clamp_min(1e-12) / E4M3_MAX
    return {"q": y / s[:, None], "s": s, "r": r}


def work(params):
    """The minimum traffic: read x and the residual, write r and the output, once each; the weight (and the
    bias) once; for fp8 one byte an element of q and 4 bytes a row of scales."""
    rows, h = params["rows"], params["hidden"]
    n = rows * h
    return {"bytes": float({"copy": 8 * n, "rmsnorm": 8 * n + 2 * h, "layernorm": 8 * n + 4 * h,
                            "rmsnorm_fp8": 7 * n + 2 * h + 4 * rows}[params["op"]]), "bytes_level": "dram"}


def _op(i, o):
    """The op whose inputs and outputs these are (the harness hands a variant those, not the params)."""
    return "copy" if "res" not in i else "layernorm" if "b" in i else "rmsnorm_fp8" if "q" in o else "rmsnorm"


def _unview(t):
    """A library's `y.view(shape)` of its own fresh output, with the same shape, strides and offset, as the
    tensor it views (the harness refuses returned views, rightly in general: here it is the same memory)."""
    while (t._base is not None and t._base.shape == t.shape and t._base.stride() == t.stride()
           and t._base.storage_offset() == t.storage_offset()):
        t = t._base
    return t


def _quantize(y):
    """Per-row e4m3 quantization as eager ops: the fp32 amax, the scale, the clamped quotient and the cast."""
    import torch

    y = y.float()
    s = y.abs().amax(-1).clamp_min(1e-12) / E4M3_MAX
    return (y / s[:, None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn), s


def _eager():
    """The functions eager runs and torch.compile compiles: op -> fn(x, res, w[, b]) -> outputs."""
    import torch.nn.functional as F

    def rmsnorm(x, res, w):
        r = x + res
        return {"y": F.rms_norm(r, (r.shape[-1],), w, EPS["rmsnorm"]), "r": r}

    def layernorm(x, res, w, b):
        r = x + res
        return {"y": F.layer_norm(r, (r.shape[-1],), w, b, EPS["layernorm"]), "r": r}

    def rmsnorm_fp8(x, res, w):
        r = x + res
        q, s = _quantize(F.rms_norm(r.float(), (r.shape[-1],), w.float(), EPS["rmsnorm_fp8"]))
        return {"q": q, "s": s, "r": r}

    return {"rmsnorm": rmsnorm, "layernorm": layernorm, "rmsnorm_fp8": rmsnorm_fp8}


def _liger(fused):
    """Liger-Kernel's functional ops: liger_rms_norm / liger_layer_norm after torch's add, or (fused) its
    liger_fused_add_rms_norm; the fp8 op quantizes their bf16 y with eager ops (Liger has no fp8 output)."""
    try:
        from liger_kernel.transformers.functional import liger_fused_add_rms_norm, liger_layer_norm, liger_rms_norm
    except ImportError as exc:
        raise RuntimeError(f"Liger-Kernel is not installed here ({exc}); pip install liger-kernel==0.8.5") from exc

    def add_rmsnorm(x, res, w, eps):
        if fused:
            y, r = liger_fused_add_rms_norm(x, res, w, eps)
            return _unview(y), _unview(r)
        r = x + res
        return _unview(liger_rms_norm(r, w, eps)), r

    def rmsnorm(x, res, w):
        y, r = add_rmsnorm(x, res, w, EPS["rmsnorm"])
        return {"y": y, "r": r}

    def layernorm(x, res, w, b):
        r = x + res
        return {"y": _unview(liger_layer_norm(r, w, b, EPS["layernorm"])), "r": r}

    def rmsnorm_fp8(x, res, w):
        y, r = add_rmsnorm(x, res, w, EPS["rmsnorm_fp8"])
        q, s = _quantize(y)
        return {"q": q, "s": s, "r": r}

    return {"rmsnorm": rmsnorm, "layernorm": layernorm, "rmsnorm_fp8": rmsnorm_fp8}


def _library(name):
    if name in ("liger", "liger_fused"):
        return _liger(name == "liger_fused")
    fns = _eager()
    if name == "compile":
        import torch

        fns = {op: torch.compile(fn, dynamic=False) for op, fn in fns.items()}  # compiled at its first (check) call
    return fns


def _launch_triton(op, i, o):
    import kernels
    import triton

    x = i["x"]
    rows, h = x.shape
    block = triton.next_power_of_2(h)
    warps = 4 if block <= 2048 else 8 if block <= 8192 else 16  # 8 to 32 elements of a tensor per thread
    args = (x, i["res"], i["w"])
    if op == "rmsnorm":
        kernels.add_rmsnorm_kernel[(rows,)](*args, o["y"], o["r"], h, EPS[op], BLOCK=block, num_warps=warps)
    elif op == "layernorm":
        kernels.add_layernorm_kernel[(rows,)](*args, i["b"], o["y"], o["r"], h, EPS[op], BLOCK=block,
                                              num_warps=warps)
    else:
        kernels.add_rmsnorm_fp8_kernel[(rows,)](*args, o["q"], o["s"], o["r"], h, EPS[op], BLOCK=block,
                                                num_warps=warps)


def load(name):
    if name not in VARIANTS:
        raise ValueError(f"norm_fused: no variant {name!r}; the variants are {VARIANTS}")
    if name == "copy":
        def copy(i, o):
            o["y"].copy_(i["x"])
        return copy
    if name == "triton":
        def triton_norm(i, o):
            op = _op(i, o)
            if op == "copy":
                raise ValueError("norm_fused: variant triton has no copy op (the roof is the copy variant)")
            _launch_triton(op, i, o)
        return triton_norm
    fns = _library(name)

    def library(i, o):
        op = _op(i, o)
        if op == "copy":
            raise ValueError(f"norm_fused: variant {name} has no copy op (the roof is the copy variant)")
        names = ("x", "res", "w", "b") if op == "layernorm" else ("x", "res", "w")
        return fns[op](*(i[k] for k in names))
    return library
