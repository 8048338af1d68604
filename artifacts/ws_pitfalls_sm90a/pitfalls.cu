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
// Run:   ./pitfalls [--variants a,b] [--max-cycles 200000000] [--seed N]
//
// Variants:
//   stages_2 .. stages_6  the correct kernel with 2..6 stages (32 KiB each), timed at 4096^3
//   cublas                cuBLAS at 4096^3, for scale
//   expect_tx_too_large   the producer announces one stage's bytes + 1 KiB: full[s] never completes -> the
//                         consumer's wait times out (without the bound it would hang)
//   constant_phase        the consumer always waits for parity 0 (2 stages): from the second trip round the
//                         ring it no longer waits and multiplies stale or half-written tiles -> wrong C
//   constant_phase_s6     the same mistake with 6 stages: a deeper ring narrows the race
//   tma_store_fenced      epilogue through shared memory and a TMA store, fence.proxy.async before it
//   tma_store_no_fence    the same without the proxy fence (the TMA engine may read shared memory before
//                         the threads' ordinary stores are visible to it), launched --repeats times
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

// ===================================================================================================
// Kernel
// ===================================================================================================

enum class Bug { None, ExpectTxTooLarge, ConstantPhase, TmaStoreFenced, TmaStoreNoFence };

constexpr int BM = 128, BN = 128, BK = 64, WK = 16;
constexpr int A_ELEMS = BM * BK, B_ELEMS = BN * BK, STAGE_BYTES = (A_ELEMS + B_ELEMS) * 2;
constexpr int C_TILE_BYTES = BM * BN * 2;  // epilogue tile for the TMA-store variants

