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
//   fp8_ws_tensor_inflight_kernel, fp8_ws_block_inflight_kernel
//                              fp8_ws_tensor_kernel and fp8_ws_block_kernel with two partial register sets: a k-block's
//                              wgmma run while the one before is waited for and folded (fp8ws::Inflight)
#include "kwiki_ws_gemm.cuh"

namespace fp8ws {

namespace g = kwiki::wsgemm;

template <int BN, int SCALING>
__device__ __forceinline__ void gemm(const CUtensorMap* ta, const CUtensorMap* tb, const float* sa, const float* sb,
                                     __nv_bfloat16* out, int M, int N, int K) {
    const g::Dense<BN> sched(M, N);
    g::gemm_cta<BN, SCALING>(ta, tb, g::Scales{sa, sb, M, N, (K + g::BK - 1) / g::BK}, out, sched);
}

// kwiki:rung cuda_tensor_ws_inflight
// The consumer of rungs 7 and 8 (BN = 128 only): gemm_cta's consumer with two partial register sets, so that a
// k-block's four wgmma run while the consumer waits for the k-block before (wait_group 1, where gemm_cta waits for 0),
// frees its stage and folds it into the totals. In gemm_cta both consumers wait on the same stage and only the first
// one's fold runs under the other's wgmma (their groups share the tensor cores and finish one after the other); the
// rest of the fold, the wait's latency and the next issue leave the tensor cores idle, and here a k-block's wgmma run
// through them (how much that is worth is the page's claim). 64 totals and 2 x 64 partials a thread (192 of the 232
// registers; at BN = 192 it would take 288). Block scales are loaded with
// the k-block's wgmma, so they are in registers when its partial is folded a step later. The producer, the ring, the
// schedule and the epilogue are gemm_cta's (the epilogue written out here: the header has no hook for it).
template <int SCALING>
struct Inflight {
    static constexpr int BN = 128, ACC = g::Tile<BN>::ACC;
    using T = g::Tile<BN>;
    const g::Ring<T>& ring;
    g::Scales sc;
    int cw, r0, r1, sb_row;
    int stage = 0;
    uint32_t phase = 0;

