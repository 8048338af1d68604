// kwiki_ceiling.cuh: the speed of light of memory-bound artifacts, a read roof fitted over a size sweep.
//
// The roof is bytes / BW. BW comes from a sweep run once per artifact run, on the same Runner as the
// kernels it bounds (flush, CUPTI busy time, re-checks): kSizes buffer sizes from twice the L2 to a few GiB,
// each read by every kernel of roof_kernels() (16-byte loads; grid-stride and contiguous-tile shapes at a few
// unroll and block sizes); at each size the fastest checked kernel's median time is a point, and
// time = t0 + bytes / BW is fitted to the points by least squares weighted by 1/time^2 (each point counts by
// its relative error). t0, the fixed cost of a launch (ramp-up, tail), is fitted and reported but never added
// to the roof: a kernel of any size that beats bytes / BW has moved bytes faster than the fastest read
// kernel's asymptotic rate, so the roof is a bound and "fraction of speed of light" cannot pass 100% beyond
// noise (kwiki warns when it does: the roof is then wrong).
// Every read is checked: the sum of the 32-bit words it loaded (mod 2^32, one partial per block, no atomics)
// must equal the sum regenerated from the fill's hash.
//
// The roof reaches kwiki as a record of the artifact's `ceiling` variant per parameter set (ReadRoof::record):
// no timing (nothing was timed at those bytes), its bytes, and extras roof_gb_per_s, roof_t0_us, roof_r2,
// roof_max_residual, roof_bw_rse, roof_points ("bytes:us:kernel;..."), roof_kernels, roof_us (the roof's time
// for the record's bytes). kwiki/verify/roof.py reads them and fits the points again (the same fit, in Python).
// Use:
//   kwiki::Runner runner(args);
//   kwiki::ReadRoof roof(runner, seed, args.has("check-only"));   // the sweep, now (when the ceiling is wanted)
//   ... runner.run(cases); kwiki::emit(roof.record("read_ceiling", params, bytes));
#pragma once

#include "kwiki_bench.cuh"

#include <string>
#include <vector>

