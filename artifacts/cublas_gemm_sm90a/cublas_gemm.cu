// cublas_gemm.cu: what cuBLAS reaches on aligned GEMMs, bf16 and tf32, on random and on all-zero inputs.
//
// C[M,N] = A[M,K] * B[N,K]^T, A and B row-major (K contiguous), C row-major, fp32 accumulation: in cuBLAS's
// column-major terms C^T = B^T(op T) * A(op N), one cublasGemmEx call ("TN"). cuBLAS is opened at run
// time (kwiki_cublas.cuh), so the build needs no cuBLAS.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o cublas_gemm cublas_gemm.cu
// Run:   ./cublas_gemm [--variants a,b] [--shapes 2048x2048x2048,...] [--check-samples 2048] [--seed N]
//
// Variants (one cublasGemmEx each; the same call on different data):
//   bf16_random   bf16 in and out, CUBLAS_COMPUTE_32F, inputs uniform in [-1, 1)
//   bf16_zeros    the same call with A and B all zeros (fewer toggling bits: less power, higher clocks)
//   tf32_random   fp32 in and out, CUBLAS_COMPUTE_32F_FAST_TF32, inputs uniform in [-1, 1)
//   tf32_zeros    the same call with A and B all zeros
//
// Checking (before timing): random inputs against a host fp64 dot product on sampled elements, with a
// tolerance for bf16 output (or tf32 inputs) and fp32 accumulation over K; zero inputs must give exact
// zeros in every element (outputs are poisoned with NaN first, so an unwritten element fails).
// The variants of one shape are timed together, interleaved, so random and zeros see the same clocks.
#include <cmath>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"

using bf16 = __nv_bfloat16;

// ===================================================================================================
// Reference
// ===================================================================================================

struct Sample {
    int row, col;
    double value;
};

// `count` entries of A * B^T in fp64, at positions drawn from `seed` (A, B as rounded to their dtype).
std::vector<Sample> host_reference(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K,
                                   int count, uint64_t seed) {
    std::vector<Sample> out(count);
    kwiki::parallel_for(size_t(count), [&](size_t b, size_t e) {
        for (size_t s = b; s < e; ++s) {
            int r = int(kwiki::hash64(seed, 2 * s) % uint64_t(M));
            int c = int(kwiki::hash64(seed, 2 * s + 1) % uint64_t(N));
            double acc = 0;
            for (int k = 0; k < K; ++k) acc += double(A[size_t(r) * K + k]) * double(B[size_t(c) * K + k]);
            out[s] = {r, c, acc};
        }
    });
    return out;
}

// Sampled elements of C (bf16 or fp32 on the device) against the fp64 samples.
kwiki::CheckResult check_samples(const void* C, bool tf32, const std::vector<Sample>& ref, int N, int K) {
    std::vector<float> got(ref.size());
    for (size_t j = 0; j < ref.size(); ++j) {
        const size_t at = size_t(ref[j].row) * N + ref[j].col;
        if (tf32) {
            KWIKI_CHECK(cudaMemcpy(&got[j], static_cast<const float*>(C) + at, sizeof(float), cudaMemcpyDeviceToHost));
        } else {
            bf16 v;
            KWIKI_CHECK(cudaMemcpy(&v, static_cast<const bf16*>(C) + at, sizeof(bf16), cudaMemcpyDeviceToHost));
            got[j] = __bfloat162float(v);
        }
    }
    std::vector<double> want(ref.size());
    for (size_t j = 0; j < ref.size(); ++j) want[j] = ref[j].value;
    // tf32 keeps 10 mantissa bits of each input (relative error ~2^-11 per product, random signs: grows
    // like sqrt(K)); bf16 output rounds once to 8 bits. Inputs in [-1, 1): |C| ~ sqrt(K / 9).
    const kwiki::Tolerance tol = tf32 ? kwiki::Tolerance{2e-3 * std::sqrt(double(K)), 1e-2}
                                      : kwiki::Tolerance{2e-4 * std::sqrt(double(K)), 2.0 / 128};
    return kwiki::compare(got.data(), want.data(), ref.size(), tol, "host fp64 on sampled elements");
}

