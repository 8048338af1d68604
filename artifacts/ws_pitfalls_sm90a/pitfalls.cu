// pitfalls.cu: the ways a warp-specialized TMA + wgmma GEMM goes wrong, each as a variant that runs the
// same producer/consumer kernel with one mistake, plus the stage-count sweep of the correct kernel.
//
// Kernel: C[M,N] = A[M,K] * B[N,K]^T in bf16 with fp32 accumulation (A, B K-major, C row-major), a
// 128x128 tile per CTA, warpgroup 0 produces (one thread issues TMA), warpgroup 1 consumes (wgmma),
// full/empty mbarrier ring of S stages. Every mbarrier wait is bounded (clock64, --max-cycles): a wait
// that would hang counts an error instead, the thread stops waiting, the kernel ends and the check fails
// with that count.
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o pitfalls pitfalls.cu
// Run:   ./pitfalls --sweep=4096x4096x4096 --small=1024x1024x4096 --odd=1000x1000x1000 [--variants a,b]
//        [--max-cycles=200000000] [--seed=N] [--repeats=N]   (the shapes: the manifest's)
//
// Variants:
//   stages_2 .. stages_6  the correct kernel with 2..6 stages (32 KiB each), timed at 4096^3
//   stages_4_odd          the correct 4-stage kernel checked (not timed) at 1000^3: edge tiles in M, N and K
//   cublas                cuBLAS at 4096^3, for scale
//   expect_tx_too_large   the producer announces one stage's bytes + 1 KiB: full[s] never completes -> the
//                         consumer's wait times out (without the bound it would hang)
//   expect_tx_too_small   the producer announces only A's bytes (half the stage): the phase completes as soon as
//                         16 KiB have landed, B's tile may still be in flight (the consumer multiplies a half-written
//                         stage); the late bytes count against the barrier's next phase, which completes at the
//                         producer's arrive before any of its data lands, and from then on each trip leaves the
//                         transaction count 16 KiB further below zero: it never returns to zero, so the waits time
//                         out (without the bound it would hang) and C is wrong
//   constant_phase        the consumer always waits for parity 0 (2 stages): from the second trip round the
//                         ring it no longer waits and multiplies stale or half-written tiles -> wrong C
//   constant_phase_s6     the same mistake with 6 stages: a deeper ring narrows the race
//   tma_store_fenced      epilogue through shared memory and a TMA store, fence.proxy.async before it
//   tma_store_no_fence    the same without the proxy fence (the TMA engine may read shared memory before
//                         the threads' ordinary stores are visible to it), launched --repeats times
//   tma_store_fenced_wide the widest window we can build: the warpgroup stages the tile, then the issuing thread
//                         itself copies all 32 KiB into the store's source (2048 16-byte st.shared) and issues the
//                         TMA store right after them, with fence.proxy.async between
//   tma_store_no_fence_wide the same without the fence: thousands of the issuing thread's own stores may still be
//                         in flight when TMA reads the tile
//   cluster_exit_synced   clusters of 2: CTA 1 writes 4 KiB into CTA 0's shared memory (distributed shared memory,
//                         st.shared::cluster) after a delay; a cluster barrier before CTA 0 reads and before either
//                         CTA leaves; CTA 0 stores the sum
//   cluster_exit_early    the same without the barrier: CTA 0 reads at once and leaves while its peer still writes
//                         its shared memory (undefined: a wrong sum, or the launch fails)
//
// Only cublas and stages_* are timed (kwiki::Runner: every timed sample poisoned, flushed, some re-checked on
// the GPU against cuBLAS); the others are checked only, and the pitfalls fail their check (exit 1), never hang.
#include <deque>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"
#include "kwiki_gemm.cuh"
#include "sm90.cuh"

using bf16 = __nv_bfloat16;

// ===================================================================================================
// Reference: cuBLAS on the same inputs (every element)
// ===================================================================================================

