/* cfconv_kernels_internal.h — the per-instruction-set entry points behind
 * cfconv_kernels.c (cfconv_avx512.c, cfconv_avx2.c; bodies in
 * cfconv_body.h).  Arguments and results exactly as schnet_ops.h's
 * pt_cfconv_forward_range and pt_cfconv_backward_range. */
#ifndef PT_CFCONV_KERNELS_INTERNAL_H
#define PT_CFCONV_KERNELS_INTERNAL_H

#include <stdint.h>

#include "engine/model/bf16.h"
#include "engine/model/schnet_ops.h"

/* The generic backward by senders (cfconv_kernels.c), arguments as
 * pt_cfconv_backward_senders' (dst's, so's, se's, the range's): W as fp32
 * rows w, or, with w NULL, W̃ as bf16 rows wh widened exactly (the scalar
 * path of cfconv_bf16.h's pt_cfconv_bf16_backward_senders). */
void pt_cfconv_generic_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                        const float *w, const pt_bf16 *wh, const float *cut,
                                        const int32_t *row, const uint8_t *first,
                                        const int32_t *row_last, const int32_t *dst,
                                        const int32_t *so, const int32_t *se, int j0, int j1,
                                        int f, int32_t ring);

/* The generic backward by rows, arguments as pt_cfconv_backward_rows':
 * W as fp32 rows w (P with pc), or, with w NULL, W̃ as bf16 rows wh
 * widened exactly (pc ignored: the scalar path of cfconv_bf16.h's
 * pt_cfconv_bf16_backward_rows).  One body for both, so the bf16 scalar
 * walk is the fp32 generic walk on widened rows by construction. */
void pt_cfconv_generic_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                     const float *w, const pt_bf16 *wh, int pc,
                                     const pt_cfconv_redge *re, int32_t r0, int32_t r1, int f);

void pt_cfconv_avx512_forward(float *m, const float *w, const float *wcut, const int32_t *row,
                              const float *x, const int32_t *src, const int32_t *off, int i0,
                              int i1, int f);
void pt_cfconv_avx512_backward(float *dx, float *dp, const float *dm, const float *x,
                               const float *w, const float *cut, const int32_t *row,
                               const uint8_t *first, const int32_t *src, const int32_t *off,
                               int i0, int i1, int f, int32_t ring);
void pt_cfconv_avx2_forward(float *m, const float *w, const float *wcut, const int32_t *row,
                            const float *x, const int32_t *src, const int32_t *off, int i0,
                            int i1, int f);
void pt_cfconv_avx2_backward(float *dx, float *dp, const float *dm, const float *x,
                             const float *w, const float *cut, const int32_t *row,
                             const uint8_t *first, const int32_t *src, const int32_t *off,
                             int i0, int i1, int f, int32_t ring);
/* the backward by rows: pt_cfconv_backward_rows */
void pt_cfconv_avx512_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                    const float *w, int pc, const pt_cfconv_redge *re, int32_t r0,
                                    int32_t r1, int f);
void pt_cfconv_avx2_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                  const float *w, int pc, const pt_cfconv_redge *re, int32_t r0,
                                  int32_t r1, int f);
/* the force passes' tangent: pt_cfconv_tangent over receivers i0 ≤ i < i1 */
void pt_cfconv_avx512_tangent(float *m, const float *w, const float *wd, const float *lambda,
                              const int32_t *row, const float *x, const float *xd,
                              const int32_t *src, const int32_t *off, int i0, int i1, int f);
void pt_cfconv_avx2_tangent(float *m, const float *w, const float *wd, const float *lambda,
                            const int32_t *row, const float *x, const float *xd,
                            const int32_t *src, const int32_t *off, int i0, int i1, int f);
/* An entry's dP row, and the backward by senders' work on its edge by its
 * part: V8 applies the kernel's per-vector WRITE, ADD, DX or COMBINE
 * (which reads the receiver's x row xip) — cfconv_body.h's and
 * cfconv_bf16_avx512.c's bws_panel, which differ only in W's loads. */
#define PT_SEDGE_DP(s) ((long)((s).dp & ((1u << PT_SEDGE_ROW_BITS) - 1)))
#define PT_SEDGE_EDGE(s, V8, WRITE, ADD, DX, COMBINE, x, f)                              \
    switch ((s).dp >> PT_SEDGE_ROW_BITS) {                                               \
    case PT_SEDGE_WRITE: V8(WRITE) break;                                                \
    case PT_SEDGE_ADD: V8(ADD) break;                                                    \
    /* the other edge of a row whose first edge (receiver j, sender i)                   \
     * comes later and forms both products */                                            \
    case PT_SEDGE_DX: V8(DX) break;                                                      \
    default: {                                                                           \
        /* the row's other edge (receiver j, sender i) came earlier in                   \
         * sender order and left dP alone: its product dm_j ⊙ x_i, as it                 \
         * would have formed it */                                                       \
        const float *xip = (x) + (s).dst * (f);                                          \
        V8(COMBINE)                                                                      \
    } break;                                                                             \
    }

/* the backward by senders: pt_cfconv_backward_senders over senders
 * j0 ≤ j < j1 from the lists' edges sr (AVX-512 only: cfconv_avx2.c says
 * why) */
void pt_cfconv_avx512_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                       const float *w, const int32_t *so,
                                       const pt_cfconv_sedge *sr, int j0, int j1, int f);
/* the force passes' second backward by senders over senders j0 ≤ j < j1
 * (AVX-512 only: x_j, ẋ_j and x̂_j do not fit AVX2's 16 registers) */
void pt_cfconv_avx512_backward2_senders(float *dxh, float *ph, float *pb, const float *mh,
                                        const float *mb, const float *x, const float *xd,
                                        const float *w, const float *wd, const float *lambda,
                                        const float *cut, const float *dcut,
                                        const int32_t *row, const uint8_t *first,
                                        const int32_t *row_last, const int32_t *dst,
                                        const int32_t *so, const int32_t *se, int j0, int j1,
                                        int f);
/* the force passes' distance backward (receiver order, dm_i in registers);
 * returns 0 without running when f needs more than one panel */
int pt_cfconv_avx512_backward_dist(float *dx, float *g, const float *dm, const float *x,
                                   const float *w, const float *wd, const int32_t *row,
                                   const int32_t *src, const int32_t *off, int n, int f);

#endif
