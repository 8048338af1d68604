// kwiki_cluster.cuh: what the artifacts that reduce a row across a thread-block cluster share. The cluster barrier
// split in two, a float read from another CTA's shared memory (distributed shared memory), a bulk copy of global
// memory into this CTA's shared memory (TMA's 1D form), and ring_rows: persistent clusters that hold each row in
// their CTAs' shared memory, two slice buffers a CTA filled a row ahead, each row's per-CTA statistics merged through
// distributed shared memory, with what a row op computes and writes left to an Op. PTX over sm90.cuh, no CUTLASS.
// Included by artifacts/row_reduce_sm90a (an RMSNorm-style scale), artifacts/cross_entropy_bf16_sm90a (the loss and
// its gradient) and artifacts/softmax_bf16_sm90a (the softmax); no rung markers here: the rungs are the artifacts'.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kwiki_reduce.cuh"  // kwiki::warp_sum
#include "sm90.cuh"

namespace kwiki::cluster {

// barrier.cluster split in two: arrive (release: this CTA's shared-memory writes before it are visible to the
// cluster once every CTA has arrived) and wait (acquire). Every thread of every CTA of the cluster executes both.
// arrive_relaxed orders no memory access (PTX ISA, barrier.cluster): it only says "this CTA is past this point".
__device__ __forceinline__ void arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// The float at `local` (this CTA's shared memory) in CTA `rank` of the cluster: mapa turns the shared-window address
// into the same variable's address in the other CTA's shared memory, and ld.shared::cluster reads it over the
// SM-to-SM network (distributed shared memory).
__device__ __forceinline__ float load_from_rank(const float* local, unsigned rank) {
    const uint32_t addr = uint32_t(__cvta_generic_to_shared(local));
    uint32_t remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

// `bytes` of global memory into this CTA's shared memory in one bulk copy (the TMA engine: no registers, no
// per-thread loads), completing the transaction count of `bar` (PTX ISA, cp.async.bulk: both addresses 16-byte
// aligned, a multiple of 16 bytes).
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sm90::smem_u32(smem)), "l"(gmem), "r"(bytes), "r"(sm90::smem_u32(bar)) : "memory");
}

// ===================================================================================================
// ring_rows: a row op over persistent clusters, each row read from memory once
// ===================================================================================================

constexpr int kRingThreads = 512;                 // every CTA of a ring
constexpr int kRingWarps = kRingThreads / 32;
constexpr int kRowVec = 8;                        // bf16 a 16-byte vector: rows are whole vectors
constexpr int kSliceVecs = 2048;                  // a slice: at most 2048 vectors (32 KiB)
constexpr int kMaxCluster = 16;                   // non-portable beyond 8, allowed per kernel
constexpr int kMaxRingSmem = 2 * kSliceVecs * 16;  // two slice buffers at the largest slice
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// This CTA's slice of every row: vectors [begin, end) of a row's V, the first slices ceil(V / C) vectors each.
struct Slice {
    int begin, end, n;
};

using kwiki::warp_sum;  // kwiki_reduce.cuh
__device__ __forceinline__ float warp_max(float v) {  // warp_sum's butterfly with fmaxf
#pragma unroll
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// The maximum (MAX) or the sum of v over the CTA, in every thread: a warp's shuffles, one value a warp in `red`
// (kRingWarps + 1 floats of shared memory), warp 0 folds them, a second barrier hands the result out. Two calls in a
// row are safe: the second writes red[kRingWarps] only after a barrier every thread reaches after reading the first's.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float* red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < kRingWarps ? red[lane] : (MAX ? -INFINITY : 0.0f);
        t = MAX ? warp_max(t) : warp_sum(t);
        if (lane == 0) red[kRingWarps] = t;
    }
    __syncthreads();
    return red[kRingWarps];
}

