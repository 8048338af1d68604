"""triton_loads_sm90a: Triton's HBM copy and read streams beside the CUDA ladder (vector_loads_sm90a).

What Triton's two knobs do to bandwidth: BLOCK (elements per program, so bytes per thread with num_warps)
and num_warps, over a 4 GiB buffer as the CUDA ladder uses. Rung 0 is torch's copy_ (a device-to-device
cudaMemcpyAsync). Copies count bytes read plus written, reads the bytes read, as vector_loads_sm90a does.
The read kernel XORs every 32-bit word into one (exact, order-free), so its check is bit for bit.
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

BYTES = 4 << 30  # the CUDA ladder's --bytes=4294967296
SHAPES = [(1024, 4), (4096, 4), (4096, 8), (16384, 8), (16384, 16)]  # (BLOCK, num_warps)

FRESH_INPUTS = True  # memory-bound: new random inputs before every timed sample (protocol 3; the harness)
GRID = [{"op": "copy", "bytes": BYTES, "dtype": "float32"}, {"op": "read", "bytes": BYTES, "dtype": "int32"}]
VARIANTS = ["torch_copy",
            *(f"triton_copy_b{b}_w{w}" for b, w in SHAPES),
            *(f"triton_read_b{b}_w{w}" for b, w in SHAPES)]
TOLERANCES = {
    "float32": (0.0, 0.0, "a copy moves bits: the output must equal the input exactly"),
    "int32": (0.0, 0.0, "XOR of 32-bit words is exact and independent of the order of the reduction"),
}


def applies(name, params):
    return ("read" in name) == (params["op"] == "read")


def make_inputs(params, seed, device):
    import torch

    n = params["bytes"] // 4
    g = torch.Generator(device=device).manual_seed(seed)
    if params["op"] == "copy":
        return {"x": torch.rand(n, generator=g, device=device) + 0.5}  # never zero
    return {"x": torch.randint(-(1 << 31), (1 << 31) - 1, (n,), generator=g, device=device, dtype=torch.int32)}


def make_outputs(params, inputs):
    import torch

    x = inputs["x"]
    return {"y": torch.empty_like(x)} if params["op"] == "copy" else {"s": torch.empty(1, dtype=torch.int32,
                                                                                        device=x.device)}


def reference(params, inputs):
    x = inputs["x"]
    if params["op"] == "copy":
        return {"y": x.clone()}
    while x.numel() > 1:  # pairwise XOR halving
        x = _halve(x)
    return {"s": x.reshape(1)}


def _halve(x):
    h = x.numel() // 2
    y = x[:h] ^ x[h:2 * h]
    if x.numel() % 2:
        y[0] ^= x[-1]
    return y


def work(params):
    factor = 2 if params["op"] == "copy" else 1
    return {"bytes": float(factor * params["bytes"]), "bytes_level": "dram"}


def load(name):
    if name == "torch_copy":
        def torch_copy(i, o):
            o["y"].copy_(i["x"])
        return torch_copy
    import triton

    import kernels

    block, warps = (int(part[1:]) for part in name.split("_")[2:4])

    if name.startswith("triton_copy"):
        def copy(i, o):
            x, y = i["x"], o["y"]
            kernels.copy_kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block, num_warps=warps)
        return copy

    def read(i, o):
        x, s = i["x"], o["s"]
        s.zero_()  # the XOR starts from 0 (the harness poisons the output before every call)
        kernels.read_kernel[(triton.cdiv(x.numel(), block),)](x, s, x.numel(), BLOCK=block, num_warps=warps)
    return read
