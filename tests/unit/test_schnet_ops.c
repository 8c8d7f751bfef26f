/* test_schnet_ops.c — every SchNet op pair against a double-precision
 * reference written as plain loops, and every backward against central finite
 * differences of that reference.
 *
 * Tolerance (argued once, used everywhere): the reference runs in double and
 * its central differences with step 1e-6 are exact to ~1e-9 relative
 * (truncation h² f''' plus round-off 1e-16/h).  The op under test runs in
 * float: each output here is a sum of at most K = 10 products of O(1) values,
 * each rounded with ε = 6e-8, so its error is below K·ε·Σ|terms| ≈ 6e-7·Σ|terms|.
 * Σ|terms| can exceed |result| under cancellation, so the bound also has a
 * part relative to the largest magnitude in the tensor:
 *   |got − want| ≤ 1e-5·|want| + 2e-6·max|want|
 * (the polynomial exp/log1p of the ops are ~2 ulp, inside it).  A bug that
 * scales one term by 1 + 1e-4 already fails it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/model/bf16.h"
#include "engine/model/schnet_ops.h"
#include "tests/ref/model_ref.h"

static pt_rng rng;

static void fill(float *v, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)((2.0 * pt_rng_uniform(&rng) - 1.0) * scale);
}

/* |got − want| ≤ 1e-5·|want| + 2e-6·max|want|, reporting the first miss */
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


/* ---- linear ---------------------------------------------------------------- */

enum { LN = 7, LI = 5, LO = 3 };

/* L = Σ dout ⊙ (beta·out0 + in·wᵀ + b), in double */
static double linear_loss(const double *in, const double *w, const double *b,
                          const float *out0, const float *dout, double beta)
{
    double l = 0.0;
    for (int r = 0; r < LN; r++)
        for (int o = 0; o < LO; o++) {
            double v = beta * out0[r * LO + o] + b[o];
            for (int i = 0; i < LI; i++) v += in[r * LI + i] * w[o * LI + i];
            l += dout[r * LO + o] * v;
        }
    return l;
}

/* central differences of f over every entry of x (double copy of the inputs) */
typedef double (*loss_fn)(void *ctx);
static void fd_grad(double *x, size_t n, loss_fn f, void *ctx, double *grad)
{
    const double h = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = x[i];
        x[i] = keep + h;
        double lp = f(ctx);
        x[i] = keep - h;
        double lm = f(ctx);
        x[i] = keep;
        grad[i] = (lp - lm) / (2.0 * h);
    }
}

typedef struct linear_ctx {
    double in[LN * LI], w[LO * LI], b[LO];
    float out0[LN * LO], dout[LN * LO];
    double beta;
} linear_ctx;

static double linear_ctx_loss(void *p)
{
    linear_ctx *c = p;
    return linear_loss(c->in, c->w, c->b, c->out0, c->dout, c->beta);
}

