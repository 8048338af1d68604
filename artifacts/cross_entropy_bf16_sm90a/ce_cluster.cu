// ce_cluster.cu: the cross-entropy loss and its gradient with the logits read once from memory: a thread-block
// cluster holds each row in its CTAs' shared memory. Built by kwiki into the shared library that cross_entropy.py
// loads ($KWIKI_CUDA_LIBRARY) and called through ctypes on torch's current stream.
//
// Build (kwiki does it): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -shared
//                        -Xcompiler -fPIC -o libce.so ce_cluster.cu
//
// loss[r] = lse(x[r]) - x[r, t[r]] and grad[r, j] = exp(x[r, j] - lse(x[r])) - [j == t[r]] (bf16), both zero where
// t[r] is the ignore index; x and grad [rows, cols] bf16, contiguous, cols a multiple of 8 (16-byte rows of
// vectors), and grad may be x itself (in place, as Liger-Kernel runs). The Triton rungs of cross_entropy.py read a
// row twice, the second time from L2 where the row is still there: the log-sum-exp must be known before the
// first gradient element. A 128k-column row is 256 KiB of bf16, more than one SM's shared memory but not more than a
// cluster's: here a cluster of C CTAs (the smallest power of two whose slices are at most 32 KiB: 8 at 128256
// columns, 2 at 32000, 1 up to 16384) holds a row, each CTA a slice, and the row comes from memory once.
//
// The schedule is row_reduce_sm90a's cluster_ring (see that file and the cluster-reduction page): persistent
// clusters (as many as run at once, or the caller's cap; cluster j takes rows j, j + G, ...), two slice buffers a
// CTA, the next row's slice brought in by one bulk copy while this row is reduced, exchanged and written. A row:
//  1. the slice's maximum m_c, then its sum s_c = sum exp(x - m_c), both from shared memory (two block reductions);
//  2. (m_c, s_c) published in shared memory, a cluster barrier (release, acquire), then warp 0 reads the C pairs
//     from the cluster's CTAs (distributed shared memory) and merges them by the online-softmax rule: M = max m_c,
//     lse = M + ln(sum s_c exp(m_c - M)), the same in every CTA (each folds the same C pairs the same way);
//  3. the CTA whose slice holds the target writes the loss (rank 0 writes an ignored row's 0), and every CTA writes
//     its slice's gradient from shared memory, 16 bytes a thread and store.
// An ignored row is read and reduced like the others (the cluster's barriers meet the same way every row) and
// written as zeros. Exponentials are ex2.approx of x log2(e) - lse log2(e) (fp32; relative error about 2^-22).
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>

#include "kwiki_cluster.cuh"

namespace {

namespace cg = cooperative_groups;
namespace kc = kwiki::cluster;
using bf16 = __nv_bfloat16;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kVec = 8;                 // bf16 a 16-byte vector
constexpr int kSliceVecs = 2048;        // a slice: at most 2048 vectors (32 KiB)
constexpr int kMaxCluster = 16;         // non-portable beyond 8, allowed per kernel
constexpr int kMaxSmem = 2 * kSliceVecs * 16;  // two slice buffers
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

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

// A bf16 pair in a 32-bit word as two floats: a bf16 is the high half of a float.
__device__ __forceinline__ float lo_f(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ float max8(uint4 v, float m) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) m = fmaxf(m, fmaxf(lo_f(w[i]), hi_f(w[i])));
    return m;
}

// sum of 2^(x log2(e) - c) over the 8 values of v, added to s
__device__ __forceinline__ float sumexp8(uint4 v, float c, float s) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) s += ex2(fmaf(lo_f(w[i]), kLog2e, -c)) + ex2(fmaf(hi_f(w[i]), kLog2e, -c));
    return s;
}

// The gradient of 8 values: 2^(x log2(e) - c) - [i == k] (k: the target's index in this vector, else outside 0..7),
// rounded to bf16 pairs (the lower column in the low half).
__device__ __forceinline__ uint4 grad8(uint4 v, float c, int k) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float a = ex2(fmaf(lo_f(w[i]), kLog2e, -c)) - (2 * i == k ? 1.0f : 0.0f);
        const float b = ex2(fmaf(hi_f(w[i]), kLog2e, -c)) - (2 * i + 1 == k ? 1.0f : 0.0f);
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        out[i] = *reinterpret_cast<const uint32_t*>(&h);
    }
    return {out[0], out[1], out[2], out[3]};
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The maximum (MAX) or the sum of v over the block, in every thread: a warp's shuffles, one value a warp in shared
// memory, warp 0 folds them, a second barrier hands the result out. Two calls in a row are safe: the second writes
// red[kWarps] only after a barrier that every thread reaches after reading the first's.
template <bool MAX>
__device__ __forceinline__ float block_reduce(float v, float (&red)[kWarps + 1]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < kWarps ? red[lane] : (MAX ? -INFINITY : 0.0f);
        t = MAX ? warp_max(t) : warp_sum(t);
        if (lane == 0) red[kWarps] = t;
    }
    __syncthreads();
    return red[kWarps];
}

