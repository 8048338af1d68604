// softmax_cluster.cu: the row softmax with each row read once from memory, at lengths one program's registers do not
// hold: a thread-block cluster holds the row in its CTAs' shared memory. Built by kwiki into the shared library that
// softmax.py loads ($KWIKI_CUDA_LIBRARY) and called through ctypes on torch's current stream.
//
// Build (kwiki does it): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -shared
//                        -Xcompiler -fPIC -o libsoftmax.so softmax_cluster.cu
//
// y[r, j] = exp(x[r, j] - lse(x[r])) (bf16), x and y [rows, cols] bf16, contiguous, cols a multiple of 8 and at most
// 16 slices of 32 KiB (262144). The Triton rungs of softmax.py keep a row in one program's registers up to 32768
// elements (where it takes half an SM's registers) or read it twice over chunks. Here a cluster of C CTAs (the
// smallest power of two whose slices are at most 32 KiB: 1 up to 16384 elements, 2 at 32768, 16 at 262144) holds
// a row, each CTA a slice, on kwiki_cluster.cuh's ring_rows: persistent clusters (as many as run at once, or the
// caller's cap), two slice buffers a CTA, the next row's slice brought in by one bulk copy while this row is reduced
// and written; the slices' maxima and sums of exp meet through distributed shared memory (the online-softmax rule,
// kwiki_cluster.cuh's SoftmaxStats), and every CTA writes its slice's probabilities from shared memory.
#include <cstdint>

#include "kwiki_cluster.cuh"

namespace {

namespace kc = kwiki::cluster;
using bf16 = __nv_bfloat16;

// kwiki:rung cuda_cluster
// The row op of ring_rows: the softmax's statistics give the row's log-sum-exp, then 2^(x log2(e) - lse log2(e)) of
// every element of the slice, rounded to bf16, 16 bytes a thread and store.
struct Softmax : kc::SoftmaxStats {
    bf16* y;
    int cols;

    __device__ __forceinline__ void write(int row, const uint4* slice, const kc::Slice& sl, float lse) const {
        const float c = lse * kc::kLog2e;
        uint4* yr = reinterpret_cast<uint4*>(y + size_t(row) * cols) + sl.begin;
#pragma unroll 4
        for (int j = threadIdx.x; j < sl.n; j += kc::kRingThreads) {
            const uint4 v = slice[j];
            const uint32_t w[4] = {v.x, v.y, v.z, v.w};
            uint32_t out[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const __nv_bfloat162 h = __floats2bfloat162_rn(kc::ex2(fmaf(kc::lo_f(w[i]), kc::kLog2e, -c)),
                                                               kc::ex2(fmaf(kc::hi_f(w[i]), kc::kLog2e, -c)));
                out[i] = *reinterpret_cast<const uint32_t*>(&h);
            }
            yr[j] = make_uint4(out[0], out[1], out[2], out[3]);
        }
    }
};

__global__ void __launch_bounds__(kc::kRingThreads)
softmax_cluster_kernel(const bf16* __restrict__ x, bf16* __restrict__ y, int rows, int cols) {
    const Softmax op{{}, y, cols};
    kc::ring_rows(x, rows, cols, op);
}
// /kwiki:rung cuda_cluster

}  // namespace

// The launcher the module calls: x and y [rows, cols] bf16, contiguous, 16-byte aligned; max_clusters 0 (as many as
// run at once) or a cap. Returns 0, a CUDA error code, or -1 (rows or cols not positive, rows above 65535, cols not
// a multiple of 8 or a row longer than 16 slices of 32 KiB, a negative cap, x or y not 16-byte aligned), -3 (no
// cluster of this size fits the device). The module checks its operands before it calls, with a located message;
// the checks here keep a direct caller from a bad launch. One GPU a process: the library has its own CUDA runtime,
// whose current device (0) must be torch's, and its caches are not kept per device.
extern "C" int kwiki_softmax_cluster(const void* x, void* y, int rows, int cols, int max_clusters,
                                     cudaStream_t stream) {
    if (rows <= 0 || rows > 65535 || cols <= 0 || cols % kc::kRowVec != 0 || max_clusters < 0) return -1;
    if (reinterpret_cast<uintptr_t>(x) % 16 || reinterpret_cast<uintptr_t>(y) % 16) return -1;
    return kc::ring_launch(softmax_cluster_kernel, rows, cols, max_clusters, stream, static_cast<const bf16*>(x),
                           static_cast<bf16*>(y), rows, cols);
}
