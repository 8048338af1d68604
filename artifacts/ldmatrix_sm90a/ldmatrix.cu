// ldmatrix.cu: shared-memory bank conflicts on Hopper's ldmatrix/stmatrix path, as an epilogue staging tile uses it:
// a bf16 matrix transpose through a 64 x 64 bf16 shared tile (128-byte rows) per CTA, the tile read with
// ldmatrix.trans (row-major, then with the 128-byte XOR swizzle TMA's SWIZZLE_128B produces) or written with
// stmatrix.trans (against 2-byte scalar stores), against a device copy of the same bytes in the same run.
//
// The operation: `in` is a rows x cols bf16 matrix (row-major), `out` its transpose, cols x rows (row-major):
// out[c * rows + r] = in[r * cols + c]. A transpose moves bits, so the check is exact: every output element, poisoned
// first (0xFF bytes, a NaN), must have the bits of the input element it comes from, regenerated from the fill's hash
// on the host (first check) or on the GPU (re-checks of timed samples). Inputs are fresh (protocol 3): refilled from a
// new seed before every timed sample. The L2 is flushed before every sample (kwiki::Runner).
//
// The banks: 32 of 4 bytes; a 16-byte access by 8 lanes is one pass (a wavefront of 128 bytes) when the 8 chunks sit
// on 8 different groups of 4 banks. ldmatrix.x4 and stmatrix.x4 move four 8 x 8 matrices of b16, each of them 8 rows
// of 16 bytes whose addresses 8 lanes supply. A 128-byte row spans all 32 banks, so chunk k of every row is on banks
// 4k .. 4k + 3: 8 rows' chunk k, row-major, is an 8-way conflict. The 128-byte swizzle stores chunk k of row r at
// chunk k ^ (r % 8): 8 rows with 8 different r % 8 land on 8 different chunks, one pass.
//
// Build (kwiki does this per target):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o ldmatrix ldmatrix.cu
// Run: ./ldmatrix --shapes=ROWSxCOLS[,...] [--variants a,b]   (the manifest's shapes)
// Shapes: rows from 1 to 65535 * 64 (the grid's y), cols from 1; neither needs to be a multiple of the tile (edge
// tiles are zero-filled in shared memory past the matrix, so every 8 x 8 block ldmatrix reads is defined, and
// out-of-range global stores are skipped). The 16-byte global accesses need rows of a multiple of 8 elements: an
// input with cols % 8 != 0 (or an output with rows % 8 != 0) is read (written) one element at a time; the
// shared-memory path, which is what the variants compare, is the same.
//
// Variants (bytes per record: the matrix read plus the matrix written, 2 x rows x cols x 2):
//   copy            cudaMemcpyAsync device to device of the matrix (no transpose): the copy roof (baseline)
//   ldsm_plain      input tile stored row-major (16-byte stores), read with ldmatrix.x4.trans: 8-way conflicts
//   ldsm_swizzled   the same tile with chunk k of row r at chunk k ^ (r % 8): conflict-free ldmatrix
//   stsm_swizzled   input read into registers and written transposed by stmatrix.x4.trans into the swizzled output
//                   tile, which 16-byte shared loads then read row by row for 16-byte global stores
//   scalar_stores   the same staging with eight 2-byte st.shared.b16 per 16 bytes in place of one stmatrix
#include <mutex>
#include <vector>

#include <cuda_bf16.h>

#include "kwiki_bench.cuh"

namespace {

using bf16 = __nv_bfloat16;

constexpr int kTile = 64;        // a tile is 64 x 64 bf16: 64 rows of 128 bytes, 8 chunks of 16 bytes a row
constexpr int kChunks = 8;       // 16-byte chunks per tile row
constexpr int kThreads = 128;    // 4 warps; each moves 2 chunk columns x 2 groups of 32 rows = 4 x4 matrices
constexpr int kTileBytes = kTile * kTile * 2;

// ===================================================================================================
// Reference: the input's bits, regenerated from the fill's hash, and the comparison of the output with them
// ===================================================================================================

struct Shape {
    int rows, cols;
};

// The bits of input element i filled from `seed`: kwiki::fill_random<bf16>'s value, round-to-nearest of a uniform
// float in [-1, 1) (never 0xFFFF, the poison).
__host__ __device__ inline uint16_t input_bits(uint64_t seed, size_t i) {
    return __nv_bfloat16_raw(__float2bfloat16_rn(kwiki::random_unit(seed, i, -1.0f, 1.0f))).x;
}

// The input element that output element o holds: the transpose's (o = c * rows + r holds in[r * cols + c]), or o
// itself for the copy.
__host__ __device__ inline size_t source_of(size_t o, int rows, int cols, bool transposed) {
    return transposed ? (o % size_t(rows)) * size_t(cols) + o / size_t(rows) : o;
}

// One shape's buffers: the input, the output and a mismatch counter; `seed` is the input's current fill.
struct Matrix {
    int rows, cols;
    kwiki::DeviceBuffer<bf16> in, out;
    kwiki::DeviceBuffer<unsigned long long> bad{1};
    uint64_t seed = 0;

