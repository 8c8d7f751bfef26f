/* test_schnet_ops_forces.c — the ops of the distance derivatives
 * (engine/model/schnet_ops_forces.c) one by one, each against a float64
 * reference written as plain loops and, where the op is a derivative,
 * central differences of that reference:
 *   - pt_edge_basis_deriv: de, dcut are d/dd of pt_edge_basis_forward's e, C;
 *   - pt_rows_scale, pt_ssp_backward_to, pt_ssp_tangent, pt_ssp_backward2,
 *     pt_filter_cutoff_deriv: their formulas (ssp's second-order term is the
 *     derivative of σ(z)·ż·s̄ in z);
 *   - pt_cfconv_backward_dist: dx = ∂/∂x and g_u = ∂/∂d_u of ⟨dm, m⟩ when
 *     row u's filter moves along W'_u;
 *   - pt_cfconv_tangent: ṁ = d/dε m(x + ε ẋ, W + ε W' λ);
 *   - pt_cfconv_backward2: x̂, P̂, P̄ are the gradients in x, P and Ṗ of
 *     J = ⟨m̂, m(x, P C)⟩ + ⟨m̄, ṁ⟩, ṁ = Σ ẋ ⊙ P C + x ⊙ (Ṗ C + P Ċ).
 * Tolerance as test_schnet_ops.c argues it: float sums of ≤ 10 terms against
 * float64, |got − want| ≤ 1e-5·|want| + 2e-6·max|want|. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/pack/edge_rows.h"
#include "engine/model/schnet_ops.h"
#include "tests/ref/model_ref.h"

static pt_rng rng;

static int setup(void **state)
{
    (void)state;
    pt_rng_init(&rng, 77, 0);
    return 0;
}

static void fill(float *v, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)((2.0 * pt_rng_uniform(&rng) - 1.0) * scale);
}

static void assert_close_d(const char *what, const float *got, const double *want, size_t n)
{
    double mx = 0.0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double tol = 1e-5 * fabs(want[i]) + 2e-6 * mx + 1e-30;
        if (fabs((double)got[i] - want[i]) > tol)
            fail_msg("%s[%zu]: got %.9g, want %.9g (tol %.3g)", what, i, (double)got[i], want[i],
                     tol);
    }
}


/* ---- edge basis --------------------------------------------------------------- */

static void test_edge_basis_deriv(void **state)
{
    (void)state;
    enum { E = 6, G = 9 };
    const float rc = 5.0f;
    float d[E] = {0.0f, 0.4f, 1.7f, 3.3f, 4.9f, 5.0f}, e[E * G], cut[E], de[E * G], dc[E];
    pt_edge_basis_forward(e, cut, d, E, G, rc);
    pt_edge_basis_deriv(de, dc, e, d, E, G, rc);
    double wde[E * G], wdc[E];
    const double step = rc / (G - 1.0), gamma = -0.5 / (step * step), h = 1e-6;
    for (int k = 0; k < E; k++) {
        for (int g = 0; g < G; g++) {
            double dp = d[k] + h - step * g, dm = d[k] - h - step * g;
            wde[k * G + g] = (exp(gamma * dp * dp) - exp(gamma * dm * dm)) / (2 * h);
        }
        /* C is flat at the cutoff (C = C' = 0 there); inside, differences */
        wdc[k] = d[k] < rc ? (0.5 * cos(M_PI * (d[k] + h) / rc) - 0.5 * cos(M_PI * (d[k] - h) / rc)) /
                                 (2 * h)
                           : 0.0;
    }
    assert_close_d("de", de, wde, E * G);
    assert_close_d("dcut", dc, wdc, E);
    assert_true(dc[5] == 0.0f && dc[0] == 0.0f);
}

/* C'(d) over 200,001 distances in [0, 6.5] Å (cutoff 6) against
 * −(π/2r_c) sin(π d/r_c) in double: within DCUT_ULPS u relative (u = 2^−24)
 * all the way to both ends, where C' → 0, and exactly 0 from r_c on.
 * Measured maximum (2026-11-26): 4.06 u (the double sin before: 0.5 u). */
