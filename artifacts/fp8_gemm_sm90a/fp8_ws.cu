// fp8_ws.cu: warp-specialized fp8 (e4m3) GEMMs in CUDA for Hopper, written out in PTX over artifacts/common/sm90.cuh
// with no CUTLASS; built by kwiki into the shared library that fp8_gemm.py loads ($KWIKI_CUDA_LIBRARY) and called
// through ctypes on torch's current stream, so the harness checks them against the module's reference and times
// them interleaved with torch._scaled_mm (cuBLASLt) and the Triton rungs.
//
// Build (kwiki does it): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -shared
//                        -Xcompiler -fPIC -o libfp8_ws.so fp8_ws.cu
//
// C[M, N] (bf16, row-major) = dequant(A) dequant(B)^T for A [M, K] and B [N, K] of e4m3 codes, both K-major (the
// only layout fp8 wgmma reads), fp32 accumulation. One persistent CTA per SM walks the 128 x BN output tiles in
// grouped order. Warpgroup 0 produces: one thread issues TMA loads of 128 x 128-byte boxes of A and BN x 128-byte
// boxes of B (a k-block, 128 elements of K, the width of the 128-byte swizzle) into a ring of STAGES stages.
// Warpgroups 1 and 2 consume, 64 rows of the tile each: a k-block is four m64nBNk32 wgmma into a fresh partial
// accumulator (the first one's scale-d is 0), waited for, its stage freed, then folded into fp32 totals in
// registers. That fold is the promotion: no partial sum sees more than 128 products in the tensor cores'
// limited-precision adder (DeepSeek-V3, section 3.3.2), as with the Triton rungs' max_num_imprecise_acc=128 and
// cuBLASLt without fast accumulation. While one consumer folds, the other's wgmma keep the tensor cores busy. M, N
// and K need not be multiples of the tile: TMA reads zeros past them, stores are guarded, a partial last k-block
// adds zeros.
//
//   fp8_ws_tensor_kernel       per-tensor scales, BN = 128: totals += partial; sA sB once in the epilogue
//   fp8_ws_block_kernel        DeepSeek-V3's block scales, BN = 128: sA[g, m] per 1 x 128 group of A (stored
//                              [K/128, M]) and sB[n / 128, g] per 128 x 128 block of B; totals += partial *
//                              sA[g, row] sB[n / 128, g], the k-block's scales loaded before its stage is waited for
//   fp8_ws_tensor_wide_kernel  fp8_ws_tensor_kernel at BN = 192 (a third fewer B and A bytes a FLOP; 192 registers
//                              of totals and partials a thread)
//   fp8_ws_block_wide_kernel   fp8_ws_block_kernel at BN = 192: a tile spans two 128-column scale blocks of B
#include <cuda_bf16.h>

#include "sm90.cuh"

namespace fp8ws {

constexpr int BM = 128;     // the tile's rows: two consumer warpgroups of 64
constexpr int BK = 128;     // a k-block: one 128-byte swizzle row of e4m3 codes; the promotion interval
constexpr int WK = 32;      // one wgmma k-step: 32 bytes of K
constexpr int CONSUMERS = 2, ROWS = BM / CONSUMERS;
constexpr int THREADS = 128 * (CONSUMERS + 1);
constexpr int GROUP_M = 8;  // tile-rows a band of the grouped order
constexpr int SCALE_BLOCK = 128;  // B's block scales: one per 128 x 128 block
constexpr int SMEM_LIMIT = 227 * 1024;

// A tile BN columns wide. Each consumer thread holds BN / 2 fp32 totals and as many partials: 128 or 192 registers
// of the 232 that setmaxnreg gives it.
template <int BN_>
struct Tile {
    static constexpr int BN = BN_;
    static constexpr int A_BYTES = BM * BK, B_BYTES = BN * BK, STAGE_BYTES = A_BYTES + B_BYTES;
    static constexpr int STAGES = (SMEM_LIMIT - 1024 - 256) / STAGE_BYTES;  // as many as fit: 6 at 128, 5 at 192
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;  // + barriers, alignment slack
    static constexpr int ACC = BN / 2;  // fp32 accumulators a thread holds for one m64 x BN block
    static_assert(BN == 128 || BN == 192, "the wgmma shapes written out below");
    static_assert(SMEM_BYTES <= SMEM_LIMIT, "the ring fits a CTA's shared memory");
};

enum Scaling { TENSOR = 0, BLOCK = 1 };

// The accumulator operands of one m64nNk32 wgmma, "+f"(d[i]) for i in [i, i + 32).
#define FP8WS_ACC8(i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define FP8WS_ACC32(i) FP8WS_ACC8(i), FP8WS_ACC8(i + 8), FP8WS_ACC8(i + 16), FP8WS_ACC8(i + 24)

// d (+)= A B^T for one m64nNk32 step: A and B e4m3, K-major in shared memory (descriptors da, db), fp32 d in the
// wgmma accumulator layout (thread t of the warpgroup: rows 16 (t / 32) + (t % 32) / 4 and + 8, columns
// 8j + 2 (t % 4) + {0, 1} in d[4j + {0, 1}] and d[4j + {2, 3}]). scale_d 0: d = A B^T, else d += A B^T. 8-bit
// operands take no transpose flags; imm-scale-a and -b are 1 (not negated). Placeholders: the N / 2 accumulators,
// then da, db and scale_d.
template <int N> __device__ __forceinline__ void mma_e4m3(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d);

template <> __device__ __forceinline__ void mma_e4m3<128>(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
                 "}, %64, %65, p, 1, 1;\n}\n"
                 : FP8WS_ACC32(0), FP8WS_ACC32(32)
                 : "l"(da), "l"(db), "r"(scale_d));
}

