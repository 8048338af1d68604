// launch_chain.cu: what a kernel launch costs on Hopper, and what CUDA Graphs and Programmatic Dependent Launch (PDL)
// buy back, for a chain of 20 dependent short kernels such as a decode step's GEMVs and norms (page
// technique-launch-cost). Every variant runs the same step kernel 20 times; only how the launches reach the GPU
// changes: plain <<<>>> launches on a stream, the same launches captured once into a CUDA Graph, launches with the
// programmatic-stream-serialization attribute (the kernel waits on its predecessor with griddepcontrol.wait and
// lets its successor launch with griddepcontrol.launch_dependents), and those captured into a graph. `single` is one
// step alone, for the time of one kernel.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o launch_chain launch_chain.cu
// Run: ./launch_chain --elems=N,... --timing=events [--variants a,b,c] [--seed=N] [--input-sets=2]
//
// The step, like a decode layer: step s reads its own weight vector w_s (n fp32, cold in DRAM: the 20 of them are
// 3x the L2 or more at every size but the tiny ones) and the activation the step before it wrote (y_s, n fp32, still
// in the L2 where it fits), and writes y_{s+1} = y_s * w_s + 0.25 (one fma per element), with 16-byte loads and
// stores. y_0 is the input x; y_1 and y_2 alternate between two buffers (ping-pong), so y_20 lands in the second.
// Timing: by CUDA events around the whole chain (the manifest passes --timing=events). CUPTI's busy time is the union
// of the kernels' intervals and would leave out the gaps between launches, which are what this artifact measures;
// which kernels ran is checked in a separate CUPTI pass of kwiki's.
// Bytes per record: what must cross DRAM, each step's weights and the chain's input (4n per launch, plus 4n); the
// activations between steps are L2 traffic at the small sizes and are not counted.
// Shapes: N elements per step, any N >= 1 (N % 4 trailing elements are handled one by one); the manifest's include
// 1024 (one block: the chain is all launch cost) and 100003 (off the block tile and the vector width).
// Reference: the 20-step recurrence in fp64 on the device from the same fp32 inputs, and the first step alone (for
// `single`); both outputs are poisoned before every checked run. Variants, their rungs and what each adds:
// artifact.yaml; each rung's code is a marked region (CONTRIBUTING.md, convention 17).
#include "kwiki_bench.cuh"

#include <memory>

namespace {

constexpr int kSteps = 20;        // the chain: a decode step's GEMVs and norms
constexpr int kThreads = 256;     // every step kernel's block
constexpr int kUnroll = 4;        // 16-byte vectors a thread has in flight per array and iteration
constexpr int kBlocksPerSm = 2;   // the grid: one wave of 2 blocks an SM, leaving room on every SM for the next
                                  // step's blocks, which PDL lets in while this step's tail runs
constexpr float kAdd = 0.25f;     // y' = y * w + 0.25: every term positive, so no cancellation (see the tolerance)

// ===================================================================================================
// Reference: the chain in fp64 on the device
// ===================================================================================================

// The weights of step s start at w + s * stride: n rounded up to a multiple of 4, so each starts 16-byte aligned.
size_t stride_of(size_t n) { return (n + 3) / 4 * 4; }

// ref1: y_1 (one step, for `single`); ref20: y_20 (the chain), both from the fp32 inputs, in fp64.
__global__ void reference_chain(const float* x, const float* w, size_t n, size_t stride, double* ref1, double* ref20) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        double y = x[i];
        for (int s = 0; s < kSteps; ++s) {
            y = y * double(w[s * stride + i]) + double(kAdd);
            if (s == 0) ref1[i] = y;
        }
        ref20[i] = y;
    }
}

// One input set: the chain's input, its 20 weight vectors, and the references.
struct Inputs {
    kwiki::DeviceBuffer<float> x, w;
    kwiki::DeviceBuffer<double> ref1, ref20;
};

