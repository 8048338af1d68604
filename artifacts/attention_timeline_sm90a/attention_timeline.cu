// attention_timeline.cu: the FlashAttention-3-style CUDA rungs of artifacts/attention_fwd_bf16_sm90a (fa3.cu: ws,
// ping-pong, intra-warpgroup overlap) built a second time, from the same CTA body (artifacts/common/
// fa3_attention.cuh), so that an untimed trace pass can record their schedules: what the producer and the two
// consumer warpgroups of the first query tiles did when, in %globaltimer nanoseconds, for the site's timeline
// (kwiki/results/timelines.py). The timed variants launch the body without stamps (TRACE false: the code of
// fa3.cu's kernels); the attention page's figures are the attention artifact's, measured through torch.
//
// O = softmax(Q K^T / sqrt(128)) V, bf16 Q, K, V, O of [batch * heads, seq, 128], non-causal, as many KV heads as
// query heads, with each row's fp32 log-sum-exp. The trace: one thread of each warpgroup (thread 0 of it) of the
// CTAs blockIdx.x < fa3::TRACE_BLOCKS of head 0 (blockIdx.x 0 is the last query tile) stamps the end of every
// phase (fa3_attention.cuh says what each measures); a span's `tile` is its key tile j. Spans shorter than the
// timer's step read as zero length (%globaltimer ticks in steps of up to a microsecond on some parts).
//
// Requirements: batch * heads <= 65535 (the grid's y), seq <= 32768 (the reference keeps a row's scores in
// shared memory). seq need not be a multiple of 128 (the sanitizer's shape is not).
//
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -o attention_timeline attention_timeline.cu
// Run:   ./attention_timeline --shapes=4x16x4096,... [--variants cuda_fa3_ws] [--seed N] [--input-sets 2]
//        ./attention_timeline --trace-out=PATH --shape=4x16x4096 [--seed N]   (the trace pass, instead of the ladder)
//
// Checking (every shape, before timing, and the traced launches): 1024 sampled rows of O (every column) and their
// log-sum-exp against an fp32 reference on the GPU (reference_kernel, one row a CTA), itself checked against host
// fp64 on 8 of those rows when the input set is filled (exit 2 if it disagrees), to the attention artifact's
// tolerance: 4e-3 + 2^-7 |ref| (attention.py's TOLERANCES says why; the fp32 reference's own error is below 1e-5).
// Outputs are poisoned (NaN) before every checked and timed launch. The trace pass: per mode, one warm-up launch
// of the traced kernel, then the traced launch into poisoned outputs and emptied counts, checked the same way (exit
// 1 on a wrong output, on a lane whose span count differs from the schedule's, or on a malformed span; nothing
// written), then ONE JSON line a mode to PATH, a kwiki.results.timelines.Timeline without gpu and run_id.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fa3_attention.cuh"
#include "kwiki_bench.cuh"

struct Problem {
    int batch, heads, seq;
};

constexpr int kD = 128, kSamples = 1024, kHostRows = 8;  // the timeline traces the head dim 128 kernels
constexpr int kSmemBytes = fa3::Head<kD>::SMEM_BYTES;
constexpr kwiki::Tolerance kTol = {4e-3, 1.0 / 128};  // attention.py's bf16 tolerance (its TOLERANCES says why)
constexpr float kScale = 0.08838834764831845f;        // 1 / sqrt(128)

// ===================================================================================================
// Reference
// ===================================================================================================

__device__ float block_reduce(float x, bool is_max, float* part) {  // over the CTA's 128 threads
    for (int o = 16; o > 0; o /= 2) {
        const float y = __shfl_xor_sync(0xffffffffu, x, o);
        x = is_max ? fmaxf(x, y) : x + y;
    }
    __syncthreads();  // part is reused by the next call
    if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = x;
    __syncthreads();
    x = part[0];
    for (int w = 1; w < 4; ++w) x = is_max ? fmaxf(x, part[w]) : x + part[w];
    return x;
}

