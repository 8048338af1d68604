// rmsnorm.cu: RMSNorm in CUDA on Hopper, y = x * rsqrt(mean(x^2) + eps) * w, bf16 in and out, fp32 math, one row of
// the hidden dimension per reduction; then fused with the residual add (h = x + r written out, y = RMSNorm of h) and
// with the per-token fp8 e4m3 quantization an fp8 GEMM after it wants. The CUDA rungs beside the Triton ones of
// rownorm_bf16_sm90a (page kernel-rmsnorm): where the row lives between its reduction and its scaling (read again
// from memory, a block's registers, one warp's registers) and what fusing the neighbours costs.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o rmsnorm rmsnorm.cu
// Run: ./rmsnorm --shapes=ROWSxHIDDEN,... [--variants a,b,c] [--seed=N] [--input-sets=2]
//
// Bytes per record are what the op must move, counted as the Triton artifact's work() counts them: RMSNorm reads x
// and writes y (4 bytes an element) and reads the weight row once (2 * hidden); add_rmsnorm reads x and r and writes
// h and y (8); add_rmsnorm_fp8 reads x and r and writes h and q (7) and a 4-byte scale per row; `copy`
// (cudaMemcpyAsync of x into y) moves 4, and is the roof of the same run. block_twopass reads each row twice: its
// second read comes from L2 when the row is still there, else from memory; either way its bytes are the op's.
// Shapes: ROWS x HIDDEN with HIDDEN a multiple of 8 (rows are read in 16-byte vectors) and at most 32768 (a block of
// 256 threads holds 16 vectors a thread at most); others are refused, naming the shape, before any CUDA call.
// warp_rows (one warp per row) runs where HIDDEN <= 2048 and says on stderr why it has no case elsewhere. The
// manifest's shapes include 1001x5000, off every block, warp and vector count.
// Reference: row statistics in fp64 on the host from the same bf16 inputs (x's and h's sums of squares, the amax of
// the fused op's y), the elementwise values in fp64 on the device; the tolerances are in check_outputs. The inputs'
// magnitude changes every 1000 elements of a row and from row to row (a factor 1/4 to 4), so a reduction that
// misses part of a row or takes another row's sum fails. Every output carries a canary past its last element.
// Variants, their rungs and what each adds: artifact.yaml; each rung's code is a marked region (CONTRIBUTING.md,
// convention 17).
#include "kwiki_bench.cuh"
#include "kwiki_gemv.cuh"  // set_canary, with_canary

#include <cuda_fp8.h>

#include <type_traits>

namespace {

using bf16 = __nv_bfloat16;
using bf162 = __nv_bfloat162;

constexpr int kThreads = 256;                           // every kernel's block
// Every kernel's launch bounds are (kThreads, 2): at most 128 registers a thread. With (kThreads) alone, nvcc 13 gave the
// 8-vector block kernels 48 registers and spilled two of them to local memory; the manifest forbids STL and LDL.
constexpr int kWarps = kThreads / 32;                   // warp_rows: rows per CTA
constexpr int kVec = 8;                                 // bf16 per 16-byte vector
constexpr int kMaxVpt = 16;                             // vectors a thread of a block rung holds at most
constexpr int kMaxHidden = kThreads * kMaxVpt * kVec;   // 32768
constexpr int kWarpVpt = 8;                             // vectors a lane of warp_rows holds at most
constexpr int kWarpMaxHidden = 32 * kWarpVpt * kVec;    // 2048
constexpr float kEps = 1e-6f;
constexpr float kFp8Max = 448.0f;                       // the largest finite e4m3
constexpr float kMinAmax = 1e-12f;                      // an all-zero row's amax, as the Triton artifact clamps it

// ===================================================================================================
// Reference: fp64 row statistics on the host, elementwise values in fp64 on the device
// ===================================================================================================

// v[i] = a * u with u uniform in [-1, 1) and a = 2^k, k in -2..2 drawn per row and per run of 1000 columns.
__global__ void fill_rows(bf16* v, int rows, int hidden, uint64_t seed) {
    const size_t n = size_t(rows) * hidden;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const uint64_t r = i / hidden, run = (i % hidden) / 1000;
        const int k = int(kwiki::hash64(seed ^ 0xa5a5, r * 1000003u + run) % 5) - 2;
        v[i] = __float2bfloat16_rn(ldexpf(kwiki::random_unit(seed, i, -1.0f, 1.0f), k));
    }
}

// Per row (host fp64): x's 1/rms, h's 1/rms (h = bf16(x + r) as the kernels round it) and the fused op's scale.
struct RowStats {
    double rstd_x, rstd_h, scale;
};

