// streamk_ws.cu: data-parallel against Stream-K on the warp-specialized CUDA CTA of artifacts/common/kwiki_ws_gemm.cuh
// (a TMA producer warpgroup, two wgmma consumer warpgroups under setmaxnreg, no CUTLASS), the page's 128 x 128 tile in
// bf16 with 64-deep k-blocks and a 6-stage ring. Built by kwiki into the library stream_k_gemm.py loads
// ($KWIKI_CUDA_LIBRARY) and called through ctypes on torch's current stream.
//
// C [M, N] bf16 = A [M, K] B, with B given K-major as Bt [N, K] (what the wgmma descriptors read), fp32 accumulation.
// One CTA per SM (never more CTAs than iterations), all resident at once: a CTA may wait for another.
//
//   ws_dp_kernel       data-parallel: each CTA walks whole tiles t = blockIdx.x, + gridDim.x, ... (grouped order)
//   ws_streamk_kernel  Stream-K: the Stream-K tiles' iterations (tiles x k-blocks, tile after tile in grouped order)
//                      cut into gridDim.x contiguous ranges, CTA c's from begin(c) to begin(c + 1), crossing tiles at
//                      any k-block; before them, dp_tiles whole tiles data-parallel (0 for pure Stream-K; whole
//                      waves for the hybrid, so that one Stream-K wave balances what the waves leave)
//
// Fix-up, deterministic: a CTA whose range starts inside a tile hands its partial sum of that tile (its first job)
// to the CTA that started the tile (whose last job it is), through a slot of its own in `work` and a flag per
// consumer warpgroup. The finisher adds the partials of the CTAs after it in CTA order (= k order), so the sum's
// order depends on the shape and the grid only. A CTA's partial is its first job and the finisher's wait is its last:
// no CTA waits before it has written what others wait for, so the fix-up cannot deadlock while every CTA is resident.
#include "kwiki_ws_gemm.cuh"

namespace streamk {

namespace g = kwiki::wsgemm;

constexpr int BN = 128;  // the page's 128 x 128 tile: two consumers of m64n128k16, 64 fp32 totals a thread
using Tile = g::TileBf16<BN>;
constexpr int ACC = Tile::ACC;
constexpr unsigned WRITERS = 128;        // the threads of a consumer warpgroup: each arrives once on its flag

enum Mode { DP = 0, STREAM_K = 1, HYBRID = 2 };
enum Role { WHOLE = 0, PARTIAL = 1, FINISHER = 2, EMPTY = 3 };

// kwiki:rung cuda_streamk
// The jobs of every CTA (a Schedule of kwiki_ws_gemm.cuh): job t is CTA t % ctas's job of round t / ctas. Rounds
// below dp_rounds: data-parallel tile round * ctas + c while below dp_tiles. Then `segs` rounds of Stream-K jobs: the
// part of each Stream-K tile that CTA c's range covers, in order (empty jobs pad the shorter ranges).
struct Plan {
    g::Dense<BN> dense;
    int ctas, iters;      // the grid; k-blocks a tile
    int dp_tiles, dp_rounds;
    int q, r;             // the Stream-K iterations are q * ctas + r: CTAs below r get q + 1
    int segs;             // the most tiles one Stream-K range touches

    __host__ __device__ Plan(int m, int n, int k, int ctas_, int dp_tiles_)
        : dense(m, n), ctas(ctas_), iters((k + Tile::BK - 1) / Tile::BK), dp_tiles(dp_tiles_) {
        dp_rounds = (dp_tiles + ctas - 1) / ctas;
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
        const int lo0 = begin(c), hi0 = begin(c + 1), st = lo0 / iters + round - dp_rounds;
        const int first = st * iters, lo = lo0 > first ? lo0 : first, hi = hi0 < first + iters ? hi0 : first + iters;
        const int tile = dp_tiles + st;
        g::Job j = dense.job(tile < dense.tiles() ? tile : 0);
        j.kb0 = lo < hi ? lo - first : 0;
        j.kb1 = lo < hi ? hi - first : 0;
        return j;
    }
    __host__ __device__ int role(const g::Job& j) const {
        const int end = j.kb1 < iters ? j.kb1 : iters;
        return j.kb0 >= end ? EMPTY : j.kb0 > 0 ? PARTIAL : end < iters ? FINISHER : WHOLE;
    }
    // The last CTA with a partial of the tile that CTA c finishes (its range ends inside that tile): the CTAs after c
    // up to it each hand over one.
    __host__ __device__ int last_peer(int c) const {
        const int end = begin(c + 1), tile_end = (end / iters + 1) * iters;
        return cta_of(tile_end - 1);
    }
};

__device__ __forceinline__ void arrive_release(unsigned* flag) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(flag) : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* flag) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(flag) : "memory");
    return v;
}

