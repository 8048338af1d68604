// fp8_quant.cu: quantizing bf16 activations to fp8 e4m3 on Hopper at four scale granularities - one scale for the
// tensor, one per row (token), one per 1 x 128 group of a row, one per 128 x 128 block - each scale amax / 448 of its
// group, against a device copy of the same rows: what each granularity costs in time, and what it costs in error on
// activations whose magnitude varies by token and by channel. Page technique-fp8-quantization.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o fp8_quant fp8_quant.cu
// Run: ./fp8_quant --shapes=ROWSxHIDDEN,... [--variants a,b]   (the manifest's shapes)
//
// Outputs: q, the e4m3 codes of x [rows, hidden] (row-major, one byte an element), and the fp32 scales: one
// (per_tensor); [rows] (per_token); [ceil(hidden / 128), rows] (per_group: group-major, the layout of an fp8 GEMM's
// activation scales, fp8_gemm_sm90a's sa); [ceil(rows / 128), ceil(hidden / 128)] (per_block: a weight's layout,
// fp8_gemm_sm90a's sb). Shapes: HIDDEN a multiple of 8 (16-byte vectors) and at most 32768 (per_token holds a row in
// its block's registers); a last group or block may be partial (its amax over the elements it has). Others are
// refused, naming the shape, before any CUDA call.
//
// Bytes per record are what the op must move: x read once (2 bytes an element), q written (1) and the scales (4
// each); per_tensor reads x twice (the amax before any code), so its bandwidth counts 3 of its 5 bytes an element.
// `copy` (cudaMemcpyAsync of x into a bf16 buffer, 4 bytes an element) is the copy roof of the same run, from 8M
// elements up (below, x stays in L2 between launches and the copy is no roof).
//
// Inputs (fresh, protocol 3: refilled from a new seed before every timed sample, the reference recomputed on the GPU):
// x = u * 2^t * o, u uniform in [-1, 1), t an integer in [-3, 3] drawn per row (tokens of different magnitude), o = 64
// for one channel in 64 (outlier channels), else 1; rounded to bf16.
// Reference: every group's amax by a naive loop (one thread a group or row), the scales from them, every code by one
// thread an element, on the GPU; the first check of each input set also recomputes 4096 sampled codes and their
// scales on the host from a host copy of x (amax by a host loop, the conversion by cuda_fp8.h's host code). The
// kernels compute the same fp32 expressions (kwiki_fp8.cuh), so codes and scales must match bit for bit: the check
// is exact, and a NaN (the poison: 0xFF is NaN in e4m3 and fp32) never passes.
// Error figures (extras of every record but the copy's, from the checked call's own output on the first input set):
//   q_rel_rms      ||dequant(q) - x|| / ||x|| over the tensor
//   q_row_rel_rms  the mean over rows of that ratio per row (each token weighted alike)
//   q_flushed      the share of the nonzero inputs whose code is zero (below half the smallest subnormal)
// Variants, their rungs and what each adds: artifact.yaml; each rung's code is a marked region (CONTRIBUTING.md,
// convention 17).
#include "kwiki_bench.cuh"
#include "kwiki_fp8.cuh"
#include "kwiki_gemv.cuh"  // set_canary, with_canary

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace {

using bf16 = __nv_bfloat16;
namespace fp8 = kwiki::fp8;

constexpr int kThreads = 256;                         // every kernel's block
// per_token's and per_block's launch bounds are (kThreads, 2): at most 128 registers a thread. With (kThreads) alone,
// nvcc 13 gave their 8-vector kernels too few and spilled 4 bytes; the manifest forbids STL and LDL.
constexpr int kWarps = kThreads / 32;
constexpr int kVec = 8;                               // bf16 per 16-byte vector
constexpr int kGroup = 128;                           // 1 x 128 groups, 128 x 128 blocks
constexpr int kGroupLanes = kGroup / kVec;            // 16 threads hold a group, one vector each
constexpr int kGroupsPerStep = 4;                     // groups a thread's 16 lanes take per step (loads in flight)
constexpr int kMaxVpt = 16;                           // vectors a per_token thread holds at most
constexpr int kMaxHidden = kThreads * kMaxVpt * kVec;  // 32768
constexpr int kBlockVpt = kGroup * kGroupLanes / kThreads;  // per_block: 8 vectors a thread
constexpr size_t kRoofMinElements = size_t(8192) * 1024;
constexpr int kSamples = 4096;                        // host-checked codes of the reference, per granularity

enum class Gran { Tensor = 0, Token = 1, Group = 2, Block = 3, Copy = 4 };
constexpr int kGrans = 4;

// The shape's layout of the scales: how many there are, and which one element (r, c) uses.
struct Layout {
    int rows, hidden;
    int groups() const { return (hidden + kGroup - 1) / kGroup; }       // 1 x 128 groups (and blocks) along a row
    int row_blocks() const { return (rows + kGroup - 1) / kGroup; }     // 128 x 128 blocks along the columns
    size_t n() const { return size_t(rows) * hidden; }
    __host__ __device__ static size_t scales(Gran g, int rows, int hidden) {
        const size_t gr = size_t((hidden + kGroup - 1) / kGroup);
        return g == Gran::Tensor ? 1 : g == Gran::Token ? size_t(rows) : g == Gran::Group ? gr * rows
                                                                        : size_t((rows + kGroup - 1) / kGroup) * gr;
    }
    __host__ __device__ static size_t scale_index(Gran g, int r, int c, int rows, int hidden) {
        const int gr = (hidden + kGroup - 1) / kGroup;
        return g == Gran::Tensor ? 0 : g == Gran::Token ? size_t(r) : g == Gran::Group ? size_t(c / kGroup) * rows + r
                                                                    : size_t(r / kGroup) * gr + c / kGroup;
    }
};

// ===================================================================================================
// Reference (on the GPU): the inputs, every granularity's codes and scales, the exact check, the error figures
// ===================================================================================================

__host__ __device__ inline float input_value(uint64_t seed, int r, int c, int hidden) {
    const size_t i = size_t(r) * hidden + c;
    const int t = int(kwiki::hash64(seed ^ 0x70c3, uint64_t(r)) % 7) - 3;                // the token's magnitude
    const float o = kwiki::hash64(seed ^ 0xc4a7, uint64_t(c)) % 64 == 0 ? 64.0f : 1.0f;  // an outlier channel
    return kwiki::random_unit(seed, i, -1.0f, 1.0f) * ldexpf(1.0f, t) * o;
}

__global__ void fill_x(bf16* x, int rows, int hidden, uint64_t seed) {
    const size_t n = size_t(rows) * hidden;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        x[i] = __float2bfloat16_rn(input_value(seed, int(i / hidden), int(i % hidden), hidden));
}

// Each 1 x 128 group's amax, one thread a group: a plain loop over its elements.
__global__ void ref_group_amax(const bf16* x, int rows, int hidden, float* amax) {
    const int groups = (hidden + kGroup - 1) / kGroup;
    const size_t g = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (g >= size_t(rows) * groups) return;
    const int r = int(g / groups), c0 = int(g % groups) * kGroup, c1 = min(c0 + kGroup, hidden);
    float m = 0;
    for (int c = c0; c < c1; ++c) m = fmaxf(m, fabsf(__bfloat162float(x[size_t(r) * hidden + c])));
    amax[g] = m;
}

// The scales of a row, group or block granularity from the group amaxes (each a maximum over groups): one thread a
// scale (the tensor's: ref_tensor_scale).
__global__ void ref_scales(const float* group_amax, int rows, int hidden, Gran gran, float* scale) {
    const int groups = (hidden + kGroup - 1) / kGroup;
    const size_t k = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    if (k >= Layout::scales(gran, rows, hidden)) return;
    float m = 0;
    if (gran == Gran::Tensor) {
        return;  // ref_tensor_scale's
    } else if (gran == Gran::Token) {
        for (int g = 0; g < groups; ++g) m = fmaxf(m, group_amax[k * groups + g]);
    } else if (gran == Gran::Group) {
        m = group_amax[(k % rows) * groups + k / rows];  // scale [group][row]
    } else {
        const int br = int(k / groups), bc = int(k % groups);
        for (int r = br * kGroup; r < min(rows, (br + 1) * kGroup); ++r) m = fmaxf(m, group_amax[size_t(r) * groups + bc]);
    }
    scale[k] = fp8::scale_of(m);
}

// The tensor's scale from every group amax: one block, a strided maximum a thread, then a tree in shared memory.
__global__ void ref_tensor_scale(const float* group_amax, size_t groups, float* scale) {
    __shared__ float red[1024];
    float m = 0;
    for (size_t g = threadIdx.x; g < groups; g += blockDim.x) m = fmaxf(m, group_amax[g]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int o = blockDim.x / 2; o; o >>= 1) {
        if (int(threadIdx.x) < o) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + o]);
        __syncthreads();
    }
    if (threadIdx.x == 0) scale[0] = fp8::scale_of(red[0]);
}

