// w4a16_mma.cu: decode-sized weight-only int4 GEMM y[M,N] = x[M,K] Wq[N,K]^T (M = 1..16), x and y bf16, W as 4-bit
// integers q (0..15, the weight (q - 8) s) with a bf16 scale s per 128 weights along K (symmetric, no zero point),
// dequantized in registers and multiplied on mma.sync tensor cores with the operands swapped; against cuBLAS and
// cuBLASLt's best heuristic on the bf16 weight of the same values.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o w4a16_mma w4a16_mma.cu
// Run: ./w4a16_mma --shapes=16x14336x4096,13x1003x4224 [--variants a,b,c] [--input-sets=2]
//
// Layout. Wq is N rows of K/8 32-bit words (8 weights a word, K contiguous); scales are N x K/128 bf16. Within a word
// the 8 weights e0..e7 of k = 8j..8j+7 sit at nibbles e0:0, e1:4, e2:1, e3:5, e4:2, e5:6, e6:3, e7:7: an offline
// shuffle inside each word (not timed, like Marlin's offline reordering, which goes further), so that one shift and
// one mask (w >> 4r) & 0x000F000F give the pair (e_2r, e_2r+1) in the two halves of a 32-bit register. OR-ed with
// 0x4300 in each half that is the bf16 pair (128 + e); subtracting 136 leaves q - 8 exactly (bf16 holds every
// integer up to 256). No conversion instruction per weight: a shift, a LOP3 and an HADD2.BF16 (a fused sub) per two.
//
// Swap-AB as decode_mma_sm90a: W is mma.sync.m16n8k16's A (16 channels a tile), x its B (8 rows an n8 tile), and a
// lane (g = lane/4, q = lane%4) loads 16 contiguous bytes of each of its two W rows: 32 weights, a quarter of a
// 128-weight chunk of K. The K permutation generalises decode_mma's: lane q's 32 weights are k0 + 32q + 0..31, MMA j
// (0..7) takes its elements 4j..4j+3 (a0 = row g's 4j, 4j+1; a2 = its 4j+2, 4j+3; a1, a3 the same of row g+8; b0, b1
// the same of x's row), one-to-one onto the 16 physical k {k0 + 32q + 4j + 0..3 : q = 0..3}; eight MMAs cover the
// chunk. x's 32 elements a lane are 4 16-byte loads a row.
//
// Scales. A chunk of 128 k is one group: its 8 MMAs add the unscaled q - 8 (exact in bf16) into a fresh fp32 tile,
// which is then multiplied by the group's scale of its channel and added to the accumulator (4 FFMA per n8 tile and
// group), so the products are those of the fp64 reference up to fp32 accumulation.
//
// Reference: fp64 on the host of x (q - 8) s; tolerance as decode_mma's (rtol 2^-6, atol sqrt(K) 2^-14 over values
// of that order). Scales are drawn with 4 significant bits (m 2^-9, m = 8..15), so that every weight (q - 8) s is a
// bf16 exactly and the baselines' bf16 weight holds the same values. y carries a canary past its M x N elements.
//
// Variants (artifact.yaml lists each one's rung and description): w4_warp (one chunk per warp in flight), w4_ring (a
// ring of 2 chunks per warp, each slot reloaded right after its MMAs, 4 warps a CTA), w4_wide (two 16-channel tiles a
// warp: two independent chains of MMAs sharing the loads of x, 4 warps a CTA), w4_smem (x staged once per CTA in a
// cp.async ring in shared memory, every warp on its own channels over all of K), w4_async (W too through shared
// memory: a per-warp cp.async ring, 7 groups ahead), w4_lean (weights and scales reordered offline into warp fragments,
// loads with nothing to guard), w4_tuned (the kernel, channels per CTA, warps, chunks in flight and a K split across
// CTAs chosen per shape in a selection pass; splits add fp32 partials in split order), the baselines cublas and
// cublaslt_best on the bf16 weight (their records count the bf16 weight's bytes), and read_ceiling, the speed of light
// for the int4 bytes: Wq + scales + x + y over the read bandwidth fitted in the run.
// Shapes: M from 1 to 16 (at 32 the chunks' registers spill), any N, K a multiple of 128 (the group size);
// 13x1003x4224 divides no tile along M or N and gives the CTAs' warps uneven numbers of chunks.
#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"
#include "kwiki_gemv.cuh"

#include <set>

