// ws_grouped.cu: the grouped GEMM of a mixture-of-experts layer in CUDA for Hopper, warp-specialized: the CTAs of
// artifacts/common/kwiki_ws_gemm.cuh (a TMA producer warpgroup, two wgmma consumer warpgroups; in e4m3, promotion every
// 128 elements of K) over every expert's tiles. Built by kwiki into the library moe.py loads ($KWIKI_CUDA_LIBRARY,
// beside cublas_grouped.cu) and called through ctypes on torch's current stream.
//
// A [T, K] holds the routed rows sorted by expert, offs int32 [E] the cumulative end row of each expert (the
// contiguous layout; in the masked layout of the bf16 kernel, A [E, capacity, K] read as T = E x capacity rows, offs
// holds each expert's count of real rows, and expert e's rows start at e x capacity), W [E, N, K] the experts' weights (read by TMA as one [E * N, K] matrix: expert e's tile of
// columns n0.. is rows e * N + n0..), C [T, N] bf16. One persistent CTA per SM walks every expert's 128 x BN tiles,
// expert after expert, in grouped order inside each (its weights stay in L2 while its rows pass); thread 0 of each CTA
// turns the offsets into row starts and tile counts in shared memory first (no host sync). A tile's A rows may run
// into the next expert's rows, or past T: those rows are multiplied (or read as zeros) and never stored.
//
//   moe_fp8_row_kernel    e4m3, 128 x 128 tiles, row-wise scales, sa[T] per routed row and sw[E, N] per expert and
//                         output channel, applied in the epilogue (torch._scaled_grouped_mm's recipe)
//   moe_fp8_block_kernel  e4m3, 128 x 128 tiles, DeepSeek-V3's block scales, sa [K/128, T] per 1 x 128 group of a row
//                         and sw [E, N/128, K/128] per 128 x 128 block of an expert's weight, folded into every
//                         128-deep partial
//   moe_bf16_kernel       bf16, 128 x 256 tiles, no scales: the bf16 rungs' problem on the warp-specialized CTA
#include "kwiki_ws_gemm.cuh"

namespace moews {

namespace g = kwiki::wsgemm;

constexpr int BN_FP8 = 128;   // one weight scale block wide: one sw a k-block and tile
constexpr int BN_BF16 = 256;  // the bf16 warp-specialized GEMM's tile (128 accumulators a consumer thread)
constexpr int MAX_EXPERTS = 256;

// Every expert's tiles: expert e owns rows start[e] .. end[e] of A and C, ceil(rows / 128) x tiles_n tiles of BN
// columns in grouped order, the first of them tile cum[e] of the schedule (in shared memory: E starts and ends, E + 1
// first tiles).
template <int BN>
struct Experts {
    const int* start;
    const int* end;
    const int* cum;
    int E, N, tiles_n;
    __host__ __device__ int tiles() const { return cum[E]; }
    __host__ __device__ g::Job job(int t) const {
        int e = 0;
        while (t >= cum[e + 1]) ++e;  // experts without rows have no tiles: cum[e] == cum[e + 1] skips them
        int tm, tn;
        g::grouped_tile(t - cum[e], (end[e] - start[e] + g::BM - 1) / g::BM, tiles_n, tm, tn);
        return {start[e] + tm * g::BM, e * N + tn * BN, end[e], tn * BN, e};
    }
};

// The schedule's tables: each expert's first row, end row and first tile. Contiguous (capacity 0): offs holds the
// cumulative end rows, each clamped to [the previous end, T]. Masked (capacity > 0, T = E x capacity): offs holds the
// counts, each clamped to [0, capacity], and expert e's rows start at e x capacity. So no store of a tile can leave
// C (or, masked, its expert's rows) whatever offs holds.
__host__ __device__ inline void tables(const int* offs, int E, int T, int tiles_n, int capacity, int* start, int* end,
                                       int* cum) {
    int s = 0, c = 0;
    cum[0] = 0;
    for (int e = 0; e < E; ++e) {
        int rows;
        if (capacity > 0) {
            s = e * capacity;
            rows = offs[e] < 0 ? 0 : offs[e] > capacity ? capacity : offs[e];
        } else {
            rows = (offs[e] < s ? s : offs[e] > T ? T : offs[e]) - s;
        }
        start[e] = s, end[e] = s + rows;
        c += (rows + g::BM - 1) / g::BM * tiles_n;
        cum[e + 1] = c;
        if (capacity == 0) s += rows;
    }
}

// The tables in shared memory, then the CTA: e4m3 with a scaling (SCALING >= 0), or bf16 (SCALING < 0).
template <int BN, int SCALING>
__device__ __forceinline__ void grouped(const CUtensorMap* ta, const CUtensorMap* tw, const float* sa, const float* sw,
                                        const int* offs, __nv_bfloat16* out, int T, int N, int K, int E, int capacity) {
    __shared__ int start[MAX_EXPERTS], end[MAX_EXPERTS], cum[MAX_EXPERTS + 1];
    const int tiles_n = (N + BN - 1) / BN;
    if (threadIdx.x == 0) tables(offs, E, T, tiles_n, capacity, start, end, cum);
    __syncthreads();
    const Experts<BN> sched{start, end, cum, E, N, tiles_n};
    if constexpr (SCALING < 0) g::gemm_cta_bf16<BN>(ta, tw, K, sched, g::StoreBf16{out, N});
    else g::gemm_cta<BN, SCALING>(ta, tw, g::Scales{sa, sw, T, N, (K + g::BK - 1) / g::BK}, out, sched);
}

}  // namespace moews