// kwiki::gemm_tn (kwiki_cublas.cuh) with kwiki::kGemmBf16: the same C = A B^T, bf16 in and out, fp32
// accumulation, computed by cuBLAS from the same inputs; every element of a variant's output is compared.

struct Problem {
    int M, N, K;
};

// One problem's random inputs (one set, shared by the variants of that shape) and cuBLAS's output on them.
struct Inputs {
    Problem p;
    bf16 *A = nullptr, *B = nullptr, *Cref = nullptr;

    Inputs(Problem shape, uint64_t seed, kwiki::cublasHandle_t handle) : p(shape) {
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K, nC = size_t(p.M) * p.N;
        KWIKI_CHECK(cudaMalloc(&A, nA * 2));
        KWIKI_CHECK(cudaMalloc(&B, nB * 2));
        KWIKI_CHECK(cudaMalloc(&Cref, nC * 2));
        const uint64_t sa = kwiki::hash64(seed, p.M + 7ull * p.K);
        kwiki::fill_random(A, nA, sa);
        kwiki::fill_random(B, nB, kwiki::hash64(sa, 1));
        kwiki::gemm_tn(handle, A, B, Cref, p.M, p.N, p.K, kwiki::kGemmBf16, 0);
        KWIKI_CHECK(cudaDeviceSynchronize());
    }
    ~Inputs() { cudaFree(A), cudaFree(B), cudaFree(Cref); }
    Inputs(const Inputs&) = delete;
    Inputs& operator=(const Inputs&) = delete;

    // Every element of `out` against cuBLAS's, on the GPU.
    kwiki::CheckResult compare(const bf16* out) const {
        return kwiki::compare_device(out, Cref, size_t(p.M) * p.N, kwiki::gemm_tolerance(kwiki::GemmPrecision::bf16, p.K),
                                     "cuBLAS on the same inputs (every element, on the GPU)");
    }
};

// ===================================================================================================
// Kernel
// ===================================================================================================

// (the manifest's kernel globs name these by number: append, never reorder)
enum class Bug { None, ExpectTxTooLarge, ConstantPhase, TmaStoreFenced, TmaStoreNoFence, ExpectTxTooSmall, TmaStoreFencedWide, TmaStoreNoFenceWide };

constexpr int BM = 128, BN = 128, BK = 64, WK = 16;
constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK, STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
constexpr int C_TILE_BYTES = BM * BN * 2;  // epilogue tile for the TMA-store variants

__host__ __device__ constexpr bool wide_store(Bug b) { return b == Bug::TmaStoreFencedWide || b == Bug::TmaStoreNoFenceWide; }
__host__ __device__ constexpr bool stores_through_tma(Bug b) {
    return b == Bug::TmaStoreFenced || b == Bug::TmaStoreNoFence || wide_store(b);
}
__host__ __device__ constexpr bool fenced_store(Bug b) { return b == Bug::TmaStoreFenced || b == Bug::TmaStoreFencedWide; }
// the C tile(s) of the epilogue: the store's source, and for the wide variants a staging tile before it
__host__ __device__ constexpr int c_tiles_bytes(Bug b) { return stores_through_tma(b) ? C_TILE_BYTES * (wide_store(b) ? 2 : 1) : 0; }
constexpr int smem_bytes(int stages, Bug b) { return stages * STAGE_BYTES + c_tiles_bytes(b) + 2 * stages * 8 + 1024; }

// A bounded wait that remembers a timeout: after the first one this thread waits no more (it runs on with
// whatever shared memory holds), so a broken protocol costs one bound, not one per iteration. The code
// keeps one straight path for the consumer warpgroup: an early exit around wgmma makes ptxas serialize
// every wgmma (C7518), which would slow the correct variants too.
struct Waiter {
    long long max_cycles;
    int* errors;
    bool gave_up = false;
    __device__ __forceinline__ void wait(uint64_t* bar, uint32_t parity) {
        if (gave_up) return;
        if (!sm90::mbar_wait_bounded(bar, parity, max_cycles)) {
            gave_up = true;
            atomicAdd(errors, 1);
        }
    }
};