// Every code of a granularity, one thread an element: the scale its layout names, the same expressions as the kernels.
__global__ void ref_codes(const bf16* x, int rows, int hidden, Gran gran, const float* scale, uint8_t* q) {
    const size_t n = size_t(rows) * hidden;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const float s = scale[Layout::scale_index(gran, int(i / hidden), int(i % hidden), rows, hidden)];
        q[i] = fp8::e4m3(__bfloat162float(x[i]), 1.0f / s);
    }
}

// out[0] mismatched codes, out[1] the first mismatch (n if none).
__global__ void count_mismatches(const uint8_t* got, const uint8_t* want, size_t n, unsigned long long* out) {
    unsigned long long bad = 0, first = n;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        if (got[i] != want[i]) ++bad, first = min(first, (unsigned long long)i);
    if (bad) atomicAdd(&out[0], bad), atomicMin(&out[1], first);
}

// The error of the codes against x, one block a row, in fp64: out[0] sum of squared errors, out[1] sum of x^2, out[2]
// the sum over rows of each row's relative RMS error, out[3] nonzero inputs coded 0, out[4] nonzero inputs.
__global__ void error_stats(const bf16* x, const uint8_t* q, const float* scale, int rows, int hidden, Gran gran, double* out) {
    __shared__ double red[3][kWarps];
    const int r = blockIdx.x;
    double e2 = 0, x2 = 0, flushed = 0, nonzero = 0;
    for (int c = threadIdx.x; c < hidden; c += kThreads) {
        const size_t i = size_t(r) * hidden + c;
        const double v = __bfloat162float(x[i]);
        const double d = double(fp8::e4m3_value(q[i])) * scale[Layout::scale_index(gran, r, c, rows, hidden)];
        e2 += (d - v) * (d - v), x2 += v * v;
        if (v != 0) nonzero += 1, flushed += (q[i] & 0x7f) == 0;
    }
    for (int o = 16; o; o >>= 1) {
        e2 += __shfl_xor_sync(0xffffffffu, e2, o), x2 += __shfl_xor_sync(0xffffffffu, x2, o);
        flushed += __shfl_xor_sync(0xffffffffu, flushed, o), nonzero += __shfl_xor_sync(0xffffffffu, nonzero, o);
    }
    const int warp = threadIdx.x / 32;
    if ((threadIdx.x & 31) == 0) {
        red[0][warp] = e2, red[1][warp] = x2, red[2][warp] = flushed;
        atomicAdd(&out[4], nonzero);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double a = 0, b = 0, f = 0;
        for (int w = 0; w < kWarps; ++w) a += red[0][w], b += red[1][w], f += red[2][w];
        atomicAdd(&out[0], a), atomicAdd(&out[1], b), atomicAdd(&out[3], f);
        if (b > 0) atomicAdd(&out[2], sqrt(a / b));
    }
}