// Every element exactly zero (either sign); NaN (poison) or anything else fails.
kwiki::CheckResult check_zeros(const void* C, bool tf32, size_t n) {
    std::vector<float> got = tf32 ? kwiki::to_host_float(static_cast<const float*>(C), n)
                                  : kwiki::to_host_float(static_cast<const bf16*>(C), n);
    kwiki::CheckResult r;
    r.reference = "exact zeros (zero inputs)";
    size_t first_bad = n;
    for (size_t i = 0; i < n; ++i)
        if (!(got[i] == 0.0f)) {
            if (first_bad == n) first_bad = i;
            ++r.bad;
            r.max_abs_err = std::isfinite(got[i]) ? std::max(r.max_abs_err, double(std::fabs(got[i]))) : INFINITY;
        }
    r.passed = n > 0 && r.bad == 0;
    r.max_rel_err = r.max_abs_err;
    char buf[160];
    if (r.bad)
        std::snprintf(buf, sizeof buf, "%zu of %zu not zero; first at %zu: %.9g", r.bad, n, first_bad, double(got[first_bad]));
    else
        std::snprintf(buf, sizeof buf, "%zu elements exactly zero", n);
    r.detail = buf;
    return r;
}

// ===================================================================================================
// Launcher
// ===================================================================================================

struct Problem {
    int M, N, K;
};

void run_cublas(kwiki::cublasHandle_t h, const void* A, const void* B, void* C, const Problem& p, bool tf32, cudaStream_t s) {
    const float alpha = 1.f, beta = 0.f;
    const cudaDataType t = tf32 ? CUDA_R_32F : CUDA_R_16BF;
    KWIKI_CHECK_STATUS(kwiki::cublas().SetStream(h, s));
    KWIKI_CHECK_STATUS(kwiki::cublas().GemmEx(h, kwiki::CUBLAS_OP_T, kwiki::CUBLAS_OP_N, p.N, p.M, p.K, &alpha, B, t, p.K, A, t,
                                              p.K, &beta, C, t, p.N,
                                              tf32 ? kwiki::CUBLAS_COMPUTE_32F_FAST_TF32 : kwiki::CUBLAS_COMPUTE_32F,
                                              kwiki::CUBLAS_GEMM_DEFAULT));
}

// ===================================================================================================
// Variants and shapes
// ===================================================================================================

struct VariantInfo {
    const char* name;
    bool tf32;
    bool zeros;
};

const VariantInfo kVariants[] = {
    {"bf16_random", false, false},
    {"bf16_zeros", false, true},
    {"tf32_random", true, false},
    {"tf32_zeros", true, true},
};

const char* kDefaultShapes = "2048x2048x2048,4096x4096x4096,8192x8192x8192,16384x2048x4096";