// The epilogue of gemm_cta_bf16 for the plan's jobs: whole tiles stored, partials handed over, finished tiles fixed
// up and stored. work: [ctas][2 consumers][ACC / 4][128 threads] float4 (a warp's float4s contiguous); flags [ctas][2],
// 0 between launches: the partial's 128 writers add 1 each (release), the finisher's 128 threads wait for 128
// (acquire), read, add 1 each, and the last of them puts the flag back to 0.
struct Fixup {
    Plan plan;
    g::StoreBf16 out;
    float* work;
    unsigned* flags;

    __device__ __forceinline__ float4* slot(int cta, int cw, int tid) const {
        return reinterpret_cast<float4*>(work) + (size_t(cta) * 2 + cw) * (ACC / 4) * 128 + tid;
    }

    template <int A>
    __device__ __forceinline__ void store(const float (&acc)[A], const g::Job& j, int r_in, int tid) const {
        static_assert(A == ACC, "the slot holds one consumer's 64 x 128 totals");
        const int role = plan.role(j), cw = r_in / g::ROWS, c = blockIdx.x;
        if (role == WHOLE) return out.store(acc, j, r_in, tid);
        if (role == PARTIAL) {
            float4* s = slot(c, cw, tid);
#pragma unroll
            for (int q = 0; q < A / 4; ++q) __stcg(s + q * 128, make_float4(acc[4 * q], acc[4 * q + 1], acc[4 * q + 2], acc[4 * q + 3]));
            arrive_release(flags + 2 * c + cw);
            return;
        }
        float sum[A];
#pragma unroll
        for (int i = 0; i < A; ++i) sum[i] = acc[i];
        for (int p = c + 1, last = plan.last_peer(c); p <= last; ++p) {
            unsigned* flag = flags + 2 * p + cw;
            while (load_acquire(flag) < WRITERS) __nanosleep(32);
            const float4* s = slot(p, cw, tid);
#pragma unroll
            for (int q = 0; q < A / 4; ++q) {
                const float4 v = __ldcg(s + q * 128);
                sum[4 * q] += v.x, sum[4 * q + 1] += v.y, sum[4 * q + 2] += v.z, sum[4 * q + 3] += v.w;
            }
            if (atomicAdd(flag, 1u) == 2 * WRITERS - 1) atomicExch(flag, 0u);
        }
        out.store(sum, j, r_in, tid);
    }
};
// /kwiki:rung cuda_streamk

// kwiki:rung cuda_streamk_dp
// The whole tiles before the Stream-K ones for a mode, T tiles on `ctas` CTAs: every tile (DP), none (STREAM_K), or
// for HYBRID the data-parallel waves but the last full one (so that Stream-K spreads one wave and the remainder over
// every SM), every tile where the waves come out even, none under two waves.
__host__ __device__ inline int dp_tiles_of(int mode, int T, int ctas) {
    if (mode == DP) return T;
    if (mode == STREAM_K) return 0;
    if (T % ctas == 0) return T;
    return T < 2 * ctas ? 0 : (T / ctas - 1) * ctas;
}
// /kwiki:rung cuda_streamk_dp

}  // namespace streamk

// kwiki:rung cuda_dp
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
ws_dp_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, __nv_bfloat16* c, int M,
             int N, int K) {
    namespace g = kwiki::wsgemm;
    g::gemm_cta_bf16<streamk::BN>(&ta, &tb, K, g::Dense<streamk::BN>(M, N), g::StoreBf16{c, N});
}
// /kwiki:rung cuda_dp

// kwiki:rung cuda_streamk
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
ws_streamk_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, __nv_bfloat16* c,
                  float* work, unsigned* flags, int M, int N, int K, int dp_tiles) {
    namespace g = kwiki::wsgemm;
    const streamk::Plan plan(M, N, K, gridDim.x, dp_tiles);
    g::gemm_cta_bf16<streamk::BN>(&ta, &tb, K, plan, streamk::Fixup{plan, g::StoreBf16{c, N}, work, flags});
}
// /kwiki:rung cuda_streamk

namespace streamk {

// The grid of a mode on `sms` SMs: one CTA per SM, never more than the tiles (DP) or the iterations (Stream-K: with
// more, CTAs past the last iteration would hold empty ranges).
inline long long ctas_of(int mode, long long T, long long iters, int sms) {
    const long long most = mode == DP ? T : T * iters;
    return most < sms ? most : sms;
}

// Sizes the kernels are not built for: a bad mode; M, N, K not positive, K not a multiple of 8 (TMA's 16-byte rows),
// N odd (bf16 pairs), more than 2^30 iterations.
inline bool sizes_refused(int mode, int M, int N, int K) {
    if (mode < DP || mode > HYBRID || M <= 0 || N <= 0 || K <= 0 || K % 8 || N % 2) return true;
    const long long T = (long long)((M + g::BM - 1) / g::BM) * ((N + BN - 1) / BN), iters = (K + Tile::BK - 1) / Tile::BK;
    return T * iters > (1LL << 30);
}

// Operands the kernels are not built for: a or bt not 16-byte aligned, c not 4-byte aligned; for Stream-K, work not
// 16-byte aligned, flags not 4-byte aligned, or fewer slots than CTAs.
inline bool operands_refused(int mode, const void* a, const void* bt, const void* c, const float* work,
                             const unsigned* flags, int slots, long long ctas) {
    for (const void* p : {a, bt})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16) return true;
    if (c == nullptr || reinterpret_cast<uintptr_t>(c) % 4) return true;
    if (mode == DP) return false;
    return work == nullptr || flags == nullptr || reinterpret_cast<uintptr_t>(work) % 16 ||
           reinterpret_cast<uintptr_t>(flags) % 4 || slots < ctas;
}

}  // namespace streamk

