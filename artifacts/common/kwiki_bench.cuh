// kwiki_bench.cuh: the one measurement protocol every KernelWiki CUDA artifact uses (protocol 2).
//
// Header-only, C++17, namespace kwiki. Include it and build with
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I<repo>/artifacts/common x.cu
// It includes kwiki_cupti.cuh (CUPTI, loaded at run time) and kwiki_runner.cuh (the Runner: check, time, emit).
//
// What the protocol guarantees when an artifact follows it (builds its cases and hands them to kwiki::Runner):
//  1. Every CUDA call is checked (KWIKI_CHECK, KWIKI_CHECK_LAST after launches, KWIKI_CHECK_STATUS for
//     library status codes where 0 means success). A failure prints file:line to stderr and exits 2.
//  2. Inputs are random, never zeros: fill_random() fills device buffers from a counter-based hash
//     (splitmix64 of seed and index), so any element can also be regenerated on the host (random_unit()).
//     A case may keep several pre-filled input sets; each timed sample draws one at random (input_sets).
//  3. Outputs are poisoned (0xFF bytes, a NaN for every float type) before the checked run AND before every
//     timed sample, so an element the timed launch does not write fails when that sample is re-checked.
//  4. compare() checks every element against a higher-precision reference: |got - ref| <= atol + rtol*|ref|.
//     NaN or Inf in the output never passes. Tolerance presets per dtype: tolerance_for<T>(). compare_device()
//     is the same test on the GPU, for outputs too large to copy back at every re-check.
//  5. Check, then time (kwiki::Runner): every case is checked first (poison, launch, compare). The cases that
//     pass are sampled round-robin (interleaved), so a kernel and its baseline see the same clocks, power and
//     temperature. Every timed sample is, in this order: reset L2 persistence, poison the outputs, flush the L2
//     (read twice its size, from the device), then the launch. A random subset of the timed samples, drawn
//     from a seed taken when the run starts (at least 2 per case, about 5%, at most 8), is compared with the
//     reference right after its launch: a kernel that caches, skips or replays work after its first launch
//     fails ("timed sample N differs from the reference"), with no timing.
//  6. All work is on the clock: a sample's time is the GPU's busy time in the sample's window, the union of the
//     intervals of every kernel, memcpy and memset the process ran, on any stream and from any thread, from
//     CUPTI's GPU timestamps (kwiki_cupti.cuh): hidden work counts, host enqueue time (and the idle gaps it
//     leaves between launches) does not. Without CUPTI the time is a CUDA event pair on the launch stream
//     (timing_source "events"). Every record keeps the event median (extra.event_median_us) and, under CUPTI,
//     the span from first start to last end (extra.span_median_us) as cross-checks; both include host time.
//     L2 persistence is reset before every sample. A flush self-test at start-up (a read of a quarter of the
//     L2, hot and after a flush, less an empty launch) must show the flushed read slower, or the run exits 2.
//  7. Stopping rule: a case stops sampling when it has at least min_samples and the relative standard
//     error of its median is <= target_rse (default 0.5%), or at max_samples, or when its samples have used
//     max_seconds (default 2 s) of wall time; never before its early re-checked samples have run. The standard
//     error of the median is 1.2533 * sd / sqrt(n), with sd estimated robustly as IQR / 1.349.
//  8. Clocks and power over each case's sampling window (NVML, loaded at run time), read while each sample's
//     launch runs: the SM clock (min, median, max over the samples), the clock-event reasons (time under the
//     power cap, thermal and hardware slowdown: the windows in which each was set; NVML's violation counters
//     where the reasons are missing) and the board power (energy = power x window); null without NVML.
//  9. Output: emit() prints exactly one JSON record per line on stdout (the format of kwiki/verify/record.py,
//     carrying protocol PROTOCOL_VERSION), finite numbers only; a record whose check failed carries no timing
//     and makes exit_code() return 1. Everything else (logs) goes to stderr.
// 10. `--list-variants` prints the artifact's variant table, one name a line, and exits 0 before any CUDA call.
//
// Typical main() (kwiki_runner.cuh says more):
//   static constexpr kwiki::VariantInfo kVariants[] = {{"cublas", 0, "the baseline"}, {"tiled", 1, "smem tiles"}};
//   kwiki::Args args(argc, argv, kVariants);  // --list-variants; exits 2 on an unknown --variants
//   kwiki::Runner runner(args);
//   std::vector<kwiki::Case> cases;  ... one per wanted variant: launch, poison, check, bytes, params ...
//   runner.run(cases);                // check, time, emit
//   return kwiki::exit_code();
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace kwiki {

// The measurement protocol a record was taken under (kwiki/verify/record.py reads it). 2: every timed sample
// poisoned and flushed, a random subset re-checked, CUPTI spans over every stream, clocks and power per case.
inline constexpr int PROTOCOL_VERSION = 2;

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

// ===================================================================================================
// Device facts and kernel resources
// ===================================================================================================

inline int current_device() { int d = 0; KWIKI_CHECK(cudaGetDevice(&d)); return d; }
inline int device_attr(cudaDeviceAttr a) { int v = 0; KWIKI_CHECK(cudaDeviceGetAttribute(&v, a, current_device())); return v; }
inline int sm_count() { return device_attr(cudaDevAttrMultiProcessorCount); }
inline size_t l2_bytes() { return size_t(device_attr(cudaDevAttrL2CacheSize)); }

struct KernelRegs {
    int registers;
    size_t local_bytes;   // per-thread local memory (spills and stack arrays)
    int max_threads;      // the most threads per block this kernel can launch with
};

inline KernelRegs kernel_regs(const void* func) {
    cudaFuncAttributes a{};
    KWIKI_CHECK(cudaFuncGetAttributes(&a, func));
    return {a.numRegs, a.localSizeBytes, a.maxThreadsPerBlock};
}

// ===================================================================================================
// Checking on the device: compare() for outputs too large to copy back at every re-check
// ===================================================================================================

__host__ __device__ inline double to_double(float v) { return v; }
__host__ __device__ inline double to_double(double v) { return v; }
__host__ __device__ inline double to_double(__half v) { return __half2float(v); }
__host__ __device__ inline double to_double(__nv_bfloat16 v) { return __bfloat162float(v); }

namespace detail {
// out[0] bad count, out[1] first bad index, out[2] and out[3] the bits of the largest absolute and relative
// errors (non-negative doubles, and +Inf, order as their bits do). ref == nullptr: the reference is all zeros.
template <typename T, typename R>
__global__ void compare_kernel(const T* got, const R* ref, size_t n, double atol, double rtol, unsigned long long* out) {
    CompareTally t;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        tally_one(t, i, to_double(got[i]), ref ? to_double(ref[i]) : 0.0, atol, rtol);
    for (int o = 16; o; o >>= 1) {
        t.bad += __shfl_xor_sync(0xffffffffu, t.bad, o);
        t.first_bad = min(t.first_bad, __shfl_xor_sync(0xffffffffu, t.first_bad, o));
        t.max_abs = fmax(t.max_abs, __shfl_xor_sync(0xffffffffu, t.max_abs, o));
        t.max_rel = fmax(t.max_rel, __shfl_xor_sync(0xffffffffu, t.max_rel, o));
    }
    if ((threadIdx.x & 31) == 0) {
        if (t.bad) atomicAdd(&out[0], t.bad), atomicMin(&out[1], t.first_bad);
        atomicMax(&out[2], static_cast<unsigned long long>(__double_as_longlong(t.max_abs)));
        atomicMax(&out[3], static_cast<unsigned long long>(__double_as_longlong(t.max_rel)));
    }
}
}  // namespace detail

// compare() on the GPU: every element of got (n of T) against ref (n of R, or all zeros when ref is nullptr),
// with the same test, figures and detail. Synchronous; blockDim 256 (a multiple of 32: whole warps reduce).
template <typename T, typename R>
CheckResult compare_device(const T* got, const R* ref, size_t n, Tolerance tol, std::string reference) {
    static unsigned long long* scratch = [] {
        unsigned long long* p = nullptr;
        KWIKI_CHECK(cudaMalloc(&p, 4 * sizeof(unsigned long long)));
        return p;
    }();
    unsigned long long init[4] = {0, ~0ull, 0, 0};
    KWIKI_CHECK(cudaMemcpy(scratch, init, sizeof init, cudaMemcpyHostToDevice));
    const size_t blocks = std::min<size_t>((n + 255) / 256, size_t(sm_count()) * 8);
    detail::compare_kernel<T, R><<<unsigned(std::max<size_t>(blocks, 1)), 256>>>(got, ref, n, tol.atol, tol.rtol, scratch);
    KWIKI_CHECK_LAST();
    unsigned long long res[4];
    KWIKI_CHECK(cudaMemcpy(res, scratch, sizeof res, cudaMemcpyDeviceToHost));
    CompareTally t;
    t.bad = res[0], t.first_bad = res[1];
    std::memcpy(&t.max_abs, &res[2], sizeof(double));
    std::memcpy(&t.max_rel, &res[3], sizeof(double));
    double g = 0, w = 0;
    if (t.bad) {
        T gv;
        KWIKI_CHECK(cudaMemcpy(&gv, got + t.first_bad, sizeof gv, cudaMemcpyDeviceToHost));
        g = to_double(gv);
        if (ref) {
            R wv;
            KWIKI_CHECK(cudaMemcpy(&wv, ref + t.first_bad, sizeof wv, cudaMemcpyDeviceToHost));
            w = to_double(wv);
        }
    }
    return compare_result(t, n, tol, std::move(reference), g, w);
}

// ===================================================================================================
// Clocks and power through NVML (optional: dlopen at run time, no link dependency)
// ===================================================================================================

// NVML's values used here (nvml.h): clock types, perf policies of nvmlDeviceGetViolationStatus, clock-event
// reason bits of nvmlDeviceGetCurrentClocksEventReasons (formerly ...ClocksThrottleReasons, same bits).
constexpr int kNvmlClockSm = 1;                                   // NVML_CLOCK_SM
constexpr int kNvmlPerfPolicyPower = 0, kNvmlPerfPolicyThermal = 1;  // NVML_PERF_POLICY_POWER, _THERMAL
constexpr unsigned long long kReasonSwPowerCap = 0x4, kReasonHwSlowdown = 0x8, kReasonSwThermal = 0x20,
                             kReasonHwThermal = 0x40, kReasonHwPowerBrake = 0x80;

class Nvml {
  public:
    static Nvml& get() {
        static Nvml* n = new Nvml();  // never destroyed: it holds only a library handle
        return *n;
    }
    bool available() const { return dev_ != nullptr; }

    // Current SM clock of the current CUDA device in MHz.
    std::optional<double> sm_mhz() const {
        unsigned v = 0;
        if (!dev_ || !clock_ || clock_(dev_, kNvmlClockSm, &v) != 0) return std::nullopt;
        return double(v);
    }
    // Board power, mW (on Ampere and later an average over about a second, NVML's documentation says).
    std::optional<double> power_mw() const {
        unsigned v = 0;
        if (!dev_ || !power_ || power_(dev_, &v) != 0) return std::nullopt;
        return double(v);
    }
    // Time the clocks were held down by a policy (power or thermal) since the driver loaded, ns.
    std::optional<unsigned long long> violation_ns(int policy) const {
        struct { unsigned long long reference_time, violation_time; } v{};  // nvmlViolationTime_t
        if (!dev_ || !violation_ || violation_(dev_, policy, &v) != 0) return std::nullopt;
        return v.violation_time;
    }
    // Why the clocks are below their maximum now: a bit mask of the kReason* values.
    std::optional<unsigned long long> reasons() const {
        unsigned long long v = 0;
        if (!dev_ || !reasons_ || reasons_(dev_, &v) != 0) return std::nullopt;
        return v;
    }

  private:
    using InitFn = int (*)();
    using ByBusFn = int (*)(const char*, void**);
    using ClockFn = int (*)(void*, int, unsigned*);
    using PowerFn = int (*)(void*, unsigned*);
    using ViolationFn = int (*)(void*, int, void*);
    using ReasonsFn = int (*)(void*, unsigned long long*);
    void* dev_ = nullptr;
    ClockFn clock_ = nullptr;
    PowerFn power_ = nullptr;
    ViolationFn violation_ = nullptr;
    ReasonsFn reasons_ = nullptr;

    Nvml() {
        void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return;
        auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
        auto by_bus = reinterpret_cast<ByBusFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
        clock_ = reinterpret_cast<ClockFn>(dlsym(lib, "nvmlDeviceGetClockInfo"));
        power_ = reinterpret_cast<PowerFn>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
        violation_ = reinterpret_cast<ViolationFn>(dlsym(lib, "nvmlDeviceGetViolationStatus"));
        reasons_ = reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
        if (!reasons_) reasons_ = reinterpret_cast<ReasonsFn>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
        char bus[32] = {};
        if (!init || !by_bus || init() != 0) return;
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, current_device()) != cudaSuccess) {
            (void)cudaGetLastError();  // not an error of the artifact's: no clocks, that is all
            return;
        }
        if (by_bus(bus, &dev_) != 0) dev_ = nullptr;
    }
};

