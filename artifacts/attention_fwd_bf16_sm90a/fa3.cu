// fa3.cu: FlashAttention-3-style forward kernels (bf16 in and out, fp32 softmax state, head dim 128 or 64), written
// out in PTX over artifacts/common/sm90.cuh with no CUTLASS; built by kwiki into the shared library that
// attention.py loads ($KWIKI_CUDA_LIBRARY) and called through ctypes on torch's current stream, so the harness
// checks them against the module's reference and times them interleaved with SDPA and FlexAttention.
//
// Build (kwiki does it): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -shared
//                        -Xcompiler -fPIC -o libfa3.so fa3.cu
//
// O = softmax(Q K^T / sqrt(d)) V for Q, O of [batch * heads, seq, d] and K, V of [batch * kv_heads, seq, d], d 128
// or 64, contiguous, heads a multiple of kv_heads (grouped-query attention: query head h reads KV head h / group,
// group = heads / kv_heads, in place: its tiles are loaded at the KV head's coordinate, nothing is copied). One CTA per
// (batch * head, 128 query rows): warpgroup 0 produces (one thread issues TMA loads of Q once and of 128-key K
// and V tiles into two 2-stage rings), warpgroups 1 and 2 consume, 64 query rows each: S = Q K^T by wgmma from
// shared memory, online softmax in registers, O += P V by wgmma with P from registers. seq need not be a
// multiple of 128: TMA reads rows past seq as zeros, keys >= seq are masked to -inf, rows >= seq are not
// written. Causal CTAs stop at the diagonal tile and mask only that tile. Beside O, where the caller passes an fp32
// [batch * heads, seq] buffer, each row's log-sum-exp ln sum_j exp(s_j / sqrt(d)) (split-KV combines and the
// backward pass need it), from the softmax state already in registers: (m c + log2 l) ln 2, one store a row.
//
// The three rungs are one kernel body under a mode, at each head dim (one extern "C" kernel each, named for the
// identity gate and the SASS checks of artifact.yaml; the head dim 64 kernels end in _d64 and are the same code
// at D = 64: one 64-column box a tile row, an m64n64k16 P V, half the shared memory):
//   fa3_ws_kernel        producer/consumer warpgroups, setmaxnreg, TMA ring, wgmma (SS for Q K^T, RS for P V)
//   fa3_pingpong_kernel  + named barriers: the two consumers take turns issuing their GEMMs, so one's softmax
//                          runs while the other's GEMMs do (FlashAttention-3, arXiv 2407.08608, section 3.1)
//   fa3_overlap_kernel   + inside a warpgroup, the next tile's Q K^T is issued before the previous P V and waited
//                          on first: the softmax of tile j runs while P V of tile j-1 is on the tensor cores
//                          (section 3.2)
// Each consumer iteration j issues, in one turn, O += P_{j-1} V_{j-1} and S_j = Q K_j^T, then computes the
// softmax of S_j; after the loop, the last P V. The rescale of O by the new running max waits until the P V
// that was issued with S_j has finished.
#include "fa3_attention.cuh"


// One rung's kernel at head dim D: attention_cta<MODE, false, D> in an extern "C" kernel named NAME.
#define FA3_KERNEL(NAME, MODE, D)                                                                   \
    extern "C" __global__ void __launch_bounds__(fa3::THREADS, 1)                                   \
    NAME(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk,            \
         const __grid_constant__ CUtensorMap tv, bf16* out, float* lse, int seq, int causal, int group, \
         float c) {                                                                                 \
        fa3::attention_cta<MODE, false, D>(&tq, &tk, &tv, out, lse, seq, causal, group, c);        \
    }

// kwiki:rung cuda_fa3_ws
FA3_KERNEL(fa3_ws_kernel, fa3::WS, 128)
FA3_KERNEL(fa3_ws_kernel_d64, fa3::WS, 64)
// /kwiki:rung cuda_fa3_ws

// kwiki:rung cuda_fa3_pingpong
FA3_KERNEL(fa3_pingpong_kernel, fa3::PINGPONG, 128)
FA3_KERNEL(fa3_pingpong_kernel_d64, fa3::PINGPONG, 64)
// /kwiki:rung cuda_fa3_pingpong