template <> __device__ __forceinline__ void mma_e4m3<192>(float (&d)[96], uint64_t da, uint64_t db, int scale_d) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
                 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
                 "}, %96, %97, p, 1, 1;\n}\n"
                 : FP8WS_ACC32(0), FP8WS_ACC32(32), FP8WS_ACC32(64)
                 : "l"(da), "l"(db), "r"(scale_d));
}

#undef FP8WS_ACC32
#undef FP8WS_ACC8

__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// Tile t of the grouped order: bands of GROUP_M tile-rows, down the rows of a band first, then across its columns,
// so the CTAs working at one time share rows of A and columns of B in L2.
__device__ __forceinline__ void tile_of(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_band = GROUP_M * tiles_n, band = t / per_band, first = band * GROUP_M;
    const int rows = min(GROUP_M, tiles_m - first), r = t - band * per_band;
    tm = first + r % rows;
    tn = r / rows;
}

// One CTA of a kernel. The ring's barriers: full[s] completes on the producer's arrival and the stage's bytes,
// empty[s] on one arrival of each consumer warpgroup once its wgmma have read the stage. Stage and phase run on
// across tiles, so the producer loads the next tile while the consumers finish and store this one.
template <int BN, int SCALING>
__device__ __forceinline__ void gemm_cta(const CUtensorMap* tmA, const CUtensorMap* tmB, const float* sa, const float* sb,
                                         __nv_bfloat16* out, int M, int N, int K) {
    using T = Tile<BN>;
    constexpr int ACC = T::ACC;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* sA = align1024(smem_raw);
    uint8_t* sB = sA + T::STAGES * T::A_BYTES;
    uint64_t* full = reinterpret_cast<uint64_t*>(sB + T::STAGES * T::B_BYTES);
    uint64_t* empty = full + T::STAGES;
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < T::STAGES; ++s) {
            sm90::mbar_init(&full[s], 1);
            sm90::mbar_init(&empty[s], CONSUMERS);
        }
        sm90::fence_barrier_init();
    }
    __syncthreads();

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN, k_blocks = (K + BK - 1) / BK;
    const int tiles = tiles_m * tiles_n;
    int stage = 0;
    uint32_t phase = 0;
    if (wg == 0) {
        sm90::regs_release<40>();
        if (threadIdx.x != 0) return;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int tm, tn;
            tile_of(t, tiles_m, tiles_n, tm, tn);
            for (int kb = 0; kb < k_blocks; ++kb) {
                sm90::mbar_wait(&empty[stage], phase ^ 1);
                sm90::mbar_arrive_expect_tx(&full[stage], T::STAGE_BYTES);  // whole boxes: TMA counts the zeros it fills
                sm90::tma_load_2d(sA + stage * T::A_BYTES, tmA, &full[stage], kb * BK, tm * BM);
                sm90::tma_load_2d(sB + stage * T::B_BYTES, tmB, &full[stage], kb * BK, tn * BN);
                if (++stage == T::STAGES) stage = 0, phase ^= 1;
            }
        }
        return;
    }

    sm90::regs_claim<232>();
    const int cw = wg - 1, tid = threadIdx.x % 128;
    const int r_in = cw * ROWS + (tid / 32) * 16 + (tid % 32) / 4;  // the thread's first row in the tile; the other + 8
    const int blocks_n = (N + SCALE_BLOCK - 1) / SCALE_BLOCK;       // B's scale blocks along N
    const float tensor_scale = SCALING == TENSOR ? sa[0] * sb[0] : 1.f;
    float acc[ACC], part[ACC];
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        tile_of(t, tiles_m, tiles_n, tm, tn);
        const int r0 = tm * BM + r_in, r1 = r0 + 8, col0 = tn * BN;
        // block scales: the tile's columns from col0 lie in B's scale block col0 / 128 up to column split (a multiple
        // of 8: accumulator group j holds columns col0 + 8j ..), in the next block from there (BN = 192 only)
        const int blk = col0 / SCALE_BLOCK, split = (SCALE_BLOCK - col0 % SCALE_BLOCK) / 8;
        const int blk_hi = min(blk + 1, blocks_n - 1);
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.f;
        for (int kb = 0; kb < k_blocks; ++kb) {
            float g0 = 1.f, g1 = 1.f, h0 = 1.f, h1 = 1.f;  // the k-block's scales of the thread's rows r0 and r1
            if constexpr (SCALING == BLOCK) {
                const float a0 = r0 < M ? sa[size_t(kb) * M + r0] : 0.f, a1 = r1 < M ? sa[size_t(kb) * M + r1] : 0.f;
                const float w = sb[size_t(blk) * k_blocks + kb];
                g0 = a0 * w, g1 = a1 * w;
                if constexpr (BN > SCALE_BLOCK) {
                    const float w_hi = sb[size_t(blk_hi) * k_blocks + kb];
                    h0 = a0 * w_hi, h1 = a1 * w_hi;
                }
            }
            sm90::mbar_wait(&full[stage], phase);
            sm90::wgmma_fence();
            const uint8_t* a = sA + stage * T::A_BYTES + cw * ROWS * BK;
            const uint8_t* b = sB + stage * T::B_BYTES;
#pragma unroll
            for (int ks = 0; ks < BK / WK; ++ks)  // the first step overwrites the partial (scale-d 0)
                mma_e4m3<BN>(part, sm90::desc_k_major_sw128(a + ks * WK), sm90::desc_k_major_sw128(b + ks * WK), ks);
            sm90::wgmma_commit();
            sm90::wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < ACC; ++i) sm90::fence_operand(part[i]);  // read only after the wait
            if (tid == 0) sm90::mbar_arrive(&empty[stage]);
            if (++stage == T::STAGES) stage = 0, phase ^= 1;
            if constexpr (SCALING == TENSOR) {
#pragma unroll
                for (int i = 0; i < ACC; ++i) acc[i] += part[i];
            } else {
#pragma unroll
                for (int j = 0; j < ACC / 4; ++j) {
                    const bool lo = BN <= SCALE_BLOCK || j < split;
                    const float s0 = lo ? g0 : h0, s1 = lo ? g1 : h1;
                    acc[4 * j] = fmaf(part[4 * j], s0, acc[4 * j]);
                    acc[4 * j + 1] = fmaf(part[4 * j + 1], s0, acc[4 * j + 1]);
                    acc[4 * j + 2] = fmaf(part[4 * j + 2], s1, acc[4 * j + 2]);
                    acc[4 * j + 3] = fmaf(part[4 * j + 3], s1, acc[4 * j + 3]);
                }
            }
        }
        // the epilogue: bf16 pairs straight from registers (N is even, so a pair is in or out as a whole)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = h ? r1 : r0;
            if (r >= M) continue;
            __nv_bfloat16* row = out + size_t(r) * N;