// x uniform in [1, 2), weights in [0.5, 1): y stays within [0.25, 2) and positive at every step.
void fill_inputs(Inputs& s, size_t n, uint64_t seed) {
    const size_t stride = stride_of(n);
    s.x = kwiki::DeviceBuffer<float>(n), s.w = kwiki::DeviceBuffer<float>(kSteps * stride);
    s.ref1 = kwiki::DeviceBuffer<double>(n), s.ref20 = kwiki::DeviceBuffer<double>(n);
    kwiki::fill_random(s.x.get(), n, seed, 1.0f, 2.0f);
    kwiki::fill_random(s.w.get(), kSteps * stride, kwiki::hash64(seed, 0x3e1), 0.5f, 1.0f);
    const unsigned grid = unsigned(std::min<size_t>((n + 255) / 256, 65536));
    reference_chain<<<grid, 256>>>(s.x.get(), s.w.get(), n, stride, s.ref1.get(), s.ref20.get());
    KWIKI_CHECK_LAST();
    KWIKI_CHECK(cudaDeviceSynchronize());
}

// Tolerance, against the fp64 reference: each step is one fp32 fma, rounded once (relative 2^-24). With every term
// positive the error a step inherits is scaled by y * w / y' < 1, so after 20 steps it is at most 20 * 2^-24 = 1.2e-6
// relative; rtol 2.5e-6 leaves twice that. A skipped, repeated or reordered step, a stale or poisoned activation,
// moves an element by far more (the weights differ from step to step by up to 0.5).
constexpr kwiki::Tolerance kTol{1e-12, 2.5e-6};

// What the variants write: the two activation buffers the chain alternates between (y_20 lands in b, `single`'s
// y_1 in a).
struct Outputs {
    size_t n;
    kwiki::DeviceBuffer<float> a, b;
    explicit Outputs(size_t n_) : n(n_), a(n_), b(n_) {}
};

kwiki::CheckResult check_outputs(const Outputs& o, const Inputs& in, bool single) {
    return single ? kwiki::compare_device(o.a.get(), in.ref1.get(), o.n, kTol, "device fp64, one step")
                  : kwiki::compare_device(o.b.get(), in.ref20.get(), o.n, kTol, "device fp64, 20 steps");
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// kwiki:rung pdl
// griddepcontrol.wait: returns once every grid this one depends on programmatically has completed and its writes
// are visible (at once when there is none). griddepcontrol.launch_dependents: this block no longer holds back the
// launch of the grid that depends on it; once every block has said so (or exited) that grid may start.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_launch_dependents() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
// /kwiki:rung pdl

// kwiki:rung stream
// kUnroll vectors of p, thread-strided from v (those past nv are left as they are).
__device__ __forceinline__ void load_batch(float4 (&r)[kUnroll], const float4* p, size_t v, size_t step,
                                           size_t nv) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
        if (v + u * step < nv) r[u] = p[v + u * step];
}

__device__ __forceinline__ float4 fma4(float4 y, float4 w) {
    return make_float4(__fmaf_rn(y.x, w.x, kAdd), __fmaf_rn(y.y, w.y, kAdd), __fmaf_rn(y.z, w.z, kAdd), __fmaf_rn(y.w, w.w, kAdd));
}

// One step, out = in * w + 0.25, over n floats: 16-byte vectors in a grid-stride loop, kUnroll of them in flight per
// array, then the n % 4 trailing elements one by one. With PDL the weights of the first batch (which no earlier
// step writes) are loaded before the wait, so they arrive while the step before is still finishing; everything that
// reads `in` or writes `out` comes after it (`out` is the buffer the step before last read: a write before the wait
// would race with it). The trigger comes once the first batch of `in` is loaded, not earlier: triggered at the start,
// the steps after this one would launch one after the other and hold SM slots while they wait; here at most the next
// step launches, onto the room the grid leaves (kBlocksPerSm), while this one streams the rest of its data.
// No pointer is __restrict__: nvcc would then read `in` and `w` with ld.global.nc, whose contract is data that no one
// writes while the kernel runs, and ptxas moves such loads across griddepcontrol.wait in either direction (nvcc 13:
// the weights below it, and `in` above it, a read of the step before's output before it is written). Under PDL `in`
// is written by the step before while this one already runs. The manifest forbids LDG.CONSTANT in the PDL kernel.
template <bool kPdl>
__global__ void __launch_bounds__(kThreads) step_kernel(const float* in, const float* w, float* out, size_t n) {
    const size_t nv = n / 4, step = size_t(gridDim.x) * kThreads;
    const float4* in4 = reinterpret_cast<const float4*>(in);
    const float4* w4 = reinterpret_cast<const float4*>(w);
    float4* out4 = reinterpret_cast<float4*>(out);
    size_t v = size_t(blockIdx.x) * kThreads + threadIdx.x;
    float4 wv[kUnroll], yv[kUnroll];
    load_batch(wv, w4, v, step, nv);
    if constexpr (kPdl) pdl_wait();
    load_batch(yv, in4, v, step, nv);
    if constexpr (kPdl) pdl_launch_dependents();
    for (;;) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
            if (v + u * step < nv) out4[v + u * step] = fma4(yv[u], wv[u]);
        v += kUnroll * step;
        if (v >= nv) break;
        load_batch(wv, w4, v, step, nv);
        load_batch(yv, in4, v, step, nv);
    }
    const size_t t = 4 * nv + size_t(blockIdx.x) * kThreads + threadIdx.x;  // the trailing n % 4
    if (t < n) out[t] = __fmaf_rn(in[t], w[t], kAdd);
}
// /kwiki:rung stream

