// kwiki_cluster.cuh: what the artifacts that reduce a row across a thread-block cluster share: the cluster barrier
// split in two, a float read from another CTA's shared memory (distributed shared memory), and a bulk copy of a
// slice of global memory into this CTA's shared memory (TMA's 1D form). PTX over sm90.cuh, no CUTLASS. Included by
// artifacts/row_reduce_sm90a (its cluster rungs) and artifacts/cross_entropy_bf16_sm90a (ce_cluster.cu); no rung
// markers here: the rungs are the artifacts' own.
#pragma once

#include <cstdint>

#include "sm90.cuh"

namespace kwiki::cluster {

// barrier.cluster split in two: arrive (release: this CTA's shared-memory writes before it are visible to the
// cluster once every CTA has arrived) and wait (acquire). Every thread of every CTA of the cluster executes both.
// arrive_relaxed orders no memory access (PTX ISA, barrier.cluster): it only says "this CTA is past this point".
__device__ __forceinline__ void arrive() { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
__device__ __forceinline__ void arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void wait() { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }

// The float at `local` (this CTA's shared memory) in CTA `rank` of the cluster: mapa turns the shared-window address
// into the same variable's address in the other CTA's shared memory, and ld.shared::cluster reads it over the
// SM-to-SM network (distributed shared memory).
__device__ __forceinline__ float load_from_rank(const float* local, unsigned rank) {
    const uint32_t addr = uint32_t(__cvta_generic_to_shared(local));
    uint32_t remote;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

// `bytes` of global memory into this CTA's shared memory in one bulk copy (the TMA engine: no registers, no
// per-thread loads), completing the transaction count of `bar` (PTX ISA, cp.async.bulk: both addresses 16-byte
// aligned, a multiple of 16 bytes).
__device__ __forceinline__ void bulk_load(void* smem, const void* gmem, uint32_t bytes, uint64_t* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sm90::smem_u32(smem)), "l"(gmem), "r"(bytes), "r"(sm90::smem_u32(bar)) : "memory");
}

}  // namespace kwiki::cluster