#define DCUT_ULPS 5.0
static void test_cutoff_deriv_dense_sweep(void **state)
{
    (void)state;
    enum { E = 200001, G = 2 };
    const float rc = 6.0f;
    float *d = malloc(E * sizeof(float)), *e = malloc((size_t)E * G * sizeof(float));
    float *de = malloc((size_t)E * G * sizeof(float)), *cut = malloc(E * sizeof(float));
    float *dc = malloc(E * sizeof(float));
    assert_true(d && e && de && cut && dc);
    for (int k = 0; k < E; k++) d[k] = 6.5f * (float)k / (float)(E - 1);
    pt_edge_basis_forward(e, cut, d, E, G, rc);
    pt_edge_basis_deriv(de, dc, e, d, E, G, rc);
    const double u = ldexp(1.0, -24);
    double worst = 0.0;
    for (int k = 0; k < E; k++) {
        /* sin(π x) as sin(π min(x, 1 − x)) with 1 − x = (r_c − d)/r_c exact */
        double x = (double)d[k] / rc, w = ((double)rc - (double)d[k]) / rc;
        double want = d[k] < rc ? -0.5 * M_PI / rc * sin(M_PI * fmin(x, w)) : 0.0;
        if (want == 0.0) {
            assert_true(dc[k] == 0.0f);
            continue;
        }
        double err = fabs(dc[k] - want) / (u * fabs(want));
        if (err > DCUT_ULPS)
            fail_msg("C'(%.9g) = %.9g, want %.9g (%.2f u)", (double)d[k], (double)dc[k], want, err);
        worst = fmax(worst, err);
    }
    print_message("cutoff derivative dense sweep: max error %.2f u\n", worst);
    free(d);
    free(e);
    free(de);
    free(cut);
    free(dc);
}

/* ---- row scaling, softplus pieces, cutoff derivative ------------------------------ */

static void test_elementwise_ops(void **state)
{
    (void)state;
    enum { N = 7, C = 19 };
    float z[N * C], sig[N * C], a[N * C], b[N * C], sd[N * C], s[N], out[N * C], db[C];
    fill(z, N * C, 3.0);
    fill(a, N * C, 1.0);
    fill(b, N * C, 1.0);
    fill(sd, N * C, 1.0);
    fill(s, N, 2.0);
    for (int i = 0; i < N * C; i++) sig[i] = (float)sig_ref(z[i]);
    double want[N * C], want2[N * C], wdb[C];

    pt_rows_scale(out, a, s, N, C);
    for (int i = 0; i < N * C; i++) want[i] = (double)a[i] * s[i / C];
    assert_close_d("rows_scale", out, want, N * C);
    memcpy(out, a, sizeof out);
    pt_rows_scale(out, out, s, N, C); /* in place */
    assert_close_d("rows_scale in place", out, want, N * C);

    pt_ssp_backward_to(out, a, sig, N, C);
    for (int i = 0; i < N * C; i++) want[i] = (double)a[i] * sig[i];
    assert_close_d("ssp_backward_to", out, want, N * C);

    memcpy(out, a, sizeof out);
    pt_ssp_tangent(out, sig, N, C);
    assert_close_d("ssp_tangent", out, want, N * C);

    /* ẑ = ŝ σ + s̄ σ'(z) ż with ṡ = σ ż: σ' by differences of σ, ż = ṡ/σ */
    float hat[N * C], bar[N * C];
    memcpy(hat, a, sizeof hat);
    memcpy(bar, b, sizeof bar);
    for (int c = 0; c < C; c++) db[c] = 0.5f;
    pt_ssp_backward2(hat, bar, db, sig, sd, N, C);
    for (int c = 0; c < C; c++) wdb[c] = 0.5;
    for (int i = 0; i < N * C; i++) {
        double sp = (sig_ref(z[i] + 1e-6) - sig_ref(z[i] - 1e-6)) / 2e-6;
        want[i] = (double)a[i] * sig[i] + (double)b[i] * sp * (sd[i] / (double)sig[i]);
        want2[i] = (double)b[i] * sig[i];
        wdb[i % C] += want[i];
    }
    assert_close_d("ssp_backward2 hat", hat, want, N * C);
    assert_close_d("ssp_backward2 bar", bar, want2, N * C);
    assert_close_d("ssp_backward2 db", db, wdb, C);

    float cut[N], dcut[N];
    fill(cut, N, 1.0);
    fill(dcut, N, 1.0);
    memcpy(out, a, sizeof out);
    pt_filter_cutoff_deriv(out, b, cut, dcut, N, C);
    for (int i = 0; i < N * C; i++) want[i] = (double)a[i] * cut[i / C] + (double)b[i] * dcut[i / C];
    assert_close_d("filter_cutoff_deriv", out, want, N * C);
}

/* ---- the convolution's derivatives --------------------------------------------------- */

enum { CN = 5, CE = 9, CF = 6, CU = 5 };
/* as test_schnet_ops.c: receivers sorted; bonds 0–1, 0–2, 1–2 share rows both
 * ways, 1←3 and 2←3 one-sided, edge 8 padding (no row) */
static const int32_t c_src[CE] = {1, 2, 0, 2, 3, 0, 1, 3, 4};
static const int32_t c_dst[CE] = {0, 0, 1, 1, 1, 2, 2, 2, 4};
static const int32_t c_off[CN + 1] = {0, 2, 5, 8, 8, 9};
static const int32_t c_row[CE] = {0, 1, 0, 2, 3, 1, 2, 4, -1};
static const uint8_t c_first[CE] = {1, 1, 0, 1, 1, 0, 0, 1, 0};

