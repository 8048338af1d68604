// tma.cu: how fast the Hopper tensor-memory accelerator (TMA) moves 2-D tiles from global into shared
// memory, by box size, swizzle mode and pipeline depth, and what cluster multicast buys.
//
// Each CTA streams boxes of a bf16 matrix through a ring of S shared-memory stages: one producer thread
// issues cp.async.bulk.tensor into a free stage, a consumer warp waits for it to land, sums every 32-bit
// word of the box (the check) and frees the stage. Persistent grid, one CTA per SM (every variant takes
// more than half of an SM's shared memory, so two never share an SM). bytes = bytes landed in shared
// memory, summed over CTAs (a multicast box counts once per receiving CTA).
//   HBM stream: a 256 MiB matrix (16384 x 8192, 4x the L2), boxes dealt round-robin to CTAs (clusters),
//   L2 flushed before every timed launch.
//   L2-resident ("l2_" variants): every CTA (cluster) reads all of a 16 MiB matrix (its first 1024 rows)
//   that stays in the L2: no flush, and one untimed launch before each timed one brings it in (kwiki::Runner's
//   flush_l2 = false): the L2-to-SM path is the limit.
// Bytes' level (the physical gate's): the single-CTA HBM stream moves DRAM bytes; the copy variants count bytes
// each CTA takes from the L2 ("l2"); the multicast variants count each box once per receiving CTA, bytes landed
// in shared memory ("smem"), more than the L2 or DRAM delivered.
// The kernel adds every CTA's word sum into one 32-bit counter: `poison` zeroes it before every launch (no
// correct launch leaves it 0 in any but one case in 2^32), so the check sees that launch's sum alone.
// Clusters of C: the C CTAs need the same boxes. "copy" variants load each whole box in every CTA (C reads
// of it from the L2); "multicast" variants load 1/C of each box in each CTA and multicast it to all C (one
// read). The same bytes land either way, so the time ratio copy / multicast is the amplification.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o tma tma.cu
// Run:   ./tma [--variants a,b] [--seed N]
//
// Variants (box = rows x columns of bf16; swizzle; stages; cluster):
//   box_16 .. box_256   64-column (128-byte) boxes of 16, 32, 64, 128, 256 rows, 128B swizzle, 4 stages
//   swz_none            64 x 128 box without swizzle (box_128 is the same box with 128B swizzle)
//   swz_64              32 columns x 256 rows, 64B swizzle (16 KiB)
//   swz_32              16 columns x 256 rows, 32B swizzle (8 KiB)
//   depth_1 .. depth_8  the box_128 box with 1, 2, 8 stages (box_128 is depth 4)
//   c2_copy, c2_multicast, c4_copy, c4_multicast   HBM stream, 128 x 64 box, clusters of 2 and 4, 4 stages
//   c2_copy_d8 .. c4_multicast_d8                  the same with 8 stages
//   l2_c1, l2_c2_copy .. l2_c4_multicast           L2-resident, 128 x 64 box, 4 stages, no cluster / 2 / 4
#include <deque>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "sm90.cuh"

using bf16 = __nv_bfloat16;

constexpr int ROWS = 16384, COLS = 8192;
constexpr int L2_ROWS = 1024;  // the L2-resident matrix: the first rows of the big one (16 MiB)
constexpr int MAX_STAGES = 8;

// ===================================================================================================
// Reference: the word sum of the matrix, on the host
// ===================================================================================================

uint32_t host_word_sum(const std::vector<uint32_t>& words) {
    uint32_t s = 0;
    for (uint32_t w : words) s += w;
    return s;
}

// ===================================================================================================
// Kernel
// ===================================================================================================

struct StreamArgs {
    int box_rows, box_cols, stages, cluster, multicast;
    int boxes_x, boxes;
    int all;  // every cluster reads every box (L2-resident mode), else boxes are dealt round-robin
};

__global__ void __launch_bounds__(64, 1) tma_stream(const __grid_constant__ CUtensorMap map, StreamArgs a, uint32_t* sums) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* ring = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    const int box_bytes = a.box_rows * a.box_cols * 2;
    uint64_t* full = reinterpret_cast<uint64_t*>(ring + a.stages * box_bytes);
    uint64_t* empty = full + MAX_STAGES;
    const uint32_t rank = a.cluster > 1 ? sm90::cluster_ctarank() : 0;
    if (threadIdx.x == 0) {
        for (int s = 0; s < a.stages; ++s) sm90::mbar_init(&full[s], 1), sm90::mbar_init(&empty[s], a.multicast ? a.cluster : 1);
        sm90::fence_barrier_init();
    }
    if (a.cluster > 1) sm90::cluster_sync();
    else __syncthreads();

    // this cluster's boxes: j-th is first + j * step (round-robin), or all of them from a staggered start
    const int first = blockIdx.x / a.cluster, step = gridDim.x / a.cluster;
    const int count = a.all ? a.boxes : (first < a.boxes ? (a.boxes - first + step - 1) / step : 0);
    auto box_of = [&](int j) { return a.all ? (j + first * (a.boxes / step)) % a.boxes : first + j * step; };
    if (threadIdx.x == 0) {  // producer
        const int slice_rows = a.multicast ? a.box_rows / a.cluster : a.box_rows;
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
    } else if (threadIdx.x >= 32) {  // consumer warp
        const int lane = threadIdx.x - 32;
        uint32_t sum = 0;
        int stage = 0;
        uint32_t phase = 0;
        for (int j = 0; j < count; ++j) {
            sm90::mbar_wait(&full[stage], phase);
            const uint4* box = reinterpret_cast<const uint4*>(ring + stage * box_bytes);
            for (int j = lane; j < box_bytes / 16; j += 32) {
                uint4 v = box[j];
                sum += v.x + v.y + v.z + v.w;
            }
            __syncwarp();
            if (lane == 0) {
                if (a.multicast)
                    for (int r = 0; r < a.cluster; ++r) sm90::mbar_arrive_cluster(&empty[stage], uint32_t(r));
                else
                    sm90::mbar_arrive(&empty[stage]);
            }
            if (++stage == a.stages) stage = 0, phase ^= 1;
        }
        for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) atomicAdd(sums, sum);
    }
    if (a.cluster > 1) sm90::cluster_sync();
}

