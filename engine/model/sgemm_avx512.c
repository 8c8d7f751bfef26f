/* sgemm_avx512.c — the product kernels of sgemm_body.h for AVX-512F: tiles
 * of 3 rows × 7 vectors of 16 floats (21 accumulators + 7 B vectors + 1
 * broadcast of the 32 zmm registers; 4 rows leave no register for B, whose
 * vectors are then reloaded for every row: measured slower), so a row of
 * 100 columns is one panel: 6 whole vectors and its last 4 columns, which
 * the 3 rows share in one packed accumulator (SK_PACK4, sgemm_body.h).
 * Also the 16 × 16 register transpose of the narrow weight gradient.  The
 * only file compiled for AVX-512F; sgemm_kernels.c calls it only when the
 * CPU and OS have it. */
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

/* dst[j·ldd + i] = src[i·lds + j] for i < rows, j < cols, in 16 × 16
 * blocks transposed in registers (edges through lane masks): the narrow
 * weight gradient's C in and out of its transpose (sgemm_kernels.c), where
 * a scalar loop cost a sixth of the product (dA1's 100 × 25 per chunk). */
void pt_sgemm_avx512_transpose(int rows, int cols, const float *src, int lds, float *dst,
                               int ldd)
{
    for (int i0 = 0; i0 < rows; i0 += 16) {
        const int ri = rows - i0 < 16 ? rows - i0 : 16;
        const __mmask16 sm = (__mmask16)((1u << ri) - 1u);
        for (int j0 = 0; j0 < cols; j0 += 16) {
            const int cj = cols - j0 < 16 ? cols - j0 : 16;
            const __mmask16 lm = (__mmask16)((1u << cj) - 1u);
            __m512 r[16], t[16], u[16], v[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < ri ? _mm512_maskz_loadu_ps(lm, src + (long)(i0 + i) * lds + j0)
                              : _mm512_setzero_ps();
            /* pairs of rows interleaved, then quads: u[4q + c]'s 128-bit
             * lane L is column 4L + c of rows 4q .. 4q+3 */
            for (int q = 0; q < 8; q++) {
                t[2 * q] = _mm512_unpacklo_ps(r[2 * q], r[2 * q + 1]);
                t[2 * q + 1] = _mm512_unpackhi_ps(r[2 * q], r[2 * q + 1]);
            }
            for (int q = 0; q < 4; q++) {
                u[4 * q] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0x44);
                u[4 * q + 1] = _mm512_shuffle_ps(t[4 * q], t[4 * q + 2], 0xEE);
                u[4 * q + 2] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0x44);
                u[4 * q + 3] = _mm512_shuffle_ps(t[4 * q + 1], t[4 * q + 3], 0xEE);
            }
            /* then the 128-bit lanes: column c whole in r[c] */
            for (int c = 0; c < 4; c++) {
                v[c] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x88);
                v[c + 4] = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xDD);
                v[c + 8] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x88);
                v[c + 12] = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xDD);
            }
            for (int c = 0; c < 4; c++) {
                r[c] = _mm512_shuffle_f32x4(v[c], v[c + 8], 0x88);
                r[c + 8] = _mm512_shuffle_f32x4(v[c], v[c + 8], 0xDD);
                r[c + 4] = _mm512_shuffle_f32x4(v[c + 4], v[c + 12], 0x88);
                r[c + 12] = _mm512_shuffle_f32x4(v[c + 4], v[c + 12], 0xDD);
            }
            for (int j = 0; j < cj; j++)
                _mm512_mask_storeu_ps(dst + (long)(j0 + j) * ldd + i0, sm, r[j]);
        }
    }
}
