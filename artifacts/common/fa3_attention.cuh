// fa3_attention.cuh: the FlashAttention-3-style forward CTA of artifacts/attention_fwd_bf16_sm90a/fa3.cu (bf16 in
// and out, fp32 softmax state, head dim 128 or 64; PTX over sm90.cuh, no CUTLASS), shared by that artifact's library and
// artifacts/attention_timeline_sm90a (its untimed trace pass). It lives here because an artifact's build names only
// files inside its own folder (kwiki/wiki/manifest.py) and both include it; no other artifact does, so no other
// series hashes it (kwiki/verify/series.py hashes the headers an artifact's sources include). fa3.cu's header
// comment says what the kernel does; the kernels, the launcher and the rungs' kernel names stay in fa3.cu.
//
// attention_cta<MODE, TRACE, D>: D the head dim (64 or 128: Head<D> below). TRACE false (fa3.cu's kernels, the
// timed ones everywhere) compiles no stamp: no timer read, no trace store. TRACE true (the timeline's build only) has one thread of each warpgroup of the first
// TRACE_BLOCKS query tiles of head 0 stamp %globaltimer at the end of every phase (the phases below), one 16-byte
// store a span, into a lane of LANE_CAPACITY spans; Stamps says what each span measures.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "sm90.cuh"

using bf16 = __nv_bfloat16;

namespace fa3 {

constexpr int BM = 128, BN = 128;     // query rows a CTA, keys a tile
constexpr int STAGES = 2;             // K ring and V ring depth
constexpr int BOX = 64;               // a TMA box is 64 columns (128 bytes: the 128B swizzle's span)
constexpr int BOX_ELEMS = BN * BOX;   // one 128-row x 64-column box: 16 KB
constexpr int THREADS = 384;          // producer warpgroup + two consumer warpgroups
constexpr int PRODUCER_REGS = 24, CONSUMER_REGS = 240;  // 128 * (24 + 2 * 240) <= 65536: one CTA an SM
static_assert(BM == BN, "the causal diagonal is one tile: query tile i meets key tile i");

// What the head dim D sets. A 128-row tile of Q, K or V is D / 64 boxes side by side (columns 0-63, then 64-127
// at D = 128), each its own 128B-swizzled TMA box; the P V accumulator of a consumer thread is D / 2 floats (an
// m64nD wgmma). Everything else (tiles of 128 query rows and 128 keys, the two-stage rings, the warpgroups and
// their registers, the softmax of a 64 x 128 score tile a consumer) is the same at both head dims, so at D = 64 a
// tile carries half the GEMM FLOPs of D = 128 for the same exponentials, and the shared memory halves (83 KB,
// still one CTA an SM: the registers decide that).
template <int D>
struct Head {
    static_assert(D == 64 || D == 128, "fa3: head dims 64 and 128 (one or two 64-column boxes a row)");
    static constexpr int BOXES = D / BOX;
    static constexpr int TILE_ELEMS = BOXES * BOX_ELEMS;                           // a 128-row tile: 16 or 32 KB
    static constexpr int TILE_BYTES = TILE_ELEMS * 2;
    static constexpr int SMEM_BYTES = TILE_BYTES * (1 + 2 * STAGES) + 1024 + 128;  // Q, the rings, alignment, barriers
};

enum Mode { WS = 0, PINGPONG = 1, OVERLAP = 2 };

// ===================================================================================================
// The trace (TRACE builds only): phases in the order of the timeline artifact's kPhaseNames
// ===================================================================================================

// The phases, named as kwiki.results.timelines.Phase names them:
//   producer-wait   the producer waits for an empty K or V stage (both consumers have freed it)
//   tma-issue       the producer announces a tile's bytes and issues its two TMA loads (Q once, then K and V per tile)
//   consumer-wait   a consumer waits for its full K (and V) stage and, in the ping-pong modes, for its turn
//   wgmma           a consumer issues its GEMMs and waits for them (wgmma.wait_group returning: their completion,
//                   not their issue); in OVERLAP, S_j's wait (depth 1) and, after the softmax, P_{j-1} V_{j-1}'s
//                   (depth 0) are two spans
//   softmax         the online softmax of a tile in registers and the rescale of O / packing of P (in OVERLAP the
//                   rescale is a span of its own, after the second wait)
//   epilogue        O / l and the log-sum-exp stored (until the stores are issued)
enum TracePhase : int { kProducerWait, kTmaIssue, kConsumerWait, kWgmma, kSoftmax, kEpilogue };
constexpr int TRACE_BLOCKS = 4, TRACE_WARPGROUPS = 3, TRACE_LANES = TRACE_BLOCKS * TRACE_WARPGROUPS;
constexpr int LANE_CAPACITY = 1024;  // seq 4096: 32 key tiles, at most 5 spans a tile a lane (+ 3)

// One span in 16 bytes, one store: the start, the length (ns, 32 bits: 4 s), the key tile j << 8 | the phase.
struct Trace {
    uint4* spans;      // TRACE_LANES * LANE_CAPACITY
    unsigned* counts;  // TRACE_LANES: the spans each lane stamped, stored or not
};

// One warpgroup's stamps. The stamping thread is thread 0 of the warpgroup (lane 0 of its first warp), after the
// warpgroup's code at that point: after a wgmma wait that is the GEMMs' completion as its warp sees it; after the
// softmax, its warp's softmax (the other three warps of the warpgroup run the same code on their rows). Every
// thread reads the timer (no branch around warpgroup-wide wgmma and barrier code); the stamping thread of a traced
// CTA stores. Without TRACE every member is empty: no timer read, no store.
template <bool TRACE>
struct Stamps {
    uint4* lane = nullptr;
    unsigned n = 0;
    bool on = false;