// kwiki:rung cuda_grad_cluster
// One cluster of C CTAs a row, persistent (grid C x G), two slice buffers a CTA (see the header comment). The
// ring's hazards are row_reduce_sm90a's cluster_ring's: a buffer is refilled only after the __syncthreads at the top
// of the row that follows its last reads, with the async-proxy fence between; the partial (m, s) is
// double-buffered, so a peer's read of it in row u is ordered before its next write (row u + 2) by the peer's
// release arrive of row u + 1. Every CTA of a cluster has the same rows, so the cluster barriers always meet. x and
// grad may be one buffer: a row's slice is in shared memory before its gradient is written, and the copy in flight
// reads another row.
__global__ void __launch_bounds__(kThreads)
ce_cluster_kernel(const bf16* x, const int64_t* __restrict__ t, float* __restrict__ loss, bf16* grad, int rows,
                  int cols, int ignore) {
    extern __shared__ uint4 ring[];  // two buffers of `per` vectors
    __shared__ float red[kWarps + 1];
    __shared__ float part[2][2];  // [buffer][max, sum of exp(x - max)] of this CTA's slice
    __shared__ float row_lse;
    __shared__ uint64_t full[2];
    const cg::cluster_group cluster = cg::this_cluster();
    const int C = int(cluster.num_blocks()), rank = int(cluster.block_rank());
    const int V = cols / kVec, per = (V + C - 1) / C;
    const int begin = min(V, rank * per), end = min(V, (rank + 1) * per), n = end - begin;
    const uint32_t bytes = uint32_t(n) * 16u;
    if (threadIdx.x == 0) {
        sm90::mbar_init(&full[0], 1), sm90::mbar_init(&full[1], 1);
        sm90::fence_barrier_init();
    }
    __syncthreads();
    const auto load = [&](int row, int b) {  // thread 0 only
        sm90::mbar_arrive_expect_tx(&full[b], bytes);
        if (bytes) kc::bulk_load(ring + b * per, x + size_t(row) * cols + size_t(begin) * kVec, bytes, &full[b]);
    };
    const int step = int(gridDim.y);
    if (threadIdx.x == 0 && int(blockIdx.y) < rows) load(int(blockIdx.y), 0);
    int u = 0;  // rows done by this CTA; row u is in buffer u % 2, whose wait is for parity (u / 2) % 2
    for (int row = int(blockIdx.y); row < rows; row += step, ++u) {
        const int b = u & 1;
        __syncthreads();  // every thread is past its reads of buffer b ^ 1 (the previous row's gradient)
        if (threadIdx.x == 0 && row + step < rows) {
            sm90::fence_proxy_async();
            load(row + step, b ^ 1);
        }
        sm90::mbar_wait(&full[b], uint32_t(u >> 1) & 1u);
        const uint4* slice = ring + b * per;
        float m = -INFINITY;
#pragma unroll 4
        for (int j = threadIdx.x; j < n; j += kThreads) m = max8(slice[j], m);
        m = block_reduce<true>(m, red);
        float s = 0.0f;
        const float mc = m == -INFINITY ? 0.0f : m * kLog2e;  // an empty slice: sum 0, no NaN
#pragma unroll 4
        for (int j = threadIdx.x; j < n; j += kThreads) s = sumexp8(slice[j], mc, s);
        s = block_reduce<false>(s, red);
        if (threadIdx.x == 0) part[b][0] = m, part[b][1] = s;
        kc::arrive();  // this CTA's partial is written (and every CTA has started)
        kc::wait();
        if (threadIdx.x < 32) {
            const int lane = threadIdx.x;
            const float mi = lane < C ? kc::load_from_rank(&part[b][0], unsigned(lane)) : -INFINITY;
            const float si = lane < C ? kc::load_from_rank(&part[b][1], unsigned(lane)) : 0.0f;
            const float M = warp_max(mi);
            const float S = warp_sum(mi == -INFINITY ? 0.0f : si * ex2((mi - M) * kLog2e));
            if (lane == 0) row_lse = M + lg2(S) * kLn2;
        }
        kc::arrive_relaxed();  // this CTA has read the row's partials
        __syncthreads();
        const float lse = row_lse, c = lse * kLog2e;
        const int64_t target = t[row];
        const bool keep = target != int64_t(ignore);
        const int col = keep ? int(target) : -1;  // a target outside the row writes no loss: the check fails
        if (threadIdx.x == 0) {
            if (!keep && rank == 0) loss[row] = 0.0f;
            if (keep && col >= begin * kVec && col < end * kVec)
                loss[row] = lse - __bfloat162float(reinterpret_cast<const bf16*>(slice)[col - begin * kVec]);
        }
        uint4* g = reinterpret_cast<uint4*>(grad + size_t(row) * cols) + begin;
#pragma unroll 4
        for (int j = threadIdx.x; j < n; j += kThreads)
            g[j] = keep ? grad8(slice[j], c, col - (begin + j) * kVec) : make_uint4(0, 0, 0, 0);
        kc::wait();  // no CTA leaves while another may still read its partial
    }
}
// /kwiki:rung cuda_grad_cluster

