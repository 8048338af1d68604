// row_reduce.cu: an RMSNorm-style row op, y[r, :] = x[r, :] * rsqrt(mean(x[r, :]^2) + eps), bf16 in and out, fp32
// accumulation, on rows from 4096 to 256k elements: where the row's sum of squares is reduced (a warp, a block,
// several blocks through global memory or a second kernel, a thread-block cluster through distributed shared memory)
// and how many times the row is read from memory because of it.
//
// Build (kwiki does this):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -Xptxas=-v -o row_reduce row_reduce.cu
// Run: ./row_reduce --shapes=ROWSxCOLS,... [--variants a,b,c] [--seed=N] [--input-sets=2] [--ring-clusters=N]
//
// The op has no weight vector, so every variant moves exactly the bytes of a copy of x (rows * cols * 2 read, as
// many written): `copy` (cudaMemcpyAsync of x into y) is the roof in the same run, and bytes per record are
// 2 * rows * cols * 2 for every variant. A variant that reads the row twice from memory moves more than it declares:
// its GB/s is the op's effective rate, what a caller sees.
// Shapes: ROWS x COLS with COLS a multiple of 8 (rows are read in 16-byte vectors), COLS <= 524288 (a 16-CTA
// cluster keeps at most 64 KiB of a row per CTA; cluster_ring, two 32 KiB buffers a CTA, has no case past 262144)
// and ROWS <= 65535 (grid.y); others are refused before any CUDA call. The manifest's shapes include 129x131080,
// which no slice, block or cluster divides.
// Reference: each row's sum of squares in fp64 on the host from the same bf16 inputs, then x * scale in fp64 on the
// device; tolerance: one bf16 unit (rtol 2^-7, the output's rounding is at most half of it) plus atol 1e-5. The
// inputs' magnitude changes every 1000 elements of a row and from row to row (a factor 1/4 to 4), so a reduction
// that misses a slice or takes another row's sum fails. y carries a canary past its last element.
// Variants, their rungs and what each adds: artifact.yaml; each rung's code is a marked region (CONTRIBUTING.md,
// convention 17).
#include "kwiki_bench.cuh"
#include "kwiki_gemv.cuh"  // set_canary, with_canary
#include "kwiki_reduce.cuh"
#include "kwiki_cluster.cuh"  // the cluster barrier, distributed shared memory, bulk copies (cluster, cluster_ring)

#include <cooperative_groups.h>
#include <cuda/atomic>

namespace {

namespace cg = cooperative_groups;
namespace kc = kwiki::cluster;  // kwiki_cluster.cuh: cluster barriers, distributed shared memory, the ring
using bf16 = __nv_bfloat16;

constexpr int kThreads = 512;             // every kernel's block
constexpr int kWarps = kThreads / 32;
constexpr int kVec = 8;                   // bf16 per 16-byte vector
constexpr int kSliceVecs = 2048;          // a slice of a split row: at most 2048 vectors (32 KiB)
constexpr int kMaxCluster = 16;           // the largest cluster Hopper allows (non-portable; 8 is portable)
constexpr int kMaxClusterSliceVecs = 4096;  // 64 KiB of shared memory per CTA of a cluster
constexpr int kMaxCols = kMaxCluster * kMaxClusterSliceVecs * kVec;
constexpr float kEps = 1e-6f;

// ===================================================================================================
// Reference: fp64 row scales on the host, x * scale on the device
// ===================================================================================================

// x[r, c] = a * u with u uniform in [-1, 1) and a = 2^k, k in -2..2 drawn per row and per run of 1000 columns.
__global__ void fill_rows(bf16* x, int rows, int cols, uint64_t seed) {
    const size_t n = size_t(rows) * cols;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
        const uint64_t r = i / cols, run = (i % cols) / 1000;
        const int k = int(kwiki::hash64(seed ^ 0xa5a5, r * 1000003u + run) % 5) - 2;
        x[i] = __float2bfloat16_rn(ldexpf(kwiki::random_unit(seed, i, -1.0f, 1.0f), k));
    }
}

