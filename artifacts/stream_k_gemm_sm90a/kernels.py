"""Triton kernels of stream_k_gemm_sm90a (imported by stream_k_gemm.py's load(), never at its import time).

C[M, N] = A[M, K] @ B[K, N], bf16 in, fp32 accumulation, bf16 out. Every kernel runs the same tile (BM x BN
outputs, BK-deep k-blocks) through the same MAC loop, `mac_loop`, over a range of k-blocks; the three
schedules differ only in which (tile, k-range) pieces a program computes and how the pieces are added:

- dp_kernel: one program per output tile, the whole K (data-parallel).
- splitk_kernel + reduce_kernel: one program per (tile, slice of K); fp32 partials to a workspace, added by a
  second kernel in slice order (deterministic).
- streamk_kernel: a persistent grid of P programs; the T x I k-block iterations of the whole GEMM (T tiles,
  I = cdiv(K, BK) each), laid end to end tile after tile, are divided evenly among them, so a program's range
  starts and ends at arbitrary k inside tiles. Split tiles are fixed up through a workspace, guarded by flags.

Tile order: tile t maps to (pid_m, pid_n) in groups of GROUP_M tile rows (the grouped order of Triton's matmul
tutorial), so that programs running at once share A and B panels in L2; every schedule uses it.
M, N and K stay specialized (Triton's divisibility by 16 of integer arguments): the row strides of A and B are
K and N, and a stride known to be a multiple of 16 keeps the loads 16 bytes wide. The off-tile shape compiles
kernels of its own.
"""

import triton
import triton.language as tl


@triton.jit
def tile_coords(tile, M, N, BM: tl.constexpr, BN: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of linear tile index `tile`: column-major within groups of GROUP_M tile rows."""
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP_M * tiles_n
    first_m = (tile // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (tile % per_group) % rows
    pid_n = (tile % per_group) // rows
    return pid_m, pid_n


@triton.jit
def mac_loop(a_ptr, b_ptr, M, N, K, pid_m, pid_n, kb_lo, kb_hi,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """fp32 sum over k-blocks [kb_lo, kb_hi) of A[tile rows, k] @ B[k, tile cols]; masks cover every edge."""
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    a_rows = a_ptr + offs_m.to(tl.int64)[:, None] * K   # A is [M, K], row-major
    b_cols = b_ptr + offs_n[None, :]                     # B is [K, N], row-major
    m_ok = offs_m < M
    n_ok = offs_n < N
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for kb in range(kb_lo, kb_hi):
        kk = kb * BK + offs_k
        k_ok = kk < K
        a = tl.load(a_rows + kk[None, :], mask=m_ok[:, None] & k_ok[None, :], other=0.0)
        b = tl.load(b_cols + kk.to(tl.int64)[:, None] * N, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def store_tile(c_ptr, acc, M, N, pid_m, pid_n, BM: tl.constexpr, BN: tl.constexpr):
    """The epilogue: round the fp32 sum to C's dtype once, after the whole K, and store the tile's valid part."""
    offs_m = pid_m * BM + tl.arange(0, BM)
    offs_n = pid_n * BN + tl.arange(0, BN)
    dst = c_ptr + offs_m.to(tl.int64)[:, None] * N + offs_n[None, :]
    tl.store(dst, acc.to(c_ptr.dtype.element_ty), mask=(offs_m < M)[:, None] & (offs_n < N)[None, :])


# kwiki:rung triton_dp
@triton.jit
def dp_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """Data-parallel: program t computes tile t over all of K and stores it; nothing is shared."""
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BM, BN, GROUP_M)
    acc = mac_loop(a_ptr, b_ptr, M, N, K, pid_m, pid_n, 0, tl.cdiv(K, BK), BM, BN, BK)
    store_tile(c_ptr, acc, M, N, pid_m, pid_n, BM, BN)
# /kwiki:rung triton_dp


# kwiki:rung triton_splitk
@triton.jit(do_not_specialize=["kb_per_split"])
def splitk_kernel(a_ptr, b_ptr, part_ptr, M, N, K, kb_per_split,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """Split-K: program (t, s) computes tile t over k-blocks [s * kb_per_split, (s + 1) * kb_per_split) and
    writes the fp32 partial to slice s of the workspace part[S, M, N]; reduce_kernel adds the slices."""
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BM, BN, GROUP_M)
    s = tl.program_id(1)
    kb_lo = s * kb_per_split
    kb_hi = tl.minimum(kb_lo + kb_per_split, tl.cdiv(K, BK))
    acc = mac_loop(a_ptr, b_ptr, M, N, K, pid_m, pid_n, kb_lo, kb_hi, BM, BN, BK)
    store_tile(part_ptr + s.to(tl.int64) * M * N, acc, M, N, pid_m, pid_n, BM, BN)


@triton.jit(do_not_specialize=["total", "splits"])
def reduce_kernel(part_ptr, c_ptr, total, splits, BLOCK: tl.constexpr):
    """Split-K's second kernel: C = the sum of the fp32 slices in slice order (deterministic), rounded once."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < total
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, splits):
        acc += tl.load(part_ptr + s * total + offs, mask=ok, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=ok)
