"""Triton kernels of fp8_gemm_sm90a: C[M, N] = dequant(A)[M, K] @ dequant(B)[N, K]^T, e4m3 in, fp32 accumulation,
bf16 out. Imported by fp8_gemm.py's load(), never at its import.

Both operands are K-major (B is stored as N x K), the only layout Hopper's fp8 wgmma reads: its shared-memory
descriptors have no transpose for 8-bit types. A tile of B is loaded as a [BK, BN] view of those rows, so K stays
the contiguous dimension and Triton hands it to wgmma without a transpose. BK = 128: one 128-byte row of e4m3 per
row of a tile (the width of the 128-byte swizzle), and one 128-deep group of the block scales.
"""

import triton
import triton.language as tl


@triton.jit
def _tile(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M row tiles walk down one column of tiles before moving right, so the programs that
    run together share A's and B's panels in L2."""
    in_group = GROUP_M * num_pid_n
    first_m = (tile_id // in_group) * GROUP_M
    size_m = min(num_pid_m - first_m, GROUP_M)
    return first_m + (tile_id % size_m), (tile_id % in_group) // size_m


# kwiki:rung triton_tensor
@triton.jit
def fp8_gemm_tensor(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                    BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                    PROMOTE: tl.constexpr):
    """Per-tensor scales: the K loop is a plain fp8 GEMM and the epilogue multiplies the fp32 accumulator once by
    sa * sb (both scalars, read from device memory, so a new scale needs no recompilation). C is stored in c_ptr's
    type (bf16; fp32 for the promotion sweep, whose error should not be hidden under bf16 rounding).

    PROMOTE is the promotion interval along K in elements: how many products the tensor cores add in their
    limited-precision fp8 accumulator before the sum is added into fp32 registers.
    - PROMOTE <= BK (32, 64, 128: a multiple of wgmma's k32 that divides BK) is tl.dot's max_num_imprecise_acc:
      the lowering starts a fresh partial accumulator every PROMOTE elements of the dot (and at its end) and
      adds it to the fp32 total with FADDs. triton_tensor's 128 is a promotion every BK, as cuBLASLt does by
      default and as DeepSeek-V3 does every 128.
    - PROMOTE > BK (a multiple of BK): Triton 3.6 refuses max_num_imprecise_acc above the dot's K, so the kernel
      chains PROMOTE / BK dots into a second accumulator, `part`, with the fp8 default on sm_90 (no promotion),
      and adds it into acc every PROMOTE / BK tiles; resetting `part` to zeros becomes wgmma's scale-d flag.
    - PROMOTE == 0: never. The whole K stays in the tensor cores' accumulator (Triton's default for fp8 on
      sm_90, cuBLASLt's "fast accumulation"): the chained loop above with one interval, added to acc once at
      the end, so that it differs from 256 and 512 only in how often it adds. (A plain acc = tl.dot(a, b, acc)
      with an fp32 C makes ptxas serialize the tile's four wgmma, its note C7515: Triton 3.6, sm_90a.)"""
    tl.static_assert(PROMOTE == 0 or (PROMOTE % 32 == 0 and (BK % PROMOTE == 0 or PROMOTE % BK == 0)),
                     "PROMOTE: 0 (never), a multiple of 32 that divides BK, or a multiple of BK")
    pid_m, pid_n = _tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    offs_m = (pid_m * BM + tl.arange(0, BM)) % M  # rows past M re-read row (r mod M); their results are not stored
    offs_n = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :].to(tl.int64) * K + offs_k[:, None]  # a [BK, BN] view of B's K-major rows
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    part = tl.zeros((BM, BN), dtype=tl.float32)  # PROMOTE > BK only: the tensor cores' running partial sum
    for kb in range(tl.cdiv(K, BK)):
        k_left = K - kb * BK  # the last block of an off-tile K is partial: masked to zeros, which add nothing
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if PROMOTE > 0 and PROMOTE <= BK:
            acc = tl.dot(a, b, acc, max_num_imprecise_acc=PROMOTE)
        else:
            if PROMOTE == 0:
                fresh = kb == 0
            else:
                fresh = kb % (PROMOTE // BK) == 0
            if fresh:  # an interval starts: the last one's sum joins acc (zeros at kb = 0)
                acc += part
                part = tl.zeros((BM, BN), dtype=tl.float32)
            part = tl.dot(a, b, part)  # max_num_imprecise_acc left to Triton: 2^30 for fp8 on sm_90
        a_ptrs += BK
        b_ptrs += BK
    if PROMOTE == 0 or PROMOTE > BK:
        acc += part  # the last interval (partial where K is not a multiple of PROMOTE)
    acc = acc * (tl.load(sa_ptr) * tl.load(sb_ptr))
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))
# /kwiki:rung triton_tensor


# kwiki:rung triton_block
@triton.jit
def fp8_gemm_block(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """DeepSeek-V3's fine-grained scales: A has one fp32 scale per row and 128-deep K group, stored transposed as
    sa[K/128, M] (the BM scales of one group are contiguous); B one per 128 x 128 block, sb[N/128, K/128].

    No scale leaves the sum over K, so each 128-deep group's product P = qA qB^T starts from zero on the tensor
    cores (a dot without an accumulator) and is folded into the fp32 total on the CUDA cores,
    acc += P * (sa[rows] x sb): dequantization and promotion are one step. BK = 128 and BN = 128 make the group
    one dot and B's scale one number per program and group."""
    tl.static_assert(BN == 128 and BK == 128, "one 128 x 128 weight block per program and K group")
    pid_m, pid_n = _tile(tl.program_id(0), tl.cdiv(M, BM), tl.cdiv(N, BN), GROUP_M)
    offs_m = (pid_m * BM + tl.arange(0, BM)) % M
    offs_n = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_m[:, None].to(tl.int64) * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_n[None, :].to(tl.int64) * K + offs_k[:, None]
    k_groups = tl.cdiv(K, BK)
    sa_ptrs = sa_ptr + offs_m  # group 0's scales of this tile's rows
    sb_ptrs = sb_ptr + pid_n * k_groups  # row pid_n of sb: BN == 128, one weight block per program and group
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(k_groups):
        k_left = K - kb * BK
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        p = tl.dot(a, b)  # this group's partial sum, fresh: at most 128 products in the tensor cores' accumulator
        s = tl.load(sa_ptrs) * tl.load(sb_ptrs)  # [BM]: the row scales of the group times the block's scale
        acc += p * s[:, None]
        a_ptrs += BK
        b_ptrs += BK
        sa_ptrs += M
        sb_ptrs += 1
    rows = pid_m * BM + tl.arange(0, BM)
    cols = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=(rows[:, None] < M) & (cols[None, :] < N))
# /kwiki:rung triton_block


# kwiki:rung triton_tensor_tma
@triton.jit
def fp8_gemm_tma_tensor(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                        BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                        NUM_SMS: tl.constexpr):
    """Rung 1's tile, order and promotion every BK (128) elements of K, persistent: one program per SM walks the
    tiles (grouped order), and the operands and the bf16 store go by TMA through descriptors built on the device.
    B's [BN, BK] box is K-major as stored; its transposed view is the K-major B operand fp8 wgmma reads. TMA reads
    past M, N and K as zeros (an off-tile K's last block adds nothing) and stores only inside C."""
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    scale = tl.load(sa_ptr) * tl.load(sb_ptr)
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(tl.cdiv(K, BK)):
            a = a_desc.load([pid_m * BM, kb * BK])
            b = b_desc.load([pid_n * BN, kb * BK])
            acc = tl.dot(a, b.T, acc, max_num_imprecise_acc=BK)
        c_desc.store([pid_m * BM, pid_n * BN], (acc * scale).to(c_ptr.dtype.element_ty))
# /kwiki:rung triton_tensor_tma


# kwiki:rung triton_block_tma
@triton.jit
def fp8_gemm_tma_block(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                       NUM_SMS: tl.constexpr):
    """Rung 2's block scales with rung 3's schedule: persistent, one program per SM walking the tiles in grouped
    order, operands and the bf16 store by TMA. The scales stay pointer loads (BM row scales and one block scale per
    group, sa[K/128, M] and sb[N/128, K/128] as rung 2 reads them); rows past M read row (r mod M)'s scale, whose
    products TMA has zeroed and whose outputs TMA does not store."""
    tl.static_assert(BN == 128 and BK == 128, "one 128 x 128 weight block per program and K group")
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_groups = tl.cdiv(K, BK)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        offs_m = (pid_m * BM + tl.arange(0, BM)) % M
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(k_groups):
            a = a_desc.load([pid_m * BM, kb * BK])
            b = b_desc.load([pid_n * BN, kb * BK])
            p = tl.dot(a, b.T)  # this group's partial sum, fresh: at most 128 products in the tensor cores
            s = tl.load(sa_ptr + kb * M + offs_m) * tl.load(sb_ptr + pid_n * k_groups + kb)
            acc += p * s[:, None]
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))
# /kwiki:rung triton_block_tma


