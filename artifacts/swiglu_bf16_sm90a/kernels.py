"""Triton kernel of swiglu_bf16_sm90a (imported by swiglu_bf16_sm90a.py's load(), never when kwiki imports it)."""

import triton
import triton.language as tl


@triton.jit
def swiglu_kernel(a_ptr, b_ptr, c_ptr, n, BLOCK: tl.constexpr):
    """c = silu(a) * b over one block of BLOCK elements of the flattened tensors, in fp32, rounded once: the rows
    do not matter to an elementwise op, so the grid is as fine as the data (16-byte accesses, 4 warps)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask).to(tl.float32)
    tl.store(c_ptr + offs, (a * tl.sigmoid(a) * b).to(c_ptr.dtype.element_ty), mask=mask)
