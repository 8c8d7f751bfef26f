/* bf16_avx512_vec.h — the vector vocabulary of the AVX512-BF16 kernel's
 * two files (bf16_pack_avx512.c: rounding and packing; bf16_avx512.c: the
 * micro-kernel and its blocking).  Include it only after
 * `#pragma GCC target("avx512f,avx512bf16,avx512bw,avx512vl")`. */
#ifndef PT_BF16_AVX512_VEC_H
#define PT_BF16_AVX512_VEC_H

#include <immintrin.h>

#include "engine/model/bf16_internal.h"

/* Address of stored element (row, col) of an operand. */
static inline const void *elem_at(const pt_bf16_operand *o, size_t row, size_t col)
{
    size_t size = o->f32 ? sizeof(float) : sizeof(uint16_t);
    return (const char *)o->p + (row * (size_t)o->ld + col) * size;
}

/* 16 lanes of round-to-nearest-even fp32 → bf16 bits (low half of each lane),
 * the vector twin of pt_bf16_round_bits. */
static inline __m512i round16(__m512i u)
{
    const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(abs, _mm512_set1_epi32(0x7f800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    return _mm512_mask_mov_epi32(r, nan, quiet);
}

/* 16 fp32 lanes rounded to bf16 (16 × 16 bits).  vcvtneps2bf16 rounds to
 * nearest even and quiets NaN exactly as pt_bf16_round_bits does (checked on
 * all 2^32 inputs), except that it reads fp32 subnormals as zero, where
 * pt_bf16_round_bits rounds them (up to bf16's smallest normal for the
 * largest ones): a vector holding a subnormal takes the integer path, so the
 * bits are always pt_bf16_round_bits'. */
/* lanes of x that are fp32 subnormals: 1 ≤ |x| bits ≤ 0x007fffff */
static inline __mmask16 subnormals(__m512 x)
{
    const __m512i abs = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(abs, _mm512_set1_epi32(1)),
                                   _mm512_set1_epi32(0x007fffff));
}

static inline __m256i round16h(__m512 x)
{
    if (__builtin_expect(subnormals(x) != 0, 0))
        return _mm512_cvtepi32_epi16(round16(_mm512_castps_si512(x)));
    return (__m256i)_mm512_cvtneps_pbh(x);
}

/* Masked loads and stores cost several times a plain one on the Zen 5 this
 * was measured on (the packing loops ran 2× slower), so the full-width case
 * takes plain instructions and only a row's tail is masked. */
static inline __m512 load_ps(__mmask16 m, const float *p)
{
    return m == 0xffff ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}

static inline void store_ps(float *p, __mmask16 m, __m512 x)
{
    if (m == 0xffff) _mm512_storeu_ps(p, x);
    else _mm512_mask_storeu_ps(p, m, x);
}

/* Up to 16 consecutive elements (lanes outside m read as 0) as bf16. */
static inline __m256i load16h(const void *src, int f32, __mmask16 m)
{
    if (f32) return round16h(load_ps(m, src));
    return m == 0xffff ? _mm256_loadu_si256(src) : _mm256_maskz_loadu_epi16(m, src);
}

/* The same, one bf16 in the low half of each 32-bit lane. */
static inline __m512i load16(const void *src, int f32, __mmask16 m)
{
    return _mm512_cvtepu16_epi32(load16h(src, f32, m));
}

/* mask of the first `count` lanes; count ≤ 0 (the zero padding) gives none */
static inline __mmask16 lanes(int count)
{
    if (count <= 0) return 0;
    return count >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << count) - 1u);
}

/* The word permutation of interleave_run: word 2i ← i, 2i + 1 ← 16 + i. */
static inline __m512i pair_words(__m512i both)
{
    const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9,
                                         24, 8, 23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17,
                                         1, 16, 0);
    return _mm512_permutexvar_epi16(idx, both);
}

/* 16 × 16 uint32 transposed in registers: r[i] lane j ↔ r[j] lane i.
 * Pairs of rows interleave their 32-bit, then 64-bit elements (each 128-bit
 * lane then holds a 4 × 4 block), and two rounds of 128-bit lane shuffles
 * gather the blocks: 64 shuffles for 256 elements. */
static inline void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);     /* column 4L + 0 of rows i..i+3 */
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]); /* 4L + 1 */
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        /* u[c], u[4+c], u[8+c], u[12+c]: column 4L + c of rows 0-3, 4-7, 8-11, 12-15 */
        __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88);  /* lanes 0, 2 */
        __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xdd);  /* lanes 1, 3 */
        __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88);
        __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xdd);
        r[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);      /* column c */
        r[4 + c] = _mm512_shuffle_i32x4(v1, w1, 0x88);  /* column 4 + c */
        r[8 + c] = _mm512_shuffle_i32x4(v0, w0, 0xdd);  /* column 8 + c */
        r[12 + c] = _mm512_shuffle_i32x4(v1, w1, 0xdd); /* column 12 + c */
    }
}

#endif
