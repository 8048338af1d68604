// paged_gather.cu: gathering pages of a paged cache into a contiguous buffer on Hopper, through plain 16-byte
// loads, cp.async, bulk copies (cp.async.bulk) and TMA (cp.async.bulk.tensor), against a device-to-device copy of
// the same bytes measured in the same run.
//
// The operation: a pool of `pool` pages of `kib` KiB each holds random bits (two random bf16 bit patterns per
// 32-bit word, as a KV cache of one head per page would); a block table of `pages` entries names distinct pool
// pages in shuffled order; out[j] = pool[table[j]] for every j < pages, page j of the output at j * page bytes. It
// is a pure copy, so the check is exact: every 32-bit word of the output, poisoned first (0xFF bytes), must equal
// the pool word the table names, regenerated on the host from the fill's hash (first check) or on the GPU from
// the same hash (re-checks of timed samples). Inputs are fresh (protocol 3): before every timed sample the pool
// is refilled from a new seed and the table reshuffled. The L2 is flushed before every sample (kwiki::Runner).
//
// Build (kwiki does this per target):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o paged_gather paged_gather.cu
// Run: ./paged_gather --pages=KIBxPAGESxPOOL[,...] [--variants a,b]   (the manifest's shapes)
// Shapes: kib a power of two from 4 to 64 (a page is one 512-byte-row box of the TMA map: at most 128 KiB; every
// page is 16-byte aligned and a multiple of 16 bytes, as bulk copies need), pages <= pool. `pages` need not be a
// multiple of anything: each persistent CTA takes a contiguous range of pages of the table, so CTAs differ by a
// page and a range is not a multiple of the plain and cp.async kernels' table chunk.
//
// Variants (bytes per record: the pages read plus the pages written, 2 x pages x page bytes; the table's 4 bytes
// per page are not counted):
//   copy       cudaMemcpyAsync device to device of the first `pages` pages of the pool: the copy roof (baseline)
//   plain      256 threads, the CTA's table entries loaded into shared memory a chunk of 64 at a time up front,
//              then 8 independent 16-byte loads per thread in flight before their 8 stores
//   cp_async   the same chunks through a ring of 4 shared-memory stages of 16 KiB filled with cp.async.cg (16 B a
//              thread), 3 stages in flight; each thread stores back the vectors it copied itself
//   bulk       one thread per CTA: one cp.async.bulk global -> shared per page into a ring of page buffers, each
//              with an mbarrier (expect_tx of the page's bytes), then one cp.async.bulk shared -> global per page
//   tma        bulk with tensor maps: the pool and the output as 2-D bf16 tensors of 512-byte rows, one box of
//              (page bytes / 512) rows per page, loaded at row table[j] * rows and stored at row j * rows
//   plain_contig, bulk_contig
//              plain and bulk over the table 0, 1, 2, ...: the same kernels copying the pool's first pages in order,
//              so that gather / contig is what the random page order and the table cost, apart from the kernel
#include <mutex>
#include <numeric>
#include <random>
#include <vector>

#include "kwiki_bench.cuh"
#include "sm90.cuh"

namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;         // threads of a plain or cp.async CTA
constexpr int kTableChunk = 64;       // table entries a plain or cp.async CTA loads at once
constexpr int kMaxStages = 16;        // page buffers of a bulk or tma CTA, at most
constexpr size_t kRingBytes = 96 << 10;  // shared memory a bulk or tma CTA aims at (at least 2 pages)
constexpr int kRowBytes = 512;        // a TMA row: 256 bf16

// ===================================================================================================
// Reference: the pool's words, the shuffled table, and the comparison of the gathered pages with them
// ===================================================================================================

struct Shape {
    int kib, pages, pool;
};

// Word i of the pool filled from `seed` (kwiki::fill_random<uint32_t>: the top 32 bits of hash64(seed, i)).
__host__ __device__ inline uint32_t pool_word(uint64_t seed, uint64_t i) { return uint32_t(kwiki::hash64(seed, i) >> 32); }

// One shape's buffers: the pool, the block table (device and host copies), the output and a mismatch counter.
struct Gather {
    size_t page_bytes;
    int pages, pool_pages;
    kwiki::DeviceBuffer<uint32_t> pool, out;
    kwiki::DeviceBuffer<int> table, identity;  // the shuffled table; the table 0, 1, 2, ... (the _contig variants)
    kwiki::DeviceBuffer<unsigned long long> bad{1};
    std::vector<int> host_table;
    uint64_t seed = 0;