template <int STAGES, Bug BUG>
__global__ void __launch_bounds__(256, 1)
gemm_pitfall(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, const __grid_constant__ CUtensorMap tmC,
             bf16* out, int M, int N, int K, long long max_cycles, int* errors) {
    extern __shared__ uint8_t smem_raw[];
    bf16* sA = reinterpret_cast<bf16*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    bf16* sB = sA + STAGES * A_ELEMS;
    bf16* sC = sB + STAGES * B_ELEMS;  // only the TMA-store variants use it
    uint64_t* full = reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(sA) + STAGES * STAGE_BYTES + c_tiles_bytes(BUG));
    uint64_t* empty = full + STAGES;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) sm90::mbar_init(&full[s], 1), sm90::mbar_init(&empty[s], 1);
        sm90::fence_barrier_init();
    }
    __syncthreads();
    const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN, k_blocks = (K + BK - 1) / BK;
    Waiter waiter{max_cycles, errors};

    if (threadIdx.x < 128) {  // producer warpgroup: thread 0 issues
        if (threadIdx.x == 0) {
            const uint32_t tx = BUG == Bug::ExpectTxTooLarge ? STAGE_BYTES + 1024 : BUG == Bug::ExpectTxTooSmall ? A_ELEMS * 2 : STAGE_BYTES;
            int stage = 0;
            uint32_t phase = 0;
            for (int kb = 0; kb < k_blocks; ++kb) {
                waiter.wait(&empty[stage], phase ^ 1);
                if (waiter.gave_up) break;  // issue nothing more into a ring whose protocol is broken
                sm90::mbar_arrive_expect_tx(&full[stage], tx);
                sm90::tma_load_2d(sA + stage * A_ELEMS, &tmA, &full[stage], kb * BK, row0);
                sm90::tma_load_2d(sB + stage * B_ELEMS, &tmB, &full[stage], kb * BK, col0);
                if (++stage == STAGES) stage = 0, phase ^= 1;
            }
            // drain: the CTA must not exit while loads it issued are still landing in its shared memory
            // (after a timeout, the bound itself has given them far longer than they need)
            for (int kb = max(k_blocks - STAGES, 0); kb < k_blocks; ++kb) waiter.wait(&full[kb % STAGES], (kb / STAGES) & 1);
        }
    } else {  // consumer warpgroup
        float d[2][BN / 2];
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) d[mi][i] = 0.f, sm90::fence_operand(d[mi][i]);
        int stage = 0, prev = -1;
        uint32_t phase = 0;
        const bool signals = threadIdx.x == 128;
        for (int kb = 0; kb < k_blocks; ++kb) {
            waiter.wait(&full[stage], BUG == Bug::ConstantPhase ? 0u : phase);
            sm90::wgmma_fence();
#pragma unroll
            for (int ks = 0; ks < BK / WK; ++ks)
#pragma unroll
                for (int mi = 0; mi < 2; ++mi)
                    sm90::WgmmaOp<bf16, BN>::mma(d[mi], sm90::desc_k_major_sw128(sA + stage * A_ELEMS + mi * 64 * BK + ks * WK),
                                                 sm90::desc_k_major_sw128(sB + stage * B_ELEMS + ks * WK), 1);
            sm90::wgmma_commit();
            sm90::wgmma_wait<1>();
            // a consumer that gave up signals nothing more: extra arrivals on a barrier whose phase cannot
            // complete would overflow its count (the hardware faults: "unspecified launch failure")
            if (prev >= 0 && signals && !waiter.gave_up) sm90::mbar_arrive(&empty[prev]);
            prev = stage;
            if (++stage == STAGES) stage = 0, phase ^= 1;
        }
        sm90::wgmma_wait<0>();
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int i = 0; i < BN / 2; ++i) sm90::fence_operand(d[mi][i]);
        if (prev >= 0 && signals && !waiter.gave_up) sm90::mbar_arrive(&empty[prev]);

        const int t = threadIdx.x - 128, warp = t / 32, lane = t % 32;
        if constexpr (stores_through_tma(BUG)) {
            // registers -> shared tile (row-major 128x128) -> one TMA store; TMA clips the edges. The wide
            // variants write a staging tile, and the issuing thread copies it into the store's source itself.
            bf16* sW = wide_store(BUG) ? sC + BM * BN : sC;
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int j = 0; j < BN / 8; ++j) {
                        int r = mi * 64 + warp * 16 + lane / 4 + 8 * h, c = 8 * j + 2 * (lane % 4);
                        *reinterpret_cast<__nv_bfloat162*>(sW + r * BN + c) =
                            __floats2bfloat162_rn(d[mi][4 * j + 2 * h], d[mi][4 * j + 2 * h + 1]);
                    }
            if constexpr (BUG == Bug::TmaStoreFenced) sm90::fence_proxy_async();
            asm volatile("bar.sync 1, 128;" ::: "memory");  // the consumer warpgroup only
            if (t == 0) {
                if constexpr (wide_store(BUG)) {  // 2048 16-byte stores by the issuing thread, right before the issue
                    const uint4* src = reinterpret_cast<const uint4*>(sW);
                    uint4* dst = reinterpret_cast<uint4*>(sC);
#pragma unroll 8
                    for (int q = 0; q < C_TILE_BYTES / 16; ++q) dst[q] = src[q];
                    if constexpr (fenced_store(BUG)) sm90::fence_proxy_async();
                }
                sm90::tma_store_2d(&tmC, sC, col0, row0);
                sm90::tma_store_commit_and_wait();
            }
        } else {
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    int r = row0 + mi * 64 + warp * 16 + lane / 4 + 8 * h;
                    if (r >= M) continue;
#pragma unroll
                    for (int j = 0; j < BN / 8; ++j) {
                        int c = col0 + 8 * j + 2 * (lane % 4);
                        if (c + 1 < N)
                            *reinterpret_cast<__nv_bfloat162*>(out + size_t(r) * N + c) =
                                __floats2bfloat162_rn(d[mi][4 * j + 2 * h], d[mi][4 * j + 2 * h + 1]);
                        else if (c < N)
                            out[size_t(r) * N + c] = __float2bfloat16_rn(d[mi][4 * j + 2 * h]);
                    }
                }
        }
    }
}

