// kwiki_clock.cuh: the clock a kernel ran at, counted by the kernel itself (protocol 3). Part of kwiki_bench.cuh.
//
// NVML's SM clock is a reading of what the driver asked for, sampled beside the launch; under tensor-core load the
// SMs run slower than it says. A kernel of ours that opts in stamps clock64() (SM cycles) and %globaltimer (ns)
// at the start and at the end of one thread of CTA 0; cycles over nanoseconds is the clock that CTA ran at:
//
//   __global__ void k(...) { kwiki::clock_begin(); ...work...; kwiki::clock_end(); }
//   c.clock = kwiki::clock_stamp();   // the Case: the runner zeroes the stamp before each timed sample, reads it
//                                     // after, and the record's clocks.sm_mhz_effective is the median over samples
//
// One stamp per translation unit (an artifact is one); the last CTA 0 to finish leaves its stamps. The stamps
// cost two clock reads and two stores in one thread. %globaltimer ticks in steps of up to a microsecond on some
// parts: kernels shorter than about 100 us give no reliable figure (the runner ignores stamps under 20 us).
#pragma once

#include "kwiki_check.cuh"

#include <cuda_runtime.h>

#include <optional>

namespace kwiki {

struct ClockStamp {
    unsigned long long c0, t0, c1, t1;  // clock64 and %globaltimer at the start and at the end
};

namespace detail {
__device__ ClockStamp g_clock_stamp;
}

__device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ bool clock_thread() {
    return blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x == 0 && threadIdx.y == 0 &&
           threadIdx.z == 0;
}

// The stamps are written by atomic exchange, not plain stores: a kernel whose SASS expectations forbid STG (a
// TMA-store epilogue proves it has none) keeps proving it.
__device__ __forceinline__ void put(unsigned long long* at, unsigned long long v) { atomicExch(at, v); }

__device__ __forceinline__ void clock_begin() {
    if (clock_thread()) {
        const unsigned long long t = globaltimer_ns(), c = clock64();
        put(&detail::g_clock_stamp.t0, t);
        put(&detail::g_clock_stamp.c0, c);
    }
}

__device__ __forceinline__ void clock_end() {
    if (clock_thread()) {
        const unsigned long long c = clock64(), t = globaltimer_ns();
        put(&detail::g_clock_stamp.c1, c);
        put(&detail::g_clock_stamp.t1, t);
    }
}

// The device address of this translation unit's stamp (a Case's `clock`).
inline ClockStamp* clock_stamp() {
    void* p = nullptr;
    KWIKI_CHECK(cudaGetSymbolAddress(&p, detail::g_clock_stamp));
    return static_cast<ClockStamp*>(p);
}

// Pure (host-tested): the clock in MHz a stamp shows; none when it is unset, goes backwards or spans under 20 us.
inline std::optional<double> stamp_mhz(const ClockStamp& s) {
    if (s.t1 <= s.t0 || s.c1 <= s.c0 || s.t0 == 0 || s.t1 - s.t0 < 20000) return std::nullopt;
    return double(s.c1 - s.c0) / double(s.t1 - s.t0) * 1e3;
}

}  // namespace kwiki
