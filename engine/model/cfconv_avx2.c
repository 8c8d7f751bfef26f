/* cfconv_avx2.c — the convolution kernels of cfconv_body.h for AVX2 + FMA:
 * panels of up to 8 ymm (64 floats; the 16 ymm registers hold 8
 * accumulators, the temporaries and the tail mask), so a 100-filter row is
 * two panels of 7 and 6 vectors, the last masked to 4 lanes.  Called by
 * cfconv_kernels.c only when the CPU has AVX2 and FMA. */
#pragma GCC target("avx2,fma")
#include <immintrin.h>
#include <stdint.h>

#include "engine/model/cfconv_kernels_internal.h"

#define CK(name) pt_cfconv_avx2_##name
#define V __m256
#define MASK_T __m256i
#define VW 8
#define NVMAX 8
#define VZERO() _mm256_setzero_ps()
#define VSET1(x) _mm256_set1_ps(x)
#define VLOADU(p) _mm256_loadu_ps(p)
#define VLOADM(p, m) _mm256_maskload_ps((p), (m))
#define VSTOREU(p, v) _mm256_storeu_ps((p), (v))
#define VSTOREM(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define VMUL(a, b) _mm256_mul_ps((a), (b))
#define MASK(n) _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))

#include "engine/model/cfconv_body.h"