// Clocks and power of one case over its sampling window (record.py's Clocks); every figure null without NVML.
struct Clocks {
    std::optional<double> sm_mhz_before, sm_mhz_after;             // the SM clock at the first and the last sample
    std::optional<double> sm_mhz_min, sm_mhz_median, sm_mhz_max;   // over every sample
    std::optional<double> power_cap_s, thermal_s, hw_slowdown_s;   // time held down, summed over the samples' windows
    std::optional<double> energy_j;                                // energy used in the samples' windows
    std::optional<double> window_s;                                // the samples' windows, summed (the denominator)
};

// What NVML says during one sample, read while its launch runs: the SM clock, the clock-event reasons, the board
// power; and its cumulative violation counters before and after the window (read only where the reasons are
// not available: NVML updates them every few milliseconds, coarser than most windows).
struct SampleReading {
    std::optional<double> mhz;
    std::optional<unsigned long long> reasons;
    std::optional<double> power_mw;
    std::optional<unsigned long long> power_ns_before, power_ns_after, thermal_ns_before, thermal_ns_after;
};

// Pure (host-tested): a case's clocks and power, accumulated sample by sample. Time under the power cap, thermal
// slowdown and hardware slowdown: each sample's window counts when the reason bit (SW power cap; SW or HW
// thermal; HW slowdown, HW thermal or HW power brake) is set while its launch runs; without the reasons, the
// violation counters' growth over the window, at most the window. Energy: the board power times the window.
// NVML's cumulative energy counter is not used: it moves in steps of about 13 J on an H200, far coarser than a
// window of microseconds to milliseconds.
class ClockTally {
  public:
    void add(const SampleReading& r, double window_s) {
        if (r.mhz) mhz_.push_back(*r.mhz);
        if (!r.mhz && !r.reasons && !r.power_mw && !r.power_ns_before && !r.thermal_ns_before) return;  // no NVML
        window_s_ += window_s;
        any_ = true;
        if (r.reasons) {
            add_to(power_cap_s_, (*r.reasons & kReasonSwPowerCap) ? window_s : 0.0);
            add_to(thermal_s_, (*r.reasons & (kReasonSwThermal | kReasonHwThermal)) ? window_s : 0.0);
            add_to(hw_slowdown_s_, (*r.reasons & (kReasonHwSlowdown | kReasonHwThermal | kReasonHwPowerBrake)) ? window_s : 0.0);
        } else {
            add_delta(power_cap_s_, r.power_ns_before, r.power_ns_after, window_s);
            add_delta(thermal_s_, r.thermal_ns_before, r.thermal_ns_after, window_s);
        }
        if (r.power_mw) add_to(energy_j_, *r.power_mw * 1e-3 * window_s);
    }

