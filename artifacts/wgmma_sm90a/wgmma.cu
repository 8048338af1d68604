// wgmma.cu: tensor-core throughput of wgmma.mma_async m64nNk16 (bf16 in, fp32 accumulate), m64nNk8 (tf32 in) and
// m64nNk32 (fp8 in: e4m3 or e5m2) by N, with both operands resident in shared memory: no global traffic in the
// timed loop, only the multiply.
//
// Each CTA copies a 64-row A tile per warpgroup and one N-row B tile, 128 bytes of K per row (64 bf16, 32 fp32
// or 128 fp8), into shared memory once, laid out as TMA would write them with the 128-byte swizzle (K-major,
// 8-row atoms of 1024 bytes), then every warpgroup runs `iters` k-blocks on the same tiles: 4 wgmmas of
// 32 bytes of K each (k16 for bf16, k8 for tf32, k32 for fp8), commit, keep one group in
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
//   e4m3_n64_wg1, e4m3_n128_wg1, e4m3_n256_wg1, e4m3_n256_wg2
//                                 the same on 8-bit floats with m64nNk32.f32.e4m3.e4m3 (wgmma_fp8.cuh)
//   e5m2_n256_wg1, e5m2_n256_wg2  m64n256k32.f32.e5m2.e5m2
//
// Checking (before timing, every variant): the same kernel run with 3 k-blocks; CTA 0 writes its
// accumulators, and every element of each warpgroup's 64xN tile is compared with 3 * (A B^T) computed in
// fp64 on the host from the same bf16 (or tf32) values (the record's check). Then the timed launch itself
// (--iters k-blocks) is checked, and so are the re-checked timed samples (kwiki::Runner): iters * (A B^T),
// within the bound of fp32 accumulation over 4 * iters wgmmas (iters_tolerance below). The fp8 atoms accumulate
// with fewer bits than fp32 (around 14 bits of precision, 13 mantissa bits, which is why fp8 GEMMs promote partial
// sums to fp32 registers): their 3-k-block check holds them to fp64 within the bound of that accumulator
// (fp8_tolerance), but over the manifest's 2048 k-blocks of the same tiles the sum drifts far from iters * (A B^T)
// (by the end each k-block adds about one unit in the last place of the accumulator), so their timed launch is
// held only to what any accumulation order
// can reach (every element finite, within 4 * iters * max |a||b| row sum of the fp64 value) and every re-checked
// timed sample must be bit-identical to it (timed_fp8_check). Bytes: none (the operands stay in shared memory);
// flops only, in bf16, tf32 or fp8 (2 * 64 * N * 32 per fp8 instruction).
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "kwiki_gemm.cuh"
#include "sm90.cuh"
#include "wgmma_fp8.cuh"

using bf16 = __nv_bfloat16;
using e4m3 = __nv_fp8_e4m3;
using e5m2 = __nv_fp8_e5m2;

enum class Dtype { bf16, tf32, e4m3, e5m2 };

template <typename T> constexpr int KB = 128 / sizeof(T);  // k-block depth in elements (one 128-byte row): 64, 32, 128
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

// The largest |a||b| sum over one k-block of any element: max over (r, c) of sum_k |A[r][k] B[c][k]|.
double max_abs_row_sum(const std::vector<float>& A, const std::vector<float>& B, int kb, int N, int wgs) {
    double max_abs = 0;
    for (int r = 0; r < 64 * wgs; ++r)
        for (int c = 0; c < N; ++c) {
            double s = 0;
            for (int k = 0; k < kb; ++k) s += std::fabs(double(A[size_t(r) * kb + k]) * double(B[size_t(c) * kb + k]));
            max_abs = std::max(max_abs, s);
        }
    return max_abs;
}

// The tolerance of the timed launch's output, iters * (A B^T) summed by 4 * iters wgmmas into fp32 accumulators:
// each addition rounds by at most one ulp of the accumulator, which never exceeds iters * max_k-sum |a b|, so
// |error| <= 4 * iters * 2^-23 * iters * max_abs_row_sum (a faithful fp32 sum's bound; the products are exact).
kwiki::Tolerance iters_tolerance(double max_abs, int iters) { return {1e-3 + 4.0 * iters * 0x1p-23 * iters * max_abs, 1e-3}; }

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

