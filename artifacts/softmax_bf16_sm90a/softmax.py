"""softmax_bf16_sm90a: a row softmax in bf16 (fp32 math) from 1k to 256k elements a row, against the copy roof,
PyTorch eager, torch.compile and Liger-Kernel.

Every shape holds the same 64 Mi elements (128 MiB in, 128 MiB out), so one copy of that tensor is the roof
of all of them. Rung 1 keeps a whole row in one program's registers (one read, one write) up to 32768
elements; rung 2 splits every row over programs of CHUNK elements in two kernels (partial max and sum, then
merge by the online-softmax rule and normalize), which reads x twice and runs at any length with as many
programs as the tensor has chunks. Baselines: torch.softmax (eager), torch.compile of it (default mode,
dynamic=False, compiled in the untimed check call, only at the claimed lengths), Liger-Kernel's softmax
(rows up to 65536: its block-size rule refuses longer ones).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

ELEMENTS = 1 << 26
LENGTHS = [1024, 4096, 16384, 32768, 65536, 131072, 262144]
COMPILED = {4096, 32768, 262144}  # the claimed lengths: a compile costs 10-40 s
OFF_TILE = {"rows": 1001, "cols": 5000}  # no power-of-two block divides it: the masks are checked
ROW_MAX = 32768  # rung 1's row lives in registers (128 KiB of fp32 values, half an SM's); longer rows spill
LIGER_MAX = 65536  # Liger-Kernel's calculate_settings raises past this
CHUNK = 4096

FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)
GRID = [
    {"op": "copy", "rows": ELEMENTS // 1024, "cols": 1024, "dtype": "bfloat16"},
    *({"op": "softmax", "rows": ELEMENTS // n, "cols": n, "dtype": "bfloat16"} for n in LENGTHS),
    {"op": "softmax", **OFF_TILE, "dtype": "bfloat16"},
]
VARIANTS = ["torch_copy", "triton_copy", "torch_eager", "torch_compile", "liger", "triton_row", "triton_split"]
TOLERANCES = {
    "bfloat16": (1e-6, 2.0 ** -7, "probabilities in bf16 from fp32 arithmetic: one rounding (2^-9 relative) and "
                 "the fp32 exp and sum, against an fp64 reference; 1e-6 absolute for the smallest probabilities"),
}


def applies(name, params):
    if params["op"] == "copy" or name.endswith("_copy"):
        return params["op"] == "copy" and name.endswith("_copy")
    n = params["cols"]
    return {"torch_compile": n in COMPILED and params["rows"] * n == ELEMENTS,
            "liger": n <= LIGER_MAX, "triton_row": n <= ROW_MAX}.get(name, True)


def make_inputs(params, seed, device):
    import torch

    if params["op"] not in ("copy", "softmax") or params["rows"] <= 0 or params["cols"] <= 0:
        raise ValueError(f"softmax: params {params}: op must be copy or softmax, rows and cols positive")
    g = torch.Generator(device=device).manual_seed(seed)
    return {"x": torch.randn(params["rows"], params["cols"], generator=g, device=device).to(torch.bfloat16)}


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
