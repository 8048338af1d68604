// gemm.cu: a warp-specialized Hopper GEMM (TMA + wgmma + mbarriers, no CUTLASS), one rung per variant,
// checked and timed against cuBLAS on the same random inputs in the same run.
// The baseline, cublaslt_best, is cuBLASLt given its best chance: the fastest of the first 8 algorithms its
// heuristic offers for the shape, chosen in a selection pass of this run (samples of its own, every candidate
// checked), then timed afresh with the ladder. cublas (cublasGemmEx, default algorithm) stays as a row and is the
// reference every element is compared with.
//
// C[M,N] = A[M,K] * B[N,K]^T with A and B row-major (K contiguous: both wgmma operands K-major) and C
// row-major; fp32 accumulation. bf16 variants read bf16 and write bf16; tf32 variants read fp32, multiply
// in tf32 and write fp32. In cuBLAS's column-major terms this is C^T = B^T(op T) * A(op N), "TN".
// Requirements: K a multiple of 8 (TMA rows are 16-byte aligned), N even (paired stores). M, N and K
// need not be multiples of the tile: TMA fills out-of-range elements with zeros, stores are guarded.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o gemm gemm.cu
// Run:   ./gemm --shapes=4096x4096x4096,... [--variants a,b] [--group 16] [--seed N] [--input-sets 2]   (--shapes: the
//        manifest's)
//
// Variants: the ladder of page algo-warp-specialization; artifact.yaml holds each variant's rung, what it adds
// and its description, in the order of the table below (names only); each rung's code is a marked region.
//
// Checking (before any timing, every variant, every shape): all elements against cuBLAS's output, and
// 4096 sampled elements against a host fp64 dot product of the same inputs (kwiki_gemm.cuh).
// Timing (kwiki::Runner): --input-sets (2) pre-filled sets of A and B, each with cuBLAS's output (itself checked
// against the host fp64 samples); every timed sample reads one set at random into a poisoned C, and the
// re-checked samples are compared, every element, with that set's cuBLAS output on the GPU.
#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"
#include "kwiki_gemm.cuh"
#include "sm90.cuh"

using bf16 = __nv_bfloat16;

// ===================================================================================================
// Reference
// ===================================================================================================

// Host fp64 on sampled elements (kwiki::gemm_reference, kwiki_gemm.cuh) and cuBLAS on every element
// (kwiki::gemm_tn, kwiki_cublas.cuh, as run_cublas calls it below), both from the same inputs.

struct Problem {
    int M, N, K;
};

// Device buffer of bf16 or fp32 (tf32 variants) to host floats.
std::vector<float> host_floats(const void* dev, size_t n, bool tf32) {
    return tf32 ? kwiki::to_host_float(static_cast<const float*>(dev), n) : kwiki::to_host_float(static_cast<const bf16*>(dev), n);
}

// The output's elements at the fp64 samples' positions (kwiki::gather_samples: on the GPU, 4096 elements copied).
std::vector<float> sampled_floats(const void* C, int N, const std::vector<kwiki::GemmSample>& ref, bool tf32) {
    return tf32 ? kwiki::gather_samples(static_cast<const float*>(C), N, ref) : kwiki::gather_samples(static_cast<const bf16*>(C), N, ref);
}

// Every element of out against ref (both bf16, or both fp32), on the GPU.
kwiki::CheckResult compare_on_device(const void* out, const void* ref, size_t n, bool tf32, kwiki::Tolerance tol) {
    const char* what = "cuBLAS on the same inputs (every element, on the GPU)";
    return tf32 ? kwiki::compare_device(static_cast<const float*>(out), static_cast<const float*>(ref), n, tol, what)
                : kwiki::compare_device(static_cast<const bf16*>(out), static_cast<const bf16*>(ref), n, tol, what);
}

// tolerance: two roundings of the output dtype, plus fp32 accumulation (and tf32 inputs) over K terms
kwiki::Tolerance tolerance(bool tf32, int K) {
    return kwiki::gemm_tolerance(tf32 ? kwiki::GemmPrecision::tf32 : kwiki::GemmPrecision::bf16, K);
}

// One input set of a shape and dtype: A and B (bf16, or fp32 for tf32; A from `sa`, B from hash64(sa, 1)), cuBLAS's
// output on them, and the host fp64 samples (`samples` of them, positions from hash64(sa, 2)). The samples of set 0
// are kept for the record's check; every later set's cuBLAS output is checked against its own (exit 2 if cuBLAS is
// wrong).
struct Operands {
    kwiki::DeviceBuffer<uint8_t> A, B, Cref;
    std::vector<kwiki::GemmSample> ref;

    void fill(const Problem& p, bool tf32, uint64_t sa, int samples, kwiki::cublasHandle_t handle, bool first) {
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K, nC = size_t(p.M) * p.N, in_size = tf32 ? 4 : 2;
        A = kwiki::DeviceBuffer<uint8_t>(nA * in_size), B = kwiki::DeviceBuffer<uint8_t>(nB * in_size);
        Cref = kwiki::DeviceBuffer<uint8_t>(nC * in_size);
        const uint64_t sb = kwiki::hash64(sa, 1);
        if (tf32) kwiki::fill_random(reinterpret_cast<float*>(A.get()), nA, sa), kwiki::fill_random(reinterpret_cast<float*>(B.get()), nB, sb);
        else kwiki::fill_random(reinterpret_cast<bf16*>(A.get()), nA, sa), kwiki::fill_random(reinterpret_cast<bf16*>(B.get()), nB, sb);
        kwiki::gemm_tn(handle, A.get(), B.get(), Cref.get(), p.M, p.N, p.K, tf32 ? kwiki::kGemmTf32 : kwiki::kGemmBf16, 0);
        KWIKI_CHECK(cudaDeviceSynchronize());
        // host copies of the inputs (as rounded to their dtype) for the fp64 reference
        const std::vector<float> hA = host_floats(A.get(), nA, tf32), hB = host_floats(B.get(), nB, tf32);
        std::vector<kwiki::GemmSample> samples_of_set = kwiki::gemm_reference(hA, hB, p.M, p.N, p.K, samples, kwiki::hash64(sa, 2));
        if (first) {
            ref = std::move(samples_of_set);
            return;
        }
        const std::vector<float> at = sampled_floats(Cref.get(), p.N, samples_of_set, tf32);
        const kwiki::CheckResult c = kwiki::compare_samples(at.data(), samples_of_set, tolerance(tf32, p.K), "host fp64 on sampled elements");
        if (!c.passed)
            kwiki::fail_env(__FILE__, __LINE__, "cuBLAS on input set", ("disagrees with the host fp64 samples: " + c.detail).c_str());
    }
};

