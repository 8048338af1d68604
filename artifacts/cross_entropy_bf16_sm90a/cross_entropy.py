"""cross_entropy_bf16_sm90a: the cross-entropy loss of bf16 logits over a vocabulary (32k to 128k), int64
targets, one fp32 loss per row (op ce, reduction "none"), and the loss with its bf16 gradient with respect to
the logits (op ce_grad, below), against the copy and read roofs, PyTorch eager, torch.compile and Liger-Kernel.

loss[r] = logsumexp(x[r, :]) - x[r, t[r]]. The compulsory bytes are one read of the logits (plus the targets
and the losses), so the op is a read stream with a reduction: its roofs are a copy (cudaMemcpyAsync through
torch's copy_, and a Triton copy) and a Triton read of a same-sized tensor, measured in the same run.

Rungs: `triton_online` keeps one program per row and reads the row once in 8192-element chunks with the
online-softmax state (running maximum, rescaled sums); `triton_prefetch` is the same kernel with the next
chunk's load issued before the current chunk's arithmetic; `triton_split` cuts every row into 8192-element
programs that write a partial (max, sum) each, merged per row by a second kernel.
Baselines: F.cross_entropy (eager; bf16 loss, cast to fp32), torch.compile of the same function (default
mode, dynamic=False, compiled in the untimed check call, at 4096 x 128256 only: a compile costs 10-40 s),
and Liger-Kernel 0.8.5's liger_cross_entropy_kernel launched as its cross_entropy_forward launches it for
inputs that need no gradient (HAS_GRADIENTS false: loss only, logits untouched), storing straight into the
fp32 loss; the wrapper's target checks (host syncs and small reductions) are left out, in Liger's favour.

op ce_grad, the training step's loss and its gradient (reduction "sum": loss = sum over rows of
lse(x[r]) - x[r, t[r]], rows whose target is IGNORE_INDEX left out; the outputs are each row's loss, fp32, 0 where
ignored, and the bf16 gradient with respect to the logits, dL/dx[r, j] = softmax(x[r])[j] - [j == t[r]], a row of
zeros where ignored; "mean" would scale every gradient element by 1/n, one multiplication, and need n, a count
of the non-ignored targets that Liger's wrapper reads back to the host). The compulsory bytes are one read of the
logits and one write of the gradient, the copy's traffic, so the copy roof is its roof. Its rungs are one
kernel, ce_grad_kernel, each row read twice (the log-sum-exp must be known before the first gradient element):
`triton_grad` one program per row, pass 2 in the row's order; `triton_grad_reverse` pass 2 from the row's end,
where the lines pass 1 read last are; `triton_grad_hints` L2 eviction hints (pass 1's lines kept, pass 2's reads
and the gradient's writes dropped first); `triton_grad_l2` a grid of as many programs as keep the rows in
flight within the L2 (its size and the SM count read from the device), each walking rows. `triton_grad_inplace`
is the top rung run as Liger-Kernel runs: the logits copied into the gradient's buffer, then the kernel over it
in place. `cuda_grad_cluster` (ce_cluster.cu, built by kwiki into the library at $KWIKI_CUDA_LIBRARY and called
through ctypes on torch's current stream) reads each row once: a thread-block cluster holds the row in its CTAs'
shared memory (columns a multiple of 8), and `cuda_grad_cluster_inplace` is its twin run as Liger-Kernel runs.
Its baselines are the forward's variants at this op: F.cross_entropy then torch.autograd.grad of the
sum (eager, and torch.compile at 4096 x 128256), and Liger-Kernel's kernel with HAS_GRADIENTS true, which
overwrites the logits it reads with their gradient. The harness requires inputs to be left bit-identical and
has no untimed per-call hook of the module's, so that variant copies the logits into the gradient output (a
device-to-device cudaMemcpyAsync, 4 bytes an element) and zeroes the loss (an ignored row's loss is never
stored) inside the timed call, and its time includes both: `triton_grad_inplace` pays the same copy, and the
claims against Liger compare those two.
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

ROOF = {"rows": 4096, "cols": 32768}  # 256 MiB of bf16: the copy and read roofs
READ_BLOCK = 16384  # 32-bit words a program of the read roof reads (64 KiB, 8 warps: 64 words a thread)
SHAPES = [(4096, 128256), (4096, 32000), (256, 128256), (1001, 5003)]  # Llama 3's and Llama 2's vocabularies;
# few rows of a long row; and an off-tile shape that no power-of-two chunk divides
COMPILED = (4096, 128256)  # the one claimed shape torch.compile runs at (loss, and loss with gradient)
BLOCK = 8192  # elements of a row per chunk (16 KiB of bf16), for every Triton rung
CHUNKS = 16  # rung 3's merge reads up to CHUNKS partials a row: vocabularies up to 16 * BLOCK = 131072
LIGER_WARPS = 32  # cross_entropy_forward's num_warps on Hopper (sm_90)
GRAD_SHAPES = [(4096, 128256, 0), (4096, 32000, 0), (1001, 5003, 7), (333, 32008, 5)]  # (rows, cols,
# ignore_every): the last two off every tile, every 7th (5th) row's target IGNORE_INDEX (rows 6, 13, ...); 5003
# columns are no multiple of 8, which the CUDA rung needs, so 32008 (two 4001-vector slices a row: unequal) is its
# off-tile shape
CLUSTER_MAX = 65535  # the CUDA rung's cap on its clusters (an input, "clusters", 0: as many as run at once)
IGNORE_INDEX = -100  # F.cross_entropy's and Liger's default
GRAD_PROGRAMS_PER_SM = 3  # triton_grad_l2's most programs an SM (8-warp programs: what the registers of rung 1 allow)

GRAD = "bfloat16_grad"  # ce_grad's TOLERANCES key: bf16 logits, a bf16 gradient checked relatively
FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)
GRID = [
    {"op": "copy", **ROOF, "dtype": "bfloat16"},
    {"op": "read", **ROOF, "dtype": "bfloat16"},
    *({"op": "ce", "rows": r, "cols": v, "dtype": "bfloat16"} for r, v in SHAPES),
    *({"op": "ce_grad", "rows": r, "cols": v, **({"ignore_every": k} if k else {}), "dtype": GRAD}
      for r, v, k in GRAD_SHAPES),
]
VARIANTS = ["torch_copy", "triton_copy", "triton_read", "torch_eager", "torch_compile", "liger",
            "triton_online", "triton_prefetch", "triton_split",
            "triton_grad", "triton_grad_reverse", "triton_grad_hints", "triton_grad_l2", "triton_grad_inplace",
            "cuda_grad_cluster", "cuda_grad_cluster_inplace"]
FORWARD = ("triton_online", "triton_prefetch", "triton_split")
GRADIENT = ("triton_grad", "triton_grad_reverse", "triton_grad_hints", "triton_grad_l2", "triton_grad_inplace")
CUDA_GRAD = ("cuda_grad_cluster", "cuda_grad_cluster_inplace")  # ce_cluster.cu: columns a multiple of 8
BASELINES = ("torch_eager", "torch_compile", "liger")  # at both ops
TOLERANCES = {
    "bfloat16": (1e-3, 2.0 ** -7, "a loss near 14 (log V plus 2 for logits of standard deviation 2) that eager "
                 "and torch.compile round to bf16 (unit roundoff 2^-8) once or twice; the Triton rungs and Liger "
                 "keep fp32 and land within 1e-5; a copy and the read roof's word maxima are exact"),
    GRAD: (2.0 ** -30, 2.0 ** -3, "bf16 gradients from 1e-11 to 1 in magnitude (softmax of logits of standard "
           "deviation 2 over 128k columns, minus 1 at the target), so the test is relative: eager's comes from "
           "exp of its bf16 log-softmax, whose rounding near -20 (half an ulp, 2^-5) is about 6% of the "
           "gradient, and its backward rounds again: 8.7% at most over 512 rows of 128256 on the CPU, so 2^-3; "
           "the Triton rungs and Liger round an fp32 value once (2^-9) and their losses keep fp32, and the "
           "interpreter tests hold ours to 2^-7 of fp64; ignored rows are exact zeros"),
}


def applies(name, params):
    op = params["op"]
    if op in ("copy", "read"):
        return name in {"copy": ("torch_copy", "triton_copy"), "read": ("triton_read",)}[op]
    if name == "torch_compile":
        return (params["rows"], params["cols"]) == COMPILED
    if name in CUDA_GRAD:
        return op == "ce_grad" and params["cols"] % 8 == 0
    return name in BASELINES + (FORWARD if op == "ce" else GRADIENT)


def make_inputs(params, seed, device):
    import torch

    op, rows, cols = params.get("op"), params.get("rows", 0), params.get("cols", 0)
    if op not in ("copy", "read", "ce", "ce_grad") or rows <= 0 or cols <= 0:
        raise ValueError(f"cross_entropy: params {params}: op must be copy, read, ce or ce_grad, rows and cols "
                         f"positive")
    if op == "ce" and cols > CHUNKS * BLOCK:
        raise ValueError(f"cross_entropy: params {params}: cols {cols} > {CHUNKS * BLOCK}, the longest row "
                         f"triton_split merges (CHUNKS * BLOCK)")
    if op == "read" and cols % 2:
        raise ValueError(f"cross_entropy: params {params}: the read roof reads bf16 pairs as words: cols even")
    every = params.get("ignore_every", 0)
    if op == "ce_grad" and (not isinstance(every, int) or every < 0 or every == 1):
        raise ValueError(f"cross_entropy: params {params}: ignore_every must be 0 (no ignored row) or an int >= 2")
    clusters = params.get("clusters", 0)
    if isinstance(clusters, bool) or not isinstance(clusters, int) or not 0 <= clusters <= CLUSTER_MAX:
        raise ValueError(f"cross_entropy: params {params}: clusters must be 0 (as many as run at once) or a cap on the "
                         f"CUDA rung's clusters, up to {CLUSTER_MAX}")
    g = torch.Generator(device=device).manual_seed(seed)
    x = (2 * torch.randn(rows, cols, generator=g, device=device)).to(torch.bfloat16)
    if op in ("copy", "read"):
        return {"x": x}
    t = torch.randint(0, cols, (rows,), generator=g, device=device, dtype=torch.int64)
    if every:
        t[every - 1::every] = IGNORE_INDEX
    return {"x": x, "t": t, **({"clusters": clusters} if clusters else {})}  # the sanitizer's cap (CUDA rung only)


def ignored_rows(params):
    """How many of a ce_grad entry's rows have target IGNORE_INDEX (rows every-1, 2 every-1, ...)."""
    every = params.get("ignore_every", 0)
    return params["rows"] // every if every else 0


