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
// The schedule is kwiki_cluster.cuh's ring_rows, which row_reduce_sm90a's cluster_ring runs too (see the
// cluster-reduction page): persistent clusters (as many as run at once, or the caller's cap; cluster j takes rows j,
// j + G, ...), two slice buffers a CTA, the next row's slice brought in by one bulk copy while this row is reduced,
// exchanged and written. A row:
//  1. the slice's maximum m_c, then its sum s_c = sum exp(x - m_c), both from shared memory (two block reductions);
//  2. (m_c, s_c) published in shared memory, a cluster barrier (release, acquire), then warp 0 reads the C pairs
//     from the cluster's CTAs (distributed shared memory) and merges them by the online-softmax rule: M = max m_c,
//     lse = M + ln(sum s_c exp(m_c - M)), the same in every CTA (each folds the same C pairs the same way);
//  3. the CTA whose slice holds the target writes the loss (rank 0 writes an ignored row's 0), and every CTA writes
//     its slice's gradient from shared memory, 16 bytes a thread and store.
// An ignored row is read and reduced like the others (the cluster's barriers meet the same way every row) and
// written as zeros. Exponentials are ex2.approx of x log2(e) - lse log2(e) (fp32; relative error about 2^-22).
#include <cstdint>

#include "kwiki_cluster.cuh"

namespace {

namespace kc = kwiki::cluster;
using bf16 = __nv_bfloat16;

// The gradient of 8 values: 2^(x log2(e) - c) - [i == k] (k: the target's index in this vector, else outside 0..7),
// rounded to bf16 pairs (the lower column in the low half).
__device__ __forceinline__ uint4 grad8(uint4 v, float c, int k) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float a = kc::ex2(fmaf(kc::lo_f(w[i]), kc::kLog2e, -c)) - (2 * i == k ? 1.0f : 0.0f);
        const float b = kc::ex2(fmaf(kc::hi_f(w[i]), kc::kLog2e, -c)) - (2 * i + 1 == k ? 1.0f : 0.0f);
        const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
        out[i] = *reinterpret_cast<const uint32_t*>(&h);
    }
    return {out[0], out[1], out[2], out[3]};
}

// kwiki:rung cuda_grad_cluster
// The row op of ring_rows (kwiki_cluster.cuh): the softmax's statistics give the row's log-sum-exp; then the CTA
// whose slice holds the target writes the loss (rank 0 an ignored row's 0), and every CTA writes its slice's
// gradient from shared memory, 16 bytes a thread and store (an ignored row's zeros). grad may be x (in place).
struct CrossEntropy : kc::SoftmaxStats {
    const int64_t* t;
    float* loss;
    __nv_bfloat16* grad;
    int cols, ignore;

    __device__ __forceinline__ void write(int row, const uint4* slice, const kc::Slice& sl, float lse) const {
        const float c = lse * kc::kLog2e;
        const int64_t target = t[row];
        const bool keep = target != int64_t(ignore);
        const int col = keep ? int(target) : -1;  // a target outside the row writes no loss: the check fails
        const int rank = int(cooperative_groups::this_cluster().block_rank());
        if (threadIdx.x == 0) {
            if (!keep && rank == 0) loss[row] = 0.0f;
            if (keep && col >= sl.begin * kc::kRowVec && col < sl.end * kc::kRowVec)
                loss[row] = lse - __bfloat162float(reinterpret_cast<const bf16*>(slice)[col - sl.begin * kc::kRowVec]);
        }
        uint4* g = reinterpret_cast<uint4*>(grad + size_t(row) * cols) + sl.begin;
#pragma unroll 4
        for (int j = threadIdx.x; j < sl.n; j += kc::kRingThreads)
            g[j] = keep ? grad8(slice[j], c, col - (sl.begin + j) * kc::kRowVec) : make_uint4(0, 0, 0, 0);
    }
};

// One cluster a row over persistent clusters (kwiki_cluster.cuh's ring_rows, its hazards closed there).
__global__ void __launch_bounds__(kc::kRingThreads)
ce_cluster_kernel(const bf16* x, const int64_t* __restrict__ t, float* __restrict__ loss, bf16* grad, int rows,
                  int cols, int ignore) {
    const CrossEntropy op{{}, t, loss, grad, cols, ignore};
    kc::ring_rows(x, rows, cols, op);
}
// /kwiki:rung cuda_grad_cluster

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
    if (rows <= 0 || rows > 65535 || cols <= 0 || cols % kc::kRowVec != 0 || max_clusters < 0) return -1;
    if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(grad) % 16 ||
        reinterpret_cast<uintptr_t>(t) % alignof(int64_t) || reinterpret_cast<uintptr_t>(loss) % alignof(float))
        return -1;
    return kc::ring_launch(ce_cluster_kernel, rows, cols, max_clusters, stream, static_cast<const bf16*>(x), t, loss,
                           static_cast<bf16*>(grad), rows, cols, ignore);
}