__global__ void scale_ref(const bf16* x, const double* scale, double* ref, int rows, int cols) {
    const size_t n = size_t(rows) * cols;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
        ref[i] = double(__bfloat162float(x[i])) * scale[i / cols];
}

// One input set: x and the fp64 reference of y.
struct Inputs {
    kwiki::DeviceBuffer<bf16> x;
    kwiki::DeviceBuffer<double> ref;
};

void fill_inputs(Inputs& s, int rows, int cols, uint64_t seed) {
    const size_t n = size_t(rows) * cols;
    const unsigned grid = unsigned(std::min<size_t>((n + 255) / 256, 65536));
    s.x = kwiki::DeviceBuffer<bf16>(n);
    s.ref = kwiki::DeviceBuffer<double>(n);
    fill_rows<<<grid, 256>>>(s.x.get(), rows, cols, seed);
    KWIKI_CHECK_LAST();
    const std::vector<float> hx = kwiki::to_host_float(s.x.get(), n);
    std::vector<double> scale(static_cast<size_t>(rows));
    kwiki::parallel_for(size_t(rows), [&](size_t r0, size_t r1) {
        for (size_t r = r0; r < r1; ++r) {
            double ss = 0;
            for (size_t c = 0; c < size_t(cols); ++c) ss += double(hx[r * cols + c]) * double(hx[r * cols + c]);
            scale[r] = 1.0 / std::sqrt(ss / cols + double(kEps));
        }
    });
    kwiki::DeviceBuffer<double> dscale(static_cast<size_t>(rows));
    KWIKI_CHECK(cudaMemcpy(dscale.get(), scale.data(), rows * sizeof(double), cudaMemcpyHostToDevice));
    scale_ref<<<grid, 256>>>(s.x.get(), dscale.get(), s.ref.get(), rows, cols);
    KWIKI_CHECK_LAST();
    KWIKI_CHECK(cudaDeviceSynchronize());
}

// y against the set's reference (or, for the copy, against x bit for bit), and y's canary intact.
kwiki::CheckResult check_y(const bf16* y, size_t n, const Inputs& set, bool copy) {
    const kwiki::CheckResult r = copy ? kwiki::compare_device(y, set.x.get(), n, {0.0, 0.0}, "the input x (a copy)")
                                      : kwiki::compare_device(y, set.ref.get(), n, {1e-5, 1.0 / 128},
                                                              "host fp64 row sums of squares, x * scale in fp64");
    return kwiki::with_canary(r, y, n);
}

// ===================================================================================================
// Kernels
// ===================================================================================================

// kwiki:rung block
using kc::hi_f;  // a bf16 pair in a 32-bit word as two floats (kwiki_cluster.cuh)
using kc::lo_f;

__device__ __forceinline__ float sumsq8(uint4 v, float acc) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) acc = fmaf(lo_f(w[i]), lo_f(w[i]), fmaf(hi_f(w[i]), hi_f(w[i]), acc));
    return acc;
}

__device__ __forceinline__ uint32_t scale2(uint32_t w, float s) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo_f(w) * s, hi_f(w) * s);  // .x is the low half
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint4 scale8(uint4 v, float s) { return {scale2(v.x, s), scale2(v.y, s), scale2(v.z, s), scale2(v.w, s)}; }

// The sum of v over the block, in every thread (kwiki_cluster.cuh's block_reduce: warp shuffles, one partial per
// warp in `red`, warp 0 sums those, a second barrier hands the total out). Called once per kernel, or once per work
// item with a barrier before the next call reuses `red`.
static_assert(kThreads == kc::kRingThreads && kVec == kc::kRowVec && kSliceVecs == kc::kSliceVecs, "one slice rule");
__device__ __forceinline__ float block_sum(float v, float (&red)[kWarps + 1]) {
    return kc::block_reduce<false>(v, red);
}