namespace {

using bf16 = __nv_bfloat16;
constexpr int kGroup = 128;  // weights per scale along K: one chunk of the K loop

// ===================================================================================================
// Reference: the inputs and fp64 on the host
// ===================================================================================================

// The nibble position of element i (0..7) of a word: e_2r at nibble r, e_2r+1 at nibble 4 + r.
constexpr int nibble_of(int i) { return (i & 1) ? 4 + i / 2 : i / 2; }

uint64_t mix(uint64_t z) {  // splitmix64's finaliser: the host's random stream
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// The offline reordering of the packed words into warp fragments, Marlin's idea in this kernel's fragment layout: for
// each tile of 16 channels and each group, 1 KiB in the order the warp loads it, [h][lane][4 words] (lane 4g + q
// holds row 16 tile + 8h + g's words 4q..4q+3 of the group), the groups of a tile one after the other. A warp's load
// of a group is then 2 x 512 contiguous bytes and its walk along K one sequential stream, where the row-major words
// give it 16 rows x 64 bytes, 4 KiB or more apart. Rows past N (the last tile's padding) are zero words.
// interleaved (w4_lean's order): lane q's word i is the group's word 4i + q (weights k0 + 32i + 8q + 0..7), not 4q + i,
// so that the lane's four 16-byte loads of x are at k0 + 32i + 8q: each load of the warp reads 64 contiguous bytes of
// each of its 8 rows of x (half an L1 line), where k0 + 32q + 8i spreads them over 256 bytes (two lines a row).
std::vector<uint32_t> tiled(const std::vector<uint32_t>& hq, int N, int K, bool interleaved = false) {
    const int groups = K / kGroup, tiles = (N + 15) / 16;
    std::vector<uint32_t> t(size_t(tiles) * groups * 256, 0u);
    for (int n = 0; n < N; ++n)
        for (int c = 0; c < groups; ++c)
            for (int q = 0; q < 4; ++q)
                for (int w = 0; w < 4; ++w)
                    t[((size_t(n / 16) * groups + c) * 2 + (n % 16) / 8) * 128 + (4 * (n % 8) + q) * 4 + w] =
                        hq[size_t(n) * (K / 8) + 16 * c + (interleaved ? 4 * w + q : 4 * q + w)];
    return t;
}

// The scales in the same order: for each tile and group, [g][h] (8 x 2 bf16), so that lane 4g + q's two scales (rows
// 16 tile + g and + 8 + g) are one 32-bit word. Rows past N: zeros.
std::vector<bf16> tiled_scales(const std::vector<bf16>& hs, int N, int K) {
    const int groups = K / kGroup, tiles = (N + 15) / 16;
    std::vector<bf16> t(size_t(tiles) * groups * 16, __float2bfloat16(0.0f));
    for (int n = 0; n < N; ++n)
        for (int c = 0; c < groups; ++c) t[(size_t(n / 16) * groups + c) * 16 + 2 * (n % 8) + (n % 16) / 8] = hs[size_t(n) * groups + c];
    return t;
}

// One input set: q (N x K, 0..15) packed into words, scales m 2^-9 (m = 8..15) per group, x in [-1, 1), the bf16
// weight (q - 8) s for the baselines, and y's fp64 reference.
struct Inputs {
    kwiki::DeviceBuffer<uint32_t> Wq, Wt, Wl;  // Wt, Wl: the same words reordered offline into warp fragments (tiled())
    kwiki::DeviceBuffer<bf16> scales, St, x, W;  // St: the scales in tiled()'s order (tiled_scales())
    std::vector<double> ref;

    void fill(int M, int N, int K, uint64_t seed) {
        const int groups = K / kGroup;
        std::vector<uint32_t> hq(size_t(N) * K / 8, 0u);
        std::vector<bf16> hs(size_t(N) * groups), hW(size_t(N) * K), hx(size_t(M) * K);
        std::vector<double> wd(size_t(N) * K), xd(size_t(M) * K);
        kwiki::parallel_for(size_t(N), [&](size_t n0, size_t n1) {
            for (size_t n = n0; n < n1; ++n) {
                for (int gi = 0; gi < groups; ++gi) hs[n * groups + gi] = __float2bfloat16(float(8 + mix(seed ^ (n * 977 + gi) ^ 0x5ca1e) % 8) / 512.0f);
                for (int k = 0; k < K; ++k) {
                    const uint64_t r = mix(seed + n * uint64_t(K) + k);
                    const int q = int(r & 15);
                    hq[(n * K + k) / 8] |= uint32_t(q) << (4 * nibble_of(k % 8));
                    const double w = double(q - 8) * double(__bfloat162float(hs[n * groups + k / kGroup]));
                    wd[n * K + k] = w;
                    hW[n * K + k] = __float2bfloat16(float(w));  // exact: 4 + 4 significant bits
                }
            }
        });
        for (size_t i = 0; i < hx.size(); ++i) {
            hx[i] = __float2bfloat16(float(double(mix(seed ^ 0x77 ^ (i * 0x9e3779b97f4a7c15ull)) >> 11) / 9007199254740992.0 * 2.0 - 1.0));
            xd[i] = __bfloat162float(hx[i]);
        }
        const std::vector<uint32_t> ht = tiled(hq, N, K), hl = tiled(hq, N, K, true);
        Wq = kwiki::DeviceBuffer<uint32_t>(hq.size()), Wt = kwiki::DeviceBuffer<uint32_t>(ht.size()), Wl = kwiki::DeviceBuffer<uint32_t>(hl.size());
        KWIKI_CHECK(cudaMemcpy(Wl.get(), hl.data(), hl.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
        scales = kwiki::DeviceBuffer<bf16>(hs.size());
        KWIKI_CHECK(cudaMemcpy(Wt.get(), ht.data(), ht.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
        const std::vector<bf16> hst = tiled_scales(hs, N, K);
        St = kwiki::DeviceBuffer<bf16>(hst.size());
        KWIKI_CHECK(cudaMemcpy(St.get(), hst.data(), hst.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        x = kwiki::DeviceBuffer<bf16>(hx.size()), W = kwiki::DeviceBuffer<bf16>(hW.size());
        KWIKI_CHECK(cudaMemcpy(Wq.get(), hq.data(), hq.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
        KWIKI_CHECK(cudaMemcpy(scales.get(), hs.data(), hs.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        KWIKI_CHECK(cudaMemcpy(x.get(), hx.data(), hx.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        KWIKI_CHECK(cudaMemcpy(W.get(), hW.data(), hW.size() * sizeof(bf16), cudaMemcpyHostToDevice));
        ref.assign(size_t(M) * N, 0.0);
        kwiki::parallel_for(size_t(N), [&](size_t n0, size_t n1) {
            for (size_t n = n0; n < n1; ++n)
                for (int m = 0; m < M; ++m) {
                    double s = 0;
                    for (int k = 0; k < K; ++k) s += wd[n * K + k] * xd[size_t(m) * K + k];
                    ref[size_t(m) * N + n] = s;
                }
        });
    }
};

kwiki::CheckResult check_y(const bf16* y, int M, int N, int K, const Inputs& set) {
    const size_t n = size_t(M) * N;
    std::vector<float> got = kwiki::to_host_float(y, n);
    return kwiki::with_canary(kwiki::compare(got.data(), set.ref.data(), n, {std::sqrt(double(K)) / 16384.0, 2.0 / 128},
                                             "host fp64 of x (q - 8) s from the same integers, scales and bf16 x"), y, n);
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// kwiki:rung w4_warp
__device__ __forceinline__ uint4 ld_w(const uint32_t* p) {  // 16 bytes of Wq, read once: not kept in L1
    uint4 r;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ uint4 ld_x(const bf16* p) {  // 16 bytes of x, read by every CTA: kept in L1
    uint4 r;
    asm("ld.global.nc.L1::evict_last.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}
__device__ __forceinline__ float ld_s(const bf16* p) {  // a group's scale
    unsigned short r;
    asm("ld.global.nc.u16 %0, [%1];" : "=h"(r) : "l"(p));
    return __bfloat162float(__ushort_as_bfloat16(r));
}

// d += A B, m16n8k16 bf16 in, fp32 accumulate (PTX ISA fragments: decode_mma_sm90a's mma_bf16 says which is which).
__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The bf16 pair (q_2r - 8, q_2r+1 - 8) of a word in the shuffled nibble order: (128 + q) from the bits, minus 136.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t w, int r) {
    uint32_t v;
    asm("lop3.b32 %0, %1, 0x000F000F, 0x43004300, 0xEA;" : "=r"(v) : "r"(w >> (4 * r)));  // (a & b) | c
    const __nv_bfloat162 h = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&v), __floats2bfloat162_rn(136.0f, 136.0f));
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// What one lane loads of one chunk (128 k, one group): per 16-channel tile t, w[t][h] = 16 bytes of row n+16t+8h+g
// (its 32 weights k0+32q..+31) and s[t][h] that row's scale; per n8 tile of x, x[t][i] = 8 bf16 of row 8t+g at
// k0+32q+8i.
template <int NT>
struct WChunk {
    uint4 w[NT][2];
    float s[NT][2];
};
template <int MT>
struct XChunk {
    uint4 x[MT][4];
};
template <int MT, int NT>
struct Chunk {
    WChunk<NT> w;
    XChunk<MT> x;
};

// The lane's rows: rows of Wq past N and of x past M load zeros (their sums are never stored; a zero word of Wq
// dequantizes to -8, harmless there).
// TILED: Wq is in tiled()'s order (one group of a tile a 1 KiB block), else row-major.
template <int MT, int NT, bool TILED = false>
struct Rows {
    static constexpr int kStep = TILED ? 256 : 16;  // words from one group of the lane's W rows to the next
    const uint32_t* w[NT][2];
    const bf16* s[NT][2];
    const bf16* x[MT];
    bool w_ok[NT][2], x_ok[MT];

    __device__ __forceinline__ Rows(const uint32_t* Wq, const bf16* S, const bf16* X, int M, int N, int K, int n0, int g, int q) {
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int n = n0 + 16 * t + 8 * h + g;
                w_ok[t][h] = n < N;
                w[t][h] = TILED ? Wq + (size_t(n0 / 16 + t) * (K / kGroup) * 2 + h) * 128 + 4 * (4 * g + q)
                                : Wq + size_t(w_ok[t][h] ? n : 0) * (K / 8) + 4 * q;
                s[t][h] = S + size_t(w_ok[t][h] ? n : 0) * (K / kGroup);
            }
#pragma unroll
        for (int t = 0; t < MT; ++t) {
            x_ok[t] = 8 * t + g < M;
            x[t] = X + size_t(x_ok[t] ? 8 * t + g : 0) * K + 32 * q;
        }
    }

    // Chunk c's weights and scales (k0 = 128c) when c < end, else zeros (slots past the warp's range add nothing).
    __device__ __forceinline__ void load_w(WChunk<NT>& ch, int c, int end) const {
#pragma unroll
        for (int t = 0; t < NT; ++t)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const bool ok = c < end && w_ok[t][h];
                ch.w[t][h] = ok ? ld_w(w[t][h] + kStep * c) : make_uint4(0, 0, 0, 0);
                ch.s[t][h] = ok ? ld_s(s[t][h] + c) : 0.0f;
            }
    }
    // Chunk c's rows of x, likewise.
    __device__ __forceinline__ void load_x(XChunk<MT>& ch, int c, int end) const {
#pragma unroll
        for (int t = 0; t < MT; ++t)
#pragma unroll
            for (int i = 0; i < 4; ++i) ch.x[t][i] = c < end && x_ok[t] ? ld_x(x[t] + kGroup * c + 8 * i) : make_uint4(0, 0, 0, 0);
    }
    __device__ __forceinline__ void load(Chunk<MT, NT>& ch, int c, int end) const {
        load_w(ch.w, c, end);
        load_x(ch.x, c, end);
    }
};

// The chunk's 8 MMAs per (16-channel tile, n8 tile) into two fresh tiles (even and odd j), then scaled into acc: d0, d1 are channel g's
// (scale s[t][0]), d2, d3 channel g+8's (s[t][1]). MMA j's operands are elements 4j..4j+3 of the lane's 32: word j/2
// of its W rows (pairs r = 2(j%2), 2(j%2)+1) and of x (16-byte load j/2, words 2(j%2), 2(j%2)+1).
template <int MT, int NT>
__device__ __forceinline__ void mma_chunk(float (&acc)[NT][MT][4], const WChunk<NT>& ch, const XChunk<MT>& xc) {
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        float part[2][MT][4] = {};  // MMAs j even and odd in two tiles: two chains of 4 dependent MMAs, not one of 8
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const uint32_t w0 = word(ch.w[t][0], j / 2), w1 = word(ch.w[t][1], j / 2);
            const int r = 2 * (j % 2);
            const uint32_t a0 = dequant_pair(w0, r), a1 = dequant_pair(w1, r), a2 = dequant_pair(w0, r + 1),
                           a3 = dequant_pair(w1, r + 1);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
                mma_bf16(part[j % 2][mt], a0, a1, a2, a3, word(xc.x[mt][j / 2], r), word(xc.x[mt][j / 2], r + 1));
        }
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[t][mt][e] = fmaf(ch.s[t][e / 2], part[0][mt][e] + part[1][mt][e], acc[t][mt][e]);
    }
}
// /kwiki:rung w4_warp

// kwiki:rung w4_ring
// The warp's chunks first, first + WARPS, ... below end. U = 1: load a chunk, its MMAs, the next. U > 1: a ring of U
// chunks in registers, each slot refilled with the chunk U rounds ahead right after its MMAs.
template <int MT, int NT, int WARPS, int U, bool TILED>
__device__ __forceinline__ void k_loop(float (&acc)[NT][MT][4], const Rows<MT, NT, TILED>& rows, int first, int end) {
    Chunk<MT, NT> ring[U];
#pragma unroll
    for (int u = 0; u < U; ++u) rows.load(ring[u], first + u * WARPS, end);
#pragma unroll 1
    for (int c = first; c < end; c += U * WARPS) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            mma_chunk(acc, ring[u].w, ring[u].x);
            rows.load(ring[u], c + (U + u) * WARPS, end);
        }
    }
}
// /kwiki:rung w4_ring

// kwiki:rung w4_warp
// y (or split blockIdx.y's fp32 partials in ws) for the CTA's 16 NT channels and every row of x: the warps take the
// split's chunks in turn, add their accumulators through shared memory in a fixed tree, and warp 0 stores (acc[mt][r]
// is channel n + g + 8 (r / 2) of row 8 mt + 2 q + r % 2). The launch bounds ask for registers that leave room for 16
// warps an SM at M <= 8, and at M = 16 with one tile and one group in flight, else 12: the kernel waits on chains of
// dependent MMAs and on loads, and more warps hide more of both (Nsight Compute finds no eligible warp in most
// cycles; the sweep measured the unbounded kernels, at 8 warps an SM, slower). No configuration spills.
template <int MT, int NT, int WARPS, int U, bool TILED>
__global__ void __launch_bounds__(WARPS * 32, (MT == 1 || (NT == 1 && U == 1) ? 16 : 12) / WARPS) w4_kernel(const uint32_t* Wq, const bf16* S, const bf16* x, bf16* y, float* ws,
                                                        int M, int N, int K, int chunks_per_split) {
    constexpr int REGS = NT * MT * 4;
    __shared__ float part[WARPS / 2 > 0 ? WARPS / 2 : 1][REGS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
    const int n0 = blockIdx.x * 16 * NT, split = blockIdx.y;
    const int begin = split * chunks_per_split, end = min(K / kGroup, begin + chunks_per_split);
    const Rows<MT, NT, TILED> rows(Wq, S, x, M, N, K, n0, g, q);
    float acc[NT][MT][4] = {};
    k_loop<MT, NT, WARPS, U, TILED>(acc, rows, begin + warp, end);
#pragma unroll
    for (int h = WARPS / 2; h >= 1; h /= 2) {
        if (warp >= h && warp < 2 * h)
#pragma unroll
            for (int r = 0; r < REGS; ++r) part[warp - h][r][lane] = (&acc[0][0][0])[r];
        __syncthreads();
        if (warp < h)
#pragma unroll
            for (int r = 0; r < REGS; ++r) (&acc[0][0][0])[r] += part[warp][r][lane];
        __syncthreads();
    }
    if (warp != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int c = n0 + 16 * t + g + 8 * (r >> 1), m = 8 * mt + 2 * q + (r & 1);
                if (m >= M || c >= N) continue;
                if (gridDim.y == 1) y[size_t(m) * N + c] = __float2bfloat16_rn(acc[t][mt][r]);
                else ws[(size_t(split) * M + m) * N + c] = acc[t][mt][r];
            }
}
// /kwiki:rung w4_warp

// kwiki:rung w4_smem
// 16 bytes of global memory into shared memory, asynchronously (cp.async.cg: through L2 only); src_bytes 0 writes
// 16 zeros (rows of x past M).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(uint32_t(__cvta_generic_to_shared(dst))), "l"(src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// x's rows for one group, staged once per CTA and read by all its warps: 8 MT rows of 128 bf16, padded by 16 bytes
// (row stride 272 bytes: the 8 lanes of a wavefront that read 16 bytes at column 32q + 8i of rows g land on 8
// different groups of 4 banks, so an LDS.128 of the warp takes the 4 wavefronts its 512 bytes need).
constexpr int kXRow = kGroup + 8;

// y (or split blockIdx.y's partials) for the CTA's WARPS x 16 NT channels: every warp walks all the split's groups
// for its own 16 NT channels, and the CTA's x for each group comes through a ring of S stages in shared memory that
// all threads fill with cp.async, S - 1 groups ahead (one barrier a group). W stays in registers, U groups a warp in
// flight. No reduction across warps: each warp owns its outputs.
template <int MT, int NT, int WARPS, int U, int S>
__global__ void __launch_bounds__(WARPS * 32, 1) w4s_kernel(const uint32_t* Wq, const bf16* Sc, const bf16* x, bf16* y, float* ws,
                                                         int M, int N, int K, int chunks_per_split) {
    __shared__ alignas(16) bf16 xs[S][8 * MT][kXRow];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
    const int n0 = (blockIdx.x * WARPS + warp) * 16 * NT, split = blockIdx.y;
    const int begin = split * chunks_per_split, end = min(K / kGroup, begin + chunks_per_split);
    const Rows<MT, NT> rows(Wq, Sc, x, M, N, K, n0, g, q);
    auto stage = [&](int c) {  // group c's rows of x into slot (c - begin) % S; a commit either way (the count stays in step)
        if (c < end)
            for (int i = threadIdx.x; i < 8 * MT * 16; i += WARPS * 32) {
                const int r = i / 16, piece = i % 16;
                cp_async16(&xs[(c - begin) % S][r][8 * piece], x + size_t(r < M ? r : 0) * K + size_t(kGroup) * c + 8 * piece, r < M ? 16 : 0);
            }
        cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < S - 1; ++s) stage(begin + s);
    WChunk<NT> ring[U];
#pragma unroll
    for (int u = 0; u < U; ++u) rows.load_w(ring[u], begin + u, end);
    float acc[NT][MT][4] = {};
#pragma unroll 1
    for (int c0 = begin; c0 < end; c0 += U) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = c0 + u;
            if (c >= end) break;  // the same for every thread of the CTA: the barrier below is reached by all or none
            cp_async_wait<S - 2>();  // group c's copy (this thread's part) has landed
            __syncthreads();         // every thread's part has, and every warp is done with the slot refilled next
            stage(c + S - 1);
            XChunk<MT> xc;
            const bf16* row = &xs[(c - begin) % S][g][32 * q];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int i = 0; i < 4; ++i) xc.x[mt][i] = *reinterpret_cast<const uint4*>(row + 8 * mt * kXRow + 8 * i);
            mma_chunk(acc, ring[u], xc);
            rows.load_w(ring[u], c + U, end);
        }
    }
#pragma unroll
    for (int t = 0; t < NT; ++t)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const int c = n0 + 16 * t + g + 8 * (r >> 1), m = 8 * mt + 2 * q + (r & 1);
                if (m >= M || c >= N) continue;
                if (gridDim.y == 1) y[size_t(m) * N + c] = __float2bfloat16_rn(acc[t][mt][r]);
                else ws[(size_t(split) * M + m) * N + c] = acc[t][mt][r];
            }
}
// /kwiki:rung w4_smem

// kwiki:rung w4_async
// The weights through shared memory instead of registers: each warp streams its own 16 channels' groups into a ring
// of S slots of its own (1 KiB a slot: the 32 bytes a lane will itself read, so no barrier guards them), S - 1 groups
// ahead with cp.async, the same commit groups as x's CTA-wide ring (w4s_kernel's); the scales ride a register ring of
// S. Bytes in flight a warp: (S - 1) KiB of W, held by the copy engine, not by registers, so they do not cost warps.
// Dynamic shared memory: S x (x's rows of one group + WARPS KiB of W).
template <int MT, int WARPS, int S>
constexpr int async_smem_bytes() { return S * (8 * MT * kXRow * int(sizeof(bf16)) + WARPS * 2 * 32 * int(sizeof(uint4))); }

template <int MT, int WARPS, int S, bool TILED>
__global__ void __launch_bounds__(WARPS * 32, 1) w4a_kernel(const uint32_t* Wq, const bf16* Sc, const bf16* x, bf16* y, float* ws,
                                                         int M, int N, int K, int chunks_per_split) {
    extern __shared__ uint4 smem[];
    auto xs = reinterpret_cast<bf16 (*)[8 * MT][kXRow]>(smem);                                    // [S][8 MT][kXRow]
    auto wr = reinterpret_cast<uint4 (*)[WARPS][2][32]>(smem + S * 8 * MT * kXRow * sizeof(bf16) / sizeof(uint4));  // [S][warp][h][lane]
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
    const int n0 = (blockIdx.x * WARPS + warp) * 16, split = blockIdx.y;
    const int begin = split * chunks_per_split, end = min(K / kGroup, begin + chunks_per_split);
    const Rows<MT, 1, TILED> rows(Wq, Sc, x, M, N, K, n0, g, q);
    float sr[S][2];  // the scales of the groups in the ring, by slot
    // Group c into slot `slot`: x's rows by all threads of the CTA, this lane's 2 x 16 bytes of W (rows past N: zeros,
    // no read), the lane's two scales into registers; a commit either way (the count stays in step).
    auto stage = [&](int c, int slot) {
        if (c < end) {
            for (int i = threadIdx.x; i < 8 * MT * 16; i += WARPS * 32) {
                const int r = i / 16, piece = i % 16;
                cp_async16(&xs[slot][r][8 * piece], x + size_t(r < M ? r : 0) * K + size_t(kGroup) * c + 8 * piece, r < M ? 16 : 0);
            }
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                cp_async16(&wr[slot][warp][h][lane], rows.w[0][h] + rows.kStep * c, rows.w_ok[0][h] ? 16 : 0);
                sr[slot][h] = rows.w_ok[0][h] ? ld_s(rows.s[0][h] + c) : 0.0f;
            }
        }
        cp_async_commit();
    };
#pragma unroll
    for (int s = 0; s < S - 1; ++s) stage(begin + s, s);
    float acc[1][MT][4] = {};
#pragma unroll 1
    for (int c0 = begin; c0 < end; c0 += S) {
#pragma unroll
        for (int u = 0; u < S; ++u) {
            const int c = c0 + u;
            if (c >= end) break;     // the same for every thread of the CTA: the barrier below is reached by all or none
            cp_async_wait<S - 2>();  // group c's copies (this thread's part) have landed
            __syncthreads();         // every thread's part of x has, and every warp is done with slot u - 1, refilled next
            stage(c + S - 1, (u + S - 1) % S);
            WChunk<1> wc;
            XChunk<MT> xc;
#pragma unroll
            for (int h = 0; h < 2; ++h) wc.w[0][h] = wr[u][warp][h][lane], wc.s[0][h] = sr[u][h];
            const bf16* row = &xs[u][g][32 * q];
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int i = 0; i < 4; ++i) xc.x[mt][i] = *reinterpret_cast<const uint4*>(row + 8 * mt * kXRow + 8 * i);
            mma_chunk(acc, wc, xc);
        }
    }
    cp_async_wait<0>();  // no copy outlives the CTA's shared memory
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int c = n0 + g + 8 * (r >> 1), m = 8 * mt + 2 * q + (r & 1);
            if (m >= M || c >= N) continue;
            if (gridDim.y == 1) y[size_t(m) * N + c] = __float2bfloat16_rn(acc[0][mt][r]);
            else ws[(size_t(split) * M + m) * N + c] = acc[0][mt][r];
        }
}
// /kwiki:rung w4_async

// kwiki:rung w4_lean
// A group's loads with nothing to guard, in the offline order: the weights as 2 x 512 contiguous bytes a warp, both of
// a lane's scales in one 32-bit word, x's rows at indices clamped to M - 1 (columns of the MMA past M are never
// stored, so they may hold any row), chunks past the warp's range clamped to its last (loaded, never used). The loop
// then carries no predicate and no recomputed address: what w4_kernel spends on its guards goes.
template <int MT>
struct LeanChunk {
    uint4 w[2];
    uint32_t s;
    uint4 x[MT][4];
};

__device__ __forceinline__ uint32_t ld_s2(const uint32_t* p) {  // a lane's two scales
    uint32_t r;
    asm("ld.global.nc.u32 %0, [%1];" : "=r"(r) : "l"(p));
    return r;
}

// 16 channels a CTA, its WARPS warps splitting K as w4_kernel's; the launch bounds as w4_kernel's with one tile and
// one group in flight (16 warps an SM), or 8 with U >= 4 groups in flight.
template <int MT, int WARPS, int U>
__global__ void __launch_bounds__(WARPS * 32, ((U >= 4 ? 8 : 16) / WARPS > 0 ? (U >= 4 ? 8 : 16) / WARPS : 1)) w4l_kernel(const uint32_t* Wt, const bf16* St, const bf16* x, bf16* y, float* ws,
                                                                   int M, int N, int K, int chunks_per_split) {
    constexpr int REGS = MT * 4;
    __shared__ float part[WARPS / 2 > 0 ? WARPS / 2 : 1][REGS][32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
    const int tile = blockIdx.x, n0 = 16 * tile, split = blockIdx.y, groups = K / kGroup;
    const int begin = split * chunks_per_split, end = min(groups, begin + chunks_per_split), last = max(end - 1, 0);
    const uint4* wp = reinterpret_cast<const uint4*>(Wt) + size_t(tile) * groups * 64 + lane;  // a group: [h][lane], 64 x 16 bytes
    const uint32_t* sp = reinterpret_cast<const uint32_t*>(St) + size_t(tile) * groups * 8 + g;  // a group: 8 words
    const bf16* xp[MT];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) xp[mt] = x + size_t(min(8 * mt + g, M - 1)) * K + 8 * q;  // tiled(interleaved)'s order
    auto load = [&](LeanChunk<MT>& ch, int c) {
        c = min(c, last);
        ch.w[0] = ld_w(reinterpret_cast<const uint32_t*>(wp + 64 * c));
        ch.w[1] = ld_w(reinterpret_cast<const uint32_t*>(wp + 64 * c + 32));
        ch.s = ld_s2(sp + 8 * c);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int i = 0; i < 4; ++i) ch.x[mt][i] = ld_x(xp[mt] + kGroup * c + 32 * i);
    };
    float acc[1][MT][4] = {};
    LeanChunk<MT> ring[U];
#pragma unroll
    for (int u = 0; u < U; ++u) load(ring[u], begin + warp + u * WARPS);
#pragma unroll 1
    for (int c = begin + warp; c < end; c += U * WARPS) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (u > 0 && c + u * WARPS >= end) break;
            WChunk<1> wc;
            XChunk<MT> xc;
            wc.w[0][0] = ring[u].w[0], wc.w[0][1] = ring[u].w[1];
            const __nv_bfloat162 s2 = *reinterpret_cast<const __nv_bfloat162*>(&ring[u].s);
            wc.s[0][0] = __low2float(s2), wc.s[0][1] = __high2float(s2);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int i = 0; i < 4; ++i) xc.x[mt][i] = ring[u].x[mt][i];
            mma_chunk(acc, wc, xc);
            load(ring[u], c + (U + u) * WARPS);
        }
    }
#pragma unroll
    for (int h = WARPS / 2; h >= 1; h /= 2) {
        if (warp >= h && warp < 2 * h)
#pragma unroll
            for (int r = 0; r < REGS; ++r) part[warp - h][r][lane] = (&acc[0][0][0])[r];
        __syncthreads();
        if (warp < h)
#pragma unroll
            for (int r = 0; r < REGS; ++r) (&acc[0][0][0])[r] += part[warp][r][lane];
        __syncthreads();
    }
    if (warp != 0) return;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int c = n0 + g + 8 * (r >> 1), m = 8 * mt + 2 * q + (r & 1);
            if (m >= M || c >= N) continue;
            if (gridDim.y == 1) y[size_t(m) * N + c] = __float2bfloat16_rn(acc[0][mt][r]);
            else ws[(size_t(split) * M + m) * N + c] = acc[0][mt][r];
        }
}
// /kwiki:rung w4_lean

