// kwiki_bench.cuh: the one measurement protocol every KernelWiki CUDA artifact uses.
//
// Header-only, C++17, namespace kwiki. Include it and build with
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I<repo>/artifacts/common x.cu
//
// What the protocol guarantees when an artifact follows it:
//  1. Every CUDA call is checked (KWIKI_CHECK, KWIKI_CHECK_LAST after launches, KWIKI_CHECK_STATUS for
//     library status codes where 0 means success). A failure prints file:line to stderr and exits 2.
//  2. Inputs are random, never zeros: fill_random() fills device buffers from a counter-based hash
//     (splitmix64 of seed and index), so any element can also be regenerated on the host (random_unit()).
//  3. Outputs are poisoned (0xFF bytes, a NaN for every float type) before each checked run, so an
//     unwritten element fails the check.
//  4. compare() checks every element against a higher-precision reference: |got - ref| <= atol + rtol*|ref|.
//     NaN or Inf in the output never passes. Tolerance presets per dtype: tolerance_for<T>().
//  5. Timing (Bench): each candidate is warmed up, then all candidates are sampled round-robin
//     (interleaved), so a kernel and its baseline see the same clocks, power and temperature. Before every
//     timed sample an L2Flusher reads twice the L2 size (read from the device), outside the timed region:
//     reading, not writing, so the timed launch starts with a cold L2 that holds no dirty lines to write back.
//     A sample is the elapsed time between two CUDA events recorded on the launch stream around one launch.
//  6. Stopping rule: a candidate stops sampling when it has at least min_samples and the relative standard
//     error of its median is <= target_rse (default 0.5%), or at max_samples, or when its samples have used
//     max_seconds (default 2 s) of wall time. The standard error of the median is the large-sample formula
//     1.2533 * sd / sqrt(n), with sd estimated robustly as IQR / 1.349 (the normal-consistent value), so a
//     single outlier cannot keep a candidate sampling; rse = that / median.
//  7. Clocks: the SM clock (MHz) is read through NVML, loaded at run time with dlopen("libnvidia-ml.so.1"),
//     when a candidate takes its first sample and after its last; null in JSON when NVML is unavailable.
//  8. Output: emit() prints exactly one JSON record per line on stdout (the format of kwiki/record.py),
//     finite numbers only; a record whose check failed carries no timing and makes exit_code() return 1.
//     Everything else (logs) goes to stderr.
//
// Typical main():
//   kwiki::Args args(argc, argv, kVariants);  // kVariants: the table of variants; exits 2 on an unknown --variants
//   const auto shapes = args.get_shapes<Shape, 2>("shapes", "4096x4096", "MxK pairs with K a multiple of 8",
//                                                 [](const std::vector<int>& d) { return d[1] % 8 == 0; });
//   ... kwiki::poison(out, bytes); launch; KWIKI_CHECK_LAST(); ... CheckResult c = kwiki::compare(...);
//   kwiki::Bench bench;  bench.add("vec", [&](cudaStream_t s) { kernel<<<g, b, 0, s>>>(...); });
//   for (auto& r : bench.run()) { kwiki::Record rec; ...; kwiki::emit(rec); }
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