// y_ref = x * rstd_x * w (RMSNorm); h_ref = x + r rounded once to bf16; yh_ref = h * rstd_h * w (the fused op's y);
// q_ref = yh_ref / scale (unrounded); s_ref = scale.
__global__ void reference_rows(const bf16* x, const bf16* r, const bf16* w, const RowStats* st, double* y_ref,
                               bf16* h_ref, double* yh_ref, double* q_ref, double* s_ref, int rows, int hidden) {
    const size_t n = size_t(rows) * hidden;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const RowStats s = st[i / hidden];
        const double g = __bfloat162float(w[i % hidden]);
        const float h = __bfloat162float(__float2bfloat16_rn(__bfloat162float(x[i]) + __bfloat162float(r[i])));
        y_ref[i] = double(__bfloat162float(x[i])) * s.rstd_x * g;
        h_ref[i] = __double2bfloat16(double(__bfloat162float(x[i])) + double(__bfloat162float(r[i])));
        yh_ref[i] = double(h) * s.rstd_h * g;
        q_ref[i] = yh_ref[i] / s.scale;
        if (i % hidden == 0) s_ref[i / hidden] = s.scale;
    }
}

// One input set: x, r, w and the references of every op's outputs.
struct Inputs {
    kwiki::DeviceBuffer<bf16> x, r, w, h_ref;
    kwiki::DeviceBuffer<double> y_ref, yh_ref, q_ref, s_ref;
};

void fill_inputs(Inputs& s, int rows, int hidden, uint64_t seed) {
    const size_t n = size_t(rows) * hidden;
    const unsigned grid = unsigned(std::min<size_t>((n + 255) / 256, 65536));
    s.x = kwiki::DeviceBuffer<bf16>(n), s.r = kwiki::DeviceBuffer<bf16>(n), s.w = kwiki::DeviceBuffer<bf16>(size_t(hidden));
    s.h_ref = kwiki::DeviceBuffer<bf16>(n), s.y_ref = kwiki::DeviceBuffer<double>(n), s.yh_ref = kwiki::DeviceBuffer<double>(n);
    s.q_ref = kwiki::DeviceBuffer<double>(n);
    s.s_ref = kwiki::DeviceBuffer<double>(size_t(rows));
    fill_rows<<<grid, 256>>>(s.x.get(), rows, hidden, seed);
    KWIKI_CHECK_LAST();
    fill_rows<<<grid, 256>>>(s.r.get(), rows, hidden, kwiki::hash64(seed, 0x7e5));
    KWIKI_CHECK_LAST();
    kwiki::fill_random(s.w.get(), size_t(hidden), kwiki::hash64(seed, 0x3e1), 0.5f, 1.5f);  // never zero
    const std::vector<float> hx = kwiki::to_host_float(s.x.get(), n), hr = kwiki::to_host_float(s.r.get(), n);
    const std::vector<float> hw = kwiki::to_host_float(s.w.get(), size_t(hidden));
    std::vector<RowStats> st(static_cast<size_t>(rows));
    kwiki::parallel_for(size_t(rows), [&](size_t r0, size_t r1) {
        std::vector<double> h(static_cast<size_t>(hidden));
        for (size_t row = r0; row < r1; ++row) {
            double ssx = 0, ssh = 0, amax = 0;
            for (size_t c = 0; c < size_t(hidden); ++c) {
                const size_t i = row * hidden + c;
                h[c] = __bfloat162float(__float2bfloat16_rn(hx[i] + hr[i]));  // the kernels' h, rounded as they do
                ssx += double(hx[i]) * double(hx[i]), ssh += h[c] * h[c];
            }
            const double rstd_h = 1.0 / std::sqrt(ssh / hidden + double(kEps));
            for (size_t c = 0; c < size_t(hidden); ++c) amax = std::max(amax, std::fabs(h[c] * rstd_h * double(hw[c])));
            st[row] = {1.0 / std::sqrt(ssx / hidden + double(kEps)), rstd_h, std::max(amax, double(kMinAmax)) / kFp8Max};
        }
    });
    kwiki::DeviceBuffer<RowStats> dst(static_cast<size_t>(rows));
    KWIKI_CHECK(cudaMemcpy(dst.get(), st.data(), rows * sizeof(RowStats), cudaMemcpyHostToDevice));
    reference_rows<<<grid, 256>>>(s.x.get(), s.r.get(), s.w.get(), dst.get(), s.y_ref.get(), s.h_ref.get(),
                                  s.yh_ref.get(), s.q_ref.get(), s.s_ref.get(), rows, hidden);
    KWIKI_CHECK_LAST();
    KWIKI_CHECK(cudaDeviceSynchronize());
}