    __device__ __forceinline__ Stamps(const Trace& t, int wg, bool elected) {
        if constexpr (TRACE) {
            on = elected && blockIdx.y == 0 && blockIdx.x < TRACE_BLOCKS;
            if (on) lane = t.spans + size_t(blockIdx.x * TRACE_WARPGROUPS + wg) * LANE_CAPACITY;
        }
    }
    __device__ __forceinline__ unsigned long long now() const {
        if constexpr (TRACE) {
            unsigned long long t;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));  // kwiki_clock.cuh's globaltimer_ns, not included here
            return t;
        } else {
            return 0;
        }
    }
    // The span [start, now) of `phase` on key tile `j`; returns now, the start of the next span.
    __device__ __forceinline__ unsigned long long span(TracePhase phase, unsigned long long start, int j) {
        if constexpr (TRACE) {
            const unsigned long long end = now();
            if (on) {
                if (n < unsigned(LANE_CAPACITY))
                    lane[n] = make_uint4(unsigned(start), unsigned(start >> 32), unsigned(end - start), unsigned(j) << 8 | unsigned(phase));
                ++n;
            }
            return end;
        } else {
            return 0;
        }
    }
    __device__ __forceinline__ void finish(const Trace& t, int wg) const {
        if constexpr (TRACE)
            if (on) t.counts[blockIdx.x * TRACE_WARPGROUPS + wg] = n;
    }
};

// ===================================================================================================
// Kernels: PTX wrappers beyond sm90.cuh
// ===================================================================================================

// Box at (c0 = column, c1 = row, c2 = batch*head) of a 3D tensor map into shared memory, completing its bytes on
// `bar` (PTX ISA, cp.async.bulk.tensor: .3d, .tile, mbarrier::complete_tx::bytes; the 2D form is sm90::tma_load_2d).
// Rows past the map's seq extent read as zeros (the tensor map's OOB fill), inside each head: a 3D map, not a 2D
// one over batch * heads * seq rows, whose last tile of a head would read the next head's rows.
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
        ::"r"(sm90::smem_u32(dst)), "l"(map), "r"(sm90::smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}