# kwiki:rung triton_block_tma_prefetch
@triton.jit
def fp8_gemm_tma_block_prefetch(a_ptr, b_ptr, sa_ptr, sb_ptr, c_ptr, M, N, K,
                                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                                NUM_SMS: tl.constexpr):
    """fp8_gemm_tma_block with each group's scales loaded one group ahead. There, a group's scale loads come after
    the wait for its dot (Triton pipelines the dot's operands only) and the fold uses them at once, so every group
    waits out a global load (from L2) with the tensor cores idle. Here group kb + 1's scales are loaded before group
    kb's dot and carried in registers to the next step: the load's latency runs under a dot. A tile's first group
    still loads its scales before its first dot (once a tile, not once a group)."""
    tl.static_assert(BN == 128 and BK == 128, "one 128 x 128 weight block per program and K group")
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_groups = tl.cdiv(K, BK)
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    for tile_id in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        pid_m, pid_n = _tile(tile_id, num_pid_m, num_pid_n, GROUP_M)
        sa_ptrs = sa_ptr + (pid_m * BM + tl.arange(0, BM)) % M  # group 0's scales of the tile's rows
        sb_ptrs = sb_ptr + pid_n * k_groups  # row pid_n of sb
        s = tl.load(sa_ptrs) * tl.load(sb_ptrs)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for kb in range(k_groups):
            a = a_desc.load([pid_m * BM, kb * BK])
            b = b_desc.load([pid_n * BN, kb * BK])
            nxt = kb + 1 - (kb + 1) // k_groups  # the next group, while this group's dot runs (the last: itself)
            s_next = tl.load(sa_ptrs + nxt * M) * tl.load(sb_ptrs + nxt)
            p = tl.dot(a, b.T)
            acc += p * s[:, None]
            s = s_next
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_ptr.dtype.element_ty))
# /kwiki:rung triton_block_tma_prefetch