// The value of an 8-bit float's code (e4m3: bias 7, 3 mantissa bits; e5m2: bias 15, 2), subnormals included.
double fp8_value(uint8_t code, bool e5m2) {
    const int mbits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
    const int e = (code & 0x7f) >> mbits, m = code & ((1 << mbits) - 1);
    const double v = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp((1 << mbits) + m, e - bias - mbits);
    return code & 0x80 ? -v : v;
}

// n random representable values of magnitude at most 1 (a uniform draw of the codes 0 .. code(1.0) and of the
// sign: every binade from the subnormals up is hit, never NaN or Inf) written to `dev` as codes; returns their
// values, exact in fp32.
std::vector<float> fill_random_fp8(uint8_t* dev, size_t n, uint64_t seed, bool e5m2) {
    const unsigned one = e5m2 ? 0x3c : 0x38;  // the code of 1.0
    std::vector<uint8_t> codes(n);
    std::vector<float> values(n);
    for (size_t i = 0; i < n; ++i) {
        const uint64_t h = kwiki::hash64(seed, i);
        codes[i] = uint8_t((h >> 8) % (one + 1)) | uint8_t(h & 1 ? 0x80 : 0);
        values[i] = float(fp8_value(codes[i], e5m2));
    }
    KWIKI_CHECK(cudaMemcpy(dev, codes.data(), n, cudaMemcpyHostToDevice));
    return values;
}

// The tolerance of an fp8 atom's output after `iters` k-blocks (4 * iters wgmmas), for an accumulator of 13 mantissa
// bits (the fp8 tensor-core path keeps about that many, not fp32's 23): each wgmma adds 32 exact products to d, and
// even if every one of those 33 addends is cut to 13 bits below the largest one's exponent and the sum cut again,
// a step errs by at most 34 * 2^-13 times the largest addend, which never exceeds (iters + 1) * max_abs_row_sum
// while the total error stays below one row sum (it does for iters = 3: 0.2 of one).
kwiki::Tolerance fp8_tolerance(double max_abs, int iters) {
    return {1e-3 + 4.0 * iters * 34 * 0x1p-13 * (iters + 1) * max_abs, 1e-3};
}

// The fp8 atoms' timed launch (iters k-blocks): what an accumulator of few bits reaches over thousands of wgmmas of
// the same tiles depends on how it rounds, so the first call holds it to the fp64 value only within
// 4 * iters * max_abs_row_sum (every element finite and of the magnitude any accumulation order gives) and keeps
// it; every later call (the re-checked timed samples) must be bit-identical to that output.
kwiki::CheckResult timed_fp8_check(const float* out, size_t n, const std::vector<double>& ref, double max_abs, int iters,
                                   std::vector<float>& first) {
    std::vector<float> got = kwiki::to_host_float(out, n);
    if (!first.empty())
        return kwiki::compare_bytes(got.data(), first.data(), n * sizeof(float), "bit-identical to the checked timed launch");
    kwiki::CheckResult r = kwiki::compare(got.data(), ref.data(), n, kwiki::Tolerance{4.0 * iters * max_abs, 0.0},
                                          "host fp64, every element of CTA 0's tiles, iters k-blocks, magnitude only "
                                          "(the fp8 accumulator's precision)");
    if (r.passed) first = std::move(got);
    return r;
}

// ===================================================================================================
// Kernel
// ===================================================================================================

__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// A: (64 * WG) x KB<T> row-major, B: N x KB<T> row-major (T = bf16, float read as tf32, e4m3 or e5m2);
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
        for (int ks = 0; ks < 4; ++ks)  // +32 bytes along K (k16 of bf16, k8 of tf32, k32 of fp8) = +2 in the descriptor
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

// One operand pair in the layout of one dtype: device tiles (A: 128 rows, B: 256 rows, 128 bytes each, the most
// any variant reads: 2 warpgroups, N = 256) and the host values the device holds, for the reference.
struct Tiles {
    kwiki::DeviceBuffer<uint8_t> A{128 * 128}, B{256 * 128};
    std::vector<float> hA, hB;
    int kb;  // elements per 128-byte row: KB<T>
};