// One shape's buffers: x, the outputs the variants write (shared: every launch is poisoned first), and the reference
// codes and scales of every granularity, refilled together.
struct Quant {
    Layout lay;
    uint64_t seed = 0;
    kwiki::DeviceBuffer<bf16> x, y;        // y: the copy's output
    kwiki::DeviceBuffer<uint8_t> q;        // + canary
    kwiki::DeviceBuffer<float> s[kGrans];  // each granularity's scales, + canary
    kwiki::DeviceBuffer<float> partial;    // per_tensor's block maxima
    kwiki::DeviceBuffer<float> group_amax;
    kwiki::DeviceBuffer<uint8_t> q_ref[kGrans];
    kwiki::DeviceBuffer<float> s_ref[kGrans];
    kwiki::DeviceBuffer<unsigned long long> tally;
    kwiki::DeviceBuffer<double> stats;
    uint64_t host_checked = ~0ull;         // the seed whose reference the host last checked
    kwiki::CheckResult host_result;

    Quant(Layout l, uint64_t s0) : lay(l), x(l.n()), y(l.n() + kwiki::kCanary), q(l.n() + 2 * kwiki::kCanary),
                                   partial(size_t(kwiki::sm_count()) * 8), group_amax(size_t(l.rows) * l.groups()),
                                   tally(2), stats(5) {
        for (int g = 0; g < kGrans; ++g) {
            const size_t k = Layout::scales(Gran(g), l.rows, l.hidden);
            q_ref[g] = kwiki::DeviceBuffer<uint8_t>(l.n());
            s_ref[g] = kwiki::DeviceBuffer<float>(k);
            s[g] = kwiki::DeviceBuffer<float>(k + kwiki::kCanary);
            kwiki::set_canary(s_as_bf16(Gran(g)), 2 * k);
        }
        kwiki::set_canary(y.get(), l.n()), kwiki::set_canary(q_as_bf16(), l.n() / 2);
        refill(s0, 0);
        KWIKI_CHECK(cudaDeviceSynchronize());
    }
    bf16* q_as_bf16() const { return reinterpret_cast<bf16*>(q.get()); }
    bf16* s_as_bf16(Gran g) const { return reinterpret_cast<bf16*>(s[int(g)].get()); }
    float* scales(Gran g) const { return s[int(g)].get(); }

