// streamk_ws.cu: data-parallel, split-K and Stream-K on the warp-specialized CUDA CTA of
// artifacts/common/kwiki_ws_gemm.cuh (a TMA producer warpgroup, two wgmma consumer warpgroups under setmaxnreg, no
// CUTLASS), in bf16 with 64-deep k-blocks: the page's 128 x 128 tile (a 6-stage ring) and the 128 x 256 tile of the
// wiki's bf16 GEMM (4 stages). Built by kwiki into the library stream_k_gemm.py loads ($KWIKI_CUDA_LIBRARY) and called
// through ctypes on torch's current stream.
//
// C [M, N] bf16 = A [M, K] B, with B given K-major as Bt [N, K] (what the wgmma descriptors read), fp32 accumulation.
// One CTA per SM at most, all resident at once: a CTA may wait for another.
//
//   ws_dp_kernel, ws_dp_wide_kernel          data-parallel: each CTA walks whole tiles t = blockIdx.x, + gridDim.x, ...
//                                            in grouped order
//   ws_splitk_kernel, ws_splitk_wide_kernel  split-K: unit t = tile * S + s is slice s of the tile's k-blocks (S
//                                            slices of ceil(I / S)), walked as the data-parallel tiles are
//   ws_streamk_kernel, ws_streamk_wide_kernel
//                                            Stream-K: the Stream-K tiles' iterations (tiles x k-blocks, tile after
//                                            tile in grouped order) cut into gridDim.x contiguous ranges, CTA c's from
//                                            begin(c) to begin(c + 1), crossing tiles at any k-block, each walked
//                                            BACKWARD one piece a tile (a piece's k-blocks ascending); before them,
//                                            dp_tiles whole tiles data-parallel (0 for pure Stream-K; whole waves for
//                                            the hybrid, so that one Stream-K wave balances what the waves leave)
//
// Why backward: a range that crosses a tile start then begins at k-block 0 of that tile, so every such CTA starts in
// step with the others, and the CTAs that read one panel of A or B read its k-blocks at about the same time, while
// they are in L2. Walked forward, each CTA begins at the k-block where the previous range ended, spread over the tile:
// the CTAs sharing a panel read it at different times, and the H200's profile counted several times the data-parallel
// kernel's DRAM bytes (the Triton rung walks backward for the same reason).
//
// Fix-up, deterministic, in the epilogue: a job that covers a tile's k-blocks from 0 to the end is stored; a partial
// writes its fp32 sum to a slot of `work` and raises the slot's flag (one per consumer warpgroup); the tile's finisher
// waits for the flags of the tile's other slots, adds their partials in k order to its own and stores the tile. For
// split-K the finisher is slice 0 and the partials the later slices; for Stream-K the finisher is the piece that ends
// the tile and the partials the pieces before it, on the CTAs before it. The order of every sum depends on the shape
// and the grid only. The fix-up cannot deadlock while every CTA is resident (the launch is cooperative: it fails
// rather than run with CTAs that wait for CTAs that have no SM). Stream-K: a CTA's partial is its first Stream-K job
// (the head or the middle of the tile its range ends in), after whole tiles only, and its finisher its last. Split-K
// (S <= CTAs): were some finisher blocked, take the lowest blocked unit u, slice 0 of a tile; the slices it waits for,
// units u + 1 .. u + S - 1, are on other CTAs, which run their units in order and, below those units, can be blocked
// neither below u (u is the lowest) nor between u and them (no finisher lies there): they reach them and write them,
// and u goes on.
#include "kwiki_ws_gemm.cuh"

namespace streamk {

namespace g = kwiki::wsgemm;

constexpr unsigned WRITERS = 128;  // the threads of a consumer warpgroup: each arrives once on its flag

enum Mode { DP = 0, STREAM_K = 1, HYBRID = 2, SPLIT_K = 3 };
enum Role { WHOLE = 0, PARTIAL = 1, FINISHER = 2, EMPTY = 3 };

__host__ __device__ inline int cdiv(int a, int b) { return (a + b - 1) / b; }

__host__ __device__ inline int end_of(const g::Job& j, int iters) { return j.kb1 < iters ? j.kb1 : iters; }

// kwiki:rung cuda_splitk
// Split-K's jobs (a Schedule of kwiki_ws_gemm.cuh): unit t = tile * splits + s, slice s of the tile's K, per k-blocks.
// The partial of slice s >= 1 of tile (tm, tn) lives in slot (tm * tiles_n + tn) * (splits - 1) + s - 1.
template <int BN>
struct SplitPlan {
    g::Dense<BN> dense;
    int iters, per, splits;

