// kwiki_cublas.cuh: the few cuBLAS entry points KernelWiki artifacts call, loaded at run time.
//
// Why: an artifact's build must not need cuBLAS. CI and a newcomer's machine have nvcc but often no
// cuBLAS headers or library, and `kwiki verify --compile-only` compiles every artifact there. The GPU
// machine that runs the artifacts has cuBLAS installed, so the library is opened with dlopen when a
// cuBLAS variant first runs: "libcublas.so.13", then "libcublas.so.12", then "libcublas.so". A missing
// library or symbol prints one line to stderr and exits 2 (the KWIKI_CHECK convention), only then.
//
// What it declares: exactly the types, enum values and functions the artifacts use, in namespace kwiki,
// with the values and signatures of the public cublas_api.h (CUDA 12 and 13; the enums are int-sized
// there too). cudaDataType and its values (CUDA_R_16BF, CUDA_R_32F) come from the toolkit's own
// library_types.h, which ships with the CUDA runtime headers, not with cuBLAS.
//
// Use: a call `cublasGemmEx(h, ...)` becomes `kwiki::cublas().GemmEx(h, ...)`, with the same arguments:
//   kwiki::cublasHandle_t h;
//   KWIKI_CHECK_STATUS(kwiki::cublas().Create(&h));
//   KWIKI_CHECK_STATUS(kwiki::cublas().GemmEx(h, kwiki::CUBLAS_OP_T, kwiki::CUBLAS_OP_N, ...));
// The artifacts' GEMMs (and the GEMV as a 1-row GEMM) all go through one such call, gemm_tn below:
//   kwiki::gemm_tn(h, A, B, C, M, N, K, kwiki::kGemmBf16, stream);  // row-major C = A B^T
// No link flag is needed: dlopen is in libc from glibc 2.34 on (add `dl` to build.libs on older glibc).
//
// cuBLASLt (for fp8 GEMMs with per-tensor scales, which cublasGemmEx does not take) is opened the same
// way and separately, from "libcublasLt.so.13", then ".so.12", then ".so", when first used:
//   kwiki::cublasLtHandle_t lt;
//   KWIKI_CHECK_STATUS(kwiki::cublasLt().Create(&lt));
//   KWIKI_CHECK_STATUS(kwiki::cublasLt().MatmulAlgoGetHeuristic(lt, desc, Adesc, ..., pref, 1, &result, &n));
//   KWIKI_CHECK_STATUS(kwiki::cublasLt().Matmul(lt, desc, &alpha, A, Adesc, ..., &result.algo, ws, ws_bytes, s));
// gemm_tn's problem through cuBLASLt with the heuristic's candidates (a baseline that gets to pick its best):
//   kwiki::LtGemmTn g(lt, M, N, K, kwiki::kGemmBf16, 8);  // up to 8 candidates
//   g.run(i, A, B, C, stream);                             // candidate i, 0 <= i < g.algos()
// Its values are those of the public cublasLt.h (CUDA 12 and 13); CUDA_R_8F_E4M3 is library_types.h's.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <library_types.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "kwiki_bench.cuh"