#pragma unroll
            for (int j = 0; j < ACC / 4; ++j) {
                const int c = col0 + 8 * j + 2 * (tid % 4);
                if (c < N)
                    *reinterpret_cast<__nv_bfloat162*>(row + c) =
                        __floats2bfloat162_rn(acc[4 * j + 2 * h] * tensor_scale, acc[4 * j + 2 * h + 1] * tensor_scale);
            }
        }
    }
}

// A [rows, cols] e4m3 matrix, cols contiguous, read in boxes of box_rows x 128 bytes with the 128-byte swizzle (what
// the wgmma descriptors expect); zeros past its edges.
inline CUresult tensor_map(CUtensorMap* map, const void* ptr, int rows, int cols, int box_rows) {
    cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
    cuuint64_t strides[1] = {cuuint64_t(cols)};
    cuuint32_t box[2] = {cuuint32_t(BK), cuuint32_t(box_rows)};
    cuuint32_t elem_strides[2] = {1, 1};
    return sm90::encode_tiled()(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(ptr), dims, strides, box, elem_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

}  // namespace fp8ws


// kwiki:rung cuda_tensor_ws
extern "C" __global__ void __launch_bounds__(fp8ws::THREADS, 1)
fp8_ws_tensor_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                     const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm_cta<128, fp8ws::TENSOR>(&ta, &tb, sa, sb, out, M, N, K);
}
// /kwiki:rung cuda_tensor_ws