    __host__ __device__ SplitPlan(int m, int n, int k, int s)
        : dense(m, n), iters(cdiv(k, g::TileBf16<BN>::BK)), per(cdiv(iters, s)), splits(cdiv(iters, per)) {}
    __host__ __device__ int tiles() const { return dense.tiles() * splits; }
    // What a job is, from its k-blocks: the whole tile, a partial (a later slice: it starts inside the tile), the
    // tile's finisher (slice 0 of a split tile), or nothing.
    __host__ __device__ int role(const g::Job& j) const {
        const int end = end_of(j, iters);
        return j.kb0 >= end ? EMPTY : j.kb0 > 0 ? PARTIAL : end < iters ? FINISHER : WHOLE;
    }
    __host__ __device__ g::Job job(int t) const {
        g::Job j = dense.job(t / splits);
        j.kb0 = t % splits * per;
        j.kb1 = j.kb0 + per < iters ? j.kb0 + per : iters;
        return j;
    }
    __host__ __device__ int first_slot(const g::Job& j) const {
        return (j.a_row / g::BM * dense.tiles_n + j.col0 / BN) * (splits - 1);
    }
    __host__ __device__ int partial_slot(const g::Job& j, int) const { return first_slot(j) + j.kb0 / per - 1; }
    __host__ __device__ void peers(const g::Job& j, int, int& first, int& last) const {
        first = first_slot(j), last = first + splits - 2;
    }
};
// /kwiki:rung cuda_splitk

// kwiki:rung cuda_streamk
// Stream-K's jobs: job t is CTA t % ctas's job of round t / ctas. Rounds below dp_rounds: data-parallel tile
// round * ctas + c while below dp_tiles. Then `segs` rounds of Stream-K jobs: the part of each Stream-K tile that CTA
// c's range covers, the last tile first (empty jobs pad the shorter ranges). CTA c's partial lives in slot c.
template <int BN>
struct StreamPlan {
    g::Dense<BN> dense;
    int ctas, iters;      // the grid; k-blocks a tile
    int dp_tiles, dp_rounds;
    int q, r;             // the Stream-K iterations are q * ctas + r: CTAs below r get q + 1
    int segs;             // the most tiles one Stream-K range touches

    __host__ __device__ StreamPlan(int m, int n, int k, int ctas_, int dp_tiles_)
        : dense(m, n), ctas(ctas_), iters(cdiv(k, g::TileBf16<BN>::BK)), dp_tiles(dp_tiles_) {
        dp_rounds = cdiv(dp_tiles, ctas);
        const int sk = (dense.tiles() - dp_tiles) * iters;
        q = sk / ctas, r = sk % ctas;
        segs = sk > 0 ? (q + iters) / iters + 1 : 0;
    }
    __host__ __device__ int begin(int c) const { return c * q + (c < r ? c : r); }
    __host__ __device__ int cta_of(int x) const {  // the CTA whose range holds Stream-K iteration x (q >= 1)
        const int big = r * (q + 1);
        return x < big ? x / (q + 1) : r + (x - big) / q;
    }
    __host__ __device__ int tiles() const { return (dp_rounds + segs) * ctas; }
    __host__ __device__ g::Job job(int t) const {
        const int c = t % ctas, round = t / ctas;
        if (round < dp_rounds) {
            const int tile = round * ctas + c;
            g::Job j = dense.job(tile < dp_tiles ? tile : 0);
            if (tile >= dp_tiles) j.kb0 = j.kb1 = 0;
            return j;
        }
        // backward: the tile that holds the range's last iteration first, then the tiles before it
        const int lo0 = begin(c), hi0 = begin(c + 1), st = (hi0 - 1) / iters - (round - dp_rounds);
        const int first = st * iters, lo = lo0 > first ? lo0 : first, hi = hi0 < first + iters ? hi0 : first + iters;
        const int tile = dp_tiles + st;
        g::Job j = dense.job(st >= 0 && tile < dense.tiles() ? tile : 0);
        const bool some = st >= 0 && lo < hi;
        j.kb0 = some ? lo - first : 0;
        j.kb1 = some ? hi - first : 0;
        return j;
    }
    // What a job is, from its k-blocks: the whole tile, a partial (it ends inside the tile: the head or the middle
    // of the tile a CTA's range ends in), the tile's finisher (it starts inside the tile and ends it), or nothing.
    __host__ __device__ int role(const g::Job& j) const {
        const int end = end_of(j, iters);
        return j.kb0 >= end ? EMPTY : end < iters ? PARTIAL : j.kb0 > 0 ? FINISHER : WHOLE;
    }
    __host__ __device__ int partial_slot(const g::Job&, int cta) const { return cta; }
    // The finisher on CTA c (its range starts inside the tile): the CTAs before it, from the one whose range holds
    // the tile's first iteration, each hand over one partial.
    __host__ __device__ void peers(const g::Job&, int c, int& first, int& last) const {
        const int tile_begin = begin(c) / iters * iters;
        first = cta_of(tile_begin), last = c - 1;
    }
};
// /kwiki:rung cuda_streamk

__device__ __forceinline__ void arrive_release(unsigned* flag) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(flag) : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* flag) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    return v;
}

