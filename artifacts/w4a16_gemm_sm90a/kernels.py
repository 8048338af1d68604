"""Triton kernels of w4a16_gemm_sm90a (imported by w4a16_gemm.py's load(), never at import time of w4a16_gemm.py).

y[M, N] = x[M, K] @ W[N, K]^T with M small, computed transposed, acc[BN, BM] = W[BN, BK] @ x^T[BK, BM] (swap-AB), as
in decode_gemm_sm90a: the weight tile is the dot's left operand and the few rows of x ride its narrow side. With
QUANT, W arrives as int32 words of eight 4-bit weights (w4a16_gemm.py's pack) and one bf16 scale per group of BK
weights along K, and is turned into the bf16 operand in registers, between the load and tl.dot. M and N are not
specialized (do_not_specialize): M = 1 and M = 33 share one compiled kernel, and so do all N.
"""

import triton
import triton.language as tl


@triton.jit
def read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The read roof: every program sums its BLOCK elements in fp32 and writes one number."""
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(x, 0))


# kwiki:rung triton_w4a16
@triton.jit
def unpack_tile(words, BN: tl.constexpr, BK: tl.constexpr, PACK: tl.constexpr):
    """[BN, BK / PACK] int32 words -> [BN, BK] fp32 weights q = nibble - 8, exactly, with no int-to-float
    conversion: a nibble or-ed into the bits of the fp32 2^23 is the fp32 2^23 + nibble (the low mantissa bits
    count units there), and subtracting 2^23 + 8 in fp32 leaves q. Nibble i of word j is k = PACK * j + i."""
    shifts = tl.arange(0, PACK) * 4
    nib = (words[:, :, None] >> shifts[None, None, :]) & 0xF  # the mask also drops an arithmetic shift's sign bits
    q = (nib | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
    return tl.reshape(q, (BN, BK))
# /kwiki:rung triton_w4a16


# kwiki:rung triton_bf16_splitk
@triton.jit(do_not_specialize=["M", "N"])
def w4a16_gemm_kernel(x_ptr, w_ptr, scale_ptr, out_ptr, M, N, K, k_per_split,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, PACK: tl.constexpr,
                      QUANT: tl.constexpr, SCALE_ACC: tl.constexpr, PARTIAL: tl.constexpr):
    """One program: output columns [n0, n0 + BN) of rows [m0, m0 + BM), over K in [k0, k0 + k_per_split).

    k0 and k_per_split are multiples of BK, and with QUANT K is one too (BK is the quantization group), so every
    K step is whole and meets exactly one scale per output channel: no K mask, and no group cut by a split.
    QUANT: W is int32 [N, K / PACK] and scale bf16 [K / BK, N]. Each step unpacks the words to q in fp32, scales
    them (fp32, exact: a 4-bit q times a bf16 scale fits fp32's significand) and rounds once to bf16 for the dot,
    Marlin's order. SCALE_ACC (the ablation): q goes to the dot unscaled (exact in bf16) and the scale multiplies
    the group's fp32 product, BN x BM multiplies a step in place of BN x BK.
    PARTIAL: write the fp32 partial sum of this K range to out[pid_k, m, n] (split-K; reduce_kernel adds the
    ranges); otherwise write y[m, n] in out's dtype (bf16).
    """
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_m = pid_m * BM + tl.arange(0, BM)
    k0 = pid_k * k_per_split
    k_end = tl.minimum(k0 + k_per_split, K)
    offs_k = tl.arange(0, BK)
    n_ok = offs_n < N
    m_ok = offs_m < M
    x_cols = x_ptr + offs_m.to(tl.int64)[None, :] * K   # [1, BM]: x^T's columns are x's rows
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    if QUANT:
        offs_w = tl.arange(0, BK // PACK)
        w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * (K // PACK)   # [BN, 1] int32 words
        s_cols = scale_ptr + offs_n                                   # one group's scales are contiguous
        for k in range(k0, k_end, BK):
            words = tl.load(w_rows + (k // PACK + offs_w)[None, :], mask=n_ok[:, None], other=0)
            xt = tl.load(x_cols + (k + offs_k)[:, None], mask=m_ok[None, :], other=0.0)
            s = tl.load(s_cols + (k // BK) * N, mask=n_ok, other=0.0).to(tl.float32)
            q = unpack_tile(words, BN, BK, PACK)
            if SCALE_ACC:
                acc += tl.dot(q.to(tl.bfloat16), xt) * s[:, None]
            else:
                acc = tl.dot((q * s[:, None]).to(tl.bfloat16), xt, acc)
    else:
        w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * K
        for k in range(k0, k_end, BK):
            kk = k + offs_k
            k_ok = kk < k_end
            w = tl.load(w_rows + kk[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0.0)
            xt = tl.load(x_cols + kk[:, None], mask=k_ok[:, None] & m_ok[None, :], other=0.0)
            acc = tl.dot(w, xt, acc)
    mask = n_ok[:, None] & m_ok[None, :]
    if PARTIAL:
        dst = out_ptr + (pid_k * M + offs_m.to(tl.int64))[None, :] * N + offs_n[:, None]
        tl.store(dst, acc, mask=mask)
    else:
        dst = out_ptr + offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
        tl.store(dst, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit(do_not_specialize=["total", "splits"])
def reduce_kernel(part_ptr, y_ptr, total, splits, BLOCK: tl.constexpr):
    """Split-K's second kernel: y = sum over the splits of the fp32 partials, in a fixed order (deterministic)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < total
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, splits):
        acc += tl.load(part_ptr + s * total + offs, mask=ok, other=0.0)
    tl.store(y_ptr + offs, acc.to(y_ptr.dtype.element_ty), mask=ok)
# /kwiki:rung triton_bf16_splitk
