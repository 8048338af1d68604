// fp8_promotion.cu: how often an fp8 GEMM must promote the tensor cores' partial sums into fp32 registers, in
// CUDA on Hopper: the same kernel promoting every 32, 64, 128, 256 or 512 elements of K, or never, checked against
// a host fp64 reference, with the maximum and the RMS relative error of each over the same sampled outputs.
//
// C[M,N] (fp32) = sa sb (A B^T) for e4m3 codes A [M,K] and B [N,K] (K-major, the layout fp8 wgmma reads) and
// per-tensor scales. Hopper's fp8 wgmma adds its products into its accumulator with limited precision (about 14
// bits, DeepSeek-V3 section 3.3.2), so a kernel lets the tensor cores sum only an interval of K into a partial, then
// adds the partial into fp32 totals in registers (the promotion) and starts a fresh one.
//
// The kernel is kwiki_ws_gemm.cuh's CTA at a 128 x 128 tile (a producer warpgroup's TMA ring of 128-deep k-blocks,
// two consumer warpgroups of 64 rows, persistent, grouped order; fp8_gemm_sm90a's rung 5) with the interval a
// template parameter, P k32 steps:
//   P = 1, 2   (32, 64)    a fold inside the k-block, after every P wgmma, each waited for
//   P = 4      (128)       a fold after each k-block's four wgmma: rung 5
//   P = 8, 16  (256, 512)  the partial runs on through 2 or 4 k-blocks (each still waited for, to free its stage)
//   P = 0      (never)     one partial over the whole of K, added to zero totals once at the end
// An fp32 output: a bf16 one would add 2^-9 of rounding to every variant's error and hide the accumulator's.
//
// Inputs: codes uniform in [-256, 256) rounded to e4m3 (448 the largest), for A and for B; sa = 2^-8 and
// sb = 2^-8 / 2^max(0, ceil(log2 sqrt K) - 4), powers of two, so the dequantized values are exact in fp32 and the
// outputs have an RMS of about 3 to 6 at every K. The error is scale-free: the tensor cores sum code products, and
// the scales multiply the total once in the epilogue.
//
// Checking: the outputs at --check-samples sampled positions (default 16384) against a host fp64 dot product of the
// dequantized values (kwiki_gemm.cuh), poisoned with NaN first. The relative error of an output is
// |c - ref| / max(|ref|, atol), atol 0.5 (the check's, as fp8_gemm_sm90a's Triton sweep floors it); the record
// carries the largest (check.max_rel_err) and, from the same samples of the checked call, the RMS (rms_rel_err).
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o fp8_promotion fp8_promotion.cu
// Run:   ./fp8_promotion --shapes=4096x4096x16384 [--variants p128,never] [--check-samples 16384] [--seed N]
// Shapes: M any, N and K multiples of 16 (TMA's 16-byte strides; the output's float pairs).
#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <cuda_fp8.h>

#include "kwiki_bench.cuh"
#include "kwiki_gemm.cuh"
#include "kwiki_ws_gemm.cuh"

namespace g = kwiki::wsgemm;
using e4m3 = __nv_fp8_e4m3;

constexpr float kAmplitude = 256.f;  // codes uniform in [-256, 256), rounded to e4m3
constexpr double kAtol = 0.5, kRtol = 1.0 / 32;
constexpr int KSTEPS = g::BK / g::WK;  // k32 steps a k-block: 4
constexpr int kSmem = g::Tile<128>::SMEM_BYTES;

struct Problem {
    int M, N, K;
};

// ===================================================================================================
// Kernels
// ===================================================================================================