// kwiki:rung w4_tuned
// y[i] = the splits' partial sums of output i, added in split order: deterministic.
__global__ void __launch_bounds__(256) reduce_splits_kernel(const float* ws, bf16* y, int outputs, int splits) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < outputs; i += gridDim.x * blockDim.x) {
        float s = 0;
        for (int sp = 0; sp < splits; ++sp) s += ws[size_t(sp) * outputs + i];
        y[i] = __float2bfloat16_rn(s);
    }
}
// /kwiki:rung w4_tuned

// ===================================================================================================
// Launchers
// ===================================================================================================

struct Shape {
    int M, N, K;
};

constexpr int kMaxSplits = 4;

struct Problem {
    int M, N, K;
    const Inputs* in;
    bf16* y;
    float* ws;  // kMaxSplits x M x N floats
    kwiki::cublasHandle_t blas;
};

using Kernel = void (*)(const uint32_t*, const bf16*, const bf16*, bf16*, float*, int, int, int, int);

// A configuration: the kernel for MT = 1, 2 n8 tiles of x, 16 NT channels per CTA, warps, chunks in flight, splits.
struct Launch {
    Kernel kernel[2];
    int nt, warps, u, splits;
    int stages = 0;  // > 0: kernel[] holds w4s_kernel (x staged in shared memory, every warp its own channels)
    int smem[2] = {0, 0};  // > 0: kernel[] holds w4a_kernel (W too through shared memory), its dynamic shared memory
    bool tiled = false;    // the kernels read Wt (the words reordered offline into warp fragments), not Wq
    bool lean = false;     // w4l_kernel: Wl (tiled, interleaved) and St (the scales in the same order)
};

