// tma.cu: how fast the Hopper tensor-memory accelerator (TMA) moves 2-D tiles from global into shared
// memory, by box size, swizzle mode and pipeline depth, and what cluster multicast buys.
//
// Each CTA streams boxes of a bf16 matrix through a ring of S shared-memory stages: one producer thread
// issues cp.async.bulk.tensor into a free stage, a consumer waits for it to land and frees the stage. Persistent
// grid, one CTA per SM (every variant takes more than half of an SM's shared memory, so two never share an SM;
// each record carries blocks_per_sm from the occupancy API). bytes = bytes landed in shared memory, summed over
// CTAs (a multicast box counts once per receiving CTA); extra.per_cta_gb_s = bytes / CTAs / time.
//
// The consumer (what a CTA does with a box once it has landed) must not be the limit, or the benchmark measures
// it: a single warp summing every box through generic loads caps a CTA at ~35 GB/s whatever TMA does (the
// `_sum1` variants keep that consumer, to show it). So the measured variants use the `touch` consumer: one thread
// waits on the stage's mbarrier, reads one 32-bit word of each slice of the box (the slice one CTA of the
// cluster loaded: row 0 of every box_rows / cluster rows, which no swizzle moves) and frees the stage. The check
// of a timed launch is the sum of those words (every box of every receiving CTA must have landed, with the right
// first words). The whole data path is checked in a separate pass before timing (kwiki::Case::precheck): the
// same configuration with the `sum8` consumer (8 warps summing every 32-bit word of every box with 16-byte
// ld.shared.v4), whose sum must equal the host's word sum. The `_sum8` variants time that consumer too: a
// consumer that reads every byte, fast enough that TMA is still the limit where it can be.
//   HBM stream: a 256 MiB matrix (16384 x 8192, 4x the L2; --rows=N for fewer rows), boxes dealt round-robin to CTAs (clusters),
//   L2 flushed before every timed launch.
//   L2-resident ("l2_" variants): every CTA (cluster) reads all of a 16 MiB matrix (its first 1024 rows; --l2-rows=N)
//   that stays in the L2: no flush, and one untimed launch before each timed one brings it in (kwiki::Runner's
//   flush_l2 = false): the L2-to-SM path is the limit.
// Bytes' level (the physical gate's and the profile audit's): the single-CTA HBM stream moves DRAM bytes; the
// L2-resident stream without clusters (l2_c1*) counts bytes each CTA takes from the L2 ("l2"); every cluster
// variant, copy or multicast, counts each box once per receiving CTA, bytes landed in shared memory ("smem"),
// more than the L2 delivered (extra.l2_bytes: what the program asked of the L2). Not "l2" for the cluster
// copies: `kwiki verify --profile` on the H200 saw the L2 slices serve far fewer bytes (lts__t_bytes) than the
// C CTAs of a cluster request when they load the same box at nearly the same time, so the L2 level would
// overstate what the L2 did.
// The kernel adds every CTA's sum into one 32-bit counter: `poison` zeroes it before every launch (no
// correct launch leaves it 0 in any but one case in 2^32), so the check sees that launch's sum alone.
// Clusters of C: the C CTAs need the same boxes. "copy" variants load each whole box in every CTA (C reads
// of it from the L2); "multicast" variants load 1/C of each box in each CTA and multicast it to all C (one
// read). The same bytes land either way, so the time ratio copy / multicast is the amplification.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o tma tma.cu
// Run:   ./tma --rows=16384 --l2-rows=1024 [--variants a,b] [--seed N]   (the manifest's shapes; small rows: the sanitizers')
//
// Variants (box = rows x columns of bf16; swizzle; stages; cluster), `touch` consumer unless named:
//   box_16 .. box_256   64-column (128-byte) boxes of 16, 32, 64, 128, 256 rows, 128B swizzle, 4 stages
//   swz_none            64 x 128 box without swizzle (box_128 is the same box with 128B swizzle)
//   swz_64              32 columns x 256 rows, 64B swizzle (16 KiB)
//   swz_32              16 columns x 256 rows, 32B swizzle (8 KiB)
//   depth_1 .. depth_8  the box_128 box with 1, 2, 8 stages (box_128 is depth 4)
//   c2_copy, c2_multicast, c4_copy, c4_multicast   HBM stream, 128 x 64 box, clusters of 2 and 4, 4 stages
//   c2_copy_d8 .. c4_multicast_d8                  the same with 8 stages
//   l2_c1, l2_c2_copy .. l2_c4_multicast           L2-resident, 128 x 64 box, 4 stages, no cluster / 2 / 4
//   <v>_sum1            variant <v> with the old consumer: one warp sums every box through generic loads
//   <v>_sum8            variant <v> with 8 consumer warps summing every box through ld.shared.v4
#include <deque>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "sm90.cuh"