// kwiki:rung cuda_grouped_fp8
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
moe_fp8_row_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tw, const float* sa,
                   const float* sw, const int* offs, __nv_bfloat16* out, int T, int N, int K, int E) {
    moews::grouped<moews::BN_FP8, kwiki::wsgemm::ROW>(&ta, &tw, sa, sw, offs, out, T, N, K, E, 0);
}
// /kwiki:rung cuda_grouped_fp8

// kwiki:rung cuda_grouped_fp8_block
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
moe_fp8_block_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tw, const float* sa,
                     const float* sw, const int* offs, __nv_bfloat16* out, int T, int N, int K, int E) {
    moews::grouped<moews::BN_FP8, kwiki::wsgemm::BLOCK>(&ta, &tw, sa, sw, offs, out, T, N, K, E, 0);
}
// /kwiki:rung cuda_grouped_fp8_block

// kwiki:rung cuda_grouped
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
moe_bf16_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tw, const int* offs,
                __nv_bfloat16* out, int T, int N, int K, int E, int capacity) {
    moews::grouped<moews::BN_BF16, -1>(&ta, &tw, nullptr, nullptr, offs, out, T, N, K, E, capacity);
}
// /kwiki:rung cuda_grouped


// The launcher moe.py calls: variant 0 row-wise scales (sa fp32 [T], sw fp32 [E, N]), 1 block scales (sa fp32
// [ceil(K/128), T], sw fp32 [E, ceil(N/128), ceil(K/128)]); a [T, K] and w [E, N, K] e4m3, offs int32 [E], c [T, N]
// bf16, all contiguous on the current device. Returns 0, a CUDA error code, or -1 (a bad variant; T, N, K not
// positive; E not in 1..256; N or K not a multiple of 16; a or w not 16-byte aligned; c, sa, sw or offs not 4-byte
// aligned, sw not 8-byte aligned for row-wise scales), -2 (the driver refused a tensor map). The module checks all of
// these before it calls, with a located message; the checks here keep a direct caller from a bad launch.
extern "C" int kwiki_moe_fp8(int variant, const void* a, const void* w, const float* sa, const float* sw, const int* offs, void* c,
                             int T, int N, int K, int E, cudaStream_t stream) {
    namespace g = kwiki::wsgemm;
    if (variant < 0 || variant > 1 || T <= 0 || N <= 0 || K <= 0 || E <= 0 || E > moews::MAX_EXPERTS || N % 16 || K % 16)
        return -1;
    for (const void* p : {a, w})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) return -1;
    for (const void* p : {static_cast<const void*>(sa), static_cast<const void*>(sw), static_cast<const void*>(offs),
                          static_cast<const void*>(c)})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 4 != 0) return -1;
    if (variant == 0 && reinterpret_cast<uintptr_t>(sw) % 8 != 0) return -1;  // column scales are read in pairs
    CUtensorMap ta, tw;
    if (g::tensor_map(&ta, a, T, K, g::BM) != CUDA_SUCCESS || g::tensor_map(&tw, w, (long long)E * N, K, moews::BN_FP8) != CUDA_SUCCESS)
        return -2;
    using Kernel = void (*)(CUtensorMap, CUtensorMap, const float*, const float*, const int*, __nv_bfloat16*, int, int, int, int);
    const Kernel kernels[2] = {moe_fp8_row_kernel, moe_fp8_block_kernel};
    static bool configured[2] = {false, false};
    constexpr int smem = g::Tile<moews::BN_FP8>::SMEM_BYTES;
    // the schedule's tiles are known on the device only; at most (ceil(T / 128) + E) x ceil(N / 128) of them
    const long long bound = ((long long)(T + g::BM - 1) / g::BM + E) * ((N + moews::BN_FP8 - 1) / moews::BN_FP8);
    const long long grid = g::persistent_grid(reinterpret_cast<const void*>(kernels[variant]), smem, configured[variant], bound);
    if (grid < 0) return int(-grid);
    kernels[variant]<<<unsigned(grid), g::THREADS, smem, stream>>>(ta, tw, sa, sw, offs, static_cast<__nv_bfloat16*>(c), T, N, K, E);
    return int(cudaGetLastError());
}