/* float64 operands; W = P C, W' = Pd C + P C', Ẇ = W' λ */
typedef struct cf2 {
    double x[CN * CF], xd[CN * CF], p[CU * CF], pd[CU * CF];
    double cut[CU], dcut[CU], lam[CU], mh[CN * CF], mb[CN * CF], dm[CN * CF];
    double eps;          /* moves every row's distance: W → W + eps W' (for g) */
    int row_only;        /* ... or only this row (≥ 0) */
} cf2;

static void conv(const double *x, const double *w, double *m)
{
    memset(m, 0, sizeof(double) * CN * CF);
    for (int k = 0; k < CE; k++)
        if (c_row[k] >= 0)
            for (int f = 0; f < CF; f++)
                m[c_dst[k] * CF + f] += x[c_src[k] * CF + f] * w[c_row[k] * CF + f];
}

static void filters(const cf2 *c, double *w, double *wd)
{
    for (int u = 0; u < CU; u++)
        for (int f = 0; f < CF; f++) {
            double wdv = c->pd[u * CF + f] * c->cut[u] + c->p[u * CF + f] * c->dcut[u];
            double shift = c->row_only < 0 || c->row_only == u ? c->eps : 0.0;
            w[u * CF + f] = c->p[u * CF + f] * c->cut[u] + shift * wdv;
            wd[u * CF + f] = wdv;
        }
}

/* ⟨dm, m⟩ with the filters moved by eps along W' (g's definition) */
static double loss_dist(void *p)
{
    cf2 *c = p;
    double w[CU * CF], wd[CU * CF], m[CN * CF], l = 0.0;
    filters(c, w, wd);
    conv(c->x, w, m);
    for (int i = 0; i < CN * CF; i++) l += c->dm[i] * m[i];
    return l;
}

/* J = ⟨m̂, m⟩ + ⟨m̄, ṁ⟩ with Ẇ = Pd C + P Ċ, Ċ = dcut λ (Pd stands for Ṗ) */
static double loss_second(void *p)
{
    cf2 *c = p;
    double w[CU * CF], wdot[CU * CF], m[CN * CF], md[CN * CF], t[CN * CF], l = 0.0;
    for (int u = 0; u < CU; u++)
        for (int f = 0; f < CF; f++) {
            w[u * CF + f] = c->p[u * CF + f] * c->cut[u];
            wdot[u * CF + f] =
                c->pd[u * CF + f] * c->cut[u] + c->p[u * CF + f] * c->dcut[u] * c->lam[u];
        }
    conv(c->x, w, m);
    conv(c->xd, w, md);
    conv(c->x, wdot, t);
    for (int i = 0; i < CN * CF; i++) l += c->mh[i] * m[i] + c->mb[i] * (md[i] + t[i]);
    return l;
}

static void fd(double *v, size_t n, double (*f)(void *), void *ctx, double *grad)
{
    for (size_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + 1e-6;
        double lp = f(ctx);
        v[i] = keep - 1e-6;
        double lm = f(ctx);
        v[i] = keep;
        grad[i] = (lp - lm) / 2e-6;
    }
}

static void tof(float *dst, const double *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = (float)src[i];
}

static void rnd(double *v, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (double)(float)((2.0 * pt_rng_uniform(&rng) - 1.0) * scale);
}

