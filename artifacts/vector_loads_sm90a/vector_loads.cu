// vector_loads.cu: how wide loads, loads in flight, cache qualifiers and register budgets move HBM bandwidth.
//
// Build (kwiki does this per target):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o vector_loads vector_loads.cu
// Run: ./vector_loads --mib=4096 [--variants a,b,c]   (--mib: the manifest's shapes)
//
// Every variant streams one buffer of --mib MiB (the manifest's 4 GiB, far beyond the L2) once per launch.
// Reads are checked: each thread sums the 32-bit words it loaded, each block writes its partial sum, and the
// total must equal the sum of the same words regenerated from the fill's hash (mod 2^32), so no load can be
// dropped and a wrong address fails. Writes and copies are compared word by word against the expected values.
// Every timed sample poisons what the variant writes (the partial sums, or the whole destination) and is
// flushed from the L2 first (kwiki::Runner); one input set: the stream's bytes are what is measured, and each
// read starts cold after the flush (a second 4 GiB source would change nothing but the memory used).
//
// Variants (bytes per record: read = buffer, write = buffer, copy = read + written):
//   read_v4_x1 .. read_v4_x8      4-byte loads, 1/4/8 loads issued per thread before the first use
//   read_v8_x1 .. read_v8_x8      8-byte loads, likewise
//   read_v16_x1 .. read_v16_x8    16-byte loads, 1/2/4/8 in flight
//   read_v32_x4                   32-byte loads (ld.global.v8.b32), sm_100a only
//   read_v16_nc, _l1_no_allocate, _l1_evict_last, _l1_evict_first, _l2_256b
//                                 read_v16_x4 with one cache qualifier on the load
//   reuse_plain, reuse_nc, reuse_hinted
//                                 GEMV-like: every warp streams matrix rows and re-reads one 32 KiB vector;
//                                 hinted = matrix L1::no_allocate, vector L1::evict_last
//   regs_x8_auto                  read_v16_x8 under __launch_bounds__(256) alone: ptxas aims at 32 registers
//                                 (full occupancy) and interleaves the loads with their uses; every other kernel
//                                 here says __launch_bounds__(256, 1), which lets it keep all X loads in flight
//   regs_x16_r255/_r64/_r32       16 loads of 16 B per round under a register cap of 255/64/32 (1/4/8 blocks per SM)
//   write_v16, write_v16_cs       16-byte store stream, default and streaming (.cs) stores
//   copy_v16_x1, copy_v16_x4, copy_v16_x4_cs
//                                 grid-stride copy kernels: 1 or 4 loads in flight before the stores; _cs: nc
//                                 loads with L1::no_allocate and streaming (.cs) stores
//   copy_flat_x2, copy_flat_x4, copy_flat_x4_cs
//                                 flat grid (one block per 2 or 4 x 4 KiB, no loop), nc loads
//   copy_flat_x4_read_first, _write_last, _write_first, copy_flat_x2_write_first
//                                 flat copies with an L2 eviction policy (createpolicy + .L2::cache_hint) on the
//                                 loads or on the stores
//   copy_bulk_s6_32k              one thread per block drives cp.async.bulk global -> shared -> global copies,
//                                 6 stages of 32 KiB (bytes_per_access = chunk, accesses_in_flight = 5 chunks)
//   device_copy                   cudaMemcpyAsync device to device, the baseline
//   device_read                   cub::DeviceReduce::Sum over the 32-bit words: a library's read-only stream (the
//                                 read twin of device_copy: compare read kernels with it, copy kernels with device_copy)
#include <cub/device/device_reduce.cuh>

#include "kwiki_bench.cuh"

#include <optional>

namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 1 << 16;  // the most blocks a persistent (SM-count) grid can have here

// ===================================================================================================
// Reference: the buffer's words regenerated from the fill's hash (fill_random<uint32_t>)
// ===================================================================================================

__device__ __forceinline__ uint32_t word_at(uint64_t seed, uint64_t i) { return uint32_t(kwiki::hash64(seed, i) >> 32); }

// Sum of words [0, n) mod 2^32.
__global__ void ref_sum(uint64_t seed, size_t n, uint32_t* out) {
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        acc += word_at(seed, i);
    kwiki::warp_sum_add(out, acc);
}

// Sum over matrix words i of A[i] * v[i mod vec_words] mod 2^32.
__global__ void ref_dot(uint64_t seed_a, uint64_t seed_v, size_t n, size_t vec_words, uint32_t* out) {
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        acc += word_at(seed_a, i) * word_at(seed_v, i % vec_words);
    kwiki::warp_sum_add(out, acc);
}