// The bf16 launcher moe.py calls: a [T, K] and w [E, N, K] bf16, offs int32 [E], c [T, N] bf16, all contiguous on the
// current device; capacity 0: the contiguous layout (offs the cumulative end rows), else the masked one (A [E,
// capacity, K] and C [E, capacity, N] as T = E x capacity rows, offs the counts). Returns 0, a CUDA error code, or -1
// (T, N, K not positive; E not in 1..256; capacity negative, or positive with T not E x capacity; N or K not a multiple
// of 8; a or w not 16-byte aligned; offs or c not 4-byte aligned), -2 (the driver refused a tensor map).
extern "C" int kwiki_moe_bf16(const void* a, const void* w, const int* offs, void* c, int T, int N, int K, int E,
                              int capacity, cudaStream_t stream) {
    namespace g = kwiki::wsgemm;
    if (T <= 0 || N <= 0 || K <= 0 || E <= 0 || E > moews::MAX_EXPERTS || N % 8 || K % 8) return -1;
    if (capacity < 0 || (capacity > 0 && (long long)E * capacity != T)) return -1;
    for (const void* p : {a, w})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) return -1;
    for (const void* p : {static_cast<const void*>(offs), static_cast<const void*>(c)})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 4 != 0) return -1;
    CUtensorMap ta, tw;
    if (g::tensor_map(&ta, a, T, K, g::BM, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS ||
        g::tensor_map(&tw, w, (long long)E * N, K, moews::BN_BF16, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS)
        return -2;
    static bool configured = false;
    constexpr int smem = g::TileBf16<moews::BN_BF16>::SMEM_BYTES;
    // masked: E x ceil(capacity / 128) m-tiles at most, no more than ceil(T / 128) + E
    const long long bound = ((long long)(T + g::BM - 1) / g::BM + E) * ((N + moews::BN_BF16 - 1) / moews::BN_BF16);
    const long long grid = g::persistent_grid(reinterpret_cast<const void*>(moe_bf16_kernel), smem, configured, bound);
    if (grid < 0) return int(-grid);
    moe_bf16_kernel<<<unsigned(grid), g::THREADS, smem, stream>>>(ta, tw, offs, static_cast<__nv_bfloat16*>(c), T, N, K, E,
                                                                  capacity);
    return int(cudaGetLastError());
}

// The schedule the kernels walk, on the host, for tests: the same tables and jobs from host offsets (capacity 0) or
// counts (capacity > 0, T = E x capacity), for tiles bn wide (128: the e4m3 kernels, 256: the bf16 one). Writes at most
// `max` jobs as 5 ints each (a_row, b_row, row_end, col0, group) and returns the schedule's tile count, or -1 (bn not
// 128 or 256, E not in 1..256, T or N not positive, capacity negative or not T / E).
template <int BN>
int schedule_of(const int* offs, int E, int T, int N, int capacity, int* jobs, int max) {
    int start[moews::MAX_EXPERTS], end[moews::MAX_EXPERTS], cum[moews::MAX_EXPERTS + 1];
    const int tiles_n = (N + BN - 1) / BN;
    moews::tables(offs, E, T, tiles_n, capacity, start, end, cum);
    const moews::Experts<BN> sched{start, end, cum, E, N, tiles_n};
    for (int t = 0; t < sched.tiles() && t < max; ++t) {
        const kwiki::wsgemm::Job j = sched.job(t);
        const int row[5] = {j.a_row, j.b_row, j.row_end, j.col0, j.group};
        for (int i = 0; i < 5; ++i) jobs[5 * t + i] = row[i];
    }
    return sched.tiles();
}

extern "C" int kwiki_moe_schedule(int bn, const int* offs, int E, int T, int N, int capacity, int* jobs, int max) {
    if (E <= 0 || E > moews::MAX_EXPERTS || T <= 0 || N <= 0) return -1;
    if (capacity < 0 || (capacity > 0 && (long long)E * capacity != T)) return -1;
    if (bn == moews::BN_FP8) return schedule_of<moews::BN_FP8>(offs, E, T, N, capacity, jobs, max);
    if (bn == moews::BN_BF16) return schedule_of<moews::BN_BF16>(offs, E, T, N, capacity, jobs, max);
    return -1;
}