    Matrix(const Shape& s, uint64_t sd)
        : rows(s.rows), cols(s.cols), in(size_t(s.rows) * s.cols), out(size_t(s.rows) * s.cols) {
        refill(sd, 0);
        KWIKI_CHECK(cudaDeviceSynchronize());
    }
    size_t n() const { return in.size(); }
    void refill(uint64_t s, cudaStream_t st) {
        seed = s;
        kwiki::fill_random(in.get(), n(), seed, -1.0f, 1.0f, st);
    }
};

kwiki::CheckResult mismatch_result(size_t bad, size_t n, size_t first, const char* reference) {
    kwiki::CheckResult c;
    c.passed = bad == 0 && n > 0;
    c.bad = bad;
    c.max_abs_err = double(bad);
    c.reference = reference;
    char d[128];
    std::snprintf(d, sizeof d, bad ? "%zu of %zu elements differ; first at %zu" : "%zu of %zu elements equal",
                  bad ? bad : n, n, first);
    c.detail = d;
    return c;
}

// Every element of the output against the bits of the input element it must hold, on the host.
kwiki::CheckResult check_host(const Matrix& m, bool transposed) {
    std::vector<uint16_t> got(m.n());
    KWIKI_CHECK(cudaMemcpy(got.data(), m.out.get(), m.out.bytes(), cudaMemcpyDeviceToHost));
    std::mutex mu;
    size_t bad = 0, first = got.size();
    kwiki::parallel_for(got.size(), [&](size_t lo, size_t hi) {
        size_t my_bad = 0, my_first = got.size();
        for (size_t o = lo; o < hi; ++o)
            if (got[o] != input_bits(m.seed, source_of(o, m.rows, m.cols, transposed)) && !my_bad++) my_first = o;
        std::lock_guard<std::mutex> lock(mu);
        bad += my_bad;
        first = std::min(first, my_first);
    });
    return mismatch_result(bad, got.size(), first,
                           transposed ? "host: out[c][r] has the bits of in[r][c], regenerated from the fill's hash"
                                      : "host: out has the bits of in, regenerated from the fill's hash");
}

// The same comparison on the GPU, for the re-checks of timed samples: elements that differ, counted into *bad.
__global__ void count_mismatch(const uint16_t* out, int rows, int cols, bool transposed, uint64_t seed,
                               unsigned long long* bad) {
    const size_t n = size_t(rows) * cols;
    unsigned long long b = 0;
    for (size_t o = blockIdx.x * size_t(blockDim.x) + threadIdx.x; o < n; o += size_t(gridDim.x) * blockDim.x)
        b += out[o] != input_bits(seed, source_of(o, rows, cols, transposed));
    if (b) atomicAdd(bad, b);
}

kwiki::CheckResult check_device(const Matrix& m, bool transposed) {
    KWIKI_CHECK(cudaMemset(m.bad.get(), 0, sizeof(unsigned long long)));
    count_mismatch<<<unsigned(kwiki::sm_count()) * 8, 256>>>(reinterpret_cast<const uint16_t*>(m.out.get()), m.rows,
                                                             m.cols, transposed, m.seed, m.bad.get());
    KWIKI_CHECK_LAST();
    unsigned long long bad = 0;
    KWIKI_CHECK(cudaMemcpy(&bad, m.bad.get(), sizeof bad, cudaMemcpyDeviceToHost));
    return mismatch_result(size_t(bad), m.n(), 0,
                           transposed ? "GPU: out[c][r] has the bits of in[r][c], regenerated from the fill's hash"
                                      : "GPU: out has the bits of in, regenerated from the fill's hash");
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// The PTX of the shared-memory accesses, one instruction each (kept here: no other artifact uses them).
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void sts_v4(uint32_t a, const uint32_t (&v)[4]) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(v[0]), "r"(v[1]), "r"(v[2]), "r"(v[3])
                 : "memory");
}
__device__ __forceinline__ void lds_v4(uint32_t a, uint32_t (&v)[4]) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a)
                 : "memory");
}
__device__ __forceinline__ void sts_b16(uint32_t a, uint16_t v) {
    asm volatile("st.shared.b16 [%0], %1;" ::"r"(a), "h"(v) : "memory");
}
// Four 8 x 8 b16 matrices, lanes 8 i .. 8 i + 7 giving the addresses of matrix i's 8 rows of 16 bytes; .trans: lane
// t receives elements (rows 2 (t % 4) and 2 (t % 4) + 1, column t / 4) of each, in register i (low half first).
__device__ __forceinline__ void ldsm_x4_trans(uint32_t a, uint32_t (&v)[4]) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]) : "r"(a) : "memory");
}
// The inverse: register i of lane t goes to rows 2 (t % 4), 2 (t % 4) + 1, column t / 4 of matrix i.
__device__ __forceinline__ void stsm_x4_trans(uint32_t a, const uint32_t (&v)[4]) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(v[0]),
                 "r"(v[1]), "r"(v[2]), "r"(v[3]) : "memory");
}