// One CTA per row: the sum of squares over the row, then a second pass over the row (from L2 if it is still there,
// else from memory) to scale it.
__global__ void __launch_bounds__(kThreads) block_kernel(const bf16* __restrict__ x, bf16* __restrict__ y, int cols) {
    __shared__ float red[kWarps + 1];
    const int V = cols / kVec;
    const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(blockIdx.x) * cols);
    uint4* yr = reinterpret_cast<uint4*>(y + size_t(blockIdx.x) * cols);
    float acc = 0;
#pragma unroll 4
    for (int j = threadIdx.x; j < V; j += kThreads) acc = sumsq8(xr[j], acc);
    const float scale = rsqrtf(block_sum(acc, red) / cols + kEps);
#pragma unroll 4
    for (int j = threadIdx.x; j < V; j += kThreads) yr[j] = scale8(xr[j], scale);
}
// /kwiki:rung block

// kwiki:rung two_kernel
// Slice s of S of a row of V vectors: [begin, end). Every slice but the last has ceil(V / S) vectors.
struct Slice {
    int begin, end;
};
__device__ __forceinline__ Slice slice_of(int V, int S, int s) {
    const int per = (V + S - 1) / S;
    return {min(V, s * per), min(V, (s + 1) * per)};
}

// Kernel 1 of 2: CTA (s, row) writes the sum of squares of slice s of its row to partial[row * S + s].
__global__ void __launch_bounds__(kThreads) partial_kernel(const bf16* __restrict__ x, float* __restrict__ partial, int cols) {
    __shared__ float red[kWarps + 1];
    const int S = gridDim.x, row = blockIdx.y;
    const Slice sl = slice_of(cols / kVec, S, blockIdx.x);
    const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(row) * cols);
    float acc = 0;
#pragma unroll 4
    for (int j = sl.begin + threadIdx.x; j < sl.end; j += kThreads) acc = sumsq8(xr[j], acc);
    const float t = block_sum(acc, red);
    if (threadIdx.x == 0) partial[size_t(row) * S + blockIdx.x] = t;
}

// Kernel 2 of 2: CTA (s, row) sums its row's S partials (warp 0, in a fixed order) and scales slice s, read again.
__global__ void __launch_bounds__(kThreads) scale_kernel(const bf16* __restrict__ x, const float* __restrict__ partial,
                                                         bf16* __restrict__ y, int cols) {
    __shared__ float total;
    const int S = gridDim.x, row = blockIdx.y;
    if (threadIdx.x < 32) {
        float t = 0;
        for (int i = threadIdx.x; i < S; i += 32) t += partial[size_t(row) * S + i];
        t = kwiki::warp_sum(t);
        if (threadIdx.x == 0) total = t;
    }
    __syncthreads();
    const float scale = rsqrtf(total / cols + kEps);
    const Slice sl = slice_of(cols / kVec, S, blockIdx.x);
    const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(row) * cols);
    uint4* yr = reinterpret_cast<uint4*>(y + size_t(row) * cols);
#pragma unroll 4
    for (int j = sl.begin + threadIdx.x; j < sl.end; j += kThreads) yr[j] = scale8(xr[j], scale);
}
// /kwiki:rung two_kernel

// kwiki:rung atomics
// Per-row state of the one-kernel split: the sum of squares (atomicAdd of every slice's partial) and a counter that
// counts S arrivals (partials added) then S departures (sums read). The last departure resets both, so the next
// launch finds zeros without a memset (both are zeroed once, when allocated).
struct RowSync {
    float* sum;
    unsigned* count;
};