// The operands every variant reads, filled once, one pair per dtype: bf16 (64 per row), tf32 (fp32 storage rounded
// to tf32, 32 per row), e4m3 and e5m2 (random codes of magnitude at most 1, 128 per row).
struct Operands {
    Tiles t[4];

    explicit Operands(uint64_t seed) {
        Tiles &b16 = t[int(Dtype::bf16)], &f32 = t[int(Dtype::tf32)], &e4 = t[int(Dtype::e4m3)], &e5 = t[int(Dtype::e5m2)];
        b16.kb = KB<bf16>, f32.kb = KB<float>, e4.kb = KB<e4m3>, e5.kb = KB<e5m2>;
        auto* a16 = reinterpret_cast<bf16*>(b16.A.get());
        auto* bb16 = reinterpret_cast<bf16*>(b16.B.get());
        auto* a32 = reinterpret_cast<float*>(f32.A.get());
        auto* b32 = reinterpret_cast<float*>(f32.B.get());
        kwiki::fill_random(a16, 128 * KB<bf16>, kwiki::hash64(seed, 1));
        kwiki::fill_random(bb16, 256 * KB<bf16>, kwiki::hash64(seed, 2));
        kwiki::fill_random(a32, 128 * KB<float>, kwiki::hash64(seed, 3));
        kwiki::fill_random(b32, 256 * KB<float>, kwiki::hash64(seed, 4));
        KWIKI_CHECK(cudaDeviceSynchronize());
        b16.hA = kwiki::to_host_float(a16, 128 * KB<bf16>), b16.hB = kwiki::to_host_float(bb16, 256 * KB<bf16>);
        f32.hA = to_tf32(a32, 128 * KB<float>), f32.hB = to_tf32(b32, 256 * KB<float>);
        e4.hA = fill_random_fp8(e4.A.get(), 128 * 128, kwiki::hash64(seed, 5), false);
        e4.hB = fill_random_fp8(e4.B.get(), 256 * 128, kwiki::hash64(seed, 6), false);
        e5.hA = fill_random_fp8(e5.A.get(), 128 * 128, kwiki::hash64(seed, 7), true);
        e5.hB = fill_random_fp8(e5.B.get(), 256 * 128, kwiki::hash64(seed, 8), true);
    }
};

const char* dtype_name(Dtype d) {
    return d == Dtype::tf32 ? "tf32" : d == Dtype::e4m3 ? "e4m3" : d == Dtype::e5m2 ? "e5m2" : "bf16";
}

