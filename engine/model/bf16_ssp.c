/* bf16_ssp.c — the scalar reference of bf16_ssp_body.h (one float at a
 * time, the bits of the AVX-512 loops) and the dispatch to those loops
 * (bf16_ssp.h). */
#include "engine/model/bf16_ssp.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define T float
#define VSET1(x) (x)
#define VFMA(a, b, c) fmaf((a), (b), (c))
#define VFNMA(a, b, c) fmaf(-(a), (b), (c))
#define VADD(a, b) ((a) + (b))
#define VSUB(a, b) ((a) - (b))
#define VNEG(a) (-(a))
/* maxps: a > b ? a : b (a NaN in either gives b) */
#define VMAX(a, b) bssp_max((a), (b))
/* minps: a < b ? a : b (a NaN in either gives b) */
#define VMIN(a, b) bssp_min((a), (b))
#define VABS(a) fabsf(a)
/* vpermt2ps: the table entry the low 5 bits of big's encoding name */
#define VTAB(tab, big) ((tab)[bssp_bits(big) & 31u])
#define VSCALE(p, fn) bssp_scale((p), (fn))
#define BSSP_FN(name) bssp_##name

static inline float bssp_max(float a, float b) { return a > b ? a : b; }
static inline float bssp_min(float a, float b) { return a < b ? a : b; }
static inline uint32_t bssp_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

/* vscalefps: p·2^fn, fn an integer; exact for the normal results here */
static inline float bssp_scale(float p, float fn) { return ldexpf(p, (int)fn); }

#include "engine/model/bf16_ssp_body.h"

float pt_bf16_ssp_ref(float v) { return bssp_ssp(v); }
float pt_bf16_dssp_ref(float s) { return bssp_dssp(s); }

void pt_bf16_ssp_run(float *x, size_t len)
{
    if (pt_cpu_has_bf16()) {
        pt_bf16_ssp_avx512(x, len);
        return;
    }
    for (size_t i = 0; i < len; i++) x[i] = bssp_ssp(x[i]);
}

void pt_bf16_ssp_map(float *x, float *aux, const float *bias, int rows, int n)
{
    (void)aux;
    (void)bias;
    pt_bf16_ssp_run(x, (size_t)rows * (size_t)n);
}

void pt_bf16_dssp_mul(float *c, size_t ldc, int rows, int n, const void *s1, int fmt,
                      size_t lds)
{
    if (pt_cpu_has_bf16()) {
        pt_bf16_dssp_mul_avx512(c, ldc, rows, n, s1, fmt, lds);
        return;
    }
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            uint16_t h;
            if (fmt == PT_BF16_FMT_PAIRS)
                h = (uint16_t)(((const uint32_t *)s1)[(size_t)(r / 2) * lds + (size_t)j] >>
                               (r % 2 * 16));
            else
                h = ((const pt_bf16 *)s1)[(size_t)r * lds + (size_t)j];
            c[(size_t)r * ldc + (size_t)j] *= bssp_dssp(pt_bf16_to_float(h));
        }
}
