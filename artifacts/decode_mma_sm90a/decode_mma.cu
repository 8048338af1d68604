// decode_mma.cu: decode-sized GEMM y[M,N] = x[M,K] W[N,K]^T (M = 1..64), bf16 in and out, fp32 accumulation, on
// mma.sync tensor cores with the operands swapped; against cuBLAS (what torch.mm(x, W.t()) / F.linear runs).
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o decode_mma decode_mma.cu
// Run: ./decode_mma --shapes=16x8192x8192,13x1003x4008 [--variants a,b,c] [--input-sets=2] [--sweep]
//
// W is N x K row-major (K contiguous, a linear layer's weight), x is M x K row-major, y is M x N row-major. With M
// at most 64 every element of W is read once and used M times: the GEMM is bound by W's bytes, like a GEMV, and the
// goal is the read ceiling for W + x + y. Tensor cores are there to keep the M-fold reuse of each W element off the
// FMA pipes; the ladder is about feeding them 16-byte loads of W with enough bytes in flight.
//
// Swap-AB: mma.sync.m16n8k16 multiplies A (16 x 16) by B (16 x 8). A decode M of 1..64 would waste most of A's 16
// rows, so W takes A's place (16 output channels a tile) and x takes B's (8 rows of x an n8 tile, MT = ceil(M/8)
// tiles): D = W_tile x_tile^T is a 16 x 8 tile of y^T. A CTA owns 16*NT channels and every row of x; its WARPS warps
// split the CTA's K range in chunks of 32 (warp w takes chunks w, w + WARPS, ...), and their fp32 accumulators are
// added through shared memory in a fixed tree order (deterministic) before warp 0 writes y.
//
// The K permutation (why each lane can load 16 contiguous bytes): a dot product does not care which k sits where as
// long as A and B use the same mapping. Lane (g = lane/4, q = lane%4) loads w0 = W[n+g][k0+8q .. +7],
// w1 = W[n+g+8][k0+8q .. +7] and per n8 tile xv = x[8t+g][k0+8q .. +7] (16 bytes each), then issues two MMAs j = 0, 1:
// A = {w0[4j..4j+1], w1[4j..4j+1], w0[4j+2..4j+3], w1[4j+2..4j+3]}, B = {xv[4j..4j+1], xv[4j+2..4j+3]} (mma_chunk
// says which logical k of the PTX fragments lands on which physical k).
//
// Reference: fp64 on the host from the same bf16 inputs; tolerance: rtol 2^-6 (bf16 output rounding is 2^-9) plus an
// atol that grows with K, sqrt(K) x 2^-14 (as gemv_bf16_sm90a's check_y). y carries a canary past its M x N
// elements, which the check requires intact. Inputs: --input-sets (2) pre-filled sets of W and x, each with its
// reference; each timed sample reads one of them at random (kwiki::Runner).
//
// Variants: the ladder is artifact.yaml's (each variant's rung, what it adds and its description, in the order of
// the table below, which holds the names only); each rung's code is a marked region of this file. mma_warp is the
// kernel with one 16-channel tile per CTA, 8 warps and one chunk per warp in flight; mma_ring keeps a ring of 4
// chunks per warp in flight, each slot reloaded right after its MMAs; mma_tma moves the bytes in flight out of the
// registers: TMA fills a 12-stage shared-memory ring with 64 x 64 tiles of W (and x's rows), one producer lane and 4
// consumer warps that read mma.sync's fragments with ldmatrix (no K permutation there); mma_tma_spread and
// mma_tma_cluster change its walk over K and share x across 2 CTAs; mma_wgmma keeps the ring and hands the consumers'
// work to a warpgroup's asynchronous wgmma, read straight from the ring. mma_tuned picks the kernel, tile, warps,
// chunks or stages in flight and a K split across CTAs (grid.y, fp32 partials in a workspace added in split order by
// reduce_splits_kernel: no atomics) per shape in a selection pass of the run. Bytes per record: W + x + y (the split
// workspace is not counted). read_ceiling is not a rung: those bytes over the read bandwidth fitted in the same run
// (kwiki_ceiling.cuh). fma_rows is not a rung either: the GEMV page's CUDA-core kernel for M rows of x (fp32 FMAs, no
// tensor cores), the other side of the crossover over M. --sweep adds every configuration of configs() as a variant sweep_<config>.
// Shapes: M from 1 to 64, any N, K a multiple of 8 (rows are read in 16-byte vectors); the manifest's shapes include
// 13x1003x4008, which no tile divides (rows past N or M load zeros, and so do the 8-element groups past K).
#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"
#include "kwiki_gemv.cuh"
#include "kwiki_reduce.cuh"
#include "sm90.cuh"


namespace {

using bf16 = __nv_bfloat16;

// ===================================================================================================
// Reference: fp64 on the host
// ===================================================================================================

// ref[m*N + n] = sum_k x[m][k] W[n][k], in fp64 from the bf16 values.
std::vector<double> reference(const std::vector<bf16>& W, const std::vector<bf16>& x, int M, int N, int K) {
    std::vector<double> xd(size_t(M) * K), y(size_t(M) * N);
    for (size_t i = 0; i < xd.size(); ++i) xd[i] = __bfloat162float(x[i]);
    kwiki::parallel_for(size_t(N), [&](size_t n0, size_t n1) {
        std::vector<double> row(K);
        for (size_t n = n0; n < n1; ++n) {
            for (int k = 0; k < K; ++k) row[k] = __bfloat162float(W[n * size_t(K) + k]);
            for (int m = 0; m < M; ++m) {
                const double* xm = xd.data() + size_t(m) * K;
                double s = 0;
                for (int k = 0; k < K; ++k) s += row[k] * xm[k];
                y[size_t(m) * N + n] = s;
            }
        }
    });
    return y;
}

// One input set: W (N x K) and x (M x K), random in [-1, 1) (W from `seed`, x from seed ^ 0x77), and y's reference.
struct Inputs {
    kwiki::DeviceBuffer<bf16> W, x;
    std::vector<double> ref;

