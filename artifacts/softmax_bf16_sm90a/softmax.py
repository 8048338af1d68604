"""softmax_bf16_sm90a: a row softmax in bf16 (fp32 math) from 1k to 256k elements a row, against the copy roof,
PyTorch eager, torch.compile and Liger-Kernel.

Every shape holds the same 64 Mi elements (128 MiB in, 128 MiB out), so one copy of that tensor is the roof
of all of them. Rung 1 keeps a whole row in one program's registers (one read, one write) up to 32768
elements; rung 2 splits every row over programs of CHUNK elements in two kernels (partial max and sum, then
merge by the online-softmax rule and normalize), which reads x twice and runs at any length with as many
programs as the tensor has chunks; rung 3 (cuda_cluster: softmax_cluster.cu, built by kwiki into the library at
$KWIKI_CUDA_LIBRARY and called through ctypes on torch's current stream) holds each row in the shared memory of a
thread-block cluster, so it reads x once at every length from CLUSTER_MIN up (and at the off-tile shape).
Baselines: torch.softmax (eager), torch.compile of it (default mode, dynamic=False, compiled in the untimed check
call, only at the claimed lengths), Liger-Kernel's softmax (rows up to 65536: its block-size rule refuses longer
ones).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

ELEMENTS = 1 << 26
LENGTHS = [1024, 4096, 16384, 32768, 65536, 131072, 262144]
COMPILED = {4096, 32768, 262144}  # the claimed lengths: a compile costs 10-40 s
OFF_TILE = {"rows": 1001, "cols": 5000}  # no power-of-two block divides it: the masks are checked
ROW_MAX = 32768  # rung 1's row lives in registers (128 KiB of fp32 values, half an SM's); longer rows spill
LIGER_MAX = 65536  # Liger-Kernel's calculate_settings raises past this
CHUNK = 4096
CLUSTER_MIN = 16384  # rung 3 runs from here (32 KiB rows: one CTA's slice) up; shorter rows are rung 1's
CLUSTER_MAX = 65535  # rung 3's cap on its clusters (an input, "clusters", 0: as many as run at once)

FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)
GRID = [
    {"op": "copy", "rows": ELEMENTS // 1024, "cols": 1024, "dtype": "bfloat16"},
    *({"op": "softmax", "rows": ELEMENTS // n, "cols": n, "dtype": "bfloat16"} for n in LENGTHS),
    {"op": "softmax", **OFF_TILE, "dtype": "bfloat16"},
]
VARIANTS = ["torch_copy", "triton_copy", "torch_eager", "torch_compile", "liger", "triton_row", "triton_split",
            "cuda_cluster"]
TOLERANCES = {
    "bfloat16": (1e-6, 2.0 ** -7, "probabilities in bf16 from fp32 arithmetic: one rounding (2^-9 relative) and "
                 "the fp32 exp and sum, against an fp64 reference; 1e-6 absolute for the smallest probabilities"),
}


def applies(name, params):
    if params["op"] == "copy" or name.endswith("_copy"):
        return params["op"] == "copy" and name.endswith("_copy")
    n = params["cols"]
    off_tile = params["rows"] == OFF_TILE["rows"] and n == OFF_TILE["cols"]
    return {"torch_compile": n in COMPILED and params["rows"] * n == ELEMENTS,
            "liger": n <= LIGER_MAX, "triton_row": n <= ROW_MAX,
            "cuda_cluster": n % 8 == 0 and (n >= CLUSTER_MIN or off_tile or params.get("clusters", 0) > 0)
            }.get(name, True)


def make_inputs(params, seed, device):
    import torch

    if params["op"] not in ("copy", "softmax") or params["rows"] <= 0 or params["cols"] <= 0:
        raise ValueError(f"softmax: params {params}: op must be copy or softmax, rows and cols positive")
    clusters = params.get("clusters", 0)
    if isinstance(clusters, bool) or not isinstance(clusters, int) or not 0 <= clusters <= CLUSTER_MAX:
        raise ValueError(f"softmax: params {params}: clusters must be 0 (as many as run at once) or a cap on rung 3's "
                         f"clusters, up to {CLUSTER_MAX}")
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(params["rows"], params["cols"], generator=g, device=device).to(torch.bfloat16)
    return {"x": x, **({"clusters": clusters} if clusters else {})}  # the sanitizer's cap (rung 3 only)


def make_outputs(params, inputs):
    import torch

    return {"y": torch.empty_like(inputs["x"])}


def reference(params, inputs):
    import torch

    x = inputs["x"]
    return {"y": x.clone() if params["op"] == "copy" else torch.softmax(x.double(), -1)}


def work(params):
    return {"bytes": float(4 * params["rows"] * params["cols"]), "bytes_level": "dram"}  # one read, one write


def _plain(t):
    """A library's `y.view(shape)` of its own fresh output, same shape and strides, as the tensor it views."""
    while t._base is not None and t._base.shape == t.shape and t._base.stride() == t.stride():
        t = t._base
    return t