// The epilogue of gemm_cta_bf16 for a plan's jobs: whole tiles stored, partials handed over, finished tiles fixed up
// and stored. work: a slot of BM x BN fp32 a partial, [slot][2 consumers][ACC / 4][128 threads] float4 (a warp's
// float4s contiguous); flags [slot][2], 0 between launches: the partial's 128 writers add 1 each (release), the
// finisher's 128 threads wait for 128 (acquire), read, add 1 each, and the last of them puts the flag back to 0.
// kwiki:rung cuda_splitk
template <int BN, class Plan>
struct Fixup {
    Plan plan;
    g::StoreBf16 out;
    float* work;
    unsigned* flags;
    static constexpr int ACC = g::TileBf16<BN>::ACC;

    __device__ __forceinline__ float4* slot(int s, int cw, int tid) const {
        return reinterpret_cast<float4*>(work) + (size_t(s) * 2 + cw) * (ACC / 4) * 128 + tid;
    }

    template <int A>
    __device__ __forceinline__ void store(const float (&acc)[A], const g::Job& j, int r_in, int tid) const {
        static_assert(A == ACC, "a slot holds one consumer's 64 x BN totals");
        const int role = plan.role(j), cw = r_in / g::ROWS, c = blockIdx.x;
        if (role == WHOLE) return out.store(acc, j, r_in, tid);
        if (role == PARTIAL) {
            const int s = plan.partial_slot(j, c);
            float4* dst = slot(s, cw, tid);
#pragma unroll
            for (int q = 0; q < A / 4; ++q)
                __stcg(dst + q * 128, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
            arrive_release(flags + 2 * s + cw);
            return;
        }
        float sum[A];
#pragma unroll
        for (int i = 0; i < A; ++i) sum[i] = acc[i];
        int first, last;
        plan.peers(j, c, first, last);
        for (int p = first; p <= last; ++p) {
            unsigned* flag = flags + 2 * p + cw;
            while (load_acquire(flag) < WRITERS) __nanosleep(32);
            const float4* src = slot(p, cw, tid);
#pragma unroll
            for (int q = 0; q < A / 4; ++q) {
                const float4 v = __ldcg(src + q * 128);
                sum[4 * q] += v.x, sum[4 * q + 1] += v.y, sum[4 * q + 2] += v.z, sum[4 * q + 3] += v.w;
            }
            if (atomicAdd(flag, 1u) == 2 * WRITERS - 1) atomicExch(flag, 0u);
        }
        out.store(sum, j, r_in, tid);
    }
};
// /kwiki:rung cuda_splitk

// kwiki:rung cuda_streamk_dp
// The whole tiles before the Stream-K ones for a mode, T tiles on `ctas` CTAs: none (STREAM_K), or for HYBRID the
// data-parallel waves but the last full one (so that Stream-K spreads one wave and the remainder over every SM),
// every tile where the waves come out even, none under two waves.
__host__ __device__ inline int dp_tiles_of(int mode, int T, int ctas) {
    if (mode != HYBRID) return 0;
    if (T % ctas == 0) return T;
    return T < 2 * ctas ? 0 : (T / ctas - 1) * ctas;
}
// /kwiki:rung cuda_streamk_dp

template <int BN>
__device__ __forceinline__ void dp(const CUtensorMap* ta, const CUtensorMap* tb, __nv_bfloat16* c, int M, int N, int K) {
    g::gemm_cta_bf16<BN>(ta, tb, K, g::Dense<BN>(M, N), g::StoreBf16{c, N});
}

template <int BN>
__device__ __forceinline__ void splitk(const CUtensorMap* ta, const CUtensorMap* tb, __nv_bfloat16* c, float* work,
                                       unsigned* flags, int M, int N, int K, int splits) {
    const SplitPlan<BN> plan(M, N, K, splits);
    g::gemm_cta_bf16<BN>(ta, tb, K, plan, Fixup<BN, SplitPlan<BN>>{plan, g::StoreBf16{c, N}, work, flags});
}

template <int BN>
__device__ __forceinline__ void stream(const CUtensorMap* ta, const CUtensorMap* tb, __nv_bfloat16* c, float* work,
                                      unsigned* flags, int M, int N, int K, int dp_tiles) {
    const StreamPlan<BN> plan(M, N, K, gridDim.x, dp_tiles);
    g::gemm_cta_bf16<BN>(ta, tb, K, plan, Fixup<BN, StreamPlan<BN>>{plan, g::StoreBf16{c, N}, work, flags});
}

}  // namespace streamk