    void fill(int M, int N, int K, uint64_t seed) {
        const size_t w_elems = size_t(N) * K, x_elems = size_t(M) * K;
        W = kwiki::DeviceBuffer<bf16>(w_elems), x = kwiki::DeviceBuffer<bf16>(x_elems);
        kwiki::fill_random(W.get(), w_elems, seed, -1.0f, 1.0f);
        kwiki::fill_random(x.get(), x_elems, seed ^ 0x77, -1.0f, 1.0f);
        std::vector<bf16> hW(w_elems), hx(x_elems);
        KWIKI_CHECK(cudaMemcpy(hW.data(), W.get(), w_elems * sizeof(bf16), cudaMemcpyDeviceToHost));
        KWIKI_CHECK(cudaMemcpy(hx.data(), x.get(), x_elems * sizeof(bf16), cudaMemcpyDeviceToHost));
        ref = reference(hW, hx, M, N, K);
    }
};

// y's M x N elements against the set's reference, and its canary intact: rtol 2^-6 and atol sqrt(K) x 2^-14, the
// tolerance of gemv_bf16_sm90a's check_y (whose comment says why), per output.
kwiki::CheckResult check_y(const bf16* y, int M, int N, int K, const Inputs& set) {
    const size_t n = size_t(M) * N;
    std::vector<float> got = kwiki::to_host_float(y, n);
    return kwiki::with_canary(kwiki::compare(got.data(), set.ref.data(), n, {std::sqrt(double(K)) / 16384.0, 2.0 / 128},
                                             "host fp64 from the same bf16 inputs"), y, n);
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// kwiki:rung mma_warp
// 16 bytes of W, read once: non-coherent, not kept in L1. 16 bytes of x, read by every CTA: kept in L1 (evict_last).
__device__ __forceinline__ uint4 ld_w(const bf16* p) {
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ uint4 ld_x(const bf16* p) {
    uint4 r;
    asm("ld.global.nc.L1::evict_last.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

// d += A B with A 16 x 16 bf16 (a0..a3), B 16 x 8 bf16 (b0, b1), d 16 x 8 fp32. PTX ISA fragments (m16n8k16, .bf16),
// g = lane/4, q = lane%4: a0 = (row g, k 2q, 2q+1), a1 = (row g+8, k 2q, 2q+1), a2 = (row g, k 8+2q, 9+2q),
// a3 = (row g+8, k 8+2q, 9+2q); b0 = (k 2q, 2q+1; col g), b1 = (k 8+2q, 9+2q; col g); d0, d1 = (row g; cols 2q,
// 2q+1), d2, d3 = (row g+8; cols 2q, 2q+1). The lower k of each pair is the register's low half.
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// What one lane loads of one 32-element chunk of K: per 16-channel tile t, w[t][0] = W[n+16t+g][k0+8q .. +7] and
// w[t][1] = W[n+16t+g+8][k0+8q .. +7]; per n8 tile t of x, x[t] = x[8t+g][k0+8q .. +7]. Each uint4 is 8 bf16 e[0..7],
// e[2i], e[2i+1] in word i (x, y, z, w).
template <int MT, int NT>
struct Chunk {
    uint4 w[NT][2];
    uint4 x[MT];
};

// Where this lane's rows start (its 8q offset into K included), and which of them exist: rows n >= N of W and
// rows m >= M of x load zeros, and so does the whole 8-element group of a chunk past K (K is a multiple of 8).
template <int MT, int NT>
struct Rows {
    const bf16* w[NT][2];
    const bf16* x[MT];
    bool w_ok[NT][2], x_ok[MT];

    __device__ __forceinline__ Rows(const bf16* W, const bf16* X, int M, int N, int K, int n0, int g, int q) {
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int n = n0 + 16 * t + 8 * h + g;
                w_ok[t][h] = n < N;
                w[t][h] = W + size_t(w_ok[t][h] ? n : 0) * K + 8 * q;
            }
#pragma unroll
        for (int t = 0; t < MT; ++t) {
            const int m = 8 * t + g;
            x_ok[t] = m < M;
            x[t] = X + size_t(x_ok[t] ? m : 0) * K + 8 * q;
        }
    }

    // Chunk c (k0 = 32c): 16 bytes a row, zeros where the row or the lane's 8 k are out of range.
    __device__ __forceinline__ void load(Chunk<MT, NT>& ch, int c, int q, int K) const {
        const int k0 = 32 * c;
        const bool k_ok = k0 + 8 * q < K;
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h) ch.w[t][h] = k_ok && w_ok[t][h] ? ld_w(w[t][h] + k0) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int t = 0; t < MT; ++t) ch.x[t] = k_ok && x_ok[t] ? ld_x(x[t] + k0) : make_uint4(0, 0, 0, 0);
    }

    // Chunk c when c < end (the warp's K range ends there), else zeros: the ring's slots past the end add nothing.
    __device__ __forceinline__ void load_below(Chunk<MT, NT>& ch, int c, int end, int q, int K) const {
        if (c < end) {
            load(ch, c, q, K);
            return;
        }
#pragma unroll
        for (int t = 0; t < NT; ++t) ch.w[t][0] = ch.w[t][1] = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int t = 0; t < MT; ++t) ch.x[t] = make_uint4(0, 0, 0, 0);
    }
};

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// The chunk's MMAs: two per (16-channel tile, n8 tile), j = 0, 1. The K permutation, for both operands alike:
//   A a0 = w0 word 2j   (w0[4j], w0[4j+1]):     logical k 2q, 2q+1     of row g   -> physical k0 + 8q + 4j + 0, 1
//   A a1 = w1 word 2j   (w1[4j], w1[4j+1]):     logical k 2q, 2q+1     of row g+8 -> physical k0 + 8q + 4j + 0, 1
//   A a2 = w0 word 2j+1 (w0[4j+2], w0[4j+3]):   logical k 8+2q, 9+2q   of row g   -> physical k0 + 8q + 4j + 2, 3
//   A a3 = w1 word 2j+1 (w1[4j+2], w1[4j+3]):   logical k 8+2q, 9+2q   of row g+8 -> physical k0 + 8q + 4j + 2, 3
//   B b0 = xv word 2j   (xv[4j], xv[4j+1]):     logical k 2q, 2q+1     of col g   -> physical k0 + 8q + 4j + 0, 1
//   B b1 = xv word 2j+1 (xv[4j+2], xv[4j+3]):   logical k 8+2q, 9+2q   of col g   -> physical k0 + 8q + 4j + 2, 3
// Logical k 2q+e -> physical k0+8q+4j+e and 8+2q+e -> k0+8q+4j+2+e (e = 0, 1): one-to-one onto the 16 physical k
// {k0 + 8q + 4j + 0..3 : q = 0..3} of MMA j, and the two MMAs cover the chunk's 32. The MMA's sum over its 16
// logical k is the dot product over those physical k, exactly as without the permutation.
template <int MT, int NT>
__device__ __forceinline__ void mma_chunk(float (&acc)[NT][MT][4], const Chunk<MT, NT>& ch) {
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int j = 0; j < 2; ++j)
                mma_bf16(acc[t][mt], word(ch.w[t][0], 2 * j), word(ch.w[t][1], 2 * j), word(ch.w[t][0], 2 * j + 1),
                         word(ch.w[t][1], 2 * j + 1), word(ch.x[mt], 2 * j), word(ch.x[mt], 2 * j + 1));
}
// /kwiki:rung mma_warp

// kwiki:rung mma_ring
// The warp's chunks c = first, first + WARPS, ... below `end`. U = 1 (mma_warp): load a chunk, then its MMAs, then
// the next: one chunk in flight. U > 1: a ring of U chunks in registers, kept full. The MMAs of a slot wait for its
// loads, and the slot is refilled at once with the chunk U rounds ahead, so U chunks are in flight while the MMAs
// run (slots past `end` are zeros, loaded from nowhere). The loops are not unrolled beyond the ring (nvcc would
// otherwise hoist later loads on its own and U would no longer be what sets the chunks in flight).
template <int MT, int NT, int WARPS, int U>
__device__ __forceinline__ void k_loop(float (&acc)[NT][MT][4], const Rows<MT, NT>& rows, int first, int end, int q, int K) {
    if constexpr (U == 1) {
#pragma unroll 1
        for (int c = first; c < end; c += WARPS) {
            Chunk<MT, NT> ch;
            rows.load(ch, c, q, K);
            mma_chunk(acc, ch);
        }
    } else {
        Chunk<MT, NT> ring[U];
#pragma unroll
        for (int u = 0; u < U; ++u) rows.load_below(ring[u], first + u * WARPS, end, q, K);
#pragma unroll 1
        for (int c = first; c < end; c += U * WARPS) {
#pragma unroll
            for (int u = 0; u < U; ++u) {
                mma_chunk(acc, ring[u]);
                rows.load_below(ring[u], c + (U + u) * WARPS, end, q, K);
            }
        }
    }
}
// /kwiki:rung mma_ring

