// cublas_grouped.cu: the cuBLAS grouped-API baseline of moe.py (variant cublas_grouped): one call of
// cublasGemmGroupedBatchedEx over the experts that hold rows, bf16 A, W and C, fp32 compute. Built by kwiki into
// the shared library moe.py loads ($KWIKI_CUDA_LIBRARY) and called through ctypes on torch's current stream, so
// the harness checks and times it interleaved with the torch.mm loop, torch._grouped_mm and the Triton rungs.
//
// Build (kwiki does it): nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -I../common -shared
//                        -Xcompiler -fPIC -o libmoe.so cublas_grouped.cu
//
// No -lcublas and no cuBLAS header: moe.py passes in the address of cublasGemmGroupedBatchedEx inside the
// libcublas that torch has already loaded, and torch's own cuBLAS handle (its workspace, bound to the current
// stream), so this baseline runs the same cuBLAS build as the torch.mm loop beside it. The signature and the
// enum values below restate cuBLAS's documentation (cuBLAS API reference, cublasGemmGroupedBatchedEx) and
// cublas_api.h; cudaDataType_t comes from the toolkit's library_types.h.
//
// The call, per the documentation: transa, transb, m, n, k, lda, ldb, ldc, alpha, beta and group_size are host
// arrays of group_count entries; Aarray, Barray and Carray are device arrays of device pointers, one per problem.
// Here every group is one problem (group_size 1): one group per expert with rows, in expert order, empty experts
// left out. Its m (the expert's rows) must be known on the host, so moe.py reads the offsets back (a
// device-to-host copy and a sync) before it calls; the launcher copies the pointer arrays to the device on the
// stream, then makes the one cuBLAS call.
//
// Row-major C[rows_e, N] = A[rows_e, K] W_e[N, K]^T is, column-major, C^T (N x rows_e, ld N) = op(W_e) op(A_e)
// with W_e read as a K x N column-major matrix transposed (transa T, lda K) and A_e as K x rows_e (transb N,
// ldb K): cuBLAS's m = N, n = rows_e, k = K.
#include <cuda_runtime.h>
#include <library_types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moe_cublas {

// cublas_api.h: cublasOperation_t, cublasComputeType_t and cublasStatus_t are C enums (int-sized)
constexpr int OP_N = 0, OP_T = 1;      // CUBLAS_OP_N, CUBLAS_OP_T
constexpr int COMPUTE_32F = 68;        // CUBLAS_COMPUTE_32F
constexpr int STATUS_SUCCESS = 0;      // CUBLAS_STATUS_SUCCESS
constexpr int DIMS = 8;                // a group's description: transa, transb, m, n, k, lda, ldb, ldc

// cublasStatus_t cublasGemmGroupedBatchedEx(cublasHandle_t handle, const cublasOperation_t transa_array[],
//     const cublasOperation_t transb_array[], const int m_array[], const int n_array[], const int k_array[],
//     const void* alpha_array, const void* const Aarray[], cudaDataType_t Atype, const int lda_array[],
//     const void* const Barray[], cudaDataType_t Btype, const int ldb_array[], const void* beta_array,
//     void* const Carray[], cudaDataType_t Ctype, const int ldc_array[], int group_count, const int group_size[],
//     cublasComputeType_t computeType)
using GemmGroupedBatchedEx = int (*)(void*, const int*, const int*, const int*, const int*, const int*, const void*,
                                     const void* const*, cudaDataType_t, const int*, const void* const*,
                                     cudaDataType_t, const int*, const void*, void* const*, cudaDataType_t, const int*,
                                     int, const int*, int);

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace moe_cublas

// ===================================================================================================
// Launchers
// ===================================================================================================

