// kwiki_ws_gemm.cuh: one CTA of a warp-specialized GEMM for Hopper, written out in PTX over sm90.cuh with no CUTLASS,
// for any schedule of output tiles: one GEMM's tiles in grouped order (fp8_gemm_sm90a's fp8_ws.cu), the tiles of
// every expert of a grouped GEMM (moe_grouped_gemm_bf16_sm90a's ws_grouped.cu), or pieces of tiles, each a range of
// k-blocks (Stream-K: stream_k_gemm_sm90a's streamk_ws.cu). Two CTAs: gemm_cta for e4m3 operands with promotion and
// scales, gemm_cta_bf16 for bf16 ones. Includes sm90.cuh.
//
// C (bf16, row-major) = A B^T (fp8: dequant(A) dequant(B)^T), A [rows, K] and B [rows_b, K], both K-major (the only
// layout fp8 wgmma reads; bf16 takes it too), fp32 accumulation. A persistent CTA walks the schedule's tiles
// t = blockIdx.x, + gridDim.x, ... Warpgroup 0 produces: one thread issues TMA loads of 128 x 128-byte boxes of A and
// BN x 128-byte boxes of B (a k-block: 128 bytes of K, the width of the 128-byte swizzle: 128 e4m3 or 64 bf16
// elements) into a ring of stages. Warpgroups 1 and 2 consume, 64 rows of the tile each (setmaxnreg moves registers
// from the producer, 40, to them, 232).
//
// e4m3 (gemm_cta): a k-block is four m64nBNk32 wgmma into a fresh partial accumulator (the first with scale-d 0),
// waited for, its stage freed, then folded into fp32 totals. The fold is the promotion: no partial sum sees more than
// 128 products in the tensor cores' limited-precision adder (DeepSeek-V3, section 3.3.2). While one consumer folds,
// the other's wgmma keep the tensor cores busy.
// bf16 (gemm_cta_bf16): a k-block is four m64nBNk16 wgmma into the totals themselves; each consumer keeps one
// k-block's wgmma in flight (wait_group 1) and frees the stage before it, as the bf16 warp-specialized GEMM of
// gemm_bf16_sm90a does (its ws_persistent rung).
// Past the operands' edges TMA reads zeros; the schedule's row_end and the column count guard the stores.
//
#pragma once

#include <cuda_bf16.h>

#include "sm90.cuh"

