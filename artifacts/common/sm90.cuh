// sm90.cuh: Hopper (sm_90a) building blocks written out in PTX: TMA tensor maps and loads, mbarriers,
// clusters, register reallocation and wgmma. Shared by the GEMM, TMA and warp-specialization pitfall
// artifacts; no CUTLASS/CuTe. Every wrapper is one PTX instruction (or a short wait loop) under a name.
//
// Needs -gencode=arch=compute_90a,code=sm_90a (wgmma and setmaxnreg exist only on the "a" target).
// cuTensorMapEncodeTiled is taken from the driver through cudaGetDriverEntryPointByVersion: no -lcuda.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kwiki_bench.cuh"

namespace sm90 {

// ===================================================================================================
// Host: tensor maps
// ===================================================================================================

inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (!fn) {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult q{};
        KWIKI_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
        KWIKI_REQUIRE(q == cudaDriverEntryPointSuccess && p != nullptr, "cuTensorMapEncodeTiled missing from the driver");
        fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }
    return fn;
}

template <typename T> constexpr CUtensorMapDataType tma_dtype();
template <> constexpr CUtensorMapDataType tma_dtype<__nv_bfloat16>() { return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; }
template <> constexpr CUtensorMapDataType tma_dtype<float>() { return CU_TENSOR_MAP_DATA_TYPE_FLOAT32; }

// A row-major rows x cols matrix (cols contiguous, rows `cols` elements apart) read in boxes of
// box_rows x box_cols. Elements outside the matrix read as zero (OOB fill), so edge tiles need no masks.
// TMA's rules: cols * sizeof(T) a multiple of 16 bytes, box sides <= 256, box_cols * sizeof(T) a
// multiple of 16 and, with a swizzle, no wider than the swizzle span.
template <typename T>
CUtensorMap tensor_map_2d(const T* ptr, uint64_t rows, uint64_t cols, uint32_t box_rows, uint32_t box_cols,
                          CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
    CUtensorMap map{};
    cuuint64_t dims[2] = {cols, rows};
    cuuint64_t strides[1] = {cols * sizeof(T)};
    cuuint32_t box[2] = {box_cols, box_rows};
    cuuint32_t elem_strides[2] = {1, 1};
    CUresult r = encode_tiled()(&map, tma_dtype<T>(), 2, const_cast<T*>(ptr), dims, strides, box, elem_strides,
                                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    KWIKI_CHECK_STATUS(r);
    return map;
}

// ===================================================================================================
// Device: addresses, mbarriers
// ===================================================================================================

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

// Make initialized barriers visible to the async proxy (TMA) and to the other CTAs of the cluster.
__device__ __forceinline__ void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// Arrive once and announce `bytes` of TMA traffic that must land before the phase completes.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrive on the barrier at the same shared-memory offset in CTA `cta` of this cluster (itself included):
// mapa turns this CTA's address of `bar` into that CTA's, then one remote mbarrier arrive with semantics SEM.
#define SM90_ARRIVE_REMOTE(SEM)                                                                     \
    asm volatile(                                                                                   \
        "{\n.reg .b32 remote;\n"                                                                    \
        "mapa.shared::cluster.u32 remote, %0, %1;\n"                                                \
        "mbarrier.arrive" SEM ".shared::cluster.b64 _, [remote];\n}" ::"r"(smem_u32(bar)), "r"(cta) \
        : "memory")

// Default semantics (release at CTA scope): it only has to signal that this CTA has finished reading a
// stage (wgmma_wait already guarantees that); no data written here needs to reach the other CTA.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t cta) { SM90_ARRIVE_REMOTE(""); }

// The same arrive with release semantics at cluster scope: correct too, but it orders every earlier memory
// access of the thread cluster-wide first, and on the consumers' hot path it costs (see ws_pitfalls_sm90a).
__device__ __forceinline__ void mbar_arrive_cluster_release(uint64_t* bar, uint32_t cta) { SM90_ARRIVE_REMOTE(".release.cluster"); }

#undef SM90_ARRIVE_REMOTE

// True once the phase of parity `parity` has completed. A fresh barrier is in phase 0, so a wait for
// parity 1 returns at once: that is how a producer passes its first trip round the ring.
__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    return done != 0;
}

__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {}
}

// A wait that gives up after `max_cycles` SM clocks and returns false: turns a hang into a reported error.
__device__ __forceinline__ bool mbar_wait_bounded(uint64_t* bar, uint32_t parity, long long max_cycles) {
    long long start = clock64();
    while (!mbar_try_wait(bar, parity))
        if (clock64() - start > max_cycles) return false;
    return true;
}

// ===================================================================================================
// Device: clusters, proxies, registers
// ===================================================================================================

__device__ __forceinline__ uint32_t cluster_ctarank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

// Every thread of every CTA of the cluster arrives and waits (orders shared-memory accesses cluster-wide).
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// Order this thread's ordinary shared-memory writes before later async-proxy (TMA, wgmma) accesses.
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// Give registers back (producer) or take them (consumers); all threads of the warpgroup execute it.
template <int R> __device__ __forceinline__ void regs_release() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R)); }
template <int R> __device__ __forceinline__ void regs_claim() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R)); }

// ===================================================================================================
// Device: TMA
// ===================================================================================================

// Box at (c0 = column, c1 = row) of `map` into shared memory; completes `bytes` on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
        ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
        : "memory");
}

// The same box written to the same offset in every CTA of `cta_mask`, each CTA's barrier at the offset
// of `bar` receiving the byte count.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1,
                                                      uint16_t cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%3, %4}], [%2], %5;"
        ::"r"(smem_u32(dst)), "l"(map), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
        : "memory");
}