    // New inputs from `sd` and their reference, on the GPU (stream `st`).
    void refill(uint64_t sd, cudaStream_t st) {
        seed = sd;
        const size_t n = lay.n();
        const unsigned grid = unsigned(std::min<size_t>((n + 255) / 256, 65536));
        fill_x<<<grid, 256, 0, st>>>(x.get(), lay.rows, lay.hidden, seed);
        KWIKI_CHECK_LAST();
        const size_t groups = size_t(lay.rows) * lay.groups();
        ref_group_amax<<<unsigned((groups + 255) / 256), 256, 0, st>>>(x.get(), lay.rows, lay.hidden, group_amax.get());
        KWIKI_CHECK_LAST();
        for (int g = 0; g < kGrans; ++g) {
            const size_t k = Layout::scales(Gran(g), lay.rows, lay.hidden);
            if (Gran(g) == Gran::Tensor)
                ref_tensor_scale<<<1, 1024, 0, st>>>(group_amax.get(), groups, s_ref[g].get());
            else
                ref_scales<<<unsigned((k + 255) / 256), 256, 0, st>>>(group_amax.get(), lay.rows, lay.hidden, Gran(g), s_ref[g].get());
            KWIKI_CHECK_LAST();
            ref_codes<<<grid, 256, 0, st>>>(x.get(), lay.rows, lay.hidden, Gran(g), s_ref[g].get(), q_ref[g].get());
            KWIKI_CHECK_LAST();
        }
    }
};

// The reference itself, on the host, for the current seed (once a seed): kSamples codes of each granularity
// recomputed from a host copy of x, their scales from host amax loops.
kwiki::CheckResult check_reference_on_host(Quant& qt) {
    if (qt.host_checked == qt.seed) return qt.host_result;
    const Layout& l = qt.lay;
    const std::vector<float> hx = kwiki::to_host_float(qt.x.get(), l.n());
    auto amax = [&](int r0, int r1, int c0, int c1) {
        float m = 0;
        for (int r = r0; r < r1; ++r)
            for (int c = c0; c < c1; ++c) m = std::max(m, std::fabs(hx[size_t(r) * l.hidden + c]));
        return m;
    };
    float tensor_amax = 0;
    for (float v : hx) tensor_amax = std::max(tensor_amax, std::fabs(v));
    kwiki::CheckResult res;
    res.passed = true;
    res.reference = "host amax loops and cuda_fp8.h's host conversion on sampled elements";
    for (int g = 0; g < kGrans && res.passed; ++g) {
        std::vector<uint8_t> codes(l.n());
        KWIKI_CHECK(cudaMemcpy(codes.data(), qt.q_ref[g].get(), l.n(), cudaMemcpyDeviceToHost));
        std::vector<float> scales(Layout::scales(Gran(g), l.rows, l.hidden));
        KWIKI_CHECK(cudaMemcpy(scales.data(), qt.s_ref[g].get(), scales.size() * sizeof(float), cudaMemcpyDeviceToHost));
        for (int k = 0; k < kSamples; ++k) {
            const size_t i = kwiki::hash64(qt.seed ^ 0x5a3f, uint64_t(g) * kSamples + k) % l.n();
            const int r = int(i / l.hidden), c = int(i % l.hidden);
            const int c0 = c / kGroup * kGroup, r0 = r / kGroup * kGroup;
            const float m = g == 0 ? tensor_amax : g == 1 ? amax(r, r + 1, 0, l.hidden)
                          : g == 2 ? amax(r, r + 1, c0, std::min(c0 + kGroup, l.hidden))
                                   : amax(r0, std::min(r0 + kGroup, l.rows), c0, std::min(c0 + kGroup, l.hidden));
            const float sc = fp8::scale_of(m);
            const uint8_t want = fp8::e4m3(hx[i], 1.0f / sc);
            const float have = scales[Layout::scale_index(Gran(g), r, c, l.rows, l.hidden)];
            if (have != sc || codes[i] != want) {
                res.passed = false, res.bad = 1;
                char buf[200];
                std::snprintf(buf, sizeof buf, "the GPU reference (granularity %d) at element %zu: scale %.9g code 0x%02x, the host's "
                              "%.9g 0x%02x", g, i, double(have), codes[i], double(sc), want);
                res.detail = buf;
                break;
            }
        }
    }
    if (res.passed) res.detail = std::to_string(kSamples) + " sampled codes and scales a granularity agree with the host";
    qt.host_checked = qt.seed, qt.host_result = res;
    return res;
}