// Count words of p that differ from the expected ones: the fill's hash (copies) or the write pattern.
__device__ __forceinline__ uint32_t pattern(uint64_t i, uint32_t salt) { return uint32_t(i) * 0x9E3779B1u ^ salt; }

__global__ void count_mismatch(const uint32_t* p, size_t n, uint64_t seed, bool is_pattern, uint32_t salt,
                               unsigned long long* bad) {
    unsigned long long b = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        b += p[i] != (is_pattern ? pattern(i, salt) : word_at(seed, i));
    if (b) atomicAdd(bad, b);
}

// ===================================================================================================
// Kernels: loads and stores through inline PTX (one qualifier set per Cache value)
// ===================================================================================================

enum class Cache { Plain, NC, L1NoAllocate, L1EvictLast, L1EvictFirst, L2Prefetch256, NCNoAllocate };

struct alignas(32) U32x8 { uint32_t w[8]; };

template <int W> struct VecOf;
template <> struct VecOf<4> { using T = uint32_t; };
template <> struct VecOf<8> { using T = uint2; };
template <> struct VecOf<16> { using T = uint4; };
template <> struct VecOf<32> { using T = U32x8; };

#define KW_LD4(Q, p, r) asm(Q ".v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p))

template <Cache C>
__device__ __forceinline__ uint4 ld16(const uint4* p) {
    uint4 r;
    if constexpr (C == Cache::Plain) KW_LD4("ld.global", p, r);
    else if constexpr (C == Cache::NC) KW_LD4("ld.global.nc", p, r);
    else if constexpr (C == Cache::L1NoAllocate) KW_LD4("ld.global.L1::no_allocate", p, r);
    else if constexpr (C == Cache::L1EvictLast) KW_LD4("ld.global.L1::evict_last", p, r);
    else if constexpr (C == Cache::L1EvictFirst) KW_LD4("ld.global.L1::evict_first", p, r);
    else if constexpr (C == Cache::L2Prefetch256) KW_LD4("ld.global.L2::256B", p, r);
    else KW_LD4("ld.global.nc.L1::no_allocate", p, r);
    return r;
}
#undef KW_LD4

template <int W, Cache C>
__device__ __forceinline__ typename VecOf<W>::T load(const typename VecOf<W>::T* p) {
    typename VecOf<W>::T r{};
    if constexpr (W == 4) asm("ld.global.u32 %0, [%1];" : "=r"(r) : "l"(p));
    else if constexpr (W == 8) asm("ld.global.v2.u32 {%0,%1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
    else if constexpr (W == 16) r = ld16<C>(p);
    else {
#if __CUDA_ARCH__ >= 1000
        asm("ld.global.v8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
            : "=r"(r.w[0]), "=r"(r.w[1]), "=r"(r.w[2]), "=r"(r.w[3]), "=r"(r.w[4]), "=r"(r.w[5]), "=r"(r.w[6]), "=r"(r.w[7])
            : "l"(p));
#endif
    }
    return r;
}

__device__ __forceinline__ uint32_t fold(uint32_t v) { return v; }
__device__ __forceinline__ uint32_t fold(uint2 v) { return v.x + v.y; }
__device__ __forceinline__ uint32_t fold(uint4 v) { return v.x + v.y + v.z + v.w; }
__device__ __forceinline__ uint32_t fold(const U32x8& v) {
    uint32_t s = 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) s += v.w[i];
    return s;
}