// One kernel, S CTAs per row, slices kept in shared memory (one pass over memory). A cooperative launch makes every
// CTA resident at once; CTA b takes work items b, b + grid, ... (item = row * S + slice), and waits, spinning on
// its row's counter, for the other S - 1 slices of its row. With S <= grid no CTA ever holds two items of one row,
// and each waits only on items that resident CTAs reach without waiting on it: no deadlock.
__global__ void __launch_bounds__(kThreads) atomics_kernel(const bf16* __restrict__ x, bf16* __restrict__ y, int rows,
                                                           int cols, int S, RowSync rs) {
    extern __shared__ uint4 slice[];
    __shared__ float red[kWarps + 1];
    __shared__ float row_total;
    const int V = cols / kVec;
    for (int item = blockIdx.x; item < rows * S; item += gridDim.x) {
        const int row = item / S;
        const Slice sl = slice_of(V, S, item % S);
        const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(row) * cols);
        float acc = 0;
#pragma unroll 4
        for (int j = sl.begin + threadIdx.x; j < sl.end; j += kThreads) {
            const uint4 v = xr[j];
            slice[j - sl.begin] = v;
            acc = sumsq8(v, acc);
        }
        const float part = block_sum(acc, red);
        if (threadIdx.x == 0) {
            cuda::atomic_ref<unsigned, cuda::thread_scope_device> count(rs.count[row]);
            atomicAdd(&rs.sum[row], part);
            count.fetch_add(1, cuda::memory_order_release);  // publishes the atomicAdd above
            while (count.load(cuda::memory_order_acquire) < unsigned(S)) __nanosleep(64);
            row_total = cuda::atomic_ref<float, cuda::thread_scope_device>(rs.sum[row]).load(cuda::memory_order_relaxed);
            if (count.fetch_add(1, cuda::memory_order_acq_rel) == 2u * S - 1) {  // the row's last reader resets it
                rs.sum[row] = 0.0f;
                count.store(0, cuda::memory_order_relaxed);
            }
        }
        __syncthreads();
        const float scale = rsqrtf(row_total / cols + kEps);
        uint4* yr = reinterpret_cast<uint4*>(y + size_t(row) * cols);
#pragma unroll 4
        for (int j = sl.begin + threadIdx.x; j < sl.end; j += kThreads) yr[j] = scale8(slice[j - sl.begin], scale);
        __syncthreads();  // the slice, red and row_total are reused by the next item
    }
}
// /kwiki:rung atomics

// kwiki:rung cluster
// One cluster of C CTAs per row (grid C x rows, cluster C x 1): CTA `rank` loads slice rank of the row into its
// shared memory once, sums its squares, and publishes its partial in shared memory; after a cluster barrier every
// CTA reads the C partials through distributed shared memory (mapa + ld.shared::cluster: lane i reads CTA i's),
// sums them in a fixed order, and scales its slice from shared memory. A CTA's shared memory lives as long as the
// CTA, so none may exit while another still reads its partial: the second barrier's arrive comes after the reads,
// its wait just before the exit, with the scaling pass in between.
__global__ void __launch_bounds__(kThreads) cluster_kernel(const bf16* __restrict__ x, bf16* __restrict__ y, int cols) {
    extern __shared__ uint4 slice[];
    __shared__ float red[kWarps + 1];
    __shared__ float cta_part, row_total;
    const cg::cluster_group cluster = cg::this_cluster();
    const int C = int(cluster.num_blocks()), rank = int(cluster.block_rank()), row = blockIdx.y;
    const Slice sl = slice_of(cols / kVec, C, rank);
    const uint4* xr = reinterpret_cast<const uint4*>(x + size_t(row) * cols);
    float acc = 0;
#pragma unroll 4
    for (int j = sl.begin + threadIdx.x; j < sl.end; j += kThreads) {
        const uint4 v = xr[j];
        slice[j - sl.begin] = v;
        acc = sumsq8(v, acc);
    }
    const float part = block_sum(acc, red);
    if (threadIdx.x == 0) cta_part = part;
    kc::arrive();  // also: every CTA of the cluster has started, so its shared memory may be read
    kc::wait();
    if (threadIdx.x < 32) {
        const int lane = threadIdx.x;
        float t = lane < C ? kc::load_from_rank(&cta_part, unsigned(lane)) : 0.0f;
        t = kwiki::warp_sum(t);
        if (lane == 0) row_total = t;
    }
    // Relaxed: nothing is handed over here. Warp 0 has consumed the values it read (the shuffles used them), so
    // its remote reads are complete before it arrives.
    kc::arrive_relaxed();  // this CTA has read every partial it needs from the others
    __syncthreads();
    const float scale = rsqrtf(row_total / cols + kEps);
    uint4* yr = reinterpret_cast<uint4*>(y + size_t(row) * cols);
#pragma unroll 4
    for (int j = sl.begin + threadIdx.x; j < sl.end; j += kThreads) yr[j] = scale8(slice[j - sl.begin], scale);
    kc::wait();  // no CTA leaves while another may still read its cta_part
}
// /kwiki:rung cluster