    Gather(const Shape& s, uint64_t sd)
        : page_bytes(size_t(s.kib) << 10), pages(s.pages), pool_pages(s.pool), pool(page_bytes / 4 * size_t(s.pool)),
          out(page_bytes / 4 * size_t(s.pages)), table(size_t(s.pages)), identity(size_t(s.pages)) {
        std::vector<int> in_order(static_cast<size_t>(pages));
        std::iota(in_order.begin(), in_order.end(), 0);
        KWIKI_CHECK(cudaMemcpy(identity.get(), in_order.data(), in_order.size() * sizeof(int), cudaMemcpyHostToDevice));
        refill(sd, 0);
        KWIKI_CHECK(cudaDeviceSynchronize());
    }
    size_t words_per_page() const { return page_bytes / 4; }
    size_t out_bytes() const { return page_bytes * size_t(pages); }

    // New random pool words from `s`, and a table of `pages` distinct pool pages in shuffled order (a partial
    // Fisher-Yates shuffle from the same seed). The host copy stays: the checks read it.
    void refill(uint64_t s, cudaStream_t st) {
        seed = s;
        kwiki::fill_random(pool.get(), pool.size(), seed, 0.0f, 0.0f, st);
        std::vector<int> all(static_cast<size_t>(pool_pages));
        std::iota(all.begin(), all.end(), 0);
        std::mt19937_64 rng(seed);
        for (int j = 0; j < pages; ++j)
            std::swap(all[size_t(j)], all[size_t(j) + size_t(rng() % uint64_t(pool_pages - j))]);
        host_table.assign(all.begin(), all.begin() + pages);
        // pageable source: the call returns once the table is staged, so host_table may change afterwards
        KWIKI_CHECK(cudaMemcpyAsync(table.get(), host_table.data(), size_t(pages) * sizeof(int), cudaMemcpyHostToDevice, st));
    }
};

// Every word of the output against the pool word that its page's table entry names (identity: the copy), on the
// host: the output copied back, the expected words regenerated from the fill's hash.
kwiki::CheckResult check_host(const Gather& g, bool identity) {
    const size_t wpp = g.words_per_page();
    std::vector<uint32_t> got(wpp * size_t(g.pages));
    KWIKI_CHECK(cudaMemcpy(got.data(), g.out.get(), g.out_bytes(), cudaMemcpyDeviceToHost));
    std::mutex mu;
    size_t bad = 0, first = got.size();
    kwiki::parallel_for(size_t(g.pages), [&](size_t lo, size_t hi) {
        size_t my_bad = 0, my_first = got.size();
        for (size_t j = lo; j < hi; ++j) {
            const uint64_t src = uint64_t(identity ? int(j) : g.host_table[j]) * wpp;
            for (size_t k = 0; k < wpp; ++k)
                if (got[j * wpp + k] != pool_word(g.seed, src + k)) {
                    if (!my_bad++) my_first = j * wpp + k;
                }
        }
        std::lock_guard<std::mutex> lock(mu);
        bad += my_bad;
        first = std::min(first, my_first);
    });
    kwiki::CheckResult c;
    c.passed = bad == 0 && !got.empty();
    c.bad = bad;
    c.max_abs_err = double(bad);
    c.reference = "host: every 32-bit word of the output equals the pool word its table entry names, regenerated from the fill's hash";
    char d[128];
    std::snprintf(d, sizeof d, bad ? "%zu of %zu words differ; first at word %zu" : "%zu of %zu words equal", bad ? bad : got.size(),
                  got.size(), first);
    c.detail = d;
    return c;
}

// The same comparison on the GPU, for the re-checks of timed samples (a 256 MiB copy to the host per re-check would
// dominate the run): words differing from the regenerated pool word, counted into *bad. table null: the identity.
__global__ void count_mismatch(const uint32_t* out, const int* table, size_t wpp, size_t n, uint64_t seed, unsigned long long* bad) {
    unsigned long long b = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const size_t j = i / wpp, k = i % wpp;
        const uint64_t src = uint64_t(table ? table[j] : int(j)) * wpp + k;
        b += out[i] != pool_word(seed, src);
    }
    if (b) atomicAdd(bad, b);
}

