// ws_timeline.cu: a persistent warp-specialized bf16 GEMM on Hopper (TMA + wgmma + mbarriers, no CUTLASS) whose
// untimed trace pass records its schedule: what each warpgroup of the first CTAs did when, in %globaltimer
// nanoseconds, for the site's timeline (kwiki/results/timelines.py). The timed variant carries no stamps.
//
// C[M,N] = A[M,K] * B[N,K]^T, A and B row-major (K contiguous: both wgmma operands K-major), C row-major; bf16 in,
// fp32 accumulation, bf16 out. The kernel is gemm_bf16_sm90a's ws_persistent written out on its own: one CTA per
// SM walking 128x256 tiles in bands of 16 tile-rows; warpgroup 0 produces (one thread waits for an empty stage of
// a 4-stage mbarrier ring and issues the TMA loads of a 64-deep k-block into it), warpgroups 1 and 2 consume (64
// rows of the tile each: wait for a full stage, m64n256k16 wgmmas with one k-block in flight, free the stage, then
// the epilogue stores the accumulators straight from registers). The kernel is a template on kTrace: with it,
// the elected thread of each warpgroup (thread 0 of it) of CTAs 0 and 1 stamps %globaltimer around every phase
// (below) into a device buffer of fixed capacity per warpgroup; without it (the timed variant) nothing is
// stamped and the kernel reads no timer at all (not even kwiki_clock.cuh's stamp: its records carry no
// sm_mhz_effective).
//
// The phases, named as kwiki.results.timelines.Phase names them:
//   producer-wait   the producer waits for an empty stage (its consumers have freed it)
//   tma-issue       the producer announces the stage's bytes and issues its two TMA loads
//   consumer-wait   a consumer waits for a full stage (its bytes have landed)
//   wgmma           a consumer issues a k-block's wgmmas and waits until at most one k-block is in flight
//                   (wgmma_wait<1>: the previous k-block's are done); after a tile's last k-block, the drain
//                   (wgmma_wait<0>) is a wgmma span of its own
//   epilogue        a consumer converts and stores its 64x256 part of the tile (until its stores are issued)
// Every span names its output tile (tile-row * tiles across + tile-column). Spans shorter than the timer's step
// read as zero length: %globaltimer ticks in steps of up to a microsecond on some parts (kwiki_clock.cuh).
//
// Requirements: K a multiple of 8 (TMA rows are 16-byte aligned), N even (paired stores). M, N and K need not be
// multiples of the tile: TMA fills out-of-range elements with zeros and the stores are guarded (the manifest's
// 4000x4000x4040 is off the tile in all three).
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o ws_timeline ws_timeline.cu
// Run:   ./ws_timeline --shapes=4096x4096x4096,... [--variants ws_persistent] [--seed N] [--input-sets 2]
//        ./ws_timeline --trace-out=PATH --shape=4096x4096x4096 [--seed N]   (the trace pass, instead of the ladder)
//
// Checking (every shape, before timing): every element of the output against an fp64 GEMM of the same inputs on
// the GPU (reference_kernel), itself checked against 1024 host fp64 dot products at sampled positions when each
// input set is filled (exit 2 if it disagrees). Outputs are poisoned before every checked and timed launch.
// The trace pass: one warm-up launch of the traced kernel, then the traced launch into a poisoned output, checked
// the same way (exit 1 on a wrong output, on a lane whose span count differs from the schedule's, or on a span that
// ends before it starts), then ONE JSON line to PATH, a kwiki.results.timelines.Timeline without gpu and run_id (kwiki
// adds them): {"artifact", "variant", "params": {shape, M, N, K, dtype, tile, stages, grid, traced_blocks,
// spans_dropped}, "spans": [{block, warpgroup, phase, start_ns, end_ns, tile}, ...]}. A lane that stamps more than
// its capacity keeps its first spans and counts the rest in spans_dropped (nothing is written past the buffer).
#include <cstdio>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"
#include "kwiki_gemm.cuh"
#include "sm90.cuh"

using bf16 = __nv_bfloat16;

struct Problem {
    int M, N, K;
};