// Every element of `out` against the set's cuBLAS output, on the GPU (the check of every set but 0, and the re-checks).
kwiki::CheckResult check_all(const void* out, const Operands& set, const Problem& p, bool tf32) {
    return compare_on_device(out, set.Cref.get(), size_t(p.M) * p.N, tf32, tolerance(tf32, p.K));
}

// The check of a launch on input set `s`: check_first on set 0, check_all on any other.
kwiki::CheckResult check_first(const void* out, const Problem& p, bool tf32, bool is_cublas, const Operands& set0);
kwiki::CheckResult check_set(const void* out, const Operands& s, bool first, const Problem& p, bool tf32, bool is_cublas) {
    return first ? check_first(out, p, tf32, is_cublas, s) : check_all(out, s, p, tf32);
}

// The check of input set 0: every element against cuBLAS (on the GPU; not for cuBLAS itself, the reference) and the
// sampled elements against set 0's fp64 samples (on the host).
kwiki::CheckResult check_first(const void* out, const Problem& p, bool tf32, bool is_cublas, const Operands& set0) {
    const kwiki::Tolerance tol = tolerance(tf32, p.K);
    kwiki::CheckResult cb;
    if (is_cublas) {
        cb.passed = true;
        cb.detail = "is the reference";
    } else {
        cb = compare_on_device(out, set0.Cref.get(), size_t(p.M) * p.N, tf32, tol);
    }
    const std::vector<float> at = sampled_floats(out, p.N, set0.ref, tf32);
    kwiki::CheckResult h = kwiki::compare_samples(at.data(), set0.ref, tol, "");
    kwiki::CheckResult both = cb;
    both.passed = cb.passed && h.passed;
    both.reference = is_cublas ? "host fp64 on sampled elements" : "cuBLAS (every element) and host fp64 (sampled elements)";
    if (is_cublas) both.max_abs_err = h.max_abs_err, both.max_rel_err = h.max_rel_err;
    both.detail = "vs cuBLAS: " + cb.detail + "; vs fp64: " + h.detail;
    return both;
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// One kernel configuration. A k-block is one 128-byte swizzle row deep (64 bf16 or 32 fp32), so every
// operand tile in shared memory is a stack of 128-byte rows; one wgmma consumes 32 bytes of K.
// LAG: how many k-blocks a consumer keeps in flight before freeing a stage: 1 = wgmma_wait<1> (issue the
// next k-block's wgmmas before the previous finish; a consumer holds two stages), 0 = wgmma_wait<0> (free
// each stage as soon as its wgmmas finish; the other consumer warpgroup keeps the tensor cores busy).
// SPLIT_B (clusters): each CTA loads 1/CLUSTER of the shared B tile and multicasts it (true), or CTA 0
// loads and multicasts all of it (false). EPI_TMA: the epilogue writes the tile into shared memory
// (128B-swizzled 64x64 boxes) and a TMA store copies it out while the warpgroup goes on to its next tile;
// otherwise each thread stores its accumulators straight to global memory.
// RELEASE_CLUSTER: the consumers' arrives on the cluster's empty barriers carry .release.cluster (the
// slow way kept as a variant) instead of the default CTA-scope release.
// PINGPONG: each consumer warpgroup owns a whole BM x BN tile (gemm_pingpong) instead of BM / CONSUMERS rows of it.
template <typename T, int BM_, int BN_, int CONSUMERS_, int STAGES_, int CLUSTER_, int LAG_ = 1, bool SPLIT_B_ = true,
          bool EPI_TMA_ = false, bool RELEASE_CLUSTER_ = false, bool PINGPONG_ = false>
struct Config {
    using Elem = T;
    using Out = T;  // bf16 -> bf16, fp32 (tf32 math) -> fp32
    static constexpr int BM = BM_, BN = BN_, CONSUMERS = CONSUMERS_, STAGES = STAGES_, CLUSTER = CLUSTER_;
    static constexpr int LAG = LAG_;
    static constexpr bool SPLIT_B = SPLIT_B_;
    static constexpr bool EPI_TMA = EPI_TMA_;
    static constexpr bool RELEASE_CLUSTER = RELEASE_CLUSTER_;
    static constexpr bool PINGPONG = PINGPONG_;
    static constexpr int BK = 128 / int(sizeof(T));
    static constexpr int WK = 32 / int(sizeof(T));
    static constexpr int WG_M = PINGPONG ? BM : BM / CONSUMERS;  // rows of the tile one consumer warpgroup owns
    static constexpr int MI = WG_M / 64;         // m64 wgmma blocks per consumer
    static constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK;
    static constexpr int B_SLICE_ROWS = SPLIT_B ? BN / CLUSTER : BN;  // rows of B one TMA load brings
    static constexpr int STAGE_BYTES = (A_ELEMS + B_ELEMS) * int(sizeof(T));
    static constexpr int THREADS = 128 * (CONSUMERS + 1);
    static constexpr int C_TILE_BYTES = EPI_TMA ? BM * BN * int(sizeof(T)) : 0;  // epilogue staging, all consumers
    static constexpr int TURN_BYTES = PINGPONG ? 2 * 8 : 0;  // pingpong: the two consumers' turn barriers
    static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + C_TILE_BYTES + 2 * STAGES * 8 + TURN_BYTES + 1024;  // + barriers, alignment slack
    static_assert(WG_M % 64 == 0 && MI * BN / 2 <= 128, "a consumer holds at most 128 fp32 accumulators");
    static_assert(B_SLICE_ROWS <= 256 && BM <= 256, "a TMA box side is at most 256");
    static_assert((B_SLICE_ROWS * 128) % 1024 == 0, "multicast slices must keep the 1024-byte swizzle alignment");
    static_assert(!EPI_TMA || (sizeof(T) == 2 && MI == 1 && BN % 64 == 0), "the TMA epilogue stores bf16 64-row boxes");
    static_assert(!PINGPONG || (CONSUMERS == 2 && CLUSTER == 1 && LAG == 1 && !EPI_TMA), "pingpong: two consumers, no cluster, LAG 1");
};

__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// kwiki:rung ws_persistent_hilbert
// Hilbert index d -> (x, y) inside an n x n square, n a power of two: consecutive d are neighbours.
// The curve starts at (0, 0) and ends at (n - 1, 0).
__device__ __forceinline__ void hilbert_d2xy(int n, int d, int& x, int& y) {
    x = y = 0;
    for (int s = 1; s < n; s *= 2) {
        const int rx = 1 & (d / 2), ry = 1 & (d ^ rx);
        if (ry == 0) {
            if (rx == 1) x = s - 1 - x, y = s - 1 - y;
            const int t = x;
            x = y, y = t;
        }
        x += s * rx, y += s * ry;
        d /= 4;
    }
}
// /kwiki:rung ws_persistent_hilbert

// kwiki:rung ws_persistent_hilbert
// Hilbert tile order: the grid is cut into S x S squares, S the largest power of two that fits both
// sides; units walk a Hilbert curve through each square, squares row by row (x along the tile-columns).
// Units past the squares (grids that are not multiples of S) take the leftover tiles in row-major
// order: first the columns right of the squares, then the rows below them.
__device__ __forceinline__ void hilbert_tile_of(int unit, int units_m, int tiles_n, int& um, int& tn) {
    int side = 1;
    while (side * 2 <= min(units_m, tiles_n)) side *= 2;
    const int sq_m = units_m / side, sq_n = tiles_n / side, per_sq = side * side;
    if (unit < sq_m * sq_n * per_sq) {
        const int sq = unit / per_sq;
        int x, y;
        hilbert_d2xy(side, unit - sq * per_sq, x, y);
        um = (sq / sq_n) * side + y;
        tn = (sq % sq_n) * side + x;
        return;
    }
    int rest = unit - sq_m * sq_n * per_sq;
    const int right = tiles_n - sq_n * side, right_cells = sq_m * side * right;
    if (rest < right_cells) {
        um = rest / right;
        tn = sq_n * side + rest % right;
    } else {
        rest -= right_cells;
        um = sq_m * side + rest / tiles_n;
        tn = rest % tiles_n;
    }
}
// /kwiki:rung ws_persistent_hilbert

// kwiki:rung ws_persistent
// Grouped tile order: units come in bands of `group` unit-rows; inside a band, walk down the rows first,
// then across the columns. Neighbouring CTAs share A rows and B columns, so L2 keeps them. A negative
// group means the Hilbert order above.
__device__ __forceinline__ void tile_of(int unit, int units_m, int tiles_n, int group, int& um, int& tn) {
    if (group < 0) {
        hilbert_tile_of(unit, units_m, tiles_n, um, tn);
        return;
    }
    int per_band = group * tiles_n;
    int band = unit / per_band;
    int first = band * group;
    int rows = min(group, units_m - first);
    int r = unit - band * per_band;
    um = first + r % rows;
    tn = r / rows;
}
// /kwiki:rung ws_persistent

// One k-block of wgmma for one consumer: MI m64 blocks x (BK / WK) k-steps, all into d.
template <class C>
__device__ __forceinline__ void mma_kblock(float (&d)[C::MI][C::BN / 2], const typename C::Elem* a, const typename C::Elem* b) {
#pragma unroll
    for (int ks = 0; ks < C::BK / C::WK; ++ks)
#pragma unroll
        for (int mi = 0; mi < C::MI; ++mi)
            sm90::WgmmaOp<typename C::Elem, C::BN>::mma(d[mi], sm90::desc_k_major_sw128(a + mi * 64 * C::BK + ks * C::WK),
                                                         sm90::desc_k_major_sw128(b + ks * C::WK), 1);
}

template <typename T> __device__ __forceinline__ void store_pair(T* p, float v0, float v1);
template <> __device__ __forceinline__ void store_pair<bf16>(bf16* p, float v0, float v1) {
    *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
}
template <> __device__ __forceinline__ void store_pair<float>(float* p, float v0, float v1) {
    *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
}
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ bf16 from_float<bf16>(float v) { return __float2bfloat16_rn(v); }
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }

