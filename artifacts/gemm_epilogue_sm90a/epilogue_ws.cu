// epilogue_ws.cu: the fused epilogues in CUDA on the warp-specialized bf16 GEMM of artifacts/common/kwiki_ws_gemm.cuh
// (a TMA producer warpgroup, two wgmma consumer warpgroups of 64 rows, 128 x 256 tiles, one k-block of wgmma kept in
// flight), built by kwiki into the library gemm_epilogue.py loads ($KWIKI_CUDA_LIBRARY) and called through ctypes on
// torch's current stream. The epilogue runs on the fp32 totals in registers while the producer already loads the
// next tile's operands.
//
// C = epilogue(A @ Bt^T), A [M, K] and Bt [N, K] bf16 (both K-major), row-major outputs:
//   epi_plain_kernel          C in bf16
//   epi_bias_gelu_kernel      C = GELU_tanh(acc + bias[col]) in bf16
//   epi_bias_gelu_res_kernel  C = GELU_tanh(acc + bias[col]) + residual[row, col] in bf16
//                             (every output leaves through shared memory and TMA stores: store_staged below)
//   epi_fp8_kernel            y = GELU_tanh(acc + bias[col]) in e4m3 with one fp32 scale per 1 x 128 group of a row
//                             (amax / 448, stored [N/128, M]) and the tensor's amax |y| (one atomic max a warp into a
//                             word the launcher zeroes): a row's 128 columns of a group are held by the 4 threads of a
//                             quad (32 each), so a group's amax is their own maximum and 2 shuffles
// The GELU is the tanh form written as x / (1 + exp(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3), the exponent capped at
// 80, as the Triton rungs compute it. Past M and N nothing is stored and nothing enters an amax.
#include "kwiki_fp8.cuh"
#include "kwiki_ws_gemm.cuh"

namespace epiws {

namespace g = kwiki::wsgemm;
namespace f8 = kwiki::fp8;
using bf16 = __nv_bfloat16;

constexpr int BN = 256;     // the bf16 WS GEMM's tile: 128 accumulators a consumer thread
constexpr int GROUP = 128;  // the 1 x 128 groups of the fp8 output
constexpr int QG = GROUP / 8;  // accumulator groups q (8 columns each) a 128-column group spans

__device__ __forceinline__ float gelu_tanh(float x) {
    const float u = 0.7978845608028654f * (x + 0.044715f * x * x * x);
    return __fdividef(x, 1.f + __expf(fminf(-2.f * u, 80.f)));
}

__device__ __forceinline__ float2 pair(const bf16* p) { return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p)); }

// kwiki:rung cuda_plain
// The bf16 output through shared memory and TMA stores, for the three bf16 epilogues. Each consumer warpgroup owns a
// 16 KiB buffer: a 64-row x 128-column half of its 64 x 256 block, as two 64 x 64 boxes in the 128-byte swizzle (row
// r's 16-byte chunk k at k ^ (r % 8): the 8 rows a warp's quads hold land in 8 different chunks, so a warp's 4-byte
// writes hit 32 banks). Before a half is written, the thread that stored the buffer last waits until those stores
// have read it (claim_buffer); the half is written from registers, made visible to the async proxy
// (fence.proxy.async), the warpgroup's named barrier passed, and one thread issues the two boxes' TMA stores
// (store_buffer), which run on while the warpgroup goes back to its wgmma. TMA clips the boxes at M and N, so rows and
// columns past the output are computed but never stored. Before the CTA exits, each consumer's storing thread waits
// until its last stores have read the buffer (gemm below), as CUTLASS's epilogues do at the end of a kernel.
constexpr int HALF = 128;                       // columns a buffer holds
constexpr int BUF_BYTES = g::ROWS * HALF * 2;   // 16 KiB a consumer
static_assert(g::TileBf16<BN>::SMEM_BYTES + g::CONSUMERS * BUF_BYTES <= g::SMEM_LIMIT,
              "the ring and the two staging buffers fit a CTA's shared memory");