kwiki::CheckResult check_device(const Gather& g, bool identity) {
    const size_t n = g.words_per_page() * size_t(g.pages);
    KWIKI_CHECK(cudaMemset(g.bad.get(), 0, sizeof(unsigned long long)));
    count_mismatch<<<unsigned(kwiki::sm_count()) * 8, 256>>>(g.out.get(), identity ? nullptr : g.table.get(), g.words_per_page(), n,
                                                             g.seed, g.bad.get());
    KWIKI_CHECK_LAST();
    unsigned long long bad = 0;
    KWIKI_CHECK(cudaMemcpy(&bad, g.bad.get(), sizeof bad, cudaMemcpyDeviceToHost));
    kwiki::CheckResult c;
    c.passed = bad == 0 && n > 0;
    c.bad = size_t(bad);
    c.max_abs_err = double(bad);
    c.reference = "GPU: every 32-bit word of the output equals the pool word its table entry names, regenerated from the fill's hash";
    char d[96];
    std::snprintf(d, sizeof d, "%llu of %zu words differ", bad, n);
    c.detail = d;
    return c;
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// The contiguous range of table entries [lo, hi) of this CTA: pages split as evenly as integers allow.
struct Range {
    int lo, hi;
};
__device__ __forceinline__ Range my_range(int pages) {
    return {int(int64_t(pages) * blockIdx.x / gridDim.x), int(int64_t(pages) * (blockIdx.x + 1) / gridDim.x)};
}

// kwiki:rung plain
// Table entries [first, first + count) into shared memory, by the whole CTA in one coalesced read.
__device__ __forceinline__ void load_table(int* tbl, const int* table, int first, int count) {
    __syncthreads();  // the previous chunk's entries are no longer read
    for (int i = threadIdx.x; i < count; i += blockDim.x) tbl[i] = table[first + i];
    __syncthreads();
}

// The 16-byte vector `i` of a chunk whose pages the table entries `tbl` name (vpp = 2^lg vectors a page).
__device__ __forceinline__ const uint4* page_vec(const uint4* pool, const int* tbl, uint32_t i, int lg) {
    return pool + ((size_t(tbl[i >> lg]) << lg) | (i & ((1u << lg) - 1)));
}

// Plain loads: a chunk of up to 64 pages is one flat run of vectors of the output; each thread takes every
// kThreads-th vector, X loads issued before the first store.
template <int X>
__global__ void __launch_bounds__(kThreads, 1) gather_plain_kernel(const uint4* __restrict__ pool, const int* __restrict__ table,
                                                                uint4* __restrict__ out, int pages, int lg) {
    __shared__ int tbl[kTableChunk];
    const Range r = my_range(pages);
    for (int first = r.lo; first < r.hi; first += kTableChunk) {
        const int count = min(kTableChunk, r.hi - first);
        load_table(tbl, table, first, count);
        const uint32_t n = uint32_t(count) << lg;
        uint4* dst = out + (size_t(first) << lg);
        uint32_t i = threadIdx.x;
        for (; i + (X - 1) * kThreads < n; i += X * kThreads) {
            uint4 v[X];
#pragma unroll
            for (int u = 0; u < X; ++u) v[u] = __ldg(page_vec(pool, tbl, i + u * kThreads, lg));
#pragma unroll
            for (int u = 0; u < X; ++u) dst[i + u * kThreads] = v[u];
        }
        for (; i < n; i += kThreads) dst[i] = __ldg(page_vec(pool, tbl, i, lg));
    }
}
// /kwiki:rung plain

// kwiki:rung cp_async
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(sm90::smem_u32(smem)), "l"(gmem) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// cp.async: the chunk's vectors in rounds of U per thread; round q goes into stage q % S of a ring in dynamic
// shared memory, S - 1 rounds ahead of the round being stored. Each thread stores exactly the vectors it copied
// (slot u * kThreads + tid of the stage), so its own cp.async.wait_group makes them visible and no barrier is
// needed between threads. Reusing a slot: round q + S - 1 overwrites the slot this thread read in round q - 1;
// those ld.shared results were consumed by the stores of round q - 1, which precede the new cp.async.
template <int U, int S>
__global__ void __launch_bounds__(kThreads) gather_cp_async_kernel(const uint4* __restrict__ pool, const int* __restrict__ table,
                                                                   uint4* __restrict__ out, int pages, int lg) {
    extern __shared__ __align__(128) uint4 ring[];  // S stages of U * kThreads vectors
    __shared__ int tbl[kTableChunk];
    constexpr uint32_t kRound = U * kThreads;
    const Range r = my_range(pages);
    for (int first = r.lo; first < r.hi; first += kTableChunk) {
        const int count = min(kTableChunk, r.hi - first);
        load_table(tbl, table, first, count);
        const uint32_t n = uint32_t(count) << lg, rounds = (n + kRound - 1) / kRound;
        uint4* dst = out + (size_t(first) << lg);
        auto issue = [&](uint32_t q) {  // an empty group past the last round keeps the group count uniform
            uint4* stage = ring + (q % S) * kRound;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const uint32_t i = q * kRound + u * kThreads + threadIdx.x;
                if (i < n) cp_async16(stage + u * kThreads + threadIdx.x, page_vec(pool, tbl, i, lg));
            }
            cp_async_commit();
        };
        for (uint32_t q = 0; q + 1 < S; ++q) issue(q);
        for (uint32_t q = 0; q < rounds; ++q) {
            issue(q + S - 1);
            cp_async_wait<S - 1>();  // groups 0 .. q + S - 1 committed: at most S - 1 pending means round q landed
            const uint4* stage = ring + (q % S) * kRound;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const uint32_t i = q * kRound + u * kThreads + threadIdx.x;
                if (i < n) dst[i] = stage[u * kThreads + threadIdx.x];
            }
        }
        cp_async_wait<0>();  // nothing (empty groups only) in flight when the next chunk's table is loaded
    }
}
// /kwiki:rung cp_async

