// wgmma_layout.cu: does the shared-memory layout of wgmma's operands change how fast the tensor cores multiply?
//
// The multiply is m64n256k16 bf16 with fp32 accumulators, two warpgroups per CTA (each on its own 64 rows of A,
// both sharing the 256 rows of B): the wgmma page's fastest bf16 atom. Each CTA copies A (128 rows) and B (256
// rows), 128 bytes of K per row, into shared memory once, in one of the four layouts a K-major operand descriptor
// can name (PTX ISA, "Matrix Descriptor Format": its layout type, bits 62-63), then loops `iters` k-blocks of
// 4 wgmmas over the same tiles, one group in flight, like wgmma_sm90a's loop. The layouts, as TMA writes them with
// a box as wide as the swizzle (one atom column of K after another, each holding every row):
//
//   sw128  rows of 128 bytes; 16-byte chunk c of row r at chunk c ^ (r % 8)            SBO 1024, LBO unused
//   sw64   two atom columns of 64-byte rows; chunk c (of 4) of row r at c ^ ((r / 2) % 4)  SBO 512
//   sw32   four atom columns of 32-byte rows; chunk c (of 2) of row r at c ^ ((r / 4) % 2) SBO 256
//   none   8 x 16-byte core matrices, each 128 contiguous bytes: core (row group g, chunk c) at g * 1024 + c * 128
//          (no swizzle: LBO 128 to the next core matrix along K, SBO 1024 to the next 8 rows)
//
// Each is the swizzle's XOR of address bits [4, 4 + b) with bits [7, 7 + b) (b = 3, 2, 1) on rows of 128, 64 or 32
// bytes (chunk_offset below), and every one lets the eight 16-byte rows of a core matrix land on eight different
// groups of four banks. So the expectation is one rate for all four; the run measures it.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o wgmma_layout wgmma_layout.cu
// Run:   ./wgmma_layout --iters=2048 [--variants a,b] [--seed N]   (--iters: k-blocks per warpgroup)
//
// Checking (before timing, every variant): 3 k-blocks, and CTA 0 writes its accumulators; every element of both
// warpgroups' 64 x 256 tiles is compared with 3 * (A B^T) in fp64 on the host from the same bf16 values. Then the
// timed launch (iters k-blocks) and its re-checks (kwiki::Runner) against iters * (A B^T), within the bound of
// fp32 accumulation over 4 * iters wgmmas. A wrong descriptor (a stride, a layout type, a K step) reads the wrong
// elements: the check fails and the variant gets no timing. Bytes: none (the operands stay in shared memory).
#include <algorithm>
#include <cmath>
#include <deque>
#include <memory>
#include <vector>

#include "kwiki_bench.cuh"
#include "kwiki_gemm.cuh"
#include "sm90.cuh"

using bf16 = __nv_bfloat16;

// ===================================================================================================
// Kernels
// ===================================================================================================

constexpr int N = 256;           // m64n256k16
constexpr int WG = 2;            // warpgroups per CTA
constexpr int A_ROWS = 64 * WG;  // A's rows: 64 per warpgroup
constexpr int KB = 64;           // bf16 elements of K per row: 128 bytes, one k-block of 4 wgmmas of k16
constexpr int CHECK_ITERS = 3;   // k-blocks in the checked run

// The descriptor's layout type (bits 62-63) of each layout.
enum Layout : int { kNone = 0, kSw128 = 1, kSw64 = 2, kSw32 = 3 };

// Bytes of K a row of one swizzle atom holds (16 without swizzle: a core matrix's row).
__host__ __device__ constexpr int row_bytes(int layout) {
    return layout == kSw128 ? 128 : layout == kSw64 ? 64 : layout == kSw32 ? 32 : 16;
}

// Where the 16-byte chunk c (0..7 along K) of row r of a K-major tile of `rows` rows (a multiple of 8) sits, in
// bytes from the tile's start. For a row r that is a multiple of 8 the swizzle term is 0: the chunk's unswizzled
// address, which is what a descriptor's start address names (the hardware applies the swizzle to the addresses it
// forms from it).
__host__ __device__ constexpr int chunk_offset(int layout, int r, int c, int rows) {
    if (layout == kNone) return (r / 8) * 1024 + c * 128 + (r % 8) * 16;
    const int w = row_bytes(layout), per_row = w / 16;   // chunks in a row of the atom: 8, 4 or 2
    const int column = c / per_row, cc = c % per_row;     // which atom column along K, which chunk in its row
    const int xor_bits = ((r * w) >> 7) & (per_row - 1);  // address bits [7, 7 + b) of the row within its column
    return column * rows * w + r * w + (cc ^ xor_bits) * 16;
}

