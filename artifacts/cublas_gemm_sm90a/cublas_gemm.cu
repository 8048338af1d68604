// cublas_gemm.cu: what cuBLAS reaches on aligned GEMMs, bf16, tf32 and fp8, on random and on all-zero inputs.
//
// C[M,N] = A[M,K] * B[N,K]^T, A and B row-major (K contiguous), C row-major, fp32 accumulation: in cuBLAS's
// column-major terms C^T = B^T(op T) * A(op N), one cublasGemmEx call ("TN"). fp8 goes through one
// cublasLtMatmul in the same TN form (the only one Hopper's fp8 GEMM takes: K contiguous in both), with a
// per-tensor scale for A and B. cuBLAS and cuBLASLt are opened at run time (kwiki_cublas.cuh), so the
// build needs neither.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o cublas_gemm cublas_gemm.cu
// Run:   ./cublas_gemm [--variants a,b] [--shapes 2048x2048x2048,...] [--check-samples 2048] [--seed N] [--input-sets 2]
//
// Variants (one cublasGemmEx or cublasLtMatmul each; per dtype the same call on different data):
//   bf16_random   bf16 in and out, CUBLAS_COMPUTE_32F, inputs uniform in [-1, 1)
//   bf16_zeros    the same call with A and B all zeros (fewer toggling bits: less power, higher clocks)
//   tf32_random   fp32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32, inputs uniform in [-1, 1)
//   tf32_zeros    the same call with A and B all zeros
//   fp8_random    cublasLtMatmul, A and B e4m3 (uniform in [-1, 1) times 256, rounded to e4m3) with per-tensor
//                 scales 1/256, CUBLAS_COMPUTE_32F, bf16 out
//   fp8_zeros     the same fp8 call with A and B all zeros
//
// Checking (before timing): random inputs against a host fp64 dot product on sampled elements, with a
// tolerance for bf16 output (or tf32 inputs) and fp32 accumulation over K (fp8: the dequantized e4m3
// inputs, so only the accumulation and the bf16 output round); zero inputs must give exact
// zeros in every element (outputs are poisoned with NaN first, so an unwritten element fails).
// The variants of one shape are timed together, interleaved, so random and zeros see the same clocks
// (kwiki::Runner: every timed sample into a poisoned C, after an L2 flush). The random variants keep
// --input-sets (2) pre-filled sets of A and B, each with its fp64 samples; a timed sample reads one at random,
// and a re-checked one is compared with that set's samples. Zero inputs stay one set: their re-checked samples
// must be exact zeros in every element (compared on the GPU).
#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <cuda_fp8.h>

#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"
#include "kwiki_gemm.cuh"

using bf16 = __nv_bfloat16;
using e4m3 = __nv_fp8_e4m3;

enum class Dtype { bf16, tf32, fp8 };

// fp8 inputs are stored as value * kFp8Amplitude (amax 256, below e4m3's 448) and dequantized by the
// per-tensor scale 1 / kFp8Amplitude, a power of two: the dequantized inputs are exact on the host.
constexpr float kFp8Amplitude = 256.f;

// ===================================================================================================
// Reference: the inputs (random, zeros or e4m3), their fp64 samples, and the checks
// ===================================================================================================

// e4m3 of amplitude * (uniform in [-1, 1)), rounded to nearest; |value| <= amplitude < 448, never NaN.
__global__ void fill_random_e4m3_kernel(e4m3* p, size_t n, uint64_t seed, float amplitude) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i].__x = __nv_cvt_float_to_fp8(amplitude * kwiki::random_unit(seed, i, -1.f, 1.f), __NV_SATFINITE, __NV_E4M3);
}

void fill_random_e4m3(e4m3* dev, size_t n, uint64_t seed, float amplitude) {
    const size_t blocks = std::min<size_t>((n + 255) / 256, size_t(1) << 16);
    fill_random_e4m3_kernel<<<unsigned(std::max<size_t>(blocks, 1)), 256>>>(dev, n, seed, amplitude);
    KWIKI_CHECK_LAST();
}

// The dequantized inputs: e4m3 values times the per-tensor scale (exact: the scale is a power of two).
std::vector<float> to_host_dequantized(const e4m3* dev, size_t n, float scale) {
    std::vector<float> out = kwiki::to_host_float(dev, n);
    for (float& v : out) v *= scale;
    return out;
}