template <bool Streaming>
__device__ __forceinline__ void st16(uint4* p, uint4 v) {
    if constexpr (Streaming)
        asm volatile("st.global.cs.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    else
        asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// kwiki:rung read_v4_x1
// Grid-stride read of n vectors of W bytes; each round a thread issues X loads, then folds them.
template <int W, int X, Cache C>
__device__ __forceinline__ void read_body(const void* src, size_t n, uint32_t* sum) {
    using V = typename VecOf<W>::T;
    const V* v = static_cast<const V*>(src);
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    uint32_t acc = 0;
    for (; i + (X - 1) * stride < n; i += X * stride) {
        V r[X];
#pragma unroll
        for (int u = 0; u < X; ++u) r[u] = load<W, C>(v + i + u * stride);
#pragma unroll
        for (int u = 0; u < X; ++u) acc += fold(r[u]);
    }
    for (; i < n; i += stride) acc += fold(load<W, C>(v + i));
    kwiki::block_partial_sum(sum, acc);
}
// /kwiki:rung read_v4_x1

// kwiki:rung read_v4_x1
template <int W, int X, Cache C>
__global__ void __launch_bounds__(kThreads, 1) read_kernel(const void* src, size_t n, uint32_t* sum) {
#if __CUDA_ARCH__ < 1000
    if constexpr (W == 32) return;  // 32-byte loads exist from sm_100 on
#endif
    read_body<W, X, C>(src, n, sum);
}
// /kwiki:rung read_v4_x1

// The 16-byte read with X loads per round under a register budget: MinBlocks blocks of kThreads per SM must
// fit (255, 128, 64 or 32 registers a thread); MinBlocks 0 leaves only __launch_bounds__(kThreads), under which
// ptxas aims at full occupancy (32 registers) and interleaves loads with their uses.
template <int X, int MinBlocks>
__global__ void __launch_bounds__(kThreads, MinBlocks) read_regs_kernel(const void* src, size_t n, uint32_t* sum) {
    read_body<16, X, Cache::Plain>(src, n, sum);
}
template <int X>
__global__ void __launch_bounds__(kThreads) read_regs_auto_kernel(const void* src, size_t n, uint32_t* sum) {
    read_body<16, X, Cache::Plain>(src, n, sum);
}

// GEMV-like reuse: each warp takes whole rows of the matrix (row_vecs uint4 each) and dots them with one vector.
template <Cache CA, Cache CV>
__global__ void __launch_bounds__(kThreads, 1) reuse_kernel(const uint4* a, const uint4* vec, size_t rows, int row_vecs,
                                                         uint32_t* sum) {
    constexpr int X = 4;
    const int lane = threadIdx.x & 31;
    const size_t warps = size_t(gridDim.x) * (blockDim.x / 32);
    uint32_t acc = 0;
    for (size_t r = (blockIdx.x * size_t(blockDim.x) + threadIdx.x) / 32; r < rows; r += warps) {
        const uint4* row = a + r * row_vecs;
        for (int j = lane; j < row_vecs; j += 32 * X) {  // row_vecs is a multiple of 32 * X
            uint4 av[X], vv[X];
#pragma unroll
            for (int u = 0; u < X; ++u) av[u] = ld16<CA>(row + j + u * 32), vv[u] = ld16<CV>(vec + j + u * 32);
#pragma unroll
            for (int u = 0; u < X; ++u) acc += av[u].x * vv[u].x + av[u].y * vv[u].y + av[u].z * vv[u].z + av[u].w * vv[u].w;
        }
    }
    kwiki::block_partial_sum(sum, acc);
}

template <bool Streaming>
__global__ void __launch_bounds__(kThreads, 1) write_kernel(uint4* dst, size_t n, uint32_t salt) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
        uint32_t w = uint32_t(4 * i);
        st16<Streaming>(dst + i, make_uint4(pattern(w, salt), pattern(w + 1, salt), pattern(w + 2, salt), pattern(w + 3, salt)));
    }
}

// Grid-stride copy: X loads issued, then X stores.
template <int X, Cache C, bool Streaming>
__global__ void __launch_bounds__(kThreads, 1) copy_kernel(const uint4* src, uint4* dst, size_t n) {
    const size_t stride = size_t(gridDim.x) * blockDim.x;
    size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
    for (; i + (X - 1) * stride < n; i += X * stride) {
        uint4 r[X];
#pragma unroll
        for (int u = 0; u < X; ++u) r[u] = ld16<C>(src + i + u * stride);
#pragma unroll
        for (int u = 0; u < X; ++u) st16<Streaming>(dst + i + u * stride, r[u]);
    }
    for (; i < n; i += stride) st16<Streaming>(dst + i, ld16<C>(src + i));
}

// L2 eviction policy of a flat copy's loads and stores (createpolicy + .L2::cache_hint).
enum class L2Pol { None, Streaming, ReadFirst, WriteLast, WriteFirst };

__device__ __forceinline__ uint64_t policy(bool evict_last) {
    uint64_t p;
    if (evict_last) asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    else asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}

template <L2Pol P>
__device__ __forceinline__ uint4 copy_load(const uint4* p) {
    if constexpr (P == L2Pol::ReadFirst) {
        uint4 r;
        asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(policy(false)));
        return r;
    } else {
        return ld16<Cache::NCNoAllocate>(p);
    }
}

