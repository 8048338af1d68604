"""triton_gemm_bf16_sm90a: Triton bf16 GEMMs against cuBLAS (torch.matmul), C = A @ Bt^T, fp32 accumulation.

Rungs: 0 cuBLAS through torch.matmul (the baseline); 1 a kernel of plain pointer tiles, one program per
tile in grouped order (no TMA; the block-pointer spelling is gone from newer Triton); 2 a persistent kernel,
one program per SM, TMA descriptors built on the device (tl.make_tensor_descriptor), grouped order. (A rung
asking for Triton's warp specialization of the tile loop, tl.range(warp_specialize=True), is gone: Triton 3.6
emits the same PTX for it on sm_90.) Tiles 128x256x64, 8 warps, 3 stages, GROUP_M 8.
Run by kwiki's harness (artifacts/common/kwiki_harness.py); torch and Triton are imported inside functions.
"""

GRID = [{"m": s, "n": s, "k": s, "dtype": "bfloat16"} for s in (4096, 8192)]
VARIANTS = ["cublas", "triton_tiled", "triton_tma_persistent"]
TOLERANCES = {
    "bfloat16": (0.06, 2.0 ** -7, "bf16 output (one ulp is 2^-7 relative) after fp32 accumulation over K <= 8192 "
                                  "in another order than the fp32 reference; atol covers sums that cancel near 0"),
}
CONFIG = {"BM": 128, "BN": 256, "BK": 64, "GROUP_M": 8, "num_warps": 8, "num_stages": 3}


def make_inputs(params, seed, device):
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    a = (torch.rand(params["m"], params["k"], generator=g, device=device) * 2 - 1).to(torch.bfloat16)
    bt = (torch.rand(params["n"], params["k"], generator=g, device=device) * 2 - 1).to(torch.bfloat16)
    return {"a": a, "bt": bt}


def make_outputs(params, inputs):
    import torch

    return {"c": torch.empty(params["m"], params["n"], dtype=torch.bfloat16, device=inputs["a"].device)}


def reference(params, inputs):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False  # a true fp32 reference, not TF32
    return {"c": inputs["a"].float() @ inputs["bt"].float().t()}


def work(params):
    return {"flops": 2.0 * params["m"] * params["n"] * params["k"], "flops_dtype": "bf16",
            "bytes": 2.0 * (params["m"] * params["k"] + params["n"] * params["k"] + params["m"] * params["n"])}


def load(name):
    import torch

    if name == "cublas":
        def cublas(i, o):
            torch.matmul(i["a"], i["bt"].t(), out=o["c"])
        return cublas

    import kernels
    import triton
    import triton.language as tl

    cfg = CONFIG
    if name == "triton_tiled":
        def tiled(i, o):
            a, bt, c = i["a"], i["bt"], o["c"]
            (m, k), n = a.shape, bt.shape[0]
            grid = (triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"]),)
            kernels.matmul_tiled[grid](a, bt, c, m, n, k, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"],
                                       GROUP_M=cfg["GROUP_M"], num_warps=cfg["num_warps"],
                                       num_stages=cfg["num_stages"])
        return tiled
    if not hasattr(tl, "make_tensor_descriptor") or not hasattr(triton, "set_allocator"):
        raise RuntimeError(f"Triton {triton.__version__} has no device-side TMA descriptors "
                           "(tl.make_tensor_descriptor, triton.set_allocator)")

    def scratch(size, alignment, stream):  # where the kernel writes its TMA descriptors
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(scratch)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count

    def persistent(i, o):
        a, bt, c = i["a"], i["bt"], o["c"]
        (m, k), n = a.shape, bt.shape[0]
        tiles = triton.cdiv(m, cfg["BM"]) * triton.cdiv(n, cfg["BN"])
        kernels.matmul_tma_persistent[(min(sms, tiles),)](
            a, bt, c, m, n, k, BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"], NUM_SMS=sms,
            num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return persistent