namespace kwiki {
namespace wsgemm {

constexpr int BM = 128;           // the tile's rows: two consumer warpgroups of 64
constexpr int BK = 128;           // a k-block: one 128-byte swizzle row of e4m3 codes; the promotion interval
constexpr int WK = 32;            // one wgmma k-step: 32 bytes of K
constexpr int CONSUMERS = 2, ROWS = BM / CONSUMERS;
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr int GROUP_M = 8;        // tile-rows a band of the grouped order
constexpr int SCALE_BLOCK = 128;  // B's block scales: one per 128 x 128 block
constexpr int SMEM_LIMIT = 227 * 1024;
constexpr int STATIC_SMEM = 4096;  // what a kernel may keep in static shared memory beside the ring (a schedule's)

// A tile BN columns wide. Each consumer thread holds BN / 2 fp32 totals and as many partials: 128 or 192 registers
// of the 232 that setmaxnreg gives it.
template <int BN_>
struct Tile {
    static constexpr int BN = BN_;
    static constexpr int A_BYTES = BM * BK, B_BYTES = BN * BK, STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int STAGES = (SMEM_LIMIT - STATIC_SMEM - 1024) / STAGE_BYTES;  // as many as fit: 6 at 128, 5 at 192
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;  // + barriers, alignment slack
    static constexpr int ACC = BN / 2;  // fp32 accumulators a thread holds for one m64 x BN block
    static_assert(BN == 128 || BN == 192, "the wgmma shapes written out below");
    static_assert(SMEM_BYTES + STATIC_SMEM <= SMEM_LIMIT, "the ring fits a CTA's shared memory");
};

enum Scaling { TENSOR = 0, BLOCK = 1, ROW = 2 };

// One output tile: A's rows from a_row (128 of them), B's rows from b_row (BN), C's rows from a_row stored while below
// row_end, C's columns from col0; group: the expert (0 for one GEMM), which picks the B scales. A job covers the tile's
// k-blocks kb0 up to kb1 (clamped to K's): the whole of K unless the schedule splits tiles (Stream-K); a job with no
// k-block in its range is skipped by every role (a schedule may pad its jobs with empty ones).
struct Job {
    int a_row, b_row, row_end, col0, group;
    int kb0 = 0, kb1 = 1 << 30;
};

// The scales and the sizes their layouts need: rows of A (sa's stride in BLOCK), n columns of C (and of each group's
// B), k_blocks = ceil(K / 128).
struct Scales {
    const float* sa;
    const float* sb;
    int rows, n, k_blocks;
};

// The accumulator operands of one m64nNk32 wgmma, "+f"(d[i]) for i in [i, i + 32).
#define KWIKI_FP8_ACC8(i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define KWIKI_FP8_ACC32(i) KWIKI_FP8_ACC8(i), KWIKI_FP8_ACC8(i + 8), KWIKI_FP8_ACC8(i + 16), KWIKI_FP8_ACC8(i + 24)

// d (+)= A B^T for one m64nNk32 step: A and B e4m3, K-major in shared memory (descriptors da, db), fp32 d in the
// wgmma accumulator layout (thread t of the warpgroup: rows 16 (t / 32) + (t % 32) / 4 and + 8, columns
// 8j + 2 (t % 4) + {0, 1} in d[4j + {0, 1}] and d[4j + {2, 3}]). scale_d 0: d = A B^T, else d += A B^T. 8-bit
// operands take no transpose flags; imm-scale-a and -b are 1 (not negated). Placeholders: the N / 2 accumulators,
// then da, db and scale_d.
template <int N> __device__ __forceinline__ void mma_e4m3(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d);

template <> __device__ __forceinline__ void mma_e4m3<128>(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1;\n}\n"
                 : KWIKI_FP8_ACC32(0), KWIKI_FP8_ACC32(32)
                 : "l"(da), "l"(db), "r"(scale_d));
}

template <> __device__ __forceinline__ void mma_e4m3<192>(float (&d)[96], uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                 "}, %96, %97, p, 1, 1;\n}\n"
                 : KWIKI_FP8_ACC32(0), KWIKI_FP8_ACC32(32), KWIKI_FP8_ACC32(64)
                 : "l"(da), "l"(db), "r"(scale_d));
}

#undef KWIKI_FP8_ACC32
#undef KWIKI_FP8_ACC8

__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// Tile l of a tiles_m x tiles_n grid in grouped order: bands of GROUP_M tile-rows, down the rows of a band first, then
// across its columns, so the CTAs working at one time share rows of A and columns of B in L2.
__host__ __device__ inline void grouped_tile(int l, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_band = GROUP_M * tiles_n, band = l / per_band, first = band * GROUP_M;
    const int rows = GROUP_M < tiles_m - first ? GROUP_M : tiles_m - first, r = l - band * per_band;
    tm = first + r % rows;
    tn = r / rows;
}

// One GEMM's tiles, 128 x BN, in grouped order: the schedule of a plain (not grouped) GEMM with M rows.
template <int BN>
struct Dense {
    int M, tiles_m, tiles_n;
    __host__ __device__ Dense(int m, int n) : M(m), tiles_m((m + BM - 1) / BM), tiles_n((n + BN - 1) / BN) {}
    __host__ __device__ int tiles() const { return tiles_m * tiles_n; }
    __host__ __device__ Job job(int t) const {
        int tm, tn;
        grouped_tile(t, tiles_m, tiles_n, tm, tn);
        return {tm * BM, tn * BN, M, tn * BN, 0};
    }
};