static void test_linear_forward_backward(void **state)
{
    (void)state;
    float in[LN * LI], w[LO * LI], b[LO], out[LN * LO], dout[LN * LO];
    fill(in, LN * LI, 1.5);
    fill(w, LO * LI, 0.8);
    fill(b, LO, 0.5);
    fill(dout, LN * LO, 1.0);
    linear_ctx c;
    for (int i = 0; i < LN * LI; i++) c.in[i] = in[i];
    for (int i = 0; i < LO * LI; i++) c.w[i] = w[i];
    for (int i = 0; i < LO; i++) c.b[i] = b[i];
    memcpy(c.dout, dout, sizeof(dout));

    for (int pass = 0; pass < 2; pass++) {
        float beta = pass ? 1.0f : 0.0f;
        fill(out, LN * LO, 2.0);
        memcpy(c.out0, out, sizeof(out));
        c.beta = beta;
        pt_linear_forward(out, in, w, b, LN, LI, LO, beta, PT_PRECISION_FP32);
        double want[LN * LO];
        for (int r = 0; r < LN; r++)
            for (int o = 0; o < LO; o++) {
                double v = beta * c.out0[r * LO + o] + c.b[o];
                for (int i = 0; i < LI; i++) v += c.in[r * LI + i] * c.w[o * LI + i];
                want[r * LO + o] = v;
            }
        assert_close_d("linear out", out, want, LN * LO);
    }

    /* backward accumulates into dw/db and, with din_beta = 1, into din */
    float din[LN * LI], dw[LO * LI], db[LO], din0[LN * LI], dw0[LO * LI], db0[LO];
    fill(din0, LN * LI, 1.0);
    fill(dw0, LO * LI, 1.0);
    fill(db0, LO, 1.0);
    memcpy(din, din0, sizeof(din));
    memcpy(dw, dw0, sizeof(dw));
    memcpy(db, db0, sizeof(db));
    pt_linear_backward(din, dw, db, dout, in, w, LN, LI, LO, 1.0f, PT_PRECISION_FP32);
    double g_in[LN * LI], g_w[LO * LI], g_b[LO];
    fd_grad(c.in, LN * LI, linear_ctx_loss, &c, g_in);
    fd_grad(c.w, LO * LI, linear_ctx_loss, &c, g_w);
    fd_grad(c.b, LO, linear_ctx_loss, &c, g_b);
    for (int i = 0; i < LN * LI; i++) g_in[i] += din0[i];
    for (int i = 0; i < LO * LI; i++) g_w[i] += dw0[i];
    for (int i = 0; i < LO; i++) g_b[i] += db0[i];
    assert_close_d("linear din (+=)", din, g_in, LN * LI);
    assert_close_d("linear dw (+=)", dw, g_w, LO * LI);
    assert_close_d("linear db (+=)", db, g_b, LO);

    /* din_beta = 0 overwrites; NULL din and db are skipped */
    pt_linear_backward(din, dw, NULL, dout, in, w, LN, LI, LO, 0.0f, PT_PRECISION_FP32);
    for (int i = 0; i < LN * LI; i++) g_in[i] -= din0[i];
    assert_close_d("linear din (=)", din, g_in, LN * LI);
    pt_linear_backward(NULL, dw, NULL, dout, in, w, LN, LI, LO, 0.0f, PT_PRECISION_FP32);
}

/* In bf16 the products see operands rounded to bfloat16 and accumulate in
 * fp32: the result is the exact product of the rounded operands up to fp32
 * accumulation error (K ≤ 7 here: 1e-6 relative to the terms' magnitude). */