using bf16 = __nv_bfloat16;

constexpr int COLS = 8192;
constexpr int MAX_BOX_ROWS = 256;  // every row count must be a multiple of the tallest box
// The matrix's rows (HBM stream, default 16384: 256 MiB) and the L2-resident matrix's (its first rows, default 1024: 16 MiB).
struct Shape {
    int rows, l2_rows;
};
constexpr int MAX_STAGES = 8;

// ===================================================================================================
// Reference: the word sums of the matrix, on the host
// ===================================================================================================

uint32_t host_word_sum(const std::vector<uint32_t>& words, size_t n) {
    uint32_t s = 0;
    for (size_t i = 0; i < n; ++i) s += words[i];
    return s;
}

// The touch consumer's sum over every box of a rows x COLS matrix: per box, the first word of each of its
// `slices` slices (rows 0, box_rows / slices, ...), i.e. the word holding elements (row, col) and (row, col + 1).
uint32_t host_token_sum(const std::vector<uint32_t>& words, int rows, int box_rows, int box_cols, int slices) {
    uint32_t s = 0;
    for (int r0 = 0; r0 < rows; r0 += box_rows)
        for (int c0 = 0; c0 < COLS; c0 += box_cols)
            for (int k = 0; k < slices; ++k) s += words[(size_t(r0 + k * (box_rows / slices)) * COLS + c0) / 2];
    return s;
}

// The sum in `sums` after a launch against `want`.
kwiki::CheckResult check_sum(const uint32_t* sums, uint32_t want, const char* reference) {
    uint32_t got = 0;
    KWIKI_CHECK(cudaMemcpy(&got, sums, sizeof got, cudaMemcpyDeviceToHost));
    kwiki::CheckResult r;
    r.passed = got == want;
    r.reference = reference;
    r.max_abs_err = got == want ? 0 : 1;
    char buf[160];
    std::snprintf(buf, sizeof buf, "sum %08x, expected %08x", got, want);
    r.detail = buf;
    return r;
}

// ===================================================================================================
// Kernel
// ===================================================================================================

// What a CTA does with a box once it has landed.
enum class Consume {
    Touch,  // one thread reads one word of each slice (box_rows / cluster rows apart) and frees the stage
    Sum8,   // 8 warps sum every 32-bit word with 16-byte ld.shared.v4; one arrive per warp
    Sum1,   // one warp sums every word through 16-byte generic loads (the consumer this benchmark first had)
};

__host__ __device__ constexpr int consumer_warps(Consume c) { return c == Consume::Sum8 ? 8 : 1; }
__host__ __device__ constexpr int threads_of(Consume c) { return 32 * (1 + consumer_warps(c)); }

struct StreamArgs {
    int box_rows, box_cols, stages, cluster, multicast;
    int boxes_x, boxes;
    int all;  // every cluster reads every box (L2-resident mode), else boxes are dealt round-robin
};

__device__ __forceinline__ uint4 lds16(uint32_t addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
    return v;
}
__device__ __forceinline__ uint32_t lds4(uint32_t addr) {
    uint32_t v;
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr));
    return v;
}

