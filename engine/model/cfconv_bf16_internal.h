/* cfconv_bf16_internal.h — the AVX-512 kernels behind cfconv_bf16.h
 * (cfconv_bf16_avx512.c), called by cfconv_bf16.c only when
 * pt_cfconv_bf16_vector(f) (f ≤ 128, AVX-512 chosen, AVX512-BF16 present).
 * Arguments and results exactly as pt_cfconv_bf16_forward_range,
 * pt_cfconv_bf16_backward_senders and pt_cfconv_bf16_backward_rows. */
#ifndef PT_CFCONV_BF16_INTERNAL_H
#define PT_CFCONV_BF16_INTERNAL_H

#include <stdint.h>

#include "engine/model/bf16.h"
#include "engine/model/schnet_ops.h"

void pt_cfconv_bf16_avx512_forward(float *m, const pt_bf16 *w, const int32_t *row,
                                   const float *x, const int32_t *src, const int32_t *off,
                                   int i0, int i1, int f);
void pt_cfconv_bf16_avx512_backward_senders(float *dx, float *dp, const float *dm,
                                            const float *x, const pt_bf16 *w, const int32_t *so,
                                            const pt_cfconv_sedge *sr, int j0, int j1, int f);

void pt_cfconv_bf16_avx512_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                         const pt_bf16 *w, const pt_cfconv_redge *re, int32_t r0,
                                         int32_t r1, int f);

#endif