// The cluster size for `cols` (0: the row does not fit 16 slices of 32 KiB).
int cluster_size(int cols) {
    const int V = cols / kVec;
    int c = 1;
    while (c < kMaxCluster && (V + c - 1) / c > kSliceVecs) c *= 2;
    return (V + c - 1) / c > kSliceVecs ? 0 : c;
}

// How many clusters of C CTAs with `smem` bytes each the device runs at once (asked once a configuration: the
// launch's host time is inside the timed call), or the occupancy call's error in *err (then -1).
int active_clusters(int C, size_t smem, cudaError_t* err) {
    static struct { int C; size_t smem; int active; } seen[16];
    static int n_seen = 0;
    for (int i = 0; i < n_seen; ++i)
        if (seen[i].C == C && seen[i].smem == smem) return seen[i].active;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(C), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(unsigned(C)), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem;
    cfg.attrs = attr, cfg.numAttrs = 1;
    int active = 0;
    *err = cudaOccupancyMaxActiveClusters(&active, ce_cluster_kernel, &cfg);
    if (*err != cudaSuccess) return -1;
    if (n_seen < 16) seen[n_seen++] = {C, smem, active};
    return active;
}

}  // namespace

// The launcher the module calls: x and grad [rows, cols] bf16 (grad may be x: in place), t [rows] int64, loss
// [rows] fp32, all contiguous; targets in [0, cols) or `ignore`; max_clusters 0 (as many as run at once) or a cap.
// Returns 0, a CUDA error code, or -1 (rows or cols not positive, rows above 65535, cols not a multiple of 8 or a
// row longer than 16 slices of 32 KiB, a negative cap, a pointer not aligned: x and grad 16 bytes, t 8, loss 4),
// -3 (no cluster of this size fits the device). The module checks its operands before it calls, with a located
// message; the checks here keep a direct caller from a bad launch. One GPU a process: the library has its own CUDA
// runtime, whose current device (0) must be torch's, and its caches are not kept per device.
extern "C" int kwiki_ce_cluster(const void* x, const int64_t* t, float* loss, void* grad, int rows, int cols,
                                int ignore, int max_clusters, cudaStream_t stream) {
    if (rows <= 0 || rows > 65535 || cols <= 0 || cols % kVec != 0 || max_clusters < 0) return -1;
    if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(grad) % 16 ||
        reinterpret_cast<uintptr_t>(t) % alignof(int64_t) || reinterpret_cast<uintptr_t>(loss) % alignof(float))
        return -1;
    const int C = cluster_size(cols);
    if (C == 0) return -1;
    static bool configured = false;
    if (!configured) {
        cudaError_t e = cudaFuncSetAttribute(ce_cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        if (e == cudaSuccess)
            e = cudaFuncSetAttribute(ce_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem);
        if (e != cudaSuccess) {
            cudaGetLastError();  // cleared, so that a later launch's check does not report it again
            return int(e);
        }
        configured = true;
    }
    const size_t smem = 2 * size_t((cols / kVec + C - 1) / C) * 16;
    cudaError_t occupancy = cudaSuccess;
    const int active = active_clusters(C, smem, &occupancy);
    if (active < 0) {
        cudaGetLastError();
        return int(occupancy);
    }
    if (active == 0) return -3;
    const int G = std::min(std::min(rows, active), max_clusters > 0 ? max_clusters : INT_MAX);
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(C), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(unsigned(C), unsigned(G)), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem;
    cfg.stream = stream, cfg.attrs = attr, cfg.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, ce_cluster_kernel, static_cast<const bf16*>(x), t, loss,
                                             static_cast<bf16*>(grad), rows, cols, ignore);
    return e != cudaSuccess ? int(e) : int(cudaGetLastError());
}