// The K-major operand descriptor of `start` in `layout`: start address (bits 0-13, >> 4), leading byte offset
// (16-29: the next core matrix along K without swizzle; unused by the swizzles, 16 bytes by convention), stride
// byte offset (32-45: the next 8 rows along M/N), layout type (62-63).
__device__ __forceinline__ uint64_t descriptor(int layout, const uint8_t* start) {
    const uint64_t addr = sm90::smem_u32(start);
    const uint64_t lbo = layout == kNone ? 128 : 16;
    const uint64_t sbo = layout == kNone ? 1024 : 8 * row_bytes(layout);
    return ((addr & 0x3FFFF) >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (uint64_t(layout) << 62);
}

__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// A: A_ROWS x KB row-major, B: N x KB row-major; out: A_ROWS x N fp32, written by CTA 0.
template <int L>
__global__ void __launch_bounds__(128 * WG, 1) wgmma_layout_loop(const bf16* __restrict__ A, const bf16* __restrict__ B,
                                                                 int iters, float* __restrict__ out) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* sa = align1024(smem_raw);
    uint8_t* sb = sa + A_ROWS * 128;
    for (int i = threadIdx.x; i < (A_ROWS + N) * 8; i += blockDim.x) {
        const int row = i / 8, chunk = i % 8;
        const bool in_a = row < A_ROWS;
        const int r = in_a ? row : row - A_ROWS;
        const bf16* src = (in_a ? A : B) + size_t(r) * KB;
        uint8_t* dst = (in_a ? sa : sb) + chunk_offset(L, r, chunk, in_a ? A_ROWS : N);
        *reinterpret_cast<uint4*>(dst) = reinterpret_cast<const uint4*>(src)[chunk];
    }
    sm90::fence_proxy_async();  // the ordinary stores above, before wgmma reads through the async proxy
    __syncthreads();

    const int wg = threadIdx.x / 128, t = threadIdx.x % 128;
    uint64_t da[4], db[4];  // k16 step ks covers chunks 2 ks and 2 ks + 1 of every row
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
        da[ks] = descriptor(L, sa + chunk_offset(L, wg * 64, 2 * ks, A_ROWS));
        db[ks] = descriptor(L, sb + chunk_offset(L, 0, 2 * ks, N));
    }
    float d[N / 2];
#pragma unroll
    for (int i = 0; i < N / 2; ++i) d[i] = 0.f, sm90::fence_operand(d[i]);

    // From here on, wgmma_sm90a's loop and store as they are (its m64n256k16, two warpgroups), so that this
    // artifact's sw128 row and that page's n256_wg2 time the same instructions. A copy, not a shared header, for
    // now: moving it into one edits wgmma_sm90a's sources, which starts a new series of that verified page
    // (CONTRIBUTING.md, "An edit to an artifact's code starts a new series"); the next batch of header edits can.
    kwiki::clock_begin();  // the tensor-core loop's clock (kwiki_clock.cuh)
    for (int it = 0; it < iters; ++it) {
        sm90::wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) sm90::WgmmaOp<bf16, N>::mma(d, da[ks], db[ks], 1);
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
// Launchers
// ===================================================================================================

struct Launch {
    void (*kernel)(const bf16*, const bf16*, int, float*);
    int smem, grid;
};

template <int L>
Launch prepare() {
    auto f = wgmma_layout_loop<L>;
    // more than half of an SM's shared memory: one CTA per SM, as in wgmma_sm90a
    const int smem = std::max((A_ROWS + N) * 128 + 1024, kwiki::device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor) / 2 + 1024);
    KWIKI_REQUIRE(smem <= kwiki::device_attr(cudaDevAttrMaxSharedMemoryPerBlockOptin), "tiles do not fit in shared memory");
    KWIKI_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    return {f, smem, kwiki::sm_count()};
}

void run(const Launch& l, const bf16* A, const bf16* B, int iters, float* out, cudaStream_t s) {
    l.kernel<<<l.grid, 128 * WG, l.smem, s>>>(A, B, iters, out);
}

// ===================================================================================================
// Reference: fp64
// ===================================================================================================

// The operands (random bf16 in [-1, 1)), their host values, the fp64 product A B^T of one k-block and the largest
// sum of |a b| over one k-block of any element (the scale of the accumulation's rounding).
struct Operands {
    kwiki::DeviceBuffer<bf16> A{size_t(A_ROWS) * KB}, B{size_t(N) * KB};
    std::vector<double> product;  // A_ROWS x N
    double max_abs = 0;