    Clocks summary() const {
        Clocks c;
        if (!mhz_.empty()) {
            std::vector<double> sorted = mhz_;
            std::sort(sorted.begin(), sorted.end());
            c.sm_mhz_before = mhz_.front(), c.sm_mhz_after = mhz_.back();
            c.sm_mhz_min = sorted.front(), c.sm_mhz_max = sorted.back();
            const size_t m = sorted.size() / 2;
            c.sm_mhz_median = sorted.size() % 2 ? sorted[m] : 0.5 * (sorted[m - 1] + sorted[m]);
        }
        c.energy_j = energy_j_, c.power_cap_s = power_cap_s_, c.thermal_s = thermal_s_, c.hw_slowdown_s = hw_slowdown_s_;
        if (any_) c.window_s = window_s_;
        return c;
    }

  private:
    static void add_to(std::optional<double>& acc, double v) { acc = acc.value_or(0.0) + v; }
    // A counter's growth in ns, as seconds, at most the window (a counter that went back: a reset, 0).
    static void add_delta(std::optional<double>& acc, std::optional<unsigned long long> a, std::optional<unsigned long long> b,
                          double window_s) {
        if (a && b) add_to(acc, *b >= *a ? std::min(double(*b - *a) * 1e-9, window_s) : 0.0);
    }
    std::vector<double> mhz_;
    std::optional<double> energy_j_, power_cap_s_, thermal_s_, hw_slowdown_s_;
    double window_s_ = 0;
    bool any_ = false;
};