// Arrive on named barrier `id` without waiting (PTX ISA, bar.arrive): the other side of sm90::named_barrier.
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ float ex2(float x) {  // 2^x, MUFU.EX2 (ex2.approx.ftz.f32: 2^-inf = +0)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// log2(x), MUFU.LG2 (lg2.approx.ftz.f32, __log2f's instruction: an error of order 1e-6 at most for the row sums
// here, 1 <= l <= seq, far inside the LSE's tolerance; log2(+0) = -inf), as tl.math.log2 gives the Triton rungs;
// log2f compiles to a polynomial of some twenty instructions without fast math.
__device__ __forceinline__ float lg2(float x) {
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {  // lo in bits 0-15: the lower column
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}

// Descriptor of V's tile as wgmma's B operand for P V (K = keys, N = head dim), which TMA wrote key by key: each
// key a 128-byte swizzled row of 64 head-dim values, so B is N-major ("MN-major", imm-trans-b = 1; PTX ISA,
// wgmma "Shared Memory Matrix Layout": the transpose exists for .f16/.bf16 only). The canonical MN-major 128B
// swizzle layout is ((8 x 16 bytes along N, m repeats), (8 rows along K, k repeats)) with the N repeat at the
// leading byte offset and the K repeat at the stride byte offset (the same layout CUTLASS's make_gmma_desc
// encodes for Major::MN, SW128): N repeats every 64 head-dim values, i.e. the next TMA box, 16 KB on (LBO);
// 8-key groups (one 1024-byte swizzle atom) follow each other at 1024 bytes (SBO). At head dim 64 N is one box
// and the LBO is never used. Field positions as in
// sm90::desc_k_major_sw128: start >> 4 in bits 0-13, LBO >> 4 in 16-29, SBO >> 4 in 32-45, 1 (128B) in 62-63.
__device__ __forceinline__ uint64_t desc_mn_major_sw128(const void* tile) {
    uint64_t addr = sm90::smem_u32(tile);
    return ((addr & 0x3FFFF) >> 4) | (uint64_t(BOX_ELEMS * 2 >> 4) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

// The accumulator operands of an m64n64 (32) and an m64n128 (64) wgmma (inline PTX takes no arrays).
#define FA3_ACC8(i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define FA3_ACC32(i) FA3_ACC8(i), FA3_ACC8(i + 8), FA3_ACC8(i + 16), FA3_ACC8(i + 24)
#define FA3_REGS32                                                                   \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FA3_REGS64                                                                     \
    FA3_REGS32 ", "                                                                    \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

// O[64 x D] += P[64 x 16] V[16 x D], D = 2 * (the accumulators a thread): wgmma.mma_async.sync.aligned.m64nDk16
// .f32.bf16.bf16 with A from registers (four .b32 of two bf16 each, in wgmma's A fragment layout: a[0] row r,
// columns 2q, 2q+1; a[1] row r + 8; a[2] row r, columns 8 + 2q, 9 + 2q; a[3] row r + 8, those columns; r = 16 *
// warp + lane / 4, q = lane % 4) and B from the descriptor; scale-d 1 (accumulate), imm-scale-a and -b 1,
// imm-trans-b 1 (N-major V). An A operand from registers takes no imm-trans-a (PTX ISA, wgmma.mma_async syntax).
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t* a, uint64_t db) {  // head dim 128
    asm volatile("{\nwgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" FA3_REGS64 "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n}\n"
                 : FA3_ACC32(0), FA3_ACC32(32)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
__device__ __forceinline__ void wgmma_rs(float (&d)[32], const uint32_t* a, uint64_t db) {  // head dim 64
    asm volatile("{\nwgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" FA3_REGS32 "}, {%32, %33, %34, %35}, %36, 1, 1, 1, 1;\n}\n"
                 : FA3_ACC32(0)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db));
}
#undef FA3_REGS64
#undef FA3_REGS32
#undef FA3_ACC32
#undef FA3_ACC8

// ===================================================================================================
// Kernels: the two GEMMs and the softmax of one consumer warpgroup
// ===================================================================================================

// S[64 x 128] = Q[64 rows of this warpgroup] K[128 keys]^T: both K-major (head dim contiguous) in 128B-swizzled
// boxes, exactly the operands of the GEMM artifact (gemm_bf16_sm90a's mma_kblock): D / 64 boxes of 64 head-dim
// values, 4 k16 steps each, a step a plain 32-byte add to the start address. The first wgmma overwrites S.
template <int D>
__device__ __forceinline__ void gemm_qk(float (&s)[64], const bf16* q_wg, const bf16* k) {
#pragma unroll
    for (int kb = 0; kb < Head<D>::BOXES; ++kb)
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)
            sm90::WgmmaOp<bf16, 128>::mma(s, sm90::desc_k_major_sw128(q_wg + kb * BOX_ELEMS + ks * 16),
                                          sm90::desc_k_major_sw128(k + kb * BOX_ELEMS + ks * 16), kb + ks > 0);
}

// O += P V over 128 keys: 8 k16 steps, step t's P in p[4t .. 4t + 3] and its 16 keys 16 * 128 bytes into each box.
template <int D>
__device__ __forceinline__ void gemm_pv(float (&o)[D / 2], const uint32_t (&p)[32], const bf16* v) {
#pragma unroll
    for (int t = 0; t < 8; ++t) wgmma_rs(o, &p[4 * t], desc_mn_major_sw128(v + t * 16 * BOX));
}

template <int N>
__device__ __forceinline__ void settle(float (&r)[N]) {  // reads of r stay after the wgmma wait before them
#pragma unroll
    for (int i = 0; i < N; ++i) sm90::fence_operand(r[i]);
}

// The online softmax of one tile of S (scores, not yet scaled), in place: S becomes exp2(S * c - m * c) with c =
// log2(e) / sqrt(d) and m the running row max; l (this thread's share of each row's sum) and m are updated and
// alpha[h] is the factor O must be rescaled by. Thread t holds rows r = 16 * warp + lane / 4 (h = 0) and r + 8
// (h = 1), columns 8j + 2q + {0, 1} in s[4j + 2h + {0, 1}] (the wgmma accumulator layout); the four threads of a
// quad share a row, so a row's max is a max over the quad (two xor shuffles). MASK: keys >= seq and, if causal,
// keys > row are -inf (only in the tile that crosses the diagonal or the sequence's end).
template <bool MASK>
__device__ __forceinline__ void softmax_tile(float (&s)[64], float (&m)[2], float (&l)[2], float (&alpha)[2], int key0, int row0,
                                             int seq, bool causal, float c) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if constexpr (MASK) {
            const int row = row0 + 8 * h;
#pragma unroll
            for (int j = 0; j < 16; ++j)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = key0 + 8 * j + 2 * (lane % 4) + e;
                    if (key >= seq || (causal && key > row)) s[4 * j + 2 * h + e] = -INFINITY;
                }
        }
        float mx = m[h];
#pragma unroll
        for (int j = 0; j < 16; ++j) mx = fmaxf(mx, fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        // Every row sees an unmasked key in every tile it visits (key 0 of its first tile; the diagonal's own key),
        // so mx is finite; the guard keeps a fully masked row at 0 instead of NaN all the same.
        const float mc = mx == -INFINITY ? 0.f : mx * c;
        alpha[h] = ex2(m[h] * c - mc);  // m = -inf before the first tile: alpha = 0 on O = 0 and l = 0
        m[h] = mx;
        float sum = 0.f;
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                float& x = s[4 * j + 2 * h + e];
                x = ex2(fmaf(x, c, -mc));
                sum += x;
            }
        l[h] = l[h] * alpha[h] + sum;
    }
}

