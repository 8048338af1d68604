"""Triton kernels of cross_entropy_bf16_sm90a (imported by cross_entropy.py's load(), never at import time).

Every cross-entropy kernel works in base 2: it scales a logit by log2(e) once, so each exponential is one
ex2 and the log-sum-exp comes back to base e with one multiplication by ln(2) at the end of a row.
The gradient kernel (ce_grad_kernel) reads each row twice: the online log-sum-exp first, then the softmax
minus the target's one-hot, written in bf16; its constexpr flags are the gradient ladder's rungs.
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


# kwiki:rung triton_grad
@triton.jit
def ce_grad_kernel(x_ptr, t_ptr, loss_ptr, g_ptr, V, rows, scale, IGNORE: tl.constexpr, BLOCK: tl.constexpr,
                   REVERSE: tl.constexpr, HINTS: tl.constexpr):
    """Loss and gradient of each row: rows pid, pid + programs, ... (one row per program where the grid has as
    many programs as rows). Pass 1 is ce_online_kernel's online log-sum-exp over BLOCK-element chunks (lse in
    base 2); the loss is lse ln 2 - x[t]. Pass 2 reads the row again and writes
    g = (2^(x log2 e - lse) - [j == t]) * scale in g's dtype, the target's 1 subtracted in fp32 before the
    rounding (softmax(x_t) - 1 cancels when x_t dominates). A row whose target is IGNORE reads nothing: its
    gradient row and loss are zeros. x_ptr may be g_ptr (in place, as Liger-Kernel runs): x[t] is read before
    pass 2 and every element is loaded before the same thread stores over it. REVERSE walks pass 2 from the
    row's last chunk (the chunks pass 1 read last are the likeliest still in L2); HINTS asks L2 to keep pass 1's
    lines (evict_last) and to drop pass 2's reads and the gradient's writes first (evict_first)."""
    c = tl.arange(0, BLOCK)
    last = (V - 1) // BLOCK * BLOCK  # the first column of the row's last chunk
    for row in range(tl.program_id(0).to(tl.int64), rows, tl.num_programs(0)):  # an int64 row: row * V > 2^31
        base = row * V
        t = tl.load(t_ptr + row)
        if t == IGNORE:
            for start in range(0, V, BLOCK):
                _write(g_ptr + base + start + c, tl.zeros([BLOCK], dtype=tl.float32), start + c < V, HINTS)
            tl.store(loss_ptr + row, 0.0)
        else:
            m = -float("inf")
            d = tl.zeros([BLOCK], dtype=tl.float32)
            for start in range(0, V, BLOCK):
                x = _first_read(x_ptr + base + start + c, start + c < V, HINTS).to(tl.float32) * LOG2E
                m_new = tl.maximum(m, tl.max(x, 0))
                d = d * tl.exp2(m - m_new) + tl.exp2(x - m_new)
                m = m_new
            lse = m + tl.log2(tl.sum(d, 0))
            tl.store(loss_ptr + row, lse * LN2 - tl.load(x_ptr + base + t).to(tl.float32))
            for k in range(0, V, BLOCK):
                if REVERSE:
                    start = last - k
                else:
                    start = k
                cols = start + c
                x = _second_read(x_ptr + base + cols, cols < V, HINTS).to(tl.float32)
                p = tl.exp2(x * LOG2E - lse)
                _write(g_ptr + base + cols, tl.where(cols == t, p - 1.0, p) * scale, cols < V, HINTS)
# /kwiki:rung triton_grad


# kwiki:rung triton_grad_hints
@triton.jit
def _first_read(ptrs, mask, HINTS: tl.constexpr):
    """Pass 1's chunk (-inf past the row): with HINTS, its L2 lines are the last to be evicted."""
    if HINTS:
        x = tl.load(ptrs, mask=mask, other=-float("inf"), eviction_policy="evict_last")
    else:
        x = tl.load(ptrs, mask=mask, other=-float("inf"))
    return x


@triton.jit
def _second_read(ptrs, mask, HINTS: tl.constexpr):
    """Pass 2's chunk: its last use, so with HINTS its lines go first."""
    if HINTS:
        x = tl.load(ptrs, mask=mask, other=0.0, eviction_policy="evict_first")
    else:
        x = tl.load(ptrs, mask=mask, other=0.0)
    return x


@triton.jit
def _write(ptrs, g, mask, HINTS: tl.constexpr):
    """The gradient, rounded to the output's dtype: never read again here, so with HINTS its lines go first."""
    if HINTS:
        tl.store(ptrs, g.to(ptrs.dtype.element_ty), mask=mask, eviction_policy="evict_first")
    else:
        tl.store(ptrs, g.to(ptrs.dtype.element_ty), mask=mask)
# /kwiki:rung triton_grad_hints
