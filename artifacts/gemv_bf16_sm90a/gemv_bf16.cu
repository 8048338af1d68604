// gemv_bf16.cu: y = A x with A bf16 row-major M x K, x bf16, fp32 accumulation, y bf16; against cuBLAS.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o gemv_bf16 gemv_bf16.cu
// Run: ./gemv_bf16 [--shapes=4096x7168,7168x16384,8192x8192,16384x16384] [--variants a,b,c] [--input-sets=2]
//
// A GEMV reads every matrix element once and does 2 flops per 2 bytes: it is bound by memory bandwidth,
// so the ladder is about bytes in flight and load width, and the goal is the read ceiling for the same bytes.
// Reference: fp64 on the host from the same bf16 inputs; tolerance: bf16 output rounding (rtol 2^-7) plus atol 1e-3.
// Inputs: --input-sets (2) pre-filled sets of A and x, each with its reference; each timed sample reads one of
// them at random (kwiki::Runner), and the re-checked samples are compared with that set's reference.
//
// Variants: the ladder is artifact.yaml's (each variant's rung, what it adds and its description, in the
// order of the table below, which holds the names only); each rung's code is a marked region of this file.
// Bytes per record: A + x + y. read_ceiling is not a rung: the speed of light, the GEMV's bytes over the read
// bandwidth fitted in the same run over a size sweep of read kernels (kwiki_ceiling.cuh).
// --sweep adds every block configuration of configs() as a variant sweep_<config>.
// Shapes: any M (the last block of an M that is not a multiple of its rows is guarded), K a multiple of 8 (rows are
// read in 16-byte vectors, so each row must start 16-byte aligned); the manifest's shapes include 4099x4104, one
// that is a multiple of no block's rows nor of any round of chunks. y carries a canary past its M elements, which
// the check requires intact (a kernel that writes past y[M-1] fails).
#include "kwiki_bench.cuh"
#include "kwiki_cublas.cuh"
#include "kwiki_gemv.cuh"
#include "kwiki_reduce.cuh"


