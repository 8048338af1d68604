// smem_layout.cu: why shared memory is slow when it is slow: bank conflicts, and the two cures, padding and an XOR
// swizzle, on the textbook case: an fp32 matrix transpose through a 32 x 32 shared-memory tile, against a device copy
// of the same bytes measured in the same run.
//
// The operation: `in` is a rows x cols fp32 matrix (row-major), `out` its transpose, cols x rows (row-major):
// out[c * rows + r] = in[r * cols + c]. A transpose moves bits, so the check is exact: every element of the output,
// poisoned first (0xFF bytes, a NaN), must equal the input element it comes from, regenerated from the fill's hash on
// the host (first check) or on the GPU (re-checks of timed samples). Inputs are fresh (protocol 3): the input is
// refilled from a new seed before every timed sample. The L2 is flushed before every sample (kwiki::Runner).
//
// Shared memory has 32 banks, each 4 bytes wide: the 32-bit word at byte address a is in bank (a / 4) % 32. A warp's
// shared-memory access is served in one pass when its 32 lanes touch 32 different banks (or the same word: a
// broadcast); lanes that touch different words of one bank are served one after the other (an N-way conflict costs N
// passes). A 32 x 32 fp32 tile stored row-major puts all of column c in bank c, so reading a column, which is what a
// transpose does, is a 32-way conflict. Padding each row to 33 words moves element (r, c) to bank (r + c) % 32; an XOR
// swizzle stores it at column c ^ r of row r, bank c ^ r. Both spread a column over all 32 banks, and a row stays on 32
// different banks, so both the tile's stores and its loads are conflict-free.
//
// Build (kwiki does this per target):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o smem_layout smem_layout.cu
// Run: ./smem_layout --shapes=ROWSxCOLS[,...] [--variants a,b]   (the manifest's shapes)
// Shapes: rows from 1 to 65535 * 32 (the grid's y), cols from 1; neither needs to be a multiple of the tile (the edge
// tiles are partly filled and every access is guarded).
//
// Variants (bytes per record: the matrix read plus the matrix written, 2 x rows x cols x 4):
//   copy             cudaMemcpyAsync device to device of the matrix (no transpose): the copy roof (baseline)
//   naive            a 32 x 8 CTA per 32 x 32 tile, no shared memory: each warp reads 128 contiguous bytes of an input
//                    row and writes them down an output column, 32 four-byte stores 4 * rows bytes apart
//   smem_conflicts   the tile through shared memory, float[32][32]: coalesced reads and writes, 32-way bank conflicts
//                    on every load of a tile column
//   smem_padded      the same with float[32][33]: conflict-free
//   smem_swizzled    the same with float[32][32] and element (r, c) at column c ^ r: conflict-free, no padding
#include <mutex>
#include <vector>

#include "kwiki_bench.cuh"

namespace {

constexpr int kTile = 32;       // a tile is kTile x kTile floats: one warp's 32 lanes across a row
constexpr int kBlockRows = 8;   // a CTA is 32 x 8 threads; each thread moves kTile / kBlockRows = 4 elements
constexpr int kThreads = kTile * kBlockRows;

// ===================================================================================================
// Reference: the input's values, regenerated from the fill's hash, and the comparison of the output with them
// ===================================================================================================

struct Shape {
    int rows, cols;
};

// Element i of the input filled from `seed`: kwiki::fill_random<float>'s value, uniform in [-1, 1).
__host__ __device__ inline float input_value(uint64_t seed, size_t i) { return kwiki::random_unit(seed, i, -1.0f, 1.0f); }

// The input element that output element o holds: the transpose's (o = c * rows + r holds in[r * cols + c]), or o
// itself for the copy.
__host__ __device__ inline size_t source_of(size_t o, int rows, int cols, bool transposed) {
    return transposed ? (o % size_t(rows)) * size_t(cols) + o / size_t(rows) : o;
}

// One shape's buffers: the input, the output and a mismatch counter; `seed` is the input's current fill.
struct Matrix {
    int rows, cols;
    kwiki::DeviceBuffer<float> in, out;
    kwiki::DeviceBuffer<unsigned long long> bad{1};
    uint64_t seed = 0;