def load(name):
    if name == "torch_copy":
        def torch_copy(i, o):
            o["y"].copy_(i["x"])
        return torch_copy
    import torch

    if name in ("torch_eager", "torch_compile"):
        fn = torch.compile(lambda x: torch.softmax(x, -1), dynamic=False) if name == "torch_compile" else \
            (lambda x: torch.softmax(x, -1))
        return lambda i, o: {"y": fn(i["x"])}
    if name == "liger":
        try:
            from liger_kernel.ops.softmax import _softmax_forward
        except ImportError as exc:
            raise RuntimeError(f"Liger-Kernel is not installed here ({exc}); pip install liger-kernel") from exc
        return lambda i, o: {"y": _plain(_softmax_forward(i["x"])[0])}
    if name == "cuda_cluster":
        return _cuda_cluster()
    import kernels
    import triton

    def launch(i, o):
        x, y = i["x"], o["y"]
        rows, n = x.shape
        if name == "triton_copy":
            kernels.copy_kernel[(triton.cdiv(x.numel(), 4096),)](x, y, x.numel(), BLOCK=4096, num_warps=8)
        elif name == "triton_row":
            # kwiki:rung triton_row
            block = triton.next_power_of_2(n)
            warps = min(32, max(4, block // 1024))  # an H200 sweep: 4 at 4096 (16 is 20% slower), 32 at 32768
            kernels.softmax_row_kernel[(rows,)](x, y, n, BLOCK=block, num_warps=warps)
            # /kwiki:rung triton_row
        else:
            # kwiki:rung triton_split
            chunk = min(CHUNK, triton.next_power_of_2(n))
            chunks = triton.cdiv(n, chunk)
            m = torch.empty(rows * chunks, dtype=torch.float32, device=x.device)
            d = torch.empty_like(m)
            kernels.softmax_stats_kernel[(rows * chunks,)](x, m, d, n, chunks, CHUNK=chunk, num_warps=4)
            kernels.softmax_apply_kernel[(rows * chunks,)](x, y, m, d, n, chunks, CHUNK=chunk,
                                                           CHUNKS=triton.next_power_of_2(chunks), num_warps=4)
            # /kwiki:rung triton_split
    return launch


# kwiki:rung cuda_cluster
def cuda_operands_error(x, y):
    """Why softmax_cluster.cu cannot take these tensors (None if it can): x and y one [rows, cols] bf16 shape,
    contiguous, on one device, 16-byte aligned, cols a multiple of 8 (16-byte vectors) and at most 16 slices of
    32 KiB, rows at most 65535."""
    import torch

    bad = []
    for name, t in (("x", x), ("y", y)):
        if t.dim() != 2 or t.dtype != torch.bfloat16 or not t.is_contiguous() or t.data_ptr() % 16:
            bad.append(f"{name} is {tuple(t.shape)} {t.dtype}, not a contiguous, 16-byte aligned bf16 [rows, cols]")
    if bad:
        return "; ".join(bad)
    rows, cols = x.shape
    if tuple(y.shape) != (rows, cols) or y.device != x.device:
        bad.append(f"y is {tuple(y.shape)} on {y.device}, not x's {(rows, cols)} on {x.device}")
    if cols % 8 or cols > 16 * 2048 * 8:
        bad.append(f"cols {cols} is not a multiple of 8 up to {16 * 2048 * 8}")
    if rows > 65535:
        bad.append(f"rows {rows} is above 65535")
    return "; ".join(bad) or None


def _cuda_cluster():
    """Rung 3: kwiki_softmax_cluster from the artifact's library on torch's current stream. Operands it is not built
    for are refused here, by name, before any CUDA call."""
    import ctypes
    import os

    import torch

    lib = ctypes.CDLL(os.environ["KWIKI_CUDA_LIBRARY"])
    fn = lib.kwiki_softmax_cluster
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int] * 3, ctypes.c_void_p]
    fn.restype = ctypes.c_int

    def launch(i, o):
        x, y = i["x"], o["y"]
        why = cuda_operands_error(x, y)
        if why:
            raise ValueError(f"softmax_bf16_sm90a (softmax.py): cuda_cluster: {why}")
        err = fn(x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1], int(i.get("clusters", 0)),
                 torch.cuda.current_stream().cuda_stream)
        if err:
            raise RuntimeError(f"softmax_bf16_sm90a (softmax_cluster.cu): kwiki_softmax_cluster returned {err} (-1: "
                               "operands refused, -3: no cluster of this size fits, else a CUDA error code)")
    return launch
# /kwiki:rung cuda_cluster
