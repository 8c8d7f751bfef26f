/* vec_avx2.h — the vector vocabulary the fp32 kernel bodies (sgemm_body.h,
 * cfconv_body.h) are written in, spelled for AVX2 + FMA: 8 floats per
 * vector, tails through an integer-vector lane mask.  Included by the
 * kernel files compiled for that target (sgemm_avx2.c, cfconv_avx2.c) after
 * their `#pragma GCC target` and <immintrin.h>; one spelling for both, so a
 * fix to a load, store or mask lands in every kernel. */
#ifndef PT_VEC_AVX2_H
#define PT_VEC_AVX2_H

#define V __m256
#define MASK_T __m256i
#define VW 8
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VLOADU(p) _mm256_loadu_ps(p)
#define VLOADM(p, m) _mm256_maskload_ps((p), (m))
#define VSTOREU(p, v) _mm256_storeu_ps((p), (v))
#define VSTOREM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VMUL(a, b) _mm256_mul_ps((a), (b))
#define VADD(a, b) _mm256_add_ps((a), (b))
#define VLOAD4(p) _mm256_zextps128_ps256(_mm_loadu_ps(p))
#define VSTORE4(p, v) _mm_storeu_ps((p), _mm256_castps256_ps128(v))
/* doubles (the column sums' totals, colsum_body.h): VW/2 per vector, the
 * low and high halves of a float vector widened */
#define VD __m256d
#define VDLOADU(p) _mm256_loadu_pd(p)
#define VDSTOREU(p, v) _mm256_storeu_pd((p), (v))
#define VDADD(a, b) _mm256_add_pd((a), (b))
#define VD_LO(v) _mm256_cvtps_pd(_mm256_castps256_ps128(v))
#define VD_HI(v) _mm256_cvtps_pd(_mm256_extractf128_ps((v), 1))
/* the first n lanes (0 ≤ n ≤ 8) */
#define MASK(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))

#endif
