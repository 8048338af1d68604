"""Physical peaks of the GPUs kwiki measures on: what no honest record can exceed.

Three levels of bytes and one of arithmetic, each a bound derived from a published figure:

dram  the memory bandwidth of the board, from NVIDIA's datasheet of the GPU model (table below).
smem  shared memory: 32 banks of 4 bytes each per clock per SM (the CUDA C++ Programming Guide,
      "Shared Memory" of compute capability 5.x and later, which every later generation keeps:
      https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#shared-memory-5-x),
      so 128 B/clk/SM x SM count x the maximum SM clock. 33.4 TB/s on an H200 at 1980 MHz.
l2    NVIDIA publishes no L2 bandwidth. Every byte an SM takes from (or gives to) the L2 passes
      its 128 B/clk L1/shared-memory data path, so the same 128 B/clk/SM x SMs x clock bounds it.
      A loose bound (honest L2 streams on Hopper reach roughly a third of it), but a real one:
      a record whose L2 bytes beat it moved bytes no SM could have taken in.
flops dense tensor-core (or FMA) rate per SM per clock, per architecture and dtype, x SM count x
      the maximum SM clock NVML reports (a kernel cannot beat that clock).

A GPU model missing from the DRAM table, or a GPU whose SM count or clock NVML did not give,
leaves that level ungated (`None`), and the gate says so; it never guesses.
"""

from __future__ import annotations

from dataclasses import dataclass

from kwiki.results.gpu import Gpu

LEVELS = ("dram", "l2", "smem")
# shared memory: 32 banks x 4 bytes per clock per SM (the Programming Guide, above)
SMEM_BYTES_PER_CLK_PER_SM = 128

# DRAM bandwidth in TB/s per GPU model; NVML names are matched by the first pattern contained in
# the lower-cased name, so the more specific patterns come first.
DRAM_TB_PER_S: list[tuple[str, float, str]] = [
    # GH200 with 144 GB HBM3e: 4.9 TB/s; the 96 GB HBM3 part: 4 TB/s. Without the memory size in the
    # NVML name, the larger figure bounds both ('gh200' before 'h200'). https://www.nvidia.com/en-us/data-center/grace-hopper-superchip/
    ("gh200", 4.9, "NVIDIA GH200 Grace Hopper Superchip datasheet"),
    # H200 SXM and H200 NVL: 4.8 TB/s HBM3e. https://www.nvidia.com/en-us/data-center/h200/
    ("h200", 4.8, "NVIDIA H200 datasheet"),
    # H100 PCIe: 2.0 TB/s (its product brief PB-11133-001: "greater than 2,000 GBps").
    # https://www.nvidia.com/content/dam/en-zz/Solutions/gtcs22/data-center/h100/PB-11133-001_v01.pdf
    ("h100 pcie", 2.0, "NVIDIA H100 PCIe product brief"),
    # H100 NVL: 3.9 TB/s per GPU; H100 SXM ('NVIDIA H100 80GB HBM3'): 3.35 TB/s.
    # https://www.nvidia.com/en-us/data-center/h100/
    ("h100 nvl", 3.9, "NVIDIA H100 datasheet"),
    ("h100", 3.35, "NVIDIA H100 datasheet"),
    # A100: 80GB SXM 2,039 GB/s, 80GB PCIe 1,935 GB/s, 40GB (SXM and PCIe) 1,555 GB/s.
    # https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
    ("a100-sxm4-80gb", 2.039, "NVIDIA A100 datasheet"),
    ("a100 80gb pcie", 1.935, "NVIDIA A100 datasheet"),
    ("a100-pcie-80gb", 1.935, "NVIDIA A100 datasheet"),
    ("a100", 1.555, "NVIDIA A100 datasheet"),
    # B200: 8 TB/s HBM3e per GPU (DGX B200: 64 TB/s over 8 GPUs). https://www.nvidia.com/en-us/data-center/dgx-b200/
    ("b200", 8.0, "NVIDIA DGX B200 datasheet"),
]