// A consumer's accumulators to C (rows from row0, columns from col0), straight from registers, guarded.
template <class C>
__device__ __forceinline__ void store_tile(float (&d)[C::MI][C::BN / 2], typename C::Out* out, int M, int N, int row0, int col0) {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            int r = row0 + mi * 64 + warp * 16 + lane / 4 + 8 * h;
            if (r >= M) continue;
            typename C::Out* row = out + size_t(r) * N;
#pragma unroll
            for (int j = 0; j < C::BN / 8; ++j) {
                int c = col0 + 8 * j + 2 * (lane % 4);
                float v0 = d[mi][4 * j + 2 * h], v1 = d[mi][4 * j + 2 * h + 1];
                if (c + 1 < N) store_pair(row + c, v0, v1);
                else if (c < N) row[c] = from_float<typename C::Out>(v0);
            }
        }
}

// kwiki:rung ws_tma_epilogue
// The TMA epilogue of one consumer (64 rows): wait until its previous store has read the staging tile,
// write the accumulators as bf16 into 64x64 boxes laid out as the 128B swizzle expects (16-byte chunk c
// of row r at chunk c ^ (r % 8): conflict-free), fence so the TMA engine sees them, store the boxes.
template <class C>
__device__ __forceinline__ void store_tile_tma(float (&d)[C::MI][C::BN / 2], uint8_t* stage, const CUtensorMap* tmC, int row0, int col0,
                                               int barrier_id) {
    const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32;
    if (tid == 0) sm90::bulk_wait_read<0>();
    sm90::named_barrier(barrier_id, 128);
#pragma unroll
    for (int j = 0; j < C::BN / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = warp * 16 + lane / 4 + 8 * h, c = 8 * j + 2 * (lane % 4);
            const int off = (c / 64) * 8192 + r * 128 + ((((c % 64) / 8) ^ (r % 8)) << 4) + (c % 8) * 2;
            *reinterpret_cast<__nv_bfloat162*>(stage + off) = __floats2bfloat162_rn(d[0][4 * j + 2 * h], d[0][4 * j + 2 * h + 1]);
        }
    sm90::fence_proxy_async();
    sm90::named_barrier(barrier_id, 128);
    if (tid == 0) {
#pragma unroll
        for (int b = 0; b < C::BN / 64; ++b) sm90::tma_store_2d(tmC, stage + b * 8192, col0 + b * 64, row0);
        sm90::bulk_commit();
    }
}
// /kwiki:rung ws_tma_epilogue

template <class C>
__device__ __forceinline__ void zero(float (&d)[C::MI][C::BN / 2]) {
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
        for (int i = 0; i < C::BN / 2; ++i) d[mi][i] = 0.f, sm90::fence_operand(d[mi][i]);
}

template <class C>
__device__ __forceinline__ void settle(float (&d)[C::MI][C::BN / 2]) {
#pragma unroll
    for (int mi = 0; mi < C::MI; ++mi)
#pragma unroll
        for (int i = 0; i < C::BN / 2; ++i) sm90::fence_operand(d[mi][i]);
}

