// protocol.cu: the measurement protocol's self-tests, as records a page can make claims about
// (wiki/nvidia/patterns/benchmarking.md). Every case runs on the shared kwiki::Runner, as any artifact's does.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o protocol protocol.cu
// Run: ./protocol --sustained-gemm=8192x8192x8192 --twin-gemm=8192x8192x8192 [--variants a,b,c] [--gemm-launches=100]
//      (the GEMM sizes: the manifest's shapes)
//
// Variants (not a ladder: each one shows one thing the protocol does, or why it does it):
//   l2_read_cold    a checked read of a quarter of the L2, flushed from the L2 before every sample (the protocol's
//                   default): DRAM bytes
//   l2_read_hot     the same read without the flush (flush_l2 = false: an untimed launch first brings the buffer into
//                   the L2): L2 bytes. Cold over hot is what the flush is worth at this size
//   empty_kernel    one thread writes one word: the timer's fixed cost. time_us is CUPTI's GPU busy time,
//                   extra.event_median_us the CUDA event pair around the same launch (which counts the enqueue)
//   gemm_sustained  --gemm-launches (100) cuBLAS bf16 GEMMs of 8192^3 back to back per sample, for about 2 s of
//                   samples: the SM clock (clocks.sm_mhz_*) and the share of the samples' windows under the power cap
//                   (extra.power_capped_share, from the Runner's NVML window) under sustained load
//   twin_seq_a/b    one cuBLAS bf16 GEMM (8192^3 in the manifest), timed twice back to back: all of a's samples, then all of b's
//                   (two Runner calls), right after gemm_sustained. extra.twin_gap on b: |median a / median b - 1|
//   twin_int_a/b    the same GEMM twice in one Runner call: a's and b's samples interleaved (the protocol's way).
//                   extra.twin_gap on b likewise
// Checks: the reads' sum of 32-bit words against the sum regenerated from the fill's hash; the empty kernel's
// word; the GEMMs at 256 sampled elements against a host fp64 reference (kwiki_gemm.cuh).
#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"
#include "kwiki_gemm.cuh"

#include <cmath>
#include <cstring>

namespace {

using bf16 = __nv_bfloat16;

// ===================================================================================================
// Kernels
// ===================================================================================================

// Grid-stride read of n 16-byte chunks, 4 in flight, one partial sum per block.
__global__ void __launch_bounds__(256) read_kernel(const uint4* p, size_t n, uint32_t* partial) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += 4 * stride) {
        uint4 r[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) r[u] = i + u * stride < n ? p[i + u * stride] : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int u = 0; u < 4; ++u) acc += r[u].x + r[u].y + r[u].z + r[u].w;
    }
    kwiki::block_partial_sum(partial, acc);
}

__global__ void ref_sum(uint64_t seed, size_t n_words, uint32_t* out) {
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n_words; i += size_t(gridDim.x) * blockDim.x)
        acc += uint32_t(kwiki::hash64(seed, i) >> 32);
    kwiki::warp_sum_add(out, acc);
}

__global__ void empty_kernel(uint32_t* word, uint32_t value) {
    if (threadIdx.x == 0) *word = value;
}

// An exact check: `got` must be `want`.
kwiki::CheckResult exact(uint32_t got, uint32_t want, const char* reference) {
    kwiki::CheckResult r;
    r.passed = got == want;
    r.tolerance = 0;
    r.reference = reference;
    r.detail = "got " + std::to_string(got) + ", expected " + std::to_string(want);
    return r;
}

// ===================================================================================================
// Launchers: each variant's buffers, launch, poison and check
// ===================================================================================================

// A read of `bytes` (a quarter of the L2) with its checksum, as a Case; `flush`: the protocol's flush before each sample.
struct L2Read {
    size_t bytes;
    uint64_t seed;
    unsigned grid;
    uint4* buf = nullptr;
    uint32_t* partial = nullptr;
    uint32_t want = 0;