namespace kwiki {

// ===================================================================================================
// The fit (host only: tested by artifacts/common/test/roof_host_test.cu)
// ===================================================================================================

struct RoofPoint {
    double bytes = 0, us = 0;
    std::string kernel;
};

struct RoofFit {
    bool ok = false;
    std::string why;          // when not ok
    double gb_per_s = 0;      // BW: the inverse of the fitted slope
    double t0_us = 0;         // the fitted fixed cost (reported, not in the roof)
    double r2 = 0;            // weighted coefficient of determination
    double max_residual = 0;  // largest |time - (t0 + bytes / BW)| / time over the points
    double bw_rse = 0;        // relative standard error of BW (of the slope)
    int points = 0;
};

// time = t0 + bytes / BW by least squares with weights 1 / time^2; at least 3 points of distinct sizes.
inline RoofFit fit_roof(const std::vector<RoofPoint>& pts) {
    RoofFit f;
    f.points = int(pts.size());
    if (pts.size() < 3) {
        f.why = "fewer than 3 points";
        return f;
    }
    double W = 0, Sb = 0, St = 0, Sbb = 0, Sbt = 0;
    for (const RoofPoint& p : pts) {
        if (!(p.us > 0) || !(p.bytes > 0)) {
            f.why = "a point without a positive time or size";
            return f;
        }
        const double w = 1.0 / (p.us * p.us);
        W += w, Sb += w * p.bytes, St += w * p.us, Sbb += w * p.bytes * p.bytes, Sbt += w * p.bytes * p.us;
    }
    const double det = W * Sbb - Sb * Sb;
    if (!(det > 0)) {
        f.why = "the points' sizes do not differ";
        return f;
    }
    const double slope = (W * Sbt - Sb * St) / det;  // us per byte
    if (!(slope > 0)) {
        f.why = "time does not grow with size";
        return f;
    }
    f.t0_us = (St - slope * Sb) / W;
    f.gb_per_s = 1e-3 / slope;
    const double mean = St / W;
    double ss_res = 0, ss_tot = 0;
    for (const RoofPoint& p : pts) {
        const double w = 1.0 / (p.us * p.us), r = p.us - (f.t0_us + slope * p.bytes);
        ss_res += w * r * r;
        ss_tot += w * (p.us - mean) * (p.us - mean);
        f.max_residual = std::max(f.max_residual, std::fabs(r) / p.us);
    }
    f.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : 1.0;
    f.bw_rse = pts.size() > 2 ? std::sqrt(ss_res / double(pts.size() - 2) * W / det) / slope : 0.0;
    f.ok = true;
    return f;
}

// `count` sizes from twice the L2 (at least 64 MiB) to `top` bytes (at least twice the first), evenly spaced in log,
// multiples of 64 KiB.
inline std::vector<size_t> roof_sizes(size_t l2, size_t top, int count = 8) {
    constexpr size_t kAlign = size_t(64) << 10;
    const double lo = double(std::max<size_t>(2 * l2, size_t(64) << 20));
    const double hi = std::max(double(top), 2 * lo);
    std::vector<size_t> out;
    for (int i = 0; i < count; ++i) {
        const double b = lo * std::pow(hi / lo, count > 1 ? double(i) / (count - 1) : 0.0);
        out.push_back(std::max(kAlign, size_t(b) / kAlign * kAlign));
    }
    return out;
}

// ===================================================================================================
// The read kernels (16-byte loads, checked by their sum)
// ===================================================================================================

namespace ceiling_detail {

__device__ __forceinline__ uint4 ld_stream(const uint4* p) {  // L1::no_allocate, as the GEMVs load their matrix
    uint4 r;
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    return r;
}

// Grid-stride over a grid that fills every SM, X loads per round issued before any use.
template <int X, int T>
__global__ void __launch_bounds__(T, 1) read_stride(const uint4* p, size_t n, uint32_t* partial) {
    const size_t stride = size_t(gridDim.x) * T;
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(T) + threadIdx.x; i < n; i += X * stride) {
        uint4 r[X];
#pragma unroll
        for (int u = 0; u < X; ++u) r[u] = i + u * stride < n ? p[i + u * stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < X; ++u) acc += r[u].x + r[u].y + r[u].z + r[u].w;
    }
    block_partial_sum(partial, acc);
}

// One block per contiguous tile of T * U * R chunks of 16 B (a GEMV block's rows): R rounds of U loads in flight.
template <int U, int T, int R>
__global__ void __launch_bounds__(T) read_tile(const uint4* p, size_t n, uint32_t* partial) {
    const size_t base = blockIdx.x * size_t(T) * U * R + threadIdx.x;
    uint32_t acc = 0;
#pragma unroll
    for (int r = 0; r < R; ++r) {
        uint4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const size_t i = base + size_t(r * U + u) * T;
            v[u] = i < n ? ld_stream(p + i) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) acc += v[u].x + v[u].y + v[u].z + v[u].w;
    }
    block_partial_sum(partial, acc);
}

template <typename Dummy = void>
__global__ void ref_sum(uint64_t seed, size_t n_words, uint32_t* out) {
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n_words; i += size_t(gridDim.x) * blockDim.x)
        acc += uint32_t(hash64(seed, i) >> 32);
    warp_sum_add(out, acc);
}

using ReadFn = void (*)(const uint4*, size_t, uint32_t*);

}  // namespace ceiling_detail

// One read kernel of the sweep: its name, function, block size and the chunks of 16 B a block reads
// (0: grid-stride over a grid of every SM at full occupancy).
struct RoofKernel {
    const char* name;
    ceiling_detail::ReadFn fn;
    int threads;
    int chunks_per_block;
};

inline const std::vector<RoofKernel>& roof_kernels() {
    using namespace ceiling_detail;
    static const std::vector<RoofKernel> k = {
        {"stride_x4_t256", read_stride<4, 256>, 256, 0},
        {"stride_x8_t512", read_stride<8, 512>, 512, 0},
        {"tile_x4_t256_r4", read_tile<4, 256, 4>, 256, 256 * 16},
        {"tile_x8_t256_r2", read_tile<8, 256, 2>, 256, 256 * 16},
        {"tile_x4_t128_r4", read_tile<4, 128, 4>, 128, 128 * 16},
    };
    return k;
}