// 16 bytes (8 bf16) of row r of a rows x cols matrix from column c, as 4 words (low half: the lower column). One
// 16-byte load when the row is 16-byte aligned (cols % 8 == 0) and the 8 columns are inside; else element by element,
// zero past the matrix's edge.
__device__ __forceinline__ void load_chunk(const uint16_t* __restrict__ p, int rows, int cols, int r, int c,
                                           uint32_t (&v)[4]) {
    if (cols % 8 == 0 && r < rows && c + 8 <= cols) {
        const uint4 x = *reinterpret_cast<const uint4*>(p + size_t(r) * cols + c);
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
        return;
    }
#pragma unroll
    for (int w = 0; w < 4; ++w) {
        const uint32_t lo = r < rows && c + 2 * w < cols ? p[size_t(r) * cols + c + 2 * w] : 0;
        const uint32_t hi = r < rows && c + 2 * w + 1 < cols ? p[size_t(r) * cols + c + 2 * w + 1] : 0;
        v[w] = lo | hi << 16;
    }
}

// The same for a store: one 16-byte store, or the elements inside the matrix one by one.
__device__ __forceinline__ void store_chunk(uint16_t* __restrict__ p, int rows, int cols, int r, int c,
                                            const uint32_t (&v)[4]) {
    if (r >= rows) return;
    if (cols % 8 == 0 && c + 8 <= cols) {
        *reinterpret_cast<uint4*>(p + size_t(r) * cols + c) = make_uint4(v[0], v[1], v[2], v[3]);
        return;
    }
#pragma unroll
    for (int x = 0; x < 8; ++x)
        if (c + x < cols) p[size_t(r) * cols + c + x] = uint16_t(v[x / 2] >> (16 * (x % 2)));
}

// v[i] <- v[(i + s) % 4] (s in 0..3, a lane's value): selects, no local memory.
__device__ __forceinline__ void rotate(uint32_t (&v)[4], int s) {
    uint32_t t;
    if (s & 1) t = v[0], v[0] = v[1], v[1] = v[2], v[2] = v[3], v[3] = t;
    if (s & 2) t = v[0], v[0] = v[2], v[2] = t, t = v[1], v[1] = v[3], v[3] = t;
}

// Byte offset of 16-byte chunk k of tile row r: row-major, or with the 128-byte swizzle.
template <bool Swizzled>
__device__ __forceinline__ uint32_t chunk_offset(int r, int k) {
    // kwiki:rung ldsm_swizzled
    if constexpr (Swizzled) return uint32_t(r * 128 + ((k ^ (r & 7)) << 4));  // SWIZZLE_128B: chunk k ^ (r % 8)
    // /kwiki:rung ldsm_swizzled
    return uint32_t(r * 128 + (k << 4));  // row-major: chunk k of every row on banks 4k .. 4k + 3
}

// The lanes' addresses of one x4 matrix load or store over 32 tile rows: lane L = 8 i + 2 q + b supplies row
// 8 q + 2 ((i + q) % 4) + b of the 32. Lane t (q = t % 4) so moves rows 8 q .. 8 q + 7 (column t / 4 of a chunk):
// word (i + q) % 4 of its 16 bytes in register i, hence the rotations. Each matrix i covers rows with 8 different
// r % 8 (q = 0..3, b = 0..1), all in one chunk column: 8 ways on one 4-bank group row-major, 8 groups swizzled.
__device__ __forceinline__ int x4_row(int lane) {
    const int i = lane >> 3, q = (lane >> 1) & 3;
    return 8 * q + 2 * ((i + q) & 3) + (lane & 1);
}

