/* sum_order_bound.h — shared by the tests of the convolution's backward by
 * rows (test_cfconv_rows.c, test_schnet_edges.c): dx_s = Σ dm_r ⊙ W_u over
 * sender s's edges (receiver r, row u) summed in two orders, each term
 * rounded once (fma) from 0, differ by at most 2·γ(n)·Σ|dm_r ⊙ W_u| over
 * s's n terms, γ(n) = n·2⁻²⁴/(1 − n·2⁻²⁴) (Higham, recursive summation,
 * both orders against the exact sum).  Header-only; include after
 * <cmocka.h>. */
#ifndef PT_TEST_SUM_ORDER_BOUND_H
#define PT_TEST_SUM_ORDER_BOUND_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Fails past the bound for some element of dx_a against dx_b ([n, f]);
 * edges in CSR (off, src, row: −1 no term).  Returns the largest |Δ| over
 * its bound (0 when no bit moved); *moved counts the elements that differ. */
static inline double sum_order_check(const float *dx_a, const float *dx_b, const float *dm,
                                     const float *w, const int32_t *off, const int32_t *src,
                                     const int32_t *row, int n, int f, int *moved)
{
    const size_t nf = (size_t)n * f;
    double *abs_sum = calloc(nf ? nf : 1, sizeof(double));
    int *terms = calloc((size_t)(n ? n : 1), sizeof(int));
    assert_true(abs_sum && terms);
    for (int r = 0; r < n; r++)
        for (int32_t k = off[r]; k < off[r + 1]; k++) {
            const int32_t u = row[k], s = src[k];
            if (u < 0) continue;
            terms[s]++;
            for (int c = 0; c < f; c++)
                abs_sum[(size_t)s * f + c] +=
                    fabs((double)dm[(size_t)r * f + c] * w[(size_t)u * f + c]);
        }
    double worst = 0.0;
    *moved = 0;
    for (int s = 0; s < n; s++) {
        const double nu = terms[s] * 0x1p-24, gamma = nu / (1.0 - nu);
        for (int c = 0; c < f; c++) {
            const size_t o = (size_t)s * f + c;
            const double d = fabs((double)dx_a[o] - (double)dx_b[o]);
            const double bound = 2.0 * gamma * abs_sum[o];
            if (d > bound)
                fail_msg("dx[%d][%d]: %.9g against %.9g, past the bound %.3g", s, c,
                         (double)dx_a[o], (double)dx_b[o], bound);
            *moved += d > 0.0;
            if (d > 0.0 && d / bound > worst) worst = d / bound;
        }
    }
    free(abs_sum), free(terms);
    return worst;
}

#endif