// q (e4m3 bytes) widened to float, for the comparison (an e4m3 NaN, such as the poison's 0xFF, stays NaN).
__global__ void widen_fp8(const uint8_t* q, float* out, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        out[i] = float(*reinterpret_cast<const __nv_fp8_e4m3*>(q + i));
}

// What the variants write at one shape, each with kwiki::kCanary bf16 slots of canary past its end (q and s are
// viewed as bf16 there: hidden % 8 == 0 makes q's byte count even).
struct Outputs {
    size_t n;
    int rows;
    kwiki::DeviceBuffer<bf16> y, h;
    kwiki::DeviceBuffer<uint8_t> q;
    kwiki::DeviceBuffer<float> s, qf;  // qf: q widened for the comparison

    Outputs(int rows_, int hidden)
        : n(size_t(rows_) * hidden), rows(rows_), y(n + kwiki::kCanary), h(n + kwiki::kCanary), q(n + 2 * kwiki::kCanary),
          s(size_t(rows_) + kwiki::kCanary), qf(n) {
        kwiki::set_canary(y.get(), n), kwiki::set_canary(h.get(), n);
        kwiki::set_canary(q_as_bf16(), n / 2), kwiki::set_canary(s_as_bf16(), 2 * size_t(rows));
    }
    bf16* q_as_bf16() const { return reinterpret_cast<bf16*>(q.get()); }
    bf16* s_as_bf16() const { return reinterpret_cast<bf16*>(s.get()); }
};

// The first failed result, else the last (the fused op's outputs are checked one by one, each with its canary).
kwiki::CheckResult first_failed(std::initializer_list<kwiki::CheckResult> results) {
    for (const kwiki::CheckResult& r : results)
        if (!r.passed) return r;
    return *(results.end() - 1);
}