// Warp 0's thread 0 produces; the consumer warps (1 .. consumer_warps(C)) consume as C says.
template <Consume C>
__global__ void __launch_bounds__(threads_of(C), 1) tma_stream(const __grid_constant__ CUtensorMap map, StreamArgs a, uint32_t* sums) {
    constexpr int W = consumer_warps(C);
    extern __shared__ uint8_t smem_raw[];
    uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const int box_bytes = a.box_rows * a.box_cols * 2;
    uint64_t* full = reinterpret_cast<uint64_t*>(ring + a.stages * box_bytes);
    uint64_t* empty = full + MAX_STAGES;
    const uint32_t rank = a.cluster > 1 ? sm90::cluster_ctarank() : 0;
    // every consumer warp of every CTA that receives this CTA's loads frees the stage once
    const int arrivals = (C == Consume::Touch ? 1 : W) * (a.multicast ? a.cluster : 1);
    if (threadIdx.x == 0) {
        for (int s = 0; s < a.stages; ++s) sm90::mbar_init(&full[s], 1), sm90::mbar_init(&empty[s], arrivals);
        sm90::fence_barrier_init();
    }
    if (a.cluster > 1) sm90::cluster_sync();
    else __syncthreads();

    // this cluster's boxes: j-th is first + j * step (round-robin), or all of them from a staggered start
    const int first = blockIdx.x / a.cluster, step = gridDim.x / a.cluster;
    const int count = a.all ? a.boxes : (first < a.boxes ? (a.boxes - first + step - 1) / step : 0);
    auto box_of = [&](int j) { return a.all ? (j + first * (a.boxes / step)) % a.boxes : first + j * step; };
    auto free_stage = [&](int stage) {  // one arrive per consumer warp on every CTA whose producer wrote the stage
        if (a.multicast)
            for (int r = 0; r < a.cluster; ++r) sm90::mbar_arrive_cluster(&empty[stage], uint32_t(r));
        else
            sm90::mbar_arrive(&empty[stage]);
    };
    const int slice_rows = a.box_rows / a.cluster;  // one slice per CTA of the cluster (loaded by it when multicast)
    if (threadIdx.x == 0) {  // producer
        int stage = 0;
        uint32_t phase = 0;
        for (int j = 0; j < count; ++j) {
            const int i = box_of(j);
            const int col = (i % a.boxes_x) * a.box_cols, row = (i / a.boxes_x) * a.box_rows;
            sm90::mbar_wait(&empty[stage], phase ^ 1);
            sm90::mbar_arrive_expect_tx(&full[stage], box_bytes);
            uint8_t* dst = ring + stage * box_bytes;
            if (a.multicast)
                sm90::tma_load_2d_multicast(dst + rank * slice_rows * a.box_cols * 2, &map, &full[stage], col, row + int(rank) * slice_rows,
                                            uint16_t((1u << a.cluster) - 1));
            else
                sm90::tma_load_2d(dst, &map, &full[stage], col, row);
            if (++stage == a.stages) stage = 0, phase ^= 1;
        }
    } else if (threadIdx.x >= 32) {  // consumer warps
        const int t = threadIdx.x - 32, lane = t & 31;
        uint32_t sum = 0;
        int stage = 0;
        uint32_t phase = 0;
        if constexpr (C == Consume::Touch) {
            if (t == 0)
                for (int j = 0; j < count; ++j) {
                    sm90::mbar_wait(&full[stage], phase);
                    const uint32_t base = sm90::smem_u32(ring + stage * box_bytes);
                    for (int k = 0; k < a.cluster; ++k) sum += lds4(base + uint32_t(k * slice_rows * a.box_cols * 2));
                    free_stage(stage);
                    if (++stage == a.stages) stage = 0, phase ^= 1;
                }
        } else {
            for (int j = 0; j < count; ++j) {
                sm90::mbar_wait(&full[stage], phase);
                if constexpr (C == Consume::Sum8) {
                    const uint32_t base = sm90::smem_u32(ring + stage * box_bytes);
                    for (int q = t; q < box_bytes / 16; q += 32 * W) {
                        const uint4 v = lds16(base + uint32_t(q) * 16);
                        sum += v.x + v.y + v.z + v.w;
                    }
                } else {  // Sum1: a generic pointer (the ring's address went through an integer), generic loads
                    const uint4* box = reinterpret_cast<const uint4*>(ring + stage * box_bytes);
                    for (int q = lane; q < box_bytes / 16; q += 32) {
                        uint4 v = box[q];
                        sum += v.x + v.y + v.z + v.w;
                    }
                }
                __syncwarp();
                if (lane == 0) free_stage(stage);
                if (++stage == a.stages) stage = 0, phase ^= 1;
            }
        }
        for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) atomicAdd(sums, sum);
    }
    if (a.cluster > 1) sm90::cluster_sync();  // no CTA leaves while a peer may still multicast into it
}