// A row op over persistent clusters (grid C x G, cluster C x 1 x 1, kRingThreads threads a CTA, 2 x ceil(V / C)
// vectors of dynamic shared memory): cluster j takes rows j, j + G, ... of x [rows, cols] (bf16, contiguous, cols a
// multiple of 8, 16-byte aligned), and CTA `rank` of it holds slice `rank` of each row. A row:
//  1. its slice arrives in one bulk copy, issued a row ahead by thread 0 into the other of two buffers;
//  2. op.partial(slice, sl, red): this CTA's pair of statistics (every thread calls it; block_reduce inside);
//  3. the pairs meet: a cluster barrier (release, acquire), then warp 0 reads the C pairs over distributed shared
//     memory and op.merge(pair, lane < C) folds them into the row's value, the same in every CTA;
//  4. op.write(row, slice, sl, value): every thread writes outputs from the slice in shared memory.
// The ring's hazards, each closed here:
//  - the CTA's u-th row is in buffer u % 2, whose mbarrier completes once a use: that row waits for parity (u / 2) % 2;
//  - the next row's copy goes into the buffer the previous row was written from: the __syncthreads at the top of a
//    row puts every thread's reads of it first, and the async-proxy fence orders those generic-proxy reads before the
//    copy's async-proxy writes;
//  - the pair is double-buffered: a peer reads it in row u before its release arrive of row u + 1, and it is written
//    again in row u + 2, after the acquire wait that meets that arrive (a relaxed arrive orders no memory access);
//  - no CTA leaves while a peer may still read its pair: each row ends with a cluster wait.
// Every CTA of a cluster has the same rows, so the cluster barriers always meet. The output may be x itself: a row's
// slice is in shared memory before its outputs are written, and the copy in flight reads another row.
template <class Op>
__device__ __forceinline__ void ring_rows(const __nv_bfloat16* x, int rows, int cols, const Op& op) {
    extern __shared__ uint4 ring[];  // two buffers of `per` vectors
    __shared__ float red[kRingWarps + 1];
    __shared__ float2 pair[2];  // [buffer]: this CTA's statistics of the row in that buffer
    __shared__ float row_value;
    __shared__ uint64_t full[2];
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    const int C = int(cluster.num_blocks()), rank = int(cluster.block_rank());
    const int V = cols / kRowVec, per = (V + C - 1) / C;
    const Slice sl{min(V, rank * per), min(V, (rank + 1) * per), min(V, (rank + 1) * per) - min(V, rank * per)};
    const uint32_t bytes = uint32_t(sl.n) * 16u;
    if (threadIdx.x == 0) {
        sm90::mbar_init(&full[0], 1), sm90::mbar_init(&full[1], 1);
        sm90::fence_barrier_init();
    }
    __syncthreads();
    const auto load = [&](int row, int b) {  // thread 0 only
        sm90::mbar_arrive_expect_tx(&full[b], bytes);
        if (bytes) bulk_load(ring + b * per, x + size_t(row) * cols + size_t(sl.begin) * kRowVec, bytes, &full[b]);
    };
    const int step = int(gridDim.y);
    if (threadIdx.x == 0 && int(blockIdx.y) < rows) load(int(blockIdx.y), 0);
    int u = 0;  // rows done by this CTA
    for (int row = int(blockIdx.y); row < rows; row += step, ++u) {
        const int b = u & 1;
        __syncthreads();  // every thread is past its reads of buffer b ^ 1 (the previous row's outputs)
        if (threadIdx.x == 0 && row + step < rows) {
            sm90::fence_proxy_async();
            load(row + step, b ^ 1);
        }
        sm90::mbar_wait(&full[b], uint32_t(u >> 1) & 1u);
        const uint4* slice = ring + b * per;
        const float2 mine = op.partial(slice, sl, red);
        if (threadIdx.x == 0) pair[b] = mine;
        arrive();  // this CTA's pair is written (and every CTA of the cluster has started)
        wait();
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            float2 p = make_float2(0.0f, 0.0f);
            if (lane < C)
                p = make_float2(load_from_rank(&pair[b].x, unsigned(lane)), load_from_rank(&pair[b].y, unsigned(lane)));
            const float v = op.merge(p, lane < C);
            if (lane == 0) row_value = v;
        }
        arrive_relaxed();  // this CTA has read the row's pairs
        __syncthreads();
        op.write(row, slice, sl, row_value);
        wait();  // no CTA leaves while a peer may still read its pair
    }
}