// O *= alpha (per row; o holds D / 8 groups of four) and P = bf16(S) in the A fragment layout of the P V wgmma: for k16 step t (keys 16t ..
// 16t + 15), accumulator columns j = 2t (keys 16t + 2q + {0,1}) and 2t + 1 (keys 16t + 8 + 2q + {0,1}), rows r and
// r + 8, which is exactly the A layout (no shuffle: the S accumulator of m64n128 and the A operand of m64nNk16
// share a thread-to-element map for 16-bit types).
template <int D>
__device__ __forceinline__ void rescale_and_pack(float (&o)[D / 2], uint32_t (&p)[32], const float (&s)[64], const float (&alpha)[2]) {
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
        o[4 * j] *= alpha[0], o[4 * j + 1] *= alpha[0];
        o[4 * j + 2] *= alpha[1], o[4 * j + 3] *= alpha[1];
    }
#pragma unroll
    for (int t = 0; t < 8; ++t) {
        p[4 * t + 0] = pack_bf16(s[8 * t + 0], s[8 * t + 1]);
        p[4 * t + 1] = pack_bf16(s[8 * t + 2], s[8 * t + 3]);
        p[4 * t + 2] = pack_bf16(s[8 * t + 4], s[8 * t + 5]);
        p[4 * t + 3] = pack_bf16(s[8 * t + 6], s[8 * t + 7]);
    }
}