// The launcher stream_k_gemm.py calls: mode 0 data-parallel, 1 Stream-K, 2 data-parallel waves and one Stream-K wave;
// a [M, K], bt [N, K] and c [M, N] bf16, contiguous on the current device; work fp32 [slots, 128 * 128] and flags int32
// [slots, 2] (zero before the first call; every launch leaves them zero) for modes 1 and 2. Returns 0, a CUDA error
// code, -1 (refused: streamk::sizes_refused and operands_refused say what) or -2 (the driver refused a tensor map).
extern "C" int kwiki_streamk_bf16(int mode, const void* a, const void* bt, void* c, float* work, unsigned* flags, int slots,
                                  int M, int N, int K, cudaStream_t stream) {
    namespace g = kwiki::wsgemm;
    if (streamk::sizes_refused(mode, M, N, K)) return -1;
    const g::Dense<streamk::BN> dense(M, N);
    const int iters = (K + streamk::Tile::BK - 1) / streamk::Tile::BK;
    const int sms = g::sm_count_or_error();
    if (streamk::operands_refused(mode, a, bt, c, work, flags, slots,
                                  streamk::ctas_of(mode, dense.tiles(), iters, sms > 0 ? sms : 1)))
        return -1;
    if (sms < 0) return -sms;
    CUtensorMap ta, tb;
    if (g::tensor_map(&ta, a, M, K, g::BM, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS ||
        g::tensor_map(&tb, bt, N, K, streamk::BN, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS)
        return -2;
    const void* kernel = mode == streamk::DP ? reinterpret_cast<const void*>(ws_dp_kernel)
                                             : reinterpret_cast<const void*>(ws_streamk_kernel);
    static bool configured[2] = {false, false};
    const long long grid = g::persistent_grid(kernel, streamk::Tile::SMEM_BYTES, configured[mode != streamk::DP],
                                              streamk::ctas_of(mode, dense.tiles(), iters, sms));
    if (grid < 0) return int(-grid);
    auto* out = static_cast<__nv_bfloat16*>(c);
    if (mode == streamk::DP)
        ws_dp_kernel<<<unsigned(grid), g::THREADS, streamk::Tile::SMEM_BYTES, stream>>>(ta, tb, out, M, N, K);
    else
        ws_streamk_kernel<<<unsigned(grid), g::THREADS, streamk::Tile::SMEM_BYTES, stream>>>(
            ta, tb, out, work, flags, M, N, K, streamk::dp_tiles_of(mode, dense.tiles(), int(grid)));
    return int(cudaGetLastError());
}

// The plan the kernels walk, on the host, for tests: the jobs of a mode for M x N x K on `sms` SMs, 8 ints each (cta,
// a_row, col0, kb0, kb1, role, last peer or -1, the round), at most `max` of them; returns the job count, or -1 (what
// the launcher refuses in the sizes, or sms not positive).
extern "C" int kwiki_streamk_plan(int mode, int M, int N, int K, int sms, int* jobs, int max) {
    if (sms <= 0 || streamk::sizes_refused(mode, M, N, K)) return -1;
    const kwiki::wsgemm::Dense<streamk::BN> dense(M, N);
    const int iters = (K + streamk::Tile::BK - 1) / streamk::Tile::BK;
    const int ctas = int(streamk::ctas_of(mode, dense.tiles(), iters, sms));
    const streamk::Plan plan(M, N, K, ctas, streamk::dp_tiles_of(mode, dense.tiles(), ctas));
    for (int t = 0; t < plan.tiles() && t < max; ++t) {
        const kwiki::wsgemm::Job j = plan.job(t);
        const int role = plan.role(j);
        const int row[8] = {t % ctas, j.a_row, j.col0, j.kb0, j.kb1 < iters ? j.kb1 : iters, role,
                            role == streamk::FINISHER ? plan.last_peer(t % ctas) : -1, t / ctas};
        for (int i = 0; i < 8; ++i) jobs[8 * t + i] = row[i];
    }
    return plan.tiles();
}