    L2Read(size_t b, uint64_t s) : bytes(b / 16 * 16), seed(s), grid(unsigned(kwiki::sm_count()) * 4) {
        KWIKI_CHECK(cudaMalloc(&buf, bytes));
        KWIKI_CHECK(cudaMalloc(&partial, (grid + 1) * sizeof(uint32_t)));
        kwiki::fill_random(reinterpret_cast<uint32_t*>(buf), bytes / 4, seed);
        KWIKI_CHECK(cudaMemset(partial + grid, 0, sizeof(uint32_t)));
        ref_sum<<<unsigned(kwiki::sm_count()) * 8, 256>>>(seed, bytes / 4, partial + grid);
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaMemcpy(&want, partial + grid, sizeof want, cudaMemcpyDeviceToHost));
    }
    ~L2Read() { cudaFree(buf), cudaFree(partial); }

    kwiki::Case as_case(const char* name, bool flush) {
        kwiki::Case c;
        c.variant = name;
        c.params = {{"bytes", static_cast<unsigned long long>(bytes)},
                    {"l2_bytes", static_cast<unsigned long long>(kwiki::l2_bytes())}};
        c.bytes = double(bytes);
        c.bytes_level = flush ? "dram" : "l2";
        c.flush_l2 = flush;
        c.launch = [this](cudaStream_t s) { read_kernel<<<grid, 256, 0, s>>>(buf, bytes / 16, partial); };
        c.poison = [this](cudaStream_t s) { KWIKI_CHECK(cudaMemsetAsync(partial, 0xFF, grid * sizeof(uint32_t), s)); };
        c.check = [this] {
            std::vector<uint32_t> part(grid);
            KWIKI_CHECK(cudaMemcpy(part.data(), partial, grid * sizeof(uint32_t), cudaMemcpyDeviceToHost));
            uint32_t got = 0;
            for (uint32_t v : part) got += v;
            return exact(got, want, "sum of the 32-bit words mod 2^32, regenerated from the fill's hash");
        };
        kwiki::add_regs(c.extra, reinterpret_cast<const void*>(read_kernel));
        return c;
    }
};

// One thread writes one word: the timer's fixed cost, as a Case.
struct EmptyKernel {
    uint32_t* word = nullptr;
    uint32_t value;

    explicit EmptyKernel(uint32_t v) : value(v) { KWIKI_CHECK(cudaMalloc(&word, sizeof(uint32_t))); }
    ~EmptyKernel() { cudaFree(word); }

    kwiki::Case as_case() {
        kwiki::Case c;
        c.variant = "empty_kernel";
        c.params = {{"threads", 32}};
        c.launch = [this](cudaStream_t s) { empty_kernel<<<1, 32, 0, s>>>(word, value); };
        c.poison = [this](cudaStream_t s) { kwiki::poison(word, sizeof(uint32_t), s); };
        c.check = [this] {
            uint32_t got = 0;
            KWIKI_CHECK(cudaMemcpy(&got, word, sizeof got, cudaMemcpyDeviceToHost));
            return exact(got, value, "the word the kernel was asked to write");
        };
        return c;
    }
};

// A square bf16 GEMM (C = A B^T, cuBLAS) with a sampled fp64 reference; `launches` GEMMs back to back per launch.
struct Gemm {
    int n;
    bf16 *A = nullptr, *B = nullptr, *C = nullptr;
    std::vector<kwiki::GemmSample> ref;
    kwiki::cublasHandle_t blas;

    Gemm(int size, uint64_t seed, kwiki::cublasHandle_t h) : n(size), blas(h) {
        const size_t e = size_t(n) * n;
        KWIKI_CHECK(cudaMalloc(&A, e * sizeof(bf16)));
        KWIKI_CHECK(cudaMalloc(&B, e * sizeof(bf16)));
        KWIKI_CHECK(cudaMalloc(&C, e * sizeof(bf16)));
        kwiki::fill_random(A, e, seed);
        kwiki::fill_random(B, e, seed + 1);
        ref = kwiki::gemm_reference(kwiki::to_host_float(A, e), kwiki::to_host_float(B, e), n, n, n, 256, kwiki::hash64(seed, 2));
    }
    ~Gemm() { cudaFree(A), cudaFree(B), cudaFree(C); }

    kwiki::Case as_case(const char* name, int launches) {
        kwiki::Case c;
        c.variant = name;
        c.params = {{"shape", std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n)}, {"M", n}, {"N", n},
                    {"K", n}, {"dtype", "bf16"}, {"launches", launches}};
        c.flops = 2.0 * double(n) * n * n * launches;
        c.flops_dtype = "bf16";
        c.launch = [this, launches](cudaStream_t s) {
            for (int i = 0; i < launches; ++i) kwiki::gemm_tn(blas, A, B, C, n, n, n, kwiki::kGemmBf16, s);
        };
        c.poison = [this](cudaStream_t s) { kwiki::poison(C, size_t(n) * n * sizeof(bf16), s); };
        c.check = [this] {
            return kwiki::check_gemm_samples(C, n, ref, kwiki::gemm_tolerance(kwiki::GemmPrecision::bf16, n),
                                             "host fp64 on sampled elements");
        };
        c.finish = [](kwiki::Record& r) {  // the power-cap share of the NVML window, as a figure a claim can select
            const kwiki::Clocks& k = r.clocks;
            if (k.window_s && *k.window_s > 0) r.extra.emplace_back("power_capped_share", k.power_cap_s.value_or(0.0) / *k.window_s);
            if (k.sm_mhz_min) r.extra.emplace_back("sm_mhz_min", *k.sm_mhz_min);
            if (k.sm_mhz_max) r.extra.emplace_back("sm_mhz_max", *k.sm_mhz_max);
        };
        return c;
    }
};