namespace promo {

// totals += partial, once the partial's wgmma group has completed
template <int ACC>
__device__ __forceinline__ void fold(float (&acc)[ACC], float (&part)[ACC]) {
#pragma unroll
    for (int i = 0; i < ACC; ++i) sm90::fence_operand(part[i]);  // read only after the wait
#pragma unroll
    for (int i = 0; i < ACC; ++i) acc[i] += part[i];
}

// kwiki:rung p128
// One persistent CTA: kwiki_ws_gemm.cuh's producer and ring; each consumer multiplies its 64 rows of a tile with the
// partial promoted every P k32 steps (0: never) and stores scale * totals as fp32.
template <int P>
__device__ __forceinline__ void gemm(const CUtensorMap* ta, const CUtensorMap* tb, float scale, float* out, int M, int N,
                                     int K) {
    static_assert(P == 0 || P == 1 || P == 2 || P % KSTEPS == 0, "an interval that divides a k-block or spans whole ones");
    using T = g::Tile<128>;
    constexpr int ACC = T::ACC;
    const g::Dense<128> sched(M, N);
    const int k_blocks = (K + g::BK - 1) / g::BK;
    const g::Ring<T> ring;
    const int wg = threadIdx.x / 128;
    if (wg == 0) {
        sm90::regs_release<40>();
        if (threadIdx.x == 0) ring.template produce<g::BK>(ta, tb, sched, k_blocks);
        return;
    }
    sm90::regs_claim<232>();
    const int cw = wg - 1, tid = threadIdx.x % 128;
    const int r_in = cw * g::ROWS + (tid / 32) * 16 + (tid % 32) / 4;  // the thread's first row in the tile; the other + 8
    int stage = 0;
    uint32_t phase = 0;
    float acc[ACC], part[ACC];
    for (int t = blockIdx.x; t < sched.tiles(); t += gridDim.x) {
        const g::Job j = sched.job(t);
#pragma unroll
        for (int i = 0; i < ACC; ++i) acc[i] = 0.f;
        bool pending = false;  // the partial holds products not yet folded
        for (int kb = 0; kb < k_blocks; ++kb) {
            sm90::mbar_wait(&ring.full[stage], phase);
            const uint8_t* a = ring.sA + stage * T::A_BYTES + cw * g::ROWS * g::BK;
            const uint8_t* b = ring.sB + stage * T::B_BYTES;
            const bool fresh = !pending;
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ++ks) {
                // scale-d 0 starts a fresh partial: every P steps inside a k-block, else at a k-block after a fold
                const int scale_d = (P == 1 || P == 2) ? ks % (P ? P : 1) : int(ks > 0 || !fresh);
                sm90::wgmma_fence();  // the partial may just have been read by a fold
                g::mma_e4m3<128>(part, sm90::desc_k_major_sw128(a + ks * g::WK), sm90::desc_k_major_sw128(b + ks * g::WK),
                                 scale_d);
                pending = true;
                if constexpr (P == 1 || P == 2) {
                    if ((ks + 1) % P == 0) {
                        sm90::wgmma_commit();
                        sm90::wgmma_wait<0>();
                        fold(acc, part);
                        pending = false;
                    }
                }
            }
            sm90::wgmma_commit();
            sm90::wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < ACC; ++i) sm90::fence_operand(part[i]);
            if (tid == 0) sm90::mbar_arrive(&ring.empty[stage]);
            if (++stage == T::STAGES) stage = 0, phase ^= 1;
            if constexpr (P >= KSTEPS) {
                if ((kb + 1) % (P / KSTEPS) == 0) {
                    fold(acc, part);
                    pending = false;
                }
            }
        }
        if (pending) fold(acc, part);  // never, or K ending inside an interval
        // the epilogue: fp32 pairs straight from registers (N is even, so a pair is in or out as a whole)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = j.a_row + r_in + 8 * h;
            if (r >= j.row_end) continue;
            float* row = out + size_t(r) * N;
#pragma unroll
            for (int q = 0; q < ACC / 4; ++q) {
                const int c = j.col0 + 8 * q + 2 * (tid % 4);
                if (c < N)
                    *reinterpret_cast<float2*>(row + c) = make_float2(acc[4 * q + 2 * h] * scale, acc[4 * q + 2 * h + 1] * scale);
            }
        }
    }
}
// /kwiki:rung p128

}  // namespace promo

#define KWIKI_PROMOTE_KERNEL(NAME, P)                                                                                  \
    extern "C" __global__ void __launch_bounds__(g::THREADS, 1)                                                        \
        NAME(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb, float scale, float* out, \
             int M, int N, int K) {                                                                                    \
        promo::gemm<P>(&ta, &tb, scale, out, M, N, K);                                                                 \
    }
