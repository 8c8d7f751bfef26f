/* sgemm_avx512.c — the product kernels of sgemm_body.h for AVX-512F: tiles
 * of 3 rows × 7 vectors of 16 floats (21 accumulators + 7 B vectors + 1
 * broadcast of the 32 zmm registers; 4 rows leave no register for B, whose
 * vectors are then reloaded for every row: measured slower), so a row of
 * 100 columns is one panel with its last vector masked to 4 lanes.  The only file compiled for
 * AVX-512F; sgemm_kernels.c calls it only when the CPU and OS have it. */
#pragma GCC target("avx512f")
#include <immintrin.h>

#include "engine/model/sgemm_kernels_internal.h"
#include "engine/model/vec_avx512.h"

#define SK(name) pt_sgemm_avx512_##name
#define RB 3
#define NVMAX 7
#define SK_NV_CASES(R) SK_CASE(R, 1) SK_CASE(R, 2) SK_CASE(R, 3) SK_CASE(R, 4) SK_CASE(R, 5) \
                       SK_CASE(R, 6) SK_CASE(R, 7)
/* the packed last 4 columns (sgemm_body.h): 4 floats broadcast to each
 * 128-bit lane, row i's 4 lanes moved in, loaded from and stored to a row */
#define SK_PACK4
#define SK_PK_CASES(R) SK_PCASE(R, 1) SK_PCASE(R, 2) SK_PCASE(R, 3) SK_PCASE(R, 4) \
                       SK_PCASE(R, 5) SK_PCASE(R, 6)
#define SK_BCAST4(p) _mm512_broadcast_f32x4(_mm_loadu_ps(p))
#define SK_MASKMOV(v, m, x) _mm512_mask_mov_ps((v), (__mmask16)(m), (x))
#define SK_INSERT4(v, p, i) _mm512_insertf32x4((v), _mm_loadu_ps(p), (i))
#define SK_EXTRACT4(p, v, i) _mm_storeu_ps((p), _mm512_extractf32x4_ps((v), (i)))

#include "engine/model/sgemm_body.h"