// extra.twin_gap on `b`: how far apart the two medians are, |a / b - 1|.
void add_gap(const kwiki::Record& a, kwiki::Record& b) {
    if (a.timing && b.timing && b.timing->median_us > 0)
        b.extra.emplace_back("twin_gap", std::fabs(a.timing->median_us / b.timing->median_us - 1.0));
}


// Twins a and b of the GEMM g: back to back (all of a's samples, then all of b's: two Runner calls) or interleaved
// (their samples alternate in one Runner call); extra.twin_gap on b; each emitted when --variants asks for it.
void twins(kwiki::Runner& runner, const kwiki::Args& args, Gemm& g, const char* a, const char* b, bool interleaved) {
    std::vector<kwiki::Record> r;
    if (interleaved) {
        std::vector<kwiki::Case> ab{g.as_case(a, 1), g.as_case(b, 1)};
        r = runner.measure(ab);
    } else {
        std::vector<kwiki::Case> ca{g.as_case(a, 1)}, cb{g.as_case(b, 1)};
        r = runner.measure(ca);
        r.push_back(runner.measure(cb)[0]);
    }
    add_gap(r[0], r[1]);
    if (args.want(a)) kwiki::emit(r[0]);
    if (args.want(b)) kwiki::emit(r[1]);
}

// --OPTION: one square GEMM size NxNxN (the manifest's shapes).
struct GemmShape {
    int M, N, K;
};
int square_gemm(const kwiki::Args& args, const char* option) {
    return args.get_shapes<GemmShape, 3>(option, "", "one NxNxN, a square GEMM", [](const std::vector<int>& d) {
        return d[0] == d[1] && d[1] == d[2];
    }).at(0).M;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr kwiki::VariantInfo kVariants[] = {
    {"l2_read_cold"}, {"l2_read_hot"}, {"empty_kernel"}, {"gemm_sustained"},
    {"twin_seq_a"},   {"twin_seq_b"},  {"twin_int_a"},   {"twin_int_b"},
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const kwiki::Args& args = m.args;
    const int sustained_n = square_gemm(args, "sustained-gemm"), twin_n = square_gemm(args, "twin-gemm");  // the manifest's
    const int gemm_launches = int(args.get_int("gemm-launches", 100));
    if (gemm_launches < 1) kwiki::Args::usage("--gemm-launches must be at least 1");
    kwiki::Runner& runner = m.start("protocol");
    if (args.want("l2_read_cold") || args.want("l2_read_hot")) {  // the flush: one read of a quarter of the L2, cold and hot
        L2Read read(kwiki::l2_bytes() / 4, kwiki::hash64(m.seed, 1));
        kwiki::run_ladder(runner, args, kVariants, [&](const kwiki::VariantInfo& v) { return read.as_case(v.name, std::strcmp(v.name, "l2_read_cold") == 0); },
                          [](const kwiki::VariantInfo& v) { return std::strncmp(v.name, "l2_read_", 8) == 0; });
    }
    if (args.want("empty_kernel")) {  // the timer's fixed cost: CUPTI busy time and the event pair of one near-empty launch
        EmptyKernel empty(uint32_t(kwiki::hash64(m.seed, 3)));
        std::vector<kwiki::Case> cases{empty.as_case()};
        runner.run(cases);
    }
    const bool seq = args.want("twin_seq_a") || args.want("twin_seq_b"), inter = args.want("twin_int_a") || args.want("twin_int_b");
    if (!args.want("gemm_sustained") && !seq && !inter) return kwiki::exit_code();
    const kwiki::BlasHandles lib(true, false);  // cuBLAS: the GEMMs
    const kwiki::cublasHandle_t blas = lib.blas;
    if (args.want("gemm_sustained")) {  // sustained load: what it does to the SM clock and the power cap
        Gemm big(sustained_n, kwiki::hash64(m.seed, 4), blas);
        std::vector<kwiki::Case> cases{big.as_case("gemm_sustained", gemm_launches)};
        runner.run(cases);
    }
    Gemm g(twin_n, kwiki::hash64(m.seed, 5), blas);  // right after the sustained load, as a page's runs follow each other
    if (seq) twins(runner, args, g, "twin_seq_a", "twin_seq_b", false);
    if (inter) twins(runner, args, g, "twin_int_a", "twin_int_b", true);
    return kwiki::exit_code();
}
