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
// No link flag is needed: dlopen is in libc from glibc 2.34 on (add `dl` to build.libs on older glibc).
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <library_types.h>

#include <string>

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

// ===================================================================================================
// Entry points, resolved from the library on first use
// ===================================================================================================

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
    static constexpr const char* kLibraries[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};

    static Cublas load() {
        void* lib = nullptr;
        std::string tried;
        for (const char* name : kLibraries) {
            lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
            if (lib) break;
            const char* err = dlerror();
            tried += std::string(tried.empty() ? "" : "; ") + (err ? err : name);
        }
        if (!lib) {
            const std::string msg = "cuBLAS is not available (" + tried +
                                    "); the cuBLAS variants need libcublas on the loader path (LD_LIBRARY_PATH)";
            fail_env(__FILE__, __LINE__, "dlopen(libcublas.so.13 | libcublas.so.12 | libcublas.so)", msg.c_str());
        }
        Cublas c;
        bind(lib, "cublasCreate_v2", c.Create);
        bind(lib, "cublasDestroy_v2", c.Destroy);
        bind(lib, "cublasSetStream_v2", c.SetStream);
        bind(lib, "cublasGemmEx", c.GemmEx);
        return c;
    }

    template <typename Fn>
    static void bind(void* lib, const char* symbol, Fn& fn) {
        fn = reinterpret_cast<Fn>(dlsym(lib, symbol));
        if (!fn) {
            const std::string msg = std::string("symbol ") + symbol + " not found in the loaded cuBLAS library";
            fail_env(__FILE__, __LINE__, "dlsym", msg.c_str());
        }
    }
};

inline const Cublas& cublas() { return Cublas::get(); }

}  // namespace kwiki