struct Problem {
    int M, N, K;
};

size_t input_bytes(Dtype dt) { return dt == Dtype::tf32 ? 4 : dt == Dtype::fp8 ? 1 : 2; }
size_t output_bytes(Dtype dt) { return dt == Dtype::tf32 ? 4 : 2; }

// One input set of a variant: A and B in its dtype, random (from `sa`, B from hash64(sa, 1)) or all zeros, and for
// random inputs the fp64 samples of A B^T (`samples` of them, at positions drawn from hash64(sa, 2)).
struct Operands {
    kwiki::DeviceBuffer<uint8_t> A, B;
    std::vector<kwiki::GemmSample> ref;

    void fill(const Problem& p, Dtype dt, bool zeros, uint64_t sa, int samples) {
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K, es = input_bytes(dt);
        const uint64_t sb = kwiki::hash64(sa, 1);
        A = kwiki::DeviceBuffer<uint8_t>(nA * es), B = kwiki::DeviceBuffer<uint8_t>(nB * es);
        if (zeros) {
            KWIKI_CHECK(cudaMemset(A.get(), 0, nA * es));
            KWIKI_CHECK(cudaMemset(B.get(), 0, nB * es));
            return;
        }
        if (dt == Dtype::fp8) {
            fill_random_e4m3(reinterpret_cast<e4m3*>(A.get()), nA, sa, kFp8Amplitude);
            fill_random_e4m3(reinterpret_cast<e4m3*>(B.get()), nB, sb, kFp8Amplitude);
        } else if (dt == Dtype::tf32) {
            kwiki::fill_random(reinterpret_cast<float*>(A.get()), nA, sa), kwiki::fill_random(reinterpret_cast<float*>(B.get()), nB, sb);
        } else {
            kwiki::fill_random(reinterpret_cast<bf16*>(A.get()), nA, sa), kwiki::fill_random(reinterpret_cast<bf16*>(B.get()), nB, sb);
        }
        auto host = [dt](const void* dev, size_t n) {
            switch (dt) {
                case Dtype::tf32: return kwiki::to_host_float(static_cast<const float*>(dev), n);
                case Dtype::fp8: return to_host_dequantized(static_cast<const e4m3*>(dev), n, 1.f / kFp8Amplitude);
                default: return kwiki::to_host_float(static_cast<const bf16*>(dev), n);
            }
        };
        const std::vector<float> hA = host(A.get(), nA), hB = host(B.get(), nB);
        ref = kwiki::gemm_reference(hA, hB, p.M, p.N, p.K, samples, kwiki::hash64(sa, 2));
    }
};

// Sampled elements of C (fp32 for tf32, bf16 otherwise) against the fp64 samples of kwiki::gemm_reference.
kwiki::CheckResult check_samples(const void* C, Dtype dt, const std::vector<kwiki::GemmSample>& ref, int N, int K) {
    const bool tf32 = dt == Dtype::tf32;
    const std::vector<float> got = tf32 ? kwiki::gather_samples(static_cast<const float*>(C), N, ref)
                                        : kwiki::gather_samples(static_cast<const bf16*>(C), N, ref);
    const kwiki::GemmPrecision precision = tf32               ? kwiki::GemmPrecision::tf32
                                           : dt == Dtype::fp8 ? kwiki::GemmPrecision::fp8_bf16
                                                              : kwiki::GemmPrecision::bf16;
    return kwiki::compare_samples(got.data(), ref, kwiki::gemm_tolerance(precision, K), "host fp64 on sampled elements");
}

// Every element exactly zero (either sign), on the GPU; NaN (poison) or anything else fails.
kwiki::CheckResult check_zeros_device(const void* C, Dtype dt, size_t n) {
    const char* what = "exact zeros (zero inputs), every element on the GPU";
    return dt == Dtype::tf32 ? kwiki::compare_device(static_cast<const float*>(C), static_cast<const float*>(nullptr), n, {0, 0}, what)
                             : kwiki::compare_device(static_cast<const bf16*>(C), static_cast<const bf16*>(nullptr), n, {0, 0}, what);
}

// ===================================================================================================
// Launchers
// ===================================================================================================

