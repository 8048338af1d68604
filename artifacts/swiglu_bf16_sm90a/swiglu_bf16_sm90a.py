"""swiglu_bf16_sm90a: the SwiGLU gate of a transformer MLP, c = silu(a) * b in bf16, written from CONTRIBUTING's
Python recipe after Liger-Kernel's swiglu_forward (github.com/linkedin/Liger-Kernel, liger_kernel/ops/swiglu.py),
which runs beside it as a baseline.

a and b are the two halves of the gate/up projection's output (tokens x intermediate), c goes to the down
projection. An elementwise op: two reads and one write of each element, nothing else, so the roof is a
copy's speed over those bytes (a copy of a, timed in the same run, at the same element count).
Rungs: PyTorch eager (F.silu then a multiply: two kernels, the intermediate written and read again),
torch.compile of it (one fused kernel; compiled in the untimed check call, at the claimed shape only),
Liger-Kernel (one program per row), and this artifact's kernel (flat over all elements, 2048 a program).
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
Smoke-test on a CPU (the torch variants; Triton needs a GPU):
  python artifacts/common/kwiki_harness.py run artifacts/swiglu_bf16_sm90a/swiglu_bf16_sm90a.py --device cpu \
      --variants torch_eager
"""

CLAIMED = {"rows": 8192, "cols": 14336}  # Llama-3-8B's MLP width at 8192 tokens
OFF_TILE = {"rows": 1001, "cols": 5000}  # no 2048-element block divides it: the masked tail is checked
FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)
GRID = [
    {"op": "copy", **CLAIMED, "dtype": "bfloat16"},
    {"op": "swiglu", **CLAIMED, "dtype": "bfloat16"},
    {"op": "swiglu", "rows": 4096, "cols": 4096, "dtype": "bfloat16"},
    {"op": "swiglu", **OFF_TILE, "dtype": "bfloat16"},
]
VARIANTS = ["torch_copy", "torch_eager", "torch_compile", "liger", "triton_flat"]
TOLERANCES = {
    "bfloat16": (1e-3, 2.0 ** -7, "bf16 output of fp32 silu: one rounding of ours (2^-9 relative), two of Liger's "
                 "(silu(a) rounded to bf16 before the multiply) and of eager's, against fp64"),
}
BLOCK = 2048


def applies(name, params):
    if (params["op"] == "copy") != (name == "torch_copy"):
        return False
    return name != "torch_compile" or {k: params[k] for k in CLAIMED} == CLAIMED


def make_inputs(params, seed, device):
    import torch

    if params["op"] not in ("copy", "swiglu") or params["rows"] <= 0 or params["cols"] <= 0:
        raise ValueError(f"swiglu: params {params}: op is copy or swiglu, rows and cols positive")
    g = torch.Generator(device=device).manual_seed(seed)
    shape = (params["rows"], params["cols"])
    a = (torch.randn(shape, generator=g, device=device) * 2).to(torch.bfloat16)  # the gate, silu's whole range
    if params["op"] == "copy":
        return {"a": a}
    return {"a": a, "b": torch.randn(shape, generator=g, device=device).to(torch.bfloat16)}


def make_outputs(params, inputs):
    import torch

    return {"c": torch.empty_like(inputs["a"])}


def reference(params, inputs):
    import torch

    a = inputs["a"]
    if params["op"] == "copy":
        return {"c": a.clone()}
    ad = a.double()
    return {"c": ad * torch.sigmoid(ad) * inputs["b"].double()}


def work(params):
    n = params["rows"] * params["cols"]
    return {"bytes": float((4 if params["op"] == "copy" else 6) * n), "bytes_level": "dram"}


def _plain(t):
    """A library's `c.view(shape)` of its own fresh output, same shape and strides, as the tensor it views."""
    while t._base is not None and t._base.shape == t.shape and t._base.stride() == t.stride():
        t = t._base
    return t


def load(name):
    import torch

    if name == "torch_copy":
        def torch_copy(i, o):
            o["c"].copy_(i["a"])
        return torch_copy
    if name in ("torch_eager", "torch_compile"):
        def swiglu(a, b):
            return torch.nn.functional.silu(a) * b
        fn = torch.compile(swiglu, dynamic=False) if name == "torch_compile" else swiglu
        return lambda i, o: {"c": fn(i["a"], i["b"])}
    if name == "liger":
        try:
            from liger_kernel.ops.swiglu import swiglu_forward
        except ImportError as exc:
            raise RuntimeError(f"Liger-Kernel is not installed here ({exc}); pip install liger-kernel") from exc
        return lambda i, o: {"c": _plain(swiglu_forward(i["a"], i["b"])[2])}
    import kernels
    import triton

    def flat(i, o):
        a, b, c = i["a"], i["b"], o["c"]
        kernels.swiglu_kernel[(triton.cdiv(a.numel(), BLOCK),)](a, b, c, a.numel(), BLOCK=BLOCK, num_warps=4)
    return flat