// kwiki:rung mma_warp
// A warp's 16 x 8 MT tile of y^T (16 channels from n, every row of x) in m16n8's accumulator layout, g = lane / 4,
// q = lane % 4: acc[mt][r] is channel n + g + 8 (r / 2) of row 8 mt + 2 q + r % 2. One split: bf16 into y; several
// (gridDim.y > 1): fp32 into ws[split][m][n]. Rows past M and channels past N are not written.
template <int MT>
__device__ __forceinline__ void store_acc(const float (&acc)[MT][4], int n, int lane, bf16* y, float* ws, int M, int N, int split) {
    const int g = lane / 4, q = lane % 4;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int c = n + g + 8 * (r >> 1), m = 8 * mt + 2 * q + (r & 1);
            if (m >= M || c >= N) continue;
            if (gridDim.y == 1) y[size_t(m) * N + c] = __float2bfloat16_rn(acc[mt][r]);
            else ws[(size_t(split) * M + m) * N + c] = acc[mt][r];
        }
}

// y[m][n] = sum_k x[m][k] W[n][k] for the CTA's 16*NT channels n0.., every m < M, over the chunks of split
// blockIdx.y (chunks [split * chunks_per_split, +chunks_per_split) of ceil(K/32)). One split: bf16 into y. Several
// (gridDim.y > 1, mma_tuned's configurations): fp32 into ws[split][m][n], which reduce_splits_kernel adds in order.
template <int MT, int NT, int WARPS, int U>
__global__ void __launch_bounds__(WARPS * 32, 1) mma_kernel(const bf16* W, const bf16* x, bf16* y, float* ws, int M, int N, int K,
                                                         int chunks_per_split) {
    constexpr int HALF = WARPS / 2 > 0 ? WARPS / 2 : 1, REGS = NT * MT * 4;
    __shared__ float part[HALF][REGS][32];  // the warps' accumulators, lane-contiguous (no bank conflicts)
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
    const int n0 = blockIdx.x * 16 * NT, split = blockIdx.y;
    const int begin = split * chunks_per_split, end = min((K + 31) / 32, begin + chunks_per_split);
    const Rows<MT, NT> rows(W, x, M, N, K, n0, g, q);
    float acc[NT][MT][4] = {};
    k_loop<MT, NT, WARPS, U>(acc, rows, begin + warp, end, q, K);
    // the warps' sums: a fixed tree (warps h..2h-1 hand theirs to warps 0..h-1), so every launch adds in one order
#pragma unroll
    for (int h = WARPS / 2; h >= 1; h /= 2) {
        if (warp >= h && warp < 2 * h)
#pragma unroll
            for (int r = 0; r < REGS; ++r) part[warp - h][r][lane] = (&acc[0][0][0])[r];
        __syncthreads();
        if (warp < h)
#pragma unroll
            for (int r = 0; r < REGS; ++r) (&acc[0][0][0])[r] += part[warp][r][lane];
        __syncthreads();
    }
    if (warp != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) store_acc<MT>(acc[t], n0 + 16 * t, lane, y, ws, M, N, split);
}
// /kwiki:rung mma_warp

// kwiki:rung mma_tma
// ldmatrix.x4 (matrix i's 8 row addresses from lanes 8i..8i+7) and its two-matrix form (lanes 0..15).
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];" : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2(uint32_t addr, uint32_t& r0, uint32_t& r1) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr));
}

// Fetch a tensor map (a kernel parameter) into the TMA unit's descriptor cache before its first copy needs it.
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Byte offset of 16-byte chunk c (0..7) of row r in a tile TMA wrote with the 128-byte swizzle: rows of 128 bytes
// (64 bf16 of K), chunk c of row r stored at chunk c ^ (r % 8). The 8 rows an ldmatrix matrix reads then sit on 8
// different groups of 4 banks: no conflicts.
__device__ __forceinline__ uint32_t sw128(int r, int c) { return uint32_t(r) * 128u + (uint32_t(c ^ (r & 7)) << 4); }

// The shared-memory ring of mma_tma_kernel: STAGES stages of a BN x 64 tile of W and an (8 MT) x 64 tile of x from a
// 1024-byte boundary (the swizzle's atom), then full[STAGES] and empty[STAGES] mbarriers.
template <int MT, int BN, int STAGES>
struct TmaRing {
    static constexpr int BK = 64, W_BYTES = BN * BK * 2, X_BYTES = 8 * MT * BK * 2, STAGE_BYTES = W_BYTES + X_BYTES;
    static constexpr int SMEM = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;  // + barriers + alignment slack
    static constexpr int CONSUMERS = BN / 16, THREADS = 32 * (CONSUMERS + 1);
    static_assert(BN % 16 == 0 && STAGE_BYTES % 1024 == 0, "stages must keep the 1024-byte alignment of the swizzle");
    uint8_t* base;
    uint64_t *full, *empty;
    __device__ __forceinline__ explicit TmaRing(uint8_t* raw) {
        base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
        full = reinterpret_cast<uint64_t*>(base + STAGES * STAGE_BYTES);
        empty = full + STAGES;
    }
    __device__ __forceinline__ uint8_t* w(int s) const { return base + s * STAGE_BYTES; }
    __device__ __forceinline__ uint8_t* x(int s) const { return base + s * STAGE_BYTES + W_BYTES; }
};