// The groups of one call, on the host (no CUDA call): for each expert e with rows, in order, its description
// dims[8 g .. 8 g + 7] = {transa T, transb N, m N, n rows_e, k K, lda K, ldb K, ldc N} and its pointers
// ptrs[g] = W_e (cuBLAS's A), ptrs[groups + g] = the expert's first row of A (cuBLAS's B), ptrs[2 groups + g] = its
// first row of C. `ends` holds each expert's cumulative end row (torch._grouped_mm's offsets), `dims` room for 8
// ints and `ptrs` for 3 pointers per expert. Returns the number of groups, or -1 (nothing written) where the
// operands are not what the call is built for: experts, n or k not positive, n or k not a multiple of 8 (16-byte
// rows), a pointer not 16-byte aligned, ends decreasing, negative or not ending at `rows`.
extern "C" int kwiki_moe_groups(const int* ends, int experts, int rows, int n, int k, const void* a, const void* w,
                                void* c, int* dims, const void** ptrs) {
    using namespace moe_cublas;
    if (!ends || !dims || !ptrs || experts <= 0 || rows < 0 || n <= 0 || k <= 0 || n % 8 || k % 8) return -1;
    if (!aligned16(a) || !aligned16(w) || !aligned16(c)) return -1;
    int groups = 0, start = 0;
    for (int e = 0; e < experts; ++e) {
        if (ends[e] < start) return -1;
        groups += ends[e] > start;
        start = ends[e];
    }
    if (start != rows) return -1;
    const auto* a_bytes = static_cast<const char*>(a);
    const auto* w_bytes = static_cast<const char*>(w);
    auto* c_bytes = static_cast<char*>(c);
    const size_t elem = 2;  // bf16
    int g = 0;
    start = 0;
    for (int e = 0; e < experts; ++e) {
        const int end = ends[e];
        if (end > start) {
            const int d[DIMS] = {OP_T, OP_N, n, end - start, k, k, k, n};
            for (int i = 0; i < DIMS; ++i) dims[DIMS * g + i] = d[i];
            ptrs[g] = w_bytes + size_t(e) * size_t(n) * size_t(k) * elem;
            ptrs[groups + g] = a_bytes + size_t(start) * size_t(k) * elem;
            ptrs[2 * groups + g] = c_bytes + size_t(start) * size_t(n) * elem;
            ++g;
        }
        start = end;
    }
    return groups;
}

// The variant's call: C = for each expert with rows, A[rows of e] W[e]^T, bf16 in and out, fp32 compute, through
// `gemm` (cublasGemmGroupedBatchedEx) on `handle` (bound to `stream` by its owner). `device_ptrs` is room on the
// device for 3 pointers per expert; the pointer arrays are copied there on `stream` before the call. Returns 0,
// -1 (refused before any CUDA call: what kwiki_moe_groups refuses, a null gemm or handle, device_ptrs not 8-byte
// aligned), a CUDA error code of the copy, or -1000 - s for a cuBLAS status s other than success.
extern "C" int kwiki_moe_cublas_grouped(void* gemm, void* handle, cudaStream_t stream, const int* ends, int experts,
                                        int rows, int n, int k, const void* a, const void* w, void* c,
                                        void* device_ptrs) {
    using namespace moe_cublas;
    if (!gemm || !handle || !device_ptrs || reinterpret_cast<uintptr_t>(device_ptrs) % 8 || experts <= 0) return -1;
    std::vector<int> dims(size_t(DIMS) * size_t(experts));
    std::vector<const void*> ptrs(size_t(3) * size_t(experts));
    const int groups = kwiki_moe_groups(ends, experts, rows, n, k, a, w, c, dims.data(), ptrs.data());
    if (groups < 0) return -1;
    if (groups == 0) return 0;  // no rows: nothing to multiply
    // From pageable memory: the copy returns once the pointers are staged, so `ptrs` may go when this returns.
    const cudaError_t copied = cudaMemcpyAsync(device_ptrs, ptrs.data(), size_t(3) * size_t(groups) * sizeof(void*),
                                               cudaMemcpyHostToDevice, stream);
    if (copied != cudaSuccess) return int(copied);
    std::vector<int> field[DIMS];  // transa, transb, m, n, k, lda, ldb, ldc: one array of `groups` ints each
    for (int i = 0; i < DIMS; ++i) {
        field[i].resize(size_t(groups));
        for (int g = 0; g < groups; ++g) field[i][size_t(g)] = dims[size_t(DIMS) * size_t(g) + size_t(i)];
    }
    const std::vector<float> alpha(size_t(groups), 1.0f), beta(size_t(groups), 0.0f);  // scale type fp32
    const std::vector<int> group_size(size_t(groups), 1);
    auto* const* table = static_cast<void* const*>(device_ptrs);
    const auto call = reinterpret_cast<GemmGroupedBatchedEx>(gemm);
    const int status = call(handle, field[0].data(), field[1].data(), field[2].data(), field[3].data(), field[4].data(),
                            alpha.data(), table, CUDA_R_16BF, field[5].data(), table + groups, CUDA_R_16BF,
                            field[6].data(), beta.data(), table + 2 * groups, CUDA_R_16BF, field[7].data(), groups,
                            group_size.data(), COMPUTE_32F);
    return status == STATUS_SUCCESS ? 0 : -1000 - status;
}