template <int NT, int WARPS, int U, int SPLITS, bool TILED = false>
constexpr Launch w4_cfg() {
    return {{w4_kernel<1, NT, WARPS, U, TILED>, w4_kernel<2, NT, WARPS, U, TILED>}, NT, WARPS, U, SPLITS, 0, {0, 0}, TILED};
}

// kwiki:rung w4_smem
template <int NT, int WARPS, int U, int S, int SPLITS>
constexpr Launch smem_cfg() {
    return {{w4s_kernel<1, NT, WARPS, U, S>, w4s_kernel<2, NT, WARPS, U, S>}, NT, WARPS, U, SPLITS, S};
}
// /kwiki:rung w4_smem

// kwiki:rung w4_async
template <int WARPS, int S, int SPLITS, bool TILED = false>
constexpr Launch async_cfg() {
    return {{w4a_kernel<1, WARPS, S, TILED>, w4a_kernel<2, WARPS, S, TILED>}, 1, WARPS, S - 1, SPLITS, S,
            {async_smem_bytes<1, WARPS, S>(), async_smem_bytes<2, WARPS, S>()}, TILED};
}
// /kwiki:rung w4_async

// kwiki:rung w4_lean
template <int WARPS, int U, int SPLITS>
constexpr Launch lean_cfg() {
    return {{w4l_kernel<1, WARPS, U>, w4l_kernel<2, WARPS, U>}, 1, WARPS, U, SPLITS, 0, {0, 0}, true, true};
}
// /kwiki:rung w4_lean