// kwiki:rung cluster_ring
// The cluster kernel made persistent and pipelined: kwiki_cluster.cuh's ring_rows, with the sum of squares as its
// statistic. The grid holds as many clusters as the device runs at once (cluster j takes rows j, j + G, ...), and
// each CTA keeps two slice buffers: while it reduces, exchanges and stores one row's slice, the next row's slice is
// on its way into the other buffer, one bulk copy issued by thread 0 at the start of the row. So a CTA reads and
// writes at the same time, which the one-row cluster kernel never does (it loads its whole slice, waits at the
// cluster barrier, then stores), and its loads take no registers or load instructions. ring_rows says how each
// hazard of the ring (the refilled buffer, the double-buffered partial, a CTA leaving early) is closed.
struct RmsScale {
    bf16* y;
    int cols;

    __device__ __forceinline__ float2 partial(const uint4* slice, const kc::Slice& sl, float* red) const {
        float acc = 0;
#pragma unroll 4
        for (int j = threadIdx.x; j < sl.n; j += kThreads) acc = sumsq8(slice[j], acc);
        return make_float2(kc::block_reduce<false>(acc, red), 0.0f);
    }
    __device__ __forceinline__ float merge(float2 p, bool valid) const { return kc::warp_sum(valid ? p.x : 0.0f); }
    __device__ __forceinline__ void write(int row, const uint4* slice, const kc::Slice& sl, float total) const {
        const float scale = rsqrtf(total / cols + kEps);
        uint4* yr = reinterpret_cast<uint4*>(y + size_t(row) * cols) + sl.begin;
#pragma unroll 4
        for (int j = threadIdx.x; j < sl.n; j += kThreads) yr[j] = scale8(slice[j], scale);
    }
};

__global__ void __launch_bounds__(kThreads)
cluster_ring_kernel(const bf16* __restrict__ x, bf16* __restrict__ y, int rows, int cols) {
    kc::ring_rows(x, rows, cols, RmsScale{y, cols});
}
// /kwiki:rung cluster_ring

// ===================================================================================================
// Launchers
// ===================================================================================================

struct Problem {
    int rows, cols;
    const bf16* x;
    bf16* y;
    float* partial;  // rows * S partial sums (two_kernel)
    RowSync sync;    // per-row sum and counter (atomics), zeroed once
};

// Slices per row of the split variants: at most 32 KiB a slice, enough CTAs for about two per SM, at least one
// vector per thread of a slice, and no more than `most` (the atomics kernel's resident grid).
int slices_per_row(int rows, int cols, int most) {
    const int V = cols / kVec, fit = (V + kSliceVecs - 1) / kSliceVecs;
    const int fill = (2 * kwiki::sm_count() + rows - 1) / rows;
    return std::max(1, std::min({std::max(fit, fill), std::max(1, V / kThreads), most}));
}

// Cluster size: the smallest power of two whose slices fit kSliceVecs, at most 16 (then up to 64 KiB a CTA).
int cluster_size(int cols) {
    int c = 1;
    while (c < kMaxCluster && (cols / kVec + c - 1) / c > kSliceVecs) c *= 2;
    return c;
}

// The split variants' scratch at one shape: two_kernel's partials (rows x S), the atomics kernel's per-row sum and
// counter (zeroed here, once; the kernel leaves them zero).
struct Workspace {
    kwiki::DeviceBuffer<float> partial, sum;
    kwiki::DeviceBuffer<unsigned> count;

