/* cfconv_bf16.h — the continuous-filter convolution of bf16 training's fused
 * path (pt_schnet_bf16_fused), whose filter W is kept as bf16 rows:
 *
 *   forward   m_i  = Σ_{k→i} x_j ⊙ W̃_u            (receivers i0 ≤ i < i1)
 *   backward  dx_j += dm_i ⊙ W̃_u,  dP_u (=|+=) (dm_i ⊙ x_j) · C_u
 *             by rows (pt_cfconv_backward_rows' walk, the model's since
 *             session 17) or by senders (pt_cfconv_backward_senders' walk
 *             and dP modes: batches with a row of three edges)
 *
 * W̃ = bf16(W) is what the second filter product stores (its epilogue's
 * rows h, rounded to nearest even once, after the cutoff: W = (A2 s1 + a2)
 * ⊙ C): rows of f halfs, row u at u · f.  The filter product's A and B are
 * bf16 already; W itself was fp32 until session 9 and the convolution read
 * it as 800 B an edge row (forward, and again from memory in the
 * backward), where bf16 rows are 400 B.  Everything else (x, m, dm, dx, dP,
 * C) stays fp32, and per element the operations and their order are
 * cfconv_kernels.h's with W̃ widened exactly to fp32 in place of W:
 *   m = 0, m = fma(x_j, W̃_u, m);  dx_j = fma(dm_i, W̃_u, dx_j);
 *   dP write (dm_i·x_j)·C_u, combine fma(dm_j·x_i, C_u, (dm_i·x_j)·C_u),
 *   add fma(dm_i·x_j, C_u, dP_u), dx only.
 * So the AVX-512 kernels (cfconv_bf16_avx512.c, f ≤ 128: one panel of 8
 * zmm) and the scalar loops here give the same bits
 * (tests/unit/test_cfconv_bf16.c); other widths, and PACKTRAIN_CFCONV /
 * pt_cfconv_force choosing anything but avx512, run the scalar loops.
 *
 * The error W̃ adds (against the same step with fp32 W): |W̃_u − W_u| ≤
 * 2^-8 |W_u| per element (bf16's unit roundoff, round to nearest), so
 *   |m̃_i − m_i| ≤ 2^-8 Σ_k |x_j| |W_u|  (+ fp32's own summation error),
 *   |dx̃_j − dx_j| ≤ 2^-8 Σ_k |dm_i| |W_u|,
 * dP unchanged for given dm; the gradient stays that of the function
 * computed (forward and backward read the same W̃).  The products that
 * form W already round their operands to bf16 (2^-8 each), so this is one
 * more such rounding per message, not a new scale of error. */
#ifndef PT_CFCONV_BF16_H
#define PT_CFCONV_BF16_H

#include <stdint.h>

#include "engine/model/bf16.h"
#include "engine/model/schnet_ops.h"

/* m_i for receivers i0 ≤ i < i1 (edges dst_offset[i] ..< dst_offset[i+1],
 * row[k] < 0: padding, skipped); w: bf16 rows of f. */
void pt_cfconv_bf16_forward_range(float *m, const pt_bf16 *w, const int32_t *row,
                                  const float *x, const int32_t *src,
                                  const int32_t *dst_offset, int i0, int i1, int f);

/* pt_cfconv_backward_senders (schnet_ops.h) with W as bf16 rows: senders
 * j0 ≤ j < j1 (boundaries no edge crosses), dx added to, dP rows at
 * u % ring (ring > 0) or u; sr the lists' entries for this cut and ring
 * (pt_cfconv_sender_edges: the AVX-512 kernel reads them instead of se,
 * row, dst, first, row_last and cut). */
void pt_cfconv_bf16_backward_senders(float *dx, float *dp, const float *dm, const float *x,
                                     const pt_bf16 *w, const float *cut, const int32_t *row,
                                     const uint8_t *first, const int32_t *row_last,
                                     const int32_t *dst, const int32_t *so, const int32_t *se,
                                     const pt_cfconv_sedge *sr, int j0, int j1, int f,
                                     int32_t ring);

/* pt_cfconv_backward_rows (schnet_ops.h) with W as bf16 rows: rows
 * r0 ≤ u < r1 with both their edges, dx added to (the caller zeroes it
 * once), dP_u written at dp row u − r0 (a chunk's scratch), W̃_u read once
 * and widened exactly (the bf16 products store W̃ with the cutoff applied:
 * no pc).  Per element the fp32 walk's operations on W̃ widened, so the bits
 * of pt_cfconv_backward_rows on those widened rows with pc = 0 (tests/unit/
 * test_cfconv_bf16.c), however the rows are cut into calls; dx sums its
 * terms in ascending row order, within cfconv_kernels.h's reordering bound
 * of the walk by senders (pt_cfconv_bf16_backward_senders).  W̃'s 200 B an
 * edge row are read once, in ascending order, where the walk by senders
 * read each row twice, in sender order (docs/performance.md, session 17
 * bf16z). */
void pt_cfconv_bf16_backward_rows(float *dx, float *dp, const float *dm, const float *x,
                                  const pt_bf16 *w, const pt_cfconv_redge *re, int32_t r0,
                                  int32_t r1, int f);

/* 1 when the AVX-512 kernels run these for width f now. */
int pt_cfconv_bf16_vector(int f);

#endif