// The ring in dynamic shared memory, carved from a 1024-byte boundary (the 128-byte swizzle's atom): STAGES A boxes,
// STAGES B boxes, then the full[STAGES] and empty[STAGES] mbarriers. full[s] completes on the producer's arrival and
// the stage's bytes, empty[s] on one arrival of each consumer warpgroup once its wgmma have read the stage.
template <class T>
struct Ring {
    uint8_t *sA, *sB;
    uint64_t *full, *empty;

    // Carved and initialized by thread 0, seen by every thread after the barrier.
    __device__ __forceinline__ Ring() {
        extern __shared__ uint8_t smem_raw[];
        sA = align1024(smem_raw);
        sB = sA + T::STAGES * T::A_BYTES;
        full = reinterpret_cast<uint64_t*>(sB + T::STAGES * T::B_BYTES);
        empty = full + T::STAGES;
        if (threadIdx.x == 0) {
            for (int s = 0; s < T::STAGES; ++s) {
                sm90::mbar_init(&full[s], 1);
                sm90::mbar_init(&empty[s], CONSUMERS);
            }
            sm90::fence_barrier_init();
        }
        __syncthreads();
    }

    // The producer, one thread: every tile's k-blocks (BK_ELEMS elements of K each) into the next stage once both
    // consumers have freed it. Stage and phase run on across tiles, so it loads the next tile while the consumers
    // finish and store this one.
    template <int BK_ELEMS, class Schedule>
    __device__ __forceinline__ void produce(const CUtensorMap* tmA, const CUtensorMap* tmB, const Schedule& sched,
                                            int k_blocks) const {
        int stage = 0;
        uint32_t phase = 0;
        for (int t = blockIdx.x; t < sched.tiles(); t += gridDim.x) {
            const Job j = sched.job(t);
            for (int kb = j.kb0, end = min(j.kb1, k_blocks); kb < end; ++kb) {
                sm90::mbar_wait(&empty[stage], phase ^ 1);
                sm90::mbar_arrive_expect_tx(&full[stage], T::STAGE_BYTES);  // whole boxes: TMA counts the zeros it fills
                sm90::tma_load_2d(sA + stage * T::A_BYTES, tmA, &full[stage], kb * BK_ELEMS, j.a_row);
                sm90::tma_load_2d(sB + stage * T::B_BYTES, tmB, &full[stage], kb * BK_ELEMS, j.b_row);
                if (++stage == T::STAGES) stage = 0, phase ^= 1;
            }
        }
    }
};

