"""Triton kernels of softmax_bf16_sm90a (imported by softmax.py's load(), never at import time of softmax.py)."""

import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """The roof's second measure beside cudaMemcpyAsync: a Triton copy of the same bytes."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


# kwiki:rung triton_row
@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """One program per row, the whole row in registers: one read, max and sum in fp32, one write."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n + c, mask=c < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * n + c, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=c < n)
# /kwiki:rung triton_row


# kwiki:rung triton_split
@triton.jit
def softmax_stats_kernel(x_ptr, m_ptr, d_ptr, n, chunks, CHUNK: tl.constexpr):
    """Pass 1 of a row split over `chunks` programs: each chunk's max and sum of exp(x - max), in fp32."""
    pid = tl.program_id(0).to(tl.int64)
    row, k = pid // chunks, pid % chunks
    c = k * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * n + c, mask=c < n, other=-float("inf")).to(tl.float32)
    m = tl.max(x, 0)
    tl.store(m_ptr + pid, m)
    tl.store(d_ptr + pid, tl.sum(tl.exp(x - m), 0))


@triton.jit
def softmax_apply_kernel(x_ptr, y_ptr, m_ptr, d_ptr, n, chunks, CHUNK: tl.constexpr, CHUNKS: tl.constexpr):
    """Pass 2: merge the row's (max, sum) pairs by the online-softmax rule d = sum d_k * exp(m_k - m), then read
    the chunk again and write exp(x - m) / d."""
    pid = tl.program_id(0).to(tl.int64)
    row, k = pid // chunks, pid % chunks
    j = tl.arange(0, CHUNKS)
    ms = tl.load(m_ptr + row * chunks + j, mask=j < chunks, other=-float("inf"))
    ds = tl.load(d_ptr + row * chunks + j, mask=j < chunks, other=0.0)
    m = tl.max(ms, 0)
    d = tl.sum(ds * tl.exp(ms - m), 0)
    c = k * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * n + c, mask=c < n, other=-float("inf")).to(tl.float32)
    tl.store(y_ptr + row * n + c, (tl.exp(x - m) / d).to(y_ptr.dtype.element_ty), mask=c < n)
# /kwiki:rung triton_split