// The TMA rung: W no longer travels through registers. One producer lane streams BN x 64 tiles of W and (8 MT) x 64
// tiles of x into a ring of STAGES stages (TMA: rows past N or M and columns past K arrive as zeros); BN / 16
// consumer warps each own 16 channels and, per stage, read their A fragments (W) and the B fragments (x) with
// ldmatrix and issue 4 x MT mma.sync m16n8k16 (no K permutation: ldmatrix hands out the PTX fragment layout), then
// free the stage. Bytes in flight per CTA: STAGES x STAGE_BYTES, independent of the registers. Split blockIdx.y
// takes 64-element K blocks [split * blocks_per_split, +blocks_per_split); outputs as mma_kernel's.
// SPREAD (mma_tma_spread): CTA x walks its K blocks starting at block x * blocks / gridDim.x and wraps around, so
// that the CTAs in flight read different columns of W and different pieces of x at any moment instead of all asking
// for the same 2 KiB of x (at M = 16) from one L2 slice at once.
// CLUSTER = 2 (mma_tma_cluster): two CTAs side by side along N form a cluster and share x. For stage i the CTA of
// rank i % 2 loads x's tile once and multicasts it into the same stage of both CTAs; each CTA still loads its own
// W tile. Each full[s] expects the whole stage (its W, and x from whichever CTA loads it); each empty[s] waits for
// the consumers of both CTAs (every consumer warp arrives on its own and its partner's), since the next copy into
// stage s writes both. The cluster syncs after the barriers are set up and before either CTA exits, so no copy or
// arrival reaches a partner that is not there. Both CTAs walk the same K blocks in the same order (no SPREAD).
template <int MT, int BN, int STAGES, bool SPREAD, int CLUSTER = 1>
__global__ void __launch_bounds__(TmaRing<MT, BN, STAGES>::THREADS, 1)
mma_tma_kernel(const __grid_constant__ CUtensorMap tw, const __grid_constant__ CUtensorMap tx, bf16* y, float* ws, int M, int N,
               int K, int blocks_per_split) {
    static_assert(CLUSTER == 1 || !SPREAD, "the CTAs of a cluster share x's tiles: they must walk K in one order");
    using R = TmaRing<MT, BN, STAGES>;
    extern __shared__ uint8_t smem_raw[];
    const R ring(smem_raw);
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, n0 = blockIdx.x * BN, split = blockIdx.y;
    const int begin = split * blocks_per_split, end = min((K + R::BK - 1) / R::BK, begin + blocks_per_split);
    const int blocks = max(end - begin, 0);
    if (threadIdx.x == 32 * R::CONSUMERS) prefetch_map(&tw), prefetch_map(&tx);  // the producer lane, while lane 0 sets up
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) sm90::mbar_init(&ring.full[s], 1), sm90::mbar_init(&ring.empty[s], R::CONSUMERS * CLUSTER);
        sm90::fence_barrier_init();
    }
    if constexpr (CLUSTER > 1) sm90::cluster_sync();
    else __syncthreads();
    if (warp == R::CONSUMERS) {  // the producer: one lane, one stage per K block once its readers have freed it
        const int first = SPREAD && blocks > 0 ? int(int64_t(blockIdx.x) * blocks / gridDim.x) : 0;
        const uint32_t rank = CLUSTER > 1 ? sm90::cluster_ctarank() : 0;
        if (lane == 0)
            for (int i = 0; i < blocks; ++i) {
                const int s = i % STAGES, kb = begin + (first + i) % blocks;
                sm90::mbar_wait(&ring.empty[s], ((i / STAGES) & 1) ^ 1);
                sm90::mbar_arrive_expect_tx(&ring.full[s], R::STAGE_BYTES);
                sm90::tma_load_2d(ring.w(s), &tw, &ring.full[s], kb * R::BK, n0);
                if constexpr (CLUSTER == 1) sm90::tma_load_2d(ring.x(s), &tx, &ring.full[s], kb * R::BK, 0);
                else if (i % CLUSTER == int(rank))
                    sm90::tma_load_2d_multicast(ring.x(s), &tx, &ring.full[s], kb * R::BK, 0, uint16_t((1u << CLUSTER) - 1));
            }
    } else {
        float acc[MT][4] = {};
        for (int i = 0; i < blocks; ++i) {  // the stages in the producer's order (the K block does not matter here)
            const int s = i % STAGES;
            sm90::mbar_wait(&ring.full[s], (i / STAGES) & 1);
            const uint32_t sw = sm90::smem_u32(ring.w(s)), sx = sm90::smem_u32(ring.x(s));
#pragma unroll
            for (int ks = 0; ks < 4; ++ks) {
                uint32_t a0, a1, a2, a3;  // rows 16 warp + (lane % 16), chunk 2 ks + lane / 16: a0..a3 in m16n8k16's order
                ldsm_x4(sw + sw128(16 * warp + (lane & 15), 2 * ks + (lane >> 4)), a0, a1, a2, a3);
#pragma unroll
                for (int t = 0; t < MT; t += 2) {
                    uint32_t b[4];  // x rows 8 (t + lane / 16) + lane % 8, chunk 2 ks + (lane / 8) % 2: b0, b1 of n8 tiles t, t+1
                    const int row = 8 * (t + (lane >> 4)) + (lane & 7), chunk = 2 * ks + ((lane >> 3) & 1);
                    if constexpr (MT == 1) ldsm_x2(sx + sw128(row, chunk), b[0], b[1]);
                    else ldsm_x4(sx + sw128(row, chunk), b[0], b[1], b[2], b[3]);
                    mma_bf16(acc[t], a0, a1, a2, a3, b[0], b[1]);
                    if constexpr (MT > 1) mma_bf16(acc[t + 1], a0, a1, a2, a3, b[2], b[3]);
                }
            }
            __syncwarp();
            if (lane == 0) {
                if constexpr (CLUSTER == 1) sm90::mbar_arrive(&ring.empty[s]);
                else
#pragma unroll
                    for (int c = 0; c < CLUSTER; ++c) sm90::mbar_arrive_cluster(&ring.empty[s], uint32_t(c));
            }
        }
        store_acc<MT>(acc, n0 + 16 * warp, lane, y, ws, M, N, split);
    }
    if constexpr (CLUSTER > 1) sm90::cluster_sync();
}
// /kwiki:rung mma_tma

// kwiki:rung mma_wgmma
// d += A B^T on the warpgroup's tensor cores, one wgmma.m64n(8 MT)k16: A = 64 channels x 16 k of W and B = 8 MT rows x
// 16 k of x, both read from shared memory through descriptors (K-major, 128-byte swizzle), d = a 64 x 8 MT tile of y^T
// in fp32 registers. Its layout, per warp w of the warpgroup, is mma.sync m16n8's for channels 16 w .. 16 w + 15:
// d[mt][r] holds what acc[mt][r] of mma_tma_kernel holds, so store_acc writes both. Asynchronous: the registers are
// final only after wgmma_wait. MT = 8 is sm90.cuh's m64n64k16; MT = 1, 2, 4 are spelled out here.
template <int MT> __device__ __forceinline__ void wgmma_m64(float (&d)[MT][4], uint64_t da, uint64_t db);
template <> __device__ __forceinline__ void wgmma_m64<1>(float (&d)[1][4], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3])
                 : "l"(da), "l"(db), "r"(1));
}
template <> __device__ __forceinline__ void wgmma_m64<2>(float (&d)[2][4], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
                   "+f"(d[1][3])
                 : "l"(da), "l"(db), "r"(1));
}
template <> __device__ __forceinline__ void wgmma_m64<4>(float (&d)[4][4], uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
                 "%14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]),
                   "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), "+f"(d[3][0]), "+f"(d[3][1]),
                   "+f"(d[3][2]), "+f"(d[3][3])
                 : "l"(da), "l"(db), "r"(1));
}
template <> __device__ __forceinline__ void wgmma_m64<8>(float (&d)[8][4], uint64_t da, uint64_t db) {
    sm90::WgmmaOp<bf16, 64>::mma(reinterpret_cast<float(&)[32]>(d), da, db, 1);
}