__device__ __forceinline__ uint8_t* staging(int cw) {
    __shared__ alignas(1024) uint8_t buffers[g::CONSUMERS][BUF_BYTES];  // the 128-byte swizzle wants 1024-byte rows x 8
    return buffers[cw];
}

// Where byte `b` (0..255) of row `row` (0..63) of a consumer's staged block lies in its buffer: box b / 128, that
// box's row at row * 128, its 16-byte chunk (b % 128) / 16 swizzled with row % 8 (the layout TMA's 128-byte swizzle
// reads). A bf16 half's pair (accumulator group q, lane) is byte 16 q + 4 (lane % 4); an e4m3 pair, byte
// 8 q + 2 (lane % 4) of the whole block. kwiki_epilogue_staged_at exports it for the host's tests.
__host__ __device__ __forceinline__ int staged_at(int row, int b) {
    return (b / 128) * (g::ROWS * 128) + row * 128 + ((((b % 128) / 16) ^ (row % 8)) << 4) + b % 16;
}

// Before a consumer writes its buffer: the TMA stores last issued from it have read it (its thread 0 waits, and the
// warpgroup's barrier passes that on).
__device__ __forceinline__ void claim_buffer(int cw, int tid) {
    if (tid == 0) sm90::bulk_wait_read<0>();
    sm90::named_barrier(1 + cw, 128);
}

// After: the writes seen by the async proxy, every thread past the barrier, then one thread stores the buffer's two
// boxes (64 rows each, 128 bytes of a row, at columns col and col2 of the map) and closes their group.
__device__ __forceinline__ void store_buffer(const CUtensorMap* map, const uint8_t* buf, int col, int col2, int row,
                                             int cw, int tid) {
    sm90::fence_proxy_async();
    sm90::named_barrier(1 + cw, 128);
    if (tid == 0) {
        sm90::tma_store_2d(map, buf, col, row);
        sm90::tma_store_2d(map, buf + g::ROWS * 128, col2, row);
        sm90::bulk_commit();
    }
}

// V: the value of a pair, v(acc, q, h, row, col) -> float2, for accumulator group q (of the tile), the thread's row
// h (0: r, 1: r + 8) at output row `row` and column `col` (both possibly past the output: TMA will not store them).
template <class V>
__device__ __forceinline__ void store_staged(const float* acc, const g::Job& j, int r_in, int tid,
                                             const CUtensorMap* tc, const V& v) {
    const int cw = r_in / g::ROWS, rl = r_in % g::ROWS, lane = tid % 32;
    uint8_t* buf = staging(cw);
#pragma unroll
    for (int half = 0; half < BN / HALF; ++half) {
        claim_buffer(cw, tid);
#pragma unroll
        for (int q = 0; q < HALF / 8; ++q) {
            const int qt = half * (HALF / 8) + q, c = j.col0 + 8 * qt + 2 * (tid % 4);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float2 x = v(acc, qt, h, j.a_row + r_in + 8 * h, c);
                *reinterpret_cast<__nv_bfloat162*>(buf + staged_at(rl + 8 * h, 16 * q + 4 * (lane % 4))) =
                    __floats2bfloat162_rn(x.x, x.y);
            }
        }
        const int col = j.col0 + half * HALF;
        store_buffer(tc, buf, col, col + 64, j.a_row + cw * g::ROWS, cw, tid);  // the second box: 64 bf16 columns on
    }
}

struct TmaBf16 {
    const CUtensorMap* tc;

    template <int ACC>
    __device__ __forceinline__ void store(const float (&acc)[ACC], const g::Job& j, int r_in, int tid) const {
        store_staged(acc, j, r_in, tid, tc, [](const float* a, int q, int h, int, int) {
            return make_float2(a[4 * q + 2 * h], a[4 * q + 2 * h + 1]);
        });
    }
};
// /kwiki:rung cuda_plain