// kwiki:rung serial
// --- serial: one warpgroup loads a k-block, waits for it, multiplies, waits for the multiply, repeats.
template <class C>
__global__ void __launch_bounds__(128, 1)
gemm_serial(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, typename C::Out* out, int M, int N, int K) {
    using T = typename C::Elem;
    extern __shared__ uint8_t smem_raw[];
    T* sA = reinterpret_cast<T*>(align1024(smem_raw));
    T* sB = sA + C::A_ELEMS;
    uint64_t* full = reinterpret_cast<uint64_t*>(sB + C::B_ELEMS);
    if (threadIdx.x == 0) {
        sm90::mbar_init(full, 1);
        sm90::fence_barrier_init();
    }
    __syncthreads();
    const int row0 = blockIdx.y * C::BM, col0 = blockIdx.x * C::BN, k_blocks = (K + C::BK - 1) / C::BK;
    float d[C::MI][C::BN / 2];
    zero<C>(d);
    for (int kb = 0; kb < k_blocks; ++kb) {
        if (threadIdx.x == 0) {
            sm90::mbar_arrive_expect_tx(full, C::STAGE_BYTES);
            sm90::tma_load_2d(sA, &tmA, full, kb * C::BK, row0);
            sm90::tma_load_2d(sB, &tmB, full, kb * C::BK, col0);
        }
        sm90::mbar_wait(full, kb & 1);
        sm90::wgmma_fence();
        mma_kblock<C>(d, sA, sB);
        sm90::wgmma_commit();
        sm90::wgmma_wait<0>();
        settle<C>(d);
        __syncthreads();  // every thread's wgmma has read the stage before the next load overwrites it
    }
    store_tile<C>(d, out, M, N, row0, col0);
}
// /kwiki:rung serial

// The shared memory of the warp-specialized kernels, carved from the dynamic allocation: STAGES A tiles and
// STAGES B tiles from a 1024-byte boundary (the 128-byte swizzle's atom), the EPI_TMA staging tiles, then
// the full[STAGES] and empty[STAGES] mbarriers (gemm_pingpong keeps its two turn barriers after them).
template <class C>
struct Ring {
    typename C::Elem *sA, *sB;
    uint8_t* sC;
    uint64_t *full, *empty;

    __device__ __forceinline__ explicit Ring(uint8_t* raw)
        : sA(reinterpret_cast<typename C::Elem*>(align1024(raw))),
          sB(sA + C::STAGES * C::A_ELEMS),
          sC(reinterpret_cast<uint8_t*>(sB + C::STAGES * C::B_ELEMS)),
          full(reinterpret_cast<uint64_t*>(sC + C::C_TILE_BYTES)),
          empty(full + C::STAGES) {}

    // By one thread: full[s] completes on 1 arrival and the stage's bytes, empty[s] on `readers` arrivals.
    __device__ __forceinline__ void init(int readers) const {
        for (int s = 0; s < C::STAGES; ++s) {
            sm90::mbar_init(&full[s], 1);
            sm90::mbar_init(&empty[s], readers);
        }
    }
};

// kwiki:rung ws_plain
// The producer, one thread of warpgroup 0: for the units first, first + step, ... (in tile order), every
// k-block's A and B tiles into the next stage of the ring once its readers have freed it. Stage and phase
// run on across units, so the next unit's loads start while the consumers finish the last one. In a
// cluster, CTA `rank` loads its own A rows and B_SLICE_ROWS rows of the B tile the cluster shares (or, with
// !SPLIT_B, CTA 0 loads all of it), multicast to every CTA of the cluster.
template <class C>
__device__ __forceinline__ void produce(const CUtensorMap& tmA, const CUtensorMap& tmB, const Ring<C>& ring, int first, int step,
                                        int units, int units_m, int tiles_n, int k_blocks, int group, uint32_t rank) {
    int stage = 0;
    uint32_t phase = 0;
    for (int u = first; u < units; u += step) {
        int um, tn;
        tile_of(u, units_m, tiles_n, group, um, tn);
        const int row_a = (um * C::CLUSTER + int(rank)) * C::BM, row_b = tn * C::BN;
        for (int kb = 0; kb < k_blocks; ++kb) {
            sm90::mbar_wait(&ring.empty[stage], phase ^ 1);
            sm90::mbar_arrive_expect_tx(&ring.full[stage], C::STAGE_BYTES);
            sm90::tma_load_2d(ring.sA + stage * C::A_ELEMS, &tmA, &ring.full[stage], kb * C::BK, row_a);
            if constexpr (C::CLUSTER == 1)
                sm90::tma_load_2d(ring.sB + stage * C::B_ELEMS, &tmB, &ring.full[stage], kb * C::BK, row_b);
            else if (C::SPLIT_B || rank == 0)
                sm90::tma_load_2d_multicast(ring.sB + stage * C::B_ELEMS + rank * C::B_SLICE_ROWS * C::BK, &tmB, &ring.full[stage],
                                            kb * C::BK, row_b + int(rank) * C::B_SLICE_ROWS, uint16_t((1u << C::CLUSTER) - 1));
            if (++stage == C::STAGES) stage = 0, phase ^= 1;
        }
    }
}
// /kwiki:rung ws_plain