using KernelFn = void (*)(CUtensorMap, StreamArgs, uint32_t*);

KernelFn kernel_of(Consume c) {
    return c == Consume::Touch ? tma_stream<Consume::Touch> : c == Consume::Sum8 ? tma_stream<Consume::Sum8> : tma_stream<Consume::Sum1>;
}
const char* consumer_name(Consume c) { return c == Consume::Touch ? "touch" : c == Consume::Sum8 ? "sum8" : "sum1"; }

// ===================================================================================================
// Launcher
// ===================================================================================================

// A row of the table of variants: what its launch needs.
struct Variant : kwiki::VariantInfo {
    int box_rows, box_cols;
    CUtensorMapSwizzle swizzle;
    const char* swizzle_name;
    int stages, cluster, multicast;
    bool l2;  // L2-resident mode
    Consume consume;
};

// Where a variant's counted bytes move (see the header): DRAM, the L2-to-SM path, or into shared memory.
const char* bytes_level(const Variant& v) { return v.cluster > 1 ? "smem" : v.l2 ? "l2" : "dram"; }

// Ring + barriers + alignment slack, but never less than half an SM's shared memory (+1 KiB): one CTA per SM.
int smem_for(const Variant& v) {
    static const int half_sm = kwiki::device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor) / 2 + 1024;
    return std::max(v.stages * v.box_rows * v.box_cols * 2 + 2 * MAX_STAGES * 8 + 1024, half_sm);
}

struct Launch {
    CUtensorMap map;
    StreamArgs a;
    int grid, smem;
    uint32_t* sums;
};

Launch prepare(const Variant& v, const Shape& shape, const bf16* matrix, uint32_t* sums) {
    KWIKI_REQUIRE(v.box_rows % (8 * v.cluster) == 0, "each slice of a box must be whole 8-row swizzle atoms (box_rows % (8 * cluster))");
    // a throughput benchmark of whole boxes: the matrices are multiples of every box (no edge boxes to check)
    const int rows = v.l2 ? shape.l2_rows : shape.rows;
    KWIKI_REQUIRE(rows % v.box_rows == 0 && COLS % v.box_cols == 0, "boxes must tile the matrix");
    Launch l{};
    l.a = {v.box_rows, v.box_cols, v.stages, v.cluster, v.multicast, COLS / v.box_cols, (rows / v.box_rows) * (COLS / v.box_cols), v.l2};
    const int load_rows = v.multicast ? v.box_rows / v.cluster : v.box_rows;
    l.map = sm90::tensor_map_2d(matrix, rows, COLS, load_rows, v.box_cols, v.swizzle);
    l.smem = smem_for(v);
    l.sums = sums;
    int slots = kwiki::sm_count();
    if (v.cluster > 1) {
        cudaLaunchConfig_t cfg{};
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = v.cluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
        cfg.gridDim = dim3(v.cluster * kwiki::sm_count()), cfg.blockDim = dim3(threads_of(v.consume)), cfg.dynamicSmemBytes = l.smem;
        cfg.attrs = &attr, cfg.numAttrs = 1;
        int clusters = 0;
        KWIKI_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel_of(v.consume), &cfg));
        KWIKI_REQUIRE(clusters > 0, "no cluster fits");
        slots = clusters * v.cluster;
    }
    l.grid = slots;
    return l;
}