static void test_linear_bf16(void **state)
{
    (void)state;
    float in[LN * LI], w[LO * LI], b[LO], out[LN * LO], dout[LN * LO];
    fill(in, LN * LI, 1.5);
    fill(w, LO * LI, 0.8);
    fill(b, LO, 0.5);
    fill(dout, LN * LO, 1.0);
    double rin[LN * LI], rw[LO * LI], rdout[LN * LO];
    for (int i = 0; i < LN * LI; i++) rin[i] = pt_bf16_to_float(pt_bf16_from_float(in[i]));
    for (int i = 0; i < LO * LI; i++) rw[i] = pt_bf16_to_float(pt_bf16_from_float(w[i]));
    for (int i = 0; i < LN * LO; i++) rdout[i] = pt_bf16_to_float(pt_bf16_from_float(dout[i]));
    pt_linear_forward(out, in, w, b, LN, LI, LO, 0.0f, PT_PRECISION_BF16);
    double want[LN * LO], mag[LN * LO];
    int differs = 0;
    float out32[LN * LO];
    pt_linear_forward(out32, in, w, b, LN, LI, LO, 0.0f, PT_PRECISION_FP32);
    for (int r = 0; r < LN; r++)
        for (int o = 0; o < LO; o++) {
            double v = b[o], m = fabs(b[o]);
            for (int i = 0; i < LI; i++) {
                v += rin[r * LI + i] * rw[o * LI + i];
                m += fabs(rin[r * LI + i] * rw[o * LI + i]);
            }
            want[r * LO + o] = v;
            mag[r * LO + o] = m;
            differs += out32[r * LO + o] != out[r * LO + o];
        }
    for (int k = 0; k < LN * LO; k++)
        if (!(fabs(out[k] - want[k]) <= 1e-6 * mag[k]))
            fail_msg("bf16 out[%d] = %.9g, rounded-operand product %.9g", k, (double)out[k],
                     want[k]);
    assert_true(differs > 0); /* the operands really were rounded */

    float din[LN * LI], dw[LO * LI];
    memset(dw, 0, sizeof dw);
    pt_linear_backward(din, dw, NULL, dout, in, w, LN, LI, LO, 0.0f, PT_PRECISION_BF16);
    for (int o = 0; o < LO; o++)
        for (int i = 0; i < LI; i++) {
            double v = 0.0, m = 0.0;
            for (int r = 0; r < LN; r++) {
                v += rdout[r * LO + o] * rin[r * LI + i];
                m += fabs(rdout[r * LO + o] * rin[r * LI + i]);
            }
            assert_true(fabs(dw[o * LI + i] - v) <= 1e-6 * m);
        }
    for (int r = 0; r < LN; r++)
        for (int i = 0; i < LI; i++) {
            double v = 0.0, m = 0.0;
            for (int o = 0; o < LO; o++) {
                v += rdout[r * LO + o] * rw[o * LI + i];
                m += fabs(rdout[r * LO + o] * rw[o * LI + i]);
            }
            assert_true(fabs(din[r * LI + i] - v) <= 1e-6 * m);
        }
}

/* ---- shifted softplus ------------------------------------------------------ */

enum { SN = 4, SC = 9 };

typedef struct ssp_ctx {
    double x[SN * SC], b[SC];
    float ds[SN * SC];
} ssp_ctx;

static double ssp_ctx_loss(void *p)
{
    ssp_ctx *c = p;
    double l = 0.0;
    for (int r = 0; r < SN; r++)
        for (int k = 0; k < SC; k++) l += c->ds[r * SC + k] * ssp_ref(c->x[r * SC + k] + c->b[k]);
    return l;
}

static void test_ssp_forward_accuracy_over_range(void **state)
{
    (void)state;
    /* the whole float range that matters, including both saturations and 0 */
    enum { NV = 4001 };
    static float x[NV], s[NV], sig[NV];
    float zero = 0.0f;
    for (int i = 0; i < NV; i++) x[i] = -100.0f + 0.05f * (float)i;
    x[2000] = 0.0f;
    x[1] = -1e-7f;
    x[2] = 3e-4f;
    memcpy(s, x, sizeof(x));
    pt_ssp_forward(s, sig, &zero, NV, 1);
    for (int i = 0; i < NV; i++) {
        double xv = x[i];
        double ws = ssp_ref(xv), wg = sig_ref(xv);
        /* 4 ulp of the larger of |ssp| and ln 2 (the shift) */
        if (fabs(s[i] - ws) > 4 * 6e-8 * fmax(fabs(ws), PT_LN2))
            fail_msg("ssp(%g) = %.9g, want %.9g", xv, (double)s[i], ws);
        if (fabs(sig[i] - wg) > 4 * 6e-8 * wg + 1e-37)
            fail_msg("sigmoid(%g) = %.9g, want %.9g", xv, (double)sig[i], wg);
    }
}