    // the scales k-block kb's partial is folded with, for the thread's rows r0 and r1 (1 for per-tensor scales: those
    // are applied once, in the epilogue)
    __device__ __forceinline__ void scales(int kb, float& s0, float& s1) const {
        s0 = s1 = 1.f;
        if constexpr (SCALING == g::BLOCK) {
            const float w = sc.sb[size_t(sb_row) + kb];
            s0 = (r0 < sc.rows ? sc.sa[size_t(kb) * sc.rows + r0] : 0.f) * w;
            s1 = (r1 < sc.rows ? sc.sa[size_t(kb) * sc.rows + r1] : 0.f) * w;
        }
    }
    // k-block kb's four wgmma into `part` (the first with scale-d 0), committed as one group, not waited for; returns
    // the stage they read
    __device__ __forceinline__ int issue(float (&part)[ACC]) {
        const int used = stage;
        sm90::mbar_wait(&ring.full[stage], phase);
        sm90::wgmma_fence();
        const uint8_t* a = ring.sA + stage * T::A_BYTES + cw * g::ROWS * g::BK;
        const uint8_t* b = ring.sB + stage * T::B_BYTES;
#pragma unroll
        for (int ks = 0; ks < g::BK / g::WK; ++ks)
            g::mma_e4m3<BN>(part, sm90::desc_k_major_sw128(a + ks * g::WK), sm90::desc_k_major_sw128(b + ks * g::WK), ks);
        sm90::wgmma_commit();
        if (++stage == T::STAGES) stage = 0, phase ^= 1;
        return used;
    }
    // a partial whose group has completed: its stage freed, then folded in (times its scales for block scaling)
    __device__ __forceinline__ void fold(float (&acc)[ACC], float (&part)[ACC], int used, float s0, float s1) const {
#pragma unroll
        for (int i = 0; i < ACC; ++i) sm90::fence_operand(part[i]);  // read only after the wait
        if (threadIdx.x % 128 == 0) sm90::mbar_arrive(&ring.empty[used]);
#pragma unroll
        for (int q = 0; q < ACC / 4; ++q) {
            if constexpr (SCALING == g::BLOCK) {
                acc[4 * q] = fmaf(part[4 * q], s0, acc[4 * q]);
                acc[4 * q + 1] = fmaf(part[4 * q + 1], s0, acc[4 * q + 1]);
                acc[4 * q + 2] = fmaf(part[4 * q + 2], s1, acc[4 * q + 2]);
                acc[4 * q + 3] = fmaf(part[4 * q + 3], s1, acc[4 * q + 3]);
            } else {
                acc[4 * q] += part[4 * q], acc[4 * q + 1] += part[4 * q + 1];
                acc[4 * q + 2] += part[4 * q + 2], acc[4 * q + 3] += part[4 * q + 3];
            }
        }
    }
};

template <int SCALING>
__device__ __forceinline__ void gemm_inflight(const CUtensorMap* ta, const CUtensorMap* tb, const float* sa,
                                              const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    using T = g::Tile<128>;
    constexpr int ACC = T::ACC;
    const g::Dense<128> sched(M, N);
    const g::Scales sc{sa, sb, M, N, (K + g::BK - 1) / g::BK};
    const g::Ring<T> ring;
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        sm90::regs_release<40>();
        if (threadIdx.x == 0) ring.template produce<g::BK>(ta, tb, sched, sc.k_blocks);
        return;
    }
    sm90::regs_claim<232>();
    const int cw = wg - 1, tid = threadIdx.x % 128;
    const int r_in = cw * g::ROWS + (tid / 32) * 16 + (tid % 32) / 4;
    const int blocks_n = (N + g::SCALE_BLOCK - 1) / g::SCALE_BLOCK;
    const float tensor_scale = SCALING == g::TENSOR ? sa[0] * sb[0] : 1.f;
    Inflight<SCALING> c{ring, sc, cw, 0, 0, 0};
    float acc[ACC], p0[ACC], p1[ACC];
    for (int t = blockIdx.x; t < sched.tiles(); t += gridDim.x) {
        const g::Job j = sched.job(t);
        const int kb_end = min(j.kb1, sc.k_blocks);
        if (j.kb0 >= kb_end) continue;
        c.r0 = j.a_row + r_in, c.r1 = c.r0 + 8;
        c.sb_row = (j.group * blocks_n + j.col0 / g::SCALE_BLOCK) * sc.k_blocks;
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.f;
        // p0 and p1 take turns: the one issued last is in flight while the other is folded. Every wait in the loop
        // is wait_group 1 after an issue (ptxas serializes all wgmma when a wait's depth depends on a branch)
        float a0, a1, b0, b1;  // the scales of p0's and p1's k-blocks
        int kb = j.kb0;
        c.scales(kb, a0, a1);
        int s_p0 = c.issue(p0), s_p1;
        for (++kb; kb + 1 < kb_end; kb += 2) {
            c.scales(kb, b0, b1);
            s_p1 = c.issue(p1);
            sm90::wgmma_wait<1>();  // p0's group is done, p1's runs on
            c.fold(acc, p0, s_p0, a0, a1);
            c.scales(kb + 1, a0, a1);
            s_p0 = c.issue(p0);
            sm90::wgmma_wait<1>();
            c.fold(acc, p1, s_p1, b0, b1);
        }
        if (kb < kb_end) {  // one k-block left: issued into p1, then both drained
            c.scales(kb, b0, b1);
            s_p1 = c.issue(p1);
            sm90::wgmma_wait<1>();
            c.fold(acc, p0, s_p0, a0, a1);
            sm90::wgmma_wait<0>();
            c.fold(acc, p1, s_p1, b0, b1);
        } else {
            sm90::wgmma_wait<0>();
            c.fold(acc, p0, s_p0, a0, a1);
        }
        // the epilogue: gemm_cta's, bf16 pairs straight from registers (n is even: a pair is in or out as a whole)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = h ? c.r1 : c.r0;
            if (r >= j.row_end) continue;
            __nv_bfloat16* row = out + size_t(r) * N;
#pragma unroll
            for (int q = 0; q < ACC / 4; ++q) {
                const int col = j.col0 + 8 * q + 2 * (tid % 4);
                if (col < N)
                    *reinterpret_cast<__nv_bfloat162*>(row + col) =
                        __floats2bfloat162_rn(acc[4 * q + 2 * h] * tensor_scale, acc[4 * q + 2 * h + 1] * tensor_scale);
            }
        }
    }
}
// /kwiki:rung cuda_tensor_ws_inflight

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