// Shared memory to global through a tensor map (a TMA store), then wait until the source may be reused.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 ::"l"(map), "r"(smem_u32(src)), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_store_commit_and_wait() {
    asm volatile("cp.async.bulk.commit_group;\ncp.async.bulk.wait_group 0;" ::: "memory");
}
// The same in pieces: close a group of stores; wait until at most N groups still read shared memory
// (the source may then be overwritten); wait until at most N groups are still writing global memory.
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory"); }

// Named barrier `id` (1..15) among `threads` threads (a multiple of 32), e.g. one warpgroup.
__device__ __forceinline__ void named_barrier(int id, int threads) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory"); }

// ===================================================================================================
// Device: wgmma
// ===================================================================================================

// Descriptor of a K-major operand tile that TMA wrote with the 128-byte swizzle: rows of 128 bytes,
// 8-row (1024-byte) swizzle atoms stacked along M/N. Start address in bits 0-13 (>>4), leading byte
// offset 16-29 (unused for this layout, 1 by convention), stride byte offset 32-45 (1024 >> 4: the next
// 8-row atom), layout type 62-63 (1 = 128-byte swizzle). Stepping K inside the 128-byte row is a plain
// add to the start address: the hardware applies the swizzle to the address it forms.
__device__ __forceinline__ uint64_t desc_k_major_sw128(const void* tile) {
    uint64_t addr = smem_u32(tile);
    return ((addr & 0x3FFFF) >> 4) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory"); }

// Tell the compiler an accumulator register may change here (keeps reads after wgmma_wait in place).
__device__ __forceinline__ void fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }

// One m64nNk(32 bytes) wgmma, both operands K-major in shared memory, fp32 accumulators in registers:
// bf16 -> k16 (transpose flags 0), tf32 (fp32 data, low 13 mantissa bits ignored) -> k8.
// d[] follows the wgmma accumulator layout: thread t of the warpgroup holds rows 16*(t/32) + (t%32)/4
// and +8, columns 8j + 2*(t%4) + {0,1} in d[4j + {0,1}] (row) and d[4j + {2,3}] (row + 8).
template <typename T, int N> struct WgmmaOp {
    static __device__ __forceinline__ void mma(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d);
};

// The specializations spell out every accumulator operand (inline PTX takes no register arrays), through
// the macros below: SM90_ACC_N<N> lists the N/2 accumulators "+f"(d[i]) and SM90_REGS_N<N> their
// placeholders %0 .. %(N/2 - 1); the descriptors and scale_d follow as %(N/2), %(N/2 + 1), %(N/2 + 2).
#define SM90_ACC8(i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define SM90_ACC32(i) SM90_ACC8(i), SM90_ACC8(i + 8), SM90_ACC8(i + 16), SM90_ACC8(i + 24)
#define SM90_ACC_N64 SM90_ACC32(0)
#define SM90_ACC_N128 SM90_ACC32(0), SM90_ACC32(32)
#define SM90_ACC_N256 SM90_ACC32(0), SM90_ACC32(32), SM90_ACC32(64), SM90_ACC32(96)
#define SM90_REGS_N64                                                                \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define SM90_REGS_N128                                                                 \
    SM90_REGS_N64 ", "                                                                 \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define SM90_REGS_N256                                                                               \
    SM90_REGS_N128 ", "                                                                              \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "               \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "               \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "   \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// WgmmaOp<T, N>::mma as one wgmma.mma_async.sync.aligned.<SHAPE_TYPES>: the accumulators, descriptors da and
// db (placeholders %DA and %DB), the scale-d predicate from scale_d (%SCALE; 0: d = A B, else d += A B), then
// FLAGS: imm-scale-a and imm-scale-b (1: not negated) and, for bf16 only, imm-trans-a and -b (0: K-major).
#define SM90_WGMMA(T, N, SHAPE_TYPES, FLAGS, DA, DB, SCALE)                                                        \
    template <>                                                                                                    \
    __device__ __forceinline__ void WgmmaOp<T, N>::mma(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE ", 0;\n"                                          \
                     "wgmma.mma_async.sync.aligned." SHAPE_TYPES " {" SM90_REGS_N##N "}, "                         \
                     "%" #DA ", %" #DB ", p, " FLAGS ";\n}\n"                                                      \
                     : SM90_ACC_N##N                                                                               \
                     : "l"(da), "l"(db), "r"(scale_d));                                                            \
    }

SM90_WGMMA(__nv_bfloat16, 64, "m64n64k16.f32.bf16.bf16", "1, 1, 0, 0", 32, 33, 34)
SM90_WGMMA(__nv_bfloat16, 128, "m64n128k16.f32.bf16.bf16", "1, 1, 0, 0", 64, 65, 66)
SM90_WGMMA(__nv_bfloat16, 256, "m64n256k16.f32.bf16.bf16", "1, 1, 0, 0", 128, 129, 130)
SM90_WGMMA(float, 64, "m64n64k8.f32.tf32.tf32", "1, 1", 32, 33, 34)
SM90_WGMMA(float, 128, "m64n128k8.f32.tf32.tf32", "1, 1", 64, 65, 66)
SM90_WGMMA(float, 256, "m64n256k8.f32.tf32.tf32", "1, 1", 128, 129, 130)

#undef SM90_WGMMA
#undef SM90_REGS_N256
#undef SM90_REGS_N128
#undef SM90_REGS_N64
#undef SM90_ACC_N256
#undef SM90_ACC_N128
#undef SM90_ACC_N64
#undef SM90_ACC32
#undef SM90_ACC8

}  // namespace sm90
