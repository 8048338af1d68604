// cublaslt_fp8_block.cu: cuBLASLt's own fp8 block scaling on Hopper, called directly rather than through torch.
//
// C[M,N] = dequant(A)[M,K] * dequant(B)[N,K]^T in bf16, A and B e4m3 codes, row-major with K contiguous (the only
// layout Hopper's fp8 GEMM takes), fp32 accumulation. In cuBLASLt's column-major terms C^T = B (op T) * A^T (op N),
// one cublasLtMatmul "TN", as in cublas_gemm_sm90a. Two ways to scale the same kind of codes:
//
//   lt_tensor   one fp32 scale for A and one for B (CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F, the default mode)
//   lt_block    DeepSeek-V3's fine-grained scales: one fp32 scale per 1 x 128 group of A (the activations) and one
//               per 128 x 128 block of B (the weights), cuBLASLt's VEC128_32F and BLK128x128_32F modes (CUDA 12.9
//               and later), set with CUBLASLT_MATMUL_DESC_A_SCALE_MODE / B_SCALE_MODE
//
// Which operand gets which mode: cuBLASLt's A is our B (the weights, K x N column-major), so its mode is
// BLK128x128_32F; cuBLASLt's B is our A (the activations, K x M column-major), VEC128_32F. The scale tensors are laid
// out as torch._scaled_mm hands them to cuBLASLt on sm_90 (aten/src/ATen/native/cuda/ScaledBlas.cpp):
//   activations, VEC128:  sa[kb * M + m] for row m, 128-group kb (M contiguous, "outer-dim major")
//   weights, BLK128x128:  sb[nb * L4 + kb] for 128-row block nb, 128-group kb, L4 = ceil(K/128) rounded up to 4
// Every scale is a power of two, 2^-8 times 2^0, 2^-1 or 2^-2 drawn per group or block, so the dequantized values
// are exact in fp32 and a scale applied to the wrong group or block shows in the check.
//
// The mode values are the public cublasLt.h's (CUDA 12.9 and 13): A_SCALE_MODE 31, B_SCALE_MODE 32, VEC128_32F 4,
// BLK128x128_32F 5. They are declared here, not in kwiki_cublas.cuh, which every cuBLAS-calling artifact includes.
// A library that rejects them, or offers no algorithm for them on this GPU, ends the run with one located line
// (exit 2) naming the mode and the status.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o cublaslt_fp8_block cublaslt_fp8_block.cu
// Run:   ./cublaslt_fp8_block --shapes 8192x8192x8192 [--variants lt_tensor,lt_block] [--check-samples 2048] [--seed N]
//
// Checking (before timing): sampled elements against a host fp64 dot product of the dequantized values (kwiki::
// gemm_reference), with the fp8-in, bf16-out tolerance of kwiki::gemm_tolerance; C is poisoned with NaN first, so
// an element cuBLASLt did not write fails. Shapes: K a multiple of 128 (whole scale groups), M and N multiples of 16.
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

using e4m3 = __nv_fp8_e4m3;

// cublasLt.h values (see the header comment)
constexpr int kDescAScaleMode = 31;  // CUBLASLT_MATMUL_DESC_A_SCALE_MODE, int32_t
constexpr int kDescBScaleMode = 32;  // CUBLASLT_MATMUL_DESC_B_SCALE_MODE, int32_t
constexpr int32_t kScaleVec128 = 4;  // CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
constexpr int32_t kScaleBlk128 = 5;  // CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F

constexpr float kAmplitude = 256.f;  // codes uniform in [-256, 256), rounded to e4m3 (max 448)
constexpr int kGroup = 128;

enum class Scaling { tensor, block };

struct Problem {
    int M, N, K;
};

int round_up(int x, int m) { return (x + m - 1) / m * m; }
int cdiv(int x, int m) { return (x + m - 1) / m; }

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

// 2^-8 times 2^0, 2^-1 or 2^-2, drawn from (seed, i): a power of two, so code * scale is exact in fp32.
float block_scale(uint64_t seed, size_t i) { return std::ldexp(1.f, -8 - int(kwiki::hash64(seed, i) % 3)); }

struct Operands {
    kwiki::DeviceBuffer<e4m3> A, B;          // codes, [M,K] and [N,K] row-major
    kwiki::DeviceBuffer<float> sa, sb;       // scales in cuBLASLt's layouts (one float each for lt_tensor)
    std::vector<kwiki::GemmSample> ref;

