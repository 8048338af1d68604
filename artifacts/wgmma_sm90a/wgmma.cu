// wgmma.cu: tensor-core throughput of wgmma.mma_async m64nNk16 (bf16 in, fp32 accumulate) and m64nNk8 (tf32 in)
// by N, with both operands resident in shared memory: no global traffic in the timed loop, only the multiply.
//
// Each CTA copies a 64-row A tile per warpgroup and one N-row B tile, 128 bytes of K per row (64 bf16 or
// 32 fp32), into shared memory once, laid out as TMA would write them with the 128-byte swizzle (K-major,
// 8-row atoms of 1024 bytes), then every warpgroup runs `iters` k-blocks on the same tiles: 4 wgmmas of
// 32 bytes of K each (k16 for bf16, k8 for tf32), commit, keep one group in
// flight (wait_group 1), like a GEMM main loop whose loads always hit. One CTA per SM (the CTA asks for
// more than half of an SM's shared memory), grid = SM count.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o wgmma wgmma.cu
// Run:   ./wgmma --iters=2048 [--variants a,b] [--seed N]   (--iters: k-blocks per warpgroup, the manifest's shapes)
//
// Variants (n<N>_wg<warpgroups per CTA>):
//   n64_wg1, n128_wg1, n256_wg1   one warpgroup per CTA issuing m64n64k16 / m64n128k16 / m64n256k16
//   n64_wg2, n128_wg2, n256_wg2   two warpgroups per CTA, each on its own A tile, sharing the B tile
//   tf32_n64_wg1, tf32_n128_wg1, tf32_n256_wg1, tf32_n256_wg2
//                                 the same on fp32 data with m64nNk8.f32.tf32.tf32 (inputs rounded to tf32
//                                 on the host first, so the tensor cores drop no bits)
//
// Checking (before timing, every variant): the same kernel run with 3 k-blocks; CTA 0 writes its
// accumulators, and every element of each warpgroup's 64xN tile is compared with 3 * (A B^T) computed in
// fp64 on the host from the same bf16 (or tf32) values (the record's check). Then the timed launch itself
// (--iters k-blocks) is checked, and so are the re-checked timed samples (kwiki::Runner): iters * (A B^T),
// within the bound of fp32 accumulation over 4 * iters wgmmas (iters_tolerance below). Bytes: none (the
// operands stay in shared memory); flops only, in bf16 or tf32.
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "kwiki_gemm.cuh"
#include "sm90.cuh"

using bf16 = __nv_bfloat16;

template <typename T> constexpr int KB = 128 / sizeof(T);  // k-block depth in elements (one 128-byte row)
constexpr int CHECK_ITERS = 3;  // k-blocks in the checked run

// ===================================================================================================
// Reference
// ===================================================================================================

// out[(wg*64 + r) * N + c] = iters * sum_k A[wg*64 + r][k] * B[c][k], in fp64; rows of kb elements.
std::vector<double> host_reference(const std::vector<float>& A, const std::vector<float>& B, int kb, int N, int wgs,
                                   int iters) {
    std::vector<double> out(size_t(64) * wgs * N);
    for (int r = 0; r < 64 * wgs; ++r)
        for (int c = 0; c < N; ++c) out[size_t(r) * N + c] = iters * kwiki::gemm_element(A, B, kb, r, c);
    return out;
}

// The tolerance of the timed launch's output, iters * (A B^T) summed by 4 * iters wgmmas into fp32 accumulators:
// each addition rounds by at most one ulp of the accumulator, which never exceeds iters * max_k-sum |a b|, so
// |error| <= 4 * iters * 2^-23 * iters * max_abs_row_sum (a faithful fp32 sum's bound; the products are exact).
kwiki::Tolerance iters_tolerance(const std::vector<float>& A, const std::vector<float>& B, int kb, int N, int wgs, int iters) {
    double max_abs = 0;
    for (int r = 0; r < 64 * wgs; ++r)
        for (int c = 0; c < N; ++c) {
            double s = 0;
            for (int k = 0; k < kb; ++k) s += std::fabs(double(A[size_t(r) * kb + k]) * double(B[size_t(c) * kb + k]));
            max_abs = std::max(max_abs, s);
        }
    return {1e-3 + 4.0 * iters * 0x1p-23 * iters * max_abs, 1e-3};
}