// ===================================================================================================
// L2 flush
// ===================================================================================================

// Reads the flush buffer; the sink is written only if the XOR of everything read equals the salt, which keeps
// the loads without writing anything in practice.
template <typename V>  // a template, so the header can be included by several translation units
__global__ void l2_flush_kernel(const V* p, size_t n, uint32_t salt, uint32_t* sink) {
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        V v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == salt) *sink = acc;
}

// Reads a buffer of at least 2x the L2 size, so nothing a timed launch reads can be left in L2. It reads rather
// than writes: a write flush leaves the L2 full of dirty lines, and the timed launch would pay for writing them
// back (on an H200, 60 MiB: 13 us, a quarter of a 50 us GEMV). Dirty lines that the previous timed launch left
// are written back during the flush, outside the timed region.
class L2Flusher {
  public:
    explicit L2Flusher(double factor = 2.0) {
        bytes_ = std::max<size_t>(size_t(double(l2_bytes()) * factor), size_t(64) << 20);
        bytes_ = (bytes_ + 15) / 16 * 16;
        KWIKI_CHECK(cudaMalloc(&buf_, bytes_ + 16));
        KWIKI_CHECK(cudaMemset(buf_, 0x5A, bytes_ + 16));
        blocks_ = unsigned(sm_count()) * 4;
    }
    ~L2Flusher() { cudaFree(buf_); }
    L2Flusher(const L2Flusher&) = delete;
    L2Flusher& operator=(const L2Flusher&) = delete;