// Tolerances, against the fp64 reference:
//   y (bf16): one bf16 unit, rtol 2^-7: the output is rounded once (at most half a unit); the fp32 math before it
//     (a thread sums up to 128 squares in order, then the block's tree, then rsqrtf) adds at most about 5e-6
//     relative; atol 1e-5 for values near zero.
//   h (bf16): rtol 2^-7: the fp32 sum x + r is exact unless the operands are more than 16 binades apart, where its
//     rounding and bf16's may together land one unit from the fp64 sum rounded once.
//   q (e4m3, 3 mantissa bits): rounding moves a normal value by at most half an ulp, 2^-4 of it, and a subnormal by
//     half the 2^-9 step; the fp32 math before the rounding (at most about 5e-6 relative, as for y) may push a value
//     across a rounding boundary but no further: rtol 2^-4 + 2^-16, atol 2^-10. The scale is checked on its own, to
//     rtol 1e-5 (the row's amax of the fp32 y against fp64, the same 5e-6 at most), so a wrong scale cannot hide
//     inside q's tolerance.
// A NaN or Inf never passes (kwiki::tally_one); the copy is compared with x bit for bit.
kwiki::CheckResult check_outputs(const Outputs& o, const Inputs& in, bool copy, bool add, bool fp8) {
    if (copy) return kwiki::with_canary(kwiki::compare_device(o.y.get(), in.x.get(), o.n, {0.0, 0.0}, "the input x (a copy)"), o.y.get(), o.n);
    if (!add)
        return kwiki::with_canary(kwiki::compare_device(o.y.get(), in.y_ref.get(), o.n, {1e-5, 0x1p-7},
                                                        "host fp64 rows' sums of squares, x * rstd * w in fp64"), o.y.get(), o.n);
    const kwiki::CheckResult h = kwiki::with_canary(
        kwiki::compare_device(o.h.get(), in.h_ref.get(), o.n, {0.0, 0x1p-7}, "h = x + r in fp64, rounded to bf16"), o.h.get(), o.n);
    if (!fp8)
        return first_failed({h, kwiki::with_canary(kwiki::compare_device(o.y.get(), in.yh_ref.get(), o.n, {1e-5, 0x1p-7},
                                                                         "rmsnorm of bf16 h in fp64"), o.y.get(), o.n)});
    widen_fp8<<<unsigned(std::min<size_t>((o.n + 255) / 256, 65536)), 256>>>(o.q.get(), o.qf.get(), o.n);
    KWIKI_CHECK_LAST();
    const kwiki::CheckResult s = kwiki::with_canary(
        kwiki::compare_device(o.s.get(), in.s_ref.get(), size_t(o.rows), {0.0, 1e-5}, "host fp64 amax / 448 per row"),
        o.s_as_bf16(), 2 * size_t(o.rows));
    const kwiki::CheckResult q = kwiki::with_canary(
        kwiki::compare_device(o.qf.get(), in.q_ref.get(), o.n, {0x1p-10, 0x1p-4 + 0x1p-16},
                              "h * rstd * w / scale in fp64, unrounded"), o.q_as_bf16(), o.n / 2);
    return first_failed({h, s, q});
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// A bf16 pair in a 32-bit word as two floats: a bf16 is the high half of a float.
__device__ __forceinline__ float lo_f(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

struct Sum {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// op over the 32 lanes of the warp, in every lane (5 butterfly shuffles).
template <class Op>
__device__ __forceinline__ float warp_reduce(float v, Op op) {
#pragma unroll
    for (int o = 16; o; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// op over the block, in every thread (0 is the identity of both ops: a sum, and a max of absolute values): warp
// shuffles, one partial per warp in shared memory, warp 0 reduces those, and a second barrier hands the result to
// every warp. A second call may reuse `red`: its first barrier comes after every thread has read red[kWarps].
template <class Op>
__device__ __forceinline__ float block_reduce(float v, float (&red)[kWarps + 1], Op op) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    v = warp_reduce(v, op);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        const float t = warp_reduce(lane < kWarps ? red[lane] : 0.0f, op);
        if (lane == 0) red[kWarps] = t;
    }
    __syncthreads();
    return red[kWarps];
}

// kwiki:rung block_twopass
// One CTA per row, a bf16 pair (4 bytes) a load: the row's sum of squares, then a second pass that reads the row
// again (from L2 if it is still there) with the weights and writes y.
__global__ void __launch_bounds__(kThreads, 2) block_twopass_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                                 bf16* __restrict__ y, int hidden) {
    __shared__ float red[kWarps + 1];
    const int P = hidden / 2;
    const bf162* xr = reinterpret_cast<const bf162*>(x + size_t(blockIdx.x) * hidden);
    const bf162* wr = reinterpret_cast<const bf162*>(w);
    bf162* yr = reinterpret_cast<bf162*>(y + size_t(blockIdx.x) * hidden);
    float acc = 0;
#pragma unroll 4
    for (int j = threadIdx.x; j < P; j += kThreads) {
        const float2 v = __bfloat1622float2(xr[j]);
        acc = fmaf(v.x, v.x, fmaf(v.y, v.y, acc));
    }
    const float rstd = rsqrtf(block_reduce(acc, red, Sum{}) / hidden + kEps);
#pragma unroll 4
    for (int j = threadIdx.x; j < P; j += kThreads) {
        const float2 v = __bfloat1622float2(xr[j]), g = __bfloat1622float2(wr[j]);
        yr[j] = __floats2bfloat162_rn(v.x * rstd * g.x, v.y * rstd * g.y);
    }
}
// /kwiki:rung block_twopass

// kwiki:rung block_regs
__device__ __forceinline__ uint32_t pack2(float a, float b) {
    const bf162 h = __floats2bfloat162_rn(a, b);  // .x is the low half
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ float sumsq8(uint4 v, float acc) {
    const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) acc = fmaf(lo_f(u[i]), lo_f(u[i]), fmaf(hi_f(u[i]), hi_f(u[i]), acc));
    return acc;
}

// 8 values of v times rstd times their weights g, rounded to bf16.
__device__ __forceinline__ uint32_t norm2(uint32_t v, uint32_t g, float s) { return pack2(lo_f(v) * s * lo_f(g), hi_f(v) * s * hi_f(g)); }
__device__ __forceinline__ uint4 norm8(uint4 v, uint4 g, float s) { return {norm2(v.x, g.x, s), norm2(v.y, g.y, s), norm2(v.z, g.z, s), norm2(v.w, g.w, s)}; }

// One CTA per row, the row in registers: vector j of the row (16 bytes) is thread j % 256's (j / 256)-th, loaded
// once, squared and summed, then scaled from the registers and written: one read and one write of every byte.
template <int VPT>
__global__ void __launch_bounds__(kThreads, 2) block_regs_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                              bf16* __restrict__ y, int hidden) {
    __shared__ float red[kWarps + 1];
    const int V = hidden / kVec;
    const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(blockIdx.x) * hidden);
    const uint4* wr = reinterpret_cast<const uint4*>(w);
    uint4* yr = reinterpret_cast<uint4*>(y + size_t(blockIdx.x) * hidden);
    uint4 v[VPT];
    float acc = 0;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        v[i] = j < V ? xr[j] : make_uint4(0, 0, 0, 0);
        acc = sumsq8(v[i], acc);
    }
    const float rstd = rsqrtf(block_reduce(acc, red, Sum{}) / hidden + kEps);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        if (j < V) yr[j] = norm8(v[i], wr[j], rstd);
    }
}
// /kwiki:rung block_regs