// kwiki:rung bulk
// One page global -> shared, completing its bytes on `bar`; one page shared -> global in a bulk group.
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sm90::smem_u32(smem)), "l"(gmem), "r"(bytes), "r"(sm90::smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void bulk_store(void* gmem, const void* smem, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(sm90::smem_u32(smem)), "r"(bytes)
                 : "memory");
}

enum class Engine { Bulk, Tensor };

// Bulk copies and TMA: thread 0 of a one-warp CTA drives a ring of `stages` page buffers over the CTA's range of
// the table. Page i of the range lands in buffer i % stages, whose mbarrier completes phase i / stages when the
// page's bytes have arrived (parity (i / stages) & 1); the page is then stored from the buffer, and the buffer
// refilled with page i - 1 + stages once every store but the newest has finished reading shared memory
// (cp.async.bulk.wait_group.read 1: the store of page i - 1 is done with buffer (i - 1) % stages). Loads and
// stores both run in the async proxy, so no proxy fence is needed between them; the table entry of a page is read
// by the issuing thread `stages` pages ahead of its store.
template <Engine E>
__global__ void __launch_bounds__(32) gather_async_kernel(const __grid_constant__ CUtensorMap pool_map,
                                                          const __grid_constant__ CUtensorMap out_map, const char* pool,
                                                          const int* __restrict__ table, char* out, int pages,
                                                          uint32_t page_bytes, int stages) {
    extern __shared__ __align__(1024) uint8_t buf[];  // stages x page_bytes
    __shared__ __align__(8) uint64_t full[kMaxStages];
    if (threadIdx.x != 0) return;
    const Range r = my_range(pages);
    const int count = r.hi - r.lo;
    for (int s = 0; s < stages; ++s) sm90::mbar_init(&full[s], 1);
    sm90::fence_barrier_init();  // the initialized barriers visible to the async proxy
    const int rows = int(page_bytes / kRowBytes);
    auto load = [&](int i) {
        const int s = i % stages, src = table[r.lo + i];
        sm90::mbar_arrive_expect_tx(&full[s], page_bytes);
        if constexpr (E == Engine::Bulk) bulk_load(buf + size_t(s) * page_bytes, pool + size_t(src) * page_bytes, page_bytes, &full[s]);
        else sm90::tma_load_2d(buf + size_t(s) * page_bytes, &pool_map, &full[s], 0, src * rows);
    };
    for (int i = 0; i < count && i < stages; ++i) load(i);
    for (int i = 0; i < count; ++i) {
        const int s = i % stages;
        sm90::mbar_wait(&full[s], uint32_t(i / stages) & 1);
        if constexpr (E == Engine::Bulk) bulk_store(out + size_t(r.lo + i) * page_bytes, buf + size_t(s) * page_bytes, page_bytes);
        else sm90::tma_store_2d(&out_map, buf + size_t(s) * page_bytes, 0, (r.lo + i) * rows);
        sm90::bulk_commit();
        if (i >= 1 && i - 1 + stages < count) {
            sm90::bulk_wait_read<1>();
            load(i - 1 + stages);
        }
    }
    sm90::bulk_wait<0>();  // every store written before the CTA (and its shared memory) goes away
}
// /kwiki:rung bulk

