/* cfconv_bf16.c — the convolution with W as bf16 rows (cfconv_bf16.h): which
 * implementation runs it, and the scalar loops (the reference the AVX-512
 * kernels of cfconv_bf16_avx512.c match bit for bit, and the path for
 * other widths or a forced implementation): the forward here, the backward
 * by senders and by rows cfconv_kernels.c's generic loops reading W̃
 * (one body with fp32's, so the scalar walks cannot drift apart).  The
 * fused multiply-adds are written out (fmaf) and the build does not
 * contract, so these loops round as the kernels do on any target. */
#include "engine/model/cfconv_bf16.h"

#include <math.h>
#include <stddef.h>

#include "engine/model/cfconv_bf16_internal.h"
#include "engine/model/cfconv_kernels.h"
#include "engine/model/cfconv_kernels_internal.h"

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
            for (int c = 0; c < f; c++) mi[c] = fmaf(xj[c], pt_bf16_widen(wu[c]), mi[c]);
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
                                     const pt_cfconv_sedge *sr, int j0, int j1, int f,
                                     int32_t ring)
{
    if (pt_cfconv_bf16_vector(f))
        pt_cfconv_bf16_avx512_backward_senders(dx, dp, dm, x, w, so, sr, j0, j1, f);
    else
        pt_cfconv_generic_backward_senders(dx, dp, dm, x, NULL, w, cut, row, first, row_last,
                                           dst, so, se, j0, j1, f, ring);
}

void pt_cfconv_bf16_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                  const pt_bf16 *w, const pt_cfconv_redge *re, int32_t r0,
                                  int32_t r1, int f)
{
    if (f <= 0 || r0 >= r1) return;
    if (pt_cfconv_bf16_vector(f))
        pt_cfconv_bf16_avx512_backward_rows(dx, dp, dm, x, w, re, r0, r1, f);
    else
        pt_cfconv_generic_backward_rows(dx, dp, dm, x, NULL, w, 0, re, r0, r1, f);
}
