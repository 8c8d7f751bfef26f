/* vec_avx512.h — the vector vocabulary the fp32 kernel bodies (sgemm_body.h,
 * cfconv_body.h) are written in, spelled for AVX-512F: 16 floats per
 * vector, tails through a 16-bit lane mask.  Included by the kernel files
 * compiled for that target (sgemm_avx512.c, cfconv_avx512.c) after their
 * `#pragma GCC target` and <immintrin.h>; one spelling for both. */
#ifndef PT_VEC_AVX512_H
#define PT_VEC_AVX512_H

#define V __m512
#define MASK_T __mmask16
#define VW 16
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VLOADU(p) _mm512_loadu_ps(p)
#define VLOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define VSTOREU(p, v) _mm512_storeu_ps((p), (v))
#define VSTOREM(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VMUL(a, b) _mm512_mul_ps((a), (b))
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VLOAD4(p) _mm512_zextps128_ps512(_mm_loadu_ps(p))
#define VSTORE4(p, v) _mm_storeu_ps((p), _mm512_castps512_ps128(v))
/* doubles (the column sums' totals, colsum_body.h): VW/2 per vector, the
 * low and high halves of a float vector widened */
#define VD __m512d
#define VDLOADU(p) _mm512_loadu_pd(p)
#define VDSTOREU(p, v) _mm512_storeu_pd((p), (v))
#define VDADD(a, b) _mm512_add_pd((a), (b))
#define VD_LO(v) _mm512_cvtps_pd(_mm512_castps512_ps256(v))
#define VD_HI(v) _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
/* the first n lanes (0 ≤ n ≤ 16) */
#define MASK(n) ((__mmask16)((1u << (n)) - 1u))

#endif
