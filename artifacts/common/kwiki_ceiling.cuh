// kwiki_ceiling.cuh: a measured read ceiling for memory-bound artifacts.
//
// ReadCeiling streams a buffer of exactly the bytes a kernel under test declares (16-byte loads, four in
// flight per thread, a grid that fills every SM), so a record of it, timed in the same Runner run, gives the
// speed of light for that many bytes on this GPU now: time / ceiling time = ceiling GB/s / kernel GB/s.
// The read is checked: the sum of the 32-bit words it loaded (mod 2^32, one partial per block, no atomics)
// must equal the sum regenerated from the fill's hash. vector_loads_sm90a measures the load shapes this choice rests on.
// As a kwiki::Case: launch(s), poison(s) (the partial sums), check_last() (the last launch's partials); case()
// builds one.
#pragma once

#include "kwiki_bench.cuh"

namespace kwiki {

namespace ceiling_detail {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;

// Grid-stride, X loads per round; every round (the last, partial one too) issues its X loads before any use,
// so the tail costs one memory latency, not X of them.
template <int X>
__global__ void __launch_bounds__(kThreads, 1) read_kernel(const uint4* p, size_t n, uint32_t* partial) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += X * stride) {
        uint4 r[X];
#pragma unroll
        for (int u = 0; u < X; ++u) r[u] = i + u * stride < n ? p[i + u * stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < X; ++u) acc += r[u].x + r[u].y + r[u].z + r[u].w;
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

}  // namespace ceiling_detail

class ReadCeiling {
  public:
    // A buffer of `bytes` (rounded up to 16) filled with random words.
    ReadCeiling(size_t bytes, uint64_t seed) : bytes_((bytes + 15) / 16 * 16), seed_(seed) {
        KWIKI_CHECK(cudaMalloc(&buf_, bytes_));
        fill_random(reinterpret_cast<uint32_t*>(buf_), bytes_ / 4, seed_);
        int per_sm = 0;
        KWIKI_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel(), ceiling_detail::kThreads, 0));
        grid_ = unsigned(std::max(per_sm, 1) * sm_count());
        KWIKI_CHECK(cudaMalloc(&sum_, (grid_ + 1) * sizeof(uint32_t)));
        KWIKI_CHECK(cudaMemset(sum_, 0, (grid_ + 1) * sizeof(uint32_t)));  // [grid_]: ref_sum adds into it
    }
    ~ReadCeiling() { cudaFree(buf_); cudaFree(sum_); }
    ReadCeiling(const ReadCeiling&) = delete;
    ReadCeiling& operator=(const ReadCeiling&) = delete;

    void launch(cudaStream_t s) {
        ceiling_detail::read_kernel<ceiling_detail::kInFlight>
            <<<grid_, ceiling_detail::kThreads, 0, s>>>(static_cast<const uint4*>(buf_), bytes_ / 16, sum_);  // partials
    }

    // Every partial sum poisoned (0xFF bytes): a block that wrote none leaves the total wrong.
    void poison(cudaStream_t s) { KWIKI_CHECK(cudaMemsetAsync(sum_, 0xFF, grid_ * sizeof(uint32_t), s)); }

    // The last launch's partial sums against the words regenerated from the fill's hash (computed once).
    CheckResult check_last() {
        const uint32_t want = expected();
        std::vector<uint32_t> part(grid_);
        KWIKI_CHECK(cudaMemcpy(part.data(), sum_, part.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
        uint32_t got = 0;
        for (uint32_t v : part) got += v;
        CheckResult c;
        c.passed = got == want;
        c.max_abs_err = c.passed ? 0.0 : 1.0;
        c.tolerance = 0;
        c.reference = "sum of the 32-bit words mod 2^32, regenerated from the fill's hash";
        char d[96];
        std::snprintf(d, sizeof d, "checksum %u, expected %u", got, want);
        c.detail = d;
        return c;
    }

    // One run from poisoned partial sums, checked.
    CheckResult check() {
        poison(0);
        launch(0);
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaDeviceSynchronize());
        return check_last();
    }

    // The ceiling as a kwiki::Case (the caller sets variant, params and extras); this object must outlive it.
    Case as_case() {
        Case c;
        c.bytes = double(bytes_);
        c.bytes_level = "dram";
        c.flops = 0.0;
        c.launch = [this](cudaStream_t s) { launch(s); };
        c.poison = [this](cudaStream_t s) { poison(s); };
        c.check = [this] { return check_last(); };
        add_regs(c.extra, kernel());
        return c;
    }

    size_t bytes() const { return bytes_; }
    unsigned grid() const { return grid_; }
    const void* kernel() const { return reinterpret_cast<const void*>(ceiling_detail::read_kernel<ceiling_detail::kInFlight>); }

  private:
    // The sum of the buffer's words, regenerated from the fill's hash on the device (once).
    uint32_t expected() {
        if (!expected_) {
            ceiling_detail::ref_sum<<<unsigned(sm_count()) * 8, 256>>>(seed_, bytes_ / 4, sum_ + grid_);
            KWIKI_CHECK_LAST();
            uint32_t v = 0;
            KWIKI_CHECK(cudaMemcpy(&v, sum_ + grid_, sizeof v, cudaMemcpyDeviceToHost));
            expected_ = v;
        }
        return *expected_;
    }

    size_t bytes_;
    uint64_t seed_;
    void* buf_ = nullptr;
    uint32_t* sum_ = nullptr;
    unsigned grid_ = 0;
    std::optional<uint32_t> expected_;
};

}  // namespace kwiki