template <L2Pol P>
__device__ __forceinline__ void copy_store(uint4* p, uint4 v) {
    if constexpr (P == L2Pol::WriteLast || P == L2Pol::WriteFirst)
        asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1,%2,%3,%4}, %5;"
                     ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy(P != L2Pol::WriteFirst)) : "memory");
    else
        st16<P == L2Pol::Streaming>(p, v);
}

// Flat copy: one block per X * kThreads vectors, no loop; the hardware scheduler spreads the blocks.
template <int X, L2Pol P>
__global__ void __launch_bounds__(kThreads, 1) copy_flat_kernel(const uint4* src, uint4* dst, size_t n) {
    const size_t base = blockIdx.x * size_t(X) * kThreads + threadIdx.x;
    uint4 r[X];
#pragma unroll
    for (int u = 0; u < X; ++u)
        if (base + u * kThreads < n) r[u] = copy_load<P>(src + base + u * kThreads);
#pragma unroll
    for (int u = 0; u < X; ++u)
        if (base + u * kThreads < n) copy_store<P>(dst + base + u * kThreads, r[u]);
}

// Bulk asynchronous copy (the engine behind TMA, sm_90+): one thread per block moves chunks of C bytes
// global -> shared -> global with cp.async.bulk, S shared-memory stages deep; no data passes through registers.
__device__ __forceinline__ uint32_t smem_addr(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

template <int S, int C>
__global__ void __launch_bounds__(32, 1) copy_bulk_kernel(const uint4* src, uint4* dst, size_t n) {
    extern __shared__ __align__(128) uint8_t stage[];
    __shared__ __align__(8) uint64_t full[S];
    if (threadIdx.x != 0) return;
    const uint32_t stage0 = smem_addr(stage), full0 = smem_addr(full);
    for (int s = 0; s < S; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(full0 + 8 * s));
    asm volatile("fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;" ::: "memory");
    const char* src8 = reinterpret_cast<const char*>(src);
    char* dst8 = reinterpret_cast<char*>(dst);
    const size_t chunks = n * 16 / C;
    const size_t mine = chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
    auto offset = [&](size_t i) { return (blockIdx.x + i * gridDim.x) * size_t(C); };
    auto load = [&](size_t i) {
        const uint32_t bar = full0 + 8 * uint32_t(i % S), dst_smem = stage0 + uint32_t(i % S) * C;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(C) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                     ::"r"(dst_smem), "l"(src8 + offset(i)), "r"(C), "r"(bar) : "memory");
    };
    for (size_t i = 0; i < mine && i < S; ++i) load(i);
    for (size_t i = 0; i < mine; ++i) {
        const uint32_t bar = full0 + 8 * uint32_t(i % S), parity = uint32_t(i / S) & 1;
        uint32_t ready = 0;
        while (!ready)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                         : "=r"(ready) : "r"(bar), "r"(parity) : "memory");
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n\tcp.async.bulk.commit_group;"
                     ::"l"(dst8 + offset(i)), "r"(stage0 + uint32_t(i % S) * C), "r"(C) : "memory");
        if (i >= 1 && i - 1 + S < mine) {  // refill the previous stage once its store has read it
            asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            load(i - 1 + S);
        }
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// ===================================================================================================
// Launchers
// ===================================================================================================

enum class Kind { Read, Reuse, Write, Copy, DeviceCopy, DeviceRead };

constexpr int kReuseRowBytes = 32768;  // one row of a K=16384 bf16 matrix

struct Buffers {
    uint8_t* src;          // filled once with fill_random<uint32_t>(seed)
    uint8_t* dst;
    uint4* vec;            // the reused vector (reuse variants)
    size_t bytes;          // of src and dst
    size_t vec_bytes;
    uint32_t* sum;         // per-block checksums of read and reuse variants (kMaxBlocks), then the reference
    unsigned long long* bad;  // mismatch count of write and copy checks
    uint64_t seed, vec_seed;
    uint32_t salt;         // write pattern

