// kwiki_check.cuh: checked CUDA calls, random inputs, poison and the comparison with a higher-precision reference
// (items 1-4 of the protocol in kwiki_bench.cuh). Part of kwiki_bench.cuh: artifacts include that. Includes no other
// kwiki header (the include graph runs one way: check <- device <- record <- runner, args <- runner, cupti <- runner).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace kwiki {

// ===================================================================================================
// Error checking
// ===================================================================================================

[[noreturn]] inline void fail_env(const char* file, int line, const char* what, const char* msg) {
    std::fprintf(stderr, "%s:%d: %s: %s\n", file, line, what, msg);
    std::exit(2);
}

inline void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
    if (err != cudaSuccess) fail_env(file, line, what, cudaGetErrorString(err));
}

inline void check_status(long long status, const char* what, const char* file, int line) {
    if (status != 0) {
        char msg[64];
        std::snprintf(msg, sizeof msg, "status %lld", status);
        fail_env(file, line, what, msg);
    }
}

#define KWIKI_CHECK(expr) ::kwiki::check_cuda((expr), #expr, __FILE__, __LINE__)
#define KWIKI_CHECK_LAST() ::kwiki::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
#define KWIKI_CHECK_STATUS(expr) ::kwiki::check_status(static_cast<long long>(expr), #expr, __FILE__, __LINE__)
#define KWIKI_REQUIRE(cond, msg) \
    do { if (!(cond)) ::kwiki::fail_env(__FILE__, __LINE__, #cond, (msg)); } while (0)

// ===================================================================================================
// Random inputs and poison
// ===================================================================================================

__host__ __device__ inline uint64_t hash64(uint64_t seed, uint64_t i) {  // splitmix64 of (seed, i)
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Uniform in [lo, hi), a function of (seed, i) alone: host and device agree bit for bit.
__host__ __device__ inline float random_unit(uint64_t seed, uint64_t i, float lo, float hi) {
    float u = static_cast<float>(hash64(seed, i) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

template <typename T> struct RandomCast;
template <> struct RandomCast<float> {
    __device__ static float make(uint64_t s, uint64_t i, float lo, float hi) { return random_unit(s, i, lo, hi); }
};
template <> struct RandomCast<double> {
    __device__ static double make(uint64_t s, uint64_t i, float lo, float hi) { return random_unit(s, i, lo, hi); }
};
template <> struct RandomCast<__half> {
    __device__ static __half make(uint64_t s, uint64_t i, float lo, float hi) { return __float2half_rn(random_unit(s, i, lo, hi)); }
};
template <> struct RandomCast<__nv_bfloat16> {
    __device__ static __nv_bfloat16 make(uint64_t s, uint64_t i, float lo, float hi) { return __float2bfloat16_rn(random_unit(s, i, lo, hi)); }
};
// Integer types get raw random bits; lo and hi are ignored (use them for packed formats such as fp4/fp8).
template <> struct RandomCast<uint8_t> {
    __device__ static uint8_t make(uint64_t s, uint64_t i, float, float) { return static_cast<uint8_t>(hash64(s, i) >> 56); }
};
template <> struct RandomCast<uint32_t> {
    __device__ static uint32_t make(uint64_t s, uint64_t i, float, float) { return static_cast<uint32_t>(hash64(s, i) >> 32); }
};

template <typename T>
__global__ void fill_random_kernel(T* p, size_t n, uint64_t seed, float lo, float hi) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        p[i] = RandomCast<T>::make(seed, i, lo, hi);
}

// Fill n elements of a device buffer: floats uniform in [lo, hi), integers with raw random bits.
template <typename T>
void fill_random(T* dev, size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f, cudaStream_t s = 0) {
    size_t blocks = std::min<size_t>((n + 255) / 256, size_t(1) << 16);
    fill_random_kernel<T><<<unsigned(std::max<size_t>(blocks, 1)), 256, 0, s>>>(dev, n, seed, lo, hi);
    KWIKI_CHECK_LAST();
}

// 0xFF in every byte: NaN for fp32/fp16/bf16/fp64, 0xFF.. for integers. Call before each checked run.
inline void poison(void* dev, size_t bytes, cudaStream_t s = 0) { KWIKI_CHECK(cudaMemsetAsync(dev, 0xFF, bytes, s)); }

// ===================================================================================================
// Checking
// ===================================================================================================

struct Tolerance {
    double atol;
    double rtol;
};

// Presets for a value stored in T and computed in higher precision: about two units in the last place
// of T, relative; atol covers results near zero. Scale atol up for long reductions (e.g. by sqrt(K)).
template <typename T> Tolerance tolerance_for();
template <> inline Tolerance tolerance_for<double>() { return {1e-12, 1e-12}; }
template <> inline Tolerance tolerance_for<float>() { return {1e-6, 1e-5}; }
template <> inline Tolerance tolerance_for<__half>() { return {1e-4, 2.0 / 1024}; }        // 10 mantissa bits
template <> inline Tolerance tolerance_for<__nv_bfloat16>() { return {1e-3, 2.0 / 128}; }  // 7 mantissa bits

struct CheckResult {
    bool passed = false;
    double max_abs_err = 0;     // largest |got - ref|
    double max_rel_err = 0;     // largest |got - ref| / max(|ref|, atol)
    double tolerance = 0;       // the rtol used (atol in detail)
    size_t bad = 0;             // elements outside the tolerance (NaN/Inf included)
    std::string reference;      // what the reference is, e.g. "host fp64"
    std::string detail;         // first bad element, atol, ...
};

// The running result of comparing elements (host and device alike): how many are bad, the first bad index,
// the largest absolute and relative errors (INFINITY once an error is not finite).
struct CompareTally {
    unsigned long long bad = 0;
    unsigned long long first_bad = ~0ull;
    double max_abs = 0, max_rel = 0;
};

__host__ __device__ inline bool is_finite(double x) { return fabs(x) <= 1.7976931348623157e308; }  // false for NaN, Inf

// Element i, got g, want e: finite and |g - e| <= atol + rtol * |e|.
__host__ __device__ inline void tally_one(CompareTally& t, unsigned long long i, double g, double e, double atol, double rtol) {
    const double err = fabs(g - e);
    const bool ok = is_finite(g) && err <= atol + rtol * fabs(e);
    if (is_finite(err)) {
        t.max_abs = fmax(t.max_abs, err);
        t.max_rel = fmax(t.max_rel, err / fmax(fabs(e), atol));
    } else {
        t.max_abs = t.max_rel = INFINITY;
    }
    if (!ok) {
        ++t.bad;
        if (i < t.first_bad) t.first_bad = i;
    }
}

// The CheckResult of a tally over n elements; got_first and want_first are the values at t.first_bad.
inline CheckResult compare_result(const CompareTally& t, size_t n, Tolerance tol, std::string reference, double got_first,
                                  double want_first) {
    CheckResult r;
    r.tolerance = tol.rtol;
    r.reference = std::move(reference);
    r.bad = size_t(t.bad);
    r.max_abs_err = t.max_abs;
    r.max_rel_err = t.max_rel;
    r.passed = n > 0 && r.bad == 0;
    char buf[256];
    if (r.bad)
        std::snprintf(buf, sizeof buf, "%zu of %zu outside atol=%.3g rtol=%.3g; first at %llu: got %.9g want %.9g",
                      r.bad, n, tol.atol, tol.rtol, t.first_bad, got_first, want_first);
    else
        std::snprintf(buf, sizeof buf, "%zu elements within atol=%.3g rtol=%.3g", n, tol.atol, tol.rtol);
    r.detail = buf;
    return r;
}

// Every element: finite and |got - ref| <= atol + rtol * |ref|.
inline CheckResult compare(const float* got, const double* ref, size_t n, Tolerance tol, std::string reference) {
    CompareTally t;
    for (size_t i = 0; i < n; ++i) tally_one(t, i, got[i], ref[i], tol.atol, tol.rtol);
    const bool bad = t.bad > 0;
    return compare_result(t, n, tol, std::move(reference), bad ? double(got[t.first_bad]) : 0.0, bad ? ref[t.first_bad] : 0.0);
}

// Exact equality of two byte ranges (copies). max_abs_err counts differing bytes.
inline CheckResult compare_bytes(const void* got, const void* want, size_t n, std::string reference) {
    CheckResult r;
    r.reference = std::move(reference);
    const auto* a = static_cast<const uint8_t*>(got);
    const auto* b = static_cast<const uint8_t*>(want);
    size_t first_bad = n;
    for (size_t i = 0; i < n; ++i)
        if (a[i] != b[i]) { ++r.bad; if (first_bad == n) first_bad = i; }
    r.passed = n > 0 && r.bad == 0;
    r.max_abs_err = double(r.bad);
    r.max_rel_err = n ? double(r.bad) / double(n) : 0;
    char buf[160];
    std::snprintf(buf, sizeof buf, r.bad ? "%zu of %zu bytes differ; first at %zu" : "%zu of %zu bytes equal",
                  r.bad ? r.bad : n, n, first_bad);
    r.detail = buf;
    return r;
}

// Device buffer of T to host floats (for compare()).
template <typename T>
std::vector<float> to_host_float(const T* dev, size_t n) {
    std::vector<T> tmp(n);
    KWIKI_CHECK(cudaMemcpy(tmp.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost));
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<T, __half>) out[i] = __half2float(tmp[i]);
        else if constexpr (std::is_same_v<T, __nv_bfloat16>) out[i] = __bfloat162float(tmp[i]);
        else out[i] = static_cast<float>(tmp[i]);
    }
    return out;
}

// Host references over many rows: fn(begin, end) on contiguous chunks of [0, n), one per hardware thread.
template <typename F>
void parallel_for(size_t n, F fn) {
    size_t workers = std::max(1u, std::thread::hardware_concurrency());
    workers = std::min(workers, std::max<size_t>(n, 1));
    std::vector<std::thread> pool;
    size_t chunk = (n + workers - 1) / workers;
    for (size_t b = 0; b < n; b += chunk) pool.emplace_back(fn, b, std::min(n, b + chunk));
    for (auto& t : pool) t.join();
}

// ===================================================================================================
// Checksums of what a kernel read (so loads cannot be optimised away and the read is verified)
// ===================================================================================================

// Add a warp's 32-bit sum into *out (one atomic per warp): for reference sums, not timed kernels.
__device__ __forceinline__ void warp_sum_add(uint32_t* out, uint32_t v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, v);
}

// One partial sum per block in partial[blockIdx.x], no atomics: thousands of same-address atomics at the end
// of a launch would add microseconds to a 10-100 us kernel. The host adds the partials.
__device__ __forceinline__ void block_partial_sum(uint32_t* partial, uint32_t v) {
    __shared__ uint32_t warp_sums[32];
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t t = 0;
        for (int w = 0; w < int(blockDim.x / 32); ++w) t += warp_sums[w];
        partial[blockIdx.x] = t;
    }
}

}  // namespace kwiki