// ===================================================================================================
// Reference
// ===================================================================================================

// C[r][c] = sum_k A[r][k] * B[c][k] in fp64 (bf16 products are exact in fp64): 16x16 threads, one element each,
// K in steps of 16 through shared memory. Slow next to the GEMM, and run once per input set.
__global__ void reference_kernel(const bf16* A, const bf16* B, double* C, int M, int N, int K) {
    __shared__ double sa[16][17], sb[16][17];  // +1: the column reads of sb do not all hit one bank
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int a_row = blockIdx.y * 16 + ty, b_row = blockIdx.x * 16 + ty;
    double acc = 0;
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int k = k0 + tx;
        sa[ty][tx] = a_row < M && k < K ? double(__bfloat162float(A[size_t(a_row) * K + k])) : 0.0;
        sb[ty][tx] = b_row < N && k < K ? double(__bfloat162float(B[size_t(b_row) * K + k])) : 0.0;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < 16; ++j) acc += sa[ty][j] * sb[tx][j];
        __syncthreads();
    }
    const int r = blockIdx.y * 16 + ty, c = blockIdx.x * 16 + tx;
    if (r < M && c < N) C[size_t(r) * N + c] = acc;
}

// One input set: A and B random bf16 in [-1, 1) (A from `seed`, B from hash64(seed, 1)) and their product in fp64
// on the GPU, every element, checked at 1024 positions (from hash64(seed, 2)) against host fp64 dot products of the
// same bf16 values: the reference kernel is code of this file, so it is checked before anything is checked by it.
struct Operands {
    kwiki::DeviceBuffer<bf16> A, B;
    kwiki::DeviceBuffer<double> ref;

    void fill(const Problem& p, uint64_t seed) {
        const size_t nA = size_t(p.M) * p.K, nB = size_t(p.N) * p.K;
        A = kwiki::DeviceBuffer<bf16>(nA), B = kwiki::DeviceBuffer<bf16>(nB);
        ref = kwiki::DeviceBuffer<double>(size_t(p.M) * p.N);
        kwiki::fill_random(A.get(), nA, seed);
        kwiki::fill_random(B.get(), nB, kwiki::hash64(seed, 1));
        reference_kernel<<<dim3((p.N + 15) / 16, (p.M + 15) / 16), dim3(16, 16)>>>(A.get(), B.get(), ref.get(), p.M, p.N, p.K);
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaDeviceSynchronize());
        const std::vector<float> hA = kwiki::to_host_float(A.get(), nA), hB = kwiki::to_host_float(B.get(), nB);
        const auto samples = kwiki::gemm_reference(hA, hB, p.M, p.N, p.K, 1024, kwiki::hash64(seed, 2));
        // gathered as fp32: 2^-24 relative; the two fp64 sums differ by far less than the tolerance
        const std::vector<float> at = kwiki::gather_samples(ref.get(), p.N, samples);
        const kwiki::CheckResult c = kwiki::compare_samples(at.data(), samples, {1e-6, 1e-6}, "host fp64 on sampled elements");
        if (!c.passed) kwiki::fail_env(__FILE__, __LINE__, "the fp64 reference kernel", ("disagrees with the host: " + c.detail).c_str());
    }
};