// ===================================================================================================
// Variants
// ===================================================================================================

// The table of variants (artifact.yaml lists the same names).
struct Variant : kwiki::VariantInfo {
    int box_rows, box_cols;
    CUtensorMapSwizzle swizzle;
    const char* swizzle_name;
    int stages, cluster, multicast;
    bool l2;  // L2-resident mode
};

constexpr CUtensorMapSwizzle SW128 = CU_TENSOR_MAP_SWIZZLE_128B;
constexpr Variant kVariants[] = {
    {{"box_16"}, 16, 64, SW128, "128B", 4, 1, 0, false},
    {{"box_32"}, 32, 64, SW128, "128B", 4, 1, 0, false},
    {{"box_64"}, 64, 64, SW128, "128B", 4, 1, 0, false},
    {{"box_128"}, 128, 64, SW128, "128B", 4, 1, 0, false},
    {{"box_256"}, 256, 64, SW128, "128B", 4, 1, 0, false},
    {{"swz_none"}, 128, 64, CU_TENSOR_MAP_SWIZZLE_NONE, "none", 4, 1, 0, false},
    {{"swz_64"}, 256, 32, CU_TENSOR_MAP_SWIZZLE_64B, "64B", 4, 1, 0, false},
    {{"swz_32"}, 256, 16, CU_TENSOR_MAP_SWIZZLE_32B, "32B", 4, 1, 0, false},
    {{"depth_1"}, 128, 64, SW128, "128B", 1, 1, 0, false},
    {{"depth_2"}, 128, 64, SW128, "128B", 2, 1, 0, false},
    {{"depth_8"}, 128, 64, SW128, "128B", 8, 1, 0, false},
    {{"c2_copy"}, 128, 64, SW128, "128B", 4, 2, 0, false},
    {{"c2_multicast"}, 128, 64, SW128, "128B", 4, 2, 1, false},
    {{"c4_copy"}, 128, 64, SW128, "128B", 4, 4, 0, false},
    {{"c4_multicast"}, 128, 64, SW128, "128B", 4, 4, 1, false},
    {{"c2_copy_d8"}, 128, 64, SW128, "128B", 8, 2, 0, false},
    {{"c2_multicast_d8"}, 128, 64, SW128, "128B", 8, 2, 1, false},
    {{"c4_copy_d8"}, 128, 64, SW128, "128B", 8, 4, 0, false},
    {{"c4_multicast_d8"}, 128, 64, SW128, "128B", 8, 4, 1, false},
    {{"l2_c1"}, 128, 64, SW128, "128B", 4, 1, 0, true},
    {{"l2_c2_copy"}, 128, 64, SW128, "128B", 4, 2, 0, true},
    {{"l2_c2_multicast"}, 128, 64, SW128, "128B", 4, 2, 1, true},
    {{"l2_c4_copy"}, 128, 64, SW128, "128B", 4, 4, 0, true},
    {{"l2_c4_multicast"}, 128, 64, SW128, "128B", 4, 4, 1, true},
};

// Where a variant's counted bytes move (see the header): DRAM, the L2-to-SM path, or into shared memory.
const char* bytes_level(const Variant& v) { return v.multicast ? "smem" : (v.l2 || v.cluster > 1) ? "l2" : "dram"; }

// Ring + barriers + alignment slack, but never less than half an SM's shared memory (+1 KiB): one CTA per SM.
int smem_for(const Variant& v) {
    static const int half_sm = kwiki::device_attr(cudaDevAttrMaxSharedMemoryPerMultiprocessor) / 2 + 1024;
    return std::max(v.stages * v.box_rows * v.box_cols * 2 + 2 * MAX_STAGES * 8 + 1024, half_sm);
}

// ===================================================================================================
// Launcher
// ===================================================================================================

struct Launch {
    CUtensorMap map;
    StreamArgs a;
    int grid, smem;
    uint32_t* sums;
};

