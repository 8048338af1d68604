"""Triton kernels of moe_grouped_gemm_bf16_sm90a: for every expert e, C[rows of e] = A[rows of e] @ W[e]^T.

A is [T, K] bf16, its rows sorted by expert; W is [E, N, K] bf16 (each expert's weight as nn.Linear stores it,
K-major); offs is int32 [E], the cumulative end row of each expert (torch._grouped_mm's convention: expert e owns
rows offs[e-1] .. offs[e]-1, an empty expert has offs[e] == offs[e-1]). C is [T, N] bf16, fp32 accumulation.
The persistent kernel also reads the masked layout (CAP > 0): A [E, CAP, K] and C [E, CAP, N] seen as T = E * CAP
rows, and offs holds each expert's count of real rows (at most CAP, from its first row e * CAP).
The tile schedule is computed on the device from offs, in every program: no host sync, one launch.
Imported by moe.py's load(), never at its import.
"""

import triton
import triton.language as tl


@triton.jit
def _experts(offs_ptr, E, BM: tl.constexpr, E_POW2: tl.constexpr, CAP: tl.constexpr):
    """Each expert's first row, end row, number of BM-row tiles and the inclusive running sum of those tiles
    (vectors of E_POW2 lanes; lanes past E hold an empty expert). CAP 0: offs holds cumulative ends; CAP > 0
    (the masked layout): offs holds counts, and expert e's rows start at e * CAP."""
    idx = tl.arange(0, E_POW2)
    if CAP > 0:
        counts = tl.load(offs_ptr + idx, mask=idx < E, other=0)
        starts = idx * CAP
        ends = starts + counts
    else:
        ends = tl.load(offs_ptr + idx, mask=idx < E, other=0)
        starts = tl.load(offs_ptr + idx - 1, mask=(idx >= 1) & (idx < E), other=0)
        counts = tl.where(idx < E, ends - starts, 0)
    mtiles = (counts + BM - 1) // BM
    return idx, starts, ends, mtiles, tl.cumsum(mtiles, 0)


@triton.jit
def _locate(g, idx, starts, ends, mtiles, cum, per):
    """The expert that owns schedule slot `g` when expert e owns mtiles[e] * per consecutive slots: the expert,
    its slot index inside the expert, its number of m-tiles, its first row and its end row."""
    e = tl.sum((cum * per <= g).to(tl.int32), 0)
    sel = idx == e
    first_slot = tl.sum(tl.where(sel, (cum - mtiles) * per, 0), 0)
    return (e, g - first_slot, tl.sum(tl.where(sel, mtiles, 0), 0), tl.sum(tl.where(sel, starts, 0), 0),
            tl.sum(tl.where(sel, ends, 0), 0))


@triton.jit
def _store(c_ptr, acc, row0, row_end, col0, N, BM: tl.constexpr, BN: tl.constexpr):
    """A masked store of one tile: rows past the expert's end belong to the next expert and are not written."""
    rows = row0 + tl.arange(0, BM)
    cols = col0 + tl.arange(0, BN)
    ptrs = c_ptr + rows[:, None].to(tl.int64) * N + cols[None, :]
    tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < row_end) & (cols[None, :] < N))