def make_outputs(params, inputs):
    import torch

    x = inputs["x"]
    if params["op"] == "copy":
        return {"y": torch.empty_like(x)}
    if params["op"] == "read":
        return {"y": torch.empty(-(-x.numel() // (2 * READ_BLOCK)), dtype=torch.int32, device=x.device)}
    loss = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    if params["op"] == "ce_grad":
        return {"loss": loss, "grad": torch.empty_like(x)}
    return {"loss": loss}


def reference(params, inputs):
    import torch

    x = inputs["x"]
    if params["op"] == "copy":
        return {"y": x.clone()}
    if params["op"] == "read":  # each block's largest word, the last block padded with the smallest int32
        w = x.reshape(-1).view(torch.int32)
        w = torch.nn.functional.pad(w, (0, -w.numel() % READ_BLOCK), value=-(1 << 31))
        return {"y": w.view(-1, READ_BLOCK).amax(-1)}
    if params["op"] == "ce_grad":
        return grad_reference(x, inputs["t"])
    xd = x.double()
    return {"loss": torch.logsumexp(xd, -1) - xd.gather(1, inputs["t"][:, None])[:, 0]}


def grad_reference(x, t, rows_at_once=512):
    """fp64 loss per row and gradient of their sum, softmax(x) - onehot(t), zeros where t is IGNORE_INDEX; a
    block of rows at a time (a 4096 x 128256 fp64 temporary would be 4 GiB more)."""
    import torch

    loss = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
    grad = torch.zeros(x.shape, dtype=torch.float64, device=x.device)
    for lo in range(0, x.shape[0], rows_at_once):
        xd, tb = x[lo:lo + rows_at_once].double(), t[lo:lo + rows_at_once]
        keep = tb != IGNORE_INDEX
        lse = torch.logsumexp(xd, -1, keepdim=True)
        g = torch.exp(xd - lse)
        tk = tb.clamp_min(0)[:, None]
        g.scatter_add_(1, tk, -torch.ones_like(tk, dtype=torch.float64))
        grad[lo:lo + rows_at_once] = g * keep[:, None]
        loss[lo:lo + rows_at_once] = (lse[:, 0] - xd.gather(1, tk)[:, 0]) * keep
    return {"loss": loss, "grad": grad}


def work(params):
    n = params["rows"] * params["cols"]
    if params["op"] == "copy":
        return {"bytes": float(4 * n), "bytes_level": "dram"}  # bf16 read and written
    if params["op"] == "read":
        return {"bytes": float(2 * n + 4 * -(-n // (2 * READ_BLOCK))), "bytes_level": "dram"}
    if params["op"] == "ce_grad":  # the logits of the rows not ignored read once, the gradient written once
        kept = (params["rows"] - ignored_rows(params)) * params["cols"]
        return {"bytes": float(2 * kept + 2 * n + 12 * params["rows"]), "bytes_level": "dram"}
    return {"bytes": float(2 * n + 12 * params["rows"]), "bytes_level": "dram"}  # logits, int64 targets, fp32 loss


def _eager():
    """The function eager runs and torch.compile compiles: the bf16 loss of F.cross_entropy, as fp32."""
    import torch.nn.functional as F

    def cross_entropy(x, t):
        return F.cross_entropy(x, t, reduction="none", ignore_index=IGNORE_INDEX).float()
    return cross_entropy


def _eager_grad(fn):
    """Loss and gradient by autograd: fn (eager or compiled) gives the rows' losses; their sum's gradient with
    respect to the logits is torch.autograd.grad's (log_softmax's backward, eager; Inductor's, compiled)."""
    import torch

    def loss_and_grad(x, t):
        xg = x.detach().requires_grad_()
        loss = fn(xg, t)
        (grad,) = torch.autograd.grad(loss.sum(), xg)
        return {"loss": loss.detach(), "grad": grad}
    return loss_and_grad


def load(name):
    if name == "torch_copy":
        def torch_copy(i, o):
            o["y"].copy_(i["x"])
        return torch_copy
    import torch

    if name in ("torch_eager", "torch_compile"):
        fn = torch.compile(_eager(), dynamic=False) if name == "torch_compile" else _eager()
        grad = _eager_grad(fn)
        return lambda i, o: grad(i["x"], i["t"]) if "grad" in o else {"loss": fn(i["x"], i["t"])}
    if name == "liger":
        return _liger()
    if name in CUDA_GRAD:
        return _cuda_grad(name)
    import kernels
    import triton

    if name in GRADIENT:
        return _grad_launcher(name, kernels)

    def launch(i, o):
        x = i["x"]
        rows, v = x.shape
        if name == "triton_copy":
            kernels.copy_kernel[(triton.cdiv(x.numel(), 4096),)](x, o["y"], x.numel(), BLOCK=4096, num_warps=8)
        elif name == "triton_read":
            w = x.view(-1).view(torch.int32)
            kernels.read_kernel[(triton.cdiv(w.numel(), READ_BLOCK),)](w, o["y"], w.numel(), BLOCK=READ_BLOCK,
                                                                         num_warps=8)
        elif name in ("triton_online", "triton_prefetch"):
            kernels.ce_online_kernel[(rows,)](x, i["t"], o["loss"], v, BLOCK=BLOCK,
                                              PREFETCH=name == "triton_prefetch", num_warps=8)
        else:
            chunks = triton.cdiv(v, BLOCK)
            m = torch.empty(rows * chunks, dtype=torch.float32, device=x.device)
            d = torch.empty_like(m)
            kernels.ce_partial_kernel[(rows * chunks,)](x, m, d, v, chunks, CHUNK=BLOCK, num_warps=8)
            kernels.ce_merge_kernel[(rows,)](x, i["t"], m, d, o["loss"], v, chunks, CHUNKS=CHUNKS, num_warps=1)
    return launch


def _grad_launcher(name, kernels):
    """The gradient rungs' launch: ce_grad_kernel with the rung's flags and grid; `triton_grad_inplace` copies
    the logits into the gradient's buffer first and runs the top rung over it in place (Liger's setting)."""
    hints = name in ("triton_grad_hints", "triton_grad_l2", "triton_grad_inplace")
    reverse = name != "triton_grad"

    def grad(i, o):
        x, t, loss, g = i["x"], i["t"], o["loss"], o["grad"]
        rows, v = x.shape
        src = x
        if name == "triton_grad_inplace":
            g.copy_(x)
            src = g
        programs, warps, block = (rows, 8, BLOCK) if name in ("triton_grad", "triton_grad_reverse",
                                                              "triton_grad_hints") else grad_launch(rows, v, x.device)
        kernels.ce_grad_kernel[(programs,)](src, t, loss, g, v, rows, 1.0, IGNORE=IGNORE_INDEX, BLOCK=block,
                                            REVERSE=reverse, HINTS=hints, num_warps=warps)
    return grad


# kwiki:rung cuda_grad_cluster
def cuda_operands_error(x, t, loss, grad):
    """Why ce_cluster.cu cannot take these tensors (None if it can): x and grad one [rows, cols] bf16 shape, contiguous,
    cols a multiple of 8 (16-byte vectors) and at most 16 slices of 32 KiB, rows at most 65535 (the grid's y
    extent), t int64 and loss fp32 [rows], contiguous, all on one device, x and grad 16-byte aligned."""
    import torch

    bad = []
    if x.dim() != 2 or x.dtype != torch.bfloat16 or not x.is_contiguous():
        return f"x is {tuple(x.shape)} {x.dtype}, not a contiguous bf16 [rows, cols]"
    rows, cols = x.shape
    if cols % 8 or cols > 16 * 2048 * 8:
        bad.append(f"cols {cols} is not a multiple of 8 up to {16 * 2048 * 8}")
    if rows > 65535:
        bad.append(f"rows {rows} is above 65535")
    for name, tensor, dtype, shape in (("t", t, torch.int64, (rows,)), ("loss", loss, torch.float32, (rows,)),
                                       ("grad", grad, torch.bfloat16, (rows, cols))):
        if tensor.dtype != dtype or tuple(tensor.shape) != shape or not tensor.is_contiguous():
            bad.append(f"{name} is {tuple(tensor.shape)} {tensor.dtype}, not a contiguous {dtype} {shape}")
        elif tensor.device != x.device:
            bad.append(f"{name} is on {tensor.device}, not x's {x.device}")
    if x.data_ptr() % 16 or grad.data_ptr() % 16:
        bad.append("x or grad is not 16-byte aligned")
    return "; ".join(bad) or None


def _cuda_grad(name):
    """The CUDA rung: kwiki_ce_cluster from the artifact's library on torch's current stream, writing the loss and
    the gradient; the _inplace twin copies the logits into the gradient's buffer first (in the time) and has the
    kernel read and overwrite that buffer, as Liger-Kernel's kernel does. Operands it is not built for are refused
    here, by name, before any CUDA call."""
    import ctypes
    import os

    import torch

    lib = ctypes.CDLL(os.environ["KWIKI_CUDA_LIBRARY"])
    fn = lib.kwiki_ce_cluster
    fn.argtypes = [*[ctypes.c_void_p] * 4, *[ctypes.c_int] * 4, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def grad(i, o):
        x, t, loss, g = i["x"], i["t"], o["loss"], o["grad"]
        why = cuda_operands_error(x, t, loss, g)
        if why:
            raise ValueError(f"cross_entropy_bf16_sm90a (cross_entropy.py): {name}: {why}")
        src = x
        if name == "cuda_grad_cluster_inplace":
            g.copy_(x)
            src = g
        err = fn(src.data_ptr(), t.data_ptr(), loss.data_ptr(), g.data_ptr(), x.shape[0], x.shape[1], IGNORE_INDEX,
                 int(i.get("clusters", 0)), torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"cross_entropy_bf16_sm90a (ce_cluster.cu): kwiki_ce_cluster({name}) returned {err} "
                               "(-1: operands refused, -3: no cluster of this size fits, else a CUDA error code)")
    return grad
# /kwiki:rung cuda_grad_cluster


_DEVICE = {}  # torch.device -> (SM count, L2 bytes)


# kwiki:rung triton_grad_l2
def grad_launch(rows, cols, device):
    """triton_grad_l2's (programs, warps, chunk): programs enough to fill the SMs, few enough that the rows they
    hold between their two reads fit half the L2 (the other half for the gradient's writes passing through).
    With pass 2 walking back, a program holds on average half its row, cols bytes of bf16: programs an SM =
    L2 / (2 x SMs x cols bytes), from 1 to GRAD_PROGRAMS_PER_SM (on an H200, 50 MiB and 132 SMs: 1 at 128256
    columns, 3 at 32000). One program an SM gets 16 warps and 16384-element chunks (32 elements a thread, as
    every rung), so that an SM still has 16 warps and 32 KiB of loads in flight. On a CPU (the interpreter),
    2 programs of 8 warps walk the rows in turn."""
    import torch

    if device.type != "cuda":
        return min(rows, 2), 8, BLOCK
    if device not in _DEVICE:  # read once: the launch's host time is inside the timed call's bracket
        props = torch.cuda.get_device_properties(device)
        _DEVICE[device] = (props.multi_processor_count, props.L2_cache_size)
    sms, l2 = _DEVICE[device]
    per_sm = max(1, min(GRAD_PROGRAMS_PER_SM, l2 // (2 * sms * cols)))
    warps = 16 if per_sm == 1 else 8
    return min(rows, per_sm * sms), warps, 1024 * warps
# /kwiki:rung triton_grad_l2


def _liger():
    try:
        from liger_kernel.ops.cross_entropy import MAX_FUSED_SIZE, liger_cross_entropy_kernel
    except ImportError as exc:
        raise RuntimeError(f"Liger-Kernel is not installed here ({exc}); pip install liger-kernel==0.8.5") from exc
    import triton

    def liger(i, o):
        x, t, loss = i["x"], i["t"], o["loss"]
        rows, v = x.shape
        grads = "grad" in o  # ce_grad: HAS_GRADIENTS, the kernel overwrites what it reads with the gradient
        if grads:
            o["grad"].copy_(x)  # inside the call: inputs must stay as they were (the time includes this copy)
            loss.zero_()  # an ignored row's loss is never stored (the wrapper's buffer starts as zeros)
        src = o["grad"] if grads else x
        liger_cross_entropy_kernel[(rows,)](
            X_ptr=src, X_stride=src.stride(-2), Y_ptr=t, Y_stride=t.stride(-1), weight_ptr=None,
            loss_ptr=loss, z_loss_ptr=None, loss_stride=loss.stride(-1),
            token_accuracy_ptr=None, token_accuracy_stride=0, predicted_tokens_ptr=None, predicted_tokens_stride=0,
            n_cols=v, n_non_ignore=rows, sum_non_ignore_weight=rows, weight_sum=0.0, ignore_index=IGNORE_INDEX,
            lse_square_scale=0.0, label_smoothing=0.0, reduction="sum" if grads else "none", softcap=None,
            RETURN_Z_LOSS=False, RETURN_TOKEN_ACCURACY=False, RETURN_PREDICTED_TOKENS=False,
            BLOCK_SIZE=min(MAX_FUSED_SIZE, triton.next_power_of_2(v)), HAS_WEIGHT=False, HAS_SOFTCAPPING=False,
            HAS_GRADIENTS=grads, num_warps=LIGER_WARPS)
    return liger