// ===================================================================================================
// Launchers
// ===================================================================================================

// What a chain reads and writes: one input set's x and weights, the two activation buffers, the grid.
struct Chain {
    const float* x;
    const float* w;
    float *a, *b;
    size_t n, stride;
    unsigned grid;
    // Step s reads x (s = 0) or what step s - 1 wrote, with weights w_s, and writes a (s even) or b (s odd).
    const float* in(int s) const { return s == 0 ? x : (s % 2 ? a : b); }
    const float* weights(int s) const { return w + s * stride; }
    float* out(int s) const { return s % 2 ? b : a; }
};

// The grid: one block per kThreads vectors, at most kBlocksPerSm a SM (a grid-stride loop does the rest).
unsigned grid_for(size_t n) {
    const size_t blocks = (n / 4 + kThreads - 1) / kThreads;
    return unsigned(std::max<size_t>(1, std::min<size_t>(blocks, size_t(kwiki::sm_count()) * kBlocksPerSm)));
}

void launch_single(const Chain& c, cudaStream_t s) {
    step_kernel<false><<<c.grid, kThreads, 0, s>>>(c.in(0), c.weights(0), c.out(0), c.n);
    KWIKI_CHECK_LAST();
}

// kwiki:rung stream
void launch_stream(const Chain& c, cudaStream_t s) {
    for (int k = 0; k < kSteps; ++k) step_kernel<false><<<c.grid, kThreads, 0, s>>>(c.in(k), c.weights(k), c.out(k), c.n);
    KWIKI_CHECK_LAST();
}
// /kwiki:rung stream

// kwiki:rung pdl
// The same 20 launches by cudaLaunchKernelEx with programmatic stream serialization: each may begin once every block
// of the one before it has called launch_dependents, instead of once it has finished; its griddepcontrol.wait keeps
// the data dependence.
void launch_pdl(const Chain& c, cudaStream_t s) {
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(c.grid), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = 0, cfg.stream = s;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    for (int k = 0; k < kSteps; ++k)
        KWIKI_CHECK(cudaLaunchKernelEx(&cfg, step_kernel<true>, c.in(k), c.weights(k), c.out(k), c.n));
}
// /kwiki:rung pdl

// kwiki:rung graph
// A CUDA Graph of what `record` launches, captured from a stream of its own and instantiated once (outside the timed
// region); a timed launch is one cudaGraphLaunch: the 20 kernels reach the GPU as one submission.
class Graph {
  public:
    template <class Record>
    explicit Graph(Record record) {
        cudaStream_t s = nullptr;
        cudaGraph_t g = nullptr;
        KWIKI_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        KWIKI_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        record(s);
        KWIKI_CHECK(cudaStreamEndCapture(s, &g));
        KWIKI_CHECK(cudaGraphInstantiate(&exec_, g, 0));
        KWIKI_CHECK(cudaGraphUpload(exec_, s));  // the first launch pays no upload
        KWIKI_CHECK(cudaStreamSynchronize(s));
        KWIKI_CHECK(cudaGraphDestroy(g));
        KWIKI_CHECK(cudaStreamDestroy(s));
    }
    ~Graph() { cudaGraphExecDestroy(exec_); }
    Graph(const Graph&) = delete;
    Graph& operator=(const Graph&) = delete;
    void launch(cudaStream_t s) const { KWIKI_CHECK(cudaGraphLaunch(exec_, s)); }

  private:
    cudaGraphExec_t exec_ = nullptr;
};
// /kwiki:rung graph