    // The one input set: src of `n` bytes filled from `s`, the reused vector from its own seed.
    Buffers(size_t n, uint64_t s) : bytes(n), vec_bytes(kReuseRowBytes), seed(s), vec_seed(s ^ 0xabcdef12345ull), salt(uint32_t(s >> 7)) {
        KWIKI_REQUIRE(bytes % (kReuseRowBytes * 8) == 0, "the stream's bytes must be a multiple of 256 KiB");
        KWIKI_REQUIRE(bytes >= 8 * kwiki::l2_bytes(), "the stream's bytes must be at least 8x the L2 size");
        KWIKI_CHECK(cudaMalloc(&src, bytes));
        KWIKI_CHECK(cudaMalloc(&dst, bytes));
        KWIKI_CHECK(cudaMalloc(&vec, vec_bytes));
        KWIKI_CHECK(cudaMalloc(&sum, (kMaxBlocks + 1) * sizeof(uint32_t)));
        KWIKI_CHECK(cudaMalloc(&bad, sizeof(unsigned long long)));
        kwiki::fill_random(reinterpret_cast<uint32_t*>(src), bytes / 4, seed);
        kwiki::fill_random(reinterpret_cast<uint32_t*>(vec), vec_bytes / 4, vec_seed);
    }
    // Fresh inputs (protocol 3): new random words from `s`, on stream `st`, before a timed sample; the checks regenerate
    // them from the same seeds.
    void refill(uint64_t s, cudaStream_t st) {
        seed = s, vec_seed = s ^ 0xabcdef12345ull, salt = uint32_t(s >> 7);
        kwiki::fill_random(reinterpret_cast<uint32_t*>(src), bytes / 4, seed, -1.0f, 1.0f, st);
        kwiki::fill_random(reinterpret_cast<uint32_t*>(vec), vec_bytes / 4, vec_seed, -1.0f, 1.0f, st);
    }
    ~Buffers() { cudaFree(src), cudaFree(dst), cudaFree(vec), cudaFree(sum), cudaFree(bad); }
    Buffers(const Buffers&) = delete;
    Buffers& operator=(const Buffers&) = delete;
};

// A row of the table of variants: what its launch needs. The table is not constexpr: it holds kernel addresses cast
// to one type, which a constant expression cannot.
struct Variant : kwiki::VariantInfo {
    Kind kind;
    int width, in_flight;  // bytes per access, accesses in flight per thread (0: not applicable)
    const void* func;      // the kernel (for registers and occupancy); null for device_copy
    bool flat;             // copy_flat: grid from the size, not from the SM count
    bool sm100_only;
    int smem;              // dynamic shared memory of a block (bulk copy stages)
};

template <int W, int X, Cache C>
Variant read_v(const char* name) { return {{name}, Kind::Read, W, X, (const void*)read_kernel<W, X, C>, false, W == 32, 0}; }
template <int X, int B>
Variant regs_v(const char* name) {
    if constexpr (B == 0) return {{name}, Kind::Read, 16, X, (const void*)read_regs_auto_kernel<X>, false, false, 0};
    else return {{name}, Kind::Read, 16, X, (const void*)read_regs_kernel<X, B>, false, false, 0};
}
Variant other_v(const char* name, Kind kind, int width, int in_flight, const void* func, bool flat = false, int smem = 0) {
    return {{name}, kind, width, in_flight, func, flat, false, smem};
}


// cub::DeviceReduce::Sum's temporary storage for the buffer's words (sized once, kept for the process).
void* cub_temp(const Buffers& b, size_t* bytes) {
    static void* temp = nullptr;
    static size_t temp_bytes = 0;
    if (!temp) {
        KWIKI_CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, reinterpret_cast<const uint32_t*>(b.src), b.sum, b.bytes / 4));
        KWIKI_CHECK(cudaMalloc(&temp, std::max<size_t>(temp_bytes, 16)));
    }
    *bytes = temp_bytes;
    return temp;
}

bool is_sm100() { return kwiki::device_attr(cudaDevAttrComputeCapabilityMajor) >= 10; }

int block_of(const Variant& v) { return v.smem ? 32 : kThreads; }

// Blocks that fit on the whole GPU at once (a persistent grid), or the flat grid of copy_flat.
unsigned grid_for(const Variant& v, const Buffers& b) {
    if (v.flat) return unsigned((b.bytes / 16 + size_t(v.in_flight) * kThreads - 1) / (size_t(v.in_flight) * kThreads));
    int per_sm = 0;
    if (v.smem) KWIKI_CHECK(cudaFuncSetAttribute(v.func, cudaFuncAttributeMaxDynamicSharedMemorySize, v.smem));
    KWIKI_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, v.func, block_of(v), v.smem));
    return unsigned(std::max(per_sm, 1) * kwiki::sm_count());
}