__host__ __device__ constexpr bool stores_through_tma(Bug b) { return b == Bug::TmaStoreFenced || b == Bug::TmaStoreNoFence; }
constexpr int smem_bytes(int stages, Bug b) { return stages * STAGE_BYTES + (stores_through_tma(b) ? C_TILE_BYTES : 0) + 2 * stages * 8 + 1024; }

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
    uint64_t* full = reinterpret_cast<uint64_t*>(reinterpret_cast<uint8_t*>(sA) + STAGES * STAGE_BYTES +
                                                 (stores_through_tma(BUG) ? C_TILE_BYTES : 0));
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
            const uint32_t tx = BUG == Bug::ExpectTxTooLarge ? STAGE_BYTES + 1024 : STAGE_BYTES;
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
            // registers -> shared tile (row-major 128x128) -> one TMA store; TMA clips the edges
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h)
#pragma unroll
                    for (int j = 0; j < BN / 8; ++j) {
                        int r = mi * 64 + warp * 16 + lane / 4 + 8 * h, c = 8 * j + 2 * (lane % 4);
                        *reinterpret_cast<__nv_bfloat162*>(sC + r * BN + c) =
                            __floats2bfloat162_rn(d[mi][4 * j + 2 * h], d[mi][4 * j + 2 * h + 1]);
                    }
            if constexpr (BUG == Bug::TmaStoreFenced) sm90::fence_proxy_async();
            asm volatile("bar.sync 1, 128;" ::: "memory");  // the consumer warpgroup only
            if (t == 0) {
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
// Launchers
// ===================================================================================================

struct Problem {
    int M, N, K;
};

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

// ===================================================================================================
// Variants and shapes
// ===================================================================================================

// The table of variants (artifact.yaml lists the same names).
struct Variant : kwiki::VariantInfo {
    Problem shape;
    bool timed;     // part of the timed stage sweep
    int repeats;    // checked launches (the race variants run several)
    int stages;
    Launcher (*make)(const bf16*, const bf16*, bf16*, Problem, long long, int*, const void**, int*);
};

constexpr Problem kSweep{4096, 4096, 4096}, kSmall{1024, 1024, 4096};

constexpr Variant kVariants[] = {
    {{"cublas"}, kSweep, true, 1, 0, nullptr},
    {{"stages_2"}, kSweep, true, 1, 2, make_launch<2, Bug::None>},
    {{"stages_3"}, kSweep, true, 1, 3, make_launch<3, Bug::None>},
    {{"stages_4"}, kSweep, true, 1, 4, make_launch<4, Bug::None>},
    {{"stages_5"}, kSweep, true, 1, 5, make_launch<5, Bug::None>},
    {{"stages_6"}, kSweep, true, 1, 6, make_launch<6, Bug::None>},
    {{"expect_tx_too_large"}, kSmall, false, 1, 4, make_launch<4, Bug::ExpectTxTooLarge>},
    {{"constant_phase"}, kSmall, false, 1, 2, make_launch<2, Bug::ConstantPhase>},
    {{"constant_phase_s6"}, kSmall, false, 1, 6, make_launch<6, Bug::ConstantPhase>},
    {{"tma_store_fenced"}, kSweep, false, 20, 4, make_launch<4, Bug::TmaStoreFenced>},
    {{"tma_store_no_fence"}, kSweep, false, 20, 4, make_launch<4, Bug::TmaStoreNoFence>},
};

// ===================================================================================================
// main
// ===================================================================================================

struct Inputs {
    Problem p;
    bf16 *A, *B, *Cref;  // Cref: cuBLAS on A and B, the reference every element is compared with (on the GPU)
};

int main(int argc, char** argv) {
    kwiki::Args args(argc, argv, kVariants);
    const long long max_cycles = args.get_int("max-cycles", 200000000);
    const int repeats = int(args.get_int("repeats", -1));
    const uint64_t seed = args.seed();
    std::fprintf(stderr, "pitfalls: seed %llu, wait bound %lld cycles\n", (unsigned long long)seed, max_cycles);

    kwiki::cublasHandle_t handle;
    KWIKI_CHECK_STATUS(kwiki::cublas().Create(&handle));
    int* errors;
    KWIKI_CHECK(cudaMalloc(&errors, sizeof(int)));

    std::deque<Inputs> inputs;  // one set of random inputs per shape, shared by the variants of that shape
    auto inputs_for = [&](Problem p) -> Inputs& {
        for (auto& in : inputs)
            if (in.p.M == p.M && in.p.N == p.N && in.p.K == p.K) return in;
        Inputs in{p, nullptr, nullptr, nullptr};
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K, nC = size_t(p.M) * p.N;
        KWIKI_CHECK(cudaMalloc(&in.A, nA * 2));
        KWIKI_CHECK(cudaMalloc(&in.B, nB * 2));
        KWIKI_CHECK(cudaMalloc(&in.Cref, nC * 2));
        const uint64_t sa = kwiki::hash64(seed, p.M + 7ull * p.K);
        kwiki::fill_random(in.A, nA, sa);
        kwiki::fill_random(in.B, nB, kwiki::hash64(sa, 1));
        kwiki::gemm_tn(handle, in.A, in.B, in.Cref, p.M, p.N, p.K, kwiki::kGemmBf16, 0);
        KWIKI_CHECK(cudaDeviceSynchronize());
        inputs.push_back(std::move(in));
        return inputs.back();
    };

    kwiki::Runner runner(args);
    struct Row {  // what a case's closures share, alive until the runner is done
        bf16* out = nullptr;
        const void* func = nullptr;
        int smem = 0;
        int timeouts = 0;
    };
    std::deque<Row> rows;
    std::vector<kwiki::Case> cases;
    for (const Variant& v : kVariants) {
        if (!args.want(v.name)) continue;
        Inputs& in = inputs_for(v.shape);
        const Problem p = v.shape;
        const size_t nC = size_t(p.M) * p.N;
        Row& row = rows.emplace_back();
        KWIKI_CHECK(cudaMalloc(&row.out, nC * 2));
        kwiki::Case c;
        if (v.make) {
            c.launch = v.make(in.A, in.B, row.out, p, max_cycles, errors, &row.func, &row.smem);
        } else {
            bf16 *A = in.A, *B = in.B, *out = row.out;
            c.launch = [=](cudaStream_t s) { kwiki::gemm_tn(handle, A, B, out, p.M, p.N, p.K, kwiki::kGemmBf16, s); };
        }
        c.variant = v.name;
        c.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", "bf16"}};
        c.flops = 2.0 * p.M * p.N * double(p.K);
        c.flops_dtype = "bf16";
        c.bytes = 2.0 * (double(p.M) * p.K + double(p.N) * p.K + double(p.M) * p.N);
        c.timed = v.timed;
        c.check_runs = repeats > 0 ? repeats : v.repeats;  // every checked launch must pass (races get several chances)
        c.poison = [&row, nC, errors](cudaStream_t s) {
            kwiki::poison(row.out, nC * 2, s);
            KWIKI_CHECK(cudaMemsetAsync(errors, 0, sizeof(int), s));
        };
        const kwiki::Tolerance tol = kwiki::gemm_tolerance(kwiki::GemmPrecision::bf16, p.K);
        // the wait bound's timeouts, then the output, every element against cuBLAS on the GPU
        auto judge = [&row, errors, max_cycles](kwiki::CheckResult c) {
            int e = 0;
            KWIKI_CHECK(cudaMemcpy(&e, errors, sizeof(int), cudaMemcpyDeviceToHost));
            row.timeouts += e;
            if (e > 0) {
                c.passed = false;
                c.detail = std::to_string(e) + " mbarrier waits timed out after " + std::to_string(max_cycles) +
                           " cycles (an unbounded wait would hang); " + c.detail;
            }
            return c;
        };
        c.check = [&row, &in, nC, tol, judge] {  // also the re-check of timed samples
            return judge(kwiki::compare_device(row.out, in.Cref, nC, tol, "cuBLAS on the same inputs (every element, on the GPU)"));
        };
        c.finish = [&row, &v](kwiki::Record& r) {
            r.extra.emplace_back("stages", v.stages);
            r.extra.emplace_back("wait_timeouts", row.timeouts);
            if (row.func) {
                r.set_regs(kwiki::kernel_regs(row.func));
                r.extra.emplace_back("smem_bytes", row.smem);
            }
        };
        cases.push_back(std::move(c));
    }
    runner.run(cases);
    for (Row& r : rows) KWIKI_CHECK(cudaFree(r.out));
    for (auto& in : inputs) KWIKI_CHECK(cudaFree(in.A)), KWIKI_CHECK(cudaFree(in.B)), KWIKI_CHECK(cudaFree(in.Cref));
    KWIKI_CHECK(cudaFree(errors));
    KWIKI_CHECK_STATUS(kwiki::cublas().Destroy(handle));
    return kwiki::exit_code();
}