// The wgmma rung: mma_tma_kernel's producer and ring (STAGES of BN x 64 tiles of W and (8 MT) x 64 tiles of x), with
// the consumers' synchronous ldmatrix + mma.sync replaced by warpgroups issuing asynchronous wgmma straight from the
// ring. BN / 64 warpgroups side by side along the channels, each owning 64 of them; KWG (1 or 2) such rows of
// warpgroups take turns over the K blocks (warpgroup row k consumes blocks i with i % KWG == k, so with STAGES a
// multiple of KWG each stage always has the same readers). A warpgroup issues a block's 4 wgmmas, commits them and
// waits until at most this group is in flight (wgmma_wait<1>): the previous block's wgmmas are then done and its stage
// is freed (each of the warpgroup's warps arrives on that stage's empty barrier, 4 BN / 64 arrivals a phase), so the
// tensor cores work on one block while the warps wait for the next. With KWG = 2 the second row hands its fp32 sums
// to the first through shared memory (the ring, whose every copy has landed and been read by then), which adds them
// in that fixed order and writes y. Splits along K as mma_tma_kernel's.
template <int MT, int BN, int STAGES, int KWG>
__global__ void __launch_bounds__(128 * (BN / 64) * KWG + 32, 1)
mma_wgmma_kernel(const __grid_constant__ CUtensorMap tw, const __grid_constant__ CUtensorMap tx, bf16* y, float* ws, int M, int N,
                 int K, int blocks_per_split) {
    using R = TmaRing<MT, BN, STAGES>;
    constexpr int WG_N = BN / 64, WGS = WG_N * KWG, CONSUMER_WARPS = 4 * WGS;
    static_assert(BN % 64 == 0 && (KWG == 1 || KWG == 2) && STAGES % KWG == 0, "64-channel warpgroups, 1 or 2 along K");
    static_assert(WG_N * MT * 4 * 128 * 4 <= STAGES * R::STAGE_BYTES, "the hand-off of the second row must fit the ring");
    extern __shared__ uint8_t smem_raw[];
    const R ring(smem_raw);
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, n0 = blockIdx.x * BN, split = blockIdx.y;
    const int begin = split * blocks_per_split, end = min((K + R::BK - 1) / R::BK, begin + blocks_per_split);
    const int blocks = max(end - begin, 0);
    if (threadIdx.x == 32 * CONSUMER_WARPS) prefetch_map(&tw), prefetch_map(&tx);
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) sm90::mbar_init(&ring.full[s], 1), sm90::mbar_init(&ring.empty[s], 4 * WG_N);
        sm90::fence_barrier_init();
    }
    __syncthreads();
    if (warp == CONSUMER_WARPS) {  // the producer, as mma_tma_kernel's (no spread, no cluster)
        if (lane == 0)
            for (int i = 0; i < blocks; ++i) {
                const int s = i % STAGES, kb = begin + i;
                sm90::mbar_wait(&ring.empty[s], ((i / STAGES) & 1) ^ 1);
                sm90::mbar_arrive_expect_tx(&ring.full[s], R::STAGE_BYTES);
                sm90::tma_load_2d(ring.w(s), &tw, &ring.full[s], kb * R::BK, n0);
                sm90::tma_load_2d(ring.x(s), &tx, &ring.full[s], kb * R::BK, 0);
            }
        return;
    }
    const int wg = warp / 4, cn = wg % WG_N, ck = wg / WG_N;  // this warpgroup's 64 channels and its turn along K
    float acc[MT][4] = {};
    int prev = -1;
    for (int i = ck; i < blocks; i += KWG) {
        const int s = i % STAGES;
        sm90::mbar_wait(&ring.full[s], (i / STAGES) & 1);
        const uint8_t *w = ring.w(s) + cn * 64 * 128, *xs = ring.x(s);
        sm90::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)  // 16 k (32 bytes) a step: the descriptor's start moves inside the swizzled row
            wgmma_m64<MT>(acc, sm90::desc_k_major_sw128(w + 32 * ks), sm90::desc_k_major_sw128(xs + 32 * ks));
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();  // the previous block's wgmmas are done: free its stage
        if (prev >= 0 && lane == 0) sm90::mbar_arrive(&ring.empty[prev]);
        prev = s;
    }
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 4; ++r) sm90::fence_operand(acc[mt][r]);
    if (prev >= 0 && lane == 0) sm90::mbar_arrive(&ring.empty[prev]);
    if constexpr (KWG == 2) {  // row 1 hands its sums to row 0, lane-contiguous: part[cn][mt][r][thread of the warpgroup]
        float* part = reinterpret_cast<float*>(ring.base);
        const int t = threadIdx.x % 128;
        sm90::named_barrier(1, 128 * WGS);  // every block consumed: every copy has landed and been read
        if (ck == 1)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int r = 0; r < 4; ++r) part[((cn * MT + mt) * 4 + r) * 128 + t] = acc[mt][r];
        sm90::named_barrier(1, 128 * WGS);
        if (ck == 1) return;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mt][r] += part[((cn * MT + mt) * 4 + r) * 128 + t];
    }
    store_acc<MT>(acc, n0 + 64 * cn + 16 * (warp % 4), lane, y, ws, M, N, split);
}
// /kwiki:rung mma_wgmma

// kwiki:rung mma_tuned
// y[i] = the splits' partial sums of output i (i = m*N + n), added in split order 0, 1, ...: deterministic.
__global__ void __launch_bounds__(256) reduce_splits_kernel(const float* ws, bf16* y, int outputs, int splits) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < outputs; i += gridDim.x * blockDim.x) {
        float s = 0;
        for (int sp = 0; sp < splits; ++sp) s += ws[size_t(sp) * outputs + i];
        y[i] = __float2bfloat16_rn(s);
    }
}
// /kwiki:rung mma_tuned

// fma_rows, not a tensor-core rung: what the GEMV page's kernel (gemv_bf16_sm90a's block of rows) becomes for M rows of
// x, the CUDA-core side of the crossover over M. T threads share R rows of W and walk K in 16-byte chunks (thread i
// takes chunks i, i + T, ...), U chunks of each row loaded before any is used; each chunk of W, converted to fp32 once,
// meets the same chunk of every row of x (loads kept in L1) in fp32 FMAs. W is read once whatever M is; the FMAs and
// x's loads grow with M. Rows of W past N re-read the last row (their sums are not stored); the R x 8 MT sums are added
// across the block in a fixed order (kwiki::block_sum_rows). K is a multiple of 8 (16-byte chunks).
__device__ __forceinline__ void bf16x8_to_f32(const uint4& v, float (&f)[8]) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 t = __bfloat1622float2(h[i]);
        f[2 * i] = t.x, f[2 * i + 1] = t.y;
    }
}

// s[r][m] += the chunk's 8 products of W's row r (wf, fp32) and x's row m, for every row m < M.
template <int MC, int R>
__device__ __forceinline__ void fma_chunk(float (&s)[R][MC], const float (&wf)[R][8], const bf16* x, int K, int k0, int M) {
#pragma unroll
    for (int m = 0; m < MC; ++m) {
        if (m >= M) break;
        float xf[8];
        bf16x8_to_f32(ld_x(x + size_t(m) * K + k0), xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int e = 0; e < 8; ++e) s[r][m] = fmaf(wf[r][e], xf[e], s[r][m]);
    }
}

template <int MT, int R, int U, int T>
__global__ void __launch_bounds__(T, 1) fma_rows_kernel(const bf16* W, const bf16* x, bf16* y, float*, int M, int N, int K, int) {
    constexpr int MC = 8 * MT, WARPS = T / 32;
    static_assert(R * MC <= T, "block_sum_rows hands one sum to each of the first R x MC threads");
    __shared__ float part[WARPS][R * MC];
    const int n0 = blockIdx.x * R, rows = min(R, N - n0), K8 = K / 8;
    const bf16* w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = W + size_t(n0 + min(r, rows - 1)) * K;
    float s[R][MC] = {};
    int j = threadIdx.x;
#pragma unroll 1
    for (; j + (U - 1) * T < K8; j += U * T) {
        uint4 wv[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r) wv[u][r] = ld_w(w[r] + 8 * (j + u * T));
#pragma unroll
        for (int u = 0; u < U; ++u) {
            float wf[R][8];
#pragma unroll
            for (int r = 0; r < R; ++r) bf16x8_to_f32(wv[u][r], wf[r]);
            fma_chunk<MC, R>(s, wf, x, K, 8 * (j + u * T), M);
        }
    }
#pragma unroll 1
    for (; j < K8; j += T) {  // the last partial round, one chunk at a time
        float wf[R][8];
#pragma unroll
        for (int r = 0; r < R; ++r) bf16x8_to_f32(ld_w(w[r] + 8 * j), wf[r]);
        fma_chunk<MC, R>(s, wf, x, K, 8 * j, M);
    }
    const float (&flat)[R * MC] = reinterpret_cast<const float (&)[R * MC]>(s);
    const float t = kwiki::block_sum_rows<R * MC, WARPS>(flat, part, threadIdx.x, threadIdx.x & 31, threadIdx.x / 32);
    const int r = int(threadIdx.x) / MC, m = int(threadIdx.x) % MC;
    if (int(threadIdx.x) < R * MC && r < rows && m < M) y[size_t(m) * N + n0 + r] = __float2bfloat16_rn(t);
}

// ===================================================================================================
// Launchers
// ===================================================================================================

struct Shape {
    int M, N, K;
};

constexpr int kMaxSplits = 4;  // the workspace holds this many splits of y in fp32

struct Problem {
    int M, N, K;
    const bf16 *W, *x;
    bf16* y;
    float* ws;  // kMaxSplits x M x N floats
    kwiki::cublasHandle_t blas;
};