# kwiki:rung triton_grouped
@triton.jit(do_not_specialize=["T", "E"])  # one compile for every routed row count and expert count
def grouped_gemm_tiled(a_ptr, w_ptr, c_ptr, offs_ptr, T, N, K, E,
                       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                       EVEN_K: tl.constexpr):
    """Rung 1: one program per (expert, m-tile, n-tile) of a grid sized for the worst case (cdiv(T, BM) + E
    m-tiles; the programs past the real schedule exit). A program finds its expert from offs, then runs a
    plain pointer-tile GEMM (cp.async pipelined by Triton, wgmma): m-tiles in expert order, n fastest."""
    num_n = tl.cdiv(N, BN)
    g = tl.program_id(0) // num_n
    pid_n = tl.program_id(0) % num_n
    idx, starts, ends, mtiles, cum = _experts(offs_ptr, E, BM, E_POW2, 0)
    if g < tl.sum(mtiles, 0):
        e, pid_m, _, row_start, row_end = _locate(g, idx, starts, ends, mtiles, cum, 1)
        row0 = row_start + pid_m * BM
        rows = tl.minimum(row0 + tl.arange(0, BM), T - 1)  # rows past the expert are read, never stored
        cols = (pid_n * BN + tl.arange(0, BN)) % N
        offs_k = tl.arange(0, BK)
        a_ptrs = a_ptr + rows[:, None].to(tl.int64) * K + offs_k[None, :]
        w_ptrs = w_ptr + (e.to(tl.int64) * N + cols[None, :]) * K + offs_k[:, None]  # W[e] read as BK x BN
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(w_ptrs)
            else:
                k_left = K - ki * BK
                a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
                b = tl.load(w_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_ptrs += BK
            w_ptrs += BK
        _store(c_ptr, acc, row0, row_end, pid_n * BN, N, BM, BN)
# /kwiki:rung triton_grouped


# kwiki:rung triton_grouped_tma_persistent
@triton.jit
def _grouped_order(t, num_m, num_n, GROUP_M: tl.constexpr):
    """Inside one expert: GROUP_M m-tiles walk down a column of n-tiles together, so the tiles that run at
    once share the expert's weight tiles (and their token rows) in L2."""
    group = t // (GROUP_M * num_n)
    first_m = group * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    return first_m + (t % size_m), (t % (GROUP_M * num_n)) // size_m


@triton.jit(do_not_specialize=["T", "E"])
def grouped_gemm_tma_persistent(a_ptr, w_ptr, c_ptr, offs_ptr, T, N, K, E,
                                BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                                CAP: tl.constexpr, GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    """Rung 2: one program per SM walks the whole schedule (all experts' tiles, expert by expert, grouped order
    inside each); A and W arrive by TMA through device-side descriptors (out-of-range K and rows read as zeros),
    the tile is stored with masks (a TMA store would overwrite the next expert's rows, or the masked layout's
    padding). CAP > 0 reads the masked layout: only the tiles that hold an expert's real rows are scheduled."""
    num_n = tl.cdiv(N, BN)
    idx, starts, ends, mtiles, cum = _experts(offs_ptr, E, BM, E_POW2, CAP)
    total = tl.sum(mtiles, 0) * num_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[T, K], strides=[K, 1], block_shape=[BM, BK])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E * N, K], strides=[K, 1], block_shape=[BN, BK])
    for tile in tl.range(tl.program_id(0), total, NUM_SMS):
        e, t, num_m, row_start, row_end = _locate(tile, idx, starts, ends, mtiles, cum, num_n)
        pid_m, pid_n = _grouped_order(t, num_m, num_n, GROUP_M)
        row0 = row_start + pid_m * BM
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            a = a_desc.load([row0, ki * BK])
            b = w_desc.load([e * N + pid_n * BN, ki * BK])
            acc = tl.dot(a, b.T, acc)
        _store(c_ptr, acc, row0, row_end, pid_n * BN, N, BM, BN)
# /kwiki:rung triton_grouped_tma_persistent


