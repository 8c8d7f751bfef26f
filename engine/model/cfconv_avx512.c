/* cfconv_avx512.c — the convolution kernels of cfconv_body.h for AVX-512F:
 * panels of up to 8 zmm (128 floats), so a 100-filter row is one panel of
 * 7 vectors with the last masked to 4 lanes.  The only file of the
 * convolution compiled for AVX-512F; cfconv_kernels.c calls it only when
 * the CPU and OS have it. */
#pragma GCC target("avx512f")
#include <immintrin.h>
#include <stdint.h>

#include "engine/model/cfconv_kernels_internal.h"

#define CK(name) pt_cfconv_avx512_##name
#define V __m512
#define MASK_T __mmask16
#define VW 16
#define NVMAX 8
#define VZERO() _mm512_setzero_ps()
#define VSET1(x) _mm512_set1_ps(x)
#define VLOADU(p) _mm512_loadu_ps(p)
#define VLOADM(p, m) _mm512_maskz_loadu_ps((m), (p))
#define VSTOREU(p, v) _mm512_storeu_ps((p), (v))
#define VSTOREM(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VMUL(a, b) _mm512_mul_ps((a), (b))
#define MASK(n) ((__mmask16)((1u << (n)) - 1u))

#include "engine/model/cfconv_body.h"