// Channels per CTA: 16 NT, times the warps when each warp owns its own (w4s_kernel, w4a_kernel).
int channels(const Launch& l) { return 16 * l.nt * (l.stages ? l.warps : 1); }

int mt_index(int M) { return M <= 8 ? 0 : 1; }

// kwiki:rung w4_tuned
// What the selection pass of w4_tuned times (--sweep: each as a variant of its own): n<NT>_w<warps>_u<chunks in
// flight>_s<splits>. Two chunks in flight with 8 warps spill at M <= 8 (4 warps there).
using Config = kwiki::GemvConfig<Launch>;
const std::vector<Config>& configs() {
    static const std::vector<Config> c = {
        {"n1_w8_u1_s1", w4_cfg<1, 8, 1, 1>()}, {"n1_w4_u2_s1", w4_cfg<1, 4, 2, 1>()},
        {"n2_w8_u1_s1", w4_cfg<2, 8, 1, 1>()}, {"n2_w4_u1_s1", w4_cfg<2, 4, 1, 1>()},
        {"n1_w4_u2_s2", w4_cfg<1, 4, 2, 2>()}, {"n2_w8_u1_s2", w4_cfg<2, 8, 1, 2>()},
        {"n2_w4_u1_s2", w4_cfg<2, 4, 1, 2>()}, {"n1_w4_u2_s4", w4_cfg<1, 4, 2, 4>()},
        {"n1_w8_u1_s4", w4_cfg<1, 8, 1, 4>()},
        // x staged in shared memory: x<stages>_n<NT>_w<warps>_u<groups of W in flight>_s<splits>
        {"x4_n1_w8_u1_s1", smem_cfg<1, 8, 1, 4, 1>()}, {"x4_n1_w8_u2_s1", smem_cfg<1, 8, 2, 4, 1>()},
        {"x4_n1_w4_u2_s1", smem_cfg<1, 4, 2, 4, 1>()}, {"x4_n2_w4_u1_s1", smem_cfg<2, 4, 1, 4, 1>()},
        {"x4_n1_w8_u2_s2", smem_cfg<1, 8, 2, 4, 2>()}, {"x4_n2_w4_u1_s2", smem_cfg<2, 4, 1, 4, 2>()},
        {"x4_n1_w4_u2_s2", smem_cfg<1, 4, 2, 4, 2>()}, {"x4_n1_w8_u1_s2", smem_cfg<1, 8, 1, 4, 2>()},
        {"x4_n1_w4_u2_s4", smem_cfg<1, 4, 2, 4, 4>()},
        // W and x through shared memory (w4a_kernel): a<stages>_w<warps>_s<splits>, 16 channels a warp, stages - 1 groups ahead
        {"a8_w4_s1", async_cfg<4, 8, 1>()}, {"a8_w4_s2", async_cfg<4, 8, 2>()}, {"a8_w8_s2", async_cfg<8, 8, 2>()},
        // on the words reordered offline into warp fragments: t_<configuration>
        {"t_n2_w4_u1_s1", w4_cfg<2, 4, 1, 1, true>()}, {"t_n2_w8_u1_s1", w4_cfg<2, 8, 1, 1, true>()},
        {"t_a8_w4_s1", async_cfg<4, 8, 1, true>()},
        // w4l_kernel (weights and scales reordered, nothing to guard): l_w<warps>_u<groups in flight>_s<splits>
        {"l_w8_u1_s1", lean_cfg<8, 1, 1>()}, {"l_w4_u1_s1", lean_cfg<4, 1, 1>()}, {"l_w4_u2_s1", lean_cfg<4, 2, 1>()},
        {"l_w16_u1_s1", lean_cfg<16, 1, 1>()}, {"l_w8_u1_s2", lean_cfg<8, 1, 2>()},
    };
    return c;
}