// kwiki:rung cuda_block_ws
extern "C" __global__ void __launch_bounds__(fp8ws::THREADS, 1)
fp8_ws_block_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                    const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm_cta<128, fp8ws::BLOCK>(&ta, &tb, sa, sb, out, M, N, K);
}
// /kwiki:rung cuda_block_ws

extern "C" __global__ void __launch_bounds__(fp8ws::THREADS, 1)
fp8_ws_tensor_wide_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                          const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm_cta<192, fp8ws::TENSOR>(&ta, &tb, sa, sb, out, M, N, K);
}

extern "C" __global__ void __launch_bounds__(fp8ws::THREADS, 1)
fp8_ws_block_wide_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, const float* sa,
                         const float* sb, __nv_bfloat16* out, int M, int N, int K) {
    fp8ws::gemm_cta<192, fp8ws::BLOCK>(&ta, &tb, sa, sb, out, M, N, K);
}


namespace fp8ws {

using Kernel = void (*)(CUtensorMap, CUtensorMap, const float*, const float*, __nv_bfloat16*, int, int, int);
struct Launchable {
    Kernel kernel;
    int bn, smem;
};
// kwiki_fp8_gemm's variants, in its numbering
const Launchable VARIANTS[4] = {{fp8_ws_tensor_kernel, 128, Tile<128>::SMEM_BYTES},
                                {fp8_ws_block_kernel, 128, Tile<128>::SMEM_BYTES},
                                {fp8_ws_tensor_wide_kernel, 192, Tile<192>::SMEM_BYTES},
                                {fp8_ws_block_wide_kernel, 192, Tile<192>::SMEM_BYTES}};

}  // namespace fp8ws


// The launcher the module calls: variant 0 per-tensor scales (sa and sb one fp32 each), 1 block scales (sa fp32
// [ceil(K/128), M], sb fp32 [ceil(N/128), ceil(K/128)]), 2 and 3 the same at the 192-wide tile; a [M, K] and
// b [N, K] e4m3, c [M, N] bf16, all contiguous. Returns 0, a CUDA error code, or -1 (a bad variant; M, N or K not
// positive; N or K not a multiple of 16; a or b not 16-byte aligned; c, sa or sb not 4-byte aligned), -2 (the
// driver refused a tensor map). The module checks all of these before it calls, with a located message; the checks
// here keep a direct caller from a bad launch.
extern "C" int kwiki_fp8_gemm(int variant, const void* a, const void* b, const float* sa, const float* sb, void* c, int m, int n,
                              int k, cudaStream_t stream) {
    if (variant < 0 || variant > 3 || m <= 0 || n <= 0 || k <= 0 || n % 16 || k % 16) return -1;
    for (const void* p : {a, b})
        if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return -1;
    for (const void* p : {static_cast<const void*>(sa), static_cast<const void*>(sb), static_cast<const void*>(c)})
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 4 != 0) return -1;
    const fp8ws::Launchable& v = fp8ws::VARIANTS[variant];
    CUtensorMap ta, tb;
    if (fp8ws::tensor_map(&ta, a, m, k, fp8ws::BM) != CUDA_SUCCESS || fp8ws::tensor_map(&tb, b, n, k, v.bn) != CUDA_SUCCESS)
        return -2;
    static bool configured[4] = {false, false, false, false};
    static int sms = 0;
    if (!configured[variant]) {
        const cudaError_t e = cudaFuncSetAttribute(v.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, v.smem);
        if (e != cudaSuccess) return int(e);
        configured[variant] = true;
    }
    if (sms == 0) {
        int device = 0;
        cudaError_t e = cudaGetDevice(&device);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
        if (e != cudaSuccess) return int(e);
    }
    const long long tiles = (long long)((m + fp8ws::BM - 1) / fp8ws::BM) * ((n + v.bn - 1) / v.bn);
    const unsigned grid = unsigned(tiles < sms ? tiles : sms);
    v.kernel<<<grid, fp8ws::THREADS, v.smem, stream>>>(ta, tb, sa, sb, static_cast<__nv_bfloat16*>(c), m, n, k);
    return int(cudaGetLastError());
}