static void test_ssp_backward_matches_fd(void **state)
{
    (void)state;
    float x[SN * SC], b[SC], s[SN * SC], sig[SN * SC], dx[SN * SC], db[SC], db0[SC];
    fill(x, SN * SC, 6.0);
    fill(b, SC, 1.0);
    ssp_ctx c;
    fill(c.ds, SN * SC, 1.0);
    for (int i = 0; i < SN * SC; i++) c.x[i] = x[i];
    for (int i = 0; i < SC; i++) c.b[i] = b[i];
    memcpy(s, x, sizeof(x));
    pt_ssp_forward(s, sig, b, SN, SC);
    double want[SN * SC];
    for (int r = 0; r < SN; r++)
        for (int k = 0; k < SC; k++) want[r * SC + k] = ssp_ref(c.x[r * SC + k] + c.b[k]);
    assert_close_d("ssp in place", s, want, SN * SC);

    fill(db0, SC, 1.0);
    memcpy(db, db0, sizeof(db));
    memcpy(dx, c.ds, sizeof(dx));
    pt_ssp_backward(dx, db, sig, SN, SC);
    double gx[SN * SC], gb[SC];
    fd_grad(c.x, SN * SC, ssp_ctx_loss, &c, gx);
    fd_grad(c.b, SC, ssp_ctx_loss, &c, gb);
    for (int k = 0; k < SC; k++) gb[k] += db0[k];
    assert_close_d("ssp dx", dx, gx, SN * SC);
    assert_close_d("ssp db (+=)", db, gb, SC);
}

/* ---- edge basis ------------------------------------------------------------ */

static void test_edge_basis_matches_reference(void **state)
{
    (void)state;
    enum { E = 7, G = 11 };
    const float rc = 5.0f;
    float d[E] = {0.0f, 0.3f, 1.7f, 2.5f, 4.99f, 5.0f, 7.5f}, e[E * G], cut[E];
    pt_edge_basis_forward(e, cut, d, E, G, rc);
    double we[E * G], wc[E];
    double step = rc / (G - 1.0), gamma = -0.5 / (step * step);
    for (int k = 0; k < E; k++) {
        for (int g = 0; g < G; g++) {
            double diff = d[k] - step * g;
            we[k * G + g] = exp(gamma * diff * diff);
        }
        wc[k] = d[k] < rc ? 0.5 * (cos(M_PI * d[k] / rc) + 1.0) : 0.0;
    }
    assert_close_d("gaussians", e, we, E * G);
    assert_close_d("cutoff", cut, wc, E);
    /* at and beyond the cutoff (padding edges) C is exactly 0 */
    assert_true(cut[5] == 0.0f && cut[6] == 0.0f);
    assert_true(cut[0] == 1.0f);
}

/* ---- continuous-filter convolution ----------------------------------------- */

enum { CN = 5, CE = 9, CF = 6, CU = 5 };
/* receivers sorted (CSR); edge 8 is a padding edge on the last node (no
 * row).  Filter rows as engine/edge_rows.c would give them: the two
 * directions of bonds 0–1, 0–2 and 1–2 share a row; 1←3 and 2←3 have no
 * reverse edge and get rows of their own. */
static const int32_t c_src[CE] = {1, 2, 0, 2, 3, 0, 1, 3, 4};
static const int32_t c_dst[CE] = {0, 0, 1, 1, 1, 2, 2, 2, 4};
static const int32_t c_off[CN + 1] = {0, 2, 5, 8, 8, 9};
static const int32_t c_row[CE] = {0, 1, 0, 2, 3, 1, 2, 4, -1};
static const uint8_t c_first[CE] = {1, 1, 0, 1, 1, 0, 0, 1, 0};

typedef struct cf_ctx {
    double x[CN * CF], p[CU * CF];
    float cut[CU], dm[CN * CF];
} cf_ctx;

static void cf_ref(const cf_ctx *c, double *m)
{
    memset(m, 0, sizeof(double) * CN * CF);
    for (int k = 0; k < CE; k++) {
        int u = c_row[k];
        if (u < 0) continue;
        for (int f = 0; f < CF; f++)
            m[c_dst[k] * CF + f] += c->x[c_src[k] * CF + f] * c->p[u * CF + f] * c->cut[u];
    }
}

