/* test_schnet_ops_sweep.c — the elementwise kernels of schnet_ops.c (the
 * shifted softplus with its sigmoid, the Gaussian basis and the cosine
 * cutoff) against double precision over dense sweeps of their inputs: the
 * maximum errors are stated in units of u = 2^−24 and asserted, so a kernel
 * change that loses accuracy fails here (test_schnet_ops.c checks the ops'
 * equations and gradients at a few points). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/model/schnet_ops.h"
#include "tests/ref/model_ref.h"


/* A dense sweep of the shifted softplus against double: one float in every
 * 2^10 of the bit patterns between −120 and 120 (≈ 2.2 million inputs: every
 * binade from the denormals up, both saturations) plus the edges (±0, the
 * smallest denormal, the clamp at 87, ±FLT_MAX), through the flat path the
 * filter uses and with a length that leaves a vector remainder.  Errors in
 * units of u = 2^−24:
 *   ssp: |got − want| ≤ SSP_ULPS · u · max(|want|, ln 2)  (ln 2: the shift
 *        makes the error absolute near 0, where ssp(v) ≈ v/2 — any float
 *        formula that subtracts ln 2 has it);
 *   σ:   |got − want| ≤ SIG_ULPS · u · want + 2e−38  (the absolute part: e^−|v|
 *        is clamped at e^−87 ≈ 1.6e−38, so σ(v < −87) is that, not a denormal).
 * Measured maxima (2026-11-26, ssp_body.h's kernel: session 11's 8 degree-7
 * polynomials, bound 2.2 u derived there): ssp 1.50 u, σ 2.89 u on these
 * inputs; session 10's 32 degree-5 polynomials had 1.76 u, the exp + log1p
 * form 3.37 u (bound 4.0 then; 3.62 u over every float), the kernel before
 * it (two divisions, σ as t·1/(1+t)) 3.61 u and 3.05 u, Cephes' exp with the
 * atanh series to z^6 4.46 u and 4.15 u. */
#define SSP_ULPS 2.2
#define SIG_ULPS 3.5
static void test_ssp_dense_sweep(void **state)
{
    (void)state;
    const uint32_t stride = 1u << 10;
    float top = 120.0f;
    uint32_t top_bits;
    memcpy(&top_bits, &top, sizeof top_bits);
    size_t cap = 2 * ((size_t)top_bits / stride + 1) + 16, n = 0;
    float *x = malloc(cap * sizeof(float)), *s = malloc(cap * sizeof(float));
    float *sig = malloc(cap * sizeof(float));
    assert_non_null(x);
    assert_non_null(s);
    assert_non_null(sig);
    for (uint32_t b = 0; b <= top_bits; b += stride) {
        float v;
        memcpy(&v, &b, sizeof v);
        x[n++] = v;
        x[n++] = -v;
    }
    const float edges[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, -1e-38f, 87.0f, -87.0f,
                           87.5f, -87.5f, 88.0f, -88.0f, 3.4e38f, -3.4e38f, 1e30f, -1e30f};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) x[n++] = edges[i];
    if (n % 16 == 0) x[n++] = 0.5f;   /* a remainder after the vectors */
    memcpy(s, x, n * sizeof(float));
    pt_ssp_forward(s, sig, NULL, (int)n, 1);
    const double u = ldexp(1.0, -24);
    double worst_s = 0.0, worst_g = 0.0;
    for (size_t i = 0; i < n; i++) {
        double v = x[i], ws = ssp_ref(v), wg = sig_ref(v);
        double es = fabs(s[i] - ws) / (u * fmax(fabs(ws), PT_LN2));
        double eg = fabs(sig[i] - wg) <= 2e-38 ? 0.0 : (fabs(sig[i] - wg) - 2e-38) / (u * wg);
        if (es > SSP_ULPS) fail_msg("ssp(%.9g) = %.9g, want %.9g (%.2f u)", v, (double)s[i], ws, es);
        if (eg > SIG_ULPS)
            fail_msg("sigmoid(%.9g) = %.9g, want %.9g (%.2f u)", v, (double)sig[i], wg, eg);
        worst_s = fmax(worst_s, es);
        worst_g = fmax(worst_g, eg);
    }
    print_message("ssp dense sweep: %zu inputs, max error ssp %.2f u, sigma %.2f u\n", n, worst_s,
                  worst_g);
    /* a NaN pre-activation stays NaN (a diverged model is not hidden as −ln 2) */
    float nan_in = NAN, nan_sig;
    pt_ssp_forward(&nan_in, &nan_sig, NULL, 1, 1);
    assert_true(isnan(nan_in));
    free(x);
    free(s);
    free(sig);
}