// Every kernel: grid (ceil(cols / 64), ceil(rows / 64)), 128 threads; CTA (bx, by) owns the input tile of rows
// 64 by .. + 63 and columns 64 bx .. + 63, the output tile of rows 64 bx .. + 63 and columns 64 by .. + 63. Warp w
// moves chunk columns k = 2 w, 2 w + 1 of both groups of 32 rows (g = 0, 1): four x4 matrix loads or stores.

// kwiki:rung ldsm_plain
// The input tile into shared memory as it is (tile row = input row, 16-byte stores: 8 lanes a row, no conflict),
// then read back transposed by ldmatrix.trans: the x4 at (g, k) gives lane t 8 consecutive elements of output row
// 64 bx + 8 k + t / 4 (input rows 64 by + 32 g + 8 (t % 4) .. + 7), stored with one 16-byte global store.
template <bool Swizzled>
__global__ void __launch_bounds__(kThreads) transpose_ldsm(const uint16_t* __restrict__ in, uint16_t* __restrict__ out,
                                                           int rows, int cols) {
    __shared__ __align__(1024) uint8_t tile[kTileBytes];
    const uint32_t base = smem_addr(tile);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
#pragma unroll
    for (int j = 0; j < kTile * kChunks / kThreads; ++j) {
        const int idx = j * kThreads + tid, r = idx / kChunks, k = idx % kChunks;
        uint32_t v[4];
        load_chunk(in, rows, cols, r0 + r, c0 + 8 * k, v);  // zeros past the edge: ldmatrix reads whole blocks
        sts_v4(base + chunk_offset<Swizzled>(r, k), v);
    }
    __syncthreads();
    const int row = x4_row(lane);
#pragma unroll
    for (int g = 0; g < 2; ++g)
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const int k = 2 * warp + kk;
            uint32_t v[4];
            ldsm_x4_trans(base + chunk_offset<Swizzled>(32 * g + row, k), v);
            rotate(v, (4 - (lane & 3)) & 3);  // register i held word (i + q) % 4: back in order
            store_chunk(out, cols, rows, c0 + 8 * k + (lane >> 2), r0 + 32 * g + 8 * (lane & 3), v);
        }
}
// /kwiki:rung ldsm_plain

// kwiki:rung stsm_swizzled
// The other way round, as an epilogue writes its tile: lane t reads 16 bytes of input row 64 by + 8 k + t / 4
// (columns 64 bx + 32 g + 8 (t % 4) .. + 7) into registers, and stmatrix.trans writes them transposed into the output
// tile (tile row = output row, swizzled); 16-byte shared loads then read the tile row by row (8 lanes a row, no
// conflict) for 16-byte global stores of 128 contiguous bytes. Scalar: the same 16 bytes as eight 2-byte stores, in
// the order that keeps them conflict-free too (at each store, lanes q = 0..3 are on 4 different r % 8).
template <bool Scalar>
__global__ void __launch_bounds__(kThreads) transpose_stsm(const uint16_t* __restrict__ in, uint16_t* __restrict__ out,
                                                           int rows, int cols) {
    __shared__ __align__(1024) uint8_t tile[kTileBytes];
    const uint32_t base = smem_addr(tile);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, q = lane & 3;
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
    const int row = x4_row(lane);
#pragma unroll
    for (int g = 0; g < 2; ++g)
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
            const int k = 2 * warp + kk;
            uint32_t v[4];
            load_chunk(in, rows, cols, r0 + 8 * k + (lane >> 2), c0 + 32 * g + 8 * q, v);
            rotate(v, q);  // register i holds word (i + q) % 4, the rows lane 8 i + 2 q (+1) addresses
            if constexpr (!Scalar) {
                stsm_x4_trans(base + chunk_offset<true>(32 * g + row, k), v);
            } else {
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int b = 0; b < 2; ++b) {
                        const int r = 32 * g + 8 * q + 2 * ((i + q) & 3) + b;
                        sts_b16(base + chunk_offset<true>(r, k) + 2 * (lane >> 2), uint16_t(v[i] >> (16 * b)));
                    }
            }
        }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile * kChunks / kThreads; ++j) {
        const int idx = j * kThreads + tid, r = idx / kChunks, k = idx % kChunks;
        uint32_t v[4];
        lds_v4(base + chunk_offset<true>(r, k), v);
        store_chunk(out, cols, rows, c0 + r, r0 + 8 * k, v);
    }
}
// /kwiki:rung stsm_swizzled

// ===================================================================================================
// Launchers
// ===================================================================================================