// kwiki:rung ws_plain
// --- warp-specialized: warpgroup 0 produces (one thread issues TMA), warpgroups 1.. consume (wgmma).
// Ring of STAGES stages; full[s] completes when stage s has landed (1 arrival + bytes), empty[s] when
// every consumer of the cluster has finished reading it (CONSUMERS * CLUSTER arrivals). Stage index and
// phase run on across tiles, so a persistent CTA's producer prefetches the next tile during the epilogue.
// With CLUSTER > 1 the CTAs of a cluster take vertically adjacent tiles that share one B tile: each CTA
// loads B_SLICE_ROWS rows of it and multicasts them to all, so it expects the whole stage's bytes.
template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
gemm_ws(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, const __grid_constant__ CUtensorMap tmC,
        typename C::Out* out, int M, int N, int K, int group) {
    extern __shared__ uint8_t smem_raw[];
    const Ring<C> ring(smem_raw);
    const int wg = threadIdx.x / 128;
    const uint32_t rank = C::CLUSTER > 1 ? sm90::cluster_ctarank() : 0;

    if (threadIdx.x == 0) {
        ring.init(C::CONSUMERS * C::CLUSTER);  // every consumer of the cluster reads every stage
        sm90::fence_barrier_init();
    }
    if constexpr (C::CLUSTER > 1) sm90::cluster_sync();
    else __syncthreads();
    kwiki::clock_begin();  // the clock this kernel runs at (kwiki_clock.cuh): CTA 0's thread 0, the producer

    const int tiles_m = (M + C::BM - 1) / C::BM, tiles_n = (N + C::BN - 1) / C::BN, k_blocks = (K + C::BK - 1) / C::BK;
    const int units_m = (tiles_m + C::CLUSTER - 1) / C::CLUSTER, units = units_m * tiles_n;
    const int first = blockIdx.x / C::CLUSTER, step = gridDim.x / C::CLUSTER;

    if (wg == 0) {
        if constexpr (C::CONSUMERS > 1) sm90::regs_release<40>();
        if (threadIdx.x == 0) produce<C>(tmA, tmB, ring, first, step, units, units_m, tiles_n, k_blocks, group, rank);
    } else {
        if constexpr (C::CONSUMERS > 1) sm90::regs_claim<232>();
        const int cw = wg - 1, tid = threadIdx.x % 128;
        auto release = [&](int s) {  // thread r of the warpgroup signals CTA r of the cluster
            if constexpr (C::CLUSTER == 1) {
                if (tid == 0) sm90::mbar_arrive(&ring.empty[s]);
            } else if (tid < C::CLUSTER) {
                if constexpr (C::RELEASE_CLUSTER) sm90::mbar_arrive_cluster_release(&ring.empty[s], uint32_t(tid));
                else sm90::mbar_arrive_cluster(&ring.empty[s], uint32_t(tid));
            }
        };
        float d[C::MI][C::BN / 2];
        int stage = 0;
        uint32_t phase = 0;
        for (int u = first; u < units; u += step) {
            int um, tn;
            tile_of(u, units_m, tiles_n, group, um, tn);
            const int row0 = (um * C::CLUSTER + int(rank)) * C::BM + cw * C::WG_M, col0 = tn * C::BN;
            zero<C>(d);
            int prev = -1;
            for (int kb = 0; kb < k_blocks; ++kb) {
                sm90::mbar_wait(&ring.full[stage], phase);
                sm90::wgmma_fence();
                mma_kblock<C>(d, ring.sA + stage * C::A_ELEMS + cw * C::WG_M * C::BK, ring.sB + stage * C::B_ELEMS);
                sm90::wgmma_commit();
                if constexpr (C::LAG == 1) {
                    sm90::wgmma_wait<1>();  // the previous k-block's wgmmas are done: free its stage
                    if (prev >= 0) release(prev);
                    prev = stage;
                } else {
                    sm90::wgmma_wait<0>();  // this k-block's wgmmas are done: free its stage
                    release(stage);
                }
                if (++stage == C::STAGES) stage = 0, phase ^= 1;
            }
            sm90::wgmma_wait<0>();
            settle<C>(d);
            if (prev >= 0) release(prev);
            if constexpr (C::EPI_TMA) store_tile_tma<C>(d, ring.sC + cw * (C::C_TILE_BYTES / C::CONSUMERS), &tmC, row0, col0, 2 + cw);
            else store_tile<C>(d, out, M, N, row0, col0);
        }
        if constexpr (C::EPI_TMA)
            if (tid == 0) sm90::bulk_wait<0>();  // stores finished before the CTA (and its shared memory) goes
    }
    kwiki::clock_end();
    if constexpr (C::CLUSTER > 1) sm90::cluster_sync();  // no CTA leaves while its peer may still signal it
}
// /kwiki:rung ws_plain

// kwiki:rung ws_pingpong
// --- pingpong: warpgroup 0 produces, warpgroups 1 and 2 each own a whole tile. The CTA's tile sequence
// (first, first + step, ...) alternates between them: consumer c takes tiles j = c, c + 2, ... of it. The
// producer loads every tile's k-blocks in sequence order through the one ring, so consumer c finds tile
// j's k-block kb at ring position j * k_blocks + kb and skips the other consumer's positions; each stage is
// read by one consumer (empty counts 1 arrival). The mainloops take turns: consumer c waits on turn[c]
// before its mainloop and, once it has waited on its last k-block, arrives on turn[c ^ 1] (128 arrivals),
// then drains its wgmmas and stores its tile while the other consumer multiplies. The turns are also what
// makes the parity waits sound: when a consumer starts a tile, every earlier ring position has landed, so
// no full barrier is more than one phase behind the position it waits for.
template <class C>
__global__ void __launch_bounds__(C::THREADS, 1)
gemm_pingpong(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, const __grid_constant__ CUtensorMap tmC,
              typename C::Out* out, int M, int N, int K, int group) {
    extern __shared__ uint8_t smem_raw[];
    const Ring<C> ring(smem_raw);  // no EPI_TMA staging: the barriers follow the B tiles
    uint64_t* turn = ring.empty + C::STAGES;
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        ring.init(1);  // each stage is read by one consumer
        sm90::mbar_init(&turn[0], 128);
        sm90::mbar_init(&turn[1], 128);
        sm90::fence_barrier_init();
    }
    __syncthreads();

    const int tiles_m = (M + C::BM - 1) / C::BM, tiles_n = (N + C::BN - 1) / C::BN, k_blocks = (K + C::BK - 1) / C::BK;
    const int units = tiles_m * tiles_n, first = blockIdx.x, step = gridDim.x;

    if (wg == 0) {
        sm90::regs_release<40>();
        if (threadIdx.x == 0) produce<C>(tmA, tmB, ring, first, step, units, tiles_m, tiles_n, k_blocks, group, 0);
    } else {
        sm90::regs_claim<232>();
        const int cw = wg - 1, tid = threadIdx.x % 128;
        float d[C::MI][C::BN / 2];
        for (int j = cw, i = 0; first + j * step < units; j += 2, ++i) {
            int tm, tn;
            tile_of(first + j * step, tiles_m, tiles_n, group, tm, tn);
            if (cw == 1 || i > 0) sm90::mbar_wait(&turn[cw], uint32_t((i - 1 + cw) & 1));  // the other's previous mainloop is done
            const int pos = j * k_blocks;
            int stage = pos % C::STAGES;
            uint32_t phase = uint32_t(pos / C::STAGES) & 1;
            zero<C>(d);
            int prev = -1;
            for (int kb = 0; kb < k_blocks; ++kb) {
                sm90::mbar_wait(&ring.full[stage], phase);
                sm90::wgmma_fence();
                mma_kblock<C>(d, ring.sA + stage * C::A_ELEMS, ring.sB + stage * C::B_ELEMS);
                sm90::wgmma_commit();
                sm90::wgmma_wait<1>();  // the previous k-block's wgmmas are done: free its stage
                if (prev >= 0 && tid == 0) sm90::mbar_arrive(&ring.empty[prev]);
                prev = stage;
                if (++stage == C::STAGES) stage = 0, phase ^= 1;
            }
            sm90::mbar_arrive(&turn[cw ^ 1]);  // the other consumer's mainloop may start
            sm90::wgmma_wait<0>();
            settle<C>(d);
            if (prev >= 0 && tid == 0) sm90::mbar_arrive(&ring.empty[prev]);
            store_tile<C>(d, out, M, N, tm * C::BM, tn * C::BN);
        }
    }
}
// /kwiki:rung ws_pingpong