    Workspace(int rows, int cols)
        : partial(size_t(rows) * slices_per_row(rows, cols, 1 << 30)), sum(size_t(rows)), count(size_t(rows)) {
        KWIKI_CHECK(cudaMemset(sum.get(), 0, sum.bytes()));
        KWIKI_CHECK(cudaMemset(count.get(), 0, count.bytes()));
    }
};

size_t slice_bytes(int cols, int S) { return size_t((cols / kVec + S - 1) / S) * sizeof(uint4); }

// kwiki:rung atomics
// The atomics kernel's resident grid: what fits on every SM at once with this slice size (a cooperative launch
// fails rather than run a grid that does not fit).
int atomics_grid(size_t smem) {
    int per_sm = 0;
    KWIKI_CHECK(cudaFuncSetAttribute(atomics_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    KWIKI_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, atomics_kernel, kThreads, smem));
    KWIKI_REQUIRE(per_sm > 0, "the atomics kernel does not fit on an SM");
    return per_sm * kwiki::sm_count();
}
// /kwiki:rung atomics

// What a variant launches at one shape, fixed once per case: slices per row (S) or cluster size, grid, shared memory.
struct Plan {
    int split = 1;     // slices per row (two_kernel, atomics) or CTAs per cluster (cluster)
    int grid = 0;      // atomics: the resident grid
    size_t smem = 0;   // dynamic shared memory per CTA
};

// kwiki:rung block
void launch_block(const Problem& p, const Plan&, cudaStream_t s) {
    block_kernel<<<p.rows, kThreads, 0, s>>>(p.x, p.y, p.cols);
    KWIKI_CHECK_LAST();
}
// /kwiki:rung block

// kwiki:rung two_kernel
void launch_two_kernel(const Problem& p, const Plan& pl, cudaStream_t s) {
    const dim3 grid(unsigned(pl.split), unsigned(p.rows));
    partial_kernel<<<grid, kThreads, 0, s>>>(p.x, p.partial, p.cols);
    KWIKI_CHECK_LAST();
    scale_kernel<<<grid, kThreads, 0, s>>>(p.x, p.partial, p.y, p.cols);
    KWIKI_CHECK_LAST();
}
// /kwiki:rung two_kernel

// kwiki:rung atomics
void launch_atomics(const Problem& p, const Plan& pl, cudaStream_t s) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeCooperative;
    attr[0].val.cooperative = 1;
    cfg.gridDim = dim3(unsigned(std::min(pl.grid, p.rows * pl.split)));
    cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = pl.smem, cfg.stream = s, cfg.attrs = attr, cfg.numAttrs = 1;
    KWIKI_CHECK(cudaLaunchKernelEx(&cfg, atomics_kernel, p.x, p.y, p.rows, p.cols, pl.split, p.sync));
}
// /kwiki:rung atomics

// kwiki:rung cluster
void launch_cluster(const Problem& p, const Plan& pl, cudaStream_t s) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(pl.split), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(unsigned(pl.split), unsigned(p.rows));
    cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = pl.smem, cfg.stream = s, cfg.attrs = attr, cfg.numAttrs = 1;
    KWIKI_CHECK(cudaLaunchKernelEx(&cfg, cluster_kernel, p.x, p.y, p.cols));
}