std::vector<Problem> parse_shapes(const std::string& s) {
    std::vector<Problem> out;
    size_t start = 0;
    while (start < s.size()) {
        size_t comma = s.find(',', start);
        if (comma == std::string::npos) comma = s.size();
        Problem p{};
        if (std::sscanf(s.substr(start, comma - start).c_str(), "%dx%dx%d", &p.M, &p.N, &p.K) != 3 || p.M <= 0 || p.N <= 0 ||
            p.K <= 0 || p.K % 8)
            kwiki::Args::usage("--shapes wants MxNxK,... with K a multiple of 8");
        out.push_back(p);
        start = comma + 1;
    }
    return out;
}

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Args args(argc, argv);
    std::vector<std::string> names;
    for (auto& v : kVariants) names.push_back(v.name);
    args.require_known(names);
    const auto shapes = parse_shapes(args.get_str("shapes", kDefaultShapes));
    const int samples = int(args.get_int("check-samples", 2048));
    const uint64_t seed = args.seed();
    std::fprintf(stderr, "cublas_gemm: seed %llu, %d SMs, L2 %zu MiB\n", (unsigned long long)seed, kwiki::sm_count(),
                 kwiki::l2_bytes() >> 20);

    kwiki::cublasHandle_t handle;
    KWIKI_CHECK_STATUS(kwiki::cublas().Create(&handle));

    for (const Problem& p : shapes) {
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K, nC = size_t(p.M) * p.N;
        std::vector<const VariantInfo*> todo;
        for (auto& v : kVariants)
            if (args.want(v.name)) todo.push_back(&v);
        if (todo.empty()) continue;

        // per variant: its own inputs (random or zeros, in its dtype) and output
        struct Slot {
            void *A = nullptr, *B = nullptr, *C = nullptr;
            kwiki::CheckResult check;
        };
        std::vector<Slot> slots(todo.size());
        for (size_t i = 0; i < todo.size(); ++i) {
            const VariantInfo& v = *todo[i];
            const size_t es = v.tf32 ? 4 : 2;
            Slot& s = slots[i];
            KWIKI_CHECK(cudaMalloc(&s.A, nA * es));
            KWIKI_CHECK(cudaMalloc(&s.B, nB * es));
            KWIKI_CHECK(cudaMalloc(&s.C, nC * es));
            const uint64_t sa = kwiki::hash64(seed, 1000 + p.M + 7ull * p.N + 13ull * p.K + v.tf32), sb = kwiki::hash64(sa, 1);
            if (v.zeros) {
                KWIKI_CHECK(cudaMemset(s.A, 0, nA * es));
                KWIKI_CHECK(cudaMemset(s.B, 0, nB * es));
            } else if (v.tf32) {
                kwiki::fill_random(static_cast<float*>(s.A), nA, sa), kwiki::fill_random(static_cast<float*>(s.B), nB, sb);
            } else {
                kwiki::fill_random(static_cast<bf16*>(s.A), nA, sa), kwiki::fill_random(static_cast<bf16*>(s.B), nB, sb);
            }
            kwiki::poison(s.C, nC * es);
            run_cublas(handle, s.A, s.B, s.C, p, v.tf32, 0);
            KWIKI_CHECK(cudaDeviceSynchronize());
            if (v.zeros) {
                s.check = check_zeros(s.C, v.tf32, nC);
            } else {
                std::vector<float> hA = v.tf32 ? kwiki::to_host_float(static_cast<float*>(s.A), nA)
                                               : kwiki::to_host_float(static_cast<bf16*>(s.A), nA);
                std::vector<float> hB = v.tf32 ? kwiki::to_host_float(static_cast<float*>(s.B), nB)
                                               : kwiki::to_host_float(static_cast<bf16*>(s.B), nB);
                const auto ref = host_reference(hA, hB, p.M, p.N, p.K, samples, kwiki::hash64(sa, 2));
                s.check = check_samples(s.C, v.tf32, ref, p.N, p.K);
            }
            std::fprintf(stderr, "check %-12s %5dx%5dx%5d: %s\n", v.name, p.M, p.N, p.K, s.check.detail.c_str());
        }

        kwiki::Bench bench(args.bench_options());
        for (size_t i = 0; i < todo.size(); ++i) {
            if (!slots[i].check.passed) continue;
            const Slot s = slots[i];
            const bool tf32 = todo[i]->tf32;
            bench.add(todo[i]->name, [=](cudaStream_t st) { run_cublas(handle, s.A, s.B, s.C, p, tf32, st); });
        }
        auto results = bench.run();

        for (size_t i = 0; i < todo.size(); ++i) {
            const VariantInfo& v = *todo[i];
            const size_t es = v.tf32 ? 4 : 2;
            kwiki::Record rec;
            rec.variant = v.name;
            rec.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", v.tf32 ? "tf32" : "bf16"}};
            rec.flops = 2.0 * p.M * p.N * double(p.K);
            rec.bytes = double(nA + nB + nC) * es;
            rec.check = slots[i].check;
            for (auto& b : results)
                if (b.name == v.name) rec.timing = b.timing, rec.clocks = b.clocks;
            rec.extra.emplace_back("inputs", v.zeros ? "zeros" : "random");
            kwiki::emit(rec);
            KWIKI_CHECK(cudaFree(slots[i].A));
            KWIKI_CHECK(cudaFree(slots[i].B));
            KWIKI_CHECK(cudaFree(slots[i].C));
        }
    }
    KWIKI_CHECK_STATUS(kwiki::cublas().Destroy(handle));
    return kwiki::exit_code();
}