// Every element of a bf16 output against the set's fp64 reference, on the GPU: one bf16 rounding of an fp32 sum.
kwiki::CheckResult check_output(const bf16* out, const Operands& set, const Problem& p) {
    return kwiki::compare_device(out, set.ref.get(), size_t(p.M) * p.N, kwiki::gemm_tolerance(kwiki::GemmPrecision::bf16, p.K),
                                 "fp64 on the GPU, every element (itself checked against host fp64 samples)");
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// The one configuration (gemm_bf16_sm90a's WideBf16, ws_persistent): a k-block is one 128-byte swizzle row deep
// (64 bf16), so every operand tile in shared memory is a stack of 128-byte rows; one wgmma consumes 16 of K.
constexpr int kBM = 128, kBN = 256, kBK = 64, kWK = 16;
constexpr int kConsumers = 2, kWgM = kBM / kConsumers;  // rows of the tile one consumer warpgroup owns
constexpr int kStages = 4, kGroup = 16;                 // ring depth; tile order: bands of 16 tile-rows
constexpr int kAElems = kBM * kBK, kBElems = kBN * kBK;
constexpr int kStageBytes = (kAElems + kBElems) * int(sizeof(bf16));
constexpr int kThreads = 128 * (kConsumers + 1);
constexpr int kSmemBytes = kStages * kStageBytes + 2 * kStages * 8 + 1024;  // + full/empty barriers, alignment slack
static_assert(kBN / 2 <= 128, "a consumer holds at most 128 fp32 accumulators");

// The trace: phases in the order of kPhaseNames (the launchers' JSON names), one lane per traced CTA and warpgroup,
// kLaneCapacity spans each. counts[lane] is the number of spans the lane stamped, stored or not.
enum Phase : int { kProducerWait, kTmaIssue, kConsumerWait, kWgmma, kEpilogue };
constexpr int kTraceBlocks = 2, kWarpgroups = kConsumers + 1, kLanes = kTraceBlocks * kWarpgroups;
constexpr int kLaneCapacity = 8192;  // 8192^3 on 132 SMs: at most 16 tiles a CTA, 16 x (2 x 128 + 2) = 4128 spans a lane

struct TraceSpan {
    unsigned long long start_ns, end_ns;
    int tile, phase;
};

struct Trace {
    TraceSpan* spans;  // kLanes * kLaneCapacity
    unsigned* counts;  // kLanes
};

// One warpgroup's stamps. Every thread reads the timer (no branch around the warpgroup-wide wgmma and mbarrier
// code); only the elected thread of a traced CTA stores, and never past its lane's capacity. With !kTrace every
// member is empty: the timed kernel has no timer read and no trace store.
template <bool kTrace>
struct Stamps {
    TraceSpan* lane = nullptr;
    unsigned n = 0;
    bool on = false;

    __device__ __forceinline__ Stamps(const Trace& t, int wg, bool elected) {
        if constexpr (kTrace) {
            on = elected && blockIdx.x < kTraceBlocks;
            if (on) lane = t.spans + size_t(blockIdx.x * kWarpgroups + wg) * kLaneCapacity;
        }
    }
    __device__ __forceinline__ unsigned long long now() const {
        if constexpr (kTrace) return kwiki::globaltimer_ns();
        else return 0;
    }
    // The span [start, now) of `phase` on `tile`; returns now, the start of the next span.
    __device__ __forceinline__ unsigned long long span(Phase phase, unsigned long long start, int tile) {
        if constexpr (kTrace) {
            const unsigned long long end = kwiki::globaltimer_ns();
            if (on) {
                if (n < unsigned(kLaneCapacity)) lane[n] = TraceSpan{start, end, tile, int(phase)};
                ++n;
            }
            return end;
        } else {
            return 0;
        }
    }
    __device__ __forceinline__ void finish(const Trace& t, int wg) const {
        if constexpr (kTrace)
            if (on) t.counts[blockIdx.x * kWarpgroups + wg] = n;
    }
};

__device__ __forceinline__ uint8_t* align1024(uint8_t* p) {
    return reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(p) + 1023) & ~uintptr_t(1023));
}

// Grouped tile order: tiles come in bands of kGroup tile-rows; inside a band, down the rows first, then across the
// columns, so neighbouring CTAs share A rows and B columns in L2. Returns the tile's index tm * tiles_n + tn.
__device__ __forceinline__ int tile_of(int unit, int tiles_m, int tiles_n) {
    const int per_band = kGroup * tiles_n, band = unit / per_band, first = band * kGroup;
    const int rows = min(kGroup, tiles_m - first), r = unit - band * per_band;
    return (first + r % rows) * tiles_n + r / rows;
}