namespace {

using bf16 = __nv_bfloat16;

// ===================================================================================================
// Reference: fp64 on the host
// ===================================================================================================

std::vector<double> reference(const std::vector<bf16>& A, const std::vector<bf16>& x, int M, int K) {
    std::vector<double> xd(K), y(M);
    for (int k = 0; k < K; ++k) xd[k] = __bfloat162float(x[k]);
    kwiki::parallel_for(size_t(M), [&](size_t m0, size_t m1) {
        for (size_t m = m0; m < m1; ++m) {
            const bf16* row = A.data() + m * size_t(K);
            double s = 0;
            for (int k = 0; k < K; ++k) s += double(__bfloat162float(row[k])) * xd[k];
            y[m] = s;
        }
    });
    return y;
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// kwiki:rung warp_r4_v16
enum class Hint { Plain, Stream, Keep };  // Stream: L1::no_allocate (A); Keep: .nc L1::evict_last (x)

template <Hint H>
__device__ __forceinline__ uint4 ld16(const uint4* p) {
    uint4 r;
    if constexpr (H == Hint::Stream)
        asm("ld.global.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    else if constexpr (H == Hint::Keep)
        asm("ld.global.nc.L1::evict_last.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
    else
        r = *p;
    return r;
}
// /kwiki:rung warp_r4_v16

// kwiki:rung warp_row_v16
// bf16 pair in one 32-bit word to two floats: a bf16 is the high half of a float.
__device__ __forceinline__ float lo_f(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

__device__ __forceinline__ float dot8(uint4 a, uint4 x, float acc) {
    acc = fmaf(lo_f(a.x), lo_f(x.x), acc); acc = fmaf(hi_f(a.x), hi_f(x.x), acc);
    acc = fmaf(lo_f(a.y), lo_f(x.y), acc); acc = fmaf(hi_f(a.y), hi_f(x.y), acc);
    acc = fmaf(lo_f(a.z), lo_f(x.z), acc); acc = fmaf(hi_f(a.z), hi_f(x.z), acc);
    acc = fmaf(lo_f(a.w), lo_f(x.w), acc); acc = fmaf(hi_f(a.w), hi_f(x.w), acc);
    return acc;
}
// /kwiki:rung warp_row_v16

// kwiki:rung warp_r4_v16
// s[r] += dot(row r of a, x) over this thread's chunks j = first, first + step, ... (16 B each); whole rounds of
// U chunks per row are loaded before any is used (R * U loads in flight), the last partial round one by one.
// Only the first `rows` (1..R) rows exist (the last block of an M that is not a multiple of R): rows past them
// re-read the last row (in bounds; their sums are never stored).
template <int R, int U, int Step>
__device__ __forceinline__ void rows_dot(const uint4* a, const uint4* xv, int K8, int first, int rows, float (&s)[R]) {
    size_t off[R];
#pragma unroll
    for (int r = 0; r < R; ++r) off[r] = size_t(min(r, rows - 1)) * K8;
    int j0 = first;
    for (; j0 + (U - 1) * Step < K8; j0 += U * Step) {
        uint4 av[R][U], xs[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            xs[u] = ld16<Hint::Keep>(xv + j0 + u * Step);
#pragma unroll
            for (int r = 0; r < R; ++r) av[r][u] = ld16<Hint::Stream>(a + off[r] + j0 + u * Step);
        }
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r) s[r] = dot8(av[r][u], xs[u], s[r]);
    }
    for (; j0 < K8; j0 += Step) {
        uint4 xs = ld16<Hint::Keep>(xv + j0);
#pragma unroll
        for (int r = 0; r < R; ++r) s[r] = dot8(ld16<Hint::Stream>(a + off[r] + j0), xs, s[r]);
    }
}
// /kwiki:rung warp_r4_v16

// kwiki:rung naive
__global__ void naive_kernel(const bf16* A, const bf16* x, bf16* y, int M, int K) {
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m >= M) return;
    float s = 0;
    for (int k = 0; k < K; ++k) s += __bfloat162float(A[size_t(m) * K + k]) * __bfloat162float(x[k]);
    y[m] = __float2bfloat16_rn(s);
}
// /kwiki:rung naive

// kwiki:rung warp_row
__global__ void warp_row_kernel(const bf16* A, const bf16* x, bf16* y, int M, int K) {
    int m = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
    if (m >= M) return;
    float s = 0;
    for (int k = lane; k < K; k += 32) s += __bfloat162float(A[size_t(m) * K + k]) * __bfloat162float(x[k]);
    s = kwiki::warp_sum(s);
    if (lane == 0) y[m] = __float2bfloat16_rn(s);
}
// /kwiki:rung warp_row

// kwiki:rung warp_row_v16
__global__ void warp_row_v16_kernel(const bf16* A, const bf16* x, bf16* y, int M, int K) {
    int m = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x & 31;
    if (m >= M) return;
    const uint4* a = reinterpret_cast<const uint4*>(A + size_t(m) * K);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    float s = 0;
    for (int j = lane; j < K / 8; j += 32) s = dot8(a[j], xv[j], s);
    s = kwiki::warp_sum(s);
    if (lane == 0) y[m] = __float2bfloat16_rn(s);
}
// /kwiki:rung warp_row_v16

// kwiki:rung warp_r4_v16
// One warp, R rows, U chunks of 16 B per row in flight.
template <int R, int U>
__global__ void __launch_bounds__(256, 1) warp_rows_kernel(const bf16* A, const bf16* x, bf16* y, int M, int K) {
    const int row0 = (blockIdx.x * blockDim.x + threadIdx.x) / 32 * R, lane = threadIdx.x & 31;
    if (row0 >= M) return;
    const int K8 = K / 8;
    const uint4* a = reinterpret_cast<const uint4*>(A + size_t(row0) * K);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    float s[R] = {};
    rows_dot<R, U, 32>(a, xv, K8, lane, min(R, M - row0), s);
#pragma unroll
    for (int r = 0; r < R; ++r) {
        float t = kwiki::warp_sum(s[r]);
        if (lane == 0 && row0 + r < M) y[row0 + r] = __float2bfloat16_rn(t);
    }
}
// /kwiki:rung warp_r4_v16

// kwiki:rung block_r2_u4
// Block-wide split-K: T threads share R rows; each thread keeps U chunks per row in flight. The last block of an M
// that is not a multiple of R has fewer rows (rows_dot and the store are guarded).
template <int R, int U, int T>
__global__ void __launch_bounds__(T, 1) block_rows_kernel(const bf16* A, const bf16* x, bf16* y, int M, int K) {
    constexpr int W = T / 32;
    __shared__ float part[W][R];
    const int row0 = blockIdx.x * R, K8 = K / 8, lane = threadIdx.x & 31, warp = threadIdx.x / 32;
    const uint4* a = reinterpret_cast<const uint4*>(A + size_t(row0) * K);
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    float s[R] = {};
    rows_dot<R, U, T>(a, xv, K8, threadIdx.x, min(R, M - row0), s);
    const float t = kwiki::block_sum_rows<R, W>(s, part, threadIdx.x, lane, warp);
    if (threadIdx.x < R && row0 + int(threadIdx.x) < M) y[row0 + threadIdx.x] = __float2bfloat16_rn(t);
}
// /kwiki:rung block_r2_u4

// ===================================================================================================
// Launchers
// ===================================================================================================

struct Problem {
    int M, K;
    bf16 *A, *x, *y;
    kwiki::cublasHandle_t blas;
};

using Kernel = void (*)(const bf16*, const bf16*, bf16*, int, int);

struct Launch {
    Kernel kernel;
    int threads;
    int rows_per_block;
};

template <int R, int U, int T>
constexpr Launch block_cfg() { return {block_rows_kernel<R, U, T>, T, R}; }

// kwiki:rung tuned
// Block configurations (rows per block, chunks in flight per row, threads) that --sweep times one by one,
// and that the selection pass of `tuned` times, in samples of its own.
using Config = kwiki::GemvConfig<Launch>;
const std::vector<Config>& configs() {
    static const std::vector<Config> c = {
        {"r1_u4_t256", block_cfg<1, 4, 256>()}, {"r1_u8_t128", block_cfg<1, 8, 128>()},
        {"r2_u2_t256", block_cfg<2, 2, 256>()}, {"r2_u4_t256", block_cfg<2, 4, 256>()},
        {"r2_u4_t128", block_cfg<2, 4, 128>()}, {"r2_u2_t512", block_cfg<2, 2, 512>()},
        {"r4_u2_t256", block_cfg<4, 2, 256>()}, {"r4_u4_t256", block_cfg<4, 4, 256>()},
        {"r4_u2_t128", block_cfg<4, 2, 128>()}, {"r8_u1_t256", block_cfg<8, 1, 256>()},
        {"r8_u2_t256", block_cfg<8, 2, 256>()}, {"r1_u4_t512", block_cfg<1, 4, 512>()},
        {"r2_u1_t512", block_cfg<2, 1, 512>()}, {"r4_u1_t512", block_cfg<4, 1, 512>()},
        {"r2_u2_t1024", block_cfg<2, 2, 1024>()}, {"r1_u2_t1024", block_cfg<1, 2, 1024>()},
        {"r4_u2_t512", block_cfg<4, 2, 512>()},
    };
    return c;
}
// /kwiki:rung tuned

Launch config(const char* name) { return kwiki::find_config(configs(), name); }

void run_kernel(const Launch& l, const Problem& p, cudaStream_t s) {
    const int rows_per_block = l.rows_per_block;
    l.kernel<<<(p.M + rows_per_block - 1) / rows_per_block, l.threads, 0, s>>>(p.A, p.x, p.y, p.M, p.K);
}

// kwiki:rung cublas
// y[1,M] = x[1,K] * A[M,K]^T: the TN GEMM of kwiki_cublas.cuh with one row.
void run_cublas(const Problem& p, cudaStream_t s) { kwiki::gemm_tn(p.blas, p.x, p.A, p.y, 1, p.M, p.K, kwiki::kGemmBf16, s); }
// /kwiki:rung cublas

// kwiki:rung cublaslt_best
// The same through cuBLASLt with candidate algorithm i of the shape's heuristic list.
void run_cublaslt(const kwiki::LtGemmTn& g, int i, const Problem& p, cudaStream_t s) { g.run(i, p.x, p.A, p.y, s); }
// /kwiki:rung cublaslt_best

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, rungs and what each adds)
// ===================================================================================================

enum class Kind { Kernel, Tuned, Cublas, CublasLt, Ceiling };

struct Variant : kwiki::VariantInfo {
    Kind kind;
    Launch launch;
};

constexpr Variant kVariants[] = {
    {{"naive"}, Kind::Kernel, {naive_kernel, 256, 256}},
    {{"warp_row"}, Kind::Kernel,
     {warp_row_kernel, 256, 8}},
    {{"warp_row_v16"}, Kind::Kernel, {warp_row_v16_kernel, 256, 8}},
    {{"warp_r4_v16"}, Kind::Kernel,
     {warp_rows_kernel<4, 2>, 256, 32}},
    {{"block_r2_u4"}, Kind::Kernel,
     block_cfg<2, 4, 256>()},
    // kwiki:rung block_r4_u2
    {{"block_r4_u2"}, Kind::Kernel, block_cfg<4, 2, 256>()},
    // /kwiki:rung block_r4_u2
    {{"tuned"}, Kind::Tuned, {}},
    {{"cublas"}, Kind::Cublas, {}},
    {{"cublaslt_best"},
     Kind::CublasLt, {}},
    {{"read_ceiling"}, Kind::Ceiling, {}},  // not a rung: the speed of light, from the run's read roof
};

const char* kDefaultShapes = "";  // none: the manifest declares the shapes (artifact.yaml, shapes)

std::vector<std::pair<int, int>> parse_shapes(const kwiki::Args& args) {
    return args.get_shapes<std::pair<int, int>, 2>("shapes", kDefaultShapes, "MxK pairs with K a multiple of 8",
                                                   [](const std::vector<int>& d) { return d[1] % 8 == 0; });
}

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::GemvMain<std::pair<int, int>> m(argc, argv, kVariants, "gemv_bf16", parse_shapes);
    const kwiki::Args& args = m.args;
    const int sets = m.sets;

    kwiki::cublasHandle_t blas = nullptr;  // cuBLAS is loaded only when its variant runs
    if (args.want("cublas")) KWIKI_CHECK_STATUS(kwiki::cublas().Create(&blas));
    kwiki::cublasLtHandle_t lt = nullptr;
    if (args.want("cublaslt_best")) KWIKI_CHECK_STATUS(kwiki::cublasLt().Create(&lt));
    kwiki::Runner runner(args);
    // the selection pass of `tuned` and `cublaslt_best`: samples of their own, records not emitted
    const auto selector = kwiki::selection_runner(args);

    const auto roof = kwiki::gemv_roof(runner, args, m.seed, "read_ceiling");  // the read roof, swept once
    const auto todo = kwiki::gemv_todo(args, kVariants, configs(), Kind::Kernel, [](const Variant& v) { return v.kind != Kind::Ceiling; });
    using Todo = decltype(todo)::value_type;

    for (auto [M, K] : m.shapes) {
        Problem p{M, K, nullptr, nullptr, nullptr, blas};
        const size_t a_elems = size_t(M) * K;
        KWIKI_CHECK(cudaMalloc(&p.y, (size_t(M) + kwiki::kCanary) * sizeof(bf16)));
        kwiki::set_canary(p.y, size_t(M));  // y[M..M+kCanary) must stay as set (kwiki_gemv.cuh)
        // input sets: A and x filled at random (set 0 from the shape's seed, as protocol 1 did), each with its reference
        std::vector<bf16*> As(sets), xs(sets);
        std::vector<std::vector<double>> refs(sets);
        const uint64_t shape_seed = m.seed + uint64_t(M) * 1000003u + K;
        for (int i = 0; i < sets; ++i) {
            const uint64_t si = i == 0 ? shape_seed : kwiki::hash64(shape_seed, 0x5e7 + uint64_t(i));
            KWIKI_CHECK(cudaMalloc(&As[i], a_elems * sizeof(bf16)));
            KWIKI_CHECK(cudaMalloc(&xs[i], size_t(K) * sizeof(bf16)));
            kwiki::fill_random(As[i], a_elems, si, -1.0f, 1.0f);
            kwiki::fill_random(xs[i], size_t(K), si ^ 0x77, -1.0f, 1.0f);
            std::vector<bf16> hA(a_elems), hx(K);
            KWIKI_CHECK(cudaMemcpy(hA.data(), As[i], a_elems * sizeof(bf16), cudaMemcpyDeviceToHost));
            KWIKI_CHECK(cudaMemcpy(hx.data(), xs[i], size_t(K) * sizeof(bf16), cudaMemcpyDeviceToHost));
            refs[i] = reference(hA, hx, M, K);
        }
        int current = 0;
        auto use_inputs = [&p, &As, &xs, &current](int i) { current = i, p.A = As[i], p.x = xs[i]; };
        use_inputs(0);
        const double bytes = double(a_elems + K + M) * sizeof(bf16);

        char shape[32];
        std::snprintf(shape, sizeof shape, "%dx%d", M, K);
        const kwiki::Fields params = {{"shape", shape}, {"M", M}, {"K", K}, {"dtype", "bf16"}};
        // what every case of this shape shares: bytes, flops, poison, the check (with the canary), the input sets
        auto fill_case = [&](kwiki::Case& c, std::function<void(cudaStream_t)> launch, const char* flops_dtype) {
            c.params = params;
            c.bytes = bytes;
            c.flops = 2.0 * double(p.M) * p.K;
            c.flops_dtype = flops_dtype;
            c.launch = std::move(launch);
            c.poison = [&p](cudaStream_t s) { kwiki::poison(p.y, size_t(p.M) * sizeof(bf16), s); };
            c.check = [&p, &refs, &current] {
                std::vector<float> got = kwiki::to_host_float(p.y, size_t(p.M));
                return kwiki::with_canary(kwiki::compare(got.data(), refs[current].data(), size_t(p.M), {1e-3, 2.0 / 128},
                                                         "host fp64 from the same bf16 inputs"), p.y, size_t(p.M));
            };
            c.input_sets = sets;
            c.use_inputs = use_inputs;
        };
        // the selection pass: every block configuration (tuned) and every cuBLASLt candidate (cublaslt_best)
        auto want_kind = [&](Kind k) { return std::any_of(todo.begin(), todo.end(), [k](const Todo& t) { return t.kind == k; }); };
        kwiki::Selection tuned, lt_best;
        std::string tuned_name;
        if (want_kind(Kind::Tuned)) {
            tuned = kwiki::select_config(*selector, configs(), [&](kwiki::Case& c, Launch l) {
                fill_case(c, [&p, l](cudaStream_t s) { run_kernel(l, p, s); }, "fp32");
            });
            if (tuned.index >= 0) tuned_name = configs()[size_t(tuned.index)].name;
        }
        std::unique_ptr<kwiki::LtGemmTn> ltg;
        if (want_kind(Kind::CublasLt)) {
            ltg = std::make_unique<kwiki::LtGemmTn>(lt, 1, M, K, kwiki::kGemmBf16, 8);
            std::vector<kwiki::Case> cand;
            for (int i = 0; i < ltg->algos(); ++i) {
                kwiki::Case c;
                c.variant = "select_cublaslt_" + std::to_string(i);
                fill_case(c, [&p, g = ltg.get(), i](cudaStream_t s) { run_cublaslt(*g, i, p, s); }, "bf16");
                cand.push_back(std::move(c));
            }
            lt_best = kwiki::select_fastest(*selector, cand);
        }

        std::vector<kwiki::Case> cases;
        for (const Todo& v : todo) {
            kwiki::Case c = kwiki::named_case(v.name, params);
            const kwiki::Selection& sel = v.kind == Kind::Tuned ? tuned : lt_best;
            if ((v.kind == Kind::Tuned || v.kind == Kind::CublasLt) && sel.index < 0) {  // no candidate passed (or --check-only)
                kwiki::nothing_selected(c, "no candidate of the selection pass passed its check and was timed");
                cases.push_back(std::move(c));
                continue;
            }
            const Launch l = v.kind == Kind::Tuned ? config(tuned_name.c_str()) : v.launch;
            const bool library = v.kind == Kind::Cublas || v.kind == Kind::CublasLt;
            if (v.kind == Kind::Cublas) fill_case(c, [&p](cudaStream_t s) { run_cublas(p, s); }, "bf16");
            else if (v.kind == Kind::CublasLt)
                fill_case(c, [&p, g = ltg.get(), i = lt_best.index](cudaStream_t s) { run_cublaslt(*g, i, p, s); }, "bf16");
            else fill_case(c, [&p, l](cudaStream_t s) { run_kernel(l, p, s); }, "fp32");  // the kernels multiply-add in fp32
            c.variant = v.name;
            if (!library) {
                kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(l.kernel), l.threads);
                c.extra.emplace_back("threads", l.threads);
                c.extra.emplace_back("rows_per_block", l.rows_per_block);
            }
            if (v.kind == Kind::Tuned || v.kind == Kind::CublasLt) {
                if (v.kind == Kind::Tuned) c.extra.emplace_back("selected", tuned_name);
                else c.extra.emplace_back("selected", "heuristic algorithm " + std::to_string(sel.index));
                c.extra.emplace_back("selected_from", sel.tried);
                if (sel.median_us) c.extra.emplace_back("selection_median_us", *sel.median_us);
            }
            cases.push_back(std::move(c));
        }
        kwiki::run_shape(runner, cases, roof.get(), "read_ceiling", params, bytes);
        KWIKI_CHECK(cudaFree(p.y));
        for (int i = 0; i < sets; ++i) KWIKI_CHECK(cudaFree(As[i])), KWIKI_CHECK(cudaFree(xs[i]));
    }
    if (blas) KWIKI_CHECK_STATUS(kwiki::cublas().Destroy(blas));
    if (lt) KWIKI_CHECK_STATUS(kwiki::cublasLt().Destroy(lt));
    return kwiki::exit_code();
}
