// gemv_bf16.cu: y = A x with A bf16 row-major M x K, x bf16, fp32 accumulation, y bf16; against cuBLAS.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o gemv_bf16 gemv_bf16.cu
// Run: ./gemv_bf16 [--shapes=4096x7168,7168x16384,8192x8192,16384x16384] [--variants a,b,c] [--input-sets=2]
//
// A GEMV reads every matrix element once and does 2 flops per 2 bytes: it is bound by memory bandwidth,
// so the ladder is about bytes in flight and load width, and the goal is the read ceiling for the same bytes.
// Reference: fp64 on the host from the same bf16 inputs; tolerance: rtol 2^-6 (bf16 output rounding is 2^-9) plus an atol
// that grows with K (check_y).
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
#include "kwiki_choice.cuh"
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

// One input set: A (M x K) and x (K), random in [-1, 1) (A from `seed`, x from seed ^ 0x77), and y's fp64 reference.
struct Inputs {
    kwiki::DeviceBuffer<bf16> A, x;
    std::vector<double> ref;

    void fill(int M, int K, uint64_t seed) {
        const size_t a_elems = size_t(M) * K;
        A = kwiki::DeviceBuffer<bf16>(a_elems), x = kwiki::DeviceBuffer<bf16>(size_t(K));
        kwiki::fill_random(A.get(), a_elems, seed, -1.0f, 1.0f);
        kwiki::fill_random(x.get(), size_t(K), seed ^ 0x77, -1.0f, 1.0f);
        std::vector<bf16> hA(a_elems), hx(K);
        KWIKI_CHECK(cudaMemcpy(hA.data(), A.get(), a_elems * sizeof(bf16), cudaMemcpyDeviceToHost));
        KWIKI_CHECK(cudaMemcpy(hx.data(), x.get(), size_t(K) * sizeof(bf16), cudaMemcpyDeviceToHost));
        ref = reference(hA, hx, M, K);
    }
};