using Kernel = void (*)(const bf16*, const bf16*, bf16*, float*, int, int, int, int);
using TmaKernel = void (*)(CUtensorMap, CUtensorMap, bf16*, float*, int, int, int, int);

// One configuration: the kernel for each MT (1, 2, 4, 8 n8 tiles of x), channels per CTA (16 NT), threads, splits.
// A TMA configuration (stages > 0) has tma[] instead of kernel[]: NT x 16 channels per CTA, `warps` consumer warps
// plus the producer's, a ring of `stages` K blocks of 64, `smem` bytes of dynamic shared memory per MT, clusters of
// `cluster` CTAs.
struct Launch {
    Kernel kernel[4];
    int nt, warps, u, splits;
    TmaKernel tma[4] = {};
    int stages = 0, smem[4] = {}, cluster = 1;  // cluster: CTAs along N sharing x's tiles (grid.x rounded up to it)
    int kwg = 0;  // > 0: tma[] holds mma_wgmma_kernel, with this many rows of warpgroups taking turns along K
    int rows[4] = {};  // > 0: kernel[] holds fma_rows_kernel, with this many rows of W per CTA (per MT)
};

template <int NT, int WARPS, int U, int SPLITS>
constexpr Launch mma_cfg() {
    return {{mma_kernel<1, NT, WARPS, U>, mma_kernel<2, NT, WARPS, U>, mma_kernel<4, NT, WARPS, U>, mma_kernel<8, NT, WARPS, U>},
            NT, WARPS, U, SPLITS};
}

// fma_rows: the CUDA-core kernel: R rows of W per CTA of 256 threads, 2 chunks of each row in flight; R shrinks as M
// grows so that the R x 8 MT sums of a thread stay at 64 registers or fewer (R = 4 up to M = 16, 2 to 32, 1 to 64).
constexpr Launch fma_cfg() {
    Launch l{{fma_rows_kernel<1, 4, 2, 256>, fma_rows_kernel<2, 4, 2, 256>, fma_rows_kernel<4, 2, 2, 256>,
              fma_rows_kernel<8, 1, 2, 256>}, 0, 8, 2, 1};
    l.rows[0] = 4, l.rows[1] = 4, l.rows[2] = 2, l.rows[3] = 1;
    return l;
}

// kwiki:rung mma_tma
// STAGES, or fewer where that many stages of BN rows of W and 8 MT rows of x would not fit the 227 KiB of shared
// memory a CTA may have (M = 64 with 16 stages), rounded down to a multiple of KWG (mma_wgmma_kernel's rows).
constexpr int fit(int MT, int BN, int STAGES, int KWG = 1) {
    const int stage = (BN + 8 * MT) * 128, most = (227 * 1024 - 2048) / stage;
    return (STAGES < most ? STAGES : most) / KWG * KWG;
}

template <int MT, int BN, int STAGES, bool SPREAD, int CLUSTER>
constexpr void set_tma(Launch& l, int i) {
    constexpr int S = fit(MT, BN, STAGES);
    l.tma[i] = mma_tma_kernel<MT, BN, S, SPREAD, CLUSTER>, l.smem[i] = TmaRing<MT, BN, S>::SMEM;
}

template <int BN, int STAGES, int SPLITS, bool SPREAD = false, int CLUSTER = 1>
constexpr Launch tma_cfg() {
    Launch l{{}, BN / 16, BN / 16, 0, SPLITS};
    set_tma<1, BN, STAGES, SPREAD, CLUSTER>(l, 0), set_tma<2, BN, STAGES, SPREAD, CLUSTER>(l, 1);
    set_tma<4, BN, STAGES, SPREAD, CLUSTER>(l, 2), set_tma<8, BN, STAGES, SPREAD, CLUSTER>(l, 3);
    l.stages = STAGES, l.cluster = CLUSTER;
    return l;
}
// /kwiki:rung mma_tma

// kwiki:rung mma_wgmma
template <int MT, int BN, int STAGES, int KWG>
constexpr void set_wgmma(Launch& l, int i) {
    constexpr int S = fit(MT, BN, STAGES, KWG);
    l.tma[i] = mma_wgmma_kernel<MT, BN, S, KWG>, l.smem[i] = TmaRing<MT, BN, S>::SMEM;
}

// The TMA ring read by wgmma: BN / 64 x KWG consumer warpgroups (4 warps each) and the producer's warp.
template <int BN, int STAGES, int SPLITS, int KWG = 1>
constexpr Launch wgmma_cfg() {
    Launch l{{}, BN / 16, 4 * (BN / 64) * KWG, 0, SPLITS};
    set_wgmma<1, BN, STAGES, KWG>(l, 0), set_wgmma<2, BN, STAGES, KWG>(l, 1);
    set_wgmma<4, BN, STAGES, KWG>(l, 2), set_wgmma<8, BN, STAGES, KWG>(l, 3);
    l.stages = STAGES, l.kwg = KWG;
    return l;
}
// /kwiki:rung mma_wgmma

// Which instantiation serves M: MT = ceil(M/8) rounded up to 1, 2, 4 or 8.
int mt_index(int M) { return M <= 8 ? 0 : M <= 16 ? 1 : M <= 32 ? 2 : 3; }

// kwiki:rung mma_tuned
// Configurations (channels per CTA / 16, warps, chunks in flight per warp, K splits across CTAs) that --sweep times
// one by one, and that the selection pass of `mma_tuned` times, in samples of its own. NT = 2 keeps U <= 2: with
// MT = 8 its accumulators and loads in flight would not fit the registers.
using Config = kwiki::GemvConfig<Launch>;
const std::vector<Config>& configs() {
    static const std::vector<Config> c = {
        {"n1_w8_u2_s1", mma_cfg<1, 8, 2, 1>()}, {"n1_w8_u4_s1", mma_cfg<1, 8, 4, 1>()},
        {"n1_w4_u4_s1", mma_cfg<1, 4, 4, 1>()}, {"n2_w8_u2_s1", mma_cfg<2, 8, 2, 1>()},
        {"n2_w4_u2_s1", mma_cfg<2, 4, 2, 1>()}, {"n1_w8_u2_s2", mma_cfg<1, 8, 2, 2>()},
        {"n1_w4_u4_s2", mma_cfg<1, 4, 4, 2>()}, {"n2_w8_u2_s2", mma_cfg<2, 8, 2, 2>()},
        {"n2_w4_u2_s2", mma_cfg<2, 4, 2, 2>()}, {"n1_w4_u2_s4", mma_cfg<1, 4, 2, 4>()},
        {"n1_w8_u1_s4", mma_cfg<1, 8, 1, 4>()}, {"n2_w4_u2_s4", mma_cfg<2, 4, 2, 4>()},
        {"n2_w8_u1_s4", mma_cfg<2, 8, 1, 4>()},
        // the TMA ring: t<channels per CTA>_r<stages>_s<splits> (the K walk not spread: spreading it measured slower)
        {"t64_r12_s1", tma_cfg<64, 12, 1>()}, {"t64_r16_s1", tma_cfg<64, 16, 1>()},
        {"t64_r20_s1", tma_cfg<64, 20, 1>()}, {"t64_r12_s2", tma_cfg<64, 12, 2>()},
        {"t64_r8_s4", tma_cfg<64, 8, 4>()},   {"t32_r12_s1", tma_cfg<32, 12, 1>()},
        {"t32_r8_s2", tma_cfg<32, 8, 2>()},   {"t128_r8_s1", tma_cfg<128, 8, 1>()},
        // clusters of 2 CTAs sharing x's tiles: t<channels>_r<stages>_c2_s<splits>
        {"t64_r12_c2_s1", tma_cfg<64, 12, 1, false, 2>()}, {"t64_r16_c2_s1", tma_cfg<64, 16, 1, false, 2>()},
        {"t32_r12_c2_s1", tma_cfg<32, 12, 1, false, 2>()}, {"t64_r12_c2_s2", tma_cfg<64, 12, 2, false, 2>()},
        // the ring read by wgmma warpgroups: g<channels>_r<stages>[_k2: two rows of warpgroups taking turns along K]_s<splits>
        {"g64_r12_s1", wgmma_cfg<64, 12, 1>()},      {"g64_r16_s1", wgmma_cfg<64, 16, 1>()},
        {"g64_r12_k2_s1", wgmma_cfg<64, 12, 1, 2>()}, {"g64_r16_k2_s1", wgmma_cfg<64, 16, 1, 2>()},
        {"g128_r8_s1", wgmma_cfg<128, 8, 1>()},     {"g64_r12_s2", wgmma_cfg<64, 12, 2>()},
        {"g64_r12_k2_s2", wgmma_cfg<64, 12, 2, 2>()}, {"g64_r8_s4", wgmma_cfg<64, 8, 4>()},
    };
    return c;
}
// /kwiki:rung mma_tuned