# Dense FLOP per clock per SM (an FMA counts two), per compute capability and dtype.
# sm_90 (H100/H200): the H100 architecture whitepaper's peak table (989.4 dense bf16 TFLOP/s at
#   132 SMs x 1830 MHz = 4096 FLOP/clk/SM; tf32 494.7 -> 2048; fp8 1978.9 -> 8192; fp32 FMA 66.9 at
#   1980 MHz -> 256). https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper
# sm_80 (A100): the Ampere whitepaper (312 dense bf16 TFLOP/s at 108 SMs x 1410 MHz = 2048;
#   tf32 156 -> 1024; int8 624 TOPS -> 4096; fp32 19.5 -> 128).
#   https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf
# sm_100 (B200): twice Hopper's dense tensor rate per SM for bf16 and fp8 (8192 and 16384), fp4
#   twice fp8; fp32 FMA as Hopper (128 lanes). https://resources.nvidia.com/en-us-blackwell-architecture
FLOP_PER_CLK_PER_SM: dict[int, dict[str, int]] = {
    80: {"bf16": 2048, "fp16": 2048, "tf32": 1024, "int8": 4096, "fp32": 128},
    90: {"bf16": 4096, "fp16": 4096, "tf32": 2048, "fp8": 8192, "int8": 8192, "fp32": 256},
    100: {"bf16": 8192, "fp16": 8192, "fp8": 16384, "fp4": 32768, "fp32": 256},
}

# spellings of a dtype in records' params -> the rate table's name
DTYPES = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "f16": "fp16", "half": "fp16", "float16": "fp16",
    "tf32": "tf32",
    "fp8": "fp8", "e4m3": "fp8", "e5m2": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8",
    "fp4": "fp4", "nvfp4": "fp4", "e2m1": "fp4", "mxfp4": "fp4",
    "int8": "int8", "i8": "int8", "s8": "int8",
    "fp32": "fp32", "f32": "fp32", "float": "fp32", "float32": "fp32",
}


@dataclass(frozen=True)
class Peak:
    """One physical peak: its value in the unit of its level (TB/s for bytes, TFLOP/s for flops)."""

    value: float
    unit: str
    # where it comes from, for the gate's reason: 'NVIDIA H200 datasheet', '132 SMs x 1980 MHz x 4096 FLOP/clk'
    basis: str


def dram_peak(gpu: Gpu) -> Peak | None:
    name = gpu.name.lower()
    for pattern, tb_per_s, source in DRAM_TB_PER_S:
        if pattern in name:
            return Peak(tb_per_s, "TB/s", source)
    return None


def sm_path_peak(gpu: Gpu) -> Peak | None:
    """128 B/clk/SM x SMs x max SM clock: shared memory, and the loose bound on L2 bytes."""
    if not gpu.sm_count or not gpu.sm_mhz_max:
        return None
    tb_per_s = gpu.sm_count * gpu.sm_mhz_max * 1e6 * SMEM_BYTES_PER_CLK_PER_SM / 1e12
    return Peak(tb_per_s, "TB/s", f"{gpu.sm_count} SMs x {gpu.sm_mhz_max} MHz x {SMEM_BYTES_PER_CLK_PER_SM} B/clk")


def bytes_peak(gpu: Gpu, level: str) -> Peak | None:
    """The physical peak of bytes at `level` ('dram', 'l2', 'smem'), None where kwiki knows none."""
    return dram_peak(gpu) if level == "dram" else sm_path_peak(gpu)


def dtype_name(dtype: object) -> str | None:
    return DTYPES.get(str(dtype).lower()) if dtype is not None else None


def flops_peak(gpu: Gpu, dtype: str | None) -> tuple[Peak | None, str]:
    """The dense arithmetic peak of `dtype` on `gpu`, and a note saying which rate was used.

    An unknown or missing dtype takes the architecture's highest rate (the loosest bound: it can only
    let a cheat through, never fail an honest record)."""
    rates = FLOP_PER_CLK_PER_SM.get(gpu.cc)
    if rates is None:
        return None, f"no per-SM rates for {gpu.arch}"
    if not gpu.sm_count or not gpu.sm_mhz_max:
        return None, "NVML gave no SM count or maximum SM clock"
    name = dtype_name(dtype)
    if name in rates:
        note = name
    else:
        name = max(rates, key=lambda k: rates[k])
        note = (f"{name}, the highest rate of {gpu.arch} (dtype {dtype!r} has no rate)" if dtype is not None
                else f"{name}, the highest rate of {gpu.arch} (no dtype declared)")
    tflops = gpu.sm_count * gpu.sm_mhz_max * 1e6 * rates[name] / 1e12
    return Peak(tflops, "TFLOP/s", f"{gpu.sm_count} SMs x {gpu.sm_mhz_max} MHz x {rates[name]} FLOP/clk {name}"), note