// The cluster's plan at `cols`, and how many such clusters the device runs at once (cudaOccupancyMaxActiveClusters).
Plan cluster_plan(int cols, kwiki::Fields& extra) {
    Plan pl;
    pl.split = cluster_size(cols), pl.smem = slice_bytes(cols, pl.split);
    KWIKI_CHECK(cudaFuncSetAttribute(cluster_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    KWIKI_CHECK(cudaFuncSetAttribute(cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(pl.smem)));
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = unsigned(pl.split), attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(unsigned(pl.split)), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = pl.smem;
    cfg.attrs = attr, cfg.numAttrs = 1;
    int active = 0;
    KWIKI_CHECK(cudaOccupancyMaxActiveClusters(&active, cluster_kernel, &cfg));
    KWIKI_REQUIRE(active > 0, "no cluster of this size fits on the device");
    extra.emplace_back("max_active_clusters", active);
    return pl;
}
// /kwiki:rung cluster

// kwiki:rung cluster_ring
// The cluster of cluster_plan with two slice buffers a CTA, and a grid of as many clusters as run at once (at most
// one a row), or `cap` (--ring-clusters, 0: no cap) if fewer: every cluster is resident, and walks its rows in step
// G. The cap makes a small shape walk many rows a cluster (the sanitizer's shapes: every buffer used many times).
void launch_cluster_ring(const Problem& p, const Plan& pl, cudaStream_t s) {
    const kc::RingLaunch l(pl.split, std::min(pl.grid, p.rows), pl.smem, s);
    KWIKI_CHECK(cudaLaunchKernelEx(&l.cfg, cluster_ring_kernel, p.x, p.y, p.rows, p.cols));
}

Plan cluster_ring_plan(int rows, int cols, int cap, kwiki::Fields& extra) {
    Plan pl;
    pl.split = kc::ring_cluster_size(cols);
    KWIKI_REQUIRE(pl.split > 0, "cluster_ring: a row longer than 16 slices of 32 KiB");  // main skips those rows
    pl.smem = kc::ring_smem(cols, pl.split);
    cudaError_t err = cudaSuccess;
    const int active = kc::ring_active_clusters(cluster_ring_kernel, pl.split, pl.smem, &err);
    KWIKI_CHECK(err);
    KWIKI_REQUIRE(active > 0, "no cluster of this size fits on the device");
    pl.grid = cap > 0 ? std::min(cap, active) : active;
    extra.emplace_back("max_active_clusters", active);
    extra.emplace_back("clusters", std::min(pl.grid, rows));
    return pl;
}
// /kwiki:rung cluster_ring

void launch_copy(const Problem& p, const Plan&, cudaStream_t s) {
    KWIKI_CHECK(cudaMemcpyAsync(p.y, p.x, size_t(p.rows) * p.cols * sizeof(bf16), cudaMemcpyDeviceToDevice, s));
}

enum class Kind { Copy, Block, TwoKernel, Atomics, Cluster, ClusterRing };

// Whether a variant of this kind has a case at `cols`: cluster_ring holds 16 slices of 32 KiB at most (262144
// columns), the others every length the binary takes.
bool has_case(Kind k, int cols) { return k != Kind::ClusterRing || kc::ring_cluster_size(cols) > 0; }

// --ring-clusters: cluster_ring's cap on its grid (0: as many clusters as run at once), refused outside 0-65535.
int ring_cap(const kwiki::Args& args) {
    const long long cap = args.get_int("ring-clusters", 0);
    if (cap < 0 || cap > 65535) kwiki::Args::usage("--ring-clusters wants 0 (as many as run at once) to 65535");
    return int(cap);
}

// A variant's plan at rows x cols, and what its record adds (registers, occupancy, the split, the grid).
Plan plan_for(Kind k, int rows, int cols, int ring_cap, kwiki::Fields& extra) {
    Plan pl;
    const void* fn = nullptr;
    if (k == Kind::Block) fn = reinterpret_cast<const void*>(block_kernel);
    if (k == Kind::TwoKernel) {
        fn = reinterpret_cast<const void*>(partial_kernel);
        pl.split = slices_per_row(rows, cols, 1 << 30);
    }
    if (k == Kind::Atomics) {
        fn = reinterpret_cast<const void*>(atomics_kernel);
        pl.grid = atomics_grid(size_t(kSliceVecs) * sizeof(uint4));  // at the largest slice: a grid that always fits
        pl.split = slices_per_row(rows, cols, pl.grid);
        pl.smem = slice_bytes(cols, pl.split);
        pl.grid = atomics_grid(pl.smem);
        extra.emplace_back("grid", std::min(pl.grid, rows * pl.split));
    }
    if (k == Kind::Cluster) {
        fn = reinterpret_cast<const void*>(cluster_kernel);
        pl = cluster_plan(cols, extra);
    }
    if (k == Kind::ClusterRing) {
        fn = reinterpret_cast<const void*>(cluster_ring_kernel);
        pl = cluster_ring_plan(rows, cols, ring_cap, extra);
    }
    if (fn) {
        kwiki::add_occupancy(extra, fn, kThreads, pl.smem);
        const bool cluster = k == Kind::Cluster || k == Kind::ClusterRing;
        extra.emplace_back(cluster ? "cluster_size" : "slices_per_row", pl.split);
        extra.emplace_back("smem_per_cta", (unsigned long long)pl.smem);
    }
    return pl;
}

// ===================================================================================================
// The table of variants (names only: artifact.yaml holds their rungs and what each adds, in this order)
// ===================================================================================================

struct Variant : kwiki::VariantInfo {
    Kind kind;
    void (*launch)(const Problem&, const Plan&, cudaStream_t);
};

const Variant kVariants[] = {
    {{"block"}, Kind::Block, launch_block},
    {{"two_kernel"}, Kind::TwoKernel, launch_two_kernel},
    {{"atomics"}, Kind::Atomics, launch_atomics},
    {{"cluster"}, Kind::Cluster, launch_cluster},
    {{"cluster_ring"}, Kind::ClusterRing, launch_cluster_ring},
    {{"copy"}, Kind::Copy, launch_copy},  // not a rung: the roof, the same bytes copied
};

}  // namespace

// ===================================================================================================
// main
// ===================================================================================================

int main(int argc, char** argv) {
    kwiki::Main m(argc, argv, kVariants);  // --list-variants exits in here, before any CUDA call
    const auto shapes = m.args.get_shapes<std::pair<int, int>, 2>(  // the manifest's; --list-shapes exits
        "shapes", "", "ROWSxCOLS with COLS a multiple of 8 and at most 524288, ROWS at most 65535",
        [](const std::vector<int>& d) { return d[1] % kVec == 0 && d[1] <= kMaxCols && d[0] <= 65535; });
    const int cap = ring_cap(m.args);
    kwiki::Runner& runner = m.start("row_reduce");
    for (const auto& shape : shapes) {
        const int rows = shape.first, cols = shape.second;
        const size_t n = size_t(rows) * cols;
        kwiki::DeviceBuffer<bf16> y(n + kwiki::kCanary);
        kwiki::set_canary(y.get(), n);  // y[n..n+kCanary) must stay as set
        const Workspace ws(rows, cols);
        kwiki::InputSets<Inputs> in(m.sets, m.seed + n + uint64_t(cols), [&](Inputs& s, uint64_t seed) { fill_inputs(s, rows, cols, seed); });
        kwiki::run_ladder(runner, m.args, kVariants, [&](const Variant& v) {
            kwiki::Case c;
            c.params = {{"shape", std::to_string(rows) + "x" + std::to_string(cols)}, {"rows", rows}, {"cols", cols}, {"dtype", "bf16"}};
            c.bytes = 2.0 * double(n) * sizeof(bf16);  // x read once, y written once: a copy's bytes
            const Plan pl = plan_for(v.kind, rows, cols, cap, c.extra);
            c.launch = [&, v, pl](cudaStream_t s) {
                v.launch({rows, cols, in.current().x.get(), y.get(), ws.partial.get(), {ws.sum.get(), ws.count.get()}}, pl, s);
            };
            in.bind(c, [&y, n](cudaStream_t s) { kwiki::poison(y.get(), n * sizeof(bf16), s); },
                    [&y, n, v](const Inputs& s) { return check_y(y.get(), n, s, v.kind == Kind::Copy); });
            return c;
        }, [cols](const Variant& v) { return has_case(v.kind, cols); });
    }
    return kwiki::exit_code();
}