// kwiki:rung warp_rows
// One warp per row, 8 rows per CTA, the row in the warp's registers (vector j is lane j % 32's (j / 32)-th): the
// reduction is 5 shuffles, with no shared memory and no barrier, so a short row does not leave most of a block idle.
template <int VPT>
__global__ void __launch_bounds__(kThreads, 2) warp_rows_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                             bf16* __restrict__ y, int rows, int hidden) {
    const int lane = threadIdx.x & 31, row = blockIdx.x * kWarps + threadIdx.x / 32;
    if (row >= rows) return;  // the whole warp: nothing below waits for it
    const int V = hidden / kVec;
    const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(row) * hidden);
    const uint4* wr = reinterpret_cast<const uint4*>(w);
    uint4* yr = reinterpret_cast<uint4*>(y + size_t(row) * hidden);
    uint4 v[VPT];
    float acc = 0;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = lane + i * 32;
        v[i] = j < V ? xr[j] : make_uint4(0, 0, 0, 0);
        acc = sumsq8(v[i], acc);
    }
    const float rstd = rsqrtf(warp_reduce(acc, Sum{}) / hidden + kEps);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = lane + i * 32;
        if (j < V) yr[j] = norm8(v[i], wr[j], rstd);
    }
}
// /kwiki:rung warp_rows

// kwiki:rung add_rmsnorm
// h = x + r, 8 at a time: the sum in fp32, rounded once to bf16 (what the next layer reads as its residual).
__device__ __forceinline__ uint32_t add2(uint32_t a, uint32_t b) { return pack2(lo_f(a) + lo_f(b), hi_f(a) + hi_f(b)); }
__device__ __forceinline__ uint4 add8(uint4 a, uint4 b) { return {add2(a.x, b.x), add2(a.y, b.y), add2(a.z, b.z), add2(a.w, b.w)}; }

// The fused rungs' first half: h = bf16(x + r) for this thread's vectors of the row, written out and kept in `v`
// (zeros past the row), and the row's rstd from the rounded h (what a separate RMSNorm would read back).
template <int VPT>
__device__ __forceinline__ float add_rows(const uint4* xr, const uint4* rr, uint4* hr, uint4 (&v)[VPT], int V, int hidden,
                                          float (&red)[kWarps + 1]) {
    float acc = 0;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        v[i] = make_uint4(0, 0, 0, 0);
        if (j < V) hr[j] = v[i] = add8(xr[j], rr[j]);
        acc = sumsq8(v[i], acc);
    }
    return rsqrtf(block_reduce(acc, red, Sum{}) / hidden + kEps);
}

// block_regs on h = bf16(x + r): x and r read once, h written, the rounded h held in registers, reduced and
// normalized into y.
template <int VPT>
__global__ void __launch_bounds__(kThreads, 2) add_rmsnorm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ r,
                                                               const bf16* __restrict__ w, bf16* __restrict__ h,
                                                               bf16* __restrict__ y, int hidden) {
    __shared__ float red[kWarps + 1];
    const int V = hidden / kVec;
    const size_t base = size_t(blockIdx.x) * hidden;
    const uint4 *xr = reinterpret_cast<const uint4*>(x + base), *rr = reinterpret_cast<const uint4*>(r + base);
    const uint4* wr = reinterpret_cast<const uint4*>(w);
    uint4 *hr = reinterpret_cast<uint4*>(h + base), *yr = reinterpret_cast<uint4*>(y + base);
    uint4 v[VPT];
    const float rstd = add_rows<VPT>(xr, rr, hr, v, V, hidden, red);
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        if (j < V) yr[j] = norm8(v[i], wr[j], rstd);
    }
}
// /kwiki:rung add_rmsnorm

// kwiki:rung add_rmsnorm_fp8
// The largest |v * s * g| of 8 values, in fp32 as the quantization computes them.
__device__ __forceinline__ float amax2(uint32_t v, uint32_t g, float s, float m) {
    return fmaxf(m, fmaxf(fabsf(lo_f(v) * s * lo_f(g)), fabsf(hi_f(v) * s * hi_f(g))));
}
__device__ __forceinline__ float amax8(uint4 v, uint4 g, float s, float m) {
    return amax2(v.x, g.x, s, amax2(v.y, g.y, s, amax2(v.z, g.z, s, amax2(v.w, g.w, s, m))));
}