Launch config(const char* name) { return kwiki::find_config(configs(), name); }

// The kernel of M's MT on a grid of ceil(N / 16 NT) x splits CTAs; with splits, then the reduction into y.
void run_kernel(const Launch& l, const Problem& p, cudaStream_t s) {
    const int mi = mt_index(p.M), per_cta = l.rows[mi] ? l.rows[mi] : 16 * l.nt;  // rows of W (channels) per CTA
    const dim3 grid((p.N + per_cta - 1) / per_cta, l.splits);
    if (l.stages == 0) {
        const int chunks = (p.K + 31) / 32, per_split = (chunks + l.splits - 1) / l.splits;
        l.kernel[mi]<<<grid, 32 * l.warps, 0, s>>>(p.W, p.x, p.y, p.ws, p.M, p.N, p.K, per_split);
        KWIKI_CHECK_LAST();
    }
    // kwiki:rung mma_tma
    else {  // tensor maps of this input set: W in boxes of 16 NT rows x 64, x in (8 MT) x 64 (rows past M read zeros)
        const int blocks = (p.K + 63) / 64, per_split = (blocks + l.splits - 1) / l.splits;
        const CUtensorMap tw = sm90::tensor_map_2d(p.W, uint64_t(p.N), uint64_t(p.K), uint32_t(16 * l.nt), 64);
        const CUtensorMap tx = sm90::tensor_map_2d(p.x, uint64_t(p.M), uint64_t(p.K), uint32_t(8 << mi), 64);
        KWIKI_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(l.tma[mi]), cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem[mi]));
        cudaLaunchConfig_t cfg{};
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = unsigned(l.cluster), attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
        cfg.gridDim = dim3((grid.x + l.cluster - 1) / l.cluster * l.cluster, grid.y);  // a whole number of clusters
        cfg.blockDim = dim3(32 * (l.warps + 1)), cfg.dynamicSmemBytes = size_t(l.smem[mi]), cfg.stream = s;
        cfg.attrs = &attr, cfg.numAttrs = l.cluster > 1 ? 1 : 0;
        KWIKI_CHECK(cudaLaunchKernelEx(&cfg, l.tma[mi], tw, tx, p.y, p.ws, p.M, p.N, p.K, per_split));
    }
    // /kwiki:rung mma_tma
    // kwiki:rung mma_tuned
    if (l.splits == 1) return;
    const int outputs = p.M * p.N;
    reduce_splits_kernel<<<(outputs + 255) / 256, 256, 0, s>>>(p.ws, p.y, outputs, l.splits);
    KWIKI_CHECK_LAST();
    // /kwiki:rung mma_tuned
}

// kwiki:rung cublas
// y[M,N] = x[M,K] W[N,K]^T: the TN GEMM of kwiki_cublas.cuh, what torch.mm(x, W.t()) and F.linear(x, W) call.
void run_cublas(const Problem& p, cudaStream_t s) { kwiki::gemm_tn(p.blas, p.x, p.W, p.y, p.M, p.N, p.K, kwiki::kGemmBf16, s); }
// /kwiki:rung cublas

// kwiki:rung cublaslt_best
// The same through cuBLASLt with candidate algorithm i of the shape's heuristic list.
void run_cublaslt(const kwiki::LtGemmTn& g, int i, const Problem& p, cudaStream_t s) { g.run(i, p.x, p.W, p.y, s); }
// /kwiki:rung cublaslt_best

enum class Kind { Kernel, Tuned, Cublas, CublasLt, Ceiling };

// A row of the table of variants: what it launches (a configuration, for Kind::Kernel).
struct Variant : kwiki::VariantInfo {
    Kind kind;
    Launch launch;
};

using Todo = kwiki::GemvTodo<Kind, Launch>;
using Run = std::function<void(const Problem&, cudaStream_t)>;  // a variant's launch on the current input set

Run kernel_run(Launch l) { return [l](const Problem& p, cudaStream_t s) { run_kernel(l, p, s); }; }

// The selection passes of one shape: every configuration (mma_tuned) and every cuBLASLt candidate (cublaslt_best),
// each candidate a case that bind(case, run) completes, checked and timed on `selector`.
struct Selections {
    kwiki::Selection tuned, lt_best;
    std::string tuned_name;
    std::unique_ptr<kwiki::LtGemmTn> ltg;

    template <class Bind>
    Selections(kwiki::Runner& selector, const std::vector<Todo>& todo, const kwiki::BlasHandles& lib, const Shape& sh, Bind bind) {
        auto want_kind = [&](Kind k) { return std::any_of(todo.begin(), todo.end(), [k](const Todo& t) { return t.kind == k; }); };
        // kwiki:rung mma_tuned
        if (want_kind(Kind::Tuned)) {
            tuned = kwiki::select_config(selector, configs(), [&](kwiki::Case& c, Launch l) { bind(c, kernel_run(l)); });
            if (tuned.index >= 0) tuned_name = configs()[size_t(tuned.index)].name;
        }
        // /kwiki:rung mma_tuned
        // kwiki:rung cublaslt_best
        if (!want_kind(Kind::CublasLt)) return;
        ltg = std::make_unique<kwiki::LtGemmTn>(lib.lt, sh.M, sh.N, sh.K, kwiki::kGemmBf16, 8);
        std::vector<kwiki::Case> cand;
        for (int i = 0; i < ltg->algos(); ++i) {
            kwiki::Case c;
            c.variant = "select_cublaslt_" + std::to_string(i);
            bind(c, [g = ltg.get(), i](const Problem& p, cudaStream_t s) { run_cublaslt(*g, i, p, s); });
            cand.push_back(std::move(c));
        }
        lt_best = kwiki::select_fastest(selector, cand);
        // /kwiki:rung cublaslt_best
    }
};

