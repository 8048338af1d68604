"""Triton kernels of decode_attention_bf16_sm90a (imported by decode.py's load(), never at import time of decode.py).

QLEN query tokens per sequence (1 in decode; 4 for speculative decoding, the new tokens being the cache's last QLEN,
each seeing the cache up to itself). A program owns one (sequence, KV head) pair and the GROUP query heads that read
that KV head, their QLEN tokens stacked as the GROUP * QLEN rows of one [BLOCK_H, D] tile (row r: head r // QLEN,
token r % QLEN; rows past GROUP * QLEN are zeros and never stored): every K and V tile it loads serves all of them
(grouped-query reuse). KV_SHARE > 1 undoes the reuse (the rung below it): a program owns one query head (GROUP 1)
and KV_SHARE programs, one a query head of the group, each read their KV head's cache. Scores live in the log2
domain (scaled by log2(e)/sqrt(D)), so the online softmax uses exp2.
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


# kwiki:rung triton_paged64
@triton.jit
def _page_rows(table_ptr, b, kvh, start, pages_per_seq, HKV: tl.constexpr, PAGE: tl.constexpr,
               BLOCK_N: tl.constexpr):
    """The rows of the tile of BLOCK_N tokens that starts at token `start` (a multiple of BLOCK_N) when a page holds
    whole tiles (PAGE a multiple of BLOCK_N): the tile lies in one page, so one scalar load of the block table finds
    it, and its rows are BLOCK_N consecutive slots of that page (one contiguous run of BLOCK_N * D elements)."""
    page = tl.load(table_ptr + b * pages_per_seq + start // PAGE).to(tl.int64)
    return (page * HKV + kvh) * PAGE + start % PAGE + tl.arange(0, BLOCK_N)
# /kwiki:rung triton_paged64


# kwiki:rung triton_gqa
@triton.jit(do_not_specialize=["L", "chunk", "splits", "pages_per_seq"])
def decode_kernel(q_ptr, k_ptr, v_ptr, table_ptr, lens_ptr, out_ptr, opart_ptr, lse_ptr, count_ptr, L, chunk,
                  splits, pages_per_seq, scale_log2, HKV: tl.constexpr, GROUP: tl.constexpr, QLEN: tl.constexpr,
                  BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr, PAGE: tl.constexpr,
                  PAGED: tl.constexpr, PAGE_TILE: tl.constexpr, SPLIT: tl.constexpr, FUSED: tl.constexpr,
                  SB: tl.constexpr, KV_SHARE: tl.constexpr):
    """Program (b * HKV + kvh, s) attends tokens [s * chunk, min(L, (s + 1) * chunk)) of sequence b for the GROUP
    query heads of KV head kvh (KV_SHARE > 1: program (b * HKV * KV_SHARE + query head, s), GROUP 1) and their
    QLEN tokens (a paged cache: L is the sequence's own length, read from lens; token t of QLEN sees tokens up to
    L - QLEN + t). SPLIT = False (one split, chunk = L): it writes the bf16
    output. SPLIT = True: it writes its normalised fp32 partial output and its log2-sum-exp per row (a row with no
    token in the split, possible past a paged sequence's end or, with QLEN > 1, in a last split its token does not
    reach: a zero output and -inf), which combine_kernel merges. PAGE_TILE: PAGE is a multiple of BLOCK_N and a
    tile's rows come from _page_rows (one table load a tile) instead of _kv_rows (one a token). FUSED (with SPLIT):
    no combine kernel; the last program of the pair to finish merges its splits (_combine_if_last, count_ptr one
    int32 a pair, zero before the launch and left zero after it), SB splits at a time."""
    ROWS: tl.constexpr = GROUP * QLEN
    bh = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    b = bh // (HKV * KV_SHARE)
    kvh = bh % (HKV * KV_SHARE) // KV_SHARE
    r = tl.arange(0, BLOCK_H)
    d = tl.arange(0, D)
    rmask = r < ROWS
    qrow = bh * ROWS + r  # q is [B, HKV * GROUP, QLEN, D]: row (b * HQ + kvh * GROUP + r // QLEN) * QLEN + r % QLEN
    q = tl.load(q_ptr + qrow[:, None] * D + d[None, :], mask=rmask[:, None], other=0.0)
    if PAGED:
        L = tl.load(lens_ptr + b)
    lo = s * chunk
    hi = tl.minimum(lo + chunk, L)
    last = L - QLEN + r % QLEN  # the last token each row sees (causal among the QLEN new tokens)
    m = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_sum = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    for start in range(lo, hi, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        nmask = n < hi
        if PAGE_TILE:
            rows = _page_rows(table_ptr, b, kvh, start, pages_per_seq, HKV, PAGE, BLOCK_N)
        else:
            rows = _kv_rows(table_ptr, b, kvh, n, nmask, L, pages_per_seq, HKV, PAGE, PAGED)
        k = tl.load(k_ptr + rows[:, None] * D + d[None, :], mask=nmask[:, None], other=0.0)
        sc = tl.dot(q, tl.trans(k)) * scale_log2
        if QLEN > 1:
            sc = tl.where(nmask[None, :] & (n[None, :] <= last[:, None]), sc, float("-inf"))
            m_new = tl.maximum(m, tl.max(sc, 1))  # -inf in a row whose token sees none of this tile yet
            m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        else:
            sc = tl.where(nmask[None, :], sc, float("-inf"))
            m_new = tl.maximum(m, tl.max(sc, 1))  # finite: every tile holds at least one token below hi
            m_ref = m_new
        p = tl.exp2(sc - m_ref[:, None])
        alpha = tl.exp2(m - m_ref)
        l_sum = l_sum * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + rows[:, None] * D + d[None, :], mask=nmask[:, None], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    if SPLIT:
        part = qrow * splits + s  # partials are [B * HQ * QLEN, splits, D] and [B * HQ * QLEN, splits]
        some = l_sum > 0
        o = tl.where(some[:, None], acc / tl.where(some, l_sum, 1.0)[:, None], 0.0)
        tl.store(opart_ptr + part[:, None] * D + d[None, :], o, mask=rmask[:, None])
        tl.store(lse_ptr + part, tl.where(some, m + tl.log2(tl.where(some, l_sum, 1.0)), float("-inf")), mask=rmask)
        if FUSED:
            _combine_if_last(count_ptr, opart_ptr, lse_ptr, out_ptr, bh, splits, ROWS, D, SB)
    else:
        o = acc / l_sum[:, None]
        tl.store(out_ptr + qrow[:, None] * D + d[None, :], o.to(out_ptr.dtype.element_ty), mask=rmask[:, None])
# /kwiki:rung triton_gqa


# kwiki:rung triton_split
@triton.jit
def _merge_row(opart_ptr, lse_ptr, out_ptr, r, splits, D: tl.constexpr, SB: tl.constexpr):
    """Merge query row r's splits' partial outputs o_j (each normalised by its own sum) with weights
    2^(lse_j - max lse), SB splits at a time by the same online rule, and write the row's bf16 output. A split that
    saw no token of the row has lse_j = -inf and weight 0; the row's first splits may all be such."""
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
        mx_ref = tl.where(mx_new == float("-inf"), 0.0, mx_new)  # no split with a token yet: weights 0, not NaN
        w = tl.exp2(lse - mx_ref)
        o = tl.load(opart_ptr + (r * splits + jj)[:, None] * D + d[None, :], mask=jm[:, None], other=0.0)
        c = tl.exp2(mx - mx_ref)
        acc = acc * c + tl.sum(w[:, None] * o, 0)
        w_sum = w_sum * c + tl.sum(w, 0)
        mx = mx_new
    tl.store(out_ptr + r * D + d, (acc / w_sum).to(out_ptr.dtype.element_ty))


