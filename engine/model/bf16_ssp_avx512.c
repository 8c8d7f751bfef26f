/* bf16_ssp_avx512.c — bf16_ssp_body.h's shifted softplus and σ̃ multiply
 * for AVX-512 (16 floats per vector; bf16.h's pairs and rows widened in
 * registers).  Called only after pt_cpu_has_bf16() (bf16_ssp.c, and the
 * bf16 kernel's fused epilogue, which runs only there). */
#pragma GCC target("avx512f,avx512bw,avx512vl")
#include <immintrin.h>
#include <stdint.h>

#include "engine/model/bf16_ssp.h"

#include "engine/model/bf16_ssp_vec.h"

/* vectors per step: independent chains the core overlaps (each ~14
 * dependent operations; 4 and 8 measured alike with the table's cubics) */
#define BLOCK 8

void pt_bf16_ssp_avx512(float *x, size_t len)
{
    size_t k = 0;
    for (; k + BLOCK * 16 <= len; k += BLOCK * 16) {
        __m512 v[BLOCK];
        for (int j = 0; j < BLOCK; j++) v[j] = _mm512_loadu_ps(x + k + 16 * j);
        for (int j = 0; j < BLOCK; j++) v[j] = bsspv_ssp(v[j]);
        for (int j = 0; j < BLOCK; j++) _mm512_storeu_ps(x + k + 16 * j, v[j]);
    }
    for (; k < len; k += 16) {
        const __mmask16 m = len - k >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (len - k)) - 1u);
        _mm512_mask_storeu_ps(x + k, m, bsspv_ssp(_mm512_maskz_loadu_ps(m, x + k)));
    }
}


/* bf16 bits in the high half of each 32-bit lane are that lane's float */
static inline __m512 hi_float(__m512i v)
{
    return _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int)0xffff0000u)));
}
static inline __m512 lo_float(__m512i v) { return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)); }

/* c[0..16) ⊙= σ̃(s): whole vectors unmasked, the tail masked (masked
 * memory operations are slow here: bf16_pack_avx512.c), a tail of 4 lanes
 * (a 100-float row's) as one xmm: a masked store covers 48 bytes of the
 * next row, whose first load would wait for it (bf16_avx512_vec.h) */
static inline void mul_full(float *c, __m512 s)
{
    _mm512_storeu_ps(c, _mm512_mul_ps(_mm512_loadu_ps(c), bsspv_dssp(s)));
}
static inline void mul_tail(float *c, __mmask16 m, __m512 s)
{
    if (m == 0xf) {
        const __m512 x = _mm512_zextps128_ps512(_mm_loadu_ps(c));
        _mm_storeu_ps(c, _mm512_castps512_ps128(_mm512_mul_ps(x, bsspv_dssp(s))));
        return;
    }
    _mm512_mask_storeu_ps(c, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, c), bsspv_dssp(s)));
}

void pt_bf16_dssp_mul_avx512(float *c, size_t ldc, int rows, int n, const void *s1, int fmt,
                             size_t lds)
{
    const int full = n / 16 * 16;
    const __mmask16 m = (__mmask16)((1u << (n - full)) - 1u);
    if (fmt == PT_BF16_FMT_PAIRS) {
        /* pair rows hold ≥ n rounded up to 16 lanes (bf16.h): whole loads */
        const uint32_t *p = s1;
        for (int r = 0; r < rows; r += 2, p += lds) {
            float *c0 = c + (size_t)r * ldc, *c1 = c0 + ldc;
            int j = 0;
            if (r + 1 < rows) {
                for (; j < full; j += 16) {
                    const __m512i v = _mm512_loadu_si512(p + j);
                    mul_full(c0 + j, lo_float(v));
                    mul_full(c1 + j, hi_float(v));
                }
                if (j < n) {
                    const __m512i v = _mm512_loadu_si512(p + j);
                    mul_tail(c0 + j, m, lo_float(v));
                    mul_tail(c1 + j, m, hi_float(v));
                }
            } else {
                for (; j < full; j += 16) mul_full(c0 + j, lo_float(_mm512_loadu_si512(p + j)));
                if (j < n) mul_tail(c0 + j, m, lo_float(_mm512_loadu_si512(p + j)));
            }
        }
        return;
    }
    const pt_bf16 *h = s1;
    for (int r = 0; r < rows; r++, h += lds) {
        float *cr = c + (size_t)r * ldc;
        int j = 0;
        for (; j < full; j += 16)
            mul_full(cr + j, lo_float(_mm512_cvtepu16_epi32(
                                 _mm256_loadu_si256((const __m256i *)(h + j)))));
        if (j < n)
            mul_tail(cr + j, m, lo_float(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, h + j))));
    }
}