// kwiki:rung cuda_bias_gelu
// + bias, GELU (and the residual) on the totals, then out as TmaBf16 does. A column's bias pair is loaded for each of
// the thread's two rows (the second from L1); columns past N read no bias, rows past M no residual.
template <bool RESIDUAL>
struct BiasGelu {
    const bf16* bias;
    const bf16* res;
    const CUtensorMap* tc;
    int n;

    template <int ACC>
    __device__ __forceinline__ void store(const float (&acc)[ACC], const g::Job& j, int r_in, int tid) const {
        const bf16* b = bias;
        const bf16* x = res;
        const int cols = n, rows = j.row_end;
        store_staged(acc, j, r_in, tid, tc, [=](const float* a, int q, int h, int row, int col) {
            if (col >= cols) return make_float2(0.f, 0.f);
            const float2 bb = pair(b + col);
            float2 v = make_float2(gelu_tanh(a[4 * q + 2 * h] + bb.x), gelu_tanh(a[4 * q + 2 * h + 1] + bb.y));
            if constexpr (RESIDUAL) {
                if (row < rows) {
                    const float2 r = pair(x + size_t(row) * cols + col);
                    v.x += r.x, v.y += r.y;
                }
            }
            return v;
        });
    }
};
// /kwiki:rung cuda_bias_gelu

// kwiki:rung cuda_fp8_out
// + bias, GELU, then e4m3 per 1 x 128 group of a row. The totals are overwritten with y in place (no second array of
// registers); every lane shuffles, whatever its rows and columns; a value past N is 0 and a row past M is neither
// counted nor given a scale. The codes go out as the bf16 rungs' do, through the consumer's staging buffer: its
// 64 x 256 e4m3 block is 16 KiB, two 64 x 128-byte boxes in the 128-byte swizzle, stored by TMA at once (clipped at M
// and N: the buffer's bytes for rows and columns past them are never stored). The scales and the amax are stored
// from registers.
struct Fp8Out {
    const bf16* bias;
    const CUtensorMap* tq;
    float* s;
    float* amax;
    int m, n;

    template <int ACC>
    __device__ __forceinline__ void store(float (&acc)[ACC], const g::Job& j, int r_in, int tid) const {
        const int cw = r_in / g::ROWS, rl = r_in % g::ROWS;
        uint8_t* buf = staging(cw);
        claim_buffer(cw, tid);
        const int r0 = j.a_row + r_in, r1 = r0 + 8;
        float tile_max = 0.f;
#pragma unroll
        for (int grp = 0; grp < ACC / 4 / QG; ++grp) {
            float m0 = 0.f, m1 = 0.f;  // the group's amax over the thread's columns, rows r0 and r1
#pragma unroll
            for (int qq = 0; qq < QG; ++qq) {
                const int q4 = 4 * (grp * QG + qq), c = j.col0 + 8 * (grp * QG + qq) + 2 * (tid % 4);
                const float2 b = c < n ? pair(bias + c) : make_float2(0.f, 0.f);
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc[q4 + e] = c < n ? gelu_tanh(acc[q4 + e] + (e % 2 ? b.y : b.x)) : 0.f;
                m0 = fmaxf(m0, fmaxf(fabsf(acc[q4]), fabsf(acc[q4 + 1])));
                m1 = fmaxf(m1, fmaxf(fabsf(acc[q4 + 2]), fabsf(acc[q4 + 3])));
            }
#pragma unroll
            for (int o = 1; o <= 2; o <<= 1) {  // the quad: lanes tid ^ 1 and tid ^ 2 hold the same two rows
                m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, o));
                m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, o));
            }
            const int group = j.col0 / GROUP + grp;
            if (group * GROUP >= n) continue;  // a group wholly past N (the tile's second half at N's edge)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = h ? r1 : r0;
                if (r >= j.row_end) continue;
                const float mh = h ? m1 : m0, sc = f8::scale_of(mh), inv = 1.f / sc;
                if (tid % 4 == 0) s[size_t(group) * m + r] = sc;
                tile_max = fmaxf(tile_max, mh);