Launch config(const char* name) { return kwiki::find_config(configs(), name); }
// /kwiki:rung w4_tuned

// A kernel asking for more dynamic shared memory than the default 48 KiB opts in, once.
void allow_smem(const Launch& l, int mt) {
    if (l.smem[mt] <= 48 * 1024) return;
    static std::set<const void*> raised;
    if (raised.insert(reinterpret_cast<const void*>(l.kernel[mt])).second)
        KWIKI_CHECK(cudaFuncSetAttribute(l.kernel[mt], cudaFuncAttributeMaxDynamicSharedMemorySize, l.smem[mt]));
}

void run_kernel(const Launch& l, const Problem& p, cudaStream_t s) {
    const int chunks = p.K / kGroup, per_split = (chunks + l.splits - 1) / l.splits;
    const dim3 grid((p.N + channels(l) - 1) / channels(l), l.splits);
    const int mt = mt_index(p.M);
    allow_smem(l, mt);
    l.kernel[mt]<<<grid, 32 * l.warps, l.smem[mt], s>>>(l.lean ? p.in->Wl.get() : l.tiled ? p.in->Wt.get() : p.in->Wq.get(), l.lean ? p.in->St.get() : p.in->scales.get(), p.in->x.get(), p.y, p.ws,
                                                           p.M, p.N, p.K, per_split);
    KWIKI_CHECK_LAST();
    if (l.splits == 1) return;
    const int outputs = p.M * p.N;
    reduce_splits_kernel<<<(outputs + 255) / 256, 256, 0, s>>>(p.ws, p.y, outputs, l.splits);
    KWIKI_CHECK_LAST();
}