// ===================================================================================================
// The sweep and the roof records
// ===================================================================================================

class ReadRoof {
  public:
    static constexpr int kSizes = 8;

    // The sweep, timed now on `runner` (its records are kept, not emitted). `check_only`: the reads are
    // checked but nothing is timed, so no roof is fitted (the records say so), and the sizes stop at 4x the L2
    // (sanitizers run the checks slowly). `top`: the largest size (0: 4 GiB, or a quarter of the free device memory
    // when that is less).
    ReadRoof(Runner& runner, uint64_t seed, bool check_only, size_t top = 0) : seed_(seed) {
        size_t free_b = 0, total_b = 0;
        KWIKI_CHECK(cudaMemGetInfo(&free_b, &total_b));
        if (top == 0) top = check_only ? 1 : std::min<size_t>(size_t(4) << 30, free_b / 4);
        sizes_ = roof_sizes(l2_bytes(), top, kSizes);
        bytes_ = sizes_.back();
        KWIKI_CHECK(cudaMalloc(&buf_, bytes_));
        fill_random(reinterpret_cast<uint32_t*>(buf_), bytes_ / 4, seed_);
        size_t most = 1;
        for (const RoofKernel& k : roof_kernels()) most = std::max<size_t>(most, grid(k, bytes_));
        KWIKI_CHECK(cudaMalloc(&partial_, (most + 1) * sizeof(uint32_t)));
        sweep(runner, check_only);
    }
    ~ReadRoof() { cudaFree(buf_); cudaFree(partial_); }
    ReadRoof(const ReadRoof&) = delete;
    ReadRoof& operator=(const ReadRoof&) = delete;

    const RoofFit& fit() const { return fit_; }

    // The `variant` record at `params` for a kernel that moves `bytes`: no timing; the roof in its extras.
    Record record(const std::string& variant, const Fields& params, double bytes) const {
        Record r;
        r.variant = variant;
        r.params = params;
        r.bytes = bytes;
        r.bytes_level = "dram";
        r.check.passed = ok_;
        r.check.reference = "read roof: time = t0 + bytes / BW fitted over a size sweep of checked read kernels";
        r.check.detail = summary_;
        if (fit_.ok) {
            r.extra = {{"roof_gb_per_s", fit_.gb_per_s}, {"roof_t0_us", fit_.t0_us}, {"roof_r2", fit_.r2},
                       {"roof_max_residual", fit_.max_residual}, {"roof_bw_rse", fit_.bw_rse},
                       {"roof_us", bytes * 1e-3 / fit_.gb_per_s}, {"roof_points", points_},
                       {"roof_kernels", kernels_}};
        }
        return r;
    }