// The last launch's codes and scales of granularity g against the reference, exactly, with the canaries past them.
kwiki::CheckResult check_codes(Quant& qt, Gran g) {
    const Layout& l = qt.lay;
    const size_t n = l.n(), k = Layout::scales(g, l.rows, l.hidden);
    const unsigned long long init[2] = {0, n};
    KWIKI_CHECK(cudaMemcpy(qt.tally.get(), init, sizeof init, cudaMemcpyHostToDevice));
    count_mismatches<<<unsigned(kwiki::sm_count() * 8), 256>>>(qt.q.get(), qt.q_ref[int(g)].get(), n, qt.tally.get());
    KWIKI_CHECK_LAST();
    unsigned long long t[2];
    KWIKI_CHECK(cudaMemcpy(t, qt.tally.get(), sizeof t, cudaMemcpyDeviceToHost));
    kwiki::CheckResult r;
    r.reference = "the GPU reference: naive amax loops, one code a thread (exact)";
    r.bad = size_t(t[0]);
    r.passed = t[0] == 0;
    r.detail = t[0] ? std::to_string(t[0]) + " of " + std::to_string(n) + " codes differ; first at " + std::to_string(t[1])
                    : std::to_string(n) + " codes equal";
    r = kwiki::with_canary(r, qt.q_as_bf16(), n / 2);
    if (!r.passed) return r;
    kwiki::CheckResult sc = kwiki::compare_device(qt.scales(g), qt.s_ref[int(g)].get(), k, {0.0, 0.0}, r.reference);
    sc = kwiki::with_canary(sc, qt.s_as_bf16(g), 2 * k);
    if (!sc.passed) return sc;
    r.detail += "; " + sc.detail + " (scales)";
    return r;
}

// The error figures of granularity g's last launch (q and s as the kernel wrote them).
struct Errors {
    double rel_rms = NAN, row_rel_rms = NAN, flushed = NAN;
};

Errors error_figures(Quant& qt, Gran g) {
    const double zero[5] = {0, 0, 0, 0, 0};
    KWIKI_CHECK(cudaMemcpy(qt.stats.get(), zero, sizeof zero, cudaMemcpyHostToDevice));
    error_stats<<<unsigned(qt.lay.rows), kThreads>>>(qt.x.get(), qt.q.get(), qt.scales(g), qt.lay.rows, qt.lay.hidden, g,
                                                     qt.stats.get());
    KWIKI_CHECK_LAST();
    double o[5];
    KWIKI_CHECK(cudaMemcpy(o, qt.stats.get(), sizeof o, cudaMemcpyDeviceToHost));
    return {std::sqrt(o[0] / o[1]), o[2] / qt.lay.rows, o[4] > 0 ? o[3] / o[4] : 0.0};
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// The maximum over the block, in every thread (warp shuffles, one partial a warp in shared memory, warp 0 reduces
// them, a second barrier hands the result to every warp).
__device__ __forceinline__ float block_max(float v, float (&red)[kWarps + 1]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x / 32;
#pragma unroll
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) red[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float t = lane < kWarps ? red[lane] : 0.0f;
#pragma unroll
        for (int o = 16; o; o >>= 1) t = fmaxf(t, __shfl_xor_sync(0xffffffffu, t, o));
        if (lane == 0) red[kWarps] = t;
    }
    __syncthreads();
    return red[kWarps];
}

// kwiki:rung per_tensor
// Pass 1: each block's amax of x, grid-stride over 16-byte vectors, into partial[block].
__global__ void __launch_bounds__(kThreads) tensor_amax_kernel(const uint4* __restrict__ x, size_t vectors, float* __restrict__ partial) {
    __shared__ float red[kWarps + 1];
    float m = 0;
#pragma unroll 4
    for (size_t j = blockIdx.x * size_t(kThreads) + threadIdx.x; j < vectors; j += size_t(gridDim.x) * kThreads) m = fp8::amax8(x[j], m);
    m = block_max(m, red);
    if (threadIdx.x == 0) partial[blockIdx.x] = m;
}

// Pass 2: every block reduces the partials to the tensor's amax (from L2), then codes its vectors; block 0 writes the
// scale.
__global__ void __launch_bounds__(kThreads) tensor_quant_kernel(const uint4* __restrict__ x, size_t vectors,
                                                                const float* __restrict__ partial, int parts,
                                                                uint2* __restrict__ q, float* __restrict__ scale) {
    __shared__ float red[kWarps + 1];
    float m = 0;
    for (int i = threadIdx.x; i < parts; i += kThreads) m = fmaxf(m, partial[i]);
    const float s = fp8::scale_of(block_max(m, red)), inv = 1.0f / s;
    if (blockIdx.x == 0 && threadIdx.x == 0) *scale = s;
#pragma unroll 4
    for (size_t j = blockIdx.x * size_t(kThreads) + threadIdx.x; j < vectors; j += size_t(gridDim.x) * kThreads)
        q[j] = fp8::e4m3x8(x[j], inv);
}
// /kwiki:rung per_tensor