KWIKI_PROMOTE_KERNEL(fp8_promote_p32_kernel, 1)
KWIKI_PROMOTE_KERNEL(fp8_promote_p64_kernel, 2)
KWIKI_PROMOTE_KERNEL(fp8_promote_p128_kernel, 4)
KWIKI_PROMOTE_KERNEL(fp8_promote_p256_kernel, 8)
KWIKI_PROMOTE_KERNEL(fp8_promote_p512_kernel, 16)
KWIKI_PROMOTE_KERNEL(fp8_promote_never_kernel, 0)
#undef KWIKI_PROMOTE_KERNEL

using Kernel = void (*)(CUtensorMap, CUtensorMap, float, float*, int, int, int);

// ===================================================================================================
// Reference: e4m3 codes, their scales, and the fp64 samples of the dequantized product
// ===================================================================================================

__global__ void fill_codes_kernel(e4m3* p, size_t n, uint64_t seed) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i].__x = __nv_cvt_float_to_fp8(kAmplitude * kwiki::random_unit(seed, i, -1.f, 1.f), __NV_SATFINITE, __NV_E4M3);
}

void fill_codes(e4m3* dev, size_t n, uint64_t seed) {
    const size_t blocks = std::min<size_t>((n + 255) / 256, size_t(1) << 16);
    fill_codes_kernel<<<unsigned(std::max<size_t>(blocks, 1)), 256>>>(dev, n, seed);
    KWIKI_CHECK_LAST();
}

// B's scale: 2^-8, and 2^-(ceil(log2 sqrt K) - 4) more where that is positive (outputs of RMS 3 to 6)
float b_scale(int K) {
    const int e = int(std::ceil(std::log2(std::sqrt(double(K))))) - 4;
    return std::ldexp(1.f, -8 - std::max(e, 0));
}

struct Operands {
    kwiki::DeviceBuffer<e4m3> A, B;
    float sa = 0, sb = 0;
    CUtensorMap ta{}, tb{};
    std::vector<kwiki::GemmSample> ref;

    void fill(const Problem& p, uint64_t seed, int samples) {
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K;
        A = kwiki::DeviceBuffer<e4m3>(nA), B = kwiki::DeviceBuffer<e4m3>(nB);
        fill_codes(A.get(), nA, seed), fill_codes(B.get(), nB, kwiki::hash64(seed, 1));
        sa = 1.f / kAmplitude, sb = b_scale(p.K);
        KWIKI_CHECK_STATUS(g::tensor_map(&ta, A.get(), p.M, p.K, g::BM));
        KWIKI_CHECK_STATUS(g::tensor_map(&tb, B.get(), p.N, p.K, 128));
        std::vector<float> xA = kwiki::to_host_float(A.get(), nA), xB = kwiki::to_host_float(B.get(), nB);
        for (float& x : xA) x *= sa;  // exact: powers of two
        for (float& x : xB) x *= sb;
        ref = kwiki::gemm_reference(xA, xB, p.M, p.N, p.K, samples, kwiki::hash64(seed, 2));
    }
};

// The sampled outputs against the set's fp64 samples: the check (atol 0.5, rtol 2^-5: sized for `never` at K = 16384,
// as the Triton sweep's tolerance is), and the RMS of the relative errors |c - ref| / max(|ref|, atol) into *rms.
kwiki::CheckResult check_samples(const float* C, const Operands& s, const Problem& p, std::optional<double>* rms) {
    const std::vector<float> got = kwiki::gather_samples(C, p.N, s.ref);
    kwiki::CheckResult r = kwiki::compare_samples(got.data(), s.ref, {kAtol, kRtol},
                                                  "host fp64 of the dequantized values, sampled elements");
    if (r.passed && !rms->has_value() && !got.empty()) {  // the checked call's (the first check); rechecks only judge
        double sum = 0;
        for (size_t j = 0; j < got.size(); ++j) {
            const double e = std::fabs(double(got[j]) - s.ref[j].value) / std::max(std::fabs(s.ref[j].value), kAtol);
            sum += e * e;
        }
        *rms = std::sqrt(sum / double(got.size()));
    }
    return r;
}

