/* bf16_ssp_table_gen.h — the generator of bf16_ssp_table.h (the 32 cubics
 * of the bf16 softplus, bf16_ssp_body.h): the fit, the float evaluation the
 * kernels do, the error sweep, and the header's text.  What it computes and
 * why, and how to run it: bf16_ssp_table_gen.c.  Not used by the product;
 * tests/unit/test_bf16_ssp_table.c runs it and compares its text with the
 * committed header byte for byte. */
#ifndef PT_BF16_SSP_TABLE_GEN_H
#define PT_BF16_SSP_TABLE_GEN_H

#include <stdio.h>

#define PT_BSSP_TABLE_N 32     /* intervals of width 1/2 centred on k/2 */
#define PT_BSSP_TABLE_DEG 3    /* cubics: c0..c3 */
#define PT_BSSP_TABLE_XMAX 15.74f   /* x = min(|v|, XMAX) */
#define PT_BSSP_TABLE_BOUND 3e-6    /* stated absolute error bound */
#define PT_BSSP_TABLE_SWEEP_MAX 40.0 /* the sweep covers x in [0, 40] */

/* c[j][k]: coefficient of u^j in interval k (u = x − k/2) */
typedef float pt_bssp_coefs[PT_BSSP_TABLE_DEG + 1][PT_BSSP_TABLE_N];

/* Fits every interval (Remez in long double) and rounds to float. */
void pt_bf16_ssp_table_fit(pt_bssp_coefs c);

/* f~(x) for x ≥ 0 as bf16_ssp_body.h evaluates it from c (the same float
 * operations: clamp, index from 2x + 1.5·2^23, three FMAs). */
float pt_bf16_ssp_table_eval(const pt_bssp_coefs c, float x);

/* The largest |f~(x) − f(x)| over x = i·1e-5, i = 0..4,000,000 (f in long
 * double); *worst_x (if not NULL) gets where. */
double pt_bf16_ssp_table_sweep(const pt_bssp_coefs c, double *worst_x);

/* Writes bf16_ssp_table.h's text for c, whose sweep gave worst at worst_x.
 * Returns 0, or -1 if the stream reports a write error. */
int pt_bf16_ssp_table_write(FILE *out, const pt_bssp_coefs c, double worst, double worst_x);

#endif