namespace kwiki {

// ===================================================================================================
// Types and values (cublas_api.h)
// ===================================================================================================

struct cublasContext;  // opaque; cuBLAS's handle is a pointer to its own struct cublasContext
using cublasHandle_t = cublasContext*;

enum cublasStatus_t : int { CUBLAS_STATUS_SUCCESS = 0 };
enum cublasOperation_t : int { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t : int { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 };
enum cublasGemmAlgo_t : int { CUBLAS_GEMM_DEFAULT = -1 };

// cublasLt.h: opaque handle and descriptors (pointers to cuBLASLt's own structs), and the matmul
// descriptor attributes the artifacts set. TRANSA/TRANSB take an int32_t (cublasOperation_t); the two
// scale pointers take a `const void*` to one device float (the compute type's), applied to A and B.
struct cublasLtContext;
using cublasLtHandle_t = cublasLtContext*;
struct cublasLtMatmulDescOpaque_t;
using cublasLtMatmulDesc_t = cublasLtMatmulDescOpaque_t*;
struct cublasLtMatrixLayoutOpaque_t;
using cublasLtMatrixLayout_t = cublasLtMatrixLayoutOpaque_t*;
struct cublasLtMatmulPreferenceOpaque_t;
using cublasLtMatmulPreference_t = cublasLtMatmulPreferenceOpaque_t*;
struct cublasLtMatmulAlgo_t {  // semi-opaque: filled by AlgoGetHeuristic, passed back to Matmul
    uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;  // workspace the algo needs
    cublasStatus_t state;  // the other fields hold only when this is CUBLAS_STATUS_SUCCESS
    float wavesCount;
    int reserved[4];
};
enum cublasLtMatmulPreferenceAttributes_t : int { CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1 };  // uint64_t
enum cublasLtMatmulDescAttributes_t : int {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
};

// ===================================================================================================
// Entry points, resolved from the library on first use
// ===================================================================================================

namespace detail {

// The first of `names` that dlopen finds; exits 2 naming every attempt when none is there.
inline void* open_first(std::initializer_list<const char*> names, const char* what) {
    std::string tried, tried_names;
    for (const char* name : names) {
        if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
        const char* err = dlerror();
        tried += std::string(tried.empty() ? "" : "; ") + (err ? err : name);
        tried_names += std::string(tried_names.empty() ? "" : " | ") + name;
    }
    const std::string msg = std::string(what) + " is not available (" + tried + "); the cuBLAS variants need " + what +
                            " on the loader path (LD_LIBRARY_PATH)";
    fail_env(__FILE__, __LINE__, ("dlopen(" + tried_names + ")").c_str(), msg.c_str());
}

// fn = the symbol's address in lib; exits 2 when the library lacks it.
template <typename Fn>
void bind(void* lib, const char* symbol, Fn& fn) {
    fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
    if (!fn) {
        const std::string msg = std::string("symbol ") + symbol + " not found in the loaded cuBLAS library";
        fail_env(__FILE__, __LINE__, "dlsym", msg.c_str());
    }
}

}  // namespace detail

class Cublas {
  public:
    // cublasCreate_v2 (cublasCreate in cublas_v2.h)
    cublasStatus_t (*Create)(cublasHandle_t* handle) = nullptr;
    // cublasDestroy_v2 (cublasDestroy)
    cublasStatus_t (*Destroy)(cublasHandle_t handle) = nullptr;
    // cublasSetStream_v2 (cublasSetStream)
    cublasStatus_t (*SetStream)(cublasHandle_t handle, cudaStream_t stream) = nullptr;
    // cublasGemmEx
    cublasStatus_t (*GemmEx)(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                             const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                             int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                             cublasGemmAlgo_t algo) = nullptr;

    // The library loaded once per process; exits 2 when it or one of the symbols is missing.
    static const Cublas& get() {
        static const Cublas c = load();
        return c;
    }