// kwiki:rung per_token
// One CTA a row, the row in registers (vector j of the row is thread j % 256's (j / 256)-th): one read, the block's
// amax, the row's scale, the codes from the registers.
template <int VPT>
__global__ void __launch_bounds__(kThreads, 2) token_quant_kernel(const bf16* __restrict__ x, int hidden, uint8_t* __restrict__ q,
                                                               float* __restrict__ scale) {
    __shared__ float red[kWarps + 1];
    const int V = hidden / kVec;
    const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(blockIdx.x) * hidden);
    uint2* qr = reinterpret_cast<uint2*>(q + size_t(blockIdx.x) * hidden);
    uint4 v[VPT];
    float m = 0;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        v[i] = j < V ? xr[j] : make_uint4(0, 0, 0, 0);
        m = fp8::amax8(v[i], m);
    }
    const float s = fp8::scale_of(block_max(m, red)), inv = 1.0f / s;
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
        const int j = threadIdx.x + i * kThreads;
        if (j < V) qr[j] = fp8::e4m3x8(v[i], inv);
    }
}
// /kwiki:rung per_token

// kwiki:rung per_group
// 1 x 128 groups: 16 lanes hold a group, one 16-byte vector each; the group's amax in 4 shuffles among them (xor 8, 4,
// 2, 1 stays inside the 16), no shared memory, no barrier. Each half-warp takes kGroupsPerStep consecutive groups a
// step (their loads issued together), grid-stride. Lanes past a partial last group hold zeros and store nothing; every
// lane of a half-warp shuffles, whether its group exists or not, with the half-warp's mask. Scales go to [group][row],
// an fp8 GEMM's activation layout.
__global__ void __launch_bounds__(kThreads) group_quant_kernel(const bf16* __restrict__ x, int rows, int hidden,
                                                               uint8_t* __restrict__ q, float* __restrict__ scale) {
    const int groups = (hidden + kGroup - 1) / kGroup, lane = threadIdx.x % kGroupLanes;
    const unsigned half_mask = 0xffffu << (threadIdx.x & 16);  // the 16 lanes of this half-warp: the two halves of a
    const size_t total = size_t(rows) * groups;                // warp may leave the loop at different steps
    const size_t half = (blockIdx.x * size_t(kThreads) + threadIdx.x) / kGroupLanes;
    const size_t halves = size_t(gridDim.x) * kThreads / kGroupLanes;
    for (size_t g0 = half * kGroupsPerStep; g0 < total; g0 += halves * kGroupsPerStep) {
        uint4 v[kGroupsPerStep];
        int r[kGroupsPerStep], c[kGroupsPerStep];
        bool in[kGroupsPerStep];
#pragma unroll
        for (int k = 0; k < kGroupsPerStep; ++k) {
            const size_t g = g0 + k;
            r[k] = int(g / groups), c[k] = int(g % groups) * kGroup + lane * kVec;
            in[k] = g < total && c[k] < hidden;
            v[k] = in[k] ? *reinterpret_cast<const uint4*>(x + size_t(r[k]) * hidden + c[k]) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int k = 0; k < kGroupsPerStep; ++k) {
            float m = fp8::amax8(v[k], 0.0f);
#pragma unroll
            for (int o = kGroupLanes / 2; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(half_mask, m, o));
            const float s = fp8::scale_of(m), inv = 1.0f / s;
            if (g0 + k < total && lane == 0) scale[size_t(c[k] / kGroup) * rows + r[k]] = s;
            if (in[k]) *reinterpret_cast<uint2*>(q + size_t(r[k]) * hidden + c[k]) = fp8::e4m3x8(v[k], inv);
        }
    }
}
// /kwiki:rung per_group

// kwiki:rung per_block
// 128 x 128 blocks (a weight's granularity): one CTA a block, thread t holds vector t % 16 of rows t / 16 + 16 i
// (i < 8); the block's amax by block_max, one scale, the codes from the registers.
__global__ void __launch_bounds__(kThreads, 2) block_quant_kernel(const bf16* __restrict__ x, int rows, int hidden,
                                                               uint8_t* __restrict__ q, float* __restrict__ scale) {
    __shared__ float red[kWarps + 1];
    const int groups = (hidden + kGroup - 1) / kGroup;
    const int br = blockIdx.x / groups, bc = blockIdx.x % groups;
    const int c = bc * kGroup + (threadIdx.x % kGroupLanes) * kVec;
    uint4 v[kBlockVpt];
    float m = 0;
#pragma unroll
    for (int i = 0; i < kBlockVpt; ++i) {
        const int r = br * kGroup + threadIdx.x / kGroupLanes + i * (kThreads / kGroupLanes);
        v[i] = r < rows && c < hidden ? *reinterpret_cast<const uint4*>(x + size_t(r) * hidden + c) : make_uint4(0, 0, 0, 0);
        m = fp8::amax8(v[i], m);
    }
    const float s = fp8::scale_of(block_max(m, red)), inv = 1.0f / s;
    if (threadIdx.x == 0) scale[blockIdx.x] = s;
#pragma unroll
    for (int i = 0; i < kBlockVpt; ++i) {
        const int r = br * kGroup + threadIdx.x / kGroupLanes + i * (kThreads / kGroupLanes);
        if (r < rows && c < hidden) *reinterpret_cast<uint2*>(q + size_t(r) * hidden + c) = fp8::e4m3x8(v[i], inv);
    }
}
// /kwiki:rung per_block