// kwiki:rung cublas
// y = x W^T on the bf16 weight of the same values: what torch.mm(x, W.t()) / F.linear(x, W) runs.
void run_cublas(const Problem& p, cudaStream_t s) { kwiki::gemm_tn(p.blas, p.in->x.get(), p.in->W.get(), p.y, p.M, p.N, p.K, kwiki::kGemmBf16, s); }
// /kwiki:rung cublas

enum class Kind { Kernel, Tuned, Cublas, CublasLt, Ceiling };

struct Variant : kwiki::VariantInfo {
    Kind kind;
    Launch launch;
};

using Todo = kwiki::GemvTodo<Kind, Launch>;
using Run = std::function<void(const Problem&, cudaStream_t)>;

Run kernel_run(Launch l) { return [l](const Problem& p, cudaStream_t s) { run_kernel(l, p, s); }; }

// The selection passes of one shape: every configuration (w4_tuned) and every cuBLASLt candidate (cublaslt_best).
struct Selections {
    kwiki::Selection tuned, lt_best;
    std::string tuned_name;
    std::unique_ptr<kwiki::LtGemmTn> ltg;

    template <class Bind>
    Selections(kwiki::Runner& selector, const std::vector<Todo>& todo, const kwiki::BlasHandles& lib, const Shape& sh, Bind bind) {
        auto want_kind = [&](Kind k) { return std::any_of(todo.begin(), todo.end(), [k](const Todo& t) { return t.kind == k; }); };
        if (want_kind(Kind::Tuned)) {
            tuned = kwiki::select_config(selector, configs(), [&](kwiki::Case& c, Launch l) { bind(c, kernel_run(l), false); });
            if (tuned.index >= 0) tuned_name = configs()[size_t(tuned.index)].name;
        }
        // kwiki:rung cublaslt_best
        if (!want_kind(Kind::CublasLt)) return;
        ltg = std::make_unique<kwiki::LtGemmTn>(lib.lt, sh.M, sh.N, sh.K, kwiki::kGemmBf16, 8);
        std::vector<kwiki::Case> cand;
        for (int i = 0; i < ltg->algos(); ++i) {
            kwiki::Case c;
            c.variant = "select_cublaslt_" + std::to_string(i);
            bind(c, [g = ltg.get(), i](const Problem& p, cudaStream_t s) { g->run(i, p.in->x.get(), p.in->W.get(), p.y, s); }, true);
            cand.push_back(std::move(c));
        }
        lt_best = kwiki::select_fastest(selector, cand);
        // /kwiki:rung cublaslt_best
    }
};

