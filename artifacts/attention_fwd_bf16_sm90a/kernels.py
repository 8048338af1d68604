"""Triton kernels of attention_fwd_bf16_sm90a (imported by attention.py's load(), never at import time of
attention.py).

One program owns BLOCK_M query rows of one (batch, head): it keeps their Q tile, an fp32 output accumulator and
two fp32 numbers a row (the running maximum m and the running sum l of exponentials), and walks the K/V rows in
blocks of BLOCK_N. For every block: scores S = Q K^T (tensor cores, fp32 accumulation), in the base-2 domain
(the softmax scale times log2(e) folded into one multiply, so exp2 replaces exp); the new maximum; the
rescale factor alpha = 2^(m_old - m_new) applied to l and to the accumulator; P = 2^(S - m_new) rounded to
bf16 and accumulated as P V. The output is the accumulator over l, rounded to bf16, written once, and with
STORE_LSE (the timed rungs) each row's natural-log log-sum-exp, (m + log2 l) ln 2, in fp32. Grouped-query
attention: query head h reads K and V head h // group where they lie (no expanded copy).

SPLIT (rung 2) changes only where the masks are computed: without it every block goes through the masked
body (keys past the sequence end, and the causal triangle); with it the blocks that need no mask (all keys
below the query block's first row when causal; every full block otherwise) run an unmasked loop, and only
the blocks that cross the diagonal (causal: BLOCK_M / BLOCK_N of them) or the partial last block (a sequence
that is not a multiple of BLOCK_N) run the masked one. Causal programs never visit a block wholly above the
diagonal.
"""

import triton
import triton.language as tl


# kwiki:rung triton_fa2
@triton.jit
def _attend(acc, m_i, l_i, q, k_base, v_base, stride_kn, stride_vn, rows, lo, hi, seq, qk_scale,
            BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr):
    """The online-softmax update over the key blocks [lo, hi): returns (acc, m_i, l_i). With MASK, keys at or
    past `seq` (and, with CAUSAL, keys after a row's own position) get a score of -inf."""
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_ptrs = k_base + cols[:, None] * stride_kn + offs_d[None, :]
        v_ptrs = v_base + cols[:, None] * stride_vn + offs_d[None, :]
        if MASK:
            k = tl.load(k_ptrs, mask=cols[:, None] < seq, other=0.0)
        else:
            k = tl.load(k_ptrs)
        s = tl.dot(q, tl.trans(k)) * qk_scale  # [BLOCK_M, BLOCK_N], log2 domain
        if MASK:
            keep = cols[None, :] < seq
            if CAUSAL:
                keep = keep & (rows[:, None] >= cols[None, :])
            s = tl.where(keep, s, float("-inf"))
        # every row has a finite maximum from the first block on: block 0 holds key 0, which every row sees
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        if MASK:
            v = tl.load(v_ptrs, mask=cols[:, None] < seq, other=0.0)
        else:
            v = tl.load(v_ptrs)
        acc = acc * alpha[:, None]
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit(do_not_specialize=["seq", "heads", "group"])  # one compile for every shape of a head dim (1000 is not 16k)
def attn_fwd_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, seq, heads, group,
                    stride_qb, stride_qh, stride_qs, stride_kb, stride_kh, stride_ks,
                    stride_vb, stride_vh, stride_vs, stride_ob, stride_oh, stride_os, qk_scale,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
                    CAUSAL: tl.constexpr, SPLIT: tl.constexpr, STORE_LSE: tl.constexpr):
    """Grid (cdiv(seq, BLOCK_M), batch * heads). Q and O are [batch, heads, seq, HEAD_DIM], K and V [batch,
    heads / group, seq, HEAD_DIM], each with a unit stride along HEAD_DIM: query head h reads KV head h // group
    (grouped-query attention; group 1 is plain multi-head attention). qk_scale is the softmax scale times log2(e).
    With STORE_LSE, the natural-log log-sum-exp of every row's scaled scores goes to lse_ptr ([batch * heads, seq]
    fp32)."""
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    n_m = tl.cdiv(seq, BLOCK_M)
    # causal: the last query blocks see the most keys; launch them first so the short ones fill the tail
    start_m = (n_m - 1 - tl.program_id(0)) if CAUSAL else tl.program_id(0)
    bh = tl.program_id(1)
    b = (bh // heads).to(tl.int64)
    h = (bh % heads).to(tl.int64)
    kv = h // group  # the KV head this query head shares with the group's others, read in place
    q_base = q_ptr + b * stride_qb + h * stride_qh
    k_base = k_ptr + b * stride_kb + kv * stride_kh
    v_base = v_ptr + b * stride_vb + kv * stride_vh
    o_base = o_ptr + b * stride_ob + h * stride_oh

    first = start_m * BLOCK_M
    rows = first + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + rows[:, None] * stride_qs + offs_d[None, :], mask=rows[:, None] < seq, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    hi = tl.minimum(seq, first + BLOCK_M) if CAUSAL else seq  # causal: no block past the diagonal one
    # /kwiki:rung triton_fa2
    # kwiki:rung triton_fa2_split
    if SPLIT:
        # blocks no mask touches: every key below the first row of this query block (causal), or every full
        # block (not causal); BLOCK_M % BLOCK_N == 0 keeps `first` on a block boundary
        free = first if CAUSAL else (seq // BLOCK_N) * BLOCK_N
        acc, m_i, l_i = _attend(acc, m_i, l_i, q, k_base, v_base, stride_ks, stride_vs, rows, 0, free, seq,
                                qk_scale, BLOCK_N, HEAD_DIM, False, CAUSAL)
        acc, m_i, l_i = _attend(acc, m_i, l_i, q, k_base, v_base, stride_ks, stride_vs, rows, free, hi, seq,
                                qk_scale, BLOCK_N, HEAD_DIM, True, CAUSAL)
    # /kwiki:rung triton_fa2_split
    else:
        acc, m_i, l_i = _attend(acc, m_i, l_i, q, k_base, v_base, stride_ks, stride_vs, rows, 0, hi, seq,
                                qk_scale, BLOCK_N, HEAD_DIM, True, CAUSAL)

    out = acc / l_i[:, None]
    tl.store(o_base + rows[:, None] * stride_os + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=rows[:, None] < seq)
    if STORE_LSE:  # natural log: log2 of the base-2 sum, times ln 2
        tl.store(lse_ptr + bh.to(tl.int64) * seq + rows, (m_i + tl.math.log2(l_i)) * 0.6931471805599453,
                 mask=rows < seq)