// ===================================================================================================
// Kernels: the CTA
// ===================================================================================================

// Shared memory from a 1024-byte boundary (the 128B swizzle's atom): Q, the K ring, the V ring, then the
// mbarriers. k_full[s] / v_full[s] complete on the producer's arrival plus the tile's bytes (32 or 16 KB); k_empty[s] /
// v_empty[s] on one arrival from each consumer warpgroup once its wgmmas have read the stage.
template <int D>
struct Smem {
    static constexpr int TILE_ELEMS = Head<D>::TILE_ELEMS;
    bf16 *q, *k, *v;
    uint64_t *q_full, *k_full, *k_empty, *v_full, *v_empty;
    __device__ __forceinline__ explicit Smem(uint8_t* raw) {
        q = reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
        k = q + TILE_ELEMS;
        v = k + STAGES * TILE_ELEMS;
        q_full = reinterpret_cast<uint64_t*>(v + STAGES * TILE_ELEMS);
        k_full = q_full + 1, k_empty = k_full + STAGES, v_full = k_empty + STAGES, v_empty = v_full + STAGES;
    }
};

// The producer, one thread: Q's boxes once, then for every key tile j its K into stage j % 2 of the K ring
// and its V into the V ring, each once the consumers have freed the stage (parity: a fresh barrier is in phase
// 0, so the first trip's wait for parity 1 returns at once, as in gemm_bf16_sm90a's producer).
// The stamps (TRACE): Q's issue, then per tile a wait and an issue for K and for V (1 + 4 n_tiles spans).
template <int D, bool TRACE>
__device__ __forceinline__ void produce(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv, const Smem<D>& sm, int q0,
                                        int bh, int kvh, int n_tiles, Stamps<TRACE>& st) {
    constexpr int TILE_ELEMS = Head<D>::TILE_ELEMS, TILE_BYTES = Head<D>::TILE_BYTES;
    unsigned long long t = st.now();
    sm90::mbar_arrive_expect_tx(sm.q_full, TILE_BYTES);
#pragma unroll
    for (int b = 0; b < Head<D>::BOXES; ++b) tma_load_3d(sm.q + b * BOX_ELEMS, tq, sm.q_full, b * BOX, q0, bh);
    t = st.span(kTmaIssue, t, 0);
    for (int j = 0; j < n_tiles; ++j) {
        const int s = j % STAGES;
        const uint32_t ph = uint32_t(j / STAGES) & 1;
        sm90::mbar_wait(&sm.k_empty[s], ph ^ 1);
        t = st.span(kProducerWait, t, j);
        sm90::mbar_arrive_expect_tx(&sm.k_full[s], TILE_BYTES);
#pragma unroll
        for (int b = 0; b < Head<D>::BOXES; ++b) tma_load_3d(sm.k + s * TILE_ELEMS + b * BOX_ELEMS, tk, &sm.k_full[s], b * BOX, j * BN, kvh);
        t = st.span(kTmaIssue, t, j);
        sm90::mbar_wait(&sm.v_empty[s], ph ^ 1);
        t = st.span(kProducerWait, t, j);
        sm90::mbar_arrive_expect_tx(&sm.v_full[s], TILE_BYTES);
#pragma unroll
        for (int b = 0; b < Head<D>::BOXES; ++b) tma_load_3d(sm.v + s * TILE_ELEMS + b * BOX_ELEMS, tv, &sm.v_full[s], b * BOX, j * BN, kvh);
        t = st.span(kTmaIssue, t, j);
    }
}

