/* bf16_ssp.h — the shifted softplus of the bf16 filter network, at bf16's
 * precision (the spelling, its error bounds and why: bf16_ssp_body.h).
 *
 * The fused bf16 energy path (schnet_filter.c) rounds s1 = ssp(A1 e + a1)
 * to bf16 as soon as it is computed and keeps no σ1: the first product's
 * epilogue runs pt_bf16_ssp_map (a table of cubics: 14 operations a
 * vector, no division, where fp32's ssp_body.h takes ~30 and two divisions), and the backward's
 * ds1 = (dP A2) ⊙ σ1 derives σ1 from the bf16 s1 the weight gradient
 * dA2 += dPᵀ s1 reads anyway (pt_bf16_epilogue.dssp_s1 in bf16.h), so
 * neither an 8 MB σ1 stream per water block in the forward nor its read
 * back from memory in the backward remain.  fp32 keeps ssp_body.h. */
#ifndef PT_BF16_SSP_H
#define PT_BF16_SSP_H

#include <stddef.h>

#include "engine/model/bf16.h"

/* ssp~(v) ≈ ln(1 + e^v) − ln 2 and σ̃(s) ≈ σ(v) from s = the fp32 value of
 * bf16(ssp~(v)), one element at a time: the reference the vector loops
 * give the bits of. */
float pt_bf16_ssp_ref(float v);
float pt_bf16_dssp_ref(float s);

/* x[len] ← ssp~(x), AVX-512 where pt_cpu_has_bf16(), else the reference
 * (the same bits). */
void pt_bf16_ssp_run(float *x, size_t len);
/* pt_bf16_map (bf16.h) of the first product's epilogue: rows × n floats of
 * x ← ssp~(x); aux and bias unused (no σ is kept). */
void pt_bf16_ssp_map(float *x, float *aux, const float *bias, int rows, int n);

/* c[r][j] *= σ̃(s1[r][j]) for rows × n floats of c (ldc apart), s1 bf16 as
 * PT_BF16_FMT_PAIRS (pair row r/2 at r/2 · lds uint32, lds ≥
 * pt_bf16_pairs_ld(n); rows starts at an even row of the pairs) or
 * PT_BF16_FMT_ROWS (row r at r · lds pt_bf16, lds ≥ n).  AVX-512 where
 * pt_cpu_has_bf16(), else the reference; the same bits.  Validates
 * nothing (bf16.c checks the epilogue's format). */
void pt_bf16_dssp_mul(float *c, size_t ldc, int rows, int n, const void *s1, int fmt,
                      size_t lds);

/* the AVX-512 loops (bf16_ssp_avx512.c): only after pt_cpu_has_bf16() */
void pt_bf16_ssp_avx512(float *x, size_t len);
void pt_bf16_dssp_mul_avx512(float *c, size_t ldc, int rows, int n, const void *s1, int fmt,
                             size_t lds);

#endif