// One CTA: the schedule gives tiles() and job(t) (the same answers in every thread); the Ring's producer loads, the
// two consumers multiply, fold and store. It has no epilogue hook: a job's sum is stored as C, so its schedules give
// jobs over the whole of K (a schedule that splits tiles needs gemm_cta_bf16's epilogue).
template <int BN, int SCALING, class Schedule>
__device__ __forceinline__ void gemm_cta(const CUtensorMap* tmA, const CUtensorMap* tmB, const Scales sc, __nv_bfloat16* out,
                                         const Schedule& sched) {
    using T = Tile<BN>;
    constexpr int ACC = T::ACC;
    const Ring<T> ring;
    const int wg = threadIdx.x / 128;
    const int tiles = sched.tiles(), k_blocks = sc.k_blocks;
    if (wg == 0) {
        sm90::regs_release<40>();
        if (threadIdx.x == 0) ring.template produce<BK>(tmA, tmB, sched, k_blocks);
        return;
    }

    sm90::regs_claim<232>();
    const int cw = wg - 1, tid = threadIdx.x % 128;
    const int r_in = cw * ROWS + (tid / 32) * 16 + (tid % 32) / 4;  // the thread's first row in the tile; the other + 8
    const int blocks_n = (sc.n + SCALE_BLOCK - 1) / SCALE_BLOCK;    // B's scale blocks along n
    const float tensor_scale = SCALING == TENSOR ? sc.sa[0] * sc.sb[0] : 1.f;
    int stage = 0;
    uint32_t phase = 0;
    float acc[ACC], part[ACC];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const Job j = sched.job(t);
        const int kb_end = min(j.kb1, k_blocks);
        if (j.kb0 >= kb_end) continue;
        const int r0 = j.a_row + r_in, r1 = r0 + 8;
        // block scales: the tile's columns from col0 lie in B's scale block col0 / 128 up to accumulator group `split`
        // (group j holds columns col0 + 8j ..), in the next block from there (BN = 192 only)
        const int blk = j.col0 / SCALE_BLOCK, split = (SCALE_BLOCK - j.col0 % SCALE_BLOCK) / 8;
        const size_t sb_lo = (size_t(j.group) * blocks_n + blk) * k_blocks;
        const size_t sb_hi = (size_t(j.group) * blocks_n + min(blk + 1, blocks_n - 1)) * k_blocks;
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.f;
        for (int kb = j.kb0; kb < kb_end; ++kb) {
            float g0 = 1.f, g1 = 1.f, h0 = 1.f, h1 = 1.f;  // the k-block's scales of the thread's rows r0 and r1
            if constexpr (SCALING == BLOCK) {
                const float a0 = r0 < sc.rows ? sc.sa[size_t(kb) * sc.rows + r0] : 0.f;
                const float a1 = r1 < sc.rows ? sc.sa[size_t(kb) * sc.rows + r1] : 0.f;
                const float w = sc.sb[sb_lo + kb];
                g0 = a0 * w, g1 = a1 * w;
                if constexpr (BN > SCALE_BLOCK) {
                    const float w_hi = sc.sb[sb_hi + kb];
                    h0 = a0 * w_hi, h1 = a1 * w_hi;
                }
            }
            sm90::mbar_wait(&ring.full[stage], phase);
            sm90::wgmma_fence();
            const uint8_t* a = ring.sA + stage * T::A_BYTES + cw * ROWS * BK;
            const uint8_t* b = ring.sB + stage * T::B_BYTES;
#pragma unroll
            for (int ks = 0; ks < BK / WK; ++ks)  // the first step overwrites the partial (scale-d 0)
                mma_e4m3<BN>(part, sm90::desc_k_major_sw128(a + ks * WK), sm90::desc_k_major_sw128(b + ks * WK), ks);
            sm90::wgmma_commit();
            sm90::wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < ACC; ++i) sm90::fence_operand(part[i]);  // read only after the wait
            if (tid == 0) sm90::mbar_arrive(&ring.empty[stage]);
            if (++stage == T::STAGES) stage = 0, phase ^= 1;
            if constexpr (SCALING != BLOCK) {
#pragma unroll
                for (int i = 0; i < ACC; ++i) acc[i] += part[i];
            } else {
#pragma unroll
                for (int q = 0; q < ACC / 4; ++q) {
                    const bool lo = BN <= SCALE_BLOCK || q < split;
                    const float s0 = lo ? g0 : h0, s1 = lo ? g1 : h1;
                    acc[4 * q] = fmaf(part[4 * q], s0, acc[4 * q]);
                    acc[4 * q + 1] = fmaf(part[4 * q + 1], s0, acc[4 * q + 1]);
                    acc[4 * q + 2] = fmaf(part[4 * q + 2], s1, acc[4 * q + 2]);
                    acc[4 * q + 3] = fmaf(part[4 * q + 3], s1, acc[4 * q + 3]);
                }
            }
        }
        // the epilogue: bf16 pairs straight from registers (n is even, so a pair is in or out as a whole)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = h ? r1 : r0;
            if (r >= j.row_end) continue;
            const float row_scale = SCALING == ROW ? sc.sa[r] : tensor_scale;
            __nv_bfloat16* row = out + size_t(r) * sc.n;
