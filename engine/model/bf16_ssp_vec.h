/* bf16_ssp_vec.h — bf16_ssp_body.h spelled for AVX-512 (16 floats a
 * vector): bsspv_ssp and bsspv_dssp, the bits of the scalar reference
 * (bf16_ssp.c).  Included by the files built for AVX-512 that apply them
 * in registers: bf16_ssp_avx512.c (the loops of bf16_ssp.h) and
 * bf16_pack_avx512.c (ssp~ applied as the fused epilogue rounds its band
 * to bf16, so the band is read once, not mapped and then read again).
 * Include it after a `#pragma GCC target` naming at least avx512f,
 * avx512bw and avx512vl, and only call what it defines after
 * pt_cpu_has_bf16(). */
#ifndef PT_BF16_SSP_VEC_H
#define PT_BF16_SSP_VEC_H

#include <immintrin.h>
#include <stdint.h>

#define T __m512
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define VFNMA(a, b, c) _mm512_fnmadd_ps((a), (b), (c))
#define VADD(a, b) _mm512_add_ps((a), (b))
#define VSUB(a, b) _mm512_sub_ps((a), (b))
#define VNEG(a) \
    _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)))
/* maxps(a, b) = a > b ? a : b, NaN included: the scalar spelling's select */
#define VMAX(a, b) _mm512_max_ps((a), (b))
/* minps(a, b) = a < b ? a : b, NaN included */
#define VMIN(a, b) _mm512_min_ps((a), (b))
#define VABS(a) _mm512_abs_ps(a)
/* 32-entry tables: vpermt2ps reads the low 5 bits of each lane of big */
#define VTAB(tab, big) \
    _mm512_permutex2var_ps(_mm512_loadu_ps(tab), _mm512_castps_si512(big), _mm512_loadu_ps((tab) + 16))
#define VSCALE(p, fn) _mm512_scalef_ps((p), (fn))
#define BSSP_FN(name) bsspv_##name

#include "engine/model/bf16_ssp_body.h"

#undef T
#undef VSET1
#undef VFMA
#undef VFNMA
#undef VADD
#undef VSUB
#undef VNEG
#undef VMAX
#undef VMIN
#undef VABS
#undef VTAB
#undef VSCALE
#undef BSSP_FN

#endif