/* Gaussians and cutoff over 200,001 distances in [0, 6.5] Å (25 Gaussians,
 * cutoff 6 as the model): each Gaussian within BASIS_ULPS · u · (1 + |a|)
 * relative of e^a, a = γ(d − μ)² in double (plus 2e−38: the clamp at e^−87;
 * the 1 + |a|: a is formed in float, as in PyTorch, ~1.5 u relative, which
 * e^a turns into |a| times that), and C within CUT_ULPS · u relative of
 * ½(cos(π d/r_c) + 1) in double — relative all the way to r_c, where C → 0.
 * Measured maxima (2026-11-26): 2.91 u and 4.11 u (the double-cos C of
 * before was 0.5 u in the bulk but 1e−5 relative at C = 1e−11 near r_c). */
#define BASIS_ULPS 3.5
#define CUT_ULPS 5.0
static void test_edge_basis_dense_sweep(void **state)
{
    (void)state;
    enum { E = 200001, G = 25 };
    const float rc = 6.0f;
    float *d = malloc(E * sizeof(float)), *e = malloc((size_t)E * G * sizeof(float));
    float *cut = malloc(E * sizeof(float));
    assert_non_null(d);
    assert_non_null(e);
    assert_non_null(cut);
    for (int k = 0; k < E; k++) d[k] = 6.5f * (float)k / (float)(E - 1);
    pt_edge_basis_forward(e, cut, d, E, G, rc);
    const double u = ldexp(1.0, -24);
    const float step = rc / (float)(G - 1);
    const double gamma = -0.5 / ((double)step * (double)step);
    double worst_e = 0.0, worst_c = 0.0;
    for (int k = 0; k < E; k++) {
        for (int g = 0; g < G; g++) {
            double diff = (double)d[k] - (double)(step * (float)g);
            double arg = gamma * diff * diff;
            double want = exp(arg), got = e[(size_t)k * G + g];
            /* the argument is formed in float, ~1.5 u relative: e^arg inherits |arg| times it */
            double err = fabs(got - want) <= 2e-38 ? 0.0
                                                   : (fabs(got - want) - 2e-38) / (u * want * (1.0 - arg));
            if (err > BASIS_ULPS)
                fail_msg("gaussian %d at d = %.9g: %.9g, want %.9g (%.2f u)", g, (double)d[k], got,
                         want, err);
            worst_e = fmax(worst_e, err);
        }
        /* ½(cos(π d/r_c) + 1) as sin²(π(r_c − d)/(2 r_c)): the cosine form
         * cancels in double too near r_c (1e−5 relative at C = 1e−11) */
        double sn = sin(M_PI * ((double)rc - (double)d[k]) / (2.0 * rc));
        double wc = d[k] < rc ? sn * sn : 0.0;
        if (wc == 0.0) {
            assert_true(cut[k] == 0.0f);
            continue;
        }
        double err = fabs(cut[k] - wc) / (u * wc);
        if (err > CUT_ULPS)
            fail_msg("C(%.9g) = %.9g, want %.9g (%.2f u)", (double)d[k], (double)cut[k], wc, err);
        worst_c = fmax(worst_c, err);
    }
    print_message("edge basis dense sweep: max error gaussians %.2f u, cutoff %.2f u\n", worst_e,
                  worst_c);
    free(d);
    free(e);
    free(cut);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ssp_dense_sweep),
        cmocka_unit_test(test_edge_basis_dense_sweep),
    };
    return cmocka_run_group_tests_name("schnet_ops_sweep", tests, NULL, NULL);
}