// O / l to global as bf16, rows < seq only, straight from the accumulators (pairs of columns a thread), and,
// where lse is not null, the row's log-sum-exp: sum exp(s / sqrt(d)) = 2^(m c) l with m the raw running max, so
// lse = (m c + log2 l) ln 2, written by the quad's first thread (the quad holds the row and, after the shuffles,
// all of l). A fully masked row (impossible: see softmax_tile) would have m = -inf and l = 0: O NaN (0 / 0) and
// lse -inf, what softmax and logsumexp give for an empty row, never a finite number that hides it.
template <int D>
__device__ __forceinline__ void store_o(const float (&o)[D / 2], const float (&m)[2], float (&l)[2], bf16* out, float* lse, int row0,
                                        int seq, float c) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float sum = l[h];
        sum += __shfl_xor_sync(0xffffffffu, sum, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        const float inv = 1.f / sum;
        const int row = row0 + 8 * h;
        if (row >= seq) continue;
        if (lse != nullptr && lane % 4 == 0) lse[row] = (m[h] * c + lg2(sum)) * 0.6931471805599453f;
        bf16* dst = out + size_t(row) * D + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < D / 8; ++j)
            *reinterpret_cast<__nv_bfloat162*>(dst + 8 * j) = __floats2bfloat162_rn(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
    }
}

