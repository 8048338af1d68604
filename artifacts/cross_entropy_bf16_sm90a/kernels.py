"""Triton kernels of cross_entropy_bf16_sm90a (imported by cross_entropy.py's load(), never at import time).

Every cross-entropy kernel works in base 2: it scales a logit by log2(e) once, so each exponential is one
ex2 and the log-sum-exp comes back to base e with one multiplication by ln(2) at the end of a row.
"""

import triton
import triton.language as tl

LOG2E: tl.constexpr = tl.constexpr(1.4426950408889634)
LN2: tl.constexpr = tl.constexpr(0.6931471805599453)


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """The copy roof's second measure beside cudaMemcpyAsync: BLOCK elements per program, read then written."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def read_kernel(w_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """The read roof: the tensor's bytes as 32-bit words, BLOCK words (64 KiB at 16384) per program, read once;
    each program writes the maximum of its words (exact, any order), 4 bytes per BLOCK words read."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    w = tl.load(w_ptr + offs, mask=offs < n, other=-2147483648)
    tl.store(y_ptr + tl.program_id(0), tl.max(w, 0))


# kwiki:rung triton_online
@triton.jit
def ce_online_kernel(x_ptr, t_ptr, loss_ptr, V, BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
    """One program per row, one read of the row in BLOCK-element chunks. Running state: the row's maximum m
    so far (a scalar, in base 2) and a vector of partial sums d, every lane's sum of 2^(x - m). When a chunk
    raises the maximum, the old sums are rescaled by 2^(m_old - m_new) (the online-softmax rule) before the
    chunk's terms are added. At the end lse = (m + log2(sum d)) * ln 2 and the loss is lse - x[target],
    the target's logit read by one scalar load. PREFETCH issues the next chunk's load before the current
    chunk's arithmetic, so a load is in flight while the program computes."""
    row = tl.program_id(0).to(tl.int64)
    base = x_ptr + row * V
    c = tl.arange(0, BLOCK)
    m = -float("inf")
    d = tl.zeros([BLOCK], dtype=tl.float32)
    if PREFETCH:
        nxt = tl.load(base + c, mask=c < V, other=-float("inf"))
        for start in range(BLOCK, V + BLOCK, BLOCK):  # processes the chunk at start - BLOCK
            cur = nxt
            nxt = tl.load(base + start + c, mask=start + c < V, other=-float("inf"))  # past V: masked, no traffic
            x = cur.to(tl.float32) * LOG2E
            m_new = tl.maximum(m, tl.max(x, 0))
            d = d * tl.exp2(m - m_new) + tl.exp2(x - m_new)
            m = m_new
    else:
        for start in range(0, V, BLOCK):
            x = tl.load(base + start + c, mask=start + c < V, other=-float("inf")).to(tl.float32) * LOG2E
            m_new = tl.maximum(m, tl.max(x, 0))
            d = d * tl.exp2(m - m_new) + tl.exp2(x - m_new)
            m = m_new
    lse = (m + tl.log2(tl.sum(d, 0))) * LN2
    t = tl.load(t_ptr + row)
    tl.store(loss_ptr + row, lse - tl.load(base + t).to(tl.float32))
# /kwiki:rung triton_online


# kwiki:rung triton_split
@triton.jit
def ce_partial_kernel(x_ptr, m_ptr, d_ptr, V, chunks, CHUNK: tl.constexpr):
    """Pass 1 of a row split over `chunks` programs: each chunk's maximum m_k (base 2) and sum of 2^(x - m_k)."""
    pid = tl.program_id(0).to(tl.int64)
    row, k = pid // chunks, pid % chunks
    c = k * CHUNK + tl.arange(0, CHUNK)
    x = tl.load(x_ptr + row * V + c, mask=c < V, other=-float("inf")).to(tl.float32) * LOG2E
    m = tl.max(x, 0)
    tl.store(m_ptr + pid, m)
    tl.store(d_ptr + pid, tl.sum(tl.exp2(x - m), 0))


@triton.jit
def ce_merge_kernel(x_ptr, t_ptr, m_ptr, d_ptr, loss_ptr, V, chunks, CHUNKS: tl.constexpr):
    """Pass 2, one program per row: merge the row's (m_k, d_k) by the online-softmax rule,
    m = max m_k, d = sum d_k 2^(m_k - m), then loss = (m + log2 d) ln 2 - x[target]."""
    row = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, CHUNKS)
    ms = tl.load(m_ptr + row * chunks + j, mask=j < chunks, other=-float("inf"))
    ds = tl.load(d_ptr + row * chunks + j, mask=j < chunks, other=0.0)
    m = tl.max(ms, 0)
    d = tl.sum(ds * tl.exp2(ms - m), 0)
    t = tl.load(t_ptr + row)
    tl.store(loss_ptr + row, (m + tl.log2(d)) * LN2 - tl.load(x_ptr + row * V + t).to(tl.float32))
# /kwiki:rung triton_split