// The warp-specialized kernel a configuration runs.
template <class C>
constexpr auto ws_kernel() {
    if constexpr (C::PINGPONG) return gemm_pingpong<C>;
    else return gemm_ws<C>;
}

// ===================================================================================================
// Launchers
// ===================================================================================================

template <class C>
struct Launch {
    CUtensorMap tmA, tmB, tmC;
    typename C::Out* out;
    Problem p;
    dim3 grid;
    int group;
    const void* func;
};

template <class C>
Launch<C> prepare_serial(const typename C::Elem* A, const typename C::Elem* B, typename C::Out* out, Problem p) {
    auto f = gemm_serial<C>;
    int smem = C::A_ELEMS * int(sizeof(typename C::Elem)) + C::B_ELEMS * int(sizeof(typename C::Elem)) + 8 + 1024;
    KWIKI_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    Launch<C> l{sm90::tensor_map_2d(A, p.M, p.K, C::BM, C::BK), sm90::tensor_map_2d(B, p.N, p.K, C::BN, C::BK), CUtensorMap{}, out, p,
                dim3((p.N + C::BN - 1) / C::BN, (p.M + C::BM - 1) / C::BM), 0, reinterpret_cast<const void*>(f)};
    return l;
}

template <class C>
void run_serial(const Launch<C>& l, cudaStream_t s) {
    int smem = C::A_ELEMS * int(sizeof(typename C::Elem)) + C::B_ELEMS * int(sizeof(typename C::Elem)) + 8 + 1024;
    gemm_serial<C><<<l.grid, 128, smem, s>>>(l.tmA, l.tmB, l.out, l.p.M, l.p.N, l.p.K);
}

// persistent: one CTA (or cluster) per SM that the device can co-schedule, else one CTA per tile.
template <class C>
Launch<C> prepare_ws(const typename C::Elem* A, const typename C::Elem* B, typename C::Out* out, Problem p, bool persistent,
                     int group) {
    auto f = ws_kernel<C>();
    KWIKI_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM_BYTES));
    int tiles_m = (p.M + C::BM - 1) / C::BM, tiles_n = (p.N + C::BN - 1) / C::BN;
    int units = (tiles_m + C::CLUSTER - 1) / C::CLUSTER * tiles_n;
    int slots = units;
    if (persistent) {
        if (C::CLUSTER == 1) {
            slots = kwiki::sm_count();
        } else {
            cudaLaunchConfig_t cfg{};
            cudaLaunchAttribute attr{};
            attr.id = cudaLaunchAttributeClusterDimension;
            attr.val.clusterDim.x = C::CLUSTER, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
            cfg.gridDim = dim3(C::CLUSTER * kwiki::sm_count());
            cfg.blockDim = dim3(C::THREADS);
            cfg.dynamicSmemBytes = C::SMEM_BYTES;
            cfg.attrs = &attr, cfg.numAttrs = 1;
            KWIKI_CHECK(cudaOccupancyMaxActiveClusters(&slots, f, &cfg));
            KWIKI_REQUIRE(slots > 0, "no cluster of this kernel fits on the device");
        }
        slots = std::min(slots, units);
    }
    CUtensorMap tmC{};
    if constexpr (C::EPI_TMA) {
        KWIKI_REQUIRE(p.N % 8 == 0, "the TMA epilogue needs N a multiple of 8 (16-byte rows)");
        tmC = sm90::tensor_map_2d(out, p.M, p.N, 64, 64);
    }
    Launch<C> l{sm90::tensor_map_2d(A, p.M, p.K, C::BM, C::BK), sm90::tensor_map_2d(B, p.N, p.K, C::B_SLICE_ROWS, C::BK), tmC, out, p,
                dim3(slots * C::CLUSTER), group, reinterpret_cast<const void*>(f)};
    return l;
}

template <class C>
void run_ws(const Launch<C>& l, cudaStream_t s) {
    cudaLaunchConfig_t cfg{};
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = C::CLUSTER, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.gridDim = l.grid;
    cfg.blockDim = dim3(C::THREADS);
    cfg.dynamicSmemBytes = C::SMEM_BYTES;
    cfg.stream = s;
    cfg.attrs = &attr, cfg.numAttrs = C::CLUSTER > 1 ? 1 : 0;
    KWIKI_CHECK(cudaLaunchKernelEx(&cfg, ws_kernel<C>(), l.tmA, l.tmB, l.tmC, l.out, l.p.M, l.p.N, l.p.K, l.group));
}

// kwiki:rung cublas
// cuBLAS on the same buffers: bf16 in and out with fp32 compute, or fp32 in and out multiplied in tf32.
void run_cublas(kwiki::cublasHandle_t h, const void* A, const void* B, void* C, Problem p, bool tf32, cudaStream_t s) {
    kwiki::gemm_tn(h, A, B, C, p.M, p.N, p.K, tf32 ? kwiki::kGemmTf32 : kwiki::kGemmBf16, s);
}
// /kwiki:rung cublas

// A variant at one shape, ready to run: how to launch it, and what its record reports.
struct Prepared {
    std::function<void(cudaStream_t)> launch;
    const void* func = nullptr;  // the kernel, for its register count (null for cuBLAS)
    int grid = 0;
    int smem = 0;
};

// What one launch reads and writes on one input set, and what calls it: cuBLAS's handle, or cuBLASLt's candidates
// for the shape and the one to run (cublaslt_best).
struct Buffers {
    const void *A, *B;
    void* out;
    Problem p;
    int group;
    kwiki::cublasHandle_t handle;
    const kwiki::LtGemmTn* lt = nullptr;
    int algo = -1;
};

template <class C, bool PERSISTENT>
Prepared make_ws(const Buffers& b) {
    using T = typename C::Elem;
    auto l = prepare_ws<C>(static_cast<const T*>(b.A), static_cast<const T*>(b.B), static_cast<typename C::Out*>(b.out), b.p, PERSISTENT, b.group);
    return {[l](cudaStream_t s) { run_ws<C>(l, s); }, l.func, int(l.grid.x), C::SMEM_BYTES};
}

template <class C>
Prepared make_serial(const Buffers& b) {
    using T = typename C::Elem;
    auto l = prepare_serial<C>(static_cast<const T*>(b.A), static_cast<const T*>(b.B), static_cast<typename C::Out*>(b.out), b.p);
    return {[l](cudaStream_t s) { run_serial<C>(l, s); }, l.func, int(l.grid.x * l.grid.y), C::STAGE_BYTES + 8 + 1024};
}

template <bool TF32>
Prepared make_cublas(const Buffers& b) {
    return {[b](cudaStream_t s) { run_cublas(b.handle, b.A, b.B, b.out, b.p, TF32, s); }, nullptr, 0, 0};
}