// fp32 values on the device -> rounded to tf32 (10 explicit mantissa bits, to nearest, ties away) on the
// host and written back, so the device and the reference hold the same values whatever the tensor cores do
// with the 13 low bits; returns the rounded values.
std::vector<float> to_tf32(float* dev, size_t n) {
    std::vector<float> h = kwiki::to_host_float(dev, n);
    for (float& x : h) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        u = (u + 0x1000u) & ~0x1fffu;  // inputs are in [-1, 1): no overflow into the exponent's top
        std::memcpy(&x, &u, 4);
    }
    KWIKI_CHECK(cudaMemcpy(dev, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return h;
}

// ===================================================================================================
// Kernel
// ===================================================================================================

__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// A: (64 * WG) x KB<T> row-major, B: N x KB<T> row-major (T = bf16, or float read as tf32);
// out: (64 * WG) x N fp32, written by CTA 0.
template <typename T, int N, int WG>
__global__ void __launch_bounds__(128 * WG, 1) wgmma_loop(const void* __restrict__ A_, const void* __restrict__ B_, int iters,
                                                          float* __restrict__ out) {
    const T* A = static_cast<const T*>(A_);
    const T* B = static_cast<const T*>(B_);
    extern __shared__ uint8_t smem_raw[];
    uint8_t* base = align1024(smem_raw);
    constexpr int A_ROWS = 64 * WG;
    // Rows of 128 bytes; the 16-byte chunk c of row r sits at chunk c ^ (r % 8): the 128-byte swizzle,
    // which is what the descriptor's layout type tells wgmma to undo. A's rows first, then B's.
    for (int i = threadIdx.x; i < (A_ROWS + N) * 8; i += blockDim.x) {
        const int row = i / 8, chunk = i % 8;
        const T* src = row < A_ROWS ? A + size_t(row) * KB<T> : B + size_t(row - A_ROWS) * KB<T>;
        *reinterpret_cast<uint4*>(base + row * 128 + ((chunk ^ (row & 7)) * 16)) = reinterpret_cast<const uint4*>(src)[chunk];
    }
    sm90::fence_proxy_async();  // the ordinary stores above, before wgmma reads through the async proxy
    __syncthreads();

    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    const uint64_t da = sm90::desc_k_major_sw128(base + wg * 64 * 128);
    const uint64_t db = sm90::desc_k_major_sw128(base + A_ROWS * 128);
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f, sm90::fence_operand(d[i]);

    kwiki::clock_begin();  // the tensor-core loop's clock (kwiki_clock.cuh): cycles and ns of CTA 0's thread 0
    for (int it = 0; it < iters; ++it) {
        sm90::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks)  // +32 bytes along K (one k16 of bf16, one k8 of tf32) = +2 in the descriptor
            sm90::WgmmaOp<T, N>::mma(d, da + 2 * ks, db + 2 * ks, 1);
        sm90::wgmma_commit();
        sm90::wgmma_wait<1>();
    }
    sm90::wgmma_wait<0>();
#pragma unroll
    for (int i = 0; i < N / 2; ++i) sm90::fence_operand(d[i]);
    kwiki::clock_end();

    if (blockIdx.x != 0) return;
    // accumulator layout: rows 16*(t/32) + (t%32)/4 (+8), columns 8j + 2*(t%4) + {0,1}
    const int row = wg * 64 + 16 * (t / 32) + (t % 32) / 4;
#pragma unroll
    for (int j = 0; j < N / 8; ++j) {
        const int col = 8 * j + 2 * (t % 4);
        out[size_t(row) * N + col] = d[4 * j], out[size_t(row) * N + col + 1] = d[4 * j + 1];
        out[size_t(row + 8) * N + col] = d[4 * j + 2], out[size_t(row + 8) * N + col + 1] = d[4 * j + 3];
    }
}