// Every element: finite and |got - ref| <= atol + rtol * |ref|.
inline CheckResult compare(const float* got, const double* ref, size_t n, Tolerance tol, std::string reference) {
    CheckResult r;
    r.tolerance = tol.rtol;
    r.reference = std::move(reference);
    size_t first_bad = n;
    for (size_t i = 0; i < n; ++i) {
        double g = got[i], e = ref[i];
        double err = std::fabs(g - e);
        bool ok = std::isfinite(g) && err <= tol.atol + tol.rtol * std::fabs(e);
        if (std::isfinite(err)) {
            r.max_abs_err = std::max(r.max_abs_err, err);
            r.max_rel_err = std::max(r.max_rel_err, err / std::max(std::fabs(e), tol.atol));
        } else {
            r.max_abs_err = r.max_rel_err = INFINITY;
        }
        if (!ok) {
            if (first_bad == n) first_bad = i;
            ++r.bad;
        }
    }
    r.passed = n > 0 && r.bad == 0;
    char buf[256];
    if (r.bad)
        std::snprintf(buf, sizeof buf, "%zu of %zu outside atol=%.3g rtol=%.3g; first at %zu: got %.9g want %.9g",
                      r.bad, n, tol.atol, tol.rtol, first_bad, double(got[first_bad]), ref[first_bad]);
    else
        std::snprintf(buf, sizeof buf, "%zu elements within atol=%.3g rtol=%.3g", n, tol.atol, tol.rtol);
    r.detail = buf;
    return r;
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
// SM clock through NVML (optional: dlopen at run time, no link dependency)
// ===================================================================================================

class SmClock {
  public:
    static SmClock& get() { static SmClock c; return c; }
    // Current SM clock of the current CUDA device in MHz, or nothing when NVML is unavailable.
    std::optional<double> mhz() {
        if (!dev_) return std::nullopt;
        unsigned v = 0;
        if (clock_(dev_, 1 /* NVML_CLOCK_SM */, &v) != 0) return std::nullopt;
        return double(v);
    }

  private:
    using InitFn = int (*)();
    using ByBusFn = int (*)(const char*, void**);
    using ClockFn = int (*)(void*, int, unsigned*);
    void* dev_ = nullptr;
    ClockFn clock_ = nullptr;

    SmClock() {
        void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!lib) return;
        auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
        auto by_bus = reinterpret_cast<ByBusFn>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
        clock_ = reinterpret_cast<ClockFn>(dlsym(lib, "nvmlDeviceGetClockInfo"));
        char bus[32] = {};
        if (!init || !by_bus || !clock_ || init() != 0) return;
        if (cudaDeviceGetPCIBusId(bus, sizeof bus, current_device()) != cudaSuccess) return;
        if (by_bus(bus, &dev_) != 0) dev_ = nullptr;
    }
};

struct Clocks {
    std::optional<double> sm_mhz_before, sm_mhz_after;
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
// Bench: interleaved timing of named candidates
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
    double max_seconds = 2.0;    // wall time of one candidate's samples (flush and sync included)
    int warmup = 3;              // untimed launches per candidate before sampling
    bool flush_l2 = true;
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

struct BenchResult {
    std::string name;
    Timing timing;
    Clocks clocks;
};

class Bench {
  public:
    using Launch = std::function<void(cudaStream_t)>;

    explicit Bench(BenchOptions opts = {}, cudaStream_t stream = nullptr) : opts_(opts), stream_(stream) {
        if (!stream_) { KWIKI_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); own_ = true; }
        if (opts_.flush_l2) flusher_.emplace();
        KWIKI_CHECK(cudaEventCreate(&start_));
        KWIKI_CHECK(cudaEventCreate(&stop_));
    }
    ~Bench() {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
        if (own_) cudaStreamDestroy(stream_);
    }
    Bench(const Bench&) = delete;
    Bench& operator=(const Bench&) = delete;

    cudaStream_t stream() const { return stream_; }

    // A candidate: one launch (or one library call) on the given stream.
    void add(std::string name, Launch launch) { cands_.push_back({std::move(name), std::move(launch), {}, {}, 0, false}); }