#pragma unroll
                for (int qq = 0; qq < QG; ++qq) {
                    const int q4 = 4 * (grp * QG + qq), b = 8 * (grp * QG + qq) + 2 * (tid % 4);
                    *reinterpret_cast<uint16_t*>(buf + staged_at(rl + 8 * h, b)) =
                        uint16_t(f8::e4m3x2(acc[q4 + 2 * h], acc[q4 + 2 * h + 1], inv));
                }
            }
        }
        store_buffer(tq, buf, j.col0, j.col0 + 128, j.a_row + cw * g::ROWS, cw, tid);  // 128 e4m3 columns a box
#pragma unroll
        for (int o = 16; o; o >>= 1) tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, o));
        if (tid % 32 == 0 && tile_max > 0.f) atomicMax(reinterpret_cast<unsigned*>(amax), __float_as_uint(tile_max));
    }
};
// /kwiki:rung cuda_fp8_out

// The CTA, then its exit: each consumer's storing thread (thread 0 of warpgroups 1 and 2) waits until its last TMA
// stores have read its buffer, which the CTA's shared memory must outlive.
template <class Epi>
__device__ __forceinline__ void gemm(const CUtensorMap* ta, const CUtensorMap* tb, int M, int N, int K, const Epi& epi) {
    g::gemm_cta_bf16<BN>(ta, tb, K, g::Dense<BN>(M, N), epi);
    if (threadIdx.x >= 128 && threadIdx.x % 128 == 0) sm90::bulk_wait_read<0>();
}

}  // namespace epiws


// kwiki:rung cuda_plain
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
epi_plain_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                 const __grid_constant__ CUtensorMap tc, int M, int N, int K) {
    epiws::gemm(&ta, &tb, M, N, K, epiws::TmaBf16{&tc});
}
// /kwiki:rung cuda_plain

// kwiki:rung cuda_bias_gelu
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
epi_bias_gelu_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                     const __grid_constant__ CUtensorMap tc, const __nv_bfloat16* bias, int M, int N, int K) {
    epiws::gemm(&ta, &tb, M, N, K, epiws::BiasGelu<false>{bias, nullptr, &tc, N});
}
// /kwiki:rung cuda_bias_gelu

// kwiki:rung cuda_bias_gelu_residual
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
epi_bias_gelu_res_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
                         const __grid_constant__ CUtensorMap tc, const __nv_bfloat16* bias, const __nv_bfloat16* res,
                         int M, int N, int K) {
    epiws::gemm(&ta, &tb, M, N, K, epiws::BiasGelu<true>{bias, res, &tc, N});
}
// /kwiki:rung cuda_bias_gelu_residual

// kwiki:rung cuda_fp8_out
extern "C" __global__ void __launch_bounds__(kwiki::wsgemm::THREADS, 1)
epi_fp8_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
               const __grid_constant__ CUtensorMap tq, const __nv_bfloat16* bias, float* s, float* amax, int M, int N,
               int K) {
    epiws::gemm(&ta, &tb, M, N, K, epiws::Fp8Out{bias, &tq, s, amax, M, N});
}
// /kwiki:rung cuda_fp8_out