@triton.jit(do_not_specialize=["splits"])
def combine_kernel(opart_ptr, lse_ptr, out_ptr, splits, D: tl.constexpr, SB: tl.constexpr):
    """One program per query row: _merge_row of that row."""
    _merge_row(opart_ptr, lse_ptr, out_ptr, tl.program_id(0).to(tl.int64), splits, D, SB)
# /kwiki:rung triton_split


# kwiki:rung triton_split_fused
@triton.jit
def _combine_if_last(count_ptr, opart_ptr, lse_ptr, out_ptr, bh, splits, ROWS: tl.constexpr, D: tl.constexpr,
                     SB: tl.constexpr):
    """The combine without a second launch: each program of pair bh counts itself in count_ptr[bh] once its
    partials are stored, and the program that counts last merges the pair's ROWS rows (they are then all written)
    and sets the count back to 0 for the next launch. The partials of the other programs are read after the count,
    so the count orders them: a CTA barrier puts every thread's partial stores before the count (one thread does a
    scalar atomic), the count is an acquire-release atomic at GPU scope (its release publishes this program's
    partials, its acquire makes the earlier programs' visible to the one that counts last), and Triton broadcasts
    the count's result through shared memory behind a barrier, so every thread's loads come after the acquire.
    The pattern of CUTLASS's split-K semaphore, without the wait: no program ever waits for another."""
    tl.debug_barrier()
    done = tl.atomic_add(count_ptr + bh, 1, sem="acq_rel", scope="gpu")
    if done == splits - 1:
        for rr in range(ROWS):
            _merge_row(opart_ptr, lse_ptr, out_ptr, bh * ROWS + rr, splits, D, SB)
        tl.atomic_xchg(count_ptr + bh, 0, sem="relaxed", scope="gpu")
# /kwiki:rung triton_split_fused