// kwiki:rung cublaslt_best
// The same GEMM through cuBLASLt (bf16 in and out, fp32 compute, the layout of run_cublas) with candidate
// algorithm b.algo of the heuristic's list for the shape (kwiki::LtGemmTn).
Prepared make_cublaslt(const Buffers& b) {
    return {[b](cudaStream_t s) { b.lt->run(b.algo, b.A, b.B, b.out, s); }, nullptr, 0, 0};
}
// /kwiki:rung cublaslt_best

// The configurations of the rungs: what each changes from the one it builds on, in the comment.
// Config<elem, BM, BN, consumer warpgroups, stages, cluster, LAG, SPLIT_B, EPI_TMA, RELEASE_CLUSTER, PINGPONG>
using SerialBf16 = Config<bf16, 128, 128, 1, 1, 1>;                                 // rung 1: one stage (gemm_serial)
using PlainBf16 = Config<bf16, 128, 128, 1, 6, 1>;                                  // rung 2: 6 stages, 1 consumer
using WideBf16 = Config<bf16, 128, 256, 2, 4, 1, 1>;                                // rungs 3-7: BN 256, 2 consumers
using WideBf16Lag0 = Config<bf16, 128, 256, 2, 4, 1, 0>;                            // rung 8: LAG 0
// kwiki:rung ws_persistent_128x128
using CoopBf16 = Config<bf16, 128, 128, 2, 6, 1, 1>;                                // rung 9: rung 4 at pingpong's tile
// /kwiki:rung ws_persistent_128x128
using PingpongBf16 = Config<bf16, 128, 128, 2, 6, 1, 1, true, false, false, true>;  // rung 10: PINGPONG
using ClusterBf16 = Config<bf16, 128, 256, 2, 4, 2, 1>;                             // rung 11: cluster 2
using ClusterBf16Slow = Config<bf16, 128, 256, 2, 4, 2, 1, true, false, true>;      // rung 12: RELEASE_CLUSTER
using EpiBf16 = Config<bf16, 128, 256, 2, 3, 1, 0, true, true>;                     // rung 13: EPI_TMA, 3 stages
using ClusterEpiBf16 = Config<bf16, 128, 256, 2, 3, 2, 0, true, true>;              // rung 14: + cluster 2
using WideTf32 = Config<float, 128, 256, 2, 4, 1, 1>;                               // rung 15: rung 4 on fp32
using ClusterTf32 = Config<float, 128, 256, 2, 4, 2, 0>;                            // rung 16: cluster 2, LAG 0 on fp32

// A row of the table of variants: what its launch needs.
struct Variant : kwiki::VariantInfo {
    bool tf32;
    bool reference;  // cublas: the reference, so checked against the fp64 samples only
    const char* tile;
    int stages;
    Prepared (*make)(const Buffers&);
    int group = 0;  // tile order: bands of this many tile-rows; 0 = take --group; -1 = Hilbert curve
};

// A variant prepared on each input set of `in`, writing `out` (cublaslt_best: cuBLASLt's candidate `algo` of `lt`).
std::vector<Prepared> prepare_sets(const Variant& v, kwiki::InputSets<Operands>& in, void* out, Problem p, int group,
                                   kwiki::cublasHandle_t handle, const kwiki::LtGemmTn* lt, int algo) {
    std::vector<Prepared> pr;
    for (int s = 0; s < in.size(); ++s)
        pr.push_back(v.make(Buffers{in[s].A.get(), in[s].B.get(), out, p, group, handle, lt, algo}));
    return pr;
}

// The shapes the launchers take: K a multiple of 8 (TMA rows are 16-byte aligned), N even (paired stores).
bool launchable(const std::vector<int>& d) { return d[2] % 8 == 0 && d[1] % 2 == 0; }

// What a variant's record reports at p (its launch prepared on input set 0: the kernel, its grid and shared memory).
kwiki::Case gemm_case(const Variant& v, const Problem& p, const Prepared& pr) {
    const size_t out_size = v.tf32 ? 4 : 2;
    kwiki::Case c;
    c.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", v.tf32 ? "tf32" : "bf16"}};
    c.flops = 2.0 * p.M * p.N * double(p.K);
    c.flops_dtype = v.tf32 ? "tf32" : "bf16";
    c.bytes = double(size_t(p.M) * p.K + size_t(p.N) * p.K) * out_size + double(size_t(p.M) * p.N) * out_size;
    c.extra.emplace_back("tile", v.tile);
    c.extra.emplace_back("stages", v.stages);
    if (pr.func) {
        // registers and occupancy at the block size the kernel's __launch_bounds__ names (its launch's)
        kwiki::add_occupancy(c.extra, pr.func, kwiki::kernel_regs(pr.func).max_threads, size_t(pr.smem));
        c.extra.emplace_back("grid", pr.grid);
        c.extra.emplace_back("smem_bytes", pr.smem);
        if (v.group) c.extra.emplace_back("group", v.group);
    }
    return c;
}

// The cases of one shape and dtype, on its input sets: each with an output of its own and its launch prepared on
// every set, alive (with cuBLASLt's candidates) until the runner is done with them.
class ShapeCases {
  public:
    ShapeCases(kwiki::InputSets<Operands>& in, Problem p, bool tf32, int group, const kwiki::BlasHandles& lib,
               kwiki::Runner& selector)
        : in_(in), p_(p), tf32_(tf32), group_(group), lib_(lib), selector_(selector) {}

    // The ladder's case of v (cublaslt_best: after its selection pass).
    kwiki::Case ladder_case(const Variant& v) { return v.make == make_cublaslt ? lt_best_case(v) : bound_case(v, -1); }

  private:
    // v's case with cuBLASLt's candidate `algo` (cublaslt_best), bound to the input sets: the poison of its output;
    // the check of set 0 (every element against cuBLAS, the sampled elements against fp64; cublas itself, the
    // reference, against fp64 only); of any other set and of every re-checked timed sample, every element against
    // that set's cuBLAS output, on the GPU.
    kwiki::Case bound_case(const Variant& v, int algo) {
        const kwiki::DeviceBuffer<uint8_t>& buf = outs_.emplace_back(size_t(p_.M) * p_.N * (tf32_ ? 4 : 2));
        void* out = buf.get();
        const size_t bytes = buf.bytes();
        const int order = v.group ? v.group : group_;
        const std::vector<Prepared>& pr = preps_.emplace_back(prepare_sets(v, in_, out, p_, order, lib_.blas, lt_.get(), algo));
        kwiki::Case c = gemm_case(v, p_, pr[0]);
        kwiki::InputSets<Operands>& in = in_;
        const Problem p = p_;
        const bool tf32 = tf32_, reference = v.reference;
        c.launch = [&pr, &in](cudaStream_t s) { pr[size_t(in.index())].launch(s); };
        in.bind(c, [out, bytes](cudaStream_t s) { kwiki::poison(out, bytes, s); },
                [&in, out, p, tf32, reference](const Operands& s) {
                    return check_set(out, s, in.index() == 0, p, tf32, reference);
                });
        c.recheck = [&in, out, p, tf32] { return check_all(out, in.current(), p, tf32); };
        return c;
    }