enum class Kind { Copy, LdsmPlain, LdsmSwizzled, StsmSwizzled, ScalarStores };

const void* kernel_of(Kind k) {
    switch (k) {
        case Kind::LdsmPlain: return (const void*)transpose_ldsm<false>;
        case Kind::LdsmSwizzled: return (const void*)transpose_ldsm<true>;
        case Kind::StsmSwizzled: return (const void*)transpose_stsm<false>;
        case Kind::ScalarStores: return (const void*)transpose_stsm<true>;
        default: return nullptr;
    }
}

void launch(Kind k, const Matrix& m, cudaStream_t s) {
    // kwiki:rung copy
    if (k == Kind::Copy) {
        KWIKI_CHECK(cudaMemcpyAsync(m.out.get(), m.in.get(), m.in.bytes(), cudaMemcpyDeviceToDevice, s));
        return;
    }
    // /kwiki:rung copy
    const dim3 grid(unsigned((m.cols + kTile - 1) / kTile), unsigned((m.rows + kTile - 1) / kTile));
    const auto* in = reinterpret_cast<const uint16_t*>(m.in.get());
    auto* out = reinterpret_cast<uint16_t*>(m.out.get());
    switch (k) {
        case Kind::LdsmPlain: transpose_ldsm<false><<<grid, kThreads, 0, s>>>(in, out, m.rows, m.cols); break;
        case Kind::LdsmSwizzled: transpose_ldsm<true><<<grid, kThreads, 0, s>>>(in, out, m.rows, m.cols); break;
        case Kind::StsmSwizzled: transpose_stsm<false><<<grid, kThreads, 0, s>>>(in, out, m.rows, m.cols); break;
        case Kind::ScalarStores: transpose_stsm<true><<<grid, kThreads, 0, s>>>(in, out, m.rows, m.cols); break;
        default: break;
    }
    KWIKI_CHECK_LAST();
}

// A variant's case at one shape: params, bytes (the matrix read plus written), the launch, what its record reports.
kwiki::Case transpose_case(Kind k, const Shape& sh, const Matrix& m) {
    kwiki::Case c;
    c.params = {{"rows", sh.rows}, {"cols", sh.cols}, {"dtype", "bf16"}};
    c.bytes = 2.0 * double(m.in.bytes());
    c.bytes_level = "dram";
    c.launch = [k, &m](cudaStream_t s) { launch(k, m, s); };
    if (const void* f = kernel_of(k)) {
        kwiki::add_occupancy(c.extra, f, kThreads);
        c.extra.emplace_back("block", kThreads);
        c.extra.emplace_back("tile_smem_bytes", kTileBytes);
    }
    return c;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Kind kind;
};

constexpr Variant kVariants[] = {
    {{"copy"}, Kind::Copy},
    // kwiki:rung ldsm_plain
    {{"ldsm_plain"}, Kind::LdsmPlain},
    // /kwiki:rung ldsm_plain
    // kwiki:rung ldsm_swizzled
    {{"ldsm_swizzled"}, Kind::LdsmSwizzled},
    // /kwiki:rung ldsm_swizzled
    // kwiki:rung stsm_swizzled
    {{"stsm_swizzled"}, Kind::StsmSwizzled},
    // /kwiki:rung stsm_swizzled
    {{"scalar_stores"}, Kind::ScalarStores},
};

// rows become the grid's y (at most 65535 CTAs); cols its x
bool valid_shape(const std::vector<int>& d) { return d[0] >= 1 && d[0] <= 65535 * kTile && d[1] >= 1; }

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes =
        m.args.get_shapes<Shape, 2>("shapes", "", "ROWSxCOLS,...: rows from 1 to 65535 * 64, cols from 1", valid_shape);
    kwiki::Runner& runner = m.start("ldmatrix");
    for (const Shape& sh : shapes) {
        // one buffer pair, the input refilled from a new seed before every timed sample: fresh inputs
        Matrix mat(sh, kwiki::hash64(m.seed, uint64_t(sh.rows) * 1000003 + uint64_t(sh.cols)));
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            kwiki::Case c = transpose_case(v.kind, sh, mat);
            const bool transposed = v.kind != Kind::Copy;
            c.poison = [&mat](cudaStream_t s) { kwiki::poison(mat.out.get(), mat.out.bytes(), s); };
            c.check = [&mat, transposed] { return check_host(mat, transposed); };
            c.recheck = [&mat, transposed] { return check_device(mat, transposed); };
            c.refill = [&mat](cudaStream_t s, uint64_t seed) { mat.refill(seed, s); };
            return c;
        });
    }
    return kwiki::exit_code();
}