  private:
    static size_t grid(const RoofKernel& k, size_t bytes) {
        if (k.chunks_per_block > 0) return (bytes / 16 + k.chunks_per_block - 1) / k.chunks_per_block;
        int per_sm = 0;
        KWIKI_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(k.fn), k.threads, 0));
        return size_t(std::max(per_sm, 1)) * size_t(sm_count());
    }

    // The sum of the first `bytes` of the buffer's words, regenerated from the fill's hash on the device.
    uint32_t expected(size_t bytes) {
        KWIKI_CHECK(cudaMemset(partial_, 0, sizeof(uint32_t)));
        ceiling_detail::ref_sum<<<unsigned(sm_count()) * 8, 256>>>(seed_, bytes / 4, partial_);
        KWIKI_CHECK_LAST();
        uint32_t v = 0;
        KWIKI_CHECK(cudaMemcpy(&v, partial_, sizeof v, cudaMemcpyDeviceToHost));
        return v;
    }

    Case read_case(const RoofKernel& k, size_t bytes, uint32_t want) {
        const unsigned g = unsigned(grid(k, bytes));
        Case c;
        c.variant = std::string("roof_") + k.name;
        c.params = {{"bytes", static_cast<unsigned long long>(bytes)}, {"kernel", k.name}};
        c.bytes = double(bytes);
        c.launch = [this, k, bytes, g](cudaStream_t s) {
            k.fn<<<g, k.threads, 0, s>>>(static_cast<const uint4*>(buf_), bytes / 16, partial_);
        };
        c.poison = [this, g](cudaStream_t s) { KWIKI_CHECK(cudaMemsetAsync(partial_, 0xFF, g * sizeof(uint32_t), s)); };
        c.check = [this, g, want] {
            std::vector<uint32_t> part(g);
            KWIKI_CHECK(cudaMemcpy(part.data(), partial_, g * sizeof(uint32_t), cudaMemcpyDeviceToHost));
            uint32_t got = 0;
            for (uint32_t v : part) got += v;
            CheckResult r;
            r.passed = got == want;
            r.max_abs_err = r.passed ? 0.0 : 1.0;
            r.tolerance = 0;
            r.reference = "sum of the 32-bit words mod 2^32, regenerated from the fill's hash";
            char d[96];
            std::snprintf(d, sizeof d, "checksum %u, expected %u", got, want);
            r.detail = d;
            return r;
        };
        return c;
    }

    void sweep(Runner& runner, bool check_only) {
        std::vector<Case> cases;
        for (size_t b : sizes_) {
            const uint32_t want = expected(b);
            for (const RoofKernel& k : roof_kernels()) cases.push_back(read_case(k, b, want));
        }
        for (const RoofKernel& k : roof_kernels()) kernels_ += (kernels_.empty() ? "" : ",") + std::string(k.name);
        const std::vector<Record> recs = runner.measure(cases);
        std::vector<RoofPoint> pts;
        std::string failed;
        for (size_t i = 0; i < sizes_.size(); ++i) {
            const Record* best = nullptr;
            for (size_t j = 0; j < roof_kernels().size(); ++j) {
                const Record& r = recs[i * roof_kernels().size() + j];
                if (!r.check.passed && failed.empty()) failed = r.variant + " at " + std::to_string(sizes_[i]) + " bytes: " + r.check.detail;
                if (r.check.passed && r.timing && (!best || r.timing->median_us < best->timing->median_us)) best = &r;
            }
            if (best) pts.push_back({double(sizes_[i]), best->timing->median_us, best->variant.substr(5)});
        }
        for (const RoofPoint& p : pts) {
            char b[96];
            std::snprintf(b, sizeof b, "%s%.0f:%.6g:%s", points_.empty() ? "" : ";", p.bytes, p.us, p.kernel.c_str());
            points_ += b;
        }
        char line[320];
        if (!failed.empty()) {
            summary_ = "a read kernel of the sweep failed its check: " + failed;
        } else if (check_only) {
            summary_ = "check-only run: the sweep's reads were checked, nothing timed, no roof fitted";
        } else if (fit_ = fit_roof(pts); !fit_.ok) {
            summary_ = "no roof: " + fit_.why;
        } else {
            std::snprintf(line, sizeof line,
                          "BW %.1f GB/s fitted over %d sizes (%zu to %zu bytes, best of %zu read kernels each); t0 %.2f us "
                          "(not in the roof); R^2 %.6f, largest residual %.2f%%, BW standard error %.2f%%",
                          fit_.gb_per_s, fit_.points, sizes_.front(), sizes_.back(), roof_kernels().size(), fit_.t0_us,
                          fit_.r2, 100 * fit_.max_residual, 100 * fit_.bw_rse);
            summary_ = line;
        }
        if (!failed.empty()) fit_ = RoofFit{};
        ok_ = failed.empty() && (check_only || fit_.ok);
        std::fprintf(stderr, "kwiki: read roof: %s\n", summary_.c_str());
    }

    uint64_t seed_;
    std::vector<size_t> sizes_;
    size_t bytes_ = 0;
    void* buf_ = nullptr;
    uint32_t* partial_ = nullptr;
    bool ok_ = false;
    RoofFit fit_;
    std::string points_, kernels_, summary_;
};

}  // namespace kwiki