// One k-block of wgmma for one consumer: 4 k-steps of m64n256k16 into d.
__device__ __forceinline__ void mma_kblock(float (&d)[kBN / 2], const bf16* a, const bf16* b) {
#pragma unroll
    for (int ks = 0; ks < kBK / kWK; ++ks)
        sm90::WgmmaOp<bf16, kBN>::mma(d, sm90::desc_k_major_sw128(a + ks * kWK), sm90::desc_k_major_sw128(b + ks * kWK), 1);
}

__device__ __forceinline__ void zero(float (&d)[kBN / 2]) {
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) d[i] = 0.f, sm90::fence_operand(d[i]);
}

__device__ __forceinline__ void settle(float (&d)[kBN / 2]) {
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) sm90::fence_operand(d[i]);
}

// A consumer's accumulators to C (its 64 rows from row0, 256 columns from col0), straight from registers, guarded:
// thread t holds rows 16*(t/32) + (t%32)/4 and +8, columns 8j + 2*(t%4) + {0,1} (the wgmma accumulator layout).
__device__ __forceinline__ void store_tile(const float (&d)[kBN / 2], bf16* out, int M, int N, int row0, int col0) {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = row0 + warp * 16 + lane / 4 + 8 * h;
        if (r >= M) continue;
        bf16* row = out + size_t(r) * N;
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) {
            const int c = col0 + 8 * j + 2 * (lane % 4);
            const float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
            if (c + 1 < N) *reinterpret_cast<__nv_bfloat162*>(row + c) = __floats2bfloat162_rn(v0, v1);
            else if (c < N) row[c] = __float2bfloat16_rn(v0);
        }
    }
}

// The GEMM. Ring of kStages stages: full[s] completes when stage s has landed (1 arrival + its bytes), empty[s] when
// both consumers have finished reading it (2 arrivals). Stage index and phase run on across tiles, so the producer
// prefetches a CTA's next tile while its consumers finish the last one. The stamps (kTrace) sit between the steps.
template <bool kTrace>
__global__ void __launch_bounds__(kThreads, 1)
ws_gemm(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, bf16* out, int M, int N, int K,
        Trace trace) {
    extern __shared__ uint8_t smem_raw[];
    bf16* sA = reinterpret_cast<bf16*>(align1024(smem_raw));
    bf16* sB = sA + kStages * kAElems;
    uint64_t* full = reinterpret_cast<uint64_t*>(sB + kStages * kBElems);
    uint64_t* empty = full + kStages;
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) sm90::mbar_init(&full[s], 1), sm90::mbar_init(&empty[s], kConsumers);
        sm90::fence_barrier_init();
    }
    __syncthreads();

    const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN, k_blocks = (K + kBK - 1) / kBK;
    const int tiles = tiles_m * tiles_n;
    Stamps<kTrace> stamps(trace, wg, tid == 0);
    int stage = 0;
    uint32_t phase = 0;
    if (wg == 0) {
        sm90::regs_release<40>();
        if (threadIdx.x == 0) {  // the producer: one thread
            for (int u = blockIdx.x; u < tiles; u += gridDim.x) {
                const int tile = tile_of(u, tiles_m, tiles_n), row_a = (tile / tiles_n) * kBM, row_b = (tile % tiles_n) * kBN;
                for (int kb = 0; kb < k_blocks; ++kb) {
                    const unsigned long long t0 = stamps.now();
                    sm90::mbar_wait(&empty[stage], phase ^ 1);  // a fresh barrier passes parity 1: the first trip
                    const unsigned long long t1 = stamps.span(kProducerWait, t0, tile);
                    sm90::mbar_arrive_expect_tx(&full[stage], kStageBytes);
                    sm90::tma_load_2d(sA + stage * kAElems, &tmA, &full[stage], kb * kBK, row_a);
                    sm90::tma_load_2d(sB + stage * kBElems, &tmB, &full[stage], kb * kBK, row_b);
                    stamps.span(kTmaIssue, t1, tile);
                    if (++stage == kStages) stage = 0, phase ^= 1;
                }
            }
        }
    } else {
        sm90::regs_claim<232>();
        const int cw = wg - 1;
        float d[kBN / 2];
        for (int u = blockIdx.x; u < tiles; u += gridDim.x) {
            const int tile = tile_of(u, tiles_m, tiles_n);
            const int row0 = (tile / tiles_n) * kBM + cw * kWgM, col0 = (tile % tiles_n) * kBN;
            zero(d);
            int prev = -1;
            for (int kb = 0; kb < k_blocks; ++kb) {
                const unsigned long long t0 = stamps.now();
                sm90::mbar_wait(&full[stage], phase);
                const unsigned long long t1 = stamps.span(kConsumerWait, t0, tile);
                sm90::wgmma_fence();
                mma_kblock(d, sA + stage * kAElems + cw * kWgM * kBK, sB + stage * kBElems);
                sm90::wgmma_commit();
                sm90::wgmma_wait<1>();  // the previous k-block's wgmmas are done: free its stage
                stamps.span(kWgmma, t1, tile);
                if (prev >= 0 && tid == 0) sm90::mbar_arrive(&empty[prev]);
                prev = stage;
                if (++stage == kStages) stage = 0, phase ^= 1;
            }
            const unsigned long long t2 = stamps.now();
            sm90::wgmma_wait<0>();
            settle(d);
            const unsigned long long t3 = stamps.span(kWgmma, t2, tile);
            if (prev >= 0 && tid == 0) sm90::mbar_arrive(&empty[prev]);
            store_tile(d, out, M, N, row0, col0);
            stamps.span(kEpilogue, t3, tile);
        }
    }
    stamps.finish(trace, wg);
}