template <class Bind>
kwiki::Case ladder_case(const Todo& v, const Selections& sel, const Shape& sh, const kwiki::Fields& params, Bind bind) {
    kwiki::Case c = kwiki::named_case(v.name, params);
    const kwiki::Selection& chosen = v.kind == Kind::Tuned ? sel.tuned : sel.lt_best;
    if ((v.kind == Kind::Tuned || v.kind == Kind::CublasLt) && chosen.index < 0) {
        kwiki::nothing_selected(c, "no candidate of the selection pass passed its check and was timed");
        return c;
    }
    const Launch l = v.kind == Kind::Tuned ? config(sel.tuned_name.c_str()) : v.launch;
    if (v.kind == Kind::Cublas) bind(c, [](const Problem& p, cudaStream_t s) { run_cublas(p, s); }, true);
    else if (v.kind == Kind::CublasLt)
        bind(c, [g = sel.ltg.get(), i = sel.lt_best.index](const Problem& p, cudaStream_t s) { g->run(i, p.in->x.get(), p.in->W.get(), p.y, s); }, true);
    else {
        bind(c, kernel_run(l), false);
        const int threads = 32 * l.warps;
        allow_smem(l, mt_index(sh.M));
        kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(l.kernel[mt_index(sh.M)]), threads, size_t(l.smem[mt_index(sh.M)]));
        c.extra.emplace_back("chunks_in_flight", l.u);
        c.extra.emplace_back("threads", threads);
        c.extra.emplace_back("channels_per_block", channels(l));
        if (l.stages) c.extra.emplace_back("x_stages_in_shared_memory", l.stages);
        if (l.smem[0]) c.extra.emplace_back("w_stages_in_shared_memory", l.stages);
        c.extra.emplace_back("splits", l.splits);
    }
    if (v.kind == Kind::Tuned || v.kind == Kind::CublasLt) {
        if (v.kind == Kind::Tuned) c.extra.emplace_back("selected", sel.tuned_name);
        else c.extra.emplace_back("selected", "heuristic algorithm " + std::to_string(chosen.index));
        c.extra.emplace_back("selected_from", chosen.tried);
        if (chosen.median_us) c.extra.emplace_back("selection_median_us", *chosen.median_us);
    }
    return c;
}

// --shapes: MxNxK with M from 1 to 16 and K a multiple of 128 (the group size); any other exits 2 naming the rule.
std::vector<Shape> parse_shapes(const kwiki::Args& args) {
    return args.get_shapes<Shape, 3>("shapes", "", "MxNxK triples with M from 1 to 16 and K a multiple of 128", [](const std::vector<int>& d) {
        const std::string at = "--shapes: " + std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) + ": ";
        if (d[0] > 16) kwiki::Args::usage(at + "M must be from 1 to 16 (at most 2 n8 tiles of x: M = 32 spills)");
        if (d[2] % kGroup) kwiki::Args::usage(at + "K must be a multiple of 128 (one scale per 128 weights along K)");
        return d[0] >= 1 && d[1] >= 1;
    });
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr Variant kVariants[] = {
    {{"w4_warp"}, Kind::Kernel, w4_cfg<1, 8, 1, 1>()},
    // kwiki:rung w4_ring
    {{"w4_ring"}, Kind::Kernel, w4_cfg<1, 4, 2, 1>()},
    // /kwiki:rung w4_ring
    // kwiki:rung w4_wide
    {{"w4_wide"}, Kind::Kernel, w4_cfg<2, 4, 1, 1>()},
    // /kwiki:rung w4_wide
    // kwiki:rung w4_smem
    {{"w4_smem"}, Kind::Kernel, smem_cfg<1, 4, 2, 4, 1>()},
    // /kwiki:rung w4_smem
    // kwiki:rung w4_async
    {{"w4_async"}, Kind::Kernel, async_cfg<4, 8, 1>()},
    // /kwiki:rung w4_async
    // kwiki:rung w4_lean
    {{"w4_lean"}, Kind::Kernel, lean_cfg<8, 1, 1>()},
    // /kwiki:rung w4_lean
    {{"w4_tuned"}, Kind::Tuned, {}},
    {{"cublas"}, Kind::Cublas, {}},
    {{"cublaslt_best"}, Kind::CublasLt, {}},
    {{"read_ceiling"}, Kind::Ceiling, {}},  // not a rung: the speed of light for the int4 bytes
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::GemvMain<Shape> m(argc, argv, kVariants, "w4a16_mma", parse_shapes);
    const kwiki::BlasHandles lib(m.args.want("cublas"), m.args.want("cublaslt_best"));
    kwiki::Runner runner(m.args);
    const auto selector = kwiki::selection_runner(m.args);
    const auto roof = kwiki::gemv_roof(runner, m.args, m.seed, "read_ceiling");
    const auto todo = kwiki::gemv_todo(m.args, kVariants, configs(), Kind::Kernel, [](const Variant& v) { return v.kind != Kind::Ceiling; });
    for (const Shape& sh : m.shapes) {
        const int M = sh.M, N = sh.N, K = sh.K;
        const size_t outputs = size_t(M) * N;
        kwiki::DeviceBuffer<bf16> y(outputs + kwiki::kCanary);
        kwiki::DeviceBuffer<float> ws(size_t(kMaxSplits) * outputs);
        kwiki::set_canary(y.get(), outputs);
        kwiki::InputSets<Inputs> in(m.sets, m.seed + uint64_t(M) * 1000003u + uint64_t(N) * 7919u + K,
                                    [&](Inputs& s, uint64_t seed) { s.fill(M, N, K, seed); });
        const double xy = double(size_t(M) * K + outputs) * sizeof(bf16);
        const double bytes = double(size_t(N) * K) / 2 + double(size_t(N) * (K / kGroup)) * sizeof(bf16) + xy;  // Wq + scales + x + y
        const double bf16_bytes = double(size_t(N) * K) * sizeof(bf16) + xy;  // the baselines read the bf16 weight
        const std::string shape = std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K);
        const kwiki::Fields params = {{"shape", shape}, {"M", M}, {"N", N}, {"K", K}, {"dtype", "w4a16"}};
        auto bind = [&](kwiki::Case& c, Run run, bool library) {
            c.params = params, c.bytes = library ? bf16_bytes : bytes, c.flops = 2.0 * double(M) * N * K, c.flops_dtype = "bf16";
            c.launch = [&, run](cudaStream_t s) { run(Problem{M, N, K, &in.current(), y.get(), ws.get(), lib.blas}, s); };
            in.bind(c, [&y, outputs](cudaStream_t s) { kwiki::poison(y.get(), outputs * sizeof(bf16), s); },
                    [&y, M, N, K](const Inputs& set) { return check_y(y.get(), M, N, K, set); });
        };
        const Selections sel(*selector, todo, lib, sh, bind);
        std::vector<kwiki::Case> cases;
        for (const Todo& v : todo) cases.push_back(ladder_case(v, sel, sh, params, bind));
        kwiki::run_shape(runner, cases, roof.get(), "read_ceiling", params, bytes);
    }
    return kwiki::exit_code();
}