    void flush(cudaStream_t s) {
        uint32_t* sink = reinterpret_cast<uint32_t*>(static_cast<char*>(buf_) + bytes_);
        l2_flush_kernel<uint4><<<blocks_, 512, 0, s>>>(static_cast<const uint4*>(buf_), bytes_ / 16, 0x9E3779B9u + ++salt_, sink);
        KWIKI_CHECK_LAST();
    }
    size_t bytes() const { return bytes_; }

  private:
    void* buf_ = nullptr;
    size_t bytes_ = 0;
    unsigned blocks_ = 0;
    uint32_t salt_ = 0;
};

// ===================================================================================================
// Timing figures and options
// ===================================================================================================

struct Timing {
    double median_us = 0, q1_us = 0, q3_us = 0, min_us = 0;
    int samples = 0;
    double rse = 0;
};

struct BenchOptions {
    double target_rse = 0.005;   // stop when the median's relative standard error is at most this
    int min_samples = 20;
    int max_samples = 2000;
    double max_seconds = 2.0;    // wall time of one case's samples (poison, flush, launch and syncs; not re-checks)
    int warmup = 3;              // untimed launches per case before sampling
    bool flush_l2 = true;        // false (--no-flush): no flush, no flush self-test (development only)
    bool cupti = true;           // false (--timing=events): CUDA events even where CUPTI is available
    std::optional<uint64_t> recheck_seed;  // --recheck-seed: which samples are re-checked (default: drawn at start)
    bool selftest_record = false;          // --protocol-selftest: emit the flush self-test as a record
};