    // Warm up every candidate, then sample them round-robin until each meets the stopping rule.
    std::vector<BenchResult> run() {
        for (auto& c : cands_)
            for (int i = 0; i < opts_.warmup; ++i) c.launch(stream_), KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaStreamSynchronize(stream_));
        for (size_t done = 0; done < cands_.size();) {
            done = 0;
            for (auto& c : cands_) {
                if (c.done) { ++done; continue; }
                sample(c);
            }
        }
        std::vector<BenchResult> out;
        for (auto& c : cands_) out.push_back({c.name, summarize(c.us), c.clocks});
        cands_.clear();
        return out;
    }

  private:
    struct Cand {
        std::string name;
        Launch launch;
        std::vector<double> us;
        Clocks clocks;
        double seconds;
        bool done;
    };

    void sample(Cand& c) {
        if (c.us.empty()) c.clocks.sm_mhz_before = SmClock::get().mhz();
        auto t0 = std::chrono::steady_clock::now();
        if (flusher_) flusher_->flush(stream_);
        KWIKI_CHECK(cudaEventRecord(start_, stream_));
        c.launch(stream_);
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaEventRecord(stop_, stream_));
        KWIKI_CHECK(cudaEventSynchronize(stop_));
        float ms = 0;
        KWIKI_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
        c.us.push_back(double(ms) * 1e3);
        c.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        int n = int(c.us.size());
        bool stable = n >= opts_.min_samples && summarize(c.us).rse <= opts_.target_rse;
        if (stable || n >= opts_.max_samples || (n >= 3 && c.seconds >= opts_.max_seconds)) {
            c.done = true;
            c.clocks.sm_mhz_after = SmClock::get().mhz();
        }
    }

    BenchOptions opts_;
    cudaStream_t stream_ = nullptr;
    bool own_ = false;
    std::optional<L2Flusher> flusher_;
    cudaEvent_t start_ = nullptr, stop_ = nullptr;
    std::vector<Cand> cands_;
};

// ===================================================================================================
// Arguments: --variants a,b,c  --name=value  --name value  --flag
// ===================================================================================================

class Args {
  public:
    // An artifact's arguments: the parse below, then exit 2 when --variants names a variant that is not in
    // `variants` (its table: anything iterable whose items have a `name`).
    template <typename Table>
    Args(int argc, char** argv, const Table& variants) : Args(argc, argv) {
        require_known_in(variants);
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

    // Bench options from --target-rse, --min-samples, --max-samples, --max-seconds, --warmup, --no-flush.
    BenchOptions bench_options() const {
        BenchOptions o;
        o.target_rse = get_double("target-rse", o.target_rse);
        o.min_samples = int(get_int("min-samples", o.min_samples));
        o.max_samples = int(get_int("max-samples", o.max_samples));
        o.max_seconds = get_double("max-seconds", o.max_seconds);
        o.warmup = int(get_int("warmup", o.warmup));
        o.flush_l2 = !has("no-flush");
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
    std::optional<double> flops;     // floating-point operations of one launch
    std::optional<Timing> timing;    // dropped when the check failed
    CheckResult check;
    Clocks clocks;
    Fields extra;                    // registers, local_bytes, other numbers

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
    std::string o = "{\"kwiki_record\":1,\"variant\":" + quote(r.variant);
    o += ",\"params\":" + object(r.params);
    o += ",\"bytes\":" + number(r.bytes) + ",\"flops\":" + number(r.flops);
    const Timing* t = r.check.passed && r.timing ? &*r.timing : nullptr;
    if (t && t->samples > 0 && t->min_us > 0)
        o += ",\"timing\":{\"median_us\":" + number(t->median_us) + ",\"q1_us\":" + number(t->q1_us) +
             ",\"q3_us\":" + number(t->q3_us) + ",\"min_us\":" + number(t->min_us) +
             ",\"samples\":" + std::to_string(t->samples) + ",\"rse\":" + number(t->rse) + "}";
    else
        o += ",\"timing\":null";
    const CheckResult& c = r.check;
    o += ",\"check\":{\"passed\":" + std::string(c.passed ? "true" : "false") +
         ",\"max_abs_err\":" + number(c.max_abs_err) + ",\"max_rel_err\":" + number(c.max_rel_err) +
         ",\"tolerance\":" + number(c.tolerance) +
         ",\"reference\":" + (c.reference.empty() ? std::string("null") : quote(c.reference)) +
         ",\"detail\":" + (c.detail.empty() ? std::string("null") : quote(c.detail)) + "}";
    o += ",\"clocks\":{\"sm_mhz_before\":" + number(r.clocks.sm_mhz_before) +
         ",\"sm_mhz_after\":" + number(r.clocks.sm_mhz_after) + "}";
    o += ",\"extra\":" + object(r.extra) + "}";
    return o;
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