static void test_cfconv_derivatives(void **state)
{
    (void)state;
    cf2 c;
    memset(&c, 0, sizeof c);
    rnd(c.x, CN * CF, 1.0);
    rnd(c.xd, CN * CF, 1.0);
    rnd(c.p, CU * CF, 1.0);
    rnd(c.pd, CU * CF, 1.0);
    rnd(c.mh, CN * CF, 1.0);
    rnd(c.mb, CN * CF, 1.0);
    rnd(c.dm, CN * CF, 1.0);
    rnd(c.dcut, CU, 1.0);
    rnd(c.lam, CU, 1.0);
    for (int u = 0; u < CU; u++) c.cut[u] = (double)(float)(0.2 + 0.15 * u);
    c.row_only = -1;
    float x[CN * CF], xd[CN * CF], p[CU * CF], cut[CU], dcut[CU], lam[CU], mh[CN * CF],
        mb[CN * CF], dm[CN * CF], w[CU * CF], wd[CU * CF];
    tof(x, c.x, CN * CF);
    tof(xd, c.xd, CN * CF);
    tof(p, c.p, CU * CF);
    tof(cut, c.cut, CU);
    tof(dcut, c.dcut, CU);
    tof(lam, c.lam, CU);
    tof(mh, c.mh, CN * CF);
    tof(mb, c.mb, CN * CF);
    tof(dm, c.dm, CN * CF);
    double w64[CU * CF], wd64[CU * CF];
    filters(&c, w64, wd64);
    tof(w, w64, CU * CF);
    tof(wd, wd64, CU * CF);

    /* distance backward: dx and g */
    float dx[CN * CF], g[CU];
    for (int u = 0; u < CU; u++) g[u] = 0.25f; /* g accumulates */
    memset(dx, 0x7f, sizeof dx);
    pt_cfconv_backward_dist(dx, g, dm, x, w, wd, c_row, c_src, c_off, CN, CF);
    double gx[CN * CF], gg[CU];
    fd(c.x, CN * CF, loss_dist, &c, gx);
    for (int u = 0; u < CU; u++) {
        c.row_only = u;
        fd(&c.eps, 1, loss_dist, &c, &gg[u]);
        gg[u] += 0.25;
    }
    c.row_only = -1;
    assert_close_d("backward_dist dx", dx, gx, CN * CF);
    assert_close_d("backward_dist g", g, gg, CU);

    /* tangent: ṁ = d/dε m(x + ε ẋ, W + ε W' λ), with and without ẋ */
    float mdot[CN * CF];
    double want[CN * CF], wl[CU * CF], t[CN * CF];
    for (int u = 0; u < CU; u++)
        for (int f = 0; f < CF; f++) wl[u * CF + f] = wd64[u * CF + f] * c.lam[u];
    for (int with_xd = 0; with_xd < 2; with_xd++) {
        memset(mdot, 0x7f, sizeof mdot);
        pt_cfconv_tangent(mdot, w, wd, lam, c_row, x, with_xd ? xd : NULL, c_src, c_off, CN, CF);
        conv(c.x, wl, want);
        if (with_xd) {
            conv(c.xd, w64, t);
            for (int i = 0; i < CN * CF; i++) want[i] += t[i];
        }
        assert_close_d(with_xd ? "tangent" : "tangent, no xdot", mdot, want, CN * CF);
    }

    /* second backward: x̂, P̂, P̄ as gradients of J; Ẇ = W' λ needs W' built
     * from Ṗ = pd so that W' λ = Ṗ C + P C' λ holds: wd = (Ṗ C)/λ + P C' */
    float wdl[CU * CF], xhat[CN * CF], ph[CU * CF], pb[CU * CF];
    for (int u = 0; u < CU; u++)
        for (int f = 0; f < CF; f++)
            wdl[u * CF + f] = (float)((c.pd[u * CF + f] * c.cut[u]) / c.lam[u] +
                                      c.p[u * CF + f] * c.dcut[u]);
    memset(ph, 0x7f, sizeof ph); /* rows are written by their first edge */
    memset(pb, 0x7f, sizeof pb);
    /* the batch's sender lists (pt_schnet_prepare_edges builds them) */
    int32_t c_last[CE], c_so[CN + 1], c_se[CE], c_close[CN + 1];
    pt_edge_rows_last(c_last, c_row, c_off, CN);
    pt_cfconv_senders(c_so, c_se, c_close, c_row, c_src, c_dst, CN, CE);
    pt_cfconv_backward2(xhat, ph, pb, mh, mb, x, xd, w, wdl, lam, cut, dcut, c_row, c_first,
                        c_last, c_dst, c_so, c_se, CN, CF);
    double gxh[CN * CF], gph[CU * CF], gpb[CU * CF];
    fd(c.x, CN * CF, loss_second, &c, gxh);
    fd(c.p, CU * CF, loss_second, &c, gph);
    fd(c.pd, CU * CF, loss_second, &c, gpb);
    assert_close_d("backward2 xhat", xhat, gxh, CN * CF);
    assert_close_d("backward2 phat", ph, gph, CU * CF);
    assert_close_d("backward2 pbar", pb, gpb, CU * CF);
    /* the first block's form (ẋ = 0) */
    memset(c.xd, 0, sizeof c.xd);
    pt_cfconv_backward2(xhat, ph, pb, mh, mb, x, NULL, w, wdl, lam, cut, dcut, c_row, c_first,
                        c_last, c_dst, c_so, c_se, CN, CF);
    fd(c.x, CN * CF, loss_second, &c, gxh);
    fd(c.p, CU * CF, loss_second, &c, gph);
    assert_close_d("backward2 xhat, no xdot", xhat, gxh, CN * CF);
    assert_close_d("backward2 phat, no xdot", ph, gph, CU * CF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_edge_basis_deriv, setup),
        cmocka_unit_test(test_cutoff_deriv_dense_sweep),
        cmocka_unit_test_setup(test_elementwise_ops, setup),
        cmocka_unit_test_setup(test_cfconv_derivatives, setup),
    };
    return cmocka_run_group_tests_name("schnet_ops_forces", tests, NULL, NULL);
}