// ===================================================================================================
// Launchers
// ===================================================================================================

// fn(std::integral_constant<int, V>) for the power of two V == vpt, V at most kMaxVpt.
template <int V = 1, class F>
void with_vpt(int vpt, F fn) {
    if (vpt == V) return fn(std::integral_constant<int, V>{});
    if constexpr (V < kMaxVpt) with_vpt<2 * V>(vpt, fn);
    else kwiki::fail_env(__FILE__, __LINE__, "with_vpt", "more vectors per thread than the kernel holds");
}

// The smallest power of two of 16-byte vectors a thread that covers a row with 256 threads.
int vectors_per_thread(int hidden) {
    int v = 1;
    while (v * kThreads * kVec < hidden) v *= 2;
    return v;
}

int stream_grid() { return kwiki::sm_count() * 8; }  // the grid-stride kernels: 8 blocks of 256 an SM

// kwiki:rung per_tensor
void launch_tensor(Quant& qt, cudaStream_t s) {
    const size_t V = qt.lay.n() / kVec;
    const int grid = stream_grid();
    const uint4* x = reinterpret_cast<const uint4*>(qt.x.get());
    tensor_amax_kernel<<<grid, kThreads, 0, s>>>(x, V, qt.partial.get());
    KWIKI_CHECK_LAST();
    tensor_quant_kernel<<<grid, kThreads, 0, s>>>(x, V, qt.partial.get(), grid, reinterpret_cast<uint2*>(qt.q.get()),
                                                  qt.scales(Gran::Tensor));
    KWIKI_CHECK_LAST();
}
// /kwiki:rung per_tensor

// kwiki:rung per_token
void launch_token(Quant& qt, cudaStream_t s) {
    with_vpt(vectors_per_thread(qt.lay.hidden), [&](auto V) {
        token_quant_kernel<decltype(V)::value><<<qt.lay.rows, kThreads, 0, s>>>(qt.x.get(), qt.lay.hidden, qt.q.get(),
                                                                                qt.scales(Gran::Token));
    });
    KWIKI_CHECK_LAST();
}
// /kwiki:rung per_token

// kwiki:rung per_group
void launch_group(Quant& qt, cudaStream_t s) {
    const size_t steps = (size_t(qt.lay.rows) * qt.lay.groups() + kGroupsPerStep - 1) / kGroupsPerStep;  // half-warp steps
    const int grid = int(std::min<size_t>((steps * kGroupLanes + kThreads - 1) / kThreads, size_t(stream_grid())));
    group_quant_kernel<<<grid, kThreads, 0, s>>>(qt.x.get(), qt.lay.rows, qt.lay.hidden, qt.q.get(), qt.scales(Gran::Group));
    KWIKI_CHECK_LAST();
}
// /kwiki:rung per_group

// kwiki:rung per_block
void launch_block(Quant& qt, cudaStream_t s) {
    block_quant_kernel<<<qt.lay.row_blocks() * qt.lay.groups(), kThreads, 0, s>>>(qt.x.get(), qt.lay.rows, qt.lay.hidden,
                                                                                 qt.q.get(), qt.scales(Gran::Block));
    KWIKI_CHECK_LAST();
}
// /kwiki:rung per_block

void launch_copy(Quant& qt, cudaStream_t s) {
    KWIKI_CHECK(cudaMemcpyAsync(qt.y.get(), qt.x.get(), qt.lay.n() * sizeof(bf16), cudaMemcpyDeviceToDevice, s));
}

// The kernel whose resources a variant's record reports.
const void* kernel_of(Gran g, int hidden) {
    const void* fn = nullptr;
    if (g == Gran::Tensor) fn = reinterpret_cast<const void*>(tensor_quant_kernel);
    if (g == Gran::Token) with_vpt(vectors_per_thread(hidden), [&](auto V) { fn = reinterpret_cast<const void*>(token_quant_kernel<decltype(V)::value>); });
    if (g == Gran::Group) fn = reinterpret_cast<const void*>(group_quant_kernel);
    if (g == Gran::Block) fn = reinterpret_cast<const void*>(block_quant_kernel);
    return fn;
}

