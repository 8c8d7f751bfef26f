/* ssp_avx2.c — the shifted softplus of ssp_body.h for AVX2 + FMA (8 floats
 * per vector); ssp_kernels.c calls it only when the CPU and OS have both. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <stdint.h>

#include "engine/model/ssp_kernels.h"
#include "engine/model/ssp_table.h"
#include "engine/model/vec_avx2.h"

/* vectors in flight per step (ssp_body.h): with the 8-interval table
 * (session 11, AVX2 forced on the Xeon, thread CPU time) 1 / 2 / 3 / 4 / 6 /
 * 8 vectors: value only 0.30 / 0.30 / 0.29-0.32 / 0.31 / 0.33-0.35 /
 * 0.40 ns per element, with σ 0.56-0.58 / 0.56 / 0.57-0.61 / 0.63-0.66 /
 * 0.68-0.72 / 0.74-0.77 (16 ymm registers: the table rows are reloaded) */
#define SSP_BLOCK 2
/* the backward's σ̃ (no table rows to hold): 2 / 3 / 4 vectors 0.247-0.250 /
 * 0.232-0.237 / 0.234-0.237 ns per element (AVX2 forced on the Zen 5,
 * session 18) */
#define SSP_DBLOCK 3
#define T __m256
#define VSUB(a, b) _mm256_sub_ps((a), (b))
#define VDIV(a, b) _mm256_div_ps((a), (b))
/* maxps(a, b) = a > b ? a : b, NaN included: the scalar spelling's select */
#define VMAX(a, b) _mm256_max_ps((a), (b))
#define VNEGABS(a) _mm256_or_ps((a), _mm256_set1_ps(-0.0f))
#define VSCALE(p, big)                                                   \
    _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p),        \
                                         _mm256_slli_epi32(_mm256_castps_si256(big), 23)))
#define VSEL_GE0(v, a, b) \
    _mm256_blendv_ps((b), (a), _mm256_cmp_ps((v), _mm256_setzero_ps(), _CMP_GE_OQ))

/* the interval's slot: x's bits >> 22 (ssp_table.h); a table entry by the
 * slot: one 8-entry permute (vpermps reads the index's low 3 bits) */
#define VKEY(x) _mm256_castsi256_ps(_mm256_srli_epi32(_mm256_castps_si256(x), 22))
#define VLUT(row, key) _mm256_permutevar8x32_ps(_mm256_load_ps(row), _mm256_castps_si256(key))

#define SSP_U SSP_BLOCK
#define SSP_FN(name) sspB_##name   /* a block */
#include "engine/model/ssp_body.h"
#undef SSP_U
#undef SSP_FN
#define SSP_U SSP_DBLOCK
#define SSP_FN(name) sspD_##name   /* a block of the backward's σ̃ */
#include "engine/model/ssp_body.h"
#undef SSP_U
#undef SSP_FN
#define SSP_U 1
#define SSP_FN(name) ssp1_##name
#include "engine/model/ssp_body.h"

#define VSTREAM(p, v) _mm256_stream_ps((p), (v))

#define SSP_KERNEL pt_ssp_avx2
#define SSP_KERNEL_NT pt_ssp_avx2_nt
#define SSP_KERNEL_COPY_NT pt_ssp_avx2_copy_nt
#define SSP_DSIG_KERNEL pt_ssp_dsig_avx2
#include "engine/model/ssp_vec_loop.h"