void launch(const Variant& v, const Buffers& b, unsigned grid, cudaStream_t s) {
    const size_t n16 = b.bytes / 16;
    switch (v.kind) {
        case Kind::Read: {
            auto k = reinterpret_cast<void (*)(const void*, size_t, uint32_t*)>(const_cast<void*>(v.func));
            k<<<grid, kThreads, 0, s>>>(b.src, b.bytes / v.width, b.sum);
            break;
        }
        case Kind::Reuse: {
            auto k = reinterpret_cast<void (*)(const uint4*, const uint4*, size_t, int, uint32_t*)>(const_cast<void*>(v.func));
            k<<<grid, kThreads, 0, s>>>(reinterpret_cast<const uint4*>(b.src), b.vec, b.bytes / kReuseRowBytes,
                                         kReuseRowBytes / 16, b.sum);
            break;
        }
        case Kind::Write: {
            auto k = reinterpret_cast<void (*)(uint4*, size_t, uint32_t)>(const_cast<void*>(v.func));
            k<<<grid, kThreads, 0, s>>>(reinterpret_cast<uint4*>(b.dst), n16, b.salt);
            break;
        }
        case Kind::Copy: {
            auto k = reinterpret_cast<void (*)(const uint4*, uint4*, size_t)>(const_cast<void*>(v.func));
            k<<<grid, block_of(v), v.smem, s>>>(reinterpret_cast<const uint4*>(b.src), reinterpret_cast<uint4*>(b.dst), n16);
            break;
        }
        case Kind::DeviceCopy:
            KWIKI_CHECK(cudaMemcpyAsync(b.dst, b.src, b.bytes, cudaMemcpyDeviceToDevice, s));
            break;
        // kwiki:rung device_read
        case Kind::DeviceRead: {  // the sum of the words into b.sum[0] (grid is 1: one "partial")
            size_t temp_bytes = 0;
            void* temp = cub_temp(b, &temp_bytes);
            KWIKI_CHECK(cub::DeviceReduce::Sum(temp, temp_bytes, reinterpret_cast<const uint32_t*>(b.src), b.sum, b.bytes / 4, s));
            break;
        // /kwiki:rung device_read
        }
    }
}

double bytes_moved(const Variant& v, const Buffers& b) {
    switch (v.kind) {
        case Kind::Read: case Kind::Write: case Kind::DeviceRead: return double(b.bytes);
        case Kind::Reuse: return double(b.bytes + b.vec_bytes);
        default: return 2.0 * double(b.bytes);
    }
}

// What a launch writes, poisoned: the partial sums of a read (grid words), or the whole destination.
void poison_outputs(const Variant& v, const Buffers& b, unsigned grid, cudaStream_t s) {
    if (v.kind == Kind::Read || v.kind == Kind::Reuse || v.kind == Kind::DeviceRead)
        kwiki::poison(b.sum, size_t(grid) * sizeof(uint32_t), s);
    else kwiki::poison(b.dst, b.bytes, s);
}

// A variant's grid on these buffers: the persistent or flat grid of its kernel, 1 for device_read, 0 for device_copy.
unsigned grid_of(const Variant& v, const Buffers& b) {
    const unsigned grid = v.func ? grid_for(v, b) : v.kind == Kind::DeviceRead ? 1 : 0;
    // only the read and reuse kernels write one checksum per block (copy_flat's grid follows the size)
    if (v.kind == Kind::Read || v.kind == Kind::Reuse) KWIKI_REQUIRE(grid <= kMaxBlocks, "grid larger than the partial-sum buffer");
    return grid;
}

// Whether a variant runs on this device (read_v32_x4 needs sm_100: on Hopper it has no case and no record).
bool runs_here(const Variant& v, const kwiki::Args& args) {
    static const bool sm100 = is_sm100();
    if (v.sm100_only && !sm100 && args.has("variants")) std::fprintf(stderr, "%s: needs sm_100, skipped\n", v.name);
    return !v.sm100_only || sm100;
}

// A variant's case on the buffers: its launch at `grid` and what its record reports.
kwiki::Case stream_case(const Variant& v, const Buffers& b, unsigned grid) {
    kwiki::Case c;
    c.params = {{"shape", std::to_string(b.bytes)}, {"dtype", "u8"}};
    c.bytes = bytes_moved(v, b);
    c.bytes_level = "dram";
    c.launch = [&v, &b, grid](cudaStream_t s) { launch(v, b, grid, s); };
    if (v.func) {
        kwiki::add_occupancy(c.extra, v.func, block_of(v), size_t(v.smem));
        c.extra.emplace_back("grid", grid);
        c.extra.emplace_back("block", block_of(v));
        if (v.smem) c.extra.emplace_back("smem_bytes", v.smem);
    }
    c.extra.emplace_back("bytes_per_access", v.width);
    c.extra.emplace_back("accesses_in_flight", v.in_flight);
    return c;
}