// The launcher gemm_epilogue.py calls: variant 0 plain (out bf16 [M, N]), 1 bias + GELU, 2 bias + GELU + residual
// (res bf16 [M, N]), 3 fp8 (out: q e4m3 [M, N], s fp32 [ceil(N/128), M], amax fp32, zeroed here by a 4-byte
// cudaMemsetAsync on the stream before the kernel: a fill, not a kernel of torch's that the identity gate fails); a
// [M, K], bt [N, K] and bias [N] bf16, all contiguous. Returns 0, a CUDA error code, or -1 (a bad variant; M, N or K
// not positive; N or K not a multiple of 16; a, bt or the output not 16-byte aligned; the bias, the residual, s or
// amax missing where the variant needs it or not 4-byte aligned), -2 (the driver refused a tensor map). The module
// checks all of these before it calls, with a located message; the checks here keep a direct caller from a bad launch.
extern "C" int kwiki_gemm_epilogue(int variant, const void* a, const void* bt, const void* bias, const void* res, void* out,
                                   float* s, float* amax, int m, int n, int k, cudaStream_t stream) {
    namespace g = kwiki::wsgemm;
    if (variant < 0 || variant > 3 || m <= 0 || n <= 0 || k <= 0 || n % 16 || k % 16) return -1;
    for (const void* p : {a, bt, static_cast<const void*>(out)})  // TMA's 16-byte global addresses
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 != 0) return -1;
    const void* needed[4] = {out, variant >= 1 ? bias : out, variant == 2 ? res : out, variant == 3 ? s : out};
    for (const void* p : needed)
        if (p == nullptr || reinterpret_cast<uintptr_t>(p) % 4 != 0) return -1;
    if (variant == 3 && (amax == nullptr || reinterpret_cast<uintptr_t>(amax) % 4 != 0)) return -1;
    CUtensorMap ta, tb, tc;  // tc: the output in boxes of 64 rows x 128 bytes (64 bf16 or 128 e4m3 columns)
    const CUtensorMapDataType out_type = variant == 3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    if (g::tensor_map(&ta, a, m, k, g::BM, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS ||
        g::tensor_map(&tb, bt, n, k, epiws::BN, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) != CUDA_SUCCESS ||
        g::tensor_map(&tc, out, m, n, g::ROWS, out_type) != CUDA_SUCCESS)
        return -2;
    const void* kernels[4] = {reinterpret_cast<const void*>(epi_plain_kernel), reinterpret_cast<const void*>(epi_bias_gelu_kernel),
                              reinterpret_cast<const void*>(epi_bias_gelu_res_kernel), reinterpret_cast<const void*>(epi_fp8_kernel)};
    static bool configured[4] = {false, false, false, false};
    constexpr int smem = g::TileBf16<epiws::BN>::SMEM_BYTES;
    const long long tiles = (long long)((m + g::BM - 1) / g::BM) * ((n + epiws::BN - 1) / epiws::BN);
    const long long blocks = g::persistent_grid(kernels[variant], smem, configured[variant], tiles);
    if (blocks < 0) return int(-blocks);
    const unsigned grid = unsigned(blocks);
    using B = __nv_bfloat16;
    const B* bi = static_cast<const B*>(bias);
    switch (variant) {
        case 0: epi_plain_kernel<<<grid, g::THREADS, smem, stream>>>(ta, tb, tc, m, n, k); break;
        case 1: epi_bias_gelu_kernel<<<grid, g::THREADS, smem, stream>>>(ta, tb, tc, bi, m, n, k); break;
        case 2: epi_bias_gelu_res_kernel<<<grid, g::THREADS, smem, stream>>>(ta, tb, tc, bi, static_cast<const B*>(res), m, n, k); break;
        default: {
            const cudaError_t zeroed = cudaMemsetAsync(amax, 0, sizeof(float), stream);  // the atomic max starts at 0
            if (zeroed != cudaSuccess) return int(zeroed);
            epi_fp8_kernel<<<grid, g::THREADS, smem, stream>>>(ta, tb, tc, bi, s, amax, m, n, k);
        }
    }
    return int(cudaGetLastError());
}

// staged_at on the host, for tests: the buffer byte of byte b (0..255) of staged row `row` (0..63), or -1 outside.
extern "C" int kwiki_epilogue_staged_at(int row, int b) {
    return row < 0 || row >= kwiki::wsgemm::ROWS || b < 0 || b >= 256 ? -1 : epiws::staged_at(row, b);
}