# /kwiki:rung triton_splitk


# kwiki:rung triton_streamk
@triton.jit
def owner_of(it, total, P):
    """The program whose range holds iteration `it`: program p owns [p * total // P, (p + 1) * total // P)."""
    return ((it + 1) * P - 1) // total


@triton.jit(do_not_specialize=["P"])
def streamk_kernel(a_ptr, b_ptr, c_ptr, part_ptr, flag_ptr, M, N, K, P,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """Stream-K over a persistent grid of P programs (one per SM; all resident, so a wait always ends).

    Program p owns iterations [p * total // P, (p + 1) * total // P) of the total = T x I. It walks its range
    BACKWARD, one piece per tile it touches (each piece's k-blocks in ascending order):
    - its first piece is the head of a tile that a later program finishes (or the middle of one): it stores
      the fp32 partial in workspace slot p and raises flag p (release). At most one such piece per program.
    - the pieces in between are whole tiles: stored directly, no fix-up.
    - its last piece ends the tile it belongs to (it holds k-block I - 1): if earlier programs hold the rest of
      the tile, p waits for each one's flag (acquire), in ascending program order, adds its partial, resets
      the flag for the next call, and stores the tile.
    So the finishing program of a split tile has the highest id among its contributors, and each contributor
    stores its partial first, before any other work: on the GPU a wait is at most about one piece long, and in
    a sequential execution (Triton's interpreter runs programs 0, 1, 2, ... one at a time) every flag a
    program waits for is already raised. The sum order (the finisher's own piece, then the partials in program
    order) does not depend on timing: the result is deterministic.
    """
    pid = tl.program_id(0)
    iters = tl.cdiv(K, BK)
    total = tl.cdiv(M, BM) * tl.cdiv(N, BN) * iters
    start = (pid * total) // P
    it_end = ((pid + 1) * total) // P
    offs = tl.arange(0, BM)[:, None] * BN + tl.arange(0, BN)[None, :]
    while it_end > start:
        tile = (it_end - 1) // iters
        tile_begin = tile * iters
        piece_begin = tl.maximum(start, tile_begin)
        kb_lo = piece_begin - tile_begin
        kb_hi = it_end - tile_begin
        pid_m, pid_n = tile_coords(tile, M, N, BM, BN, GROUP_M)
        acc = mac_loop(a_ptr, b_ptr, M, N, K, pid_m, pid_n, kb_lo, kb_hi, BM, BN, BK)
        if kb_hi < iters:  # a partial of a tile a later program finishes
            tl.store(part_ptr + pid * (BM * BN) + offs, acc, cache_modifier=".cg")
            tl.debug_barrier()  # every thread's partial is written before the flag says so
            tl.atomic_xchg(flag_ptr + pid, 1, sem="release")
        else:
            if kb_lo > 0:  # split: add the partials of the earlier programs, in program order
                for c in range(owner_of(tile_begin, total, P), pid):
                    while tl.atomic_cas(flag_ptr + c, 1, 1, sem="acquire") != 1:
                        pass
                    acc += tl.load(part_ptr + c * (BM * BN) + offs, cache_modifier=".cg")
                    tl.debug_barrier()  # every thread is past the wait before the flag goes down
                    tl.atomic_xchg(flag_ptr + c, 0, sem="relaxed")  # reset: only this program reads flag c
            store_tile(c_ptr, acc, M, N, pid_m, pid_n, BM, BN)
        it_end = piece_begin
# /kwiki:rung triton_streamk
