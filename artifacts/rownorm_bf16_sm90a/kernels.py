"""Triton kernels of rownorm_bf16_sm90a (imported by rownorm.py's load(), never at import time of rownorm.py).

One row of the hidden dimension is one reduction: every kernel keeps a whole row (or ROWS rows) in
registers, reads it once from HBM, reduces in fp32 and writes the result once, so its bytes are the
compulsory ones and its speed is a fraction of the copy roof.
"""

import triton
import triton.language as tl

FP8_MAX: tl.constexpr = tl.constexpr(448.0)  # the largest finite float8 e4m3 value (a constexpr: a kernel reads it)


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """The roof's second measure beside cudaMemcpyAsync: a Triton copy of the same bytes."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, rows, H, eps, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    """ROWS rows per program, each row whole in registers: y = x * rsqrt(mean(x^2) + eps) * w, fp32 math."""
    r = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, BLOCK)[None, :]
    mask = (r < rows) & (c < H)
    x = tl.load(x_ptr + r * H + c, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, 1) / H + eps)
    w = tl.load(w_ptr + c, mask=c < H, other=0.0).to(tl.float32)
    y = x * rstd[:, None] * w
    tl.store(y_ptr + r * H + c, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def add_rmsnorm_fp8_kernel(x_ptr, res_ptr, w_ptr, r_ptr, q_ptr, s_ptr, H, eps, BLOCK: tl.constexpr):
    """The fusion inference engines ship: r = x + residual (written, bf16, the next layer's residual);
    y = rmsnorm(r) * w; one fp32 scale per token, amax(|y|) / 448; q = y / scale in float8 e4m3.
    One program per row: the row is read once and never leaves registers between the three steps."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < H
    x = tl.load(x_ptr + row * H + c, mask=mask, other=0.0).to(tl.float32)
    res = tl.load(res_ptr + row * H + c, mask=mask, other=0.0).to(tl.float32)
    r = (x + res).to(r_ptr.dtype.element_ty)
    tl.store(r_ptr + row * H + c, r, mask=mask)
    rf = r.to(tl.float32)  # normalise what the next layer will read, rounded as it is stored
    rstd = tl.rsqrt(tl.sum(rf * rf, 0) / H + eps)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    y = rf * rstd * w
    scale = tl.maximum(tl.max(tl.abs(y), 0), 1e-12) / FP8_MAX
    tl.store(q_ptr + row * H + c, (y / scale).to(q_ptr.dtype.element_ty), mask=mask)
    tl.store(s_ptr + row, scale)


@triton.jit
def layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, H, eps, BLOCK: tl.constexpr):
    """One row per program: y = (x - mean) * rsqrt(var + eps) * w + b, two moments from one read."""
    row = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, BLOCK)
    mask = c < H
    x = tl.load(x_ptr + row * H + c, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, 0) / H
    d = tl.where(mask, x - mean, 0.0)
    rstd = tl.rsqrt(tl.sum(d * d, 0) / H + eps)
    w = tl.load(w_ptr + c, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + c, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * H + c, (d * rstd * w + b).to(y_ptr.dtype.element_ty), mask=mask)