    Matrix(const Shape& s, uint64_t sd) : rows(s.rows), cols(s.cols), in(size_t(s.rows) * s.cols), out(size_t(s.rows) * s.cols) {
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
    std::snprintf(d, sizeof d, bad ? "%zu of %zu elements differ; first at %zu" : "%zu of %zu elements equal", bad ? bad : n, n, first);
    c.detail = d;
    return c;
}

// Every element of the output against the input element it must hold, on the host (exact: a NaN never equals).
kwiki::CheckResult check_host(const Matrix& m, bool transposed) {
    std::vector<float> got(m.n());
    KWIKI_CHECK(cudaMemcpy(got.data(), m.out.get(), m.out.bytes(), cudaMemcpyDeviceToHost));
    std::mutex mu;
    size_t bad = 0, first = got.size();
    kwiki::parallel_for(got.size(), [&](size_t lo, size_t hi) {
        size_t my_bad = 0, my_first = got.size();
        for (size_t o = lo; o < hi; ++o)
            if (!(got[o] == input_value(m.seed, source_of(o, m.rows, m.cols, transposed))) && !my_bad++) my_first = o;
        std::lock_guard<std::mutex> lock(mu);
        bad += my_bad;
        first = std::min(first, my_first);
    });
    return mismatch_result(bad, got.size(), first, transposed ? "host: out[c][r] equals in[r][c], regenerated from the fill's hash"
                                                              : "host: out equals in, regenerated from the fill's hash");
}

// The same comparison on the GPU, for the re-checks of timed samples: elements that differ, counted into *bad.
__global__ void count_mismatch(const float* out, int rows, int cols, bool transposed, uint64_t seed, unsigned long long* bad) {
    const size_t n = size_t(rows) * cols;
    unsigned long long b = 0;
    for (size_t o = blockIdx.x * size_t(blockDim.x) + threadIdx.x; o < n; o += size_t(gridDim.x) * blockDim.x)
        b += !(out[o] == input_value(seed, source_of(o, rows, cols, transposed)));
    if (b) atomicAdd(bad, b);
}

kwiki::CheckResult check_device(const Matrix& m, bool transposed) {
    KWIKI_CHECK(cudaMemset(m.bad.get(), 0, sizeof(unsigned long long)));
    count_mismatch<<<unsigned(kwiki::sm_count()) * 8, 256>>>(m.out.get(), m.rows, m.cols, transposed, m.seed, m.bad.get());
    KWIKI_CHECK_LAST();
    unsigned long long bad = 0;
    KWIKI_CHECK(cudaMemcpy(&bad, m.bad.get(), sizeof bad, cudaMemcpyDeviceToHost));
    return mismatch_result(size_t(bad), m.n(), 0, transposed ? "GPU: out[c][r] equals in[r][c], regenerated from the fill's hash"
                                                             : "GPU: out equals in, regenerated from the fill's hash");
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// Every kernel: grid (ceil(cols / 32), ceil(rows / 32)), CTA (32, 8); CTA (bx, by) owns the input tile of rows
// 32 * by .. + 31 and columns 32 * bx .. + 31, and each thread moves 4 of its elements, 8 rows apart.

// kwiki:rung naive
// No shared memory: lane tx of warp ty reads in[r][c] (c = 32 * bx + tx: a warp reads 128 contiguous bytes of a row)
// and writes out[c][r] straight away: the 32 lanes of a warp write 32 different output rows, 4 * rows bytes apart, one
// 32-byte sector each for 4 useful bytes. The L2 can merge the sectors the CTA's other warps complete, but every store
// instruction costs 32 sector writes where a coalesced one costs 4.
__global__ void __launch_bounds__(kThreads) transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    const int c = blockIdx.x * kTile + threadIdx.x;
    const int r0 = blockIdx.y * kTile + threadIdx.y;
    if (c >= cols) return;
#pragma unroll
    for (int j = 0; j < kTile; j += kBlockRows) {
        const int r = r0 + j;
        if (r < rows) out[size_t(c) * rows + r] = in[size_t(r) * cols + c];
    }
}
// /kwiki:rung naive

enum class Layout { Conflicts, Padded, Swizzled };

// Where tile element (row r, column c) lives, in floats from the tile's start, and the tile's size in floats.
template <Layout L>
__device__ __forceinline__ int tile_index(int r, int c) {
    // kwiki:rung smem_padded
    if constexpr (L == Layout::Padded) return r * (kTile + 1) + c;  // rows of 33 words: bank (r + c) % 32
    // /kwiki:rung smem_padded
    // kwiki:rung smem_swizzled
    if constexpr (L == Layout::Swizzled) return r * kTile + (c ^ r);  // column c ^ r of row r: bank c ^ r, no padding
    // /kwiki:rung smem_swizzled
    return r * kTile + c;  // row-major: bank c, whatever the row
}
template <Layout L>
constexpr int kTileFloats = L == Layout::Padded ? kTile * (kTile + 1) : kTile * kTile;

// kwiki:rung smem_conflicts
// Through a shared-memory tile, so that both global accesses are coalesced. Phase 1: warp ty reads input rows
// 32 * by + ty + j (lanes along the row: 128 contiguous bytes) and stores them into tile rows ty + j, lane tx at tile
// column tx: 32 consecutive columns of one row, 32 different banks in every layout. Phase 2: lane tx writes output
// column 32 * by + tx of output row 32 * bx + ty + j (128 contiguous bytes again); that element is in[32 by + tx]
// [32 bx + ty + j], tile element (tx, ty + j): the warp reads one tile column, rows 0 .. 31. Row-major, that column is
// 32 words of one bank: 32 passes for one load instruction. Out-of-range elements of an edge tile are neither loaded
// nor read: phase 2's guard names the same input element as phase 1's.
template <Layout L>
__global__ void __launch_bounds__(kThreads) transpose_smem(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[kTileFloats<L>];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r_base = blockIdx.y * kTile, c_base = blockIdx.x * kTile;
    const int c_in = c_base + tx;
#pragma unroll
    for (int j = 0; j < kTile; j += kBlockRows) {
        const int r = r_base + ty + j;
        if (r < rows && c_in < cols) tile[tile_index<L>(ty + j, tx)] = in[size_t(r) * cols + c_in];
    }
    __syncthreads();  // the whole tile landed before any column of it is read
    const int r_out = r_base + tx;  // the output's column: an input row
#pragma unroll
    for (int j = 0; j < kTile; j += kBlockRows) {
        const int c = c_base + ty + j;  // the output's row: an input column
        if (c < cols && r_out < rows) out[size_t(c) * rows + r_out] = tile[tile_index<L>(tx, ty + j)];
    }
}
// /kwiki:rung smem_conflicts

// ===================================================================================================
// Launchers
// ===================================================================================================

enum class Kind { Copy, Naive, Conflicts, Padded, Swizzled };

const void* kernel_of(Kind k) {
    switch (k) {
        case Kind::Naive: return (const void*)transpose_naive;
        case Kind::Conflicts: return (const void*)transpose_smem<Layout::Conflicts>;
        case Kind::Padded: return (const void*)transpose_smem<Layout::Padded>;
        case Kind::Swizzled: return (const void*)transpose_smem<Layout::Swizzled>;
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
    const dim3 grid(unsigned((m.cols + kTile - 1) / kTile), unsigned((m.rows + kTile - 1) / kTile)), block(kTile, kBlockRows);
    const float* in = m.in.get();
    float* out = m.out.get();
    switch (k) {
        case Kind::Naive: transpose_naive<<<grid, block, 0, s>>>(in, out, m.rows, m.cols); break;
        case Kind::Conflicts: transpose_smem<Layout::Conflicts><<<grid, block, 0, s>>>(in, out, m.rows, m.cols); break;
        case Kind::Padded: transpose_smem<Layout::Padded><<<grid, block, 0, s>>>(in, out, m.rows, m.cols); break;
        case Kind::Swizzled: transpose_smem<Layout::Swizzled><<<grid, block, 0, s>>>(in, out, m.rows, m.cols); break;
        default: break;
    }
    KWIKI_CHECK_LAST();
}

// A variant's case at one shape: params, bytes (the matrix read plus written), the launch, what its record reports.
kwiki::Case transpose_case(Kind k, const Shape& sh, const Matrix& m) {
    kwiki::Case c;
    c.params = {{"rows", sh.rows}, {"cols", sh.cols}, {"dtype", "fp32"}};
    c.bytes = 2.0 * double(m.in.bytes());
    c.bytes_level = "dram";
    c.launch = [k, &m](cudaStream_t s) { launch(k, m, s); };
    if (const void* f = kernel_of(k)) {
        kwiki::add_occupancy(c.extra, f, kThreads);
        c.extra.emplace_back("block", kThreads);
        c.extra.emplace_back("tile_smem_bytes", k == Kind::Naive ? 0 : k == Kind::Padded ? kTile * (kTile + 1) * 4 : kTile * kTile * 4);
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
    // kwiki:rung naive
    {{"naive"}, Kind::Naive},
    // /kwiki:rung naive
    // kwiki:rung smem_conflicts
    {{"smem_conflicts"}, Kind::Conflicts},
    // /kwiki:rung smem_conflicts
    // kwiki:rung smem_padded
    {{"smem_padded"}, Kind::Padded},
    // /kwiki:rung smem_padded
    // kwiki:rung smem_swizzled
    {{"smem_swizzled"}, Kind::Swizzled},
    // /kwiki:rung smem_swizzled
};

// rows become the grid's y (at most 65535 CTAs); cols its x
bool valid_shape(const std::vector<int>& d) { return d[0] >= 1 && d[0] <= 65535 * kTile && d[1] >= 1; }

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_shapes<Shape, 2>("shapes", "", "ROWSxCOLS,...: rows from 1 to 65535 * 32, cols from 1", valid_shape);
    kwiki::Runner& runner = m.start("smem_layout");
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
