"""Triton kernels of triton_gemm_bf16_sm90a: C[M,N] = A[M,K] @ Bt[N,K]^T in bf16 with fp32 accumulation.

Both operands are K-major (Bt holds B transposed), the layout wgmma reads without a transpose and whose
128-byte rows (64 bf16) match TMA's 128-byte swizzle. Imported by gemm.py's load(), never at its import.
"""

import triton
import triton.language as tl


@triton.jit
def _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M: tl.constexpr):
    """Grouped tile order: GROUP_M row-tiles walk down one column of tiles before moving right, so the
    tiles that run together share A's and B's panels in L2."""
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.jit
def matmul_tiled(a_ptr, b_ptr, c_ptr, M, N, K,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """Rung 1: one program per output tile (grouped order), plain pointer tiles (no TMA; block pointers,
    the other non-TMA spelling, are gone from newer Triton): Triton pipelines the loads with cp.async over
    num_stages and issues wgmma."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    pid_m, pid_n = _tile(tl.program_id(0), GROUP_M * num_pid_n, num_pid_m, GROUP_M)
    offs_m = (pid_m * BM + tl.arange(0, BM)) % M
    offs_n = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :].to(tl.int64) * K + offs_k[:, None]  # Bt read as a BK x BN tile of B
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in range(tl.cdiv(K, BK)):
        k_left = K - ki * BK
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK
        b_ptrs += BK
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def matmul_tma_persistent(a_ptr, b_ptr, c_ptr, M, N, K,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                          NUM_SMS: tl.constexpr):
    """Rung 2: one program per SM walks the tiles in grouped order; operands
    arrive by TMA through descriptors built on the device (tl.make_tensor_descriptor), the store too."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    num_tiles = num_pid_m * num_pid_n
    num_pid_in_group = GROUP_M * num_pid_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for tile_id in tl.range(tl.program_id(0), num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile(tile_id, num_pid_in_group, num_pid_m, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([pid_n * BN, ki * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))