// One CTA: query tile qt of head bh, whose keys and values are KV head bh / group (batch * heads and batch *
// kv_heads rows: (b * heads + h) / group = b * kv_heads + h / group). Causal grids run the heaviest tiles first
// (blockIdx.x 0 is the last tile). TRACE: the stamps of the phases into `trace` (fa3.cu's kernels pass none).
// D: the head dim, 128 or 64 (the tensor maps' first extent, built by tensor_map_3d<D>).
template <int MODE, bool TRACE = false, int D = 128>
__device__ __forceinline__ void attention_cta(const CUtensorMap* tq, const CUtensorMap* tk, const CUtensorMap* tv, bf16* out, float* lse,
                                              int seq, int causal, int group, float c, Trace trace = {}) {
    constexpr int TILE_ELEMS = Head<D>::TILE_ELEMS;
    extern __shared__ uint8_t smem_raw[];
    const Smem<D> sm(smem_raw);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int qt = int(gridDim.x) - 1 - int(blockIdx.x), bh = int(blockIdx.y), q0 = qt * BM;
    const int key_tiles = (seq + BN - 1) / BN;
    const int n_tiles = causal ? min(key_tiles, qt + 1) : key_tiles;
    const int first_masked = causal ? qt : seq / BN;  // tiles from here on need a mask (the diagonal, the partial end)

    if (threadIdx.x == 0) {
        sm90::mbar_init(sm.q_full, 1);
        for (int s = 0; s < STAGES; ++s) {
            sm90::mbar_init(&sm.k_full[s], 1), sm90::mbar_init(&sm.k_empty[s], 2);
            sm90::mbar_init(&sm.v_full[s], 1), sm90::mbar_init(&sm.v_empty[s], 2);
        }
        sm90::fence_barrier_init();
    }
    __syncthreads();

    Stamps<TRACE> stamps(trace, wg, tid == 0);
    if (wg == 0) {
        sm90::regs_release<PRODUCER_REGS>();
        if (tid == 0) produce(tq, tk, tv, sm, q0, bh, bh / group, n_tiles, stamps);
        stamps.finish(trace, wg);
        return;
    }
    sm90::regs_claim<CONSUMER_REGS>();
    const int cw = wg - 1, warp = tid / 32, lane = tid % 32;
    const int row0 = q0 + cw * 64 + warp * 16 + lane / 4;  // this thread's rows: row0 and row0 + 8
    const bf16* q_wg = sm.q + cw * 64 * BOX;                // this warpgroup's 64 rows of each Q box (8 KB in)

    // kwiki:rung cuda_fa3_pingpong
    // Turns (named barriers 1 and 2, one per consumer, 256 threads: the waiting warpgroup's 128 and the other's
    // 128 arrivals): consumer cw waits on barrier 1 + cw before issuing its GEMMs and then lets the other go. The
    // second consumer opens the first turn for the first. Each consumer takes n_tiles + 1 turns; the second one's
    // last arrival would have no wait to meet, so it is left out (every barrier ends with a balanced count).
    if constexpr (MODE >= PINGPONG)
        if (cw == 1) named_arrive(1, 256);
    // /kwiki:rung cuda_fa3_pingpong

    float s[64], o[D / 2], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f}, alpha[2];
    uint32_t p[32];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
    // The stamps (TRACE): per tile a wait (Q's too, in the first), wgmma, softmax (+ wgmma, softmax in OVERLAP)
    unsigned long long ts = stamps.now();
    sm90::mbar_wait(sm.q_full, 0);

    // Tile j: one turn on the tensor cores (P_{j-1} V_{j-1} and S_j), then the softmax of S_j. FIRST (j = 0, no
    // P V yet) is its own instantiation, so every wgmma wait below is unconditional.
    auto step = [&](int j, auto first) {
        constexpr bool FIRST = decltype(first)::value;
        const int st = j % STAGES, ps = (j + STAGES - 1) % STAGES;
        const uint32_t ph = uint32_t(j / STAGES) & 1, pph = uint32_t((j - 1) / STAGES) & 1;  // pph: j >= 1 only
        sm90::mbar_wait(&sm.k_full[st], ph);
        if constexpr (!FIRST) sm90::mbar_wait(&sm.v_full[ps], pph);  // before the fence: no spin loop inside it
        // kwiki:rung cuda_fa3_pingpong
        if constexpr (MODE >= PINGPONG) sm90::named_barrier(1 + cw, 256);  // my turn on the tensor cores
        // /kwiki:rung cuda_fa3_pingpong
        ts = stamps.span(kConsumerWait, ts, j);
        sm90::wgmma_fence();  // O was rescaled and P written by ordinary instructions since the last wgmma
        if constexpr (MODE == OVERLAP) {
            // kwiki:rung cuda_fa3_overlap
            gemm_qk<D>(s, q_wg, sm.k + st * TILE_ELEMS);  // S_j first: its wait comes first
            sm90::wgmma_commit();
            if constexpr (!FIRST) {
                gemm_pv<D>(o, p, sm.v + ps * TILE_ELEMS);  // then P_{j-1} V_{j-1}, left running through the softmax
                sm90::wgmma_commit();
            }
            // /kwiki:rung cuda_fa3_overlap
        } else {
            if constexpr (!FIRST) {
                gemm_pv<D>(o, p, sm.v + ps * TILE_ELEMS);
                sm90::wgmma_commit();
            }
            gemm_qk<D>(s, q_wg, sm.k + st * TILE_ELEMS);
            sm90::wgmma_commit();
        }
        // kwiki:rung cuda_fa3_pingpong
        if constexpr (MODE >= PINGPONG) named_arrive(1 + (cw ^ 1), 256);  // the other's turn: its GEMMs queue behind mine
        // /kwiki:rung cuda_fa3_pingpong
        if constexpr (MODE == OVERLAP && !FIRST) {
            // kwiki:rung cuda_fa3_overlap
            sm90::wgmma_wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
            // /kwiki:rung cuda_fa3_overlap
        } else {
            sm90::wgmma_wait<0>();
        }
        settle(s);
        ts = stamps.span(kWgmma, ts, j);
        if (tid == 0) sm90::mbar_arrive(&sm.k_empty[st]);  // K_j read
        if (j >= first_masked) softmax_tile<true>(s, m, l, alpha, j * BN, row0, seq, causal != 0, c);
        else softmax_tile<false>(s, m, l, alpha, j * BN, row0, seq, causal != 0, c);
        // kwiki:rung cuda_fa3_overlap
        if constexpr (MODE == OVERLAP && !FIRST) {
            ts = stamps.span(kSoftmax, ts, j);
            sm90::wgmma_wait<0>();  // P_{j-1} V_{j-1} done: O may be rescaled, P rewritten
        }
        // /kwiki:rung cuda_fa3_overlap
        settle(o);
        settle(s);
        if constexpr (MODE == OVERLAP && !FIRST) ts = stamps.span(kWgmma, ts, j - 1);
        if (!FIRST && tid == 0) sm90::mbar_arrive(&sm.v_empty[ps]);  // V_{j-1} read
        rescale_and_pack<D>(o, p, s, alpha);
        ts = stamps.span(kSoftmax, ts, j);
    };
    step(0, std::true_type{});
    for (int j = 1; j < n_tiles; ++j) step(j, std::false_type{});
    // The last P V, in a turn of its own.
    const int last = (n_tiles - 1) % STAGES;
    sm90::mbar_wait(&sm.v_full[last], uint32_t((n_tiles - 1) / STAGES) & 1);
    // kwiki:rung cuda_fa3_pingpong
    if constexpr (MODE >= PINGPONG) sm90::named_barrier(1 + cw, 256);
    // /kwiki:rung cuda_fa3_pingpong
    ts = stamps.span(kConsumerWait, ts, n_tiles - 1);
    sm90::wgmma_fence();
    gemm_pv<D>(o, p, sm.v + last * TILE_ELEMS);
    sm90::wgmma_commit();
    // kwiki:rung cuda_fa3_pingpong
    if constexpr (MODE >= PINGPONG)
        if (cw == 0) named_arrive(2, 256);
    // /kwiki:rung cuda_fa3_pingpong
    sm90::wgmma_wait<0>();
    settle(o);
    ts = stamps.span(kWgmma, ts, n_tiles - 1);
    if (tid == 0) sm90::mbar_arrive(&sm.v_empty[last]);
    store_o<D>(o, m, l, out + size_t(bh) * seq * D, lse == nullptr ? nullptr : lse + size_t(bh) * seq, row0, seq, c);
    stamps.span(kEpilogue, ts, n_tiles - 1);
    stamps.finish(trace, wg);
}

}  // namespace fa3

// ===================================================================================================
// Launchers
// ===================================================================================================

namespace fa3 {

// [batch * heads, seq, D] bf16, contiguous, read in 128-row x 64-column boxes with the 128B swizzle: dims
// innermost first (head dim, seq, batch * head), strides in bytes of dims 1 and 2 (multiples of 16: 2 D and
// seq * 2 D), OOB rows read as zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE). Returns the driver's status.
template <int D>
inline CUresult tensor_map_3d(CUtensorMap* map, const void* ptr, int bh, int seq) {
    cuuint64_t dims[3] = {cuuint64_t(D), cuuint64_t(seq), cuuint64_t(bh)};
    cuuint64_t strides[2] = {cuuint64_t(D) * 2, cuuint64_t(seq) * D * 2};
    cuuint32_t box[3] = {BOX, BN, 1};
    cuuint32_t elem_strides[3] = {1, 1, 1};
    return sm90::encode_tiled()(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

}  // namespace fa3