# kwiki:rung triton_grouped_fp8
@triton.jit(do_not_specialize=["T", "E"])
def grouped_gemm_fp8_rowwise(a_ptr, w_ptr, sa_ptr, sw_ptr, c_ptr, offs_ptr, T, N, K, E,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                             GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    """Rung 3: rung 2's schedule (persistent, grouped order inside each expert, TMA loads) on e4m3 operands with
    row-wise scales: one fp32 scale per routed row of A (sa[T]) and one per output channel of each expert (sw[E, N]).
    The tensor cores' limited-precision fp8 partial sums are promoted into the fp32 accumulator every BK (128)
    elements of K (max_num_imprecise_acc), and both scales multiply the tile once, in the epilogue."""
    num_n = tl.cdiv(N, BN)
    idx, starts, ends, mtiles, cum = _experts(offs_ptr, E, BM, E_POW2, 0)
    total = tl.sum(mtiles, 0) * num_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[T, K], strides=[K, 1], block_shape=[BM, BK])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E * N, K], strides=[K, 1], block_shape=[BN, BK])
    for tile in tl.range(tl.program_id(0), total, NUM_SMS):
        e, t, num_m, row_start, row_end = _locate(tile, idx, starts, ends, mtiles, cum, num_n)
        pid_m, pid_n = _grouped_order(t, num_m, num_n, GROUP_M)
        row0 = row_start + pid_m * BM
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(tl.cdiv(K, BK)):
            a = a_desc.load([row0, ki * BK])
            b = w_desc.load([e * N + pid_n * BN, ki * BK])
            acc = tl.dot(a, b.T, acc, max_num_imprecise_acc=BK)
        rows = tl.minimum(row0 + tl.arange(0, BM), T - 1)  # rows past the expert: a real row's scale, never stored
        cols = pid_n * BN + tl.arange(0, BN)
        sa = tl.load(sa_ptr + rows)
        sw = tl.load(sw_ptr + e.to(tl.int64) * N + cols, mask=cols < N, other=0.0)
        _store(c_ptr, acc * sa[:, None] * sw[None, :], row0, row_end, pid_n * BN, N, BM, BN)
# /kwiki:rung triton_grouped_fp8


# kwiki:rung triton_grouped_fp8_block
@triton.jit(do_not_specialize=["T", "E"])
def grouped_gemm_fp8_block(a_ptr, w_ptr, sa_ptr, sw_ptr, c_ptr, offs_ptr, T, N, K, E,
                           BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, E_POW2: tl.constexpr,
                           GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    """Rung 4: rung 3 with DeepSeek-V3's fine-grained scales: one per 1 x 128 group of a routed row (sa[K/128, T],
    stored K-group-major so a tile's BM scales of one group are contiguous) and one per 128 x 128 block of each
    expert's weight (sw[E, N/128, K/128]). Every 128-deep product leaves the tensor cores as its own fp32 partial,
    which is scaled by its row and block scales and added into the fp32 accumulator: the promotion and the scaling
    are one step, inside the K loop."""
    tl.static_assert(BN == 128 and BK == 128, "one 128 x 128 weight block per program and K group")
    num_n = tl.cdiv(N, BN)
    k_groups = tl.cdiv(K, BK)
    idx, starts, ends, mtiles, cum = _experts(offs_ptr, E, BM, E_POW2, 0)
    total = tl.sum(mtiles, 0) * num_n
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[T, K], strides=[K, 1], block_shape=[BM, BK])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[E * N, K], strides=[K, 1], block_shape=[BN, BK])
    for tile in tl.range(tl.program_id(0), total, NUM_SMS):
        e, t, num_m, row_start, row_end = _locate(tile, idx, starts, ends, mtiles, cum, num_n)
        pid_m, pid_n = _grouped_order(t, num_m, num_n, GROUP_M)
        row0 = row_start + pid_m * BM
        rows = tl.minimum(row0 + tl.arange(0, BM), T - 1)  # rows past the expert: a real row's scales, never stored
        sw_row = sw_ptr + (e.to(tl.int64) * num_n + pid_n) * k_groups
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_groups):
            a = a_desc.load([row0, ki * BK])
            b = w_desc.load([e * N + pid_n * BN, ki * BK])
            sa = tl.load(sa_ptr + ki * T + rows)
            acc += tl.dot(a, b.T) * (sa * tl.load(sw_row + ki))[:, None]
        _store(c_ptr, acc, row0, row_end, pid_n * BN, N, BM, BN)
# /kwiki:rung triton_grouped_fp8_block
