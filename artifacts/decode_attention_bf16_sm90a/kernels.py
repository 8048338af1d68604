"""Triton kernels of decode_attention_bf16_sm90a (imported by decode.py's load(), never at import time of decode.py).

One query token per sequence. A program owns one (sequence, KV head) pair and the GROUP query heads that read that
KV head, stacked as the rows of one [BLOCK_H, D] tile (rows past GROUP are zeros and never stored): every K and V
tile it loads serves all of them (grouped-query reuse). Scores live in the log2 domain (scaled by log2(e)/sqrt(D)),
so the online softmax uses exp2.
"""

import triton
import triton.language as tl


@triton.jit
def read_kernel(x_ptr, s_ptr, n, BLOCK: tl.constexpr):
    """The read roof: every program reads BLOCK bf16 elements and writes their fp32 sum (one float per program)."""
    pid = tl.program_id(0).to(tl.int64)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(s_ptr + pid, tl.sum(x.to(tl.float32), 0))


# kwiki:rung triton_paged
@triton.jit
def _kv_rows(table_ptr, b, kvh, n, nmask, L, pages_per_seq, HKV: tl.constexpr, PAGE: tl.constexpr,
             PAGED: tl.constexpr):
    """The row (token slot) of the KV cache that holds token n of sequence b, KV head kvh. Contiguous: the cache is
    [B, HKV, L, D]. Paged: the cache is [pages, HKV, PAGE, D] and the sequence's block table names its pages."""
    if PAGED:
        page = tl.load(table_ptr + b * pages_per_seq + n // PAGE, mask=nmask, other=0).to(tl.int64)
        return (page * HKV + kvh) * PAGE + n % PAGE
    else:
        return (b * HKV + kvh) * L + n
# /kwiki:rung triton_paged


# kwiki:rung triton_gqa
@triton.jit(do_not_specialize=["L", "chunk", "splits", "pages_per_seq"])
def decode_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, opart_ptr, lse_ptr, L, chunk, splits,
                  pages_per_seq, scale_log2, HKV: tl.constexpr, GROUP: tl.constexpr, BLOCK_H: tl.constexpr,
                  BLOCK_N: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr, PAGED: tl.constexpr,
                  SPLIT: tl.constexpr):
    """Program (b * HKV + kvh, s) attends tokens [s * chunk, min(L, (s + 1) * chunk)) of sequence b for the GROUP
    query heads of KV head kvh (a paged cache: L is the sequence's own length, read from lens). SPLIT = False (one
    split, chunk = L): it writes the bf16 output. SPLIT = True: it writes its normalised fp32 partial output and its
    log2-sum-exp (an empty split, possible past a paged sequence's end: a zero output and -inf), which
    combine_kernel merges."""
    bh = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    b = bh // HKV
    kvh = bh % HKV
    h = tl.arange(0, BLOCK_H)
    d = tl.arange(0, D)
    hmask = h < GROUP
    qrow = bh * GROUP + h  # q is [B, HKV * GROUP, D]: row b * HQ + kvh * GROUP + h
    q = tl.load(q_ptr + qrow[:, None] * D + d[None, :], mask=hmask[:, None], other=0.0)
    if PAGED:
        L = tl.load(lens_ptr + b)
    lo = s * chunk
    hi = tl.minimum(lo + chunk, L)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        nmask = n < hi
        rows = _kv_rows(table_ptr, b, kvh, n, nmask, L, pages_per_seq, HKV, PAGE, PAGED)
        k = tl.load(k_ptr + rows[:, None] * D + d[None, :], mask=nmask[:, None], other=0.0)
        sc = tl.dot(q, tl.trans(k)) * scale_log2
        sc = tl.where(nmask[None, :], sc, float("-inf"))
        m_new = tl.maximum(m, tl.max(sc, 1))  # finite: every tile holds at least one token below hi
        p = tl.exp2(sc - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l_sum = l_sum * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + rows[:, None] * D + d[None, :], mask=nmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    if SPLIT:
        part = qrow * splits + s  # partials are [B * HQ, splits, D] and [B * HQ, splits]
        some = l_sum > 0
        o = tl.where(some[:, None], acc / tl.where(some, l_sum, 1.0)[:, None], 0.0)
        tl.store(opart_ptr + part[:, None] * D + d[None, :], o, mask=hmask[:, None])
        tl.store(lse_ptr + part, tl.where(some, m + tl.log2(l_sum), float("-inf")), mask=hmask)
    else:
        o = acc / l_sum[:, None]
        tl.store(out_ptr + qrow[:, None] * D + d[None, :], o.to(out_ptr.dtype.element_ty), mask=hmask[:, None])
# /kwiki:rung triton_gqa


# kwiki:rung triton_split
@triton.jit(do_not_specialize=["splits"])
def combine_kernel(opart_ptr, lse_ptr, out_ptr, splits, D: tl.constexpr, SB: tl.constexpr):
    """One program per query row: merge its splits' partial outputs o_j (each normalised by its own sum) with
    weights 2^(lse_j - max lse), SB splits at a time by the same online rule, and write the bf16 output."""
    r = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, SB)
    d = tl.arange(0, D)
    mx = tl.max(tl.full([SB], float("-inf"), tl.float32), 0)
    w_sum = tl.max(tl.zeros([SB], tl.float32), 0)
    acc = tl.zeros([D], tl.float32)
    for j0 in range(0, splits, SB):
        jj = j0 + j
        jm = jj < splits
        lse = tl.load(lse_ptr + r * splits + jj, mask=jm, other=float("-inf"))
        mx_new = tl.maximum(mx, tl.max(lse, 0))
        w = tl.exp2(lse - mx_new)
        o = tl.load(opart_ptr + (r * splits + jj)[:, None] * D + d[None, :], mask=jm[:, None], other=0.0)
        c = tl.exp2(mx - mx_new)
        acc = acc * c + tl.sum(w[:, None] * o, 0)
        w_sum = w_sum * c + tl.sum(w, 0)
        mx = mx_new
    tl.store(out_ptr + r * D + d, (acc / w_sum).to(out_ptr.dtype.element_ty))
# /kwiki:rung triton_split