static double cf_ctx_loss(void *p)
{
    cf_ctx *c = p;
    double m[CN * CF], l = 0.0;
    cf_ref(c, m);
    for (int i = 0; i < CN * CF; i++) l += c->dm[i] * m[i];
    return l;
}

static void test_cfconv_forward_backward(void **state)
{
    (void)state;
    cf_ctx c;
    float x[CN * CF], p[CU * CF], w[CU * CF], m[CN * CF];
    fill(x, CN * CF, 1.0);
    fill(p, CU * CF, 1.0);
    for (int u = 0; u < CU; u++) c.cut[u] = (float)(0.2 + 0.15 * u);
    fill(c.dm, CN * CF, 1.0);
    for (int i = 0; i < CN * CF; i++) c.x[i] = x[i];
    for (int i = 0; i < CU * CF; i++) c.p[i] = p[i];
    memcpy(w, p, sizeof(w));
    pt_filter_cutoff_forward(w, w, c.cut, CU, CF);
    for (int u = 0; u < CU; u++)
        for (int f = 0; f < CF; f++) assert_true(w[u * CF + f] == p[u * CF + f] * c.cut[u]);
    memset(m, 0x7f, sizeof(m)); /* every row must be written, even node 3 with no edges */
    pt_cfconv_forward(m, w, c_row, x, c_src, c_off, CN, CF);
    double want[CN * CF];
    cf_ref(&c, want);
    assert_close_d("cfconv m", m, want, CN * CF);
    for (int f = 0; f < CF; f++) {
        assert_true(m[3 * CF + f] == 0.0f);
        assert_true(m[4 * CF + f] == 0.0f); /* node 4 only has the padding edge */
    }

    float dx[CN * CF], dp[CU * CF];
    memset(dx, 0x7f, sizeof(dx));
    memset(dp, 0x7f, sizeof(dp)); /* the first edge of each row writes, no zeroing needed */
    pt_cfconv_backward(dx, dp, c.dm, x, w, c.cut, c_row, c_first, c_src, c_off, CN, CF);
    double gx[CN * CF], gp[CU * CF];
    fd_grad(c.x, CN * CF, cf_ctx_loss, &c, gx);
    fd_grad(c.p, CU * CF, cf_ctx_loss, &c, gp);
    assert_close_d("cfconv dx", dx, gx, CN * CF);
    assert_close_d("cfconv dP", dp, gp, CU * CF);
}

/* ---- embedding ------------------------------------------------------------- */

static void test_embedding_padding_row_gets_no_gradient(void **state)
{
    (void)state;
    enum { ZR = 10, D = 4, N = 5 };
    float table[ZR * D], h[N * D], dh[N * D], dt[ZR * D];
    const uint8_t z[N] = {6, 1, 0, 6, 9};
    fill(table, ZR * D, 1.0);
    fill(dh, N * D, 1.0);
    pt_embedding_forward(h, table, z, N, D);
    for (int i = 0; i < N; i++) assert_memory_equal(h + i * D, table + z[i] * D, D * sizeof(float));
    memset(dt, 0, sizeof(dt));
    dt[1 * D] = 0.25f; /* accumulates */
    pt_embedding_backward(dt, dh, z, N, D);
    for (int c = 0; c < D; c++) {
        assert_true(dt[0 * D + c] == 0.0f);
        assert_float_equal(dt[6 * D + c], dh[0 * D + c] + dh[3 * D + c], 1e-6);
        assert_float_equal(dt[1 * D + c], dh[1 * D + c] + (c == 0 ? 0.25f : 0.0f), 1e-6);
        assert_float_equal(dt[9 * D + c], dh[4 * D + c], 1e-6);
        assert_true(dt[2 * D + c] == 0.0f);
    }
}

/* ---- readout ----------------------------------------------------------------- */