// ===================================================================================================
// Launchers
// ===================================================================================================

// The shapes the launcher takes: K a multiple of 8 (TMA rows are 16-byte aligned), N even (paired stores).
constexpr const char* kShapeRule = "MxNxK,... with K a multiple of 8 and N even";
bool launchable(const std::vector<int>& d) { return d[2] % 8 == 0 && d[1] % 2 == 0; }

// One launch on one input set: its tensor maps (built once), output and grid (one CTA per SM, at most one per tile).
struct Launch {
    CUtensorMap tmA, tmB;
    bf16* out;
    Problem p;
    int grid;
};

template <bool kTrace>
Launch prepare(const Operands& set, bf16* out, Problem p) {
    KWIKI_CHECK(cudaFuncSetAttribute(ws_gemm<kTrace>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    const int tiles = ((p.M + kBM - 1) / kBM) * ((p.N + kBN - 1) / kBN);
    return {sm90::tensor_map_2d(set.A.get(), p.M, p.K, kBM, kBK), sm90::tensor_map_2d(set.B.get(), p.N, p.K, kBN, kBK), out, p,
            std::min(kwiki::sm_count(), tiles)};
}

template <bool kTrace>
void run(const Launch& l, Trace trace, cudaStream_t s) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(l.grid), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = kSmemBytes, cfg.stream = s;
    KWIKI_CHECK(cudaLaunchKernelEx(&cfg, ws_gemm<kTrace>, l.tmA, l.tmB, l.out, l.p.M, l.p.N, l.p.K, trace));
}

// ws_persistent at one shape: its launch on every input set (`launches`, kept alive by the caller), checked and
// re-checked against the fp64 reference of the set the launch read, its output poisoned before every launch.
kwiki::Case ws_case(kwiki::InputSets<Operands>& in, const std::vector<Launch>& launches, bf16* out, Problem p) {
    kwiki::Case c;
    c.params = {{"M", p.M}, {"N", p.N}, {"K", p.K}, {"dtype", "bf16"}};
    c.flops = 2.0 * p.M * p.N * double(p.K);
    c.flops_dtype = "bf16";
    c.bytes = double(size_t(p.M) * p.K + size_t(p.N) * p.K + size_t(p.M) * p.N) * sizeof(bf16);
    c.launch = [&in, &launches](cudaStream_t s) { run<false>(launches[size_t(in.index())], Trace{}, s); };
    const size_t bytes = size_t(p.M) * p.N * sizeof(bf16);
    in.bind(c, [out, bytes](cudaStream_t s) { kwiki::poison(out, bytes, s); },
            [out, p](const Operands& set) { return check_output(out, set, p); });
    c.extra = {{"tile", "128x256x64"}, {"stages", kStages}, {"group", kGroup}, {"grid", launches[0].grid}, {"smem_bytes", kSmemBytes}};
    kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(ws_gemm<false>), kThreads, size_t(kSmemBytes));
    return c;
}