// y's M elements against the set's reference, and its canary intact. rtol 2^-6 covers bf16 output rounding (2^-9);
// the atol, sqrt(K) x 2^-14, covers outputs near zero, where a kernel that sums the K products in another order or
// in other steps than the fp64 reference lands off it by an amount that grows with the sum's spread (sqrt(K)/3 across
// rows for products of standard deviation 1/3). The fixed atol of 1e-3 it replaces failed cuBLAS's own GEMV at
// 16384 x 16384 (nvjet_sm90_tst_128x8_64x12_2x1_v_bz) in 2 of about 20 runs on the H200 (2026-12-02); sqrt(16384) x
// 2^-14 is 7.8e-3, while a kernel that drops one 16-byte vector of a row (8 products, about 0.94 off) is still caught.
kwiki::CheckResult check_y(const bf16* y, int M, int K, const Inputs& set) {
    std::vector<float> got = kwiki::to_host_float(y, size_t(M));
    return kwiki::with_canary(kwiki::compare(got.data(), set.ref.data(), size_t(M), {std::sqrt(double(K)) / 16384.0, 2.0 / 128},
                                             "host fp64 from the same bf16 inputs"), y, size_t(M));
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


enum class Kind { Kernel, Tuned, Cublas, CublasLt, Ceiling };

// A row of the table of variants: what it launches (a block kernel's launch, for Kind::Kernel).
struct Variant : kwiki::VariantInfo {
    Kind kind;
    Launch launch;
};

using Todo = kwiki::GemvTodo<Kind, Launch>;
using Run = std::function<void(const Problem&, cudaStream_t)>;  // a variant's launch on the current input set

Run kernel_run(Launch l) { return [l](const Problem& p, cudaStream_t s) { run_kernel(l, p, s); }; }

// The selection passes of one shape: every block configuration (tuned) and every cuBLASLt candidate (cublaslt_best),
// each candidate a case that bind(case, run, flops dtype) completes, checked and timed on `selector`; or, in a run
// that times nothing, the choices `told` names for the shape (kwiki_choice.cuh).
struct Selections {
    kwiki::Selection tuned, lt_best;
    std::string tuned_name;
    std::unique_ptr<kwiki::LtGemmTn> ltg;

    static std::string lt_name(int i) { return "heuristic algorithm " + std::to_string(i); }  // its records' `selected`

    template <class Bind>
    Selections(kwiki::Runner& selector, const kwiki::Choices& told, const std::vector<Todo>& todo,
               const kwiki::BlasHandles& lib, const std::string& shape, int M, int K, Bind bind) {
        auto want_kind = [&](Kind k) { return std::any_of(todo.begin(), todo.end(), [k](const Todo& t) { return t.kind == k; }); };
        // kwiki:rung tuned
        if (want_kind(Kind::Tuned)) {
            if (const auto name = told.of("tuned", shape))
                tuned = kwiki::told_selection(kwiki::names_of(configs()), *name, "tuned", shape);
            else
                tuned = kwiki::select_config(selector, configs(), [&](kwiki::Case& c, Launch l) { bind(c, kernel_run(l), "fp32"); });
            if (tuned.index >= 0) tuned_name = configs()[size_t(tuned.index)].name;
        }
        // /kwiki:rung tuned
        // kwiki:rung cublaslt_best
        if (!want_kind(Kind::CublasLt)) return;
        ltg = std::make_unique<kwiki::LtGemmTn>(lib.lt, 1, M, K, kwiki::kGemmBf16, 8);
        if (const auto name = told.of("cublaslt_best", shape)) {
            std::vector<std::string> names;
            for (int i = 0; i < ltg->algos(); ++i) names.push_back(lt_name(i));
            lt_best = kwiki::told_selection(names, *name, "cublaslt_best", shape);
            return;
        }
        std::vector<kwiki::Case> cand;
        for (int i = 0; i < ltg->algos(); ++i) {
            kwiki::Case c;
            c.variant = "select_cublaslt_" + std::to_string(i);
            bind(c, [g = ltg.get(), i](const Problem& p, cudaStream_t s) { run_cublaslt(*g, i, p, s); }, "bf16");
            cand.push_back(std::move(c));
        }
        lt_best = kwiki::select_fastest(selector, cand);
        // /kwiki:rung cublaslt_best
    }
};

// A ladder variant's case at `params`: its run (tuned: the selection's configuration; cublaslt_best: the heuristic's
// fastest candidate), completed by bind(case, run, flops dtype), and what its record adds (registers, occupancy,
// threads, rows per block; what a selection chose and from how many).
template <class Bind>
kwiki::Case ladder_case(const Todo& v, const Selections& sel, const kwiki::Fields& params, Bind bind) {
    kwiki::Case c = kwiki::named_case(v.name, params);
    const kwiki::Selection& chosen = v.kind == Kind::Tuned ? sel.tuned : sel.lt_best;
    if ((v.kind == Kind::Tuned || v.kind == Kind::CublasLt) && chosen.index < 0) {  // no candidate passed (or --check-only)
        kwiki::nothing_selected(c, "no candidate of the selection pass passed its check and was timed");
        return c;
    }
    const Launch l = v.kind == Kind::Tuned ? config(sel.tuned_name.c_str()) : v.launch;
    const bool library = v.kind == Kind::Cublas || v.kind == Kind::CublasLt;
    if (v.kind == Kind::Cublas) bind(c, [](const Problem& p, cudaStream_t s) { run_cublas(p, s); }, "bf16");
    else if (v.kind == Kind::CublasLt)
        bind(c, [g = sel.ltg.get(), i = sel.lt_best.index](const Problem& p, cudaStream_t s) { run_cublaslt(*g, i, p, s); }, "bf16");
    else bind(c, kernel_run(l), "fp32");  // the kernels multiply-add in fp32
    if (!library) {
        kwiki::add_occupancy(c.extra, reinterpret_cast<const void*>(l.kernel), l.threads);
        c.extra.emplace_back("threads", l.threads);
        c.extra.emplace_back("rows_per_block", l.rows_per_block);
    }
    if (v.kind == Kind::Tuned || v.kind == Kind::CublasLt) {
        if (v.kind == Kind::Tuned) c.extra.emplace_back("selected", sel.tuned_name);
        else c.extra.emplace_back("selected", Selections::lt_name(chosen.index));
        c.extra.emplace_back("selected_from", chosen.tried);
        if (chosen.median_us) c.extra.emplace_back("selection_median_us", *chosen.median_us);
    }
    return c;
}

// ===================================================================================================
// The table of variants (artifact.yaml lists the same names, in this order)
// ===================================================================================================

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

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    const auto parse_shapes = [](const kwiki::Args& args) {  // the manifest's; K a multiple of 8 (16-byte rows)
        return args.get_shapes<std::pair<int, int>, 2>("shapes", "", "MxK pairs with K a multiple of 8", [](const std::vector<int>& d) { return d[1] % 8 == 0; });
    };
    // --choose: the timed run's choices, told to a profiled run (kwiki_choice.cuh); refused before any CUDA call
    const kwiki::Choices told{kwiki::Args(argc, argv)};
    kwiki::GemvMain<std::pair<int, int>> m(argc, argv, kVariants, "gemv_bf16", parse_shapes);
    const kwiki::BlasHandles lib(m.args.want("cublas"), m.args.want("cublaslt_best"));  // loaded only for their variants
    kwiki::Runner runner(m.args);
    const auto selector = kwiki::selection_runner(m.args);  // the selection passes: samples of their own, no records
    const auto roof = kwiki::gemv_roof(runner, m.args, m.seed, "read_ceiling");  // the read roof, swept once
    const auto todo = kwiki::gemv_todo(m.args, kVariants, configs(), Kind::Kernel, [](const Variant& v) { return v.kind != Kind::Ceiling; });
    for (const auto& shape : m.shapes) {
        const int M = shape.first, K = shape.second;
        kwiki::DeviceBuffer<bf16> y(size_t(M) + kwiki::kCanary);
        kwiki::set_canary(y.get(), size_t(M));  // y[M..M+kCanary) must stay as set (kwiki_gemv.cuh)
        kwiki::InputSets<Inputs> in(m.sets, m.seed + uint64_t(M) * 1000003u + K, [&](Inputs& s, uint64_t seed) { s.fill(M, K, seed); });
        const double bytes = double(size_t(M) * K + K + M) * sizeof(bf16);
        const std::string shape_text = std::to_string(M) + "x" + std::to_string(K);
        const kwiki::Fields params = {{"shape", shape_text}, {"M", M}, {"K", K}, {"dtype", "bf16"}};
        // what every case of this shape shares: bytes, flops, the launch on the current set, poison, the check, the sets
        auto bind = [&](kwiki::Case& c, Run run, const char* flops_dtype) {
            c.params = params, c.bytes = bytes, c.flops = 2.0 * double(M) * K, c.flops_dtype = flops_dtype;
            c.launch = [&, run](cudaStream_t s) { run(Problem{M, K, in.current().A.get(), in.current().x.get(), y.get(), lib.blas}, s); };
            in.bind(c, [&y, M](cudaStream_t s) { kwiki::poison(y.get(), size_t(M) * sizeof(bf16), s); },
                    [&y, M, K](const Inputs& set) { return check_y(y.get(), M, K, set); });
        };
        const Selections sel(*selector, told, todo, lib, shape_text, M, K, bind);
        std::vector<kwiki::Case> cases;
        for (const Todo& v : todo) cases.push_back(ladder_case(v, sel, params, bind));
        kwiki::run_shape(runner, cases, roof.get(), "read_ceiling", params, bytes);
    }
    return kwiki::exit_code();
}