void run(const Launch& l, Consume c, cudaStream_t s) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = l.a.cluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(l.grid), cfg.blockDim = dim3(threads_of(c)), cfg.dynamicSmemBytes = l.smem, cfg.stream = s;
    cfg.attrs = &attr, cfg.numAttrs = l.a.cluster > 1 ? 1 : 0;
    KWIKI_CHECK(cudaLaunchKernelEx(&cfg, kernel_of(c), l.map, l.a, l.sums));
}


// The matrix every variant streams, filled once (one input set: raw random bits; every launch reads all of it,
// cold after the flush or warm in the L2), with the host's copy of its words for the reference sums.
struct Matrix {
    bf16* data = nullptr;
    uint32_t* sums = nullptr;  // the kernel's one 32-bit counter
    std::vector<uint32_t> words;
    uint32_t total, l2_total;  // host sums of every word of the matrix, and of its L2-resident rows

    Matrix(const Shape& shape, uint64_t seed) : words(size_t(shape.rows) * COLS / 2) {
        const size_t n = size_t(shape.rows) * COLS;
        KWIKI_CHECK(cudaMalloc(&data, n * 2));
        KWIKI_CHECK(cudaMalloc(&sums, sizeof(uint32_t)));
        kwiki::fill_random(reinterpret_cast<uint32_t*>(data), n / 2, seed);  // raw random bits
        KWIKI_CHECK(cudaMemcpy(words.data(), data, n * 2, cudaMemcpyDeviceToHost));
        total = host_word_sum(words, words.size());
        l2_total = host_word_sum(words, size_t(shape.l2_rows) * COLS / 2);
    }
    ~Matrix() { cudaFree(data), cudaFree(sums); }
    Matrix(const Matrix&) = delete;
    Matrix& operator=(const Matrix&) = delete;

    // every CTA of a cluster receives every box of its cluster; in L2 mode every CTA receives every box
    static uint32_t receivers(const Variant& v, const Launch& l) { return v.l2 ? uint32_t(l.grid) : uint32_t(v.cluster); }
    // the sum a consumer that reads every byte (sum1, sum8) must report
    uint32_t full_sum(const Variant& v, const Launch& l) const { return (v.l2 ? l2_total : total) * receivers(v, l); }
    // the sum the touch consumer must report
    uint32_t touch_sum(const Variant& v, const Launch& l, const Shape& shape) const {
        return host_token_sum(words, v.l2 ? shape.l2_rows : shape.rows, v.box_rows, v.box_cols, v.cluster) * receivers(v, l);
    }
};

