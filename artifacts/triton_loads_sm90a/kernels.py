"""Triton kernels of triton_loads_sm90a (imported by loads.py's load(), never at import time of loads.py)."""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """One tile of BLOCK elements per program: BLOCK / (32 * num_warps) consecutive elements per thread,
    which Triton issues as 16-byte vector loads and stores (n is specialised as a multiple of 16)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def _xor(a, b):
    return a ^ b


@triton.jit
def read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """A read stream: the XOR of every 32-bit word (exact and order-free, so any schedule checks bit for
    bit), one atomic per program."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0)
    tl.atomic_xor(out_ptr, tl.reduce(x, 0, _xor))