// One fp8 cublasLtMatmul, set up once per shape: descriptors, the two device scales, a workspace.
struct LtFp8 {
    kwiki::cublasLtMatmulDesc_t desc = nullptr;
    kwiki::cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    static constexpr size_t kScaleStride = 64;  // floats: 256 bytes
    float* scales = nullptr;  // [0] for cuBLASLt's A (our B), [kScaleStride] for its B (our A)
    void* workspace = nullptr;
    static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

    // C^T[N,M] = B[N,K] (op T) * A^T (op N), all column-major in cuBLASLt's terms, as for cublasGemmEx.
    LtFp8(const Problem& p, float scale) {
        const auto& lt = kwiki::cublasLt();
        KWIKI_CHECK_STATUS(lt.MatmulDescCreate(&desc, kwiki::CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const int32_t op_t = kwiki::CUBLAS_OP_T, op_n = kwiki::CUBLAS_OP_N;
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc, kwiki::CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc, kwiki::CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
        // each scale on its own 256-byte boundary: cublasLtMatmul refuses (CUBLAS_STATUS_NOT_SUPPORTED, with
        // nothing in its log) a scale pointer that is only 4-byte aligned, although the heuristic accepts it
        KWIKI_CHECK(cudaMalloc(&scales, 2 * kScaleStride * sizeof(float)));
        KWIKI_CHECK(cudaMemcpy(scales, &scale, sizeof scale, cudaMemcpyHostToDevice));
        KWIKI_CHECK(cudaMemcpy(scales + kScaleStride, &scale, sizeof scale, cudaMemcpyHostToDevice));
        const void* sa = scales;
        const void* sb = scales + kScaleStride;
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc, kwiki::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc, kwiki::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&a, CUDA_R_8F_E4M3, p.K, p.N, p.K));
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&b, CUDA_R_8F_E4M3, p.K, p.M, p.K));
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&c, CUDA_R_16BF, p.N, p.M, p.N));  // C and D: bf16, as the output
        KWIKI_CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
    }

    // The heuristic's first choice for this problem, allowed the 32 MiB workspace (cuBLASLt's default
    // preference allows none). Needs the handle, so it runs once the handle exists; exits 2 when cuBLASLt
    // offers nothing.
    void choose(kwiki::cublasLtHandle_t h) {
        const auto& lt = kwiki::cublasLt();
        kwiki::cublasLtMatmulPreference_t pref = nullptr;
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceCreate(&pref));
        const uint64_t limit = kWorkspaceBytes;
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceSetAttribute(pref, kwiki::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
                                                           sizeof limit));
        kwiki::cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        KWIKI_CHECK_STATUS(lt.MatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, 1, &result, &found));
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceDestroy(pref));
        if (found < 1 || result.state != kwiki::CUBLAS_STATUS_SUCCESS)
            kwiki::fail_env(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic",
                            "cuBLASLt offers no fp8 algorithm for this problem");
        algo = result.algo;
    }
    kwiki::cublasLtMatmulAlgo_t algo{};
    ~LtFp8() {
        const auto& lt = kwiki::cublasLt();
        KWIKI_CHECK_STATUS(lt.MatrixLayoutDestroy(c));
        KWIKI_CHECK_STATUS(lt.MatrixLayoutDestroy(b));
        KWIKI_CHECK_STATUS(lt.MatrixLayoutDestroy(a));
        KWIKI_CHECK_STATUS(lt.MatmulDescDestroy(desc));
        KWIKI_CHECK(cudaFree(scales));
        KWIKI_CHECK(cudaFree(workspace));
    }
    LtFp8(const LtFp8&) = delete;
    LtFp8& operator=(const LtFp8&) = delete;
};

void run_cublaslt_fp8(kwiki::cublasLtHandle_t h, const LtFp8& plan, const void* A, const void* B, void* C, cudaStream_t s) {
    const float alpha = 1.f, beta = 0.f;
    KWIKI_CHECK_STATUS(kwiki::cublasLt().Matmul(h, plan.desc, &alpha, B, plan.a, A, plan.b, &beta, C, plan.c, C, plan.c,
                                                &plan.algo, plan.workspace, LtFp8::kWorkspaceBytes, s));
}

// A row of the table of variants: the call it makes and on which inputs.
struct Variant : kwiki::VariantInfo {
    Dtype dtype;
    bool zeros;
};

const char* dtype_name(Dtype dt) { return dt == Dtype::tf32 ? "tf32" : dt == Dtype::fp8 ? "fp8_e4m3" : "bf16"; }