// One limit of dynamic shared memory for every variant's launch, set on the three kernels.
void set_smem_limit(const Variant* table, size_t n) {
    int max_smem = 0;
    for (size_t i = 0; i < n; ++i) max_smem = std::max(max_smem, smem_for(table[i]));
    for (Consume c : {Consume::Touch, Consume::Sum8, Consume::Sum1})
        KWIKI_CHECK(cudaFuncSetAttribute(kernel_of(c), cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
}

// A variant's case: its launch and what its record reports (bytes landed in shared memory, the box, the consumer,
// per_cta_gb_s). The caller binds its poison and checks.
kwiki::Case tma_case(const Variant& v, const Launch& l, const Shape& shape) {
    const int rows = v.l2 ? shape.l2_rows : shape.rows;
    const double matrix_bytes = double(rows) * COLS * 2;
    const Consume consume = v.consume;
    kwiki::Case c;
    c.params = {{"rows", rows}, {"cols", COLS}, {"dtype", "bf16"}};
    c.bytes = v.l2 ? matrix_bytes * l.grid : matrix_bytes * v.cluster;
    c.bytes_level = bytes_level(v);
    c.flush_l2 = !v.l2;  // L2-resident: warmed by an untimed launch instead of flushed
    c.launch = [&l, consume](cudaStream_t s) { run(l, consume, s); };
    const int threads = threads_of(consume);
    const double grid = l.grid;
    c.extra = {{"box_rows", v.box_rows}, {"box_cols", v.box_cols}, {"box_bytes", v.box_rows * v.box_cols * 2},
               {"swizzle", v.swizzle_name}, {"stages", v.stages}, {"cluster", v.cluster}, {"multicast", v.multicast != 0},
               {"consumer", consumer_name(consume)}, {"threads", threads}, {"ctas", l.grid}, {"l2_resident", v.l2},
               {"smem_bytes", l.smem}, {"l2_bytes", v.multicast ? *c.bytes / v.cluster : *c.bytes}};
    kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(kernel_of(consume)), threads, size_t(l.smem));
    c.finish = [grid](kwiki::Record& r) {  // what one CTA (one SM) receives per second
        if (r.timing && r.bytes) r.extra.emplace_back("per_cta_gb_s", *r.bytes / grid / r.timing->median_us / 1e3);
    };
    return c;
}

// The data path in full: the touch variant's configuration run once with the sum8 consumer (a checked pass before
// timing, kwiki::Case::precheck), whose sum must be `want`.
kwiki::CheckResult sum8_pass(const Launch& l, uint32_t* sums, uint32_t want) {
    KWIKI_CHECK(cudaMemset(sums, 0, sizeof(uint32_t)));
    run(l, Consume::Sum8, 0);
    KWIKI_CHECK_LAST();
    KWIKI_CHECK(cudaDeviceSynchronize());
    kwiki::CheckResult r = check_sum(sums, want, "checked pass with the sum8 consumer: host sum of every 32-bit word of the "
                                                 "matrix, times the CTAs that receive each box");
    r.detail = "sum8 pass: " + r.detail;
    return r;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr CUtensorMapSwizzle SW128 = CU_TENSOR_MAP_SWIZZLE_128B;
constexpr Consume T = Consume::Touch, S8 = Consume::Sum8, S1 = Consume::Sum1;
constexpr Variant kVariants[] = {
    {{"box_16"}, 16, 64, SW128, "128B", 4, 1, 0, false, T},
    {{"box_32"}, 32, 64, SW128, "128B", 4, 1, 0, false, T},
    {{"box_64"}, 64, 64, SW128, "128B", 4, 1, 0, false, T},
    {{"box_128"}, 128, 64, SW128, "128B", 4, 1, 0, false, T},
    {{"box_256"}, 256, 64, SW128, "128B", 4, 1, 0, false, T},
    {{"swz_none"}, 128, 64, CU_TENSOR_MAP_SWIZZLE_NONE, "none", 4, 1, 0, false, T},
    {{"swz_64"}, 256, 32, CU_TENSOR_MAP_SWIZZLE_64B, "64B", 4, 1, 0, false, T},
    {{"swz_32"}, 256, 16, CU_TENSOR_MAP_SWIZZLE_32B, "32B", 4, 1, 0, false, T},
    {{"depth_1"}, 128, 64, SW128, "128B", 1, 1, 0, false, T},
    {{"depth_2"}, 128, 64, SW128, "128B", 2, 1, 0, false, T},
    {{"depth_8"}, 128, 64, SW128, "128B", 8, 1, 0, false, T},
    {{"c2_copy"}, 128, 64, SW128, "128B", 4, 2, 0, false, T},
    {{"c2_multicast"}, 128, 64, SW128, "128B", 4, 2, 1, false, T},
    {{"c4_copy"}, 128, 64, SW128, "128B", 4, 4, 0, false, T},
    {{"c4_multicast"}, 128, 64, SW128, "128B", 4, 4, 1, false, T},
    {{"c2_copy_d8"}, 128, 64, SW128, "128B", 8, 2, 0, false, T},
    {{"c2_multicast_d8"}, 128, 64, SW128, "128B", 8, 2, 1, false, T},
    {{"c4_copy_d8"}, 128, 64, SW128, "128B", 8, 4, 0, false, T},
    {{"c4_multicast_d8"}, 128, 64, SW128, "128B", 8, 4, 1, false, T},
    {{"l2_c1"}, 128, 64, SW128, "128B", 4, 1, 0, true, T},
    {{"l2_c2_copy"}, 128, 64, SW128, "128B", 4, 2, 0, true, T},
    {{"l2_c2_multicast"}, 128, 64, SW128, "128B", 4, 2, 1, true, T},
    {{"l2_c4_copy"}, 128, 64, SW128, "128B", 4, 4, 0, true, T},
    {{"l2_c4_multicast"}, 128, 64, SW128, "128B", 4, 4, 1, true, T},
    // the consumer study: the same configurations with a consumer that reads every byte
    {{"box_128_sum1"}, 128, 64, SW128, "128B", 4, 1, 0, false, S1},
    {{"box_128_sum8"}, 128, 64, SW128, "128B", 4, 1, 0, false, S8},
    {{"c4_copy_sum1"}, 128, 64, SW128, "128B", 4, 4, 0, false, S1},
    {{"c4_copy_sum8"}, 128, 64, SW128, "128B", 4, 4, 0, false, S8},
    {{"l2_c1_sum1"}, 128, 64, SW128, "128B", 4, 1, 0, true, S1},
    {{"l2_c1_sum8"}, 128, 64, SW128, "128B", 4, 1, 0, true, S8},
    {{"l2_c4_multicast_sum1"}, 128, 64, SW128, "128B", 4, 4, 1, true, S1},
    {{"l2_c4_multicast_sum8"}, 128, 64, SW128, "128B", 4, 4, 1, true, S8},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto rows = m.args.get_sizes("rows", "", 1, "the streamed matrix's rows");  // the manifest's shapes
    const auto l2_rows = m.args.get_sizes("l2-rows", "", 1, "the L2-resident matrix's rows");
    const Shape shape{rows.at(0)[0], l2_rows.at(0)[0]};
    if (rows.size() != 1 || l2_rows.size() != 1 || shape.rows % MAX_BOX_ROWS || shape.l2_rows % MAX_BOX_ROWS || shape.l2_rows > shape.rows)
        kwiki::Args::usage("--rows and --l2-rows want one multiple of " + std::to_string(MAX_BOX_ROWS) + " each, --l2-rows at most --rows");
    kwiki::Runner& runner = m.start("tma");
    set_smem_limit(kVariants, std::size(kVariants));
    const Matrix matrix(shape, m.seed);
    std::deque<Launch> launches;  // one per case, alive until the runner is done (a deque never moves them)
    kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
        const Launch& l = launches.emplace_back(prepare(v, shape, matrix.data, matrix.sums));
        kwiki::Case c = tma_case(v, l, shape);
        uint32_t* sums = matrix.sums;
        const uint32_t full = matrix.full_sum(v, l), touch = matrix.touch_sum(v, l, shape);
        c.poison = [sums](cudaStream_t s) { KWIKI_CHECK(cudaMemsetAsync(sums, 0, sizeof(uint32_t), s)); };  // see the header
        if (v.consume != Consume::Touch) {
            c.check = [sums, full] { return check_sum(sums, full, "host sum of every 32-bit word of the matrix, times the CTAs that receive each box"); };
            return c;
        }
        c.check = [sums, touch] { return check_sum(sums, touch, "host sum of the first word of every slice of every box, times the CTAs that receive each box"); };
        c.precheck = [&l, sums, full] { return sum8_pass(l, sums, full); };  // the data path in full, once before timing
        return c;
    });
    return kwiki::exit_code();
}