// ===================================================================================================
// Launcher
// ===================================================================================================

struct Launch {
    void (*kernel)(const void*, const void*, int, float*);
    int threads, smem, grid;
};

template <typename T, int N, int WG>
Launch prepare() {
    auto f = wgmma_loop<T, N, WG>;
    const int need = (64 * WG + N) * 128 + 1024;
    // more than half of an SM's shared memory: a second CTA cannot share the SM
    const int per_sm = kwiki::device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    const int smem = std::max(need, per_sm / 2 + 1024);
    KWIKI_REQUIRE(smem <= kwiki::device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin), "tiles do not fit in shared memory");
    KWIKI_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return {f, 128 * WG, smem, kwiki::sm_count()};
}

void run(const Launch& l, const void* A, const void* B, int iters, float* out, cudaStream_t s) {
    l.kernel<<<l.grid, l.threads, l.smem, s>>>(A, B, iters, out);
}

// The operands every variant reads, filled once: the largest any variant reads (A of 2 warpgroups, 128 rows; B of
// N = 256, 256 rows; of 128 bytes each), bf16 (64 per row) and tf32 (fp32 storage rounded to tf32, 32 per row),
// with their host copies for the reference.
struct Operands {
    static constexpr size_t kRowsA = 128, kRowsB = 256;
    kwiki::DeviceBuffer<bf16> A{kRowsA * KB<bf16>}, B{kRowsB * KB<bf16>};
    kwiki::DeviceBuffer<float> A32{kRowsA * KB<float>}, B32{kRowsB * KB<float>};
    std::vector<float> hA, hB, hA32, hB32;

    explicit Operands(uint64_t seed) {
        kwiki::fill_random(A.get(), A.size(), kwiki::hash64(seed, 1));
        kwiki::fill_random(B.get(), B.size(), kwiki::hash64(seed, 2));
        kwiki::fill_random(A32.get(), A32.size(), kwiki::hash64(seed, 3));
        kwiki::fill_random(B32.get(), B32.size(), kwiki::hash64(seed, 4));
        KWIKI_CHECK(cudaDeviceSynchronize());
        hA = kwiki::to_host_float(A.get(), A.size()), hB = kwiki::to_host_float(B.get(), B.size());
        hA32 = to_tf32(A32.get(), A32.size()), hB32 = to_tf32(B32.get(), B32.size());
    }
};