// The softmax's statistics, for ring_rows: a slice's maximum and its sum of exp(x - maximum) (two block reductions
// over shared memory, exp as ex2.approx of x log2(e) - m log2(e)), merged by the online-softmax rule into the row's
// log-sum-exp: M = max m_c, lse = M + ln(sum s_c exp(m_c - M)). An empty slice is (-inf, 0) and weighs 0.
__device__ __forceinline__ float ex2(float x) {  // 2^x (ex2.approx.ftz.f32)
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float lg2(float x) {  // log2(x) (lg2.approx.ftz.f32)
    float y;
    asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ float lo_f(uint32_t w) { return __uint_as_float(w << 16); }  // a bf16 pair's lower half
__device__ __forceinline__ float hi_f(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

struct SoftmaxStats {
    __device__ __forceinline__ float2 partial(const uint4* slice, const Slice& sl, float* red) const {
        float m = -INFINITY;
#pragma unroll 4
        for (int j = threadIdx.x; j < sl.n; j += kRingThreads) {
            const uint4 v = slice[j];
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) m = fmaxf(m, fmaxf(lo_f(w[i]), hi_f(w[i])));
        }
        m = block_reduce<true>(m, red);
        const float mc = m == -INFINITY ? 0.0f : m * kLog2e;
        float s = 0.0f;
#pragma unroll 4
        for (int j = threadIdx.x; j < sl.n; j += kRingThreads) {
            const uint4 v = slice[j];
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) s += ex2(fmaf(lo_f(w[i]), kLog2e, -mc)) + ex2(fmaf(hi_f(w[i]), kLog2e, -mc));
        }
        return make_float2(m, block_reduce<false>(s, red));
    }
    __device__ __forceinline__ float merge(float2 p, bool valid) const {  // warp 0: the row's log-sum-exp
        const float mi = valid ? p.x : -INFINITY;
        const float M = warp_max(mi);
        const float S = warp_sum(mi == -INFINITY ? 0.0f : p.y * ex2((mi - M) * kLog2e));
        return M + lg2(S) * kLn2;
    }
};

// Host side of ring_rows: the cluster size for a row of `cols` bf16 (the smallest power of two whose slices are at
// most kSliceVecs vectors; 0 when even 16 are too few), and its dynamic shared memory (two slice buffers).
inline int ring_cluster_size(int cols) {
    const int V = cols / kRowVec;
    int c = 1;
    while (c < kMaxCluster && (V + c - 1) / c > kSliceVecs) c *= 2;
    return (V + c - 1) / c > kSliceVecs ? 0 : c;
}
inline size_t ring_smem(int cols, int C) { return 2 * size_t((cols / kRowVec + C - 1) / C) * 16; }

// The launch configuration of a ring kernel: C x G CTAs in clusters of C, kRingThreads threads, `smem` bytes.
struct RingLaunch {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr[1]{};
    RingLaunch(int C, int G, size_t smem, cudaStream_t stream) {
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = unsigned(C), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(unsigned(C), unsigned(G)), cfg.blockDim = dim3(kRingThreads), cfg.dynamicSmemBytes = smem;
        cfg.stream = stream, cfg.attrs = attr, cfg.numAttrs = 1;
    }
    RingLaunch(const RingLaunch&) = delete;  // cfg.attrs points into this object
    RingLaunch& operator=(const RingLaunch&) = delete;
};

// Allow `kernel` clusters of 16 and the largest ring's shared memory, then ask how many clusters of C CTAs with
// `smem` bytes each the device runs at once: the count, or -1 with the failed call's error in *err. Asked once a
// (kernel, C, smem): a launcher's host time is inside a timed call.
template <class Kernel>
int ring_active_clusters(Kernel kernel, int C, size_t smem, cudaError_t* err) {
    static struct { const void* kernel; int C; size_t smem; int active; } seen[32];
    static int n_seen = 0;
    const void* k = reinterpret_cast<const void*>(kernel);
    for (int i = 0; i < n_seen; ++i)
        if (seen[i].kernel == k && seen[i].C == C && seen[i].smem == smem) return seen[i].active;
    *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (*err == cudaSuccess)
        *err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxRingSmem);
    const RingLaunch l(C, 1, smem, nullptr);
    int active = 0;
    if (*err == cudaSuccess) *err = cudaOccupancyMaxActiveClusters(&active, kernel, &l.cfg);
    if (*err != cudaSuccess) {
        cudaGetLastError();  // cleared: a later launch's check does not report it again
        return -1;
    }
    if (n_seen < 32) seen[n_seen++] = {k, C, smem, active};
    return active;
}

// A ring kernel's launch from a library's launcher: rows of `cols` bf16, at most `max_clusters` clusters (0: as many
// as run at once), `args` the kernel's. Returns 0, a CUDA error code, -1 (a row longer than 16 slices of 32 KiB) or
// -3 (no cluster of this size fits the device). The caller has checked its operands. One GPU a process: a library
// has its own CUDA runtime, whose current device (0) must be torch's, and the cache above is not kept per device.
template <class... Params, class... Args>
int ring_launch(void (*kernel)(Params...), int rows, int cols, int max_clusters, cudaStream_t stream, Args... args) {
    const int C = ring_cluster_size(cols);
    if (C == 0) return -1;
    const size_t smem = ring_smem(cols, C);
    cudaError_t err = cudaSuccess;
    const int active = ring_active_clusters(kernel, C, smem, &err);
    if (active < 0) return int(err);
    if (active == 0) return -3;
    int G = rows < active ? rows : active;
    if (max_clusters > 0 && max_clusters < G) G = max_clusters;
    const RingLaunch l(C, G, smem, stream);
    const cudaError_t e = cudaLaunchKernelEx(&l.cfg, kernel, args...);
    return e != cudaSuccess ? int(e) : int(cudaGetLastError());
}
}  // namespace kwiki::cluster