Launch prepare(const Variant& v, const bf16* matrix, uint32_t* sums) {
    Launch l{};
    const int rows = v.l2 ? L2_ROWS : ROWS;
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
        cfg.gridDim = dim3(v.cluster * kwiki::sm_count()), cfg.blockDim = dim3(64), cfg.dynamicSmemBytes = l.smem;
        cfg.attrs = &attr, cfg.numAttrs = 1;
        int clusters = 0;
        KWIKI_CHECK(cudaOccupancyMaxActiveClusters(&clusters, tma_stream, &cfg));
        KWIKI_REQUIRE(clusters > 0, "no cluster fits");
        slots = clusters * v.cluster;
    }
    l.grid = slots;
    return l;
}

void run(const Launch& l, cudaStream_t s) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = l.a.cluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(l.grid), cfg.blockDim = dim3(64), cfg.dynamicSmemBytes = l.smem, cfg.stream = s;
    cfg.attrs = &attr, cfg.numAttrs = l.a.cluster > 1 ? 1 : 0;
    KWIKI_CHECK(cudaLaunchKernelEx(&cfg, tma_stream, l.map, l.a, l.sums));
}

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Args args(argc, argv, kVariants);
    const uint64_t seed = args.seed();
    std::fprintf(stderr, "tma: seed %llu, %d SMs, matrix %dx%d bf16\n", (unsigned long long)seed, kwiki::sm_count(), ROWS, COLS);

    int max_smem = 0;  // one limit for every variant's launch
    for (auto& v : kVariants) max_smem = std::max(max_smem, smem_for(v));
    KWIKI_CHECK(cudaFuncSetAttribute(tma_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));

    const size_t n = size_t(ROWS) * COLS;
    bf16* matrix;
    uint32_t* sums;
    KWIKI_CHECK(cudaMalloc(&matrix, n * 2));
    KWIKI_CHECK(cudaMalloc(&sums, sizeof(uint32_t)));
    kwiki::fill_random(reinterpret_cast<uint32_t*>(matrix), n / 2, seed);  // raw random bits
    std::vector<uint32_t> words(n / 2);
    KWIKI_CHECK(cudaMemcpy(words.data(), matrix, n * 2, cudaMemcpyDeviceToHost));
    const uint32_t total = host_word_sum(words);
    words.resize(size_t(L2_ROWS) * COLS / 2);
    const uint32_t l2_total = host_word_sum(words);

    kwiki::Runner runner(args);
    std::deque<Launch> launches;  // one per case, alive until the runner is done (a deque never moves them)
    std::vector<kwiki::Case> cases;
    for (const Variant& v : kVariants) {
        if (!args.want(v.name)) continue;
        const Launch& l = launches.emplace_back(prepare(v, matrix, sums));
        // every CTA of a cluster receives every box of its cluster; in L2 mode every CTA receives every box
        const uint32_t want = v.l2 ? l2_total * uint32_t(l.grid) : total * uint32_t(v.cluster);
        const double matrix_bytes = double(v.l2 ? L2_ROWS : ROWS) * COLS * 2;
        kwiki::Case c;
        c.variant = v.name;
        c.params = {{"rows", v.l2 ? L2_ROWS : ROWS}, {"cols", COLS}, {"dtype", "bf16"}};
        c.bytes = v.l2 ? matrix_bytes * l.grid : matrix_bytes * v.cluster;
        c.bytes_level = bytes_level(v);
        c.flush_l2 = !v.l2;  // L2-resident: warmed by an untimed launch instead of flushed
        c.launch = [&l](cudaStream_t s) { run(l, s); };
        c.poison = [sums](cudaStream_t s) { KWIKI_CHECK(cudaMemsetAsync(sums, 0, sizeof(uint32_t), s)); };  // see the header
        c.check = [sums, want] {
            uint32_t got = 0;
            KWIKI_CHECK(cudaMemcpy(&got, sums, sizeof got, cudaMemcpyDeviceToHost));
            kwiki::CheckResult r;
            r.passed = got == want;
            r.reference = "host sum of every 32-bit word of the matrix, times the CTAs that receive each box";
            r.max_abs_err = got == want ? 0 : 1;
            char buf[160];
            std::snprintf(buf, sizeof buf, "word sum %08x, expected %08x", got, want);
            r.detail = buf;
            return r;
        };
        c.extra = {{"box_rows", v.box_rows}, {"box_cols", v.box_cols}, {"box_bytes", v.box_rows * v.box_cols * 2},
                   {"swizzle", v.swizzle_name}, {"stages", v.stages}, {"cluster", v.cluster}, {"multicast", v.multicast != 0},
                   {"ctas", l.grid}, {"l2_resident", v.l2}, {"smem_bytes", l.smem}};
        kwiki::add_regs(c.extra, reinterpret_cast<const void*>(tma_stream));
        cases.push_back(std::move(c));
    }
    runner.run(cases);
    KWIKI_CHECK(cudaFree(matrix));
    KWIKI_CHECK(cudaFree(sums));
    return kwiki::exit_code();
}