    // kwiki:rung cublaslt_best
    // cublaslt_best: every algorithm cuBLASLt's heuristic offers for the shape (up to kLtCandidates, best guess first)
    // is a candidate case, checked like any variant and timed in the selection pass's own samples; the fastest is then
    // timed afresh as the ladder's case (choosing it in the samples that report it would bias it low: select_fastest).
    static constexpr int kLtCandidates = 8;
    kwiki::Case lt_best_case(const Variant& v) {
        lt_ = std::make_unique<kwiki::LtGemmTn>(lib_.lt, p_.M, p_.N, p_.K, kwiki::kGemmBf16, kLtCandidates);
        std::vector<kwiki::Case> candidates;
        for (int i = 0; i < lt_->algos(); ++i) {
            candidates.push_back(bound_case(v, i));
            candidates.back().variant = "select_cublaslt_" + std::to_string(i);
        }
        const kwiki::Selection chosen = kwiki::select_fastest(selector_, candidates);
        kwiki::Case c = bound_case(v, std::max(chosen.index, 0));
        if (chosen.index < 0)  // no candidate passed its check: the variant fails its own, saying why (nothing is timed)
            c.check = [] {
                kwiki::CheckResult r;
                r.detail = "no cuBLASLt candidate of the selection pass passed its check";
                return r;
            };
        c.extra.emplace_back("selected", "heuristic algorithm " + std::to_string(chosen.index));
        c.extra.emplace_back("selected_from", chosen.tried);
        if (chosen.median_us) c.extra.emplace_back("selection_median_us", *chosen.median_us);
        return c;
    }
    // /kwiki:rung cublaslt_best

    kwiki::InputSets<Operands>& in_;
    const Problem p_;
    const bool tf32_;
    const int group_;
    const kwiki::BlasHandles& lib_;
    kwiki::Runner& selector_;
    std::deque<kwiki::DeviceBuffer<uint8_t>> outs_;
    std::deque<std::vector<Prepared>> preps_;
    std::unique_ptr<kwiki::LtGemmTn> lt_;
};

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr Variant kVariants[] = {
    {{"cublaslt_best"},
     false, false, "library", 0, make_cublaslt},
    {{"cublas"},
     false, true, "library", 0, make_cublas<false>},
    {{"serial"},
     false, false, "128x128x64", 1, make_serial<SerialBf16>},
    {{"ws_plain"},
     false, false, "128x128x64", PlainBf16::STAGES, make_ws<PlainBf16, false>},
    {{"ws_2consumer"},
     false, false, "128x256x64", WideBf16::STAGES, make_ws<WideBf16, false>},
    {{"ws_persistent"},
     false, false, "128x256x64", WideBf16::STAGES, make_ws<WideBf16, true>},
    {{"ws_persistent_linear"},
     false, false, "128x256x64", WideBf16::STAGES, make_ws<WideBf16, true>, 1},
    {{"ws_persistent_group8"},
     false, false, "128x256x64", WideBf16::STAGES, make_ws<WideBf16, true>, 8},
    {{"ws_persistent_hilbert"},
     false, false, "128x256x64", WideBf16::STAGES, make_ws<WideBf16, true>, -1},
    {{"ws_persistent_lag0"},
     false, false, "128x256x64", WideBf16Lag0::STAGES, make_ws<WideBf16Lag0, true>},
    // kwiki:rung ws_persistent_128x128
    {{"ws_persistent_128x128"},
     false, false, "128x128x64", CoopBf16::STAGES, make_ws<CoopBf16, true>},
    // /kwiki:rung ws_persistent_128x128
    {{"ws_pingpong"},
     false, false, "2x128x128x64", PingpongBf16::STAGES, make_ws<PingpongBf16, true>},
    {{"ws_cluster"},
     false, false, "2x(128x256x64)", ClusterBf16::STAGES, make_ws<ClusterBf16, true>},
    {{"ws_cluster_release_cluster"},
     false, false, "2x(128x256x64)", ClusterBf16Slow::STAGES, make_ws<ClusterBf16Slow, true>},
    {{"ws_tma_epilogue"},
     false, false, "128x256x64", EpiBf16::STAGES, make_ws<EpiBf16, true>},
    {{"ws_cluster_tma_epilogue"},
     false, false, "2x(128x256x64)", ClusterEpiBf16::STAGES, make_ws<ClusterEpiBf16, true>},
    {{"cublas_tf32"},
     true, true, "library", 0, make_cublas<true>},
    {{"tf32_persistent"},
     true, false, "128x256x32", WideTf32::STAGES, make_ws<WideTf32, true>},
    {{"tf32_cluster"},
     true, false, "2x(128x256x32)", ClusterTf32::STAGES, make_ws<ClusterTf32, true>},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const auto shapes = m.args.get_shapes<Problem, 3>("shapes", "", "MxNxK,... K a multiple of 8, N even", launchable);
    const int group = int(m.args.get_int("group", 16)), samples = int(m.args.get_int("check-samples", 4096));
    kwiki::Runner& runner = m.start("gemm");
    const kwiki::BlasHandles lib(true, m.args.want("cublaslt_best"));  // cuBLAS: the reference; cuBLASLt: the baseline
    const auto selector = kwiki::selection_runner(m.args);  // cublaslt_best's selection pass: samples of its own, no records
    for (const Problem& p : shapes)
        for (bool tf32 : {false, true}) {  // one dtype at a time: its input sets, then its variants, interleaved
            const auto of_dtype = [tf32](const Variant& v) { return v.tf32 == tf32; };
            const auto wanted = [&](const Variant& v) { return of_dtype(v) && m.args.want(v.name); };
            if (std::none_of(std::begin(kVariants), std::end(kVariants), wanted)) continue;
            int filled = 0;  // set 0 from the shape's seed (as protocol 1 did)
            const uint64_t seed = kwiki::hash64(m.seed, 1000 + p.M + 7ull * p.N + 13ull * p.K + tf32);
            kwiki::InputSets<Operands> in(m.sets, seed, [&](Operands& s, uint64_t si) {
                s.fill(p, tf32, si, samples, lib.blas, !filled++);
            });
            ShapeCases cases(in, p, tf32, group, lib, *selector);  // outputs and launches, alive until the runner is done
            kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) { return cases.ladder_case(v); }, of_dtype);
        }
    return kwiki::exit_code();
}