// Two values v * s * g * inv as e4m3 (cvt.rn.satfinite.e4m3x2.f32: the first in the low byte), in 16 bits.
__device__ __forceinline__ uint32_t fp8x2(uint32_t v, uint32_t g, float s, float inv) {
    const float2 f = make_float2(lo_f(v) * s * lo_f(g) * inv, hi_f(v) * s * hi_f(g) * inv);
    return uint32_t(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3));
}
__device__ __forceinline__ uint2 fp8x8(uint4 v, uint4 g, float s, float inv) {
    return {fp8x2(v.x, g.x, s, inv) | (fp8x2(v.y, g.y, s, inv) << 16), fp8x2(v.z, g.z, s, inv) | (fp8x2(v.w, g.w, s, inv) << 16)};
}

// add_rmsnorm whose y is never written: a second block reduction takes the row's amax |y| from the registers, and y
// is quantized per token, q = y / (amax / 448) in e4m3 (8 bytes a vector), with the row's scale beside it.
template <int VPT>
__global__ void __launch_bounds__(kThreads, 2) add_rmsnorm_fp8_kernel(const bf16* __restrict__ x, const bf16* __restrict__ r,
                                                                   const bf16* __restrict__ w, bf16* __restrict__ h,
                                                                   uint8_t* __restrict__ q, float* __restrict__ scale,
                                                                   int hidden) {
    __shared__ float red[kWarps + 1];
    const int V = hidden / kVec;
    const size_t base = size_t(blockIdx.x) * hidden;
    const uint4 *xr = reinterpret_cast<const uint4*>(x + base), *rr = reinterpret_cast<const uint4*>(r + base);
    const uint4* wr = reinterpret_cast<const uint4*>(w);
    uint4* hr = reinterpret_cast<uint4*>(h + base);
    uint2* qr = reinterpret_cast<uint2*>(q + base);
    uint4 v[VPT];
    const float rstd = add_rows<VPT>(xr, rr, hr, v, V, hidden, red);
    float m = 0;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        if (j < V) m = amax8(v[i], wr[j], rstd, m);  // the weights again below, from L1 or L2: 2 * hidden bytes
    }
    const float s = fmaxf(block_reduce(m, red, Max{}), kMinAmax) / kFp8Max, inv = 1.0f / s;
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        if (j < V) qr[j] = fp8x8(v[i], wr[j], rstd, inv);
    }
}
// /kwiki:rung add_rmsnorm_fp8

// ===================================================================================================
// Launchers
// ===================================================================================================

// What a launch reads and writes: one input set's tensors and the shape's outputs.
struct Problem {
    int rows, hidden;
    const bf16 *x, *r, *w;
    bf16 *h, *y;
    uint8_t* q;
    float* s;
};

// The shapes every variant takes: hidden a multiple of 8 (16-byte rows) and at most what the block rungs hold in
// registers. A refused shape is named on stderr before any CUDA call; Args then exits 2.
bool valid_shape(const std::vector<int>& d) {
    const char* why = d[1] % kVec ? "is not a multiple of 8 (rows are read and written in 16-byte vectors)"
                      : d[1] > kMaxHidden ? "is above 32768 (a block of 256 threads holds 16 vectors of 8 a thread)" : nullptr;
    if (why) std::fprintf(stderr, "rmsnorm: --shapes: %dx%d: hidden %d %s\n", d[0], d[1], d[1], why);
    return why == nullptr;
}

// fn(std::integral_constant<int, V>) for the power of two V == vpt, V at most Max (the kernels' template argument).
template <int Max, int V = 1, class F>
void with_vpt(int vpt, F fn) {
    if (vpt == V) return fn(std::integral_constant<int, V>{});
    if constexpr (V < Max) with_vpt<Max, 2 * V>(vpt, fn);
    else kwiki::fail_env(__FILE__, __LINE__, "with_vpt", "more vectors per thread than the kernel holds");
}

// The smallest power of two of 16-byte vectors per thread that covers a row with `threads` threads.
int vectors_per_thread(int hidden, int threads) {
    int v = 1;
    while (v * threads * kVec < hidden) v *= 2;
    return v;
}