// One sampled row a CTA of 128 threads, in fp32: its scores (a thread a key) in shared memory, their max and the
// exponentials' sum, then column d of O by thread d and the row's natural-log log-sum-exp. rows[i] = bh * seq + r.
__global__ void reference_kernel(const bf16* q, const bf16* k, const bf16* v, const long long* rows, int seq, float* o, float* lse) {
    extern __shared__ float p[];
    __shared__ float qs[kD], part[4];
    const long long row = rows[blockIdx.x], bh = row / seq;
    const bf16 *kh = k + bh * seq * kD, *vh = v + bh * seq * kD;
    qs[threadIdx.x] = __bfloat162float(q[row * kD + threadIdx.x]);
    __syncthreads();
    float mx = -INFINITY;
    for (int key = threadIdx.x; key < seq; key += blockDim.x) {
        float s = 0.f;
        for (int d = 0; d < kD; ++d) s = fmaf(qs[d], __bfloat162float(kh[size_t(key) * kD + d]), s);
        p[key] = s * kScale;
        mx = fmaxf(mx, p[key]);
    }
    mx = block_reduce(mx, true, part);
    float sum = 0.f;
    for (int key = threadIdx.x; key < seq; key += blockDim.x) sum += (p[key] = expf(p[key] - mx));
    sum = block_reduce(sum, false, part);  // its __syncthreads: every p[key] is written
    float acc = 0.f;
    for (int key = 0; key < seq; ++key) acc = fmaf(p[key], __bfloat162float(vh[size_t(key) * kD + threadIdx.x]), acc);
    o[size_t(blockIdx.x) * kD + threadIdx.x] = acc / sum;
    if (threadIdx.x == 0) lse[blockIdx.x] = mx + logf(sum);
}

// The sampled rows of a bf16 output and of its log-sum-exp, as fp32 (a CTA a row).
__global__ void gather_kernel(const bf16* out, const float* lse, const long long* rows, float* go, float* gl) {
    const long long row = rows[blockIdx.x];
    go[size_t(blockIdx.x) * kD + threadIdx.x] = __bfloat162float(out[row * kD + threadIdx.x]);
    if (threadIdx.x == 0) gl[blockIdx.x] = lse[row];
}

// Host fp64 attention of one row of the set (its head's K and V copied back): the reference kernel's check.
void host_row(const Problem& p, const kwiki::DeviceBuffer<bf16>& q, const kwiki::DeviceBuffer<bf16>& k,
              const kwiki::DeviceBuffer<bf16>& v, long long row, double* o, double* lse) {
    const long long bh = row / p.seq;
    const std::vector<float> qr = kwiki::to_host_float(q.get() + row * kD, kD);
    const std::vector<float> kh = kwiki::to_host_float(k.get() + bh * p.seq * kD, size_t(p.seq) * kD);
    const std::vector<float> vh = kwiki::to_host_float(v.get() + bh * p.seq * kD, size_t(p.seq) * kD);
    std::vector<double> s(static_cast<size_t>(p.seq));
    double mx = -INFINITY, sum = 0;
    for (int key = 0; key < p.seq; ++key) {
        double d = 0;
        for (int c = 0; c < kD; ++c) d += double(qr[size_t(c)]) * kh[size_t(key) * kD + c];
        s[size_t(key)] = d / std::sqrt(double(kD));
        mx = std::max(mx, s[size_t(key)]);
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int c = 0; c < kD; ++c) {
        double acc = 0;
        for (int key = 0; key < p.seq; ++key) acc += s[size_t(key)] * vh[size_t(key) * kD + c];
        o[c] = acc / sum;
    }
    *lse = mx + std::log(sum);
}

// One input set: Q, K, V random bf16 in [-1, 1) and the fp32 reference of kSamples rows (from hash64(seed, 3); the
// last row of the last head always among them: the partial last tile where seq is off the tile), on the GPU,
// checked on kHostRows of them against host fp64 before anything is checked by it.
struct Operands {
    kwiki::DeviceBuffer<bf16> q, k, v;
    kwiki::DeviceBuffer<long long> rows;
    std::vector<double> ref_o, ref_lse;
    int n = 0;

