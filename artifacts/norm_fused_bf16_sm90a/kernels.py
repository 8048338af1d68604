"""Triton kernels of norm_fused_bf16_sm90a (imported by norm_fused.py's load(), never when kwiki imports the
module).

The pre-norm block's normalization: r = x + residual is the next layer's residual (written, bf16) and the
normalized r goes to the next GEMM. One program owns one row of the hidden dimension and keeps it in
registers from its load to its store: x and the residual are read once, r and the output written once, the
statistics reduced in fp32 between them. Nothing is staged in shared memory beyond the reductions' scratch,
nothing is read twice, so the bytes moved are the compulsory ones and the kernel's speed is a fraction of
the copy roof.

Loads of x and the residual are marked evict_first (each byte is used once; let it leave L2 first) and the
weight and bias evict_last (every program reads them: they should stay in L2).
"""

import triton
import triton.language as tl

E4M3_MAX: tl.constexpr = tl.constexpr(448.0)  # the largest finite float8 e4m3fn value


# kwiki:rung triton
@triton.jit
def _residual_row(x_ptr, res_ptr, r_ptr, row, H, BLOCK: tl.constexpr):
    """Adds one row of x and the residual in fp32, stores the sum rounded to r's dtype (bf16), and returns
    that rounded sum in fp32 with the lanes past H zero: the normalization sees exactly what the next layer
    will read back from r. Also returns the column offsets and their mask for the caller's stores."""
    cols = tl.arange(0, BLOCK)
    mask = cols < H
    offs = row * H + cols
    x = tl.load(x_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    res = tl.load(res_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    r = (x.to(tl.float32) + res.to(tl.float32)).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + offs, r, mask=mask)
    return r.to(tl.float32), offs, cols, mask


@triton.jit
def add_rmsnorm_kernel(x_ptr, res_ptr, w_ptr, y_ptr, r_ptr, H, eps, BLOCK: tl.constexpr):
    """r = x + residual; y = r * rsqrt(mean(r^2) + eps) * w. Lanes past H hold 0 and add nothing to the
    sum of squares, which is divided by the true H."""
    row = tl.program_id(0).to(tl.int64)
    r, offs, cols, mask = _residual_row(x_ptr, res_ptr, r_ptr, row, H, BLOCK)
    rstd = tl.rsqrt(tl.sum(r * r, 0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + offs, (r * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_layernorm_kernel(x_ptr, res_ptr, w_ptr, b_ptr, y_ptr, r_ptr, H, eps, BLOCK: tl.constexpr):
    """r = x + residual; y = (r - mean) * rsqrt(var + eps) * w + b, both moments from the registers: the
    variance is the mean of the centred squares (two reductions over registers, no second read), which
    does not cancel as E[r^2] - E[r]^2 would. The centred lanes past H are forced to 0."""
    row = tl.program_id(0).to(tl.int64)
    r, offs, cols, mask = _residual_row(x_ptr, res_ptr, r_ptr, row, H, BLOCK)
    mean = tl.sum(r, 0) / H
    d = tl.where(mask, r - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, 0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    tl.store(y_ptr + offs, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_rmsnorm_fp8_kernel(x_ptr, res_ptr, w_ptr, q_ptr, s_ptr, r_ptr, H, eps, BLOCK: tl.constexpr):
    """r = x + residual; y = rmsnorm(r) * w kept in fp32 (never stored); one scale per row,
    s = max(amax|y|, 1e-12) / 448; q = y / s in float8 e4m3 (clamped to +-448 so a quotient that rounds a
    hair past 448 in fp32 cannot leave the format's range). The amax is a third reduction over the same
    registers: the quantization costs no extra read of y, which is the whole point of fusing it."""
    row = tl.program_id(0).to(tl.int64)
    r, offs, cols, mask = _residual_row(x_ptr, res_ptr, r_ptr, row, H, BLOCK)
    rstd = tl.rsqrt(tl.sum(r * r, 0) / H + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    y = r * rstd * w
    scale = tl.maximum(tl.max(tl.abs(y), 0), 1e-12) / E4M3_MAX
    q = tl.minimum(tl.maximum(y / scale, -E4M3_MAX), E4M3_MAX)
    tl.store(q_ptr + offs, q.to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)
# /kwiki:rung triton