// kwiki:rung cuda_fa3_overlap
FA3_KERNEL(fa3_overlap_kernel, fa3::OVERLAP, 128)
FA3_KERNEL(fa3_overlap_kernel_d64, fa3::OVERLAP, 64)
// /kwiki:rung cuda_fa3_overlap
#undef FA3_KERNEL

namespace {

using Kernel = void (*)(CUtensorMap, CUtensorMap, CUtensorMap, bf16*, float*, int, int, int, float);

// Launch rung `variant`'s kernel at head dim D; the operands were checked by kwiki_fa3_fwd.
template <int D>
int launch(int variant, const Kernel (&kernels)[3], const void* q, const void* k, const void* v, void* o, float* lse, int bh, int seq,
           int causal, int group, cudaStream_t stream) {
    CUtensorMap tq, tk, tv;
    if (fa3::tensor_map_3d<D>(&tq, q, bh, seq) != CUDA_SUCCESS || fa3::tensor_map_3d<D>(&tk, k, bh / group, seq) != CUDA_SUCCESS ||
        fa3::tensor_map_3d<D>(&tv, v, bh / group, seq) != CUDA_SUCCESS)
        return -2;
    const Kernel f = kernels[variant];
    static bool configured[3] = {false, false, false};  // one set a head dim (a template instance each)
    if (!configured[variant]) {
        const cudaError_t e = cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, fa3::Head<D>::SMEM_BYTES);
        if (e != cudaSuccess) return int(e);
        configured[variant] = true;
    }
    const float c = 1.4426950408889634f / sqrtf(float(D));  // log2(e) / sqrt(d): exp(x / sqrt(d)) = 2^(x c)
    const dim3 grid(unsigned((seq + fa3::BM - 1) / fa3::BM), unsigned(bh));
    f<<<grid, fa3::THREADS, fa3::Head<D>::SMEM_BYTES, stream>>>(tq, tk, tv, static_cast<bf16*>(o), lse, seq, causal, group, c);
    return int(cudaGetLastError());
}

}  // namespace


// The launcher the module calls: variant 0 ws, 1 pingpong, 2 overlap; q, o of [bh, seq, head_dim] and k, v of
// [bh / group, seq, head_dim] bf16 (group query heads a KV head), head_dim 128 or 64, contiguous, 16-byte aligned;
// lse null (O only) or fp32 [bh, seq], contiguous, 4-byte aligned, each row's natural-log log-sum-exp. Returns 0,
// a CUDA error code, or -1 (head_dim not 128 or 64, a bad variant, seq, bh or group not positive, bh not a
// multiple of group, q, k, v or o not 16-byte aligned, lse not 4-byte aligned), -2 (the driver refused a tensor
// map). The module checks all of these before it calls, with a located message; the checks here keep a direct
// caller from a bad launch.
extern "C" int kwiki_fa3_fwd(int variant, const void* q, const void* k, const void* v, void* o, float* lse, int bh, int seq, int head_dim,
                             int causal, int group, cudaStream_t stream) {
    if ((head_dim != 128 && head_dim != 64) || variant < 0 || variant > 2 || bh <= 0 || seq <= 0 || bh > 65535 || group <= 0 ||
        bh % group != 0)
        return -1;
    for (const void* ptr : {q, k, v, static_cast<const void*>(o)})
        if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return -1;
    if (reinterpret_cast<uintptr_t>(lse) % alignof(float) != 0) return -1;
    static const Kernel d128[3] = {fa3_ws_kernel, fa3_pingpong_kernel, fa3_overlap_kernel};
    static const Kernel d64[3] = {fa3_ws_kernel_d64, fa3_pingpong_kernel_d64, fa3_overlap_kernel_d64};
    if (head_dim == 128) return launch<128>(variant, d128, q, k, v, o, lse, bh, seq, causal, group, stream);
    return launch<64>(variant, d64, q, k, v, o, lse, bh, seq, causal, group, stream);
}