    void fill(const Problem& p, uint64_t seed) {
        const long long total = (long long)p.batch * p.heads * p.seq;
        const size_t elems = size_t(total) * kD;
        q = kwiki::DeviceBuffer<bf16>(elems), k = kwiki::DeviceBuffer<bf16>(elems), v = kwiki::DeviceBuffer<bf16>(elems);
        kwiki::fill_random(q.get(), elems, seed);
        kwiki::fill_random(k.get(), elems, kwiki::hash64(seed, 1));
        kwiki::fill_random(v.get(), elems, kwiki::hash64(seed, 2));
        n = int(std::min<long long>(kSamples, total));
        std::vector<long long> host(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
            host[size_t(i)] = n == total ? i : (long long)(kwiki::hash64(kwiki::hash64(seed, 3), uint64_t(i)) % uint64_t(total));
        host[size_t(n - 1)] = total - 1;
        rows = kwiki::DeviceBuffer<long long>(size_t(n));
        KWIKI_CHECK(cudaMemcpy(rows.get(), host.data(), rows.bytes(), cudaMemcpyHostToDevice));
        kwiki::DeviceBuffer<float> o(static_cast<size_t>(n) * kD), l(static_cast<size_t>(n));
        const size_t smem = size_t(p.seq) * sizeof(float);
        KWIKI_CHECK(cudaFuncSetAttribute(reference_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
        reference_kernel<<<n, kD, smem>>>(q.get(), k.get(), v.get(), rows.get(), p.seq, o.get(), l.get());
        KWIKI_CHECK_LAST();
        KWIKI_CHECK(cudaDeviceSynchronize());
        const std::vector<float> ho = kwiki::to_host_float(o.get(), o.size()), hl = kwiki::to_host_float(l.get(), l.size());
        ref_o.assign(ho.begin(), ho.end()), ref_lse.assign(hl.begin(), hl.end());
        std::vector<float> got_o, got_l;  // kHostRows of the GPU's rows (evenly spread, the last included) in fp64
        std::vector<double> want_o, want_l;
        for (int h = 0; h < std::min(kHostRows, n); ++h) {
            const int i = h == 0 ? n - 1 : h * (n / kHostRows);
            std::vector<double> ro(kD);
            double rl = 0;
            host_row(p, q, k, v, host[size_t(i)], ro.data(), &rl);
            got_o.insert(got_o.end(), ho.begin() + size_t(i) * kD, ho.begin() + size_t(i + 1) * kD), got_l.push_back(hl[size_t(i)]);
            want_o.insert(want_o.end(), ro.begin(), ro.end()), want_l.push_back(rl);
        }
        // fp32 sums of at most 32768 terms of order 1: relative error well under 1e-5 (the tolerance is 4e-3)
        kwiki::CheckResult c = kwiki::compare(got_o.data(), want_o.data(), got_o.size(), {1e-5, 1e-5}, "host fp64 rows");
        if (c.passed) c = kwiki::compare(got_l.data(), want_l.data(), got_l.size(), {1e-5, 1e-5}, "host fp64 rows (lse)");
        if (!c.passed) kwiki::fail_env(__FILE__, __LINE__, "the fp32 reference kernel", ("disagrees with the host: " + c.detail).c_str());
    }
};

// The sampled rows of O (every column) and of the log-sum-exp against the set's reference.
kwiki::CheckResult check_output(const bf16* out, const float* lse, const Operands& set) {
    kwiki::DeviceBuffer<float> go(static_cast<size_t>(set.n) * kD), gl(static_cast<size_t>(set.n));
    gather_kernel<<<set.n, kD>>>(out, lse, set.rows.get(), go.get(), gl.get());
    KWIKI_CHECK_LAST();
    const std::vector<float> ho = kwiki::to_host_float(go.get(), go.size()), hl = kwiki::to_host_float(gl.get(), gl.size());
    const kwiki::CheckResult c = kwiki::compare(ho.data(), set.ref_o.data(), ho.size(), kTol, "fp32 on the GPU, 1024 sampled rows (checked against host fp64)");
    return c.passed ? kwiki::compare(hl.data(), set.ref_lse.data(), hl.size(), kTol, "fp32 on the GPU, the sampled rows' log-sum-exp") : c;
}

// ===================================================================================================
// Kernels: fa3_attention.cuh's CTA, each mode with (TRACE) and without stamps
// ===================================================================================================

template <int MODE, bool TRACE>
__global__ void __launch_bounds__(fa3::THREADS, 1)
attention_kernel(const __grid_constant__ CUtensorMap tq, const __grid_constant__ CUtensorMap tk, const __grid_constant__ CUtensorMap tv,
                 bf16* out, float* lse, int seq, float c, fa3::Trace trace) {
    fa3::attention_cta<MODE, TRACE, kD>(&tq, &tk, &tv, out, lse, seq, 0, 1, c, trace);
}

// ===================================================================================================
// Launchers
// ===================================================================================================

constexpr const char* kShapeRule = "BATCHxHEADSxSEQ,... with batch * heads <= 65535 and seq <= 32768";
bool launchable(const std::vector<int>& d) { return (long long)d[0] * d[1] <= 65535 && d[2] <= 32768; }

struct Launch {
    CUtensorMap tq, tk, tv;
    bf16* out;
    float* lse;
    Problem p;
};

Launch prepare(const Operands& set, bf16* out, float* lse, Problem p) {
    Launch l{};
    const int bh = p.batch * p.heads;
    if (fa3::tensor_map_3d<kD>(&l.tq, set.q.get(), bh, p.seq) != CUDA_SUCCESS || fa3::tensor_map_3d<kD>(&l.tk, set.k.get(), bh, p.seq) != CUDA_SUCCESS ||
        fa3::tensor_map_3d<kD>(&l.tv, set.v.get(), bh, p.seq) != CUDA_SUCCESS)
        kwiki::fail_env(__FILE__, __LINE__, "cuTensorMapEncodeTiled", "the driver refused a tensor map");
    l.out = out, l.lse = lse, l.p = p;
    return l;
}

template <int MODE, bool TRACE>
void launch_mode(const Launch& l, fa3::Trace trace, cudaStream_t s) {
    static bool configured = false;
    if (!configured)
        KWIKI_CHECK(cudaFuncSetAttribute(attention_kernel<MODE, TRACE>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes)), configured = true;
    const dim3 grid(unsigned((l.p.seq + fa3::BM - 1) / fa3::BM), unsigned(l.p.batch * l.p.heads));
    const float c = 1.4426950408889634f / sqrtf(float(kD));  // log2(e) / sqrt(d), as fa3.cu's launcher
    attention_kernel<MODE, TRACE><<<grid, fa3::THREADS, kSmemBytes, s>>>(l.tq, l.tk, l.tv, l.out, l.lse, l.p.seq, c, trace);
    KWIKI_CHECK_LAST();
}

template <bool TRACE>
void run(int mode, const Launch& l, fa3::Trace trace, cudaStream_t s) {
    if (mode == fa3::WS) launch_mode<fa3::WS, TRACE>(l, trace, s);
    else if (mode == fa3::PINGPONG) launch_mode<fa3::PINGPONG, TRACE>(l, trace, s);
    else launch_mode<fa3::OVERLAP, TRACE>(l, trace, s);
}

kwiki::Fields shape_params(const Problem& p) {
    return {{"batch", p.batch}, {"heads", p.heads}, {"seq", p.seq}, {"head_dim", kD}, {"mask", "none"}, {"dtype", "bf16"}};
}

// One mode at one shape, timed without stamps: its launch on every input set, checked against the set's
// reference, its outputs poisoned before every launch.
kwiki::Case attention_case(int mode, kwiki::InputSets<Operands>& in, const std::vector<Launch>& launches, bf16* out, float* lse, Problem p) {
    kwiki::Case c;
    c.params = shape_params(p);
    const double rows = double(p.batch) * p.heads * p.seq;
    c.flops = 4.0 * rows * p.seq * kD;
    c.flops_dtype = "bf16";
    c.bytes = rows * kD * 2 * 4 + rows * 4;  // Q, K, V read once, O and the LSE written
    c.launch = [mode, &in, &launches](cudaStream_t s) { run<false>(mode, launches[size_t(in.index())], fa3::Trace{}, s); };
    const size_t ob = size_t(rows) * kD * sizeof(bf16), lb = size_t(rows) * sizeof(float);
    in.bind(c, [out, lse, ob, lb](cudaStream_t s) { kwiki::poison(out, ob, s), kwiki::poison(lse, lb, s); },
            [out, lse](const Operands& set) { return check_output(out, lse, set); });
    c.extra = {{"tile", "128x128"}, {"stages", fa3::STAGES}, {"smem_bytes", kSmemBytes}};
    return c;
}

// ===================================================================================================
// Launchers: the trace pass
// ===================================================================================================

constexpr const char* kPhaseNames[] = {"producer-wait", "tma-issue", "consumer-wait", "wgmma", "softmax", "epilogue"};  // TracePhase's order
static_assert(sizeof(kPhaseNames) / sizeof(kPhaseNames[0]) == fa3::kEpilogue + 1, "a name for every phase");
constexpr const char* kModeVariants[] = {"cuda_fa3_ws", "cuda_fa3_pingpong", "cuda_fa3_overlap"};  // fa3::Mode's order

// How many spans lane (block, wg) of a traced CTA must have stamped at seq (non-causal: n key tiles): the producer
// Q's issue and a wait and an issue for K and for V per tile; a consumer a wait, wgmma and softmax per tile (OVERLAP:
// a wgmma and a softmax more for every tile after the first), then the last P V's wait, wgmma and the epilogue.
unsigned long long expected_spans(int mode, int seq, int wg) {
    const unsigned long long n = unsigned((seq + fa3::BN - 1) / fa3::BN);
    if (wg == 0) return 1 + 4 * n;
    return 3 * n + 3 + (mode == fa3::OVERLAP ? 2 * (n - 1) : 0);
}

// The stamps of one mode's traced launch as one Timeline JSON line (kwiki/results/timelines.py), after checking that
// every traced lane stamped what the schedule says and no span is malformed; an empty string (and the reason on
// stderr) otherwise. spans: TRACE_LANES * LANE_CAPACITY, counts: TRACE_LANES (fa3::Trace's layout).
std::string timeline_json(int mode, const Problem& p, const std::vector<uint4>& spans, const std::vector<unsigned>& counts) {
    const int gx = (p.seq + fa3::BM - 1) / fa3::BM, blocks = std::min(fa3::TRACE_BLOCKS, gx);
    const unsigned n_tiles = unsigned((p.seq + fa3::BN - 1) / fa3::BN);
    std::string items;
    unsigned long long dropped = 0;
    for (int lane = 0; lane < blocks * fa3::TRACE_WARPGROUPS; ++lane) {
        const int block = lane / fa3::TRACE_WARPGROUPS, wg = lane % fa3::TRACE_WARPGROUPS;
        const unsigned long long want = expected_spans(mode, p.seq, wg);
        if (counts[size_t(lane)] != want) {
            std::fprintf(stderr, "trace: %s CTA %d warpgroup %d stamped %u spans, its schedule has %llu\n", kModeVariants[mode], block, wg,
                         counts[size_t(lane)], want);
            return "";
        }
        const unsigned kept = std::min(counts[size_t(lane)], unsigned(fa3::LANE_CAPACITY));
        dropped += counts[size_t(lane)] - kept;
        for (unsigned i = 0; i < kept; ++i) {
            const uint4 s = spans[size_t(lane) * fa3::LANE_CAPACITY + i];
            const unsigned long long start = s.x | (unsigned long long)s.y << 32, end = start + s.z;
            const unsigned phase = s.w & 0xff, tile = s.w >> 8;
            if (phase > unsigned(fa3::kEpilogue) || tile >= n_tiles || start == 0) {
                std::fprintf(stderr, "trace: %s CTA %d warpgroup %d span %u is malformed (phase %u, key tile %u, start %llu ns)\n",
                             kModeVariants[mode], block, wg, i, phase, tile, start);
                return "";
            }
            char buf[200];
            std::snprintf(buf, sizeof buf,
                          "%s{\"block\":%d,\"warpgroup\":%d,\"phase\":\"%s\",\"start_ns\":%llu,\"end_ns\":%llu,\"tile\":%u}",
                          items.empty() ? "" : ",", block, wg, kPhaseNames[phase], start, end, tile);
            items += buf;
        }
    }
    kwiki::Fields params = shape_params(p);
    params.push_back({"shape", std::to_string(p.batch) + "x" + std::to_string(p.heads) + "x" + std::to_string(p.seq)});
    params.push_back({"tile", "128x128"});
    params.push_back({"stages", fa3::STAGES});
    params.push_back({"traced_blocks", blocks});
    params.push_back({"span_tile", "key tile"});
    params.push_back({"spans_dropped", dropped});
    return "{\"artifact\":\"attention_timeline_sm90a\",\"variant\":\"" + std::string(kModeVariants[mode]) +
           "\",\"params\":" + kwiki::detail::object(params) + ",\"spans\":[" + items + "]}\n";
}

// The trace pass (--trace-out=PATH, at --shape, else the first of --shapes): per mode, the traced kernel once to warm
// up, then once into poisoned outputs and emptied counts; the outputs checked, the trace checked; the three lines
// written to PATH. 0 when they are written; 1 when an output or a trace is wrong (nothing written); 2 on a usage error.
int trace_pass(const kwiki::Args& args, uint64_t seed) {
    const std::string path = args.get_str("trace-out", "");
    if (path.empty() || path == "1") kwiki::Args::usage("--trace-out wants a file path: --trace-out=PATH");
    const bool one = args.has("shape");
    const auto shapes = args.get_shapes<Problem, 3>(one ? "shape" : "shapes", "", kShapeRule, launchable);
    if (one && shapes.size() != 1) kwiki::Args::usage("--trace-out wants one --shape=BATCHxHEADSxSEQ");
    const Problem p = shapes[0];
    std::fprintf(stderr, "attention_timeline: trace pass at %dx%dx%d, seed %llu, %d SMs\n", p.batch, p.heads, p.seq,
                 (unsigned long long)seed, kwiki::sm_count());
    Operands set;
    set.fill(p, kwiki::hash64(seed, 1000 + p.batch + 7ull * p.heads + 13ull * p.seq));
    const size_t rows = size_t(p.batch) * p.heads * p.seq;
    kwiki::DeviceBuffer<bf16> out(rows * kD);
    kwiki::DeviceBuffer<float> lse(rows);
    kwiki::DeviceBuffer<uint4> spans(size_t(fa3::TRACE_LANES) * fa3::LANE_CAPACITY);
    kwiki::DeviceBuffer<unsigned> counts(fa3::TRACE_LANES);
    const Launch l = prepare(set, out.get(), lse.get(), p);
    std::string lines;
    for (int mode = fa3::WS; mode <= fa3::OVERLAP; ++mode) {
        for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up (module load, caches): its stamps are reset
            kwiki::poison(out.get(), out.bytes()), kwiki::poison(lse.get(), lse.bytes());
            KWIKI_CHECK(cudaMemset(counts.get(), 0, counts.bytes()));
            run<true>(mode, l, fa3::Trace{spans.get(), counts.get()}, 0);
            KWIKI_CHECK(cudaDeviceSynchronize());
        }
        const kwiki::CheckResult c = check_output(out.get(), lse.get(), set);
        std::fprintf(stderr, "trace: %s check %s: %s\n", kModeVariants[mode], c.passed ? "passed" : "FAILED", c.detail.c_str());
        if (!c.passed) return 1;
        std::vector<uint4> host(spans.size());
        std::vector<unsigned> n(counts.size());
        KWIKI_CHECK(cudaMemcpy(host.data(), spans.get(), spans.bytes(), cudaMemcpyDeviceToHost));
        KWIKI_CHECK(cudaMemcpy(n.data(), counts.get(), counts.bytes(), cudaMemcpyDeviceToHost));
        const std::string line = timeline_json(mode, p, host, n);
        if (line.empty()) return 1;
        lines += line;
    }
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) kwiki::fail_env(__FILE__, __LINE__, path.c_str(), "cannot open the trace file for writing");
    const bool ok = std::fputs(lines.c_str(), f) >= 0;
    if (std::fclose(f) != 0 || !ok) kwiki::fail_env(__FILE__, __LINE__, path.c_str(), "cannot write the trace file");
    return 0;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order: fa3::Mode's)
// ===================================================================================================

constexpr kwiki::VariantInfo kVariants[] = {
    {"cuda_fa3_ws"},
    {"cuda_fa3_pingpong"},
    {"cuda_fa3_overlap"},
};

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);  // --list-variants exits in here, before any CUDA call
    if (m.args.has("trace-out")) return trace_pass(m.args, m.seed);  // the untimed trace pass, instead of the ladder
    const auto shapes = m.args.get_shapes<Problem, 3>("shapes", "", kShapeRule, launchable);
    kwiki::Runner& runner = m.start("attention_timeline");
    for (const Problem& p : shapes) {
        kwiki::InputSets<Operands> in(m.sets, kwiki::hash64(m.seed, 1000 + p.batch + 7ull * p.heads + 13ull * p.seq),
                                      [&](Operands& s, uint64_t seed) { s.fill(p, seed); });
        const size_t rows = size_t(p.batch) * p.heads * p.seq;
        kwiki::DeviceBuffer<bf16> out(rows * kD);
        kwiki::DeviceBuffer<float> lse(rows);
        std::vector<Launch> launches;  // one per input set, alive until the runner is done with the case
        for (int s = 0; s < in.size(); ++s) launches.push_back(prepare(in[s], out.get(), lse.get(), p));
        kwiki::run_ladder(runner, m.args, kVariants, [&](const kwiki::VariantInfo& v) {
            const int mode = int(&v - kVariants);  // the table's order is fa3::Mode's
            return attention_case(mode, in, launches, out.get(), lse.get(), p);
        });
    }
    return kwiki::exit_code();
}