// A ladder variant's case at `params`: its run (mma_tuned: the selection's configuration; cublaslt_best: the
// heuristic's fastest candidate), completed by bind(case, run), and what its record adds (registers, occupancy,
// threads, channels per CTA, chunks in flight, splits; what a selection chose and from how many).
template <class Bind>
kwiki::Case ladder_case(const Todo& v, const Selections& sel, const Shape& sh, const kwiki::Fields& params, Bind bind) {
    kwiki::Case c = kwiki::named_case(v.name, params);
    const kwiki::Selection& chosen = v.kind == Kind::Tuned ? sel.tuned : sel.lt_best;
    if ((v.kind == Kind::Tuned || v.kind == Kind::CublasLt) && chosen.index < 0) {  // no candidate passed (or --check-only)
        kwiki::nothing_selected(c, "no candidate of the selection pass passed its check and was timed");
        return c;
    }
    const Launch l = v.kind == Kind::Tuned ? config(sel.tuned_name.c_str()) : v.launch;
    const bool library = v.kind == Kind::Cublas || v.kind == Kind::CublasLt;
    if (v.kind == Kind::Cublas) bind(c, [](const Problem& p, cudaStream_t s) { run_cublas(p, s); });
    else if (v.kind == Kind::CublasLt)
        bind(c, [g = sel.ltg.get(), i = sel.lt_best.index](const Problem& p, cudaStream_t s) { run_cublaslt(*g, i, p, s); });
    else bind(c, kernel_run(l));
    if (!library && l.rows[mt_index(sh.M)]) c.flops_dtype = "fp32";  // fma_rows: fp32 FMAs on the CUDA cores
    if (!library) {
        const int mi = mt_index(sh.M), threads = 32 * (l.warps + (l.stages ? 1 : 0));
        if (l.stages) {
            KWIKI_CHECK(cudaFuncSetAttribute(reinterpret_cast<const void*>(l.tma[mi]), cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem[mi]));
            kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(l.tma[mi]), threads, size_t(l.smem[mi]));
            c.extra.emplace_back("stages", fit(1 << mi, 16 * l.nt, l.stages, l.kwg ? l.kwg : 1));
            c.extra.emplace_back("cluster", l.cluster);
            c.extra.emplace_back("consumer", l.kwg ? "wgmma warpgroups" : "ldmatrix + mma.sync warps");
        } else {
            kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(l.kernel[mi]), threads);
            c.extra.emplace_back("chunks_in_flight", l.u);
        }
        c.extra.emplace_back("threads", threads);
        c.extra.emplace_back("channels_per_block", l.rows[mi] ? l.rows[mi] : 16 * l.nt);
        c.extra.emplace_back("splits", l.splits);
    }
    if (v.kind == Kind::Tuned || v.kind == Kind::CublasLt) {
        if (v.kind == Kind::Tuned) c.extra.emplace_back("selected", sel.tuned_name);
        else c.extra.emplace_back("selected", "heuristic algorithm " + std::to_string(chosen.index));
        c.extra.emplace_back("selected_from", chosen.tried);
        if (chosen.median_us) c.extra.emplace_back("selection_median_us", *chosen.median_us);
    }
    return c;
}

// --shapes: MxNxK triples, M from 1 to 64 (at most 8 n8 tiles of x), N >= 1, K a multiple of 8 (16-byte rows); a
// shape outside them exits 2 naming it and the rule it breaks, before any CUDA call.
std::vector<Shape> parse_shapes(const kwiki::Args& args) {
    return args.get_shapes<Shape, 3>("shapes", "", "MxNxK triples with M from 1 to 64 and K a multiple of 8", [](const std::vector<int>& d) {
        const std::string at = "--shapes: " + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) + ": ";
        if (d[0] > 64) kwiki::Args::usage(at + "M must be from 1 to 64 (at most 8 n8 tiles of x)");
        if (d[2] % 8) kwiki::Args::usage(at + "K must be a multiple of 8 (rows are read in 16-byte vectors)");
        return d[0] >= 1 && d[1] >= 1;  // the parser refuses sizes below 1 already
    });
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr Variant kVariants[] = {
    {{"mma_warp"}, Kind::Kernel, mma_cfg<1, 8, 1, 1>()},
    // kwiki:rung mma_ring
    {{"mma_ring"}, Kind::Kernel, mma_cfg<1, 8, 4, 1>()},
    // /kwiki:rung mma_ring
    // kwiki:rung mma_tma
    {{"mma_tma"}, Kind::Kernel, tma_cfg<64, 12, 1>()},
    // /kwiki:rung mma_tma
    // kwiki:rung mma_tma_spread
    {{"mma_tma_spread"}, Kind::Kernel, tma_cfg<64, 12, 1, true>()},
    // /kwiki:rung mma_tma_spread
    // kwiki:rung mma_tma_cluster
    {{"mma_tma_cluster"}, Kind::Kernel, tma_cfg<64, 12, 1, false, 2>()},
    // /kwiki:rung mma_tma_cluster
    // kwiki:rung mma_wgmma
    {{"mma_wgmma"}, Kind::Kernel, wgmma_cfg<64, 12, 1>()},
    // /kwiki:rung mma_wgmma
    {{"mma_tuned"}, Kind::Tuned, {}},
    {{"fma_rows"}, Kind::Kernel, fma_cfg()},  // not a rung: the CUDA-core side of the crossover over M
    {{"cublas"}, Kind::Cublas, {}},
    {{"cublaslt_best"}, Kind::CublasLt, {}},
    {{"read_ceiling"}, Kind::Ceiling, {}},  // not a rung: the speed of light, from the run's read roof
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::GemvMain<Shape> m(argc, argv, kVariants, "decode_mma", parse_shapes);
    const kwiki::BlasHandles lib(m.args.want("cublas"), m.args.want("cublaslt_best"));  // loaded only for their variants
    kwiki::Runner runner(m.args);
    const auto selector = kwiki::selection_runner(m.args);  // the selection passes: samples of their own, no records
    const auto roof = kwiki::gemv_roof(runner, m.args, m.seed, "read_ceiling");  // the read roof, swept once
    const auto todo = kwiki::gemv_todo(m.args, kVariants, configs(), Kind::Kernel, [](const Variant& v) { return v.kind != Kind::Ceiling; });
    for (const Shape& sh : m.shapes) {
        const int M = sh.M, N = sh.N, K = sh.K;
        const size_t outputs = size_t(M) * N;
        kwiki::DeviceBuffer<bf16> y(outputs + kwiki::kCanary);
        kwiki::DeviceBuffer<float> ws(size_t(kMaxSplits) * outputs);
        kwiki::set_canary(y.get(), outputs);  // y[M*N..M*N+kCanary) must stay as set (kwiki_gemv.cuh)
        kwiki::InputSets<Inputs> in(m.sets, m.seed + uint64_t(M) * 1000003u + uint64_t(N) * 7919u + K,
                                    [&](Inputs& s, uint64_t seed) { s.fill(M, N, K, seed); });
        const double bytes = double(size_t(N) * K + size_t(M) * K + outputs) * sizeof(bf16);  // W + x + y
        const std::string shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
        const kwiki::Fields params = {{"shape", shape}, {"M", M}, {"N", N}, {"K", K}, {"dtype", "bf16"}};
        // what every case of this shape shares: bytes, flops, the launch on the current set, poison, the check, the sets
        auto bind = [&](kwiki::Case& c, Run run) {
            c.params = params, c.bytes = bytes, c.flops = 2.0 * double(M) * N * K, c.flops_dtype = "bf16";
            c.launch = [&, run](cudaStream_t s) { run(Problem{M, N, K, in.current().W.get(), in.current().x.get(), y.get(), ws.get(), lib.blas}, s); };
            in.bind(c, [&y, outputs](cudaStream_t s) { kwiki::poison(y.get(), outputs * sizeof(bf16), s); },
                    [&y, M, N, K](const Inputs& set) { return check_y(y.get(), M, N, K, set); });
        };
        const Selections sel(*selector, todo, lib, sh, bind);
        std::vector<kwiki::Case> cases;
        for (const Todo& v : todo) cases.push_back(ladder_case(v, sel, sh, params, bind));
        kwiki::run_shape(runner, cases, roof.get(), "read_ceiling", params, bytes);
    }
    return kwiki::exit_code();
}
