"""Triton kernels of gemm_epilogue_sm90a: C = epilogue(A[M, K] @ Bt[N, K]^T) in bf16 with fp32 accumulation.
Imported by gemm_epilogue.py's load(), never at its import.

One persistent kernel, one program per SM walking the output tiles in grouped order, operands loaded by TMA
through descriptors built on the device (the mainloop of the Triton GEMM ladder's persistent rung). The epilogue
is chosen by a constexpr, so every rung compiles the same mainloop and differs only in what it does to the fp32
accumulator tile before it leaves the registers:

  EPILOGUE 0  store acc as bf16                                          (triton_plain)
  EPILOGUE 1  + bias[col], tanh-GELU, store bf16                         (triton_bias_gelu)
  EPILOGUE 2  + bias[col], tanh-GELU, + residual[row, col] (plain loads), store bf16, in two 128-column
              halves (triton_bias_gelu_residual)
  EPILOGUE 3  + bias[col], tanh-GELU, then e4m3 with one scale per 1 x 128 group of a row, the group scales
              stored [N/128, M], and one atomic max of |y| per program into the tensor's amax (triton_fp8_out)
"""

import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(0.7978845608028654)  # a global a kernel reads must be a constexpr
E4M3_MAX = tl.constexpr(448.0)  # the largest finite e4m3 value