#define KWIKI_STREAMK_KERNEL extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
#define KWIKI_STREAMK_MAPS const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb

// kwiki:rung cuda_dp
KWIKI_STREAMK_KERNEL ws_dp_kernel(KWIKI_STREAMK_MAPS, __nv_bfloat16* c, int M, int N, int K) {
    streamk::dp<128>(&ta, &tb, c, M, N, K);
}
// /kwiki:rung cuda_dp

KWIKI_STREAMK_KERNEL ws_dp_wide_kernel(KWIKI_STREAMK_MAPS, __nv_bfloat16* c, int M, int N, int K) {
    streamk::dp<256>(&ta, &tb, c, M, N, K);
}

// kwiki:rung cuda_splitk
KWIKI_STREAMK_KERNEL ws_splitk_kernel(KWIKI_STREAMK_MAPS, __nv_bfloat16* c, float* work, unsigned* flags, int M, int N,
                                      int K, int splits) {
    streamk::splitk<128>(&ta, &tb, c, work, flags, M, N, K, splits);
}
// /kwiki:rung cuda_splitk

// kwiki:rung cuda_splitk_wide
KWIKI_STREAMK_KERNEL ws_splitk_wide_kernel(KWIKI_STREAMK_MAPS, __nv_bfloat16* c, float* work, unsigned* flags, int M,
                                           int N, int K, int splits) {
    streamk::splitk<256>(&ta, &tb, c, work, flags, M, N, K, splits);
}
// /kwiki:rung cuda_splitk_wide

// kwiki:rung cuda_streamk
KWIKI_STREAMK_KERNEL ws_streamk_kernel(KWIKI_STREAMK_MAPS, __nv_bfloat16* c, float* work, unsigned* flags, int M, int N,
                                       int K, int dp_tiles) {
    streamk::stream<128>(&ta, &tb, c, work, flags, M, N, K, dp_tiles);
}
// /kwiki:rung cuda_streamk

// kwiki:rung cuda_streamk_wide
KWIKI_STREAMK_KERNEL ws_streamk_wide_kernel(KWIKI_STREAMK_MAPS, __nv_bfloat16* c, float* work, unsigned* flags, int M,
                                            int N, int K, int dp_tiles) {
    streamk::stream<256>(&ta, &tb, c, work, flags, M, N, K, dp_tiles);
}
// /kwiki:rung cuda_streamk_wide

#undef KWIKI_STREAMK_MAPS
#undef KWIKI_STREAMK_KERNEL

