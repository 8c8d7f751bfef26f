/* sgemm_avx2.c — the product kernels of sgemm_body.h for AVX2 + FMA: tiles
 * of 6 rows × 2 vectors of 8 floats (12 accumulators + 2 B vectors + 1
 * broadcast of the 16 ymm registers, the classic 6×16 shape), the last
 * vector of a row masked to the columns that exist.  Called by
 * sgemm_kernels.c only when the CPU has AVX2 and FMA. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>

#include "engine/model/sgemm_kernels_internal.h"

#define SK(name) pt_sgemm_avx2_##name
#define V __m256
#define MASK_T __m256i
#define VW 8
#define RB 6
#define NVMAX 2
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VLOADU(p) _mm256_loadu_ps(p)
#define VLOADM(p, m) _mm256_maskload_ps((p), (m))
#define VSTOREU(p, v) _mm256_storeu_ps((p), (v))
#define VSTOREM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VMUL(a, b) _mm256_mul_ps((a), (b))
#define MASK(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))
#define SK_NV_CASES(R) SK_CASE(R, 1) SK_CASE(R, 2)

#include "engine/model/sgemm_body.h"