// ===================================================================================================
// Kernels: the cluster-exit pitfall, a CTA leaves while its peer still writes its shared memory
// ===================================================================================================

constexpr int EXIT_WORDS = 1024;  // 4 KiB that CTA 1 of each cluster writes into CTA 0's shared memory

__host__ __device__ inline uint32_t exit_word(uint32_t cluster, uint32_t i) { return (cluster * EXIT_WORDS + i) * 2654435761u + 1; }

// Clusters of 2, 128 threads. CTA 1 waits ~20 us, then stores EXIT_WORDS words into CTA 0's buffer through
// distributed shared memory; CTA 0 sums its buffer into sums[cluster]. SYNC: a cluster barrier (release/acquire)
// after the stores and before CTA 0 reads, so CTA 0 reads them all and no CTA leaves while its peer may still
// touch its shared memory. Without it CTA 0 reads at once and leaves: the stores target a CTA that is gone.
template <bool SYNC>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128) cluster_exit(uint32_t* sums) {
    __shared__ uint32_t buf[EXIT_WORDS];
    __shared__ uint32_t warp_sums[4];
    for (int i = threadIdx.x; i < EXIT_WORDS; i += blockDim.x) buf[i] = 0;
    sm90::cluster_sync();  // both CTAs run, both buffers zeroed
    const uint32_t rank = sm90::cluster_ctarank(), cluster = blockIdx.x / 2;
    if (rank == 1) {
        for (int i = 0; i < 20; ++i) __nanosleep(1000);
        for (int i = threadIdx.x; i < EXIT_WORDS; i += blockDim.x) {
            const uint32_t local = sm90::smem_u32(&buf[i]), v = exit_word(cluster, uint32_t(i));
            asm volatile("{ .reg .b32 r; mapa.shared::cluster.u32 r, %0, 0; st.shared::cluster.u32 [r], %1; }" ::"r"(local), "r"(v) : "memory");
        }
    }
    if constexpr (SYNC) sm90::cluster_sync();
    if (rank == 0) {
        uint32_t v = 0;
        for (int i = threadIdx.x; i < EXIT_WORDS; i += blockDim.x) v += buf[i];
        for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
        if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
        __syncthreads();
        if (threadIdx.x == 0) sums[cluster] = warp_sums[0] + warp_sums[1] + warp_sums[2] + warp_sums[3];
    }
}

