// wgmma_fp8.cuh: sm90::WgmmaOp for 8-bit floats, the m64nNk32.f32.e4m3.e4m3 and .e5m2.e5m2 atoms of wgmma.cu
// (artifacts/wgmma_sm90a). sm90.cuh specializes WgmmaOp for bf16 and tf32 only; these follow its form exactly:
// one wgmma.mma_async per call, both operands K-major in shared memory (8-bit types have no transpose flags),
// fp32 accumulators in the same layout, and K = 32 elements = 32 bytes per instruction, so a descriptor steps
// along K by the same +2 (32 bytes >> 4) as bf16's k16 and tf32's k8.
#pragma once

#include <cuda_fp8.h>

#include "sm90.cuh"

namespace sm90 {

// sm90.cuh's operand macros end with it (#undef), so the 8-bit atoms spell theirs here: the N/2 accumulators as
// "+f"(d[i]) and their placeholders %0 .. %(N/2 - 1); the descriptors and scale_d follow as %(N/2) .. %(N/2 + 2).
#define WGFP8_ACC8(i) \
    "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define WGFP8_ACC32(i) WGFP8_ACC8(i), WGFP8_ACC8(i + 8), WGFP8_ACC8(i + 16), WGFP8_ACC8(i + 24)
#define WGFP8_ACC_N64 WGFP8_ACC32(0)
#define WGFP8_ACC_N128 WGFP8_ACC32(0), WGFP8_ACC32(32)
#define WGFP8_ACC_N256 WGFP8_ACC32(0), WGFP8_ACC32(32), WGFP8_ACC32(64), WGFP8_ACC32(96)
#define WGFP8_REGS_N64                                                               \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "         \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WGFP8_REGS_N128                                                                \
    WGFP8_REGS_N64 ", "                                                                \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGFP8_REGS_N256                                                                              \
    WGFP8_REGS_N128 ", "                                                                             \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "               \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "               \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "   \
    "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"

// WgmmaOp<T, N>::mma as wgmma.mma_async.sync.aligned.m64n<N>k32.f32.<TYPE>.<TYPE>: the accumulators, descriptors
// da and db (%DA, %DB), the scale-d predicate from scale_d (%SCALE; 0: d = A B, else d += A B), then
// imm-scale-a and imm-scale-b (1: not negated); no transpose immediates (the PTX ISA allows none for 8-bit types).
#define WGFP8_WGMMA(T, N, TYPE, DA, DB, SCALE)                                                                     \
    template <>                                                                                                    \
    __device__ __forceinline__ void WgmmaOp<T, N>::mma(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) { \
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE ", 0;\n"                                          \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k32.f32." TYPE "." TYPE " {" WGFP8_REGS_N##N "}, "    \
                     "%" #DA ", %" #DB ", p, 1, 1;\n}\n"                                                           \
                     : WGFP8_ACC_N##N                                                                              \
                     : "l"(da), "l"(db), "r"(scale_d));                                                            \
    }

WGFP8_WGMMA(__nv_fp8_e4m3, 64, "e4m3", 32, 33, 34)
WGFP8_WGMMA(__nv_fp8_e4m3, 128, "e4m3", 64, 65, 66)
WGFP8_WGMMA(__nv_fp8_e4m3, 256, "e4m3", 128, 129, 130)
WGFP8_WGMMA(__nv_fp8_e5m2, 256, "e5m2", 128, 129, 130)

#undef WGFP8_WGMMA
#undef WGFP8_REGS_N256
#undef WGFP8_REGS_N128
#undef WGFP8_REGS_N64
#undef WGFP8_ACC_N256
#undef WGFP8_ACC_N128
#undef WGFP8_ACC_N64
#undef WGFP8_ACC32
#undef WGFP8_ACC8

}  // namespace sm90
