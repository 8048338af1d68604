"""Triton kernels of w4a16_gemm_sm90a (imported by w4a16_gemm.py's load(), never at import time of w4a16_gemm.py).

y[M, N] = x[M, K] @ W[N, K]^T with M small, computed transposed, acc[BN, BM] = W[BN, BK] @ x^T[BK, BM] (swap-AB), as
in decode_gemm_sm90a: the weight tile is the dot's left operand and the few rows of x ride its narrow side. With
QUANT, W arrives as int32 words of eight 4-bit weights (w4a16_gemm.py's pack) and one bf16 scale per group of BK
weights along K, and is turned into the bf16 operand in registers, between the load and tl.dot. M and N are not
specialized (do_not_specialize): M = 1 and M = 33 share one compiled kernel, and so do all N.

The unpack never reshapes. Nibble i of a [BN, 16] tile of words is a [BN, 16] tile of the weights k = 8j + i, so a
K step (one group) is eight dots of K = 16, each against the matching 16 rows of x^T, loaded with a stride of 8 (x
is a few KiB and stays in L1). The first version built the [BN, 128] tile from a [BN, 16, 8] one with tl.reshape;
in one tuning run on the H200 (2026-12-02) it took 1.9x as long at M = 1, and a version that loaded each word
eight times (a [BN, 128] gather) in place of the reshape 17x.
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
def nibble(words, i: tl.constexpr):
    """Nibble i of every word as q = nibble - 8 in fp32, exactly, with no int-to-float conversion: a nibble or-ed
    into the bits of the fp32 2^23 is the fp32 2^23 + nibble (the low mantissa bits count units there), and
    subtracting 2^23 + 8 in fp32 leaves q. The mask also drops an arithmetic shift's sign bits."""
    return (((words >> (4 * i)) & 0xF) | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
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
            s = tl.load(s_cols + (k // BK) * N, mask=n_ok, other=0.0).to(tl.float32)[:, None]
            group = tl.zeros((BN, BM), dtype=tl.float32)
            for i in tl.static_range(PACK):  # the weights k + 8j + i against x^T's rows k + 8j + i
                xt = tl.load(x_cols + (k + offs_w * PACK + i)[:, None], mask=m_ok[None, :], other=0.0)
                if SCALE_ACC:
                    group = tl.dot(nibble(words, i).to(tl.bfloat16), xt, group)
                else:
                    acc = tl.dot((nibble(words, i) * s).to(tl.bfloat16), xt, acc)
            if SCALE_ACC:
                acc += group * s
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


# kwiki:rung triton_w4a16_gemv
@triton.jit(do_not_specialize=["N"])
def w4a16_gemv_kernel(x_ptr, w_ptr, scale_ptr, out_ptr, N, K, k_per_split,
                      BN: tl.constexpr, BK: tl.constexpr, PACK: tl.constexpr, PARTIAL: tl.constexpr):
    """M = 1 without tensor cores: y[n] = sum over groups of s[g, n] * sum_k q[n, k] x[k], the products and the
    group's sum in fp32 FMAs (a dot would pad the one row of x to 16). One program: BN output channels over
    [k0, k0 + k_per_split); the nibble slices as in w4a16_gemm_kernel, each against x at a stride of 8. PARTIAL
    writes fp32 partial sums for reduce_kernel (split-K), else y in out's dtype."""
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_w = tl.arange(0, BK // PACK)
    n_ok = offs_n < N
    k0 = pid_k * k_per_split
    k_end = tl.minimum(k0 + k_per_split, K)
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * (K // PACK)
    acc = tl.zeros((BN,), dtype=tl.float32)
    for k in range(k0, k_end, BK):
        words = tl.load(w_rows + (k // PACK + offs_w)[None, :], mask=n_ok[:, None], other=0)
        s = tl.load(scale_ptr + (k // BK) * N + offs_n, mask=n_ok, other=0.0).to(tl.float32)
        group = tl.zeros((BN, BK // PACK), dtype=tl.float32)
        for i in tl.static_range(PACK):
            xv = tl.load(x_ptr + k + offs_w * PACK + i).to(tl.float32)
            group += nibble(words, i) * xv[None, :]
        acc += tl.sum(group, 1) * s
    if PARTIAL:
        tl.store(out_ptr + pid_k * N + offs_n, acc, mask=n_ok)
    else:
        tl.store(out_ptr + offs_n, acc.to(out_ptr.dtype.element_ty), mask=n_ok)
# /kwiki:rung triton_w4a16_gemv