enum { RN = 7, RG = 3 };
static const uint8_t r_z[RN] = {6, 1, 1, 8, 0, 7, 0};
static const int32_t r_graph[RN] = {0, 0, 0, 2, -1, 2, -1}; /* slot 1 is empty */

typedef struct ro_ctx {
    double o[RN], atomref[10], dy[RG];
    double mean, std;
    pt_readout mode;
} ro_ctx;

static void ro_ref(const ro_ctx *c, double *y)
{
    int n[RG] = {0};
    for (int g = 0; g < RG; g++) y[g] = 0.0;
    for (int i = 0; i < RN; i++) {
        if (r_graph[i] < 0) continue;
        y[r_graph[i]] += c->o[i] * c->std + c->mean + c->atomref[r_z[i]];
        n[r_graph[i]]++;
    }
    if (c->mode == PT_READOUT_MEAN)
        for (int g = 0; g < RG; g++) y[g] = n[g] ? y[g] / n[g] : 0.0;
}

static double ro_ctx_loss(void *p)
{
    ro_ctx *c = p;
    double y[RG], l = 0.0;
    ro_ref(c, y);
    for (int g = 0; g < RG; g++) l += c->dy[g] * y[g];
    return l;
}

static void check_readout(pt_readout mode)
{
    ro_ctx c = {.mean = -1.25, .std = 3.5, .mode = mode};
    float o[RN], atomref[10], dout[RN], datomref[10];
    fill(o, RN, 2.0);
    fill(atomref, 10, 5.0);
    for (int i = 0; i < RN; i++) c.o[i] = o[i];
    for (int i = 0; i < 10; i++) c.atomref[i] = atomref[i];
    for (int g = 0; g < RG; g++) c.dy[g] = 0.5 + g;
    double y[RG], want[RG];
    int32_t count[RG];
    pt_readout_forward(y, count, o, r_z, r_graph, atomref, c.mean, c.std, mode, RN, RG);
    ro_ref(&c, want);
    for (int g = 0; g < RG; g++) assert_true(fabs(y[g] - want[g]) < 1e-12 * (1 + fabs(want[g])));
    assert_int_equal(count[0], 3);
    assert_int_equal(count[1], 0);
    assert_int_equal(count[2], 2);

    memset(datomref, 0, sizeof(datomref));
    pt_readout_backward(dout, datomref, c.dy, count, r_z, r_graph, c.std, mode, RN);
    double go[RN], ga[10];
    fd_grad(c.o, RN, ro_ctx_loss, &c, go);
    fd_grad(c.atomref, 10, ro_ctx_loss, &c, ga);
    assert_close_d("readout do", dout, go, RN);
    assert_close_d("readout datomref", datomref, ga, 10);
    assert_true(dout[4] == 0.0f && dout[6] == 0.0f); /* padding nodes */
    assert_true(datomref[0] == 0.0f);
}

static void test_readout_sum(void **state)
{
    (void)state;
    check_readout(PT_READOUT_SUM);
}

static void test_readout_mean(void **state)
{
    (void)state;
    check_readout(PT_READOUT_MEAN);
}

static int setup(void **state)
{
    (void)state;
    pt_rng_init(&rng, 2024, 7);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_linear_forward_backward, setup),
        cmocka_unit_test_setup(test_linear_bf16, setup),
        cmocka_unit_test(test_ssp_forward_accuracy_over_range),
        cmocka_unit_test_setup(test_ssp_backward_matches_fd, setup),
        cmocka_unit_test(test_edge_basis_matches_reference),
        cmocka_unit_test_setup(test_cfconv_forward_backward, setup),
        cmocka_unit_test_setup(test_embedding_padding_row_gets_no_gradient, setup),
        cmocka_unit_test_setup(test_readout_sum, setup),
        cmocka_unit_test_setup(test_readout_mean, setup),
    };
    return cmocka_run_group_tests_name("schnet_ops", tests, NULL, NULL);
}
