// kwiki_device.cuh: what the device says: its limits (SM count, L2 size), a kernel's registers, the comparison run
// on the GPU (compare_device), and the SM clock, clock-event reasons and power through NVML. Part of kwiki_bench.cuh;
// includes kwiki_check.cuh only.
#pragma once

#include "kwiki_check.cuh"

#include <dlfcn.h>

#include <cstring>
#include <optional>

namespace kwiki {

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
    // The processes holding a compute context on this device (nvmlDeviceGetComputeRunningProcesses_v3), as NVML
    // numbers them (a container's PID namespace may hide them, or number them differently); none: cannot list.
    std::optional<std::vector<unsigned>> compute_pids() const {
        struct Info { unsigned pid; unsigned long long used; unsigned gpu_instance, compute_instance; };  // v2/v3
        if (!dev_ || !procs_) return std::nullopt;
        std::vector<Info> info(64);
        unsigned n = unsigned(info.size());
        if (procs_(dev_, &n, info.data()) != 0) return std::nullopt;
        std::vector<unsigned> pids;
        for (unsigned i = 0; i < n && i < info.size(); ++i) pids.push_back(info[i].pid);
        return pids;
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
    using ProcsFn = int (*)(void*, unsigned*, void*);
    void* dev_ = nullptr;
    ProcsFn procs_ = nullptr;
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
        procs_ = reinterpret_cast<ProcsFn>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
        if (!procs_) procs_ = reinterpret_cast<ProcsFn>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2"));
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
    std::optional<double> sm_mhz_effective;                        // the clock the kernel counted (clock64 / globaltimer)
    std::string sm_mhz_effective_by;                               // "clock64" or "profiler"; empty: none
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

}  // namespace kwiki