// Whether a variant that --variants asks for calls cublasGemmEx (bf16, tf32), or cublasLtMatmul (fp8 when `fp8`).
template <class Table>
bool calls(const kwiki::Args& args, const Table& table, bool fp8) {
    return std::any_of(std::begin(table), std::end(table), [&](const Variant& v) { return args.want(v.name) && (v.dtype == Dtype::fp8) == fp8; });
}

// One call of a variant's dtype on stream st: cublasLtMatmul with `plan` for fp8, cublasGemmEx otherwise.
void run_gemm(const kwiki::BlasHandles& lib, const LtFp8* plan, Dtype dt, const Problem& p, const void* A, const void* B, void* C,
              cudaStream_t st) {
    if (dt == Dtype::fp8) run_cublaslt_fp8(lib.lt, *plan, A, B, C, st);
    else kwiki::gemm_tn(lib.blas, A, B, C, p.M, p.N, p.K, dt == Dtype::tf32 ? kwiki::kGemmTf32 : kwiki::kGemmBf16, st);
}

// What a variant's record reports at p: its dtype, flops and bytes (A, B and C in their dtypes), and its inputs.
kwiki::Case gemm_case(const Variant& v, const Problem& p) {
    kwiki::Case c;
    c.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", dtype_name(v.dtype)}};
    c.flops = 2.0 * p.M * p.N * double(p.K);
    c.flops_dtype = v.dtype == Dtype::fp8 ? "fp8" : v.dtype == Dtype::tf32 ? "tf32" : "bf16";
    c.bytes = double(size_t(p.M) * p.K + size_t(p.N) * p.K) * input_bytes(v.dtype) + double(size_t(p.M) * p.N) * output_bytes(v.dtype);
    c.extra.emplace_back("inputs", v.zeros ? "zeros" : "random");
    return c;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr Variant kVariants[] = {
    {{"bf16_random"}, Dtype::bf16, false}, {{"bf16_zeros"}, Dtype::bf16, true}, {{"tf32_random"}, Dtype::tf32, false},
    {{"tf32_zeros"}, Dtype::tf32, true},   {{"fp8_random"}, Dtype::fp8, false}, {{"fp8_zeros"}, Dtype::fp8, true},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_shapes<Problem, 3>("shapes", "", "MxNxK,... with K a multiple of 8",  // the manifest's
                                                      [](const std::vector<int>& d) { return d[2] % 8 == 0; });
    const int samples = int(m.args.get_int("check-samples", 2048));
    kwiki::Runner& runner = m.start("cublas_gemm");
    const kwiki::BlasHandles lib(calls(m.args, kVariants, false), calls(m.args, kVariants, true));  // loaded when called
    for (const Problem& p : shapes) {
        std::unique_ptr<LtFp8> plan = lib.lt ? std::make_unique<LtFp8>(p, 1.f / kFp8Amplitude) : nullptr;
        if (plan) plan->choose(lib.lt);
        std::deque<kwiki::InputSets<Operands>> inputs;  // per variant: its input sets (zeros: one), alive for the runner
        std::deque<kwiki::DeviceBuffer<uint8_t>> outputs;
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            const uint64_t seed = kwiki::hash64(m.seed, 1000 + p.M + 7ull * p.N + 13ull * p.K + uint64_t(v.dtype));
            auto& in = inputs.emplace_back(v.zeros ? 1 : m.sets, seed, [&](Operands& s, uint64_t sa) { s.fill(p, v.dtype, v.zeros, sa, samples); });
            auto& C = outputs.emplace_back(size_t(p.M) * p.N * output_bytes(v.dtype));
            kwiki::Case c = gemm_case(v, p);
            c.launch = [&, plan = plan.get()](cudaStream_t st) { run_gemm(lib, plan, v.dtype, p, in.current().A.get(), in.current().B.get(), C.get(), st); };
            // random inputs: the sampled elements against fp64; zero inputs: exact zeros in every element, on the GPU
            in.bind(c, [&C](cudaStream_t st) { kwiki::poison(C.get(), C.bytes(), st); }, [&C, &v, p](const Operands& s) {
                return v.zeros ? check_zeros_device(C.get(), v.dtype, size_t(p.M) * p.N) : check_samples(C.get(), v.dtype, s.ref, p.N, p.K);
            });
            return c;
        });
    }
    return kwiki::exit_code();
}