    explicit Operands(uint64_t seed) {
        kwiki::fill_random(A.get(), size_t(A_ROWS) * KB, kwiki::hash64(seed, 1));
        kwiki::fill_random(B.get(), size_t(N) * KB, kwiki::hash64(seed, 2));
        KWIKI_CHECK(cudaDeviceSynchronize());
        const std::vector<float> ha = kwiki::to_host_float(A.get(), size_t(A_ROWS) * KB);
        const std::vector<float> hb = kwiki::to_host_float(B.get(), size_t(N) * KB);
        product.resize(size_t(A_ROWS) * N);
        std::vector<float> abs_a(ha.size()), abs_b(hb.size());
        for (size_t i = 0; i < ha.size(); ++i) abs_a[i] = std::fabs(ha[i]);
        for (size_t i = 0; i < hb.size(); ++i) abs_b[i] = std::fabs(hb[i]);
        for (int r = 0; r < A_ROWS; ++r)
            for (int c = 0; c < N; ++c) {
                product[size_t(r) * N + c] = kwiki::gemm_element(ha, hb, KB, r, c);
                max_abs = std::max(max_abs, kwiki::gemm_element(abs_a, abs_b, KB, r, c));
            }
    }

    std::vector<double> times(int iters) const {
        std::vector<double> out(product);
        for (double& x : out) x *= iters;
        return out;
    }
};

// ===================================================================================================
// Launchers: the cases
// ===================================================================================================

// A variant's case: its launch on the shared operands into `out`, its record's fields, and its checks: 3 k-blocks
// within 1e-3 (products exact in fp32, 12 fp32 additions), then the timed launch and its re-checks against
// iters * (A B^T) within 1e-3 + 4 iters * 2^-23 * iters * max_abs (one rounding of at most an ulp of a partial sum
// that never exceeds iters * max_abs, per addition).
kwiki::Case layout_case(const Launch& l, const char* layout, int iters, const Operands& ops, float* out) {
    const size_t n = size_t(A_ROWS) * N;
    const bf16* a = ops.A.get();
    const bf16* b = ops.B.get();
    auto timed_ref = std::make_shared<std::vector<double>>(ops.times(iters));
    auto check_ref = std::make_shared<std::vector<double>>(ops.times(CHECK_ITERS));
    const kwiki::Tolerance timed_tol{1e-3 + 4.0 * iters * 0x1p-23 * iters * ops.max_abs, 1e-3};
    kwiki::Case c;
    c.params = {{"N", N}, {"warpgroups", WG}, {"iters", iters}, {"dtype", "bf16"}, {"layout", layout}};
    c.flops = double(l.grid) * WG * double(iters) * 2.0 * 64 * N * KB;
    c.flops_dtype = "bf16";
    c.bytes_level = "smem";  // no bytes declared: the operands are read from shared memory
    c.launch = [&l, a, b, iters, out](cudaStream_t s) { run(l, a, b, iters, out, s); };
    c.poison = [out, n](cudaStream_t s) { kwiki::poison(out, n * sizeof(float), s); };
    c.precheck = [&l, a, b, out, n, check_ref] {
        kwiki::poison(out, n * sizeof(float));
        run(l, a, b, CHECK_ITERS, out, 0);
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaDeviceSynchronize());
        const std::vector<float> got = kwiki::to_host_float(out, n);
        return kwiki::compare(got.data(), check_ref->data(), n, kwiki::Tolerance{1e-3, 1e-3},
                              "host fp64, every element of CTA 0's tiles, 3 k-blocks");
    };
    c.check = [out, n, timed_ref, timed_tol] {
        const std::vector<float> got = kwiki::to_host_float(out, n);
        return kwiki::compare(got.data(), timed_ref->data(), n, timed_tol, "host fp64, every element of CTA 0's tiles, iters k-blocks");
    };
    c.extra = {{"grid", l.grid}, {"smem_bytes", l.smem}};
    kwiki::Fields regs;
    kwiki::add_occupancy(regs, reinterpret_cast<const void*>(l.kernel), 128 * WG, size_t(l.smem));
    c.extra.insert(c.extra.begin(), regs.begin(), regs.end());
    return c;
}

// ===================================================================================================
// The table of variants
// ===================================================================================================

// artifact.yaml lists the same names, in this order.
struct Variant : kwiki::VariantInfo {
    const char* layout;
    Launch (*prepare)();
};

constexpr Variant kVariants[] = {
    {{"sw128"}, "128B", prepare<kSw128>},
    {{"sw64"}, "64B", prepare<kSw64>},
    {{"sw32"}, "32B", prepare<kSw32>},
    {{"none"}, "none", prepare<kNone>},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_sizes("iters", "", 1, "k-blocks per warpgroup, e.g. 2048");  // the manifest's
    kwiki::Runner& runner = m.start("wgmma_layout");
    const Operands ops(m.seed);  // one input set: the operands stay in shared memory, no rotation to defeat
    kwiki::DeviceBuffer<float> out(size_t(A_ROWS) * N);
    for (const auto& shape : shapes) {
        std::deque<Launch> launches;  // one per case, alive until the runner is done (a deque never moves them)
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            return layout_case(launches.emplace_back(v.prepare()), v.layout, shape[0], ops, out.get());
        });
    }
    return kwiki::exit_code();
}