// ===================================================================================================
// Launchers
// ===================================================================================================

enum class Kind { Copy, Plain, CpAsync, Bulk, Tma };

constexpr int kPlainX = 8, kCpU = 4, kCpS = 4;

const void* kernel_of(Kind k) {
    switch (k) {
        case Kind::Plain: return (const void*)gather_plain_kernel<kPlainX>;
        case Kind::CpAsync: return (const void*)gather_cp_async_kernel<kCpU, kCpS>;
        case Kind::Bulk: return (const void*)gather_async_kernel<Engine::Bulk>;
        case Kind::Tma: return (const void*)gather_async_kernel<Engine::Tensor>;
        default: return nullptr;
    }
}

// A launch's geometry: block, dynamic shared memory, ring stages (bulk, tma), persistent grid from the occupancy.
struct Geometry {
    int block = 0, stages = 0;
    size_t smem = 0;
    unsigned grid = 0;
};

Geometry geometry(Kind k, const Gather& g) {
    Geometry geo;
    const void* f = kernel_of(k);
    if (!f) return geo;
    geo.block = k == Kind::Bulk || k == Kind::Tma ? 32 : kThreads;
    if (k == Kind::CpAsync) geo.smem = size_t(kCpS) * kCpU * kThreads * 16;
    if (k == Kind::Bulk || k == Kind::Tma) {
        geo.stages = int(std::clamp<size_t>(kRingBytes / g.page_bytes, 2, kMaxStages));
        geo.smem = size_t(geo.stages) * g.page_bytes;
    }
    KWIKI_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, int(geo.smem)));
    int per_sm = 0;
    KWIKI_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, geo.block, geo.smem));
    KWIKI_REQUIRE(per_sm > 0, "the kernel does not fit on an SM");
    geo.grid = unsigned(std::min<long long>(g.pages, (long long)per_sm * kwiki::sm_count()));
    return geo;
}

// kwiki:rung tma
// The pool and the output as 2-D bf16 tensors of 512-byte rows, a box of one page (built once per shape).
struct Maps {
    CUtensorMap pool{}, out{};
    explicit Maps(const Gather& g) {
        const uint32_t rows = uint32_t(g.page_bytes / kRowBytes), cols = kRowBytes / sizeof(bf16);
        const auto* p = reinterpret_cast<const bf16*>(g.pool.get());
        const auto* o = reinterpret_cast<const bf16*>(g.out.get());
        pool = sm90::tensor_map_2d(p, uint64_t(g.pool_pages) * rows, cols, rows, cols, CU_TENSOR_MAP_SWIZZLE_NONE);
        out = sm90::tensor_map_2d(o, uint64_t(g.pages) * rows, cols, rows, cols, CU_TENSOR_MAP_SWIZZLE_NONE);
    }
};
// /kwiki:rung tma

int log2_of(size_t x) {
    int l = 0;
    while ((size_t(1) << l) < x) ++l;
    return l;
}

