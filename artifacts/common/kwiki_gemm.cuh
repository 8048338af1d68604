// kwiki_gemm.cuh: the GEMM the KernelWiki GEMM artifacts compute, its host fp64 reference and its tolerances.
//
// The problem: C[M,N] = A[M,K] * B[N,K]^T with A and B row-major (K contiguous: both wgmma operands K-major)
// and C row-major, fp32 accumulation. cuBLAS computes the same thing with kwiki::gemm_tn (kwiki_cublas.cuh).
//
// Why a sampled reference: an fp64 dot product of length K for all M * N elements is M * N * K host
// multiply-adds (5.5e11 at 8192^3), so the host computes `count` elements at positions drawn from a seed;
// the artifact compares those elements of its output, and (where it has one) every element against cuBLAS.
// gemm_element is the one fp64 dot product: an artifact with a small output (wgmma_sm90a) takes it for
// every element.
//
// Use:
//   // hA, hB: host floats of the inputs
//   const auto ref = kwiki::gemm_reference(hA, hB, M, N, K, 4096, kwiki::hash64(seed, 2));
//   std::vector<float> got(ref.size());  // got[j] = C[ref[j].row * N + ref[j].col]
//   const kwiki::Tolerance tol = kwiki::gemm_tolerance(kwiki::GemmPrecision::bf16, K);
//   kwiki::CheckResult c = kwiki::compare_samples(got.data(), ref, tol, "host fp64 on sampled elements");
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"

namespace kwiki {

// One element of C = A * B^T, computed in fp64.
struct GemmSample {
    int row, col;
    double value;
};

// Element (r, c) of A * B^T in fp64: row r of A and row c of B, K floats each (row-major host copies),
// multiplied and summed in order of k.
inline double gemm_element(const std::vector<float>& A, const std::vector<float>& B, int K, int r, int c) {
    double acc = 0;
    for (int k = 0; k < K; ++k) acc += double(A[size_t(r) * K + k]) * double(B[size_t(c) * K + k]);
    return acc;
}

// `count` entries of A * B^T in fp64, at positions drawn from `seed`: sample s sits at row
// hash64(seed, 2s) % M, column hash64(seed, 2s + 1) % N. A [M,K] and B [N,K] are row-major host copies of
// the inputs as rounded to their dtype (the values the GPU multiplies). The samples are independent, so
// they are computed in parallel; each one sums its K products in order (gemm_element), so the values do not
// depend on the number of threads.
inline std::vector<GemmSample> gemm_reference(const std::vector<float>& A, const std::vector<float>& B, int M, int N, int K,
                                              int count, uint64_t seed) {
    std::vector<GemmSample> out(count);
    parallel_for(size_t(count), [&](size_t b, size_t e) {
        for (size_t s = b; s < e; ++s) {
            const int r = int(hash64(seed, 2 * s) % uint64_t(M));
            const int c = int(hash64(seed, 2 * s + 1) % uint64_t(N));
            out[s] = {r, c, gemm_element(A, B, K, r, c)};
        }
    });
    return out;
}

// got[j] (the output at ref[j]'s row and column) against ref[j].value, for every sample j.
inline CheckResult compare_samples(const float* got, const std::vector<GemmSample>& ref, Tolerance tol, std::string reference) {
    std::vector<double> want(ref.size());
    for (size_t j = 0; j < ref.size(); ++j) want[j] = ref[j].value;
    return compare(got, want.data(), ref.size(), tol, std::move(reference));
}

namespace detail {
template <typename T>
__global__ void gather_kernel(const T* c, const long long* at, float* out, int n) {
    const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) out[i] = float(c[at[i]]);
}
}  // namespace detail

// The output's elements at the samples' positions (C row-major with N columns), gathered on the GPU: a check
// reads 4096 elements instead of copying the whole output to the host (512 MiB of floats at 8192^2 x 2 sets).
template <typename T>
std::vector<float> gather_samples(const T* C, int N, const std::vector<GemmSample>& ref) {
    const int n = int(ref.size());
    std::vector<long long> at(ref.size());
    for (size_t j = 0; j < ref.size(); ++j) at[j] = (long long)ref[j].row * N + ref[j].col;
    long long* d_at = nullptr;
    float* d_out = nullptr;
    KWIKI_CHECK(cudaMalloc(&d_at, at.size() * sizeof(long long) + 1));
    KWIKI_CHECK(cudaMalloc(&d_out, at.size() * sizeof(float) + 1));
    KWIKI_CHECK(cudaMemcpy(d_at, at.data(), at.size() * sizeof(long long), cudaMemcpyHostToDevice));
    if (n > 0) detail::gather_kernel<T><<<(n + 255) / 256, 256>>>(C, d_at, d_out, n);
    KWIKI_CHECK_LAST();
    std::vector<float> out(ref.size());
    KWIKI_CHECK(cudaMemcpy(out.data(), d_out, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
    KWIKI_CHECK(cudaFree(d_at));
    KWIKI_CHECK(cudaFree(d_out));
    return out;
}

// C's elements at the samples' positions (gathered on the GPU) against the samples: the sampled fp64 check.
template <typename T>
CheckResult check_gemm_samples(const T* C, int N, const std::vector<GemmSample>& ref, Tolerance tol, std::string reference) {
    const std::vector<float> got = gather_samples(C, N, ref);
    return compare_samples(got.data(), ref, tol, std::move(reference));
}

// What limits a GEMM output's agreement with the fp64 reference, by the dtypes it reads and writes.
enum class GemmPrecision {
    bf16,      // bf16 in and out: products exact in fp32, fp32 accumulation, one bf16 rounding of C
    tf32,      // fp32 in and out, multiplied in tf32 (10 mantissa bits of each input)
    fp8_bf16,  // e4m3 in, dequantized by power-of-two scales (exact), bf16 out
};

// The tolerance of a K-deep GEMM on inputs uniform in [-1, 1) (|C| ~ sqrt(K / 9)), against fp64 or against
// cuBLAS. tf32 keeps 10 mantissa bits of each input: relative error ~2^-11 per product, random signs, so it
// grows like sqrt(K); bf16 output rounds once to 8 bits, and the reference may itself be a rounded output
// (cuBLAS): two roundings, rtol 2^-6. fp8: the dequantized products are exact in fp32, so the bf16 output
// rounding (half an ulp, 2^-8 relative at most) dominates: rtol 2^-7.
inline Tolerance gemm_tolerance(GemmPrecision p, int K) {
    switch (p) {
        case GemmPrecision::tf32: return {2e-3 * std::sqrt(double(K)), 1e-2};
        case GemmPrecision::fp8_bf16: return {2e-4 * std::sqrt(double(K)), 1.0 / 128};
        case GemmPrecision::bf16: break;
    }
    return {2e-4 * std::sqrt(double(K)), 2.0 / 128};
}

}  // namespace kwiki