    void fill(const Problem& p, Scaling s, uint64_t seed, int samples) {
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K;
        A = kwiki::DeviceBuffer<e4m3>(nA), B = kwiki::DeviceBuffer<e4m3>(nB);
        fill_codes(A.get(), nA, seed), fill_codes(B.get(), nB, kwiki::hash64(seed, 1));
        const int kb = p.K / kGroup, nb = cdiv(p.N, kGroup), l4 = round_up(kb, 4);
        std::vector<float> ha(s == Scaling::block ? size_t(kb) * p.M : 1, 1.f / kAmplitude);
        std::vector<float> hb(s == Scaling::block ? size_t(nb) * l4 : 1, 1.f / kAmplitude);
        if (s == Scaling::block) {
            for (size_t i = 0; i < ha.size(); ++i) ha[i] = block_scale(kwiki::hash64(seed, 3), i);
            for (size_t i = 0; i < hb.size(); ++i) hb[i] = block_scale(kwiki::hash64(seed, 4), i);
        }
        sa = kwiki::DeviceBuffer<float>(ha.size()), sb = kwiki::DeviceBuffer<float>(hb.size());
        KWIKI_CHECK(cudaMemcpy(sa.get(), ha.data(), ha.size() * sizeof(float), cudaMemcpyHostToDevice));
        KWIKI_CHECK(cudaMemcpy(sb.get(), hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice));
        // the dequantized values the reference multiplies: each code times its group's (block's) scale
        std::vector<float> xA = kwiki::to_host_float(A.get(), nA), xB = kwiki::to_host_float(B.get(), nB);
        for (int m = 0; m < p.M; ++m)
            for (int k = 0; k < p.K; ++k)
                xA[size_t(m) * p.K + k] *= s == Scaling::block ? ha[size_t(k / kGroup) * p.M + m] : ha[0];
        for (int n = 0; n < p.N; ++n)
            for (int k = 0; k < p.K; ++k)
                xB[size_t(n) * p.K + k] *= s == Scaling::block ? hb[size_t(n / kGroup) * l4 + k / kGroup] : hb[0];
        ref = kwiki::gemm_reference(xA, xB, p.M, p.N, p.K, samples, kwiki::hash64(seed, 2));
    }
};

// Sampled elements of the bf16 C against the fp64 samples of this input set.
kwiki::CheckResult check_samples(const void* C, const Operands& s, const Problem& p) {
    const std::vector<float> got = kwiki::gather_samples(static_cast<const __nv_bfloat16*>(C), p.N, s.ref);
    return kwiki::compare_samples(got.data(), s.ref, kwiki::gemm_tolerance(kwiki::GemmPrecision::fp8_bf16, p.K),
                                  "host fp64 of the dequantized values, sampled elements");
}

// ===================================================================================================
// Launchers: the cuBLASLt call, and what a record reports
// ===================================================================================================

const char* mode_name(int32_t mode) {
    return mode == kScaleVec128 ? "VEC128_32F" : mode == kScaleBlk128 ? "BLK128x128_32F" : "SCALAR_32F";
}

// One fp8 cublasLtMatmul for one problem and scaling: descriptors, the heuristic's first algorithm, a workspace.
// The heuristic sees the scale pointers of `first` (the first input set); run() sets each call's own (every input set
// has its scales), a host-side change of the descriptor.
class LtFp8Scaled {
  public:
    static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