namespace streamk {

// A launch's shape: its grid on `sms` SMs (one CTA per SM, never more than its units: tiles, tiles x slices, or
// iterations for Stream-K, whose CTAs past the last iteration would hold empty ranges), the whole tiles before the
// Stream-K ones, and the 128 x 128 slots its partials take.
struct Launch {
    long long ctas;
    int dp_tiles, splits;
    long long slots;
};

// Sizes the kernels are not built for (false): a bad mode; bn not 128 or 256 (256: not the hybrid); M, N, K not in
// 1..2^30 (the plans' integer arithmetic), K not a multiple of 8 (TMA's 16-byte rows), N odd (bf16 pairs), more than
// 2^30 iterations; for split-K, splits not in 1..I.
inline bool sizes_ok(int mode, int bn, int splits, int M, int N, int K) {
    if (mode < DP || mode > SPLIT_K || (bn != 128 && bn != 256) || (bn == 256 && mode == HYBRID))
        return false;
    constexpr int MOST = 1 << 30;
    if (M <= 0 || N <= 0 || K <= 0 || M > MOST || N > MOST || K > MOST || K % 8 || N % 2) return false;
    const long long T = (long long)cdiv(M, g::BM) * cdiv(N, bn), iters = cdiv(K, g::TileBf16<128>::BK);
    return T * iters <= (1LL << 30) && (mode != SPLIT_K || (splits >= 1 && splits <= iters));
}

// Operands the kernels are not built for (false): a or bt not 16-byte aligned, c not 4-byte aligned; for any mode
// with partials, work not 16-byte aligned or flags not 4-byte aligned.
inline bool operands_ok(int mode, const void* a, const void* bt, const void* c, const float* work, const unsigned* flags) {
    for (const void* p : {a, bt})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16) return false;
    if (c == nullptr || reinterpret_cast<uintptr_t>(c) % 4) return false;
    return mode == DP || (work != nullptr && flags != nullptr && reinterpret_cast<uintptr_t>(work) % 16 == 0 &&
                          reinterpret_cast<uintptr_t>(flags) % 4 == 0);
}

// The launch of good sizes on `sms` SMs, or false where split-K has more units than CTAs and more splits than CTAs
// (a finisher's slices could then sit behind it on its own CTA).
inline bool plan_launch(int mode, int bn, int splits, int M, int N, int K, int sms, Launch* out) {
    if (!sizes_ok(mode, bn, splits, M, N, K) || sms <= 0) return false;
    const long long T = (long long)cdiv(M, g::BM) * cdiv(N, bn), iters = cdiv(K, g::TileBf16<128>::BK);
    Launch l{0, 0, 1, 0};
    if (mode == SPLIT_K) l.splits = cdiv(int(iters), cdiv(int(iters), splits));
    const long long units = mode == DP ? T : mode == SPLIT_K ? T * l.splits : T * iters;
    l.ctas = units < sms ? units : sms;
    if (mode == SPLIT_K && units > l.ctas && l.splits > l.ctas) return false;
    l.dp_tiles = dp_tiles_of(mode, int(T), int(l.ctas));
    l.slots = (mode == DP ? 0 : mode == SPLIT_K ? T * (l.splits - 1) : l.ctas) * (bn / 128);
    *out = l;
    return true;
}

}  // namespace streamk