// ===================================================================================================
// Launchers: the trace pass
// ===================================================================================================

constexpr const char* kPhaseNames[] = {"producer-wait", "tma-issue", "consumer-wait", "wgmma", "epilogue"};  // Phase's order
static_assert(sizeof(kPhaseNames) / sizeof(kPhaseNames[0]) == kEpilogue + 1, "a name for every phase");

// How many spans lane (block, wg) must have stamped: the tiles the block walks, times 2 per k-block for the
// producer (wait, issue) and 2 per k-block + 2 per tile for a consumer (wait and wgmma; the drain and the epilogue).
unsigned long long expected_spans(const Launch& l, int block, int wg) {
    const int tiles = ((l.p.M + kBM - 1) / kBM) * ((l.p.N + kBN - 1) / kBN), k_blocks = (l.p.K + kBK - 1) / kBK;
    const unsigned long long walked = block < l.grid ? (tiles - block + l.grid - 1) / l.grid : 0;
    return walked * (wg == 0 ? 2ull * k_blocks : 2ull * k_blocks + 2);
}

// The stamps of a traced launch as one Timeline JSON line (kwiki/results/timelines.py), after checking that every lane
// stamped what the schedule says and no span runs backwards; an empty string (and the reason on stderr) otherwise.
std::string timeline_json(const Launch& l, const std::vector<TraceSpan>& spans, const std::vector<unsigned>& counts) {
    std::string shape = std::to_string(l.p.M) + "x" + std::to_string(l.p.N) + "x" + std::to_string(l.p.K), items;
    unsigned long long dropped = 0;
    for (int lane = 0; lane < kLanes; ++lane) {
        const int block = lane / kWarpgroups, wg = lane % kWarpgroups;
        if (counts[size_t(lane)] != expected_spans(l, block, wg)) {
            std::fprintf(stderr, "trace: CTA %d warpgroup %d stamped %u spans, its schedule has %llu\n", block, wg,
                         counts[size_t(lane)], expected_spans(l, block, wg));
            return "";
        }
        const unsigned kept = std::min(counts[size_t(lane)], unsigned(kLaneCapacity));
        dropped += counts[size_t(lane)] - kept;
        for (unsigned i = 0; i < kept; ++i) {
            const TraceSpan& s = spans[size_t(lane) * kLaneCapacity + i];
            if (s.end_ns < s.start_ns || s.phase < 0 || s.phase > kEpilogue) {
                std::fprintf(stderr, "trace: CTA %d warpgroup %d span %u is malformed (phase %d, %llu..%llu ns)\n", block, wg, i,
                             s.phase, s.start_ns, s.end_ns);
                return "";
            }
            char buf[200];
            std::snprintf(buf, sizeof buf,
                          "%s{\"block\":%d,\"warpgroup\":%d,\"phase\":\"%s\",\"start_ns\":%llu,\"end_ns\":%llu,\"tile\":%d}",
                          items.empty() ? "" : ",", block, wg, kPhaseNames[s.phase], s.start_ns, s.end_ns, s.tile);
            items += buf;
        }
    }
    const kwiki::Fields params = {{"shape", shape}, {"M", l.p.M}, {"N", l.p.N}, {"K", l.p.K}, {"dtype", "bf16"},
                                  {"tile", "128x256x64"}, {"stages", kStages}, {"grid", l.grid},
                                  {"traced_blocks", std::min(kTraceBlocks, l.grid)}, {"spans_dropped", dropped}};
    return "{\"artifact\":\"ws_timeline_sm90a\",\"variant\":\"ws_persistent\",\"params\":" + kwiki::detail::object(params) +
           ",\"spans\":[" + items + "]}\n";
}

