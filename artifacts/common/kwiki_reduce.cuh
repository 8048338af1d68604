// kwiki_reduce.cuh: sums across the lanes of a warp and the warps of a block, for kernels that split a dot
// product over threads (the GEMVs' split-K). Device-only, namespace kwiki.
#pragma once

#include <cuda_runtime.h>

namespace kwiki {

// The sum of v over the 32 lanes of the warp, in every lane (5 butterfly shuffles).
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Block-wide split-K: each thread of the block's W warps holds partial sums s[r] of R rows. Every warp sums
// its lanes into part[warp][r]; after a __syncthreads, thread r < R returns row r's total over the warps
// (the other threads return 0). `part` is the caller's W x R shared array; tid is threadIdx.x, lane and warp
// are tid & 31 and tid / 32. All three come from the kernel, read and computed where it did before this
// helper existed: with nvcc 13, reading threadIdx.x in here instead changed the kernels' SASS (sm_100a
// lost range facts about the thread index; sm_90a scheduled the main loop differently).
// Every thread of the block must call this (it synchronizes the block).
template <int R, int W>
__device__ __forceinline__ float block_sum_rows(const float (&s)[R], float (&part)[W][R], unsigned tid, int lane, int warp) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        const float t = warp_sum(s[r]);
        if (lane == 0) part[warp][r] = t;
    }
    __syncthreads();
    float t = 0;
    if (tid < R) {
#pragma unroll
        for (int w = 0; w < W; ++w) t += part[w][tid];
    }
    return t;
}

}  // namespace kwiki
