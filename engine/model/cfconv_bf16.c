/* cfconv_bf16.c — the convolution with W as bf16 rows (cfconv_bf16.h): which
 * implementation runs it, and the scalar loops (the reference the AVX-512
 * kernels of cfconv_bf16_avx512.c match bit for bit, and the path for
 * other widths or a forced implementation).  The fused multiply-adds are
 * written out (fmaf) and the build does not contract, so these loops
 * round as the kernels do on any target. */
#include "engine/model/cfconv_bf16.h"

#include <math.h>
#include <string.h>

#include "engine/model/cfconv_bf16_internal.h"
#include "engine/model/cfconv_kernels.h"

/* W̃ widened to fp32: exact (bf16 is fp32's upper half) */
static inline float widen(pt_bf16 h)
{
    const uint32_t b = (uint32_t)h << 16;
    float v;
    memcpy(&v, &b, sizeof v);
    return v;
}

int pt_cfconv_bf16_vector(int f)
{
    return f > 0 && f <= 128 && pt_cfconv_choice() == PT_CFCONV_AVX512 && pt_cpu_has_bf16();
}

static void scalar_forward(float *m, const pt_bf16 *w, const int32_t *row, const float *x,
                           const int32_t *src, const int32_t *off, int i0, int i1, int f)
{
    for (int i = i0; i < i1; i++) {
        float *mi = m + (size_t)i * f;
        for (int c = 0; c < f; c++) mi[c] = 0.0f;
        for (int32_t k = off[i]; k < off[i + 1]; k++) {
            if (row[k] < 0) continue;
            const float *xj = x + (size_t)src[k] * f;
            const pt_bf16 *wu = w + (size_t)row[k] * f;
            for (int c = 0; c < f; c++) mi[c] = fmaf(xj[c], widen(wu[c]), mi[c]);
        }
    }
}

static void scalar_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                    const pt_bf16 *w, const float *cut, const int32_t *row,
                                    const uint8_t *first, const int32_t *row_last,
                                    const int32_t *dst, const int32_t *so, const int32_t *se,
                                    int j0, int j1, int f, int32_t ring)
{
    for (int j = j0; j < j1; j++) {
        const float *xj = x + (size_t)j * f, *dmj = dm + (size_t)j * f;
        float *dxj = dx + (size_t)j * f;
        for (int32_t e = so[j]; e < so[j + 1]; e++) {
            const int32_t k = se[e], u = row[k], i = dst[k];
            const float *dmi = dm + (size_t)i * f, *xi = x + (size_t)i * f;
            const pt_bf16 *wu = w + (size_t)u * f;
            float *dpu = dp + (size_t)(ring > 0 ? u % ring : u) * f;
            const float cu = cut[u];
            for (int c = 0; c < f; c++) dxj[c] = fmaf(dmi[c], widen(wu[c]), dxj[c]);
            if (first[k] && row_last[u] == i) /* write */
                for (int c = 0; c < f; c++) dpu[c] = dmi[c] * xj[c] * cu;
            else if (first[k]) /* combine: the other edge's product dm_j ⊙ x_i too */
                for (int c = 0; c < f; c++) dpu[c] = fmaf(dmj[c] * xi[c], cu, dmi[c] * xj[c] * cu);
            else if (j >= i) /* add (an atom's other image) */
                for (int c = 0; c < f; c++) dpu[c] = fmaf(dmi[c] * xj[c], cu, dpu[c]);
            /* else dx only: the row's first edge comes later and forms both */
        }
    }
}

void pt_cfconv_bf16_forward_range(float *m, const pt_bf16 *w, const int32_t *row,
                                  const float *x, const int32_t *src,
                                  const int32_t *dst_offset, int i0, int i1, int f)
{
    if (pt_cfconv_bf16_vector(f))
        pt_cfconv_bf16_avx512_forward(m, w, row, x, src, dst_offset, i0, i1, f);
    else
        scalar_forward(m, w, row, x, src, dst_offset, i0, i1, f);
}

void pt_cfconv_bf16_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                     const pt_bf16 *w, const float *cut, const int32_t *row,
                                     const uint8_t *first, const int32_t *row_last,
                                     const int32_t *dst, const int32_t *so, const int32_t *se,
                                     int j0, int j1, int f, int32_t ring)
{
    if (pt_cfconv_bf16_vector(f))
        pt_cfconv_bf16_avx512_backward_senders(dx, dp, dm, x, w, cut, row, first, row_last, dst,
                                               so, se, j0, j1, f, ring);
    else
        scalar_backward_senders(dx, dp, dm, x, w, cut, row, first, row_last, dst, so, se, j0, j1,
                                f, ring);
}