#pragma unroll
            for (int q = 0; q < ACC / 4; ++q) {
                const int c = j.col0 + 8 * q + 2 * (tid % 4);
                if (c >= sc.n) continue;
                float v0 = acc[4 * q + 2 * h] * row_scale, v1 = acc[4 * q + 2 * h + 1] * row_scale;
                if constexpr (SCALING == ROW) {
                    const float2 w = *reinterpret_cast<const float2*>(sc.sb + size_t(j.group) * sc.n + c);
                    v0 *= w.x, v1 *= w.y;
                }
                *reinterpret_cast<__nv_bfloat162*>(row + c) = __floats2bfloat162_rn(v0, v1);
            }
        }
    }
}

// The bf16 ring: a k-block is 64 bf16 (128 bytes) of K; 128 x 256 tiles take 48 KiB a stage, 4 stages.
template <int BN_>
struct TileBf16 {
    static constexpr int BN = BN_, BK = 64, WK = 16;  // elements: a k-block, a wgmma k-step (32 bytes)
    static constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int STAGES = (SMEM_LIMIT - STATIC_SMEM - 1024) / STAGE_BYTES;
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;
    static constexpr int ACC = BN / 2;
    static_assert(BN == 128 || BN == 256, "the bf16 wgmma shapes sm90.cuh writes out");
    static_assert(SMEM_BYTES + STATIC_SMEM <= SMEM_LIMIT, "the ring fits a CTA's shared memory");
};

// The bf16 CTA's plain epilogue: the totals as bf16 pairs, straight from registers, rows below the job's row_end and
// columns below n (n is even, so a pair is in or out as a whole). An epilogue is any type with this store().
struct StoreBf16 {
    __nv_bfloat16* out;
    int n;

    template <int ACC>
    __device__ __forceinline__ void store(const float (&acc)[ACC], const Job& j, int r_in, int tid) const {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = j.a_row + r_in + 8 * h;
            if (r >= j.row_end) continue;
            __nv_bfloat16* row = out + size_t(r) * n;
#pragma unroll
            for (int q = 0; q < ACC / 4; ++q) {
                const int c = j.col0 + 8 * q + 2 * (tid % 4);
                if (c < n) *reinterpret_cast<__nv_bfloat162*>(row + c) = __floats2bfloat162_rn(acc[4 * q + 2 * h], acc[4 * q + 2 * h + 1]);
            }
        }
    }
};