inline double quantile(const std::vector<double>& sorted, double q) {  // linear interpolation
    if (sorted.empty()) return 0;
    double pos = q * double(sorted.size() - 1);
    size_t lo = size_t(pos);
    size_t hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

// Median, quartiles, min and rse (1.2533 * (IQR/1.349) / sqrt(n) / median) of samples in microseconds.
inline Timing summarize(std::vector<double> us) {
    Timing t;
    std::sort(us.begin(), us.end());
    t.samples = int(us.size());
    if (us.empty()) return t;
    t.min_us = us.front();
    t.q1_us = quantile(us, 0.25);
    t.median_us = quantile(us, 0.5);
    t.q3_us = quantile(us, 0.75);
    double sd = (t.q3_us - t.q1_us) / 1.349;
    t.rse = t.median_us > 0 ? 1.2533 * sd / std::sqrt(double(us.size())) / t.median_us : 0;
    return t;
}

// ===================================================================================================
// Variants and arguments: --variants a,b,c  --name=value  --name value  --flag  --list-variants
// ===================================================================================================

// One row of an artifact's variant table, declared once (artifact.yaml lists the same names, rungs and adds):
//   static constexpr kwiki::VariantInfo kVariants[] = {{"cublas", 0, "the baseline"}, {"tiled", 1, "smem tiles"}};
// An artifact that needs more per variant derives from it, and still declares one table:
//   struct Variant : kwiki::VariantInfo { bool tf32; };
//   static constexpr Variant kVariants[] = {{{"cublas", 0, "the baseline"}, false}, ...};
struct VariantInfo {
    const char* name;
    int rung = -1;          // its place on the artifact's ladder (0: the library baseline); -1: not a rung
    const char* adds = "";  // what this rung adds to the rung below it, in one line
};

class Args {
  public:
    // An artifact's arguments: the parse below; then `--list-variants` prints the table's names, one a line on
    // stdout, and exits 0 (before any CUDA call: construct Args first thing in main); then exit 2 when
    // --variants names a variant that is not in `variants` (its table: anything iterable whose items have a
    // `name`).
    template <typename Table>
    Args(int argc, char** argv, const Table& variants) : Args(argc, argv) {
        if (has("list-variants")) {
            list_variants(variants, stdout);
            std::exit(0);
        }
        require_known_in(variants);
    }

    // The names of a variant table, one a line.
    template <typename Table>
    static void list_variants(const Table& table, FILE* out) {
        for (const auto& v : table) {
            const std::string name = v.name;
            std::fprintf(out, "%s\n", name.c_str());
        }
        std::fflush(out);
    }

    Args(int argc, char** argv) {
        for (int i = 1; i < argc; ++i) {
            std::string a = argv[i];
            if (a.rfind("--", 0) != 0) {  // e.g. a YAML flow list that split "--shapes=a,b" at its commas
                std::fprintf(stderr, "unexpected argument '%s': options are --name=value (quote values with commas)\n",
                             a.c_str());
                std::exit(2);
            }
            a = a.substr(2);
            std::string key = a, value;
            size_t eq = a.find('=');
            if (eq != std::string::npos) key = a.substr(0, eq), value = a.substr(eq + 1);
            else if (i + 1 < argc && std::strncmp(argv[i + 1], "--", 2) != 0) value = argv[++i];
            else value = "1";
            kv_.emplace_back(key, value);
        }
        if (auto v = get("variants")) {
            has_variants_ = true;
            size_t start = 0;
            while (start <= v->size()) {
                size_t comma = v->find(',', start);
                if (comma == std::string::npos) comma = v->size();
                if (comma > start) variants_.push_back(v->substr(start, comma - start));
                start = comma + 1;
            }
        }
    }

    // The last value given for --name, if any.
    std::optional<std::string> get(const std::string& name) const {
        for (auto it = kv_.rbegin(); it != kv_.rend(); ++it)
            if (it->first == name) return it->second;
        return std::nullopt;
    }
    bool has(const std::string& name) const { return get(name).has_value(); }
    std::string get_str(const std::string& name, const std::string& def) const { return get(name).value_or(def); }
    long long get_int(const std::string& name, long long def) const {
        auto v = get(name);
        if (!v) return def;
        char* end = nullptr;
        long long x = std::strtoll(v->c_str(), &end, 0);
        if (end == v->c_str() || *end) usage("--" + name + " wants an integer, got '" + *v + "'");
        return x;
    }
    // --input-sets: how many pre-filled input sets the timed samples rotate through (kwiki::Case::input_sets)
    int input_sets(int def = 2) const {
        const long long n = get_int("input-sets", def);
        if (n < 1 || n > 64) usage("--input-sets wants an integer from 1 to 64");
        return int(n);
    }
    double get_double(const std::string& name, double def) const {
        auto v = get(name);
        if (!v) return def;
        char* end = nullptr;
        double x = std::strtod(v->c_str(), &end);
        if (end == v->c_str() || *end) usage("--" + name + " wants a number, got '" + *v + "'");
        return x;
    }

    // --name as a comma-separated list of sizes, each `dims` positive integers joined by 'x'
    // ("4096x4096x4096,8192x8192x8192"); `def` when absent; exit 2 naming `what` otherwise.
    std::vector<std::vector<int>> get_sizes(const std::string& name, const std::string& def, int dims,
                                            const std::string& what) const {
        const std::string text = get_str(name, def);
        std::vector<std::vector<int>> out;
        size_t start = 0;
        while (start <= text.size()) {
            size_t comma = text.find(',', start);
            if (comma == std::string::npos) comma = text.size();
            const std::string item = text.substr(start, comma - start);
            std::vector<int> size;
            const char* p = item.c_str();
            for (int d = 0; d < dims; ++d) {
                char* end = nullptr;
                const long v = std::strtol(p, &end, 10);
                if (end == p || v <= 0 || v > INT32_MAX || (d + 1 < dims ? *end != 'x' : *end != '\0')) {
                    size.clear();
                    break;
                }
                size.push_back(int(v));
                p = end + 1;
            }
            if (size.empty()) usage("--" + name + " wants " + what + ", got '" + text + "'");
            out.push_back(size);
            start = comma + 1;
        }
        return out;
    }

    // --name as a list of shapes (get_sizes with DIMS sizes each), each built as Shape{d[0], d[1], ...} once
    // valid(d) holds for its sizes d (an artifact's alignment rules); exit 2 naming `what` when it does not.
    template <typename Shape, int DIMS, typename Valid>
    std::vector<Shape> get_shapes(const std::string& name, const std::string& def, const std::string& what, Valid valid) const {
        std::vector<Shape> out;
        for (const auto& d : get_sizes(name, def, DIMS, what)) {
            if (!valid(d)) usage("--" + name + " wants " + what);
            out.push_back(make_shape<Shape>(d, std::make_integer_sequence<int, DIMS>{}));
        }
        return out;
    }

    // Whether variant `name` should run: every variant when --variants is absent.
    bool want(const std::string& name) const {
        return !has_variants_ || std::find(variants_.begin(), variants_.end(), name) != variants_.end();
    }
    const std::vector<std::string>& variants() const { return variants_; }

    // Exit 2 when --variants names a variant the artifact does not have.
    void require_known(std::initializer_list<const char*> known) const { require_known(std::vector<std::string>(known.begin(), known.end())); }
    void require_known(const std::vector<std::string>& known) const {
        for (auto& v : variants_)
            if (std::find(known.begin(), known.end(), v) == known.end()) usage("unknown variant '" + v + "'");
    }

    // The same for an artifact's table of variants: anything iterable whose items have a `name`.
    template <typename Table>
    void require_known_in(const Table& table) const {
        std::vector<std::string> known;
        for (const auto& v : table) known.push_back(v.name);
        require_known(known);
    }

    // Runner options from --target-rse, --min-samples, --max-samples, --max-seconds, --warmup, --no-flush,
    // --timing=cupti|events, --recheck-seed=N, --protocol-selftest; exit 2 on a value out of range.
    BenchOptions bench_options() const {
        BenchOptions o;
        o.target_rse = get_double("target-rse", o.target_rse);
        o.min_samples = int(get_int("min-samples", o.min_samples));
        o.max_samples = int(get_int("max-samples", o.max_samples));
        o.max_seconds = get_double("max-seconds", o.max_seconds);
        o.warmup = int(get_int("warmup", o.warmup));
        o.flush_l2 = !has("no-flush");
        const std::string timing = get_str("timing", "cupti");
        if (timing != "cupti" && timing != "events") usage("--timing wants cupti or events, got '" + timing + "'");
        o.cupti = timing == "cupti";
        if (has("recheck-seed")) o.recheck_seed = uint64_t(get_int("recheck-seed", 0));
        o.selftest_record = has("protocol-selftest");
        if (o.max_samples < 1 || o.min_samples < 0 || o.warmup < 0 || !(o.max_seconds > 0) || !(o.target_rse >= 0))
            usage("--max-samples wants >= 1, --min-samples and --warmup >= 0, --max-seconds > 0, --target-rse >= 0");
        return o;
    }

    // --seed=N, or a fresh seed from the clock (inputs differ from run to run; log it to reproduce).
    uint64_t seed() const {
        if (has("seed")) return uint64_t(get_int("seed", 0));
        return uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^ 0x5eedull;
    }


    [[noreturn]] static void usage(const std::string& msg) {
        std::fprintf(stderr, "usage error: %s\n", msg.c_str());
        std::exit(2);
    }

  private:
    template <typename Shape, int... I>
    static Shape make_shape(const std::vector<int>& d, std::integer_sequence<int, I...>) {
        return Shape{d[I]...};
    }

    std::vector<std::pair<std::string, std::string>> kv_;
    std::vector<std::string> variants_;
    bool has_variants_ = false;
};

// ===================================================================================================
// Result records (JSON, one per line on stdout)
// ===================================================================================================

// A JSON scalar: integer, number, string or bool.
struct Scalar {
    enum Kind { Int, Num, Str, Bool } kind;
    long long i = 0;
    double d = 0;
    std::string s;
    bool b = false;
    Scalar(int v) : kind(Int), i(v) {}
    Scalar(long v) : kind(Int), i(v) {}
    Scalar(long long v) : kind(Int), i(v) {}
    Scalar(unsigned v) : kind(Int), i(v) {}
    Scalar(unsigned long v) : kind(Int), i(static_cast<long long>(v)) {}
    Scalar(unsigned long long v) : kind(Int), i(static_cast<long long>(v)) {}
    Scalar(double v) : kind(Num), d(v) {}
    Scalar(float v) : kind(Num), d(v) {}
    Scalar(const char* v) : kind(Str), s(v) {}
    Scalar(std::string v) : kind(Str), s(std::move(v)) {}
    Scalar(bool v) : kind(Bool), b(v) {}
};

using Fields = std::vector<std::pair<std::string, Scalar>>;

struct Record {
    std::string variant;
    Fields params;                   // shape, dtype, ... (what identifies the configuration)
    std::optional<double> bytes;     // bytes one launch moves (declared)
    std::string bytes_level = "dram";  // where those bytes move: "dram", "l2" or "smem" (the physical gate's level)
    std::optional<double> flops;     // floating-point operations of one launch
    std::string flops_dtype;         // the dtype they run in: "bf16", "tf32", "fp8", "fp16", "fp32"; empty: none
    std::optional<Timing> timing;    // dropped when the check failed
    std::string timing_source;       // "cupti" or "events" (empty without timing)
    int rechecked = 0;               // timed samples compared with the reference
    CheckResult check;
    Clocks clocks;
    Fields extra;                    // registers, local_bytes, event_median_us, other numbers
    std::optional<std::vector<std::string>> kernels;  // kernels CUPTI saw in the timed samples (demangled); none: unseen

    void set_regs(const KernelRegs& r) {
        extra.emplace_back("registers", r.registers);
        extra.emplace_back("local_bytes", static_cast<unsigned long long>(r.local_bytes));
    }
};

namespace detail {
inline std::string quote(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            case '\r': o += "\\r"; break;
            default:
                if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
                else o += char(c);
        }
    }
    return o + "\"";
}
inline std::string number(std::optional<double> v) {  // non-finite and absent become null
    if (!v || !std::isfinite(*v)) return "null";
    char b[40];
    std::snprintf(b, sizeof b, "%.17g", *v);
    return b;
}
inline std::string scalar(const Scalar& v) {
    switch (v.kind) {
        case Scalar::Int: return std::to_string(v.i);
        case Scalar::Num: return std::isfinite(v.d) ? number(v.d) : "null";
        case Scalar::Str: return quote(v.s);
        case Scalar::Bool: return v.b ? "true" : "false";
    }
    return "null";
}
inline std::string object(const Fields& f) {  // non-finite numbers are left out (records hold finite ones only)
    std::string o = "{";
    for (auto& [k, v] : f) {
        if (v.kind == Scalar::Num && !std::isfinite(v.d)) continue;
        if (o.size() > 1) o += ",";
        o += quote(k) + ":" + scalar(v);
    }
    return o + "}";
}
inline int& failures() { static int n = 0; return n; }
}  // namespace detail