@triton.jit
def _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M row tiles walk down one column of tiles before moving right, so the tiles
    that run together share A's and B's panels in L2."""
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    return first_pid_m + (tile_id % group_size_m), (tile_id % num_pid_in_group) // group_size_m


# kwiki:rung triton_bias_gelu
@triton.jit
def _bias_gelu(acc, bias_ptr, cols, N):
    """x = acc + bias (one bias per output column, a row vector broadcast down the tile), then GELU's tanh
    form, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), written as x * sigmoid(2u) =
    x / (1 + exp(-2u)): one exp and one division per element, all in fp32 registers. The exponent is capped at
    80 (exp(80) ~ 5.5e34, inside fp32's range), so x << 0 gives x / 5.5e34, about -1e-33 (GELU is about -0
    there), never an overflow to inf."""
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    x = acc + bias[None, :]
    u = SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    return x / (1.0 + tl.exp(tl.minimum(-2.0 * u, 80.0)))
# /kwiki:rung triton_bias_gelu


# kwiki:rung triton_fp8_out
@triton.jit
def _fp8_groups(y, q_desc, s_ptr, rows, off_m, off_n, pid_n, M, N,
                BM: tl.constexpr, BN: tl.constexpr, GROUP: tl.constexpr):
    """Quantizes the fp32 tile y [BM, BN] to e4m3 with one scale per 1 x GROUP group of a row: the group's
    amax over its GROUP columns, s = amax / 448, q = y / s (so the group's largest element maps to 448).
    Columns past N are 0 here (TMA filled the operands' missing rows with zeros, the bias load is masked, and
    GELU(0) = 0), so a partial last group takes its amax over its real columns. Stores q by TMA (clipped at
    M and N) and the scales into s[N/GROUP, M] (a group's scales of consecutive rows are contiguous: the
    layout kernel-fp8-gemm's block-scaled kernel reads for A). Returns the tile's amax."""
    G: tl.constexpr = BN // GROUP
    amax_g = tl.max(tl.abs(tl.reshape(y, (BM, G, GROUP))), axis=2)  # [BM, G]
    scale = tl.maximum(amax_g, 1e-12) / E4M3_MAX  # an all-zero group gets a tiny scale, not a 0 / 0
    q = tl.reshape(tl.reshape(y, (BM, G, GROUP)) / scale[:, :, None], (BM, BN))
    q = tl.clamp(q, -E4M3_MAX, E4M3_MAX)  # y / s can round past 448 by an ulp; e4m3fn has no infinity
    q_desc.store([off_m, off_n], q.to(tl.float8e4nv))
    groups = pid_n * G + tl.arange(0, G)
    s_ptrs = s_ptr + groups[None, :].to(tl.int64) * M + rows[:, None]
    n_groups = tl.cdiv(N, GROUP)
    tl.store(s_ptrs, scale, mask=(rows[:, None] < M) & (groups[None, :] < n_groups))
    return tl.max(tl.max(amax_g, axis=1), axis=0)
# /kwiki:rung triton_fp8_out


# kwiki:rung triton_bias_gelu_residual
@triton.jit
def _add_residual_store(y, res_ptr, c_desc, rows, off_m, off_n, M, N, HALF: tl.constexpr):
    """y [BM, HALF] + residual[rows, off_n : off_n + HALF] (plain loads, masked past M and N: one bf16 read an
    element, no staging in shared memory), stored as bf16 by TMA through a [BM, HALF] descriptor."""
    cols = off_n + tl.arange(0, HALF)
    r_ptrs = res_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    res = tl.load(r_ptrs, mask=(rows[:, None] < M) & (cols[None, :] < N), other=0.0)
    c_desc.store([off_m, off_n], (y + res.to(tl.float32)).to(tl.bfloat16))
# /kwiki:rung triton_bias_gelu_residual


# kwiki:rung triton_plain
@triton.jit
def gemm_epilogue(a_ptr, b_ptr, c_ptr, bias_ptr, res_ptr, s_ptr, amax_ptr, M, N, K,
                  EPILOGUE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP_M: tl.constexpr, GROUP: tl.constexpr, NUM_SMS: tl.constexpr):
    """The persistent TMA GEMM; c_ptr is the bf16 output (EPILOGUE 0-2) or the e4m3 output (EPILOGUE 3).
    Pointers an epilogue does not use are passed but never read."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    if EPILOGUE == 2:
        c_half_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN // 2])
    run_amax = tl.zeros((), dtype=tl.float32)  # EPILOGUE 3: the largest |y| of this program's tiles
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        off_m = pid_m * BM
        off_n = pid_n * BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):  # TMA zero-fills past M, N and K: a partial tile adds nothing
            a = a_desc.load([off_m, ki * BK])
            b = b_desc.load([off_n, ki * BK])
            acc = tl.dot(a, b.T, acc)
        rows = off_m + tl.arange(0, BM)
        cols = off_n + tl.arange(0, BN)
        if EPILOGUE == 0:
            c_desc.store([off_m, off_n], acc.to(tl.bfloat16))
# /kwiki:rung triton_plain
# kwiki:rung triton_bias_gelu_residual
        elif EPILOGUE == 2:
            # in two 128 x 128 halves, the residual by plain loads: a whole 128 x 256 epilogue stages a 64 KiB
            # store tile and a 64 KiB layout conversion of the residual in shared memory, which the 3 pipeline
            # stages (144 KiB) leave no room for (the block would need 240 KiB of the 227 KiB it may have)
            y = _bias_gelu(acc, bias_ptr, cols, N)
            y0, y1 = tl.split(tl.permute(tl.reshape(y, (BM, 2, BN // 2)), (0, 2, 1)))
            _add_residual_store(y0, res_ptr, c_half_desc, rows, off_m, off_n, M, N, BN // 2)
            _add_residual_store(y1, res_ptr, c_half_desc, rows, off_m, off_n + BN // 2, M, N, BN // 2)
# /kwiki:rung triton_bias_gelu_residual
# kwiki:rung triton_fp8_out
        elif EPILOGUE == 3:
            y = _bias_gelu(acc, bias_ptr, cols, N)
            tile_amax = _fp8_groups(y, c_desc, s_ptr, rows, off_m, off_n, pid_n, M, N, BM, BN, GROUP)
            run_amax = tl.maximum(run_amax, tile_amax)
# /kwiki:rung triton_fp8_out
# kwiki:rung triton_bias_gelu
        else:
            c_desc.store([off_m, off_n], _bias_gelu(acc, bias_ptr, cols, N).to(tl.bfloat16))
# /kwiki:rung triton_bias_gelu
# kwiki:rung triton_fp8_out
    if EPILOGUE == 3:
        tl.atomic_max(amax_ptr, run_amax)  # |y| >= 0: float max is well defined; amax was zeroed by the launcher
# /kwiki:rung triton_fp8_out