// contiguous: the same kernel over the table 0, 1, 2, ... (the pool's first pages in order: what the gather costs).
void launch(Kind k, const Gather& g, const Maps& maps, const Geometry& geo, bool contiguous, cudaStream_t s) {
    const int* table = contiguous ? g.identity.get() : g.table.get();
    const auto* pool = reinterpret_cast<const uint4*>(g.pool.get());
    auto* out = reinterpret_cast<uint4*>(g.out.get());
    const int lg = log2_of(g.page_bytes / 16);
    switch (k) {
        // kwiki:rung copy
        case Kind::Copy:
            KWIKI_CHECK(cudaMemcpyAsync(g.out.get(), g.pool.get(), g.out_bytes(), cudaMemcpyDeviceToDevice, s));
            break;
        // /kwiki:rung copy
        case Kind::Plain:
            gather_plain_kernel<kPlainX><<<geo.grid, geo.block, 0, s>>>(pool, table, out, g.pages, lg);
            break;
        case Kind::CpAsync:
            gather_cp_async_kernel<kCpU, kCpS><<<geo.grid, geo.block, geo.smem, s>>>(pool, table, out, g.pages, lg);
            break;
        case Kind::Bulk: case Kind::Tma: {
            auto* f = k == Kind::Bulk ? gather_async_kernel<Engine::Bulk> : gather_async_kernel<Engine::Tensor>;
            f<<<geo.grid, geo.block, geo.smem, s>>>(maps.pool, maps.out, reinterpret_cast<const char*>(pool), table,
                                                    reinterpret_cast<char*>(out), g.pages, uint32_t(g.page_bytes), geo.stages);
            break;
        }
    }
    KWIKI_CHECK_LAST();
}

// A variant's case at one shape: params, bytes (pages read + written), the launch, what its record reports.
kwiki::Case gather_case(Kind k, bool contiguous, const Shape& sh, const Gather& g, const Maps& maps) {
    kwiki::Case c;
    c.params = {{"kib", sh.kib}, {"pages", sh.pages}, {"pool", sh.pool}, {"dtype", "bf16"}};
    c.bytes = 2.0 * double(g.out_bytes());
    c.bytes_level = "dram";
    const Geometry geo = geometry(k, g);
    c.launch = [k, &g, &maps, geo, contiguous](cudaStream_t s) { launch(k, g, maps, geo, contiguous, s); };
    if (const void* f = kernel_of(k)) {
        kwiki::add_occupancy(c.extra, f, geo.block, geo.smem);
        c.extra.emplace_back("grid", geo.grid);
        c.extra.emplace_back("block", geo.block);
        c.extra.emplace_back("smem_bytes", (unsigned long long)geo.smem);
        if (geo.stages) c.extra.emplace_back("stages", geo.stages);
    }
    return c;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Kind kind;
    bool contiguous = false;  // the table 0, 1, 2, ...: the same kernel reading the pool's first pages in order
};

constexpr Variant kVariants[] = {
    {{"copy"}, Kind::Copy},
    // kwiki:rung plain
    {{"plain"}, Kind::Plain},
    // /kwiki:rung plain
    // kwiki:rung cp_async
    {{"cp_async"}, Kind::CpAsync},
    // /kwiki:rung cp_async
    // kwiki:rung bulk
    {{"bulk"}, Kind::Bulk},
    // /kwiki:rung bulk
    // kwiki:rung tma
    {{"tma"}, Kind::Tma},
    // /kwiki:rung tma
    {{"plain_contig"}, Kind::Plain, true},
    {{"bulk_contig"}, Kind::Bulk, true},
};

bool valid_shape(const std::vector<int>& d) {
    const bool pow2 = d[0] >= 4 && d[0] <= 64 && (d[0] & (d[0] - 1)) == 0;
    return pow2 && d[1] >= 1 && d[2] >= d[1] && (int64_t(d[2]) << 10) * d[0] / kRowBytes <= INT32_MAX;
}

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_shapes<Shape, 3>("pages", "", "KIBxPAGESxPOOL,...: KIB a power of two from 4 to 64, "
                                                    "PAGES <= POOL, POOL pages of 512-byte rows within 2^31 rows", valid_shape);
    kwiki::Runner& runner = m.start("paged_gather");
    for (const Shape& sh : shapes) {
        // one buffer set, refilled (new pool words, new shuffle) before every timed sample: fresh inputs
        Gather g(sh, kwiki::hash64(m.seed, uint64_t(sh.kib) * 1000003 + uint64_t(sh.pages)));
        const Maps maps(g);
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            kwiki::Case c = gather_case(v.kind, v.contiguous, sh, g, maps);
            const bool identity = v.kind == Kind::Copy || v.contiguous;
            c.poison = [&g](cudaStream_t s) { kwiki::poison(g.out.get(), g.out_bytes(), s); };
            c.check = [&g, identity] { return check_host(g, identity); };
            c.recheck = [&g, identity] { return check_device(g, identity); };
            c.refill = [&g](cudaStream_t s, uint64_t seed) { g.refill(seed, s); };
            return c;
        });
    }
    return kwiki::exit_code();
}
