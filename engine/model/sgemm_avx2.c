/* sgemm_avx2.c — the product kernels of sgemm_body.h for AVX2 + FMA: tiles
 * of 6 rows × 2 vectors of 8 floats (12 accumulators + 2 B vectors + 1
 * broadcast of the 16 ymm registers, the classic 6×16 shape), the last
 * vector of a row masked to the columns that exist.  Called by
 * sgemm_kernels.c only when the CPU has AVX2 and FMA. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#include "engine/model/sgemm_kernels_internal.h"
#include "engine/model/vec_avx2.h"

#define SK(name) pt_sgemm_avx2_##name
#define RB 6
#define NVMAX 2
#define SK_NV_CASES(R) SK_CASE(R, 1) SK_CASE(R, 2)

#include "engine/model/sgemm_body.h"