// kwiki:rung block_twopass
void launch_block_twopass(const Problem& p, int, cudaStream_t s) {
    block_twopass_kernel<<<p.rows, kThreads, 0, s>>>(p.x, p.w, p.y, p.hidden);
    KWIKI_CHECK_LAST();
}
// /kwiki:rung block_twopass

// kwiki:rung block_regs
void launch_block_regs(const Problem& p, int vpt, cudaStream_t s) {
    with_vpt<kMaxVpt>(vpt, [&](auto V) { block_regs_kernel<decltype(V)::value><<<p.rows, kThreads, 0, s>>>(p.x, p.w, p.y, p.hidden); });
    KWIKI_CHECK_LAST();
}
// /kwiki:rung block_regs

// kwiki:rung warp_rows
void launch_warp_rows(const Problem& p, int vpt, cudaStream_t s) {
    const unsigned grid = unsigned((p.rows + kWarps - 1) / kWarps);
    with_vpt<kWarpVpt>(vpt, [&](auto V) { warp_rows_kernel<decltype(V)::value><<<grid, kThreads, 0, s>>>(p.x, p.w, p.y, p.rows, p.hidden); });
    KWIKI_CHECK_LAST();
}
// /kwiki:rung warp_rows

// kwiki:rung add_rmsnorm
void launch_add_rmsnorm(const Problem& p, int vpt, cudaStream_t s) {
    with_vpt<kMaxVpt>(vpt, [&](auto V) {
        add_rmsnorm_kernel<decltype(V)::value><<<p.rows, kThreads, 0, s>>>(p.x, p.r, p.w, p.h, p.y, p.hidden);
    });
    KWIKI_CHECK_LAST();
}
// /kwiki:rung add_rmsnorm

// kwiki:rung add_rmsnorm_fp8
void launch_add_rmsnorm_fp8(const Problem& p, int vpt, cudaStream_t s) {
    with_vpt<kMaxVpt>(vpt, [&](auto V) {
        add_rmsnorm_fp8_kernel<decltype(V)::value><<<p.rows, kThreads, 0, s>>>(p.x, p.r, p.w, p.h, p.q, p.s, p.hidden);
    });
    KWIKI_CHECK_LAST();
}
// /kwiki:rung add_rmsnorm_fp8

void launch_copy(const Problem& p, int, cudaStream_t s) {
    KWIKI_CHECK(cudaMemcpyAsync(p.y, p.x, size_t(p.rows) * p.hidden * sizeof(bf16), cudaMemcpyDeviceToDevice, s));
}

enum class Kind { Copy, TwoPass, Regs, WarpRows, Add, AddFp8 };

// The bytes the op must move (the header comment says which), declared by every record of the kind.
double bytes_of(Kind k, int rows, int hidden) {
    const double n = double(rows) * hidden, weights = 2.0 * hidden;
    if (k == Kind::Copy) return 4 * n;
    if (k == Kind::Add) return 8 * n + weights;
    if (k == Kind::AddFp8) return 7 * n + 4.0 * rows + weights;
    return 4 * n + weights;
}

// A variant's vectors per thread at `hidden` (0: none, the copy and the two-pass kernel), and what its record adds
// (registers, occupancy, vectors per thread) from the kernel it launches.
int plan_for(Kind k, int hidden, kwiki::Fields& extra) {
    const int vpt = k == Kind::WarpRows ? vectors_per_thread(hidden, 32) : vectors_per_thread(hidden, kThreads);
    const void* fn = nullptr;
    if (k == Kind::TwoPass) fn = reinterpret_cast<const void*>(block_twopass_kernel);
    if (k == Kind::Regs) with_vpt<kMaxVpt>(vpt, [&](auto V) { fn = reinterpret_cast<const void*>(block_regs_kernel<decltype(V)::value>); });
    if (k == Kind::WarpRows) with_vpt<kWarpVpt>(vpt, [&](auto V) { fn = reinterpret_cast<const void*>(warp_rows_kernel<decltype(V)::value>); });
    if (k == Kind::Add) with_vpt<kMaxVpt>(vpt, [&](auto V) { fn = reinterpret_cast<const void*>(add_rmsnorm_kernel<decltype(V)::value>); });
    if (k == Kind::AddFp8) with_vpt<kMaxVpt>(vpt, [&](auto V) { fn = reinterpret_cast<const void*>(add_rmsnorm_fp8_kernel<decltype(V)::value>); });
    if (fn) kwiki::add_occupancy(extra, fn, kThreads);
    if (k == Kind::Copy || k == Kind::TwoPass) return 0;
    extra.emplace_back("vectors_per_thread", vpt);
    return vpt;
}