// kwiki:rung cuda_tensor_ws_inflight
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
fp8_ws_tensor_inflight_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                              const float* sa, const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm_inflight<kwiki::wsgemm::TENSOR>(&ta, &tb, sa, sb, out, M, N, K);
}
// /kwiki:rung cuda_tensor_ws_inflight

// kwiki:rung cuda_block_ws_inflight
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
fp8_ws_block_inflight_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                             const float* sa, const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm_inflight<kwiki::wsgemm::BLOCK>(&ta, &tb, sa, sb, out, M, N, K);
}
// /kwiki:rung cuda_block_ws_inflight


namespace fp8ws {

using Kernel = void (*)(CUtensorMap, CUtensorMap, const float*, const float*, __nv_bfloat16*, int, int, int);
struct Launchable {
    Kernel kernel;
    int bn, smem;
};
// kwiki_fp8_gemm's variants, in its numbering
constexpr int N_VARIANTS = 7;
const Launchable VARIANTS[N_VARIANTS] = {{fp8_ws_tensor_kernel, 128, g::Tile<128>::SMEM_BYTES},
                                         {fp8_ws_block_kernel, 128, g::Tile<128>::SMEM_BYTES},
                                         {fp8_ws_tensor_wide_kernel, 192, g::Tile<192>::SMEM_BYTES},
                                         {fp8_ws_block_wide_kernel, 192, g::Tile<192>::SMEM_BYTES},
                                         {fp8_ws_row_kernel, 128, g::Tile<128>::SMEM_BYTES},
                                         {fp8_ws_tensor_inflight_kernel, 128, g::Tile<128>::SMEM_BYTES},
                                         {fp8_ws_block_inflight_kernel, 128, g::Tile<128>::SMEM_BYTES}};

}  // namespace fp8ws


// The launcher the module calls: variant 0 per-tensor scales (sa and sb one fp32 each), 1 block scales (sa fp32
// [ceil(K/128), M], sb fp32 [ceil(N/128), ceil(K/128)]), 2 and 3 the same at the 192-wide tile, 4 per-row scales
// (sa fp32 [M], sb fp32 [N]), 5 and 6 variants 0 and 1 with a k-block's wgmma kept in flight through the fold; a
// [M, K] and b [N, K] e4m3, c [M, N] bf16, all contiguous. Returns 0, a CUDA error code, or -1 (a bad variant; M, N
// or K not positive; N or K not a multiple of 16; a or b not 16-byte aligned; c, sa or sb not 4-byte aligned, or sb
// not 8-byte aligned for per-row scales, which are read in pairs), -2 (the driver
// refused a tensor map). The module checks all of these before it calls, with a located message; the checks
// here keep a direct caller from a bad launch.
extern "C" int kwiki_fp8_gemm(int variant, const void* a, const void* b, const float* sa, const float* sb, void* c, int m, int n,
                              int k, cudaStream_t stream) {
    namespace g = kwiki::wsgemm;
    if (variant < 0 || variant >= fp8ws::N_VARIANTS || m <= 0 || n <= 0 || k <= 0 || n % 16 || k % 16) return -1;
    for (const void* p : {a, b})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) return -1;
    for (const void* p : {static_cast<const void*>(sa), static_cast<const void*>(sb), static_cast<const void*>(c)})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 4 != 0) return -1;
    if (variant == 4 && reinterpret_cast<uintptr_t>(sb) % 8 != 0) return -1;
    const fp8ws::Launchable& v = fp8ws::VARIANTS[variant];
    CUtensorMap ta, tb;
    if (g::tensor_map(&ta, a, m, k, g::BM) != CUDA_SUCCESS || g::tensor_map(&tb, b, n, k, v.bn) != CUDA_SUCCESS) return -2;
    static bool configured[fp8ws::N_VARIANTS] = {};
    const long long tiles = (long long)((m + g::BM - 1) / g::BM) * ((n + v.bn - 1) / v.bn);
    const long long grid = g::persistent_grid(reinterpret_cast<const void*>(v.kernel), v.smem, configured[variant], tiles);
    if (grid < 0) return int(-grid);
    v.kernel<<<unsigned(grid), g::THREADS, v.smem, stream>>>(ta, tb, sa, sb, static_cast<__nv_bfloat16*>(c), m, n, k);
    return int(cudaGetLastError());
}