constexpr int EXIT_CLUSTERS = 64;

// What every cluster's CTA 0 must store.
std::vector<uint32_t> cluster_exit_expected() {
    std::vector<uint32_t> want(EXIT_CLUSTERS, 0);
    for (uint32_t c = 0; c < EXIT_CLUSTERS; ++c)
        for (uint32_t i = 0; i < EXIT_WORDS; ++i) want[c] += exit_word(c, i);
    return want;
}

// The cluster-exit variants' check: the sums every cluster's CTA 0 stored (the first words of `out`).
kwiki::CheckResult check_cluster_sums(const void* out) {
    static const std::vector<uint32_t> want = cluster_exit_expected();
    std::vector<uint32_t> got(EXIT_CLUSTERS);
    KWIKI_CHECK(cudaMemcpy(got.data(), out, got.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    return kwiki::compare_bytes(got.data(), want.data(), got.size() * sizeof(uint32_t),
                                "the host's sum of the words each cluster's CTA 1 writes into CTA 0");
}

// ===================================================================================================
// Launchers
// ===================================================================================================

using Launcher = std::function<void(cudaStream_t)>;

template <int STAGES, Bug BUG>
Launcher make_launch(const bf16* A, const bf16* B, bf16* C, Problem p, long long max_cycles, int* errors, const void** func, int* smem_out) {
    auto f = gemm_pitfall<STAGES, BUG>;
    const int smem = smem_bytes(STAGES, BUG);
    KWIKI_CHECK(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CUtensorMap a = sm90::tensor_map_2d(A, p.M, p.K, BM, BK), b = sm90::tensor_map_2d(B, p.N, p.K, BN, BK);
    CUtensorMap c = sm90::tensor_map_2d(C, p.M, p.N, BM, BN, CU_TENSOR_MAP_SWIZZLE_NONE);
    dim3 grid((p.N + BN - 1) / BN, (p.M + BM - 1) / BM);
    *func = reinterpret_cast<const void*>(f);
    *smem_out = smem;
    return [=](cudaStream_t s) { f<<<grid, 256, smem, s>>>(a, b, c, C, p.M, p.N, p.K, max_cycles, errors); };
}

// The cluster-exit kernel, in the make_launch signature: C's first EXIT_CLUSTERS words take the sums.
template <bool SYNC>
Launcher make_cluster_exit(const bf16*, const bf16*, bf16* C, Problem, long long, int*, const void** func, int* smem_out) {
    *func = reinterpret_cast<const void*>(cluster_exit<SYNC>);
    *smem_out = 0;
    uint32_t* sums = reinterpret_cast<uint32_t*>(C);
    return [sums](cudaStream_t s) { cluster_exit<SYNC><<<2 * EXIT_CLUSTERS, 128, 0, s>>>(sums); };
}

// The shapes a variant runs at (the manifest's --sweep, --small and --odd). Odd: M and N no multiple of the 128x128
// tile, K no multiple of the 64-deep k-block (TMA fills the edges with zeros, the epilogue guards its stores): the
// correct kernel must be right there too.
enum class Size { Sweep, Small, Odd };

// A row of the table of variants: what its launch needs.
struct Variant : kwiki::VariantInfo {
    Size size;
    bool timed;     // part of the timed stage sweep
    int repeats;    // checked launches (the race variants run several)
    int stages;
    Launcher (*make)(const bf16*, const bf16*, bf16*, Problem, long long, int*, const void**, int*);  // null: cuBLAS
    bool cluster_sums = false;  // checked against cluster_exit_expected(), not cuBLAS
};

// One variant's output and what its closures share, alive until the runner is done with its case.
struct Row {
    bf16* out = nullptr;
    size_t bytes = 0;
    const void* func = nullptr;
    int smem = 0;
    int timeouts = 0;
    int* errors = nullptr;  // the wait bound's timeouts of the last launch (shared by every case)
    long long max_cycles = 0;

    Row(Problem p, int* errs, long long cycles) : bytes(size_t(p.M) * p.N * 2), errors(errs), max_cycles(cycles) {
        KWIKI_CHECK(cudaMalloc(&out, bytes));
    }
    ~Row() { cudaFree(out); }
    Row(const Row&) = delete;
    Row& operator=(const Row&) = delete;

    // `c` (the output's check), failed when the last launch's waits timed out; the timeouts counted for the record.
    kwiki::CheckResult judge(kwiki::CheckResult c) {
        int e = 0;
        KWIKI_CHECK(cudaMemcpy(&e, errors, sizeof(int), cudaMemcpyDeviceToHost));
        timeouts += e;
        if (e > 0) {
            c.passed = false;
            c.detail = std::to_string(e) + " mbarrier waits timed out after " + std::to_string(max_cycles) +
                       " cycles (an unbounded wait would hang); " + c.detail;
        }
        return c;
    }
};

// A variant's case on `in`: its launch into row.out (cuBLAS's when it has no kernel) and what its record reports.
kwiki::Case pitfall_case(const Variant& v, const Inputs& in, Row& row, kwiki::cublasHandle_t handle, int repeats) {
    const Problem p = in.p;
    kwiki::Case c;
    if (v.make) {
        c.launch = v.make(in.A, in.B, row.out, p, row.max_cycles, row.errors, &row.func, &row.smem);
    } else {
        bf16 *A = in.A, *B = in.B, *out = row.out;
        c.launch = [=](cudaStream_t s) { kwiki::gemm_tn(handle, A, B, out, p.M, p.N, p.K, kwiki::kGemmBf16, s); };
    }
    c.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", "bf16"}};
    c.flops = 2.0 * p.M * p.N * double(p.K);
    c.flops_dtype = "bf16";
    c.bytes = 2.0 * (double(p.M) * p.K + double(p.N) * p.K + double(p.M) * p.N);
    c.timed = v.timed;
    c.check_runs = repeats > 0 ? repeats : v.repeats;  // every checked launch must pass (races get several chances)
    c.finish = [&row, &v](kwiki::Record& r) {
        r.extra.emplace_back("stages", v.stages);
        r.extra.emplace_back("wait_timeouts", row.timeouts);
        if (row.func) {
            // registers and occupancy at the block size the kernel's __launch_bounds__ names (its launch's)
            kwiki::add_occupancy(r.extra, row.func, kwiki::kernel_regs(row.func).max_threads, size_t(row.smem));
            r.extra.emplace_back("smem_bytes", row.smem);
        }
    };
    return c;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr Variant kVariants[] = {
    {{"cublas"}, Size::Sweep, true, 1, 0, nullptr},
    {{"stages_2"}, Size::Sweep, true, 1, 2, make_launch<2, Bug::None>},
    {{"stages_3"}, Size::Sweep, true, 1, 3, make_launch<3, Bug::None>},
    {{"stages_4"}, Size::Sweep, true, 1, 4, make_launch<4, Bug::None>},
    {{"stages_5"}, Size::Sweep, true, 1, 5, make_launch<5, Bug::None>},
    {{"stages_6"}, Size::Sweep, true, 1, 6, make_launch<6, Bug::None>},
    {{"stages_4_odd"}, Size::Odd, false, 1, 4, make_launch<4, Bug::None>},
    {{"expect_tx_too_large"}, Size::Small, false, 1, 4, make_launch<4, Bug::ExpectTxTooLarge>},
    {{"expect_tx_too_small"}, Size::Small, false, 1, 4, make_launch<4, Bug::ExpectTxTooSmall>},
    {{"constant_phase"}, Size::Small, false, 1, 2, make_launch<2, Bug::ConstantPhase>},
    {{"constant_phase_s6"}, Size::Small, false, 1, 6, make_launch<6, Bug::ConstantPhase>},
    {{"tma_store_fenced"}, Size::Sweep, false, 20, 4, make_launch<4, Bug::TmaStoreFenced>},
    {{"tma_store_no_fence"}, Size::Sweep, false, 20, 4, make_launch<4, Bug::TmaStoreNoFence>},
    {{"tma_store_fenced_wide"}, Size::Sweep, false, 20, 4, make_launch<4, Bug::TmaStoreFencedWide>},
    {{"tma_store_no_fence_wide"}, Size::Sweep, false, 20, 4, make_launch<4, Bug::TmaStoreNoFenceWide>},
    {{"cluster_exit_synced"}, Size::Small, false, 20, 0, make_cluster_exit<true>, true},
    {{"cluster_exit_early"}, Size::Small, false, 20, 0, make_cluster_exit<false>, true},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);
    const long long max_cycles = m.args.get_int("max-cycles", 200000000);
    const int repeats = int(m.args.get_int("repeats", -1));
    const auto one = [&m](const char* option, const char* what, bool whole) {  // the manifest's shapes, one each
        return m.args.get_shapes<Problem, 3>(option, "", what, [whole](const std::vector<int>& d) {
            return whole ? d[0] % 128 == 0 && d[1] % 128 == 0 && d[2] % 64 == 0 : d[2] % 8 == 0; }).at(0);
    };
    const Problem shapes[] = {one("sweep", "one MxNxK, M and N multiples of 128, K of 64", true),
                              one("small", "one MxNxK, K a multiple of 8", false), one("odd", "one MxNxK, K a multiple of 8", false)};
    kwiki::Runner& runner = m.start("pitfalls");
    const kwiki::BlasHandles lib(true, false);  // cuBLAS: the reference and the baseline
    const kwiki::cublasHandle_t handle = lib.blas;
    kwiki::DeviceBuffer<int> errors(1);
    std::deque<Inputs> inputs;  // one set of random inputs per shape, shared by the variants of that shape
    std::deque<Row> rows;
    kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
        const Problem p = shapes[int(v.size)];
        auto same = std::find_if(inputs.begin(), inputs.end(), [p](const Inputs& in) { return in.p.M == p.M && in.p.N == p.N && in.p.K == p.K; });
        const Inputs& in = same != inputs.end() ? *same : inputs.emplace_back(p, m.seed, handle);
        Row& row = rows.emplace_back(p, errors.get(), max_cycles);
        kwiki::Case c = pitfall_case(v, in, row, handle, repeats);
        c.poison = [&row](cudaStream_t s) {
            kwiki::poison(row.out, row.bytes, s);
            KWIKI_CHECK(cudaMemsetAsync(row.errors, 0, sizeof(int), s));
        };
        // the wait bound's timeouts, then the output (every element against cuBLAS on the GPU; the cluster sums alone)
        c.check = [&row, &in, &v] { return v.cluster_sums ? check_cluster_sums(row.out) : row.judge(in.compare(row.out)); };
        return c;
    });
    return kwiki::exit_code();
}