enum class Kind { Single, Stream, Graph, Pdl, PdlGraph };

// A case's launch: direct launches read the input set current at launch time; a graph holds its pointers, so one
// graph is captured per input set and the launch picks the current set's.
std::function<void(cudaStream_t)> make_launch(Kind k, kwiki::InputSets<Inputs>& in, const Outputs& o) {
    const unsigned grid = grid_for(o.n);  // here, not per launch: a device query in the timed region would be timed
    auto chain = [&in, &o, grid](int set) {
        const Inputs& s = set < 0 ? in.current() : in[set];
        return Chain{s.x.get(), s.w.get(), o.a.get(), o.b.get(), o.n, stride_of(o.n), grid};
    };
    if (k == Kind::Single) return [chain](cudaStream_t s) { launch_single(chain(-1), s); };
    if (k == Kind::Stream) return [chain](cudaStream_t s) { launch_stream(chain(-1), s); };
    if (k == Kind::Pdl) return [chain](cudaStream_t s) { launch_pdl(chain(-1), s); };
    std::vector<std::shared_ptr<Graph>> graphs;
    for (int i = 0; i < in.size(); ++i)
        graphs.push_back(std::make_shared<Graph>([&](cudaStream_t s) {
            // kwiki:rung pdl_graph
            if (k == Kind::PdlGraph) return launch_pdl(chain(i), s);  // PDL's edges kept as programmatic graph edges
            // /kwiki:rung pdl_graph
            launch_stream(chain(i), s);
        }));
    return [graphs, &in](cudaStream_t s) { graphs[size_t(in.index())]->launch(s); };
}

// The launches of a variant, the bytes they must move from DRAM (each step's weights, and x once), and what its record
// adds: launches, grid, registers and occupancy of the kernel it launches.
double plan_for(Kind k, size_t n, kwiki::Fields& extra) {
    const int launches = k == Kind::Single ? 1 : kSteps;
    const void* fn = k == Kind::Pdl || k == Kind::PdlGraph ? reinterpret_cast<const void*>(step_kernel<true>)
                                                          : reinterpret_cast<const void*>(step_kernel<false>);
    kwiki::add_occupancy(extra, fn, kThreads);
    extra.emplace_back("launches", launches);
    extra.emplace_back("grid", int(grid_for(n)));
    return 4.0 * double(n) * (launches + 1);
}

// Both activation buffers, poisoned (0xFF: NaN): a step that reads its input before the step before it wrote it
// reads NaN, or a value two steps old.
void poison_outputs(const Outputs& o, cudaStream_t s) {
    kwiki::poison(o.a.get(), o.a.bytes(), s);
    kwiki::poison(o.b.get(), o.b.bytes(), s);
}

// ===================================================================================================
// The table of variants (names only: artifact.yaml holds their rungs and what each adds, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Kind kind;
};

const Variant kVariants[] = {
    {{"stream"}, Kind::Stream},
    {{"graph"}, Kind::Graph},
    {{"pdl"}, Kind::Pdl},
    {{"pdl_graph"}, Kind::PdlGraph},
    {{"single"}, Kind::Single},  // not a rung: one step alone, the time of one kernel
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);  // --list-variants exits in here, before any CUDA call
    const auto sizes = m.args.get_sizes("elems", "", 1, "N, the fp32 elements of one step");  // --list-shapes exits
    kwiki::Runner& runner = m.start("launch_chain");
    for (const auto& size : sizes) {
        const size_t n = size_t(size[0]);
        const Outputs out(n);
        kwiki::InputSets<Inputs> in(m.sets, m.seed + n, [&](Inputs& s, uint64_t seed) { fill_inputs(s, n, seed); });
        const auto make = [&](const Variant& v) {
            kwiki::Case c;
            c.params = {{"n", static_cast<unsigned long long>(n)}, {"dtype", "fp32"}};
            c.bytes = plan_for(v.kind, n, c.extra);
            c.launch = make_launch(v.kind, in, out);
            const bool single = v.kind == Kind::Single;
            in.bind(c, [&out](cudaStream_t s) { poison_outputs(out, s); },
                    [&out, single](const Inputs& s) { return check_outputs(out, s, single); });
            return c;
        };
        kwiki::run_ladder(runner, m.args, kVariants, make);
    }
    return kwiki::exit_code();
}