// ===================================================================================================
// Reference: the checks of a launch's output against the regenerated data
// ===================================================================================================

// The reference checksums of the reads, regenerated from the fill's hash on the device (once each).
struct Refs {
    std::optional<uint32_t> read, reuse;
    uint32_t get(const Variant& v, const Buffers& b) {
        const bool plain = v.kind == Kind::Read || v.kind == Kind::DeviceRead;
        std::optional<uint32_t>& r = plain ? read : reuse;
        if (!r) {
            uint32_t* out = b.sum + kMaxBlocks;
            KWIKI_CHECK(cudaMemset(out, 0, sizeof(uint32_t)));
            const unsigned ref_grid = unsigned(kwiki::sm_count()) * 8;
            if (plain) ref_sum<<<ref_grid, kThreads>>>(b.seed, b.bytes / 4, out);
            else ref_dot<<<ref_grid, kThreads>>>(b.seed, b.vec_seed, b.bytes / 4, b.vec_bytes / 4, out);
            KWIKI_CHECK_LAST();
            uint32_t v32 = 0;
            KWIKI_CHECK(cudaMemcpy(&v32, out, sizeof v32, cudaMemcpyDeviceToHost));
            r = v32;
        }
        return *r;
    }
};

// The last launch's output against the regenerated data.
kwiki::CheckResult check_last(const Variant& v, const Buffers& b, unsigned grid, Refs& refs) {
    kwiki::CheckResult c;
    if (v.kind == Kind::Read || v.kind == Kind::Reuse || v.kind == Kind::DeviceRead) {
        const uint32_t want = refs.get(v, b);
        std::vector<uint32_t> part(grid);
        KWIKI_CHECK(cudaMemcpy(part.data(), b.sum, grid * sizeof(uint32_t), cudaMemcpyDeviceToHost));
        uint32_t got = 0;
        for (uint32_t p : part) got += p;
        c.passed = got == want;
        c.max_abs_err = got == want ? 0.0 : 1.0;
        c.reference = v.kind != Kind::Reuse ? "sum of the 32-bit words mod 2^32, regenerated from the fill's hash"
                                           : "sum of matrix word * vector word mod 2^32, regenerated from the fill's hash";
        char d[96];
        std::snprintf(d, sizeof d, "checksum %u, expected %u", got, want);
        c.detail = d;
    } else {
        unsigned long long* bad = b.bad;
        KWIKI_CHECK(cudaMemset(bad, 0, sizeof *bad));
        count_mismatch<<<unsigned(kwiki::sm_count()) * 8, kThreads>>>(reinterpret_cast<const uint32_t*>(b.dst), b.bytes / 4, b.seed,
                                                                       v.kind == Kind::Write, b.salt, bad);
        KWIKI_CHECK_LAST();
        unsigned long long n_bad = 0;
        KWIKI_CHECK(cudaMemcpy(&n_bad, bad, sizeof n_bad, cudaMemcpyDeviceToHost));
        c.passed = n_bad == 0;
        c.max_abs_err = double(n_bad);
        c.reference = v.kind == Kind::Write ? "every word equals the write pattern" : "every word equals the source's (regenerated from the fill's hash)";
        char d[96];
        std::snprintf(d, sizeof d, "%llu of %zu words differ", n_bad, b.bytes / 4);
        c.detail = d;
    }
    c.tolerance = 0;
    return c;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

const Variant kVariants[] = {
    read_v<4, 1, Cache::Plain>("read_v4_x1"),
    read_v<4, 4, Cache::Plain>("read_v4_x4"),
    read_v<4, 8, Cache::Plain>("read_v4_x8"),
    // kwiki:rung read_v8_x1
    read_v<8, 1, Cache::Plain>("read_v8_x1"),
    // /kwiki:rung read_v8_x1
    read_v<8, 4, Cache::Plain>("read_v8_x4"),
    read_v<8, 8, Cache::Plain>("read_v8_x8"),
    // kwiki:rung read_v16_x1
    read_v<16, 1, Cache::Plain>("read_v16_x1"),
    // /kwiki:rung read_v16_x1
    read_v<16, 2, Cache::Plain>("read_v16_x2"),
    // kwiki:rung read_v16_x4
    read_v<16, 4, Cache::Plain>("read_v16_x4"),
    // /kwiki:rung read_v16_x4
    read_v<16, 8, Cache::Plain>("read_v16_x8"),
    read_v<32, 4, Cache::Plain>("read_v32_x4"),
    read_v<16, 4, Cache::NC>("read_v16_nc"),
    read_v<16, 4, Cache::L1NoAllocate>("read_v16_l1_no_allocate"),
    read_v<16, 4, Cache::L1EvictLast>("read_v16_l1_evict_last"),
    read_v<16, 4, Cache::L1EvictFirst>("read_v16_l1_evict_first"),
    read_v<16, 4, Cache::L2Prefetch256>("read_v16_l2_256b"),
    other_v("reuse_plain", Kind::Reuse, 16, 4, (const void*)reuse_kernel<Cache::Plain, Cache::Plain>),
    other_v("reuse_nc", Kind::Reuse, 16, 4, (const void*)reuse_kernel<Cache::NC, Cache::NC>),
    other_v("reuse_hinted", Kind::Reuse, 16, 4, (const void*)reuse_kernel<Cache::L1NoAllocate, Cache::L1EvictLast>),
    regs_v<8, 0>("regs_x8_auto"),
    regs_v<16, 1>("regs_x16_r255"),
    regs_v<16, 4>("regs_x16_r64"),
    regs_v<16, 8>("regs_x16_r32"),
    other_v("write_v16", Kind::Write, 16, 1, (const void*)write_kernel<false>),
    other_v("write_v16_cs", Kind::Write, 16, 1, (const void*)write_kernel<true>),
    other_v("copy_v16_x1", Kind::Copy, 16, 1, (const void*)copy_kernel<1, Cache::Plain, false>),
    other_v("copy_v16_x4", Kind::Copy, 16, 4, (const void*)copy_kernel<4, Cache::Plain, false>),
    other_v("copy_v16_x4_cs", Kind::Copy, 16, 4, (const void*)copy_kernel<4, Cache::NCNoAllocate, true>),
    other_v("copy_flat_x4_cs", Kind::Copy, 16, 4, (const void*)copy_flat_kernel<4, L2Pol::Streaming>, true),
    other_v("copy_flat_x2", Kind::Copy, 16, 2, (const void*)copy_flat_kernel<2, L2Pol::None>, true),
    other_v("copy_flat_x4", Kind::Copy, 16, 4, (const void*)copy_flat_kernel<4, L2Pol::None>, true),
    other_v("copy_flat_x4_read_first", Kind::Copy, 16, 4, (const void*)copy_flat_kernel<4, L2Pol::ReadFirst>, true),
    other_v("copy_flat_x4_write_last", Kind::Copy, 16, 4, (const void*)copy_flat_kernel<4, L2Pol::WriteLast>, true),
    other_v("copy_flat_x4_write_first", Kind::Copy, 16, 4, (const void*)copy_flat_kernel<4, L2Pol::WriteFirst>, true),
    other_v("copy_flat_x2_write_first", Kind::Copy, 16, 2, (const void*)copy_flat_kernel<2, L2Pol::WriteFirst>, true),
    other_v("copy_bulk_s6_32k", Kind::Copy, 32768, 5, (const void*)copy_bulk_kernel<6, 32768>, false, 6 * 32768),
    other_v("device_copy", Kind::DeviceCopy, 0, 0, nullptr),
    other_v("device_read", Kind::DeviceRead, 0, 0, nullptr),
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto sizes = m.args.get_sizes("mib", "", 1, "the stream's size in MiB (at least 8x the L2)");  // the manifest's
    kwiki::Runner& runner = m.start("vector_loads");
    for (const auto& size : sizes) {
        // one input set, refilled with new words before every timed sample (fresh inputs); each read starts cold
        Buffers b(size_t(size[0]) << 20, m.seed);
        Refs refs;
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            const unsigned grid = grid_of(v, b);
            kwiki::Case c = stream_case(v, b, grid);
            c.poison = [&v, &b, grid](cudaStream_t s) { poison_outputs(v, b, grid, s); };
            c.check = [&v, &b, grid, &refs] { return check_last(v, b, grid, refs); };
            c.refill = [&b, &refs](cudaStream_t s, uint64_t seed) { b.refill(seed, s), refs = Refs{}; };
            return c;
        }, [&](const Variant& v) { return runs_here(v, m.args); });
    }
    return kwiki::exit_code();
}