// The launcher stream_k_gemm.py calls: mode 0 data-parallel, 1 Stream-K, 2 data-parallel waves and one Stream-K wave,
// 3 split-K into `splits` slices (ignored otherwise); bn the tile's width, 128 or 256 (256: not mode 2); a [M, K],
// bt [N, K] and c [M, N] bf16, contiguous on the current device; work fp32 [slots, 128 * 128] and flags int32
// [slots, 2] (zero before the first call; every launch leaves them zero), enough for the launch's partials (Stream-K:
// one a CTA; split-K: tiles x (splits - 1); twice those at bn 256). Returns 0, a CUDA error code, -1 (refused:
// sizes_ok and operands_ok before any CUDA call, then plan_launch and the slots) or -2 (the driver refused a tensor
// map).
extern "C" int kwiki_streamk_bf16(int mode, int bn, int splits, const void* a, const void* bt, void* c, float* work,
                                  unsigned* flags, long long slots, int M, int N, int K, cudaStream_t stream) {
    namespace g = kwiki::wsgemm;
    namespace sk = streamk;
    if (!sk::sizes_ok(mode, bn, splits, M, N, K) || !sk::operands_ok(mode, a, bt, c, work, flags)) return -1;
    const int sms = g::sm_count_or_error();
    if (sms < 0) return -sms;
    sk::Launch l;
    if (!sk::plan_launch(mode, bn, splits, M, N, K, sms, &l) || slots < l.slots) return -1;
    CUtensorMap ta, tb;
    if (g::tensor_map(&ta, a, M, K, g::BM, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS ||
        g::tensor_map(&tb, bt, N, K, bn, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS)
        return -2;
    const bool wide = bn == 256;
    const void* kernel = mode == sk::DP    ? reinterpret_cast<const void*>(wide ? ws_dp_wide_kernel : ws_dp_kernel)
                         : mode == sk::SPLIT_K ? reinterpret_cast<const void*>(wide ? ws_splitk_wide_kernel : ws_splitk_kernel)
                                           : reinterpret_cast<const void*>(wide ? ws_streamk_wide_kernel : ws_streamk_kernel);
    const int smem = wide ? g::TileBf16<256>::SMEM_BYTES : g::TileBf16<128>::SMEM_BYTES;
    static bool configured[6] = {};
    const int which = (mode == sk::DP ? 0 : mode == sk::SPLIT_K ? 2 : 4) + wide;
    const long long grid = g::persistent_grid(kernel, smem, configured[which], l.ctas);
    if (grid < 0) return int(-grid);
    auto* out = static_cast<__nv_bfloat16*>(c);
    const dim3 blocks{unsigned(grid)}, threads{unsigned(g::THREADS)};
    if (mode == sk::DP) {
        if (wide) ws_dp_wide_kernel<<<blocks, threads, smem, stream>>>(ta, tb, out, M, N, K);
        else ws_dp_kernel<<<blocks, threads, smem, stream>>>(ta, tb, out, M, N, K);
        return int(cudaGetLastError());
    }
    // the fix-up's CTAs wait for one another: a cooperative launch runs them all at once or fails
    int extra = mode == sk::SPLIT_K ? l.splits : l.dp_tiles;
    void* args[] = {&ta, &tb, &out, &work, &flags, &M, &N, &K, &extra};
    return int(cudaLaunchCooperativeKernel(kernel, blocks, threads, args, size_t(smem), stream));
}

namespace streamk {

// Every job of a plan, 9 ints each (cta, a_row, col0, kb0, kb1 clamped to K's k-blocks, role, then for a partial its
// slot and -1, for a finisher the first and last slot it adds, else -1 and -1), at most `max` of them.
template <class Plan>
int export_jobs(const Plan& plan, int ctas, int* jobs, int max) {
    for (int t = 0; t < plan.tiles() && t < max; ++t) {
        const g::Job j = plan.job(t);
        const int role = plan.role(j), c = t % ctas;
        int first = -1, last = -1;
        if (role == PARTIAL) first = plan.partial_slot(j, c);
        if (role == FINISHER) plan.peers(j, c, first, last);
        const int row[9] = {c, j.a_row, j.col0, j.kb0, j.kb1 < plan.iters ? j.kb1 : plan.iters, role, first, last, t / ctas};
        for (int i = 0; i < 9; ++i) jobs[9 * t + i] = row[i];
    }
    return plan.tiles();
}

}  // namespace streamk

// The plan the kernels walk, on the host, for tests: the jobs of a launch on `sms` SMs as streamk::export_jobs writes
// them (data-parallel: split-K with one slice, which walks the same tiles); returns the job count, or -1 (what the
// launcher refuses in the sizes). *slots: the 128 x 128 slots the launch takes.
extern "C" int kwiki_streamk_plan(int mode, int bn, int splits, int M, int N, int K, int sms, int* jobs, int max,
                                  long long* slots) {
    namespace sk = streamk;
    sk::Launch l;
    if (!sk::plan_launch(mode, bn, splits, M, N, K, sms, &l)) return -1;
    *slots = l.slots;
    const int ctas = int(l.ctas);
    if ((mode == sk::STREAM_K || mode == sk::HYBRID) && bn == 256)
        return sk::export_jobs(sk::StreamPlan<256>(M, N, K, ctas, l.dp_tiles), ctas, jobs, max);
    if (mode == sk::STREAM_K || mode == sk::HYBRID)
        return sk::export_jobs(sk::StreamPlan<128>(M, N, K, ctas, l.dp_tiles), ctas, jobs, max);
    const int s = mode == sk::DP ? 1 : l.splits;
    if (bn == 256) return sk::export_jobs(sk::SplitPlan<256>(M, N, K, s), ctas, jobs, max);
    return sk::export_jobs(sk::SplitPlan<128>(M, N, K, s), ctas, jobs, max);
}
