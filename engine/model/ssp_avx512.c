/* ssp_avx512.c — the shifted softplus of ssp_body.h for AVX-512F (16
 * floats per vector).  The only ssp file compiled for AVX-512F;
 * ssp_kernels.c calls it only when the CPU and OS have it. */
#pragma GCC target("avx512f")
#include <immintrin.h>
#include <stdint.h>

#include "engine/model/ssp_kernels.h"
#include "engine/model/ssp_table.h"
#include "engine/model/vec_avx512.h"

/* vectors in flight per step (ssp_body.h): the 8-interval table (session
 * 11, value only, thread CPU time) 2 / 3 / 4 / 6 vectors 0.23 / 0.22-0.24 /
 * 0.22 / 0.24-0.25 ns per element; session 10's 32 intervals 2 / 4 / 6 / 8
 * at 0.26-0.31 / 0.24-0.28 / 0.27-0.35 / 0.32-0.37 (8 spills); the exp +
 * log1p form before them 4 / 8 / 12 / 16 at 0.26 / 0.22 / 0.24 / 0.28 */
#define SSP_BLOCK 4
/* the backward's σ̃ (dsig: the exp's chain, 11 of its 17 operations on the
 * two multiply-add pipes, no table) over its own count: on the Zen 5
 * (session 18, thread CPU time, interleaved) 4 / 5 / 6 / 7 / 8 vectors
 * 0.116 / 0.104 / 0.100 / 0.101-0.105 / 0.103-0.105 ns per element alone;
 * pt_ssp_backward_s (with da1's column sums) 4 → 6: 0.156-0.161 →
 * 0.145-0.148.  The forward stays at 4 (6: 0.138 against 0.141 value only,
 * with σ no better) */
#define SSP_DBLOCK 6
#define T __m512
#define VSUB(a, b) _mm512_sub_ps((a), (b))
#define VDIV(a, b) _mm512_div_ps((a), (b))
/* maxps(a, b) = a > b ? a : b, NaN included: the scalar spelling's select */
#define VMAX(a, b) _mm512_max_ps((a), (b))
#define VNEGABS(a) \
    _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)))
#define VSCALE(p, big)                                                   \
    _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p),        \
                                         _mm512_slli_epi32(_mm512_castps_si512(big), 23)))
#define VSEL_GE0(v, a, b) \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask((v), _mm512_setzero_ps(), _CMP_GE_OQ), (b), (a))

/* the interval's slot: x's bits >> 22 (ssp_table.h); a table entry by the
 * slot: one permute from one register (the 8 entries are written twice, so
 * the 4 index bits it reads give AVX2's 3-bit pick) */
#define VKEY(x) _mm512_castsi512_ps(_mm512_srli_epi32(_mm512_castps_si512(x), 22))
#define VLUT(row, key) _mm512_permutexvar_ps(_mm512_castps_si512(key), _mm512_load_ps(row))

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

#define VSTREAM(p, v) _mm512_stream_ps((p), (v))

#define SSP_KERNEL pt_ssp_avx512
#define SSP_KERNEL_NT pt_ssp_avx512_nt
#define SSP_KERNEL_COPY_NT pt_ssp_avx512_copy_nt
#define SSP_DSIG_KERNEL pt_ssp_dsig_avx512
#include "engine/model/ssp_vec_loop.h"