// One variant's case (m64nNk16 on bf16, or m64nNk8 on tf32, by `wgs` warpgroups per CTA): its launch on the shared
// operands into `out`, what its record reports, and its checks: the record's check runs 3 k-blocks (every element
// within 1e-3: products of bf16 or tf32 values are exact in fp32, the error is fp32 accumulation over 3 k-blocks),
// then the timed launch (iters k-blocks) and its re-checks against iters * (A B^T) within iters_tolerance.
kwiki::Case wgmma_case(const Launch& l, int N, int wgs, bool tf32, int iters, const Operands& ops, float* out) {
    const size_t n = size_t(64) * wgs * N;
    const void* a = tf32 ? static_cast<const void*>(ops.A32.get()) : ops.A.get();
    const void* b = tf32 ? static_cast<const void*>(ops.B32.get()) : ops.B.get();
    const std::vector<float>& ha = tf32 ? ops.hA32 : ops.hA;
    const std::vector<float>& hb = tf32 ? ops.hB32 : ops.hB;
    const int kb = tf32 ? KB<float> : KB<bf16>;
    // the timed launch's reference and tolerance (iters k-blocks), for its check and the re-checks
    auto timed_ref = std::make_shared<std::vector<double>>(host_reference(ha, hb, kb, N, wgs, iters));
    const kwiki::Tolerance timed_tol = iters_tolerance(ha, hb, kb, N, wgs, iters);
    kwiki::Case c;
    c.params = {{"N", N}, {"warpgroups", wgs}, {"iters", iters}, {"dtype", tf32 ? "tf32" : "bf16"}};
    // per warpgroup and k-block: 64 x N x KB multiply-adds (4 wgmmas of k16 bf16 or k8 tf32)
    c.flops = double(l.grid) * wgs * double(iters) * 2.0 * 64 * N * kb;
    c.flops_dtype = tf32 ? "tf32" : "bf16";
    c.bytes_level = "smem";  // no bytes declared: the operands are read from shared memory
    c.launch = [&l, a, b, iters, out](cudaStream_t s) { run(l, a, b, iters, out, s); };
    c.poison = [out, n](cudaStream_t s) { kwiki::poison(out, n * sizeof(float), s); };
    c.precheck = [&l, a, b, out, n, &ha, &hb, kb, N, wgs] {
        kwiki::poison(out, n * sizeof(float));
        run(l, a, b, CHECK_ITERS, out, 0);
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaDeviceSynchronize());
        std::vector<float> got = kwiki::to_host_float(out, n);
        std::vector<double> ref = host_reference(ha, hb, kb, N, wgs, CHECK_ITERS);
        return kwiki::compare(got.data(), ref.data(), n, kwiki::Tolerance{1e-3, 1e-3},
                              "host fp64, every element of CTA 0's tiles, 3 k-blocks");
    };
    c.check = [out, n, timed_ref, timed_tol] {
        std::vector<float> got = kwiki::to_host_float(out, n);
        return kwiki::compare(got.data(), timed_ref->data(), n, timed_tol, "host fp64, every element of CTA 0's tiles, iters k-blocks");
    };
    c.extra = {{"grid", l.grid}, {"smem_bytes", l.smem}};
    kwiki::Fields regs;
    kwiki::add_occupancy(regs, reinterpret_cast<const void*>(l.kernel), l.threads, size_t(l.smem));
    c.extra.insert(c.extra.begin(), regs.begin(), regs.end());
    return c;
}

// ===================================================================================================
// The table of variants
// ===================================================================================================

// artifact.yaml lists the same names, in this order.
struct Variant : kwiki::VariantInfo {
    int n, wgs;
    bool tf32;
    Launch (*prepare)();
};

constexpr Variant kVariants[] = {
    {{"n64_wg1"}, 64, 1, false, prepare<bf16, 64, 1>},
    {{"n128_wg1"}, 128, 1, false, prepare<bf16, 128, 1>},
    {{"n256_wg1"}, 256, 1, false, prepare<bf16, 256, 1>},
    {{"n64_wg2"}, 64, 2, false, prepare<bf16, 64, 2>},
    {{"n128_wg2"}, 128, 2, false, prepare<bf16, 128, 2>},
    {{"n256_wg2"}, 256, 2, false, prepare<bf16, 256, 2>},
    {{"tf32_n64_wg1"}, 64, 1, true, prepare<float, 64, 1>},
    {{"tf32_n128_wg1"}, 128, 1, true, prepare<float, 128, 1>},
    {{"tf32_n256_wg1"}, 256, 1, true, prepare<float, 256, 1>},
    {{"tf32_n256_wg2"}, 256, 2, true, prepare<float, 256, 2>},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_sizes("iters", "", 1, "k-blocks per warpgroup, e.g. 2048");  // the manifest's
    kwiki::Runner& runner = m.start("wgmma");
    const Operands ops(m.seed);  // one input set: the operands stay in shared memory, no rotation to defeat
    kwiki::DeviceBuffer<float> out(size_t(128) * 256);
    for (const auto& shape : shapes) {
        std::deque<Launch> launches;  // one per case, alive until the runner is done (a deque never moves them)
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            return wgmma_case(launches.emplace_back(v.prepare()), v.n, v.wgs, v.tf32, shape[0], ops, out.get());
        });
    }
    return kwiki::exit_code();
}