  private:
    static Cublas load() {
        void* lib = detail::open_first({"libcublas.so.13", "libcublas.so.12", "libcublas.so"}, "libcublas");
        Cublas c;
        detail::bind(lib, "cublasCreate_v2", c.Create);
        detail::bind(lib, "cublasDestroy_v2", c.Destroy);
        detail::bind(lib, "cublasSetStream_v2", c.SetStream);
        detail::bind(lib, "cublasGemmEx", c.GemmEx);
        return c;
    }
};

inline const Cublas& cublas() { return Cublas::get(); }

// ===================================================================================================
// The one GEMM call the artifacts make
// ===================================================================================================

// The dtypes of one GEMM: A, B and C are all `data`; cuBLAS multiplies in `compute`.
struct GemmTypes {
    cudaDataType data;
    cublasComputeType_t compute;
};
// The two cuBLAS GEMMs the artifacts compare with: bf16 in and out with fp32 accumulation, and fp32 in
// and out multiplied in tf32 (10 mantissa bits of each input) with fp32 accumulation.
inline constexpr GemmTypes kGemmBf16{CUDA_R_16BF, CUBLAS_COMPUTE_32F};
inline constexpr GemmTypes kGemmTf32{CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32};

// C[M,N] = A[M,K] * B[N,K]^T on stream s, every matrix row-major with K contiguous in A and B: the
// problem of the GEMM artifacts, whose wgmma operands are both K-major. cuBLAS is column-major, where a
// row-major matrix reads as its transpose, so this is C^T[N,M] = B (op T) * A^T (op N): one cublasGemmEx
// "TN" with leading dimensions K, K and N; alpha 1, beta 0. A GEMV y[M] = A[M,K] x[K] is the case
// gemm_tn(h, x, A, y, 1, M, K, ...): y^T[1,M] = x^T[1,K] * A^T.
inline void gemm_tn(cublasHandle_t h, const void* A, const void* B, void* C, int M, int N, int K, GemmTypes t, cudaStream_t s) {
    const float alpha = 1.f, beta = 0.f;
    KWIKI_CHECK_STATUS(cublas().SetStream(h, s));
    KWIKI_CHECK_STATUS(cublas().GemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &alpha, B, t.data, K, A, t.data, K, &beta, C, t.data,
                                       N, t.compute, CUBLAS_GEMM_DEFAULT));
}

class CublasLt {
  public:
    cublasStatus_t (*Create)(cublasLtHandle_t* handle) = nullptr;  // cublasLtCreate
    cublasStatus_t (*Destroy)(cublasLtHandle_t handle) = nullptr;  // cublasLtDestroy
    // cublasLtMatmulDescCreate, cublasLtMatmulDescDestroy, cublasLtMatmulDescSetAttribute
    cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                       cudaDataType_t scaleType) = nullptr;
    cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t desc) = nullptr;
    cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                             const void* buf, size_t sizeInBytes) = nullptr;
    // cublasLtMatrixLayoutCreate (column-major rows x cols, leading dimension ld), cublasLtMatrixLayoutDestroy
    cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t* layout, cudaDataType type, uint64_t rows, uint64_t cols,
                                         int64_t ld) = nullptr;
    cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t layout) = nullptr;
    // cublasLtMatmul: D = alpha * (scaleA * scaleB) * op(A) op(B) + beta * C; algo may be nullptr
    cublasStatus_t (*Matmul)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* A,
                             cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc, const void* beta,
                             const void* C, cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                             const cublasLtMatmulAlgo_t* algo, void* workspace, size_t workspaceSizeInBytes,
                             cudaStream_t stream) = nullptr;
    // cublasLtMatmulPreferenceCreate / Destroy / SetAttribute: limits for the heuristic (the workspace it may use)
    cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t* pref) = nullptr;
    cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t pref) = nullptr;
    cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                                                   const void* buf, size_t sizeInBytes) = nullptr;
    // cublasLtMatmulAlgoGetHeuristic: up to `requested` algos for the problem, best first, in `results`
    cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
                                             cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc,
                                             cublasLtMatrixLayout_t Ddesc, cublasLtMatmulPreference_t pref, int requested,
                                             cublasLtMatmulHeuristicResult_t results[], int* returned) = nullptr;

    // The library loaded once per process; exits 2 when it or one of the symbols is missing.
    static const CublasLt& get() {
        static const CublasLt c = load();
        return c;
    }

  private:
    static CublasLt load() {
        void* lib = detail::open_first({"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, "libcublasLt");
        CublasLt c;
        detail::bind(lib, "cublasLtCreate", c.Create);
        detail::bind(lib, "cublasLtDestroy", c.Destroy);
        detail::bind(lib, "cublasLtMatmulDescCreate", c.MatmulDescCreate);
        detail::bind(lib, "cublasLtMatmulDescDestroy", c.MatmulDescDestroy);
        detail::bind(lib, "cublasLtMatmulDescSetAttribute", c.MatmulDescSetAttribute);
        detail::bind(lib, "cublasLtMatrixLayoutCreate", c.MatrixLayoutCreate);
        detail::bind(lib, "cublasLtMatrixLayoutDestroy", c.MatrixLayoutDestroy);
        detail::bind(lib, "cublasLtMatmul", c.Matmul);
        detail::bind(lib, "cublasLtMatmulPreferenceCreate", c.MatmulPreferenceCreate);
        detail::bind(lib, "cublasLtMatmulPreferenceDestroy", c.MatmulPreferenceDestroy);
        detail::bind(lib, "cublasLtMatmulPreferenceSetAttribute", c.MatmulPreferenceSetAttribute);
        detail::bind(lib, "cublasLtMatmulAlgoGetHeuristic", c.MatmulAlgoGetHeuristic);
        return c;
    }
};

inline const CublasLt& cublasLt() { return CublasLt::get(); }

// ===================================================================================================
// gemm_tn through cuBLASLt, with every candidate algorithm the heuristic offers
// ===================================================================================================

// The problem of gemm_tn (row-major C[M,N] = A[M,K] B[N,K]^T, so C^T = B (op T) * A^T (op N) in cuBLASLt's
// column-major terms), set up once: descriptors, a workspace, and up to `max_algos` algorithms from
// cublasLtMatmulAlgoGetHeuristic, best guess first. The heuristic's first guess is not always the fastest (a
// GEMV is an unusual GEMM): a fair baseline times each candidate and keeps the fastest (kwiki::select_fastest, in
// a selection pass of its own). Exits 2 when cuBLASLt offers none.
class LtGemmTn {
  public:
    static constexpr size_t kWorkspaceBytes = size_t(32) << 20;

    LtGemmTn(cublasLtHandle_t h, int M, int N, int K, GemmTypes t, int max_algos = 8) : h_(h) {
        const auto& lt = cublasLt();
        KWIKI_CHECK_STATUS(lt.MatmulDescCreate(&desc_, t.compute, CUDA_R_32F));
        const int32_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof op_t));
        KWIKI_CHECK_STATUS(lt.MatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof op_n));
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&a_, t.data, uint64_t(K), uint64_t(N), K));  // our B, K x N
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&b_, t.data, uint64_t(K), uint64_t(M), K));  // our A, K x M
        KWIKI_CHECK_STATUS(lt.MatrixLayoutCreate(&c_, t.data, uint64_t(N), uint64_t(M), N));  // C^T, N x M
        cublasLtMatmulPreference_t pref = nullptr;
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceCreate(&pref));
        const uint64_t limit = kWorkspaceBytes;
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit, sizeof limit));
        std::vector<cublasLtMatmulHeuristicResult_t> found(size_t(std::max(max_algos, 1)));
        int n = 0;
        KWIKI_CHECK_STATUS(lt.MatmulAlgoGetHeuristic(h, desc_, a_, b_, c_, c_, pref, int(found.size()), found.data(), &n));
        KWIKI_CHECK_STATUS(lt.MatmulPreferenceDestroy(pref));
        for (int i = 0; i < n; ++i)
            if (found[size_t(i)].state == CUBLAS_STATUS_SUCCESS) algos_.push_back(found[size_t(i)]);
        if (algos_.empty()) fail_env(__FILE__, __LINE__, "cublasLtMatmulAlgoGetHeuristic", "cuBLASLt offers no algorithm");
        KWIKI_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
    }
    ~LtGemmTn() {
        const auto& lt = cublasLt();
        lt.MatrixLayoutDestroy(c_), lt.MatrixLayoutDestroy(b_), lt.MatrixLayoutDestroy(a_), lt.MatmulDescDestroy(desc_);
        cudaFree(workspace_);
    }
    LtGemmTn(const LtGemmTn&) = delete;
    LtGemmTn& operator=(const LtGemmTn&) = delete;

    // How many candidate algorithms the heuristic returned (1 .. max_algos), and the workspace algorithm i asks for.
    int algos() const { return int(algos_.size()); }
    size_t workspace_of(int i) const { return algos_.at(size_t(i)).workspaceSize; }

    // C = A B^T with candidate algorithm i, on stream s.
    void run(int i, const void* A, const void* B, void* C, cudaStream_t s) const {
        const float alpha = 1.f, beta = 0.f;
        KWIKI_CHECK_STATUS(cublasLt().Matmul(h_, desc_, &alpha, B, a_, A, b_, &beta, C, c_, C, c_, &algos_.at(size_t(i)).algo,
                                             workspace_, kWorkspaceBytes, s));
    }

  private:
    cublasLtHandle_t h_ = nullptr;
    cublasLtMatmulDesc_t desc_ = nullptr;
    cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
    std::vector<cublasLtMatmulHeuristicResult_t> algos_;
    void* workspace_ = nullptr;
};

// ===================================================================================================
// The handles of a run, opened only for the variants that call the library
// ===================================================================================================

// A cuBLAS and a cuBLASLt handle, each created (its library loaded then) only when asked for, and destroyed with
// this object: a run whose variants call neither never loads them.
//   const kwiki::BlasHandles lib(args.want("cublas"), args.want("cublaslt_best"));
//   kwiki::gemm_tn(lib.blas, ...);
struct BlasHandles {
    cublasHandle_t blas = nullptr;
    cublasLtHandle_t lt = nullptr;

    BlasHandles(bool want_blas, bool want_lt) {
        if (want_blas) KWIKI_CHECK_STATUS(cublas().Create(&blas));
        if (want_lt) KWIKI_CHECK_STATUS(cublasLt().Create(&lt));
    }
    ~BlasHandles() {
        if (blas) KWIKI_CHECK_STATUS(cublas().Destroy(blas));
        if (lt) KWIKI_CHECK_STATUS(cublasLt().Destroy(lt));
    }
    BlasHandles(const BlasHandles&) = delete;
    BlasHandles& operator=(const BlasHandles&) = delete;
};

}  // namespace kwiki
