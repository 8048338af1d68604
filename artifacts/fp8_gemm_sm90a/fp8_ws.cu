// fp8_ws.cu: warp-specialized fp8 (e4m3) GEMMs in CUDA for Hopper: kwiki_ws_gemm.cuh's CTA over one GEMM's tiles in
// grouped order, built by kwiki into the shared library that fp8_gemm.py loads ($KWIKI_CUDA_LIBRARY) and called
// through ctypes on torch's current stream, so the harness checks them against the module's reference and times them
// interleaved with torch._scaled_mm (cuBLASLt) and the Triton rungs.
//
// Build (kwiki does it): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -shared
//                        -Xcompiler -fPIC -o libfp8_ws.so fp8_ws.cu
//
// C[M, N] (bf16, row-major) = dequant(A) dequant(B)^T for A [M, K] and B [N, K] of e4m3 codes; one persistent CTA per
// SM walks the 128 x BN output tiles in grouped order (the mainloop, the promotion every 128 elements of K and the
// scalings: kwiki_ws_gemm.cuh).
//
//   fp8_ws_tensor_kernel       per-tensor scales, BN = 128: totals += partial; sA sB once in the epilogue
//   fp8_ws_block_kernel        DeepSeek-V3's block scales, BN = 128: sA[g, m] per 1 x 128 group of A (stored
//                              [K/128, M]) and sB[n / 128, g] per 128 x 128 block of B; totals += partial *
//                              sA[g, row] sB[n / 128, g]
//   fp8_ws_tensor_wide_kernel  fp8_ws_tensor_kernel at BN = 192 (a sixth fewer operand bytes a FLOP loaded; 192
//                              registers of totals and partials a thread)
//   fp8_ws_block_wide_kernel   fp8_ws_block_kernel at BN = 192: a tile spans two 128-column scale blocks of B
//   fp8_ws_row_kernel          per-row scales, BN = 128: sA[m] per row of A and sB[n] per row of B (per token, per
//                              output channel), multiplied per element in the epilogue
#include "kwiki_ws_gemm.cuh"

namespace fp8ws {

namespace g = kwiki::wsgemm;

template <int BN, int SCALING>
__device__ __forceinline__ void gemm(const CUtensorMap* ta, const CUtensorMap* tb, const float* sa, const float* sb,
                                     __nv_bfloat16* out, int M, int N, int K) {
    const g::Dense<BN> sched(M, N);
    g::gemm_cta<BN, SCALING>(ta, tb, g::Scales{sa, sb, M, N, (K + g::BK - 1) / g::BK}, out, sched);
}

}  // namespace fp8ws


// kwiki:rung cuda_tensor_ws
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
fp8_ws_tensor_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                     const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm<128, kwiki::wsgemm::TENSOR>(&ta, &tb, sa, sb, out, M, N, K);
}
// /kwiki:rung cuda_tensor_ws

// kwiki:rung cuda_block_ws
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
fp8_ws_block_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                    const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm<128, kwiki::wsgemm::BLOCK>(&ta, &tb, sa, sb, out, M, N, K);
}
// /kwiki:rung cuda_block_ws

extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
fp8_ws_tensor_wide_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                          const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm<192, kwiki::wsgemm::TENSOR>(&ta, &tb, sa, sb, out, M, N, K);
}

extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
fp8_ws_row_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                  const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm<128, kwiki::wsgemm::ROW>(&ta, &tb, sa, sb, out, M, N, K);
}

extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
fp8_ws_block_wide_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                         const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm<192, kwiki::wsgemm::BLOCK>(&ta, &tb, sa, sb, out, M, N, K);
}


namespace fp8ws {

using Kernel = void (*)(CUtensorMap, CUtensorMap, const float*, const float*, __nv_bfloat16*, int, int, int);
struct Launchable {
    Kernel kernel;
    int bn, smem;
};
// kwiki_fp8_gemm's variants, in its numbering
const Launchable VARIANTS[5] = {{fp8_ws_tensor_kernel, 128, g::Tile<128>::SMEM_BYTES},
                                {fp8_ws_block_kernel, 128, g::Tile<128>::SMEM_BYTES},
                                {fp8_ws_tensor_wide_kernel, 192, g::Tile<192>::SMEM_BYTES},
                                {fp8_ws_block_wide_kernel, 192, g::Tile<192>::SMEM_BYTES},
                                {fp8_ws_row_kernel, 128, g::Tile<128>::SMEM_BYTES}};

}  // namespace fp8ws


// The launcher the module calls: variant 0 per-tensor scales (sa and sb one fp32 each), 1 block scales (sa fp32
// [ceil(K/128), M], sb fp32 [ceil(N/128), ceil(K/128)]), 2 and 3 the same at the 192-wide tile, 4 per-row scales
// (sa fp32 [M], sb fp32 [N]); a [M, K] and b [N, K] e4m3, c [M, N] bf16, all contiguous. Returns 0, a CUDA error
// code, or -1 (a bad variant; M, N or K not positive; N or K not a multiple of 16; a or b not 16-byte aligned; c, sa
// or sb not 4-byte aligned, or sb not 8-byte aligned for per-row scales, which are read in pairs), -2 (the driver
// refused a tensor map). The module checks all of these before it calls, with a located message; the checks
// here keep a direct caller from a bad launch.
extern "C" int kwiki_fp8_gemm(int variant, const void* a, const void* b, const float* sa, const float* sb, void* c, int m, int n,
                              int k, cudaStream_t stream) {
    namespace g = kwiki::wsgemm;
    if (variant < 0 || variant > 4 || m <= 0 || n <= 0 || k <= 0 || n % 16 || k % 16) return -1;
    for (const void* p : {a, b})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) return -1;
    for (const void* p : {static_cast<const void*>(sa), static_cast<const void*>(sb), static_cast<const void*>(c)})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 4 != 0) return -1;
    if (variant == 4 && reinterpret_cast<uintptr_t>(sb) % 8 != 0) return -1;
    const fp8ws::Launchable& v = fp8ws::VARIANTS[variant];
    CUtensorMap ta, tb;
    if (g::tensor_map(&ta, a, m, k, g::BM) != CUDA_SUCCESS || g::tensor_map(&tb, b, n, k, v.bn) != CUDA_SUCCESS) return -2;
    static bool configured[5] = {false, false, false, false, false};
    const long long tiles = (long long)((m + g::BM - 1) / g::BM) * ((n + v.bn - 1) / v.bn);
    const long long grid = g::persistent_grid(reinterpret_cast<const void*>(v.kernel), v.smem, configured[variant], tiles);
    if (grid < 0) return int(-grid);
    v.kernel<<<unsigned(grid), g::THREADS, v.smem, stream>>>(ta, tb, sa, sb, static_cast<__nv_bfloat16*>(c), m, n, k);
    return int(cudaGetLastError());
}