// One CTA of the bf16 GEMM over the schedule's tiles (the same Ring and roles as gemm_cta). Each consumer
// issues a k-block's four wgmma into its totals, then waits until at most that group is in flight (wait_group 1):
// the previous k-block's wgmma are done, so their stage is freed while these run. After a job's last k-block the
// epilogue gets the totals: epi.store(acc, job, r_in, tid), with the thread's rows j.a_row + r_in and + 8 and its
// columns j.col0 + 8q + 2 (tid % 4) + {0, 1} in acc[4q + {0, 1}] (first row) and acc[4q + {2, 3}] (second); a job
// over part of K (kb0 > 0 or kb1 short of K's k-blocks) hands over a partial sum, which the epilogue fixes up. The
// epilogue's contract: every lane of every consumer warp calls it for every job that has k-blocks (the schedule
// answers alike in every thread), so full-warp shuffles are safe; the producer warpgroup has left, so a barrier over
// the whole CTA (__syncthreads, bar.sync 0) would hang: only a named barrier over the 256 consumer threads may be used.
template <int BN, class Schedule, class Epi>
__device__ __forceinline__ void gemm_cta_bf16(const CUtensorMap* tmA, const CUtensorMap* tmB, int K, const Schedule& sched,
                                              const Epi& epi) {
    using T = TileBf16<BN>;
    constexpr int ACC = T::ACC;
    const Ring<T> ring;
    const int wg = threadIdx.x / 128;
    const int tiles = sched.tiles(), k_blocks = (K + T::BK - 1) / T::BK;
    if (wg == 0) {
        sm90::regs_release<40>();
        if (threadIdx.x == 0) ring.template produce<T::BK>(tmA, tmB, sched, k_blocks);
        return;
    }

    sm90::regs_claim<232>();
    const int cw = wg - 1, tid = threadIdx.x % 128;
    const int r_in = cw * ROWS + (tid / 32) * 16 + (tid % 32) / 4;
    int stage = 0;
    uint32_t phase = 0;
    float acc[ACC];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const Job j = sched.job(t);
        const int kb_end = min(j.kb1, k_blocks);
        if (j.kb0 >= kb_end) continue;
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.f, sm90::fence_operand(acc[i]);
        int prev = -1;
        for (int kb = j.kb0; kb < kb_end; ++kb) {
            sm90::mbar_wait(&ring.full[stage], phase);
            sm90::wgmma_fence();
            const uint8_t* a = ring.sA + stage * T::A_BYTES + cw * ROWS * 128;
            const uint8_t* b = ring.sB + stage * T::B_BYTES;
#pragma unroll
            for (int ks = 0; ks < T::BK / T::WK; ++ks)
                sm90::WgmmaOp<__nv_bfloat16, BN>::mma(acc, sm90::desc_k_major_sw128(a + ks * 32), sm90::desc_k_major_sw128(b + ks * 32), 1);
            sm90::wgmma_commit();
            sm90::wgmma_wait<1>();  // the previous k-block's wgmma are done: free its stage
            if (prev >= 0 && tid == 0) sm90::mbar_arrive(&ring.empty[prev]);
            prev = stage;
            if (++stage == T::STAGES) stage = 0, phase ^= 1;
        }
        sm90::wgmma_wait<0>();
#pragma unroll
        for (int i = 0; i < ACC; ++i) sm90::fence_operand(acc[i]);
        if (prev >= 0 && tid == 0) sm90::mbar_arrive(&ring.empty[prev]);
        epi.store(acc, j, r_in, tid);
    }
}

// A [rows, cols] matrix of 1-byte (e4m3) or 2-byte (bf16) elements, cols contiguous, read in boxes of box_rows x 128
// bytes with the 128-byte swizzle (what the wgmma descriptors expect); zeros past its edges.
inline CUresult tensor_map(CUtensorMap* map, const void* ptr, long long rows, int cols, int box_rows,
                           CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8) {
    if (dtype != CU_TENSOR_MAP_DATA_TYPE_UINT8 && dtype != CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) return CUDA_ERROR_INVALID_VALUE;
    const cuuint32_t elem = dtype == CU_TENSOR_MAP_DATA_TYPE_UINT8 ? 1 : 2;
    cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
    cuuint64_t strides[1] = {cuuint64_t(cols) * elem};
    cuuint32_t box[2] = {cuuint32_t(128 / elem), cuuint32_t(box_rows)};
    cuuint32_t elem_strides[2] = {1, 1};
    return sm90::encode_tiled()(map, dtype, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// The SM count of the current device (cached), or a negative CUDA error code.
inline int sm_count_or_error() {
    static int sms = 0;
    if (sms == 0) {
        int device = 0;
        cudaError_t e = cudaGetDevice(&device);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (e != cudaSuccess) return -int(e);
    }
    return sms;
}

// A persistent launch of `kernel` made ready: its dynamic shared memory allowed (once a process: `configured`), and
// its grid, one CTA per SM and no more CTAs than tiles; or a negative CUDA error code.
inline long long persistent_grid(const void* kernel, int smem, bool& configured, long long tiles) {
    if (!configured) {
        const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (e != cudaSuccess) return -(long long)e;
        configured = true;
    }
    const int sms = sm_count_or_error();
    if (sms < 0) return sms;
    return tiles < sms ? tiles : sms;
}

}  // namespace wsgemm
}  // namespace kwiki