// The trace pass (--trace-out=PATH, at --shape, else the first of --shapes): the traced kernel once to warm up, then
// once into a poisoned output and an emptied trace; the output checked, the trace checked and written to PATH.
// 0 when the line is written; 1 when the output or the trace is wrong (nothing written); 2 on a usage error.
int trace_pass(const kwiki::Args& args, uint64_t seed) {
    const std::string path = args.get_str("trace-out", "");
    if (path.empty() || path == "1") kwiki::Args::usage("--trace-out wants a file path: --trace-out=PATH");
    const bool one = args.has("shape");
    const auto shapes = args.get_shapes<Problem, 3>(one ? "shape" : "shapes", "", kShapeRule, launchable);
    if (one && shapes.size() != 1) kwiki::Args::usage("--trace-out wants one --shape=MxNxK");
    const Problem p = shapes[0];
    std::fprintf(stderr, "ws_timeline: trace pass at %dx%dx%d, seed %llu, %d SMs\n", p.M, p.N, p.K, (unsigned long long)seed,
                 kwiki::sm_count());
    Operands set;
    set.fill(p, kwiki::hash64(seed, 1000 + p.M + 7ull * p.N + 13ull * p.K));
    kwiki::DeviceBuffer<bf16> out(size_t(p.M) * p.N);
    kwiki::DeviceBuffer<TraceSpan> spans(size_t(kLanes) * kLaneCapacity);
    kwiki::DeviceBuffer<unsigned> counts(kLanes);
    const Launch l = prepare<true>(set, out.get(), p);
    for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up (module load, descriptors, caches): its stamps are reset
        kwiki::poison(out.get(), out.bytes());
        KWIKI_CHECK(cudaMemset(counts.get(), 0, counts.bytes()));
        run<true>(l, Trace{spans.get(), counts.get()}, 0);
        KWIKI_CHECK(cudaDeviceSynchronize());
    }
    const kwiki::CheckResult c = check_output(out.get(), set, p);
    std::fprintf(stderr, "trace: check %s: %s\n", c.passed ? "passed" : "FAILED", c.detail.c_str());
    if (!c.passed) return 1;
    std::vector<TraceSpan> host(spans.size());
    std::vector<unsigned> n(counts.size());
    KWIKI_CHECK(cudaMemcpy(host.data(), spans.get(), spans.bytes(), cudaMemcpyDeviceToHost));
    KWIKI_CHECK(cudaMemcpy(n.data(), counts.get(), counts.bytes(), cudaMemcpyDeviceToHost));
    const std::string line = timeline_json(l, host, n);
    if (line.empty()) return 1;
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) kwiki::fail_env(__FILE__, __LINE__, path.c_str(), "cannot open the trace file for writing");
    const bool ok = std::fputs(line.c_str(), f) >= 0;
    if (std::fclose(f) != 0 || !ok) kwiki::fail_env(__FILE__, __LINE__, path.c_str(), "cannot write the trace file");
    return 0;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

constexpr kwiki::VariantInfo kVariants[] = {
    {"ws_persistent"},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);  // --list-variants exits in here, before any CUDA call
    if (m.args.has("trace-out")) return trace_pass(m.args, m.seed);  // the untimed trace pass, instead of the ladder
    const auto shapes = m.args.get_shapes<Problem, 3>("shapes", "", kShapeRule, launchable);
    kwiki::Runner& runner = m.start("ws_timeline");
    for (const Problem& p : shapes) {
        kwiki::InputSets<Operands> in(m.sets, kwiki::hash64(m.seed, 1000 + p.M + 7ull * p.N + 13ull * p.K),
                                      [&](Operands& s, uint64_t seed) { s.fill(p, seed); });
        kwiki::DeviceBuffer<bf16> out(size_t(p.M) * p.N);
        std::vector<Launch> launches;  // one per input set, alive until the runner is done with the case
        for (int s = 0; s < in.size(); ++s) launches.push_back(prepare<false>(in[s], out.get(), p));
        kwiki::run_ladder(runner, m.args, kVariants, [&](const kwiki::VariantInfo&) { return ws_case(in, launches, out.get(), p); });
    }
    return kwiki::exit_code();
}