// warp_rows holds a row in one warp's registers: at a longer row it has no case. The copy is the roof only where
// its bytes outgrow what stays in L2 between launches (measured: at 1001x5000, 20 MB, the fused rungs ran at up to
// 1.4x its speed): below 8192x1024 elements it has no case. Both say why on stderr.
constexpr size_t kRoofMinElements = size_t(8192) * 1024;
bool runs_at(Kind k, int rows, int hidden) {
    if (k == Kind::Copy && size_t(rows) * hidden < kRoofMinElements) {
        std::fprintf(stderr, "rmsnorm: copy does not run at %dx%d: under %zu elements it is no roof (L2-resident)\n",
                     rows, hidden, kRoofMinElements);
        return false;
    }
    if (k != Kind::WarpRows || hidden <= kWarpMaxHidden) return true;
    std::fprintf(stderr, "rmsnorm: warp_rows does not run at %dx%d: one warp holds at most %d elements of a row\n", rows,
                 hidden, kWarpMaxHidden);
    return false;
}

// One input set's tensors and the shape's outputs, as a launch takes them.
Problem problem(const Inputs& in, const Outputs& o, int rows, int hidden) {
    return {rows, hidden, in.x.get(), in.r.get(), in.w.get(), o.h.get(), o.y.get(), o.q.get(), o.s.get()};
}

// Every output a variant of this kind writes, poisoned (0xFF: NaN in bf16, fp32 and e4m3).
void poison_outputs(const Outputs& o, Kind k, cudaStream_t s) {
    if (k == Kind::Add || k == Kind::AddFp8) kwiki::poison(o.h.get(), o.n * sizeof(bf16), s);
    if (k == Kind::AddFp8) kwiki::poison(o.q.get(), o.n, s), kwiki::poison(o.s.get(), o.rows * sizeof(float), s);
    else kwiki::poison(o.y.get(), o.n * sizeof(bf16), s);
}

// ===================================================================================================
// The table of variants (names only: artifact.yaml holds their rungs and what each adds, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Kind kind;
    void (*launch)(const Problem&, int, cudaStream_t);
};

const Variant kVariants[] = {
    {{"block_twopass"}, Kind::TwoPass, launch_block_twopass},
    {{"block_regs"}, Kind::Regs, launch_block_regs},
    {{"warp_rows"}, Kind::WarpRows, launch_warp_rows},
    {{"add_rmsnorm"}, Kind::Add, launch_add_rmsnorm},
    {{"add_rmsnorm_fp8"}, Kind::AddFp8, launch_add_rmsnorm_fp8},
    {{"copy"}, Kind::Copy, launch_copy},  // not a rung: the roof, x copied into y
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);  // --list-variants exits in here, before any CUDA call
    const auto shapes = m.args.get_shapes<std::pair<int, int>, 2>(  // the manifest's; --list-shapes exits
        "shapes", "", "ROWSxHIDDEN with HIDDEN a multiple of 8 and at most 32768", valid_shape);
    kwiki::Runner& runner = m.start("rmsnorm");
    for (const auto& shape : shapes) {
        const int rows = shape.first, hidden = shape.second;
        const size_t n = size_t(rows) * hidden;
        const Outputs out(rows, hidden);
        kwiki::InputSets<Inputs> in(m.sets, m.seed + n + uint64_t(hidden), [&](Inputs& s, uint64_t seed) { fill_inputs(s, rows, hidden, seed); });
        const auto make = [&](const Variant& v) {
            kwiki::Case c;
            c.params = {{"shape", std::to_string(rows) + "x" + std::to_string(hidden)}, {"rows", rows}, {"hidden", hidden}, {"dtype", "bf16"}};
            c.bytes = bytes_of(v.kind, rows, hidden);
            const int vpt = plan_for(v.kind, hidden, c.extra);
            c.launch = [&, v, vpt](cudaStream_t s) { v.launch(problem(in.current(), out, rows, hidden), vpt, s); };
            const bool copy = v.kind == Kind::Copy, add = v.kind == Kind::Add || v.kind == Kind::AddFp8, fp8 = v.kind == Kind::AddFp8;
            in.bind(c, [&out, v](cudaStream_t s) { poison_outputs(out, v.kind, s); },
                    [&out, copy, add, fp8](const Inputs& s) { return check_outputs(out, s, copy, add, fp8); });
            return c;
        };
        kwiki::run_ladder(runner, m.args, kVariants, make, [&](const Variant& v) { return runs_at(v.kind, rows, hidden); });
    }
    return kwiki::exit_code();
}