// One variant's case (m64nNk16 on bf16, m64nNk8 on tf32 or m64nNk32 on e4m3 / e5m2, by `wgs` warpgroups per CTA): its
// launch on the shared operands into `out`, what its record reports, and its checks: the record's check runs
// 3 k-blocks (bf16, tf32: every element within 1e-3, their products being exact in fp32 and the error fp32
// accumulation over 3 k-blocks; fp8: within fp8_tolerance), then the timed launch (iters k-blocks) and its re-checks
// against iters * (A B^T) within iters_tolerance (fp8: timed_fp8_check).
kwiki::Case wgmma_case(const Launch& l, int N, int wgs, Dtype dt, int iters, const Operands& ops, float* out) {
    const size_t n = size_t(64) * wgs * N;
    const Tiles& tiles = ops.t[int(dt)];
    const void* a = tiles.A.get();
    const void* b = tiles.B.get();
    const std::vector<float>& ha = tiles.hA;
    const std::vector<float>& hb = tiles.hB;
    const int kb = tiles.kb;
    const bool fp8 = dt == Dtype::e4m3 || dt == Dtype::e5m2;
    const double max_abs = max_abs_row_sum(ha, hb, kb, N, wgs);
    // the timed launch's reference and tolerance (iters k-blocks), for its check and the re-checks
    auto timed_ref = std::make_shared<std::vector<double>>(host_reference(ha, hb, kb, N, wgs, iters));
    const kwiki::Tolerance timed_tol = iters_tolerance(max_abs, iters);
    const kwiki::Tolerance check_tol = fp8 ? fp8_tolerance(max_abs, CHECK_ITERS) : kwiki::Tolerance{1e-3, 1e-3};
    kwiki::Case c;
    c.params = {{"N", N}, {"warpgroups", wgs}, {"iters", iters}, {"dtype", dtype_name(dt)}};
    // per warpgroup and k-block: 64 x N x KB multiply-adds (4 wgmmas of k16 bf16, k8 tf32 or k32 fp8)
    c.flops = double(l.grid) * wgs * double(iters) * 2.0 * 64 * N * kb;
    c.flops_dtype = fp8 ? "fp8" : dtype_name(dt);
    c.bytes_level = "smem";  // no bytes declared: the operands are read from shared memory
    c.launch = [&l, a, b, iters, out](cudaStream_t s) { run(l, a, b, iters, out, s); };
    c.poison = [out, n](cudaStream_t s) { kwiki::poison(out, n * sizeof(float), s); };
    c.precheck = [&l, a, b, out, n, &ha, &hb, kb, N, wgs, check_tol] {
        kwiki::poison(out, n * sizeof(float));
        run(l, a, b, CHECK_ITERS, out, 0);
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaDeviceSynchronize());
        std::vector<float> got = kwiki::to_host_float(out, n);
        std::vector<double> ref = host_reference(ha, hb, kb, N, wgs, CHECK_ITERS);
        return kwiki::compare(got.data(), ref.data(), n, check_tol, "host fp64, every element of CTA 0's tiles, 3 k-blocks");
    };
    if (fp8) {
        auto first = std::make_shared<std::vector<float>>();  // the timed launch's output, kept by its check
        c.check = [out, n, timed_ref, max_abs, iters, first] { return timed_fp8_check(out, n, *timed_ref, max_abs, iters, *first); };
    } else {
        c.check = [out, n, timed_ref, timed_tol] {
            std::vector<float> got = kwiki::to_host_float(out, n);
            return kwiki::compare(got.data(), timed_ref->data(), n, timed_tol, "host fp64, every element of CTA 0's tiles, iters k-blocks");
        };
    }
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
    Dtype dtype;
    Launch (*prepare)();
};

constexpr Variant kVariants[] = {
    {{"n64_wg1"}, 64, 1, Dtype::bf16, prepare<bf16, 64, 1>},
    {{"n128_wg1"}, 128, 1, Dtype::bf16, prepare<bf16, 128, 1>},
    {{"n256_wg1"}, 256, 1, Dtype::bf16, prepare<bf16, 256, 1>},
    {{"n64_wg2"}, 64, 2, Dtype::bf16, prepare<bf16, 64, 2>},
    {{"n128_wg2"}, 128, 2, Dtype::bf16, prepare<bf16, 128, 2>},
    {{"n256_wg2"}, 256, 2, Dtype::bf16, prepare<bf16, 256, 2>},
    {{"tf32_n64_wg1"}, 64, 1, Dtype::tf32, prepare<float, 64, 1>},
    {{"tf32_n128_wg1"}, 128, 1, Dtype::tf32, prepare<float, 128, 1>},
    {{"tf32_n256_wg1"}, 256, 1, Dtype::tf32, prepare<float, 256, 1>},
    {{"tf32_n256_wg2"}, 256, 2, Dtype::tf32, prepare<float, 256, 2>},
    {{"e4m3_n64_wg1"}, 64, 1, Dtype::e4m3, prepare<e4m3, 64, 1>},
    {{"e4m3_n128_wg1"}, 128, 1, Dtype::e4m3, prepare<e4m3, 128, 1>},
    {{"e4m3_n256_wg1"}, 256, 1, Dtype::e4m3, prepare<e4m3, 256, 1>},
    {{"e4m3_n256_wg2"}, 256, 2, Dtype::e4m3, prepare<e4m3, 256, 2>},
    {{"e5m2_n256_wg1"}, 256, 1, Dtype::e5m2, prepare<e5m2, 256, 1>},
    {{"e5m2_n256_wg2"}, 256, 2, Dtype::e5m2, prepare<e5m2, 256, 2>},
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
            return wgmma_case(launches.emplace_back(v.prepare()), v.n, v.wgs, v.dtype, shape[0], ops, out.get());
        });
    }
    return kwiki::exit_code();
}
