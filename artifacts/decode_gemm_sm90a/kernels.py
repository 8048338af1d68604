"""Triton kernels of decode_gemm_sm90a (imported by decode_gemm.py's load(), never at import time of decode_gemm.py).

y[M, N] = x[M, K] @ W[N, K]^T with M small. Every kernel computes the transposed product, acc[BN, BM] =
W[BN, BK] @ x^T[BK, BM] (swap-AB), so the weight tile, the large operand, is the left operand and the few rows
of x ride the dot's narrow side. M and N are not specialized (do_not_specialize): M = 1 and M = 33 share one
compiled kernel, and so do all N; K is, so the weight rows keep their 16-byte loads.
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


# kwiki:rung triton_bf16_tile
@triton.jit(do_not_specialize=["M", "N"])
def decode_gemm_kernel(x_ptr, w_ptr, scale_ptr, out_ptr, M, N, K, k_per_split,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       QUANT: tl.constexpr, VIA_FP32: tl.constexpr, PARTIAL: tl.constexpr):
    """One program: output columns [n0, n0 + BN) of rows [m0, m0 + BM), over K in [k0, k0 + k_per_split).

    QUANT: W is int8 with one bf16 scale per output channel (row of W). The int8 tile is converted to bf16 in
    registers (exact: |q| <= 127 fits bf16's 8-bit significand) and fed to the same bf16 dot; the scale does not
    depend on k, so it multiplies the fp32 accumulator once, after the loop.
    VIA_FP32: convert int8 to bf16 through fp32 instead of Triton's cast: the byte, zero-extended and xor-ed with
    0x4B000080, is the fp32 2^23 + (q + 128); subtracting 2^23 + 128 in fp32 leaves q exactly, and an fp32 that
    holds a small integer rounds to bf16 exactly (FasterTransformer's route, the bias done by the xor).
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
    w_rows = w_ptr + offs_n.to(tl.int64)[:, None] * K   # [BN, 1]
    x_cols = x_ptr + offs_m.to(tl.int64)[None, :] * K   # [1, BM]: x^T's columns are x's rows
    acc = tl.zeros((BN, BM), dtype=tl.float32)
    for k in range(k0, k_end, BK):
        kk = k + offs_k
        k_ok = kk < k_end
        w = tl.load(w_rows + kk[None, :], mask=n_ok[:, None] & k_ok[None, :], other=0)
        xt = tl.load(x_cols + kk[:, None], mask=k_ok[:, None] & m_ok[None, :], other=0.0)
        if QUANT:
            if VIA_FP32:
                bits = w.to(tl.uint8, bitcast=True).to(tl.int32) ^ 0x4B000080
                w = (bits.to(tl.float32, bitcast=True) - 8388736.0).to(tl.bfloat16)
            else:
                w = w.to(tl.bfloat16)
        acc = tl.dot(w, xt, acc)
    if QUANT:
        s = tl.load(scale_ptr + offs_n, mask=n_ok, other=0.0).to(tl.float32)
        acc = acc * s[:, None]
    mask = n_ok[:, None] & m_ok[None, :]
    if PARTIAL:
        dst = out_ptr + (pid_k * M + offs_m.to(tl.int64))[None, :] * N + offs_n[:, None]
        tl.store(dst, acc, mask=mask)
    else:
        dst = out_ptr + offs_m.to(tl.int64)[None, :] * N + offs_n[:, None]
        tl.store(dst, acc.to(out_ptr.dtype.element_ty), mask=mask)
# /kwiki:rung triton_bf16_tile


# kwiki:rung triton_bf16_splitk
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