// The shapes every variant takes. A refused shape is named on stderr before any CUDA call; Args then exits 2.
bool valid_shape(const std::vector<int>& d) {
    const char* why = d[1] % kVec ? "is not a multiple of 8 (rows are read in 16-byte vectors)"
                      : d[1] > kMaxHidden ? "is above 32768 (per_token holds a row in a block's registers, 16 vectors a thread)"
                                          : nullptr;
    if (why) std::fprintf(stderr, "fp8_quant: --shapes: %dx%d: hidden %d %s\n", d[0], d[1], d[1], why);
    return why == nullptr;
}

// The copy is the roof only where x outgrows the L2 between launches; below, it has no case and says why.
bool runs_at(Gran g, const Layout& l) {
    if (g != Gran::Copy || l.n() >= kRoofMinElements) return true;
    std::fprintf(stderr, "fp8_quant: copy does not run at %dx%d: under %zu elements it is no roof (L2-resident)\n", l.rows,
                 l.hidden, kRoofMinElements);
    return false;
}

// One variant's case at the shape of `qt`: its bytes, launch, poison, the exact check (and the error figures of the
// checked call, added to its record), the re-check, and the refill before every timed sample.
kwiki::Case quant_case(Quant& qt, Gran g, void (*launch)(Quant&, cudaStream_t)) {
    const Layout& lay = qt.lay;
    kwiki::Case c;
    c.params = {{"shape", std::to_string(lay.rows) + "x" + std::to_string(lay.hidden)}, {"rows", lay.rows},
                {"hidden", lay.hidden}, {"dtype", "bf16"}};
    c.launch = [&qt, launch](cudaStream_t s) { launch(qt, s); };
    c.refill = [&qt](cudaStream_t s, uint64_t seed) { qt.refill(seed, s); };
    if (g == Gran::Copy) {
        c.bytes = 4.0 * double(lay.n());
        c.poison = [&qt](cudaStream_t s) { kwiki::poison(qt.y.get(), qt.lay.n() * sizeof(bf16), s); };
        c.check = [&qt] {
            return kwiki::with_canary(kwiki::compare_device(qt.y.get(), qt.x.get(), qt.lay.n(), {0.0, 0.0}, "the input x (a copy)"),
                                      qt.y.get(), qt.lay.n());
        };
        return c;
    }
    c.bytes = 3.0 * double(lay.n()) + 4.0 * double(Layout::scales(g, lay.rows, lay.hidden));
    kwiki::add_occupancy(c.extra, kernel_of(g, lay.hidden), kThreads);
    c.poison = [&qt, g](cudaStream_t s) {
        kwiki::poison(qt.q.get(), qt.lay.n(), s);
        kwiki::poison(qt.scales(g), Layout::scales(g, qt.lay.rows, qt.lay.hidden) * sizeof(float), s);
    };
    auto errors = std::make_shared<Errors>();
    c.check = [&qt, g, errors] {
        kwiki::CheckResult r = check_reference_on_host(qt);
        if (!r.passed) return r;
        r = check_codes(qt, g);
        if (r.passed) *errors = error_figures(qt, g);  // of the kernel's own output
        return r;
    };
    c.recheck = [&qt, g] { return check_codes(qt, g); };
    c.finish = [errors](kwiki::Record& r) {
        if (std::isnan(errors->rel_rms)) return;
        r.extra.emplace_back("q_rel_rms", errors->rel_rms);
        r.extra.emplace_back("q_row_rel_rms", errors->row_rel_rms);
        r.extra.emplace_back("q_flushed", errors->flushed);
    };
    return c;
}

// ===================================================================================================
// The table of variants (names only: artifact.yaml holds their rungs and what each adds, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Gran gran;
    void (*launch)(Quant&, cudaStream_t);
};

const Variant kVariants[] = {
    {{"per_tensor"}, Gran::Tensor, launch_tensor},
    {{"per_token"}, Gran::Token, launch_token},
    {{"per_group"}, Gran::Group, launch_group},
    {{"per_block"}, Gran::Block, launch_block},
    {{"copy"}, Gran::Copy, launch_copy},  // not a rung: the roof, x copied into y
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);  // --list-variants exits in here, before any CUDA call
    const auto shapes = m.args.get_shapes<std::pair<int, int>, 2>(  // the manifest's; --list-shapes exits
        "shapes", "", "ROWSxHIDDEN with HIDDEN a multiple of 8 and at most 32768", valid_shape);
    kwiki::Runner& runner = m.start("fp8_quant");
    for (const auto& shape : shapes) {
        const Layout lay{shape.first, shape.second};
        Quant qt(lay, kwiki::hash64(m.seed, lay.n() + uint64_t(lay.hidden)));
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) { return quant_case(qt, v.gran, v.launch); },
                          [&](const Variant& v) { return runs_at(v.gran, lay); });
    }
    return kwiki::exit_code();
}