    LtFp8Scaled(kwiki::cublasLtHandle_t h, const Problem& p, Scaling s, const Operands& first) : h_(h) {
        const auto& lt = kwiki::cublasLt();
        KWIKI_CHECK_STATUS(lt.MatmulDescCreate(&desc_, kwiki::CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const int32_t op_t = kwiki::CUBLAS_OP_T, op_n = kwiki::CUBLAS_OP_N;
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc_, kwiki::CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc_, kwiki::CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
        if (s == Scaling::block) {
            set_mode(kDescAScaleMode, kScaleBlk128, "A (the weights)");
            set_mode(kDescBScaleMode, kScaleVec128, "B (the activations)");
        }
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&a_, CUDA_R_8F_E4M3, p.K, p.N, p.K));  // our B, K x N
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&b_, CUDA_R_8F_E4M3, p.K, p.M, p.K));  // our A, K x M
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&c_, CUDA_R_16BF, p.N, p.M, p.N));     // C^T, N x M, bf16
        KWIKI_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
        set_scales(first);
        choose(s);
    }
    ~LtFp8Scaled() {
        const auto& lt = kwiki::cublasLt();
        lt.MatrixLayoutDestroy(c_), lt.MatrixLayoutDestroy(b_), lt.MatrixLayoutDestroy(a_), lt.MatmulDescDestroy(desc_);
        cudaFree(workspace_);
    }
    LtFp8Scaled(const LtFp8Scaled&) = delete;
    LtFp8Scaled& operator=(const LtFp8Scaled&) = delete;

    // C = dequant(A) dequant(B)^T with these inputs' codes and scales, on stream st.
    void run(const Operands& in, void* C, cudaStream_t st) const {
        set_scales(in);
        const float alpha = 1.f, beta = 0.f;
        KWIKI_CHECK_STATUS(kwiki::cublasLt().Matmul(h_, desc_, &alpha, in.B.get(), a_, in.A.get(), b_, &beta, C, c_, C, c_, &algo_,
                                                    workspace_, kWorkspaceBytes, st));
    }

  private:
    void set_scales(const Operands& in) const {
        const auto& lt = kwiki::cublasLt();
        const void* scale_a = in.sb.get();  // cuBLASLt's A is our B
        const void* scale_b = in.sa.get();
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc_, kwiki::CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &scale_a, sizeof scale_a));
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc_, kwiki::CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scale_b, sizeof scale_b));
    }

    void set_mode(int attr, int32_t mode, const char* which) {
        const long long status = kwiki::cublasLt().MatmulDescSetAttribute(
            desc_, static_cast<kwiki::cublasLtMatmulDescAttributes_t>(attr), &mode, sizeof mode);
        if (status != kwiki::CUBLAS_STATUS_SUCCESS) {
            const std::string msg = std::string("this cuBLASLt does not take scale mode ") + mode_name(mode) + " for " + which +
                                    " (status " + std::to_string(status) + "): it needs CUDA 12.9 or later";
            kwiki::fail_env(__FILE__, __LINE__, "cublasLtMatmulDescSetAttribute(SCALE_MODE)", msg.c_str());
        }
    }

    // The heuristic's first algorithm with a 32 MiB workspace; exits 2 with the modes named when there is none.
    void choose(Scaling s) {
        const auto& lt = kwiki::cublasLt();
        kwiki::cublasLtMatmulPreference_t pref = nullptr;
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceCreate(&pref));
        const uint64_t limit = kWorkspaceBytes;
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceSetAttribute(pref, kwiki::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit));
        kwiki::cublasLtMatmulHeuristicResult_t result{};
        int found = 0;
        const long long status = lt.MatmulAlgoGetHeuristic(h_, desc_, a_, b_, c_, c_, pref, 1, &result, &found);
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceDestroy(pref));
        if (status != kwiki::CUBLAS_STATUS_SUCCESS || found < 1 || result.state != kwiki::CUBLAS_STATUS_SUCCESS) {
            const std::string msg = std::string("cuBLASLt offers no e4m3 algorithm on this GPU with scale modes ") +
                                    (s == Scaling::block ? "BLK128x128_32F (A) and VEC128_32F (B)" : "SCALAR_32F") +
                                    " (status " + std::to_string(status) + ", " + std::to_string(found) + " found)";
            kwiki::fail_env(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", msg.c_str());
        }
        algo_ = result.algo;
    }

    kwiki::cublasLtHandle_t h_ = nullptr;
    kwiki::cublasLtMatmulDesc_t desc_ = nullptr;
    kwiki::cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
    kwiki::cublasLtMatmulAlgo_t algo_{};
    void* workspace_ = nullptr;
};

kwiki::Case gemm_case(Scaling scaling, const Problem& p) {
    kwiki::Case c;
    c.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", "fp8_e4m3"}, {"scaling", scaling == Scaling::block ? "block" : "tensor"}};
    c.flops = 2.0 * p.M * p.N * double(p.K);
    c.flops_dtype = "fp8";
    const double scales = scaling == Scaling::block
                              ? 4.0 * (double(p.K / kGroup) * p.M + double(cdiv(p.N, kGroup)) * round_up(p.K / kGroup, 4))
                              : 8.0;
    c.bytes = double(size_t(p.M) * p.K + size_t(p.N) * p.K) + 2.0 * double(size_t(p.M) * p.N) + scales;
    return c;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Scaling scaling;
};

constexpr Variant kVariants[] = {{{"lt_tensor"}, Scaling::tensor}, {{"lt_block"}, Scaling::block}};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_shapes<Problem, 3>("shapes", "", "MxNxK,... with M and N multiples of 16, K of 128",
                                                      [](const std::vector<int>& d) { return d[0] % 16 == 0 && d[1] % 16 == 0 && d[2] % kGroup == 0; });
    const int samples = int(m.args.get_int("check-samples", 2048));
    kwiki::Runner& runner = m.start("cublaslt_fp8_block");
    const kwiki::BlasHandles lib(false, true);
    for (const Problem& p : shapes) {
        std::deque<LtFp8Scaled> plans;  // per variant, alive for the runner
        std::deque<kwiki::InputSets<Operands>> inputs;
        std::deque<kwiki::DeviceBuffer<uint8_t>> outputs;
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            const uint64_t seed = kwiki::hash64(m.seed, 2000 + p.M + 7ull * p.N + 13ull * p.K + uint64_t(v.scaling));
            auto& in = inputs.emplace_back(m.sets, seed, [&](Operands& s, uint64_t sd) { s.fill(p, v.scaling, sd, samples); });
            auto& plan = plans.emplace_back(lib.lt, p, v.scaling, in[0]);
            auto& C = outputs.emplace_back(size_t(p.M) * p.N * 2);
            kwiki::Case c = gemm_case(v.scaling, p);
            c.launch = [&plan, &in, &C](cudaStream_t st) { plan.run(in.current(), C.get(), st); };
            in.bind(c, [&C](cudaStream_t st) { kwiki::poison(C.get(), C.bytes(), st); },
                    [&C, p](const Operands& s) { return check_samples(C.get(), s, p); });
            return c;
        });
    }
    return kwiki::exit_code();
}