// ===================================================================================================
// Launchers
// ===================================================================================================

// One shape's state: its input sets, the output, and each case's RMS relative error (filled by its first check),
// alive for the runner.
struct ShapeRun {
    Problem p;
    long long samples;
    kwiki::InputSets<Operands> in;
    kwiki::DeviceBuffer<float> C;
    std::deque<std::optional<double>> rms;

    ShapeRun(const Problem& pr, int sets, uint64_t seed, long long n)
        : p(pr), samples(n), in(sets, seed, [&](Operands& s, uint64_t sd) { s.fill(pr, sd, int(n)); }),
          C(size_t(pr.M) * pr.N) {}

    // The case of kernel k (the variant promoting every `every` elements of K; `configured`: its shared memory
    // allowed once a process): launched persistent on the current input set, checked on the samples.
    kwiki::Case promote_case(Kernel k, int every, bool& configured) {
        const long long tiles = (long long)((p.M + g::BM - 1) / g::BM) * ((p.N + 127) / 128);
        const long long grid = g::persistent_grid(reinterpret_cast<const void*>(k), kSmem, configured, tiles);
        if (grid < 0) KWIKI_CHECK(cudaError_t(-grid));
        kwiki::Case c;
        c.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", "fp8_e4m3-f32out"}};
        c.flops = 2.0 * p.M * p.N * double(p.K);
        c.flops_dtype = "fp8";
        c.bytes = double(size_t(p.M) * p.K + size_t(p.N) * p.K) + 4.0 * double(size_t(p.M) * p.N);
        c.launch = [this, k, grid](cudaStream_t st) {
            const Operands& s = in.current();
            k<<<unsigned(grid), g::THREADS, kSmem, st>>>(s.ta, s.tb, s.sa * s.sb, C.get(), p.M, p.N, p.K);
            KWIKI_CHECK_LAST();
        };
        std::optional<double>* mine = &rms.emplace_back();
        in.bind(c, [this](cudaStream_t st) { kwiki::poison(C.get(), C.bytes(), st); },
                [this, mine](const Operands& s) { return check_samples(C.get(), s, p, mine); });
        c.finish = [mine](kwiki::Record& r) {
            if (r.check.passed && mine->has_value()) r.extra.emplace_back("rms_rel_err", **mine);
        };
        kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(k), g::THREADS, kSmem);
        c.extra.emplace_back("promote_every", every);  // elements of K; 0: never
        c.extra.emplace_back("check_samples", samples);
        return c;
    }
};

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Kernel kernel;
    int every;  // elements of K a partial sums before it is promoted; 0: never
};

const Variant kVariants[] = {
    {{"p32"}, fp8_promote_p32_kernel, 32},    {{"p64"}, fp8_promote_p64_kernel, 64},
    {{"p128"}, fp8_promote_p128_kernel, 128}, {{"p256"}, fp8_promote_p256_kernel, 256},
    {{"p512"}, fp8_promote_p512_kernel, 512}, {{"never"}, fp8_promote_never_kernel, 0},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_shapes<Problem, 3>("shapes", "", "MxNxK,... with N and K multiples of 16",
                                                      [](const std::vector<int>& d) { return d[1] % 16 == 0 && d[2] % 16 == 0; });
    const long long samples = m.args.get_int("check-samples", 16384);
    if (samples < 256 || samples > (1 << 20)) kwiki::Args::usage("--check-samples wants an integer from 256 to 1048576");
    kwiki::Runner& runner = m.start("fp8_promotion");
    bool configured[sizeof kVariants / sizeof kVariants[0]] = {};
    for (const Problem& p : shapes) {
        ShapeRun run(p, m.sets, kwiki::hash64(m.seed, uint64_t(p.M) * 7919u + uint64_t(p.N) * 31u + p.K), samples);
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            return run.promote_case(v.kernel, v.every, configured[&v - kVariants]);
        });
    }
    return kwiki::exit_code();
}