// The record as one line of JSON (no newline).
inline std::string to_json(const Record& r) {
    using namespace detail;
    std::string o = "{\"kwiki_record\":1,\"protocol\":" + std::to_string(PROTOCOL_VERSION) + ",\"variant\":" + quote(r.variant);
    o += ",\"params\":" + object(r.params);
    o += ",\"bytes\":" + number(r.bytes) + ",\"bytes_level\":" + quote(r.bytes_level);
    o += ",\"flops\":" + number(r.flops) + ",\"flops_dtype\":" + (r.flops_dtype.empty() ? std::string("null") : quote(r.flops_dtype));
    const Timing* t = r.check.passed && r.timing ? &*r.timing : nullptr;
    const bool timed = t && t->samples > 0 && t->min_us > 0;
    if (timed)
        o += ",\"timing\":{\"median_us\":" + number(t->median_us) + ",\"q1_us\":" + number(t->q1_us) +
             ",\"q3_us\":" + number(t->q3_us) + ",\"min_us\":" + number(t->min_us) +
             ",\"samples\":" + std::to_string(t->samples) + ",\"rse\":" + number(t->rse) + "}";
    else
        o += ",\"timing\":null";
    o += ",\"timing_source\":" + (timed && !r.timing_source.empty() ? quote(r.timing_source) : std::string("null"));
    o += ",\"rechecked\":" + std::to_string(std::max(r.rechecked, 0));
    const CheckResult& c = r.check;
    o += ",\"check\":{\"passed\":" + std::string(c.passed ? "true" : "false") +
         ",\"max_abs_err\":" + number(c.max_abs_err) + ",\"max_rel_err\":" + number(c.max_rel_err) +
         ",\"tolerance\":" + number(c.tolerance) +
         ",\"reference\":" + (c.reference.empty() ? std::string("null") : quote(c.reference)) +
         ",\"detail\":" + (c.detail.empty() ? std::string("null") : quote(c.detail)) + "}";
    const Clocks& k = r.clocks;
    o += ",\"clocks\":{\"sm_mhz_before\":" + number(k.sm_mhz_before) + ",\"sm_mhz_after\":" + number(k.sm_mhz_after) +
         ",\"sm_mhz_min\":" + number(k.sm_mhz_min) + ",\"sm_mhz_median\":" + number(k.sm_mhz_median) +
         ",\"sm_mhz_max\":" + number(k.sm_mhz_max) + ",\"power_cap_s\":" + number(k.power_cap_s) +
         ",\"thermal_s\":" + number(k.thermal_s) + ",\"hw_slowdown_s\":" + number(k.hw_slowdown_s) +
         ",\"energy_j\":" + number(k.energy_j) + ",\"window_s\":" + number(k.window_s) + "}";
    o += ",\"extra\":" + object(r.extra);
    if (r.kernels) {
        o += ",\"kernels\":[";
        for (size_t i = 0; i < r.kernels->size(); ++i) o += (i ? "," : "") + quote((*r.kernels)[i]);
        o += "]";
    }
    return o + "}";
}

// Print one record line (stdout by default). A failed check is counted for exit_code().
inline void emit(const Record& r, FILE* out = stdout) {
    if (!r.check.passed) ++detail::failures();
    std::string line = to_json(r) + "\n";
    std::fwrite(line.data(), 1, line.size(), out);
    std::fflush(out);
}

// 0 when every emitted record passed its check, 1 otherwise: return it from main().
inline int exit_code() { return detail::failures() ? 1 : 0; }

}  // namespace kwiki

#include "kwiki_runner.cuh"  // the Runner (check, time, emit); it includes this header back (#pragma once)
