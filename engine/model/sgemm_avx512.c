/* sgemm_avx512.c — the product kernels of sgemm_body.h for AVX-512F: tiles
 * of 3 rows × 7 vectors of 16 floats (21 accumulators + 7 B vectors + 1
 * broadcast of the 32 zmm registers; 4 rows leave no register for B, whose
 * vectors are then reloaded for every row: measured slower), so a row of
 * 100 columns is one panel with its last vector masked to 4 lanes.  The only file compiled for
 * AVX-512F; sgemm_kernels.c calls it only when the CPU and OS have it. */
#pragma GCC target("avx512f")
#include <immintrin.h>

#include "engine/model/sgemm_kernels_internal.h"

#define SK(name) pt_sgemm_avx512_##name
#define V __m512
#define MASK_T __mmask16
#define VW 16
#define RB 3
#define NVMAX 7
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VLOADU(p) _mm512_loadu_ps(p)
#define VLOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define VSTOREU(p, v) _mm512_storeu_ps((p), (v))
#define VSTOREM(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VMUL(a, b) _mm512_mul_ps((a), (b))
#define MASK(n) ((__mmask16)((1u << (n)) - 1u))
#define SK_NV_CASES(R) SK_CASE(R, 1) SK_CASE(R, 2) SK_CASE(R, 3) SK_CASE(R, 4) SK_CASE(R, 5) \
                       SK_CASE(R, 6) SK_CASE(R, 7)

#include "engine/model/sgemm_body.h"
