/* test_schnet_runs.c — the speed-motivated parts of the SchNet engine give
 * the numbers of the plain formulation:
 *   - the filter network run over receivers in runs of any length (down to
 *     one receiver per run) matches one run over the whole batch and the
 *     double-precision reference of schnet_fixture.h;
 *   - the range forms of the cfconv ops compose to the whole-batch ops;
 *   - the shifted softplus without a bias is the one with a zero bias;
 *   - the optional profile charges time to every kind of work and counts
 *     passes, and names its ops.
 *
 * Tolerances.  A run boundary changes nothing in the forward arithmetic
 * except, possibly, how OpenBLAS blocks the rows of a product (each element
 * is still one K-long dot product), so predictions must agree to 1e-6
 * relative.  The weight gradients are sums over edges that the runs split
 * into partial sums, i.e. the same terms added in another order: the bound
 * is float round-off of a sum of ≤ 120 terms, 1e-5 of each tensor's largest
 * gradient (as test_schnet's padding test). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/schnet.h"
#include "tests/unit/schnet_fixture.h"

typedef struct step_out {
    double y[64];
    double loss;
    float *grads;
} step_out;

static void run_step(fixture *fx, int32_t chunk, pt_schnet_profile *prof, step_out *out)
{
    fx->a.chunk_edges = chunk;
    fx->a.profile = prof;
    const double *y = pt_schnet_forward(&fx->m, &fx->a, &fx->hb.b);
    for (int g = 0; g < fx->hb.b.cap_graphs; g++) out->y[g] = y[g];
    out->loss = pt_schnet_loss(&fx->m, &fx->a, &fx->hb.b, 0.0);
    out->grads = calloc(fx->m.n_params, sizeof(float));
    assert_non_null(out->grads);
    pt_schnet_backward(&fx->m, &fx->a, &fx->hb.b, out->grads);
}

static void assert_grads_close(const pt_schnet *m, const float *got, const float *want,
                               int32_t chunk)
{
    for (size_t t = 0; t < m->n_tensors; t++) {
        const pt_schnet_tensor *tt = &m->tensors[t];
        double mx = 0.0;
        for (size_t k = 0; k < tt->numel; k++) mx = fmax(mx, fabs(want[tt->offset + k]));
        for (size_t k = tt->offset; k < tt->offset + tt->numel; k++)
            if (!(fabs(got[k] - want[k]) <= 1e-5 * mx + 1e-30))
                fail_msg("runs of %d edges: %s: %.9g, one run: %.9g", chunk, tt->name,
                         (double)got[k], (double)want[k]);
    }
}

static void check_runs(pt_readout readout)
{
    fixture fx;
    fixture_open(&fx, readout);
    step_out whole;
    run_step(&fx, 1 << 30, NULL, &whole);
    /* one receiver per run, a few receivers per run, about one pack per run */
    static const int32_t chunks[] = {1, 9, 40};
    for (size_t c = 0; c < sizeof chunks / sizeof *chunks; c++) {
        memset(fx.a.memory, 0xff, fx.a.bytes); /* NaN: every run must write what it reads */
        step_out part;
        run_step(&fx, chunks[c], NULL, &part);
        for (int g = 0; g < fx.hb.b.cap_graphs; g++)
            if (!(fabs(part.y[g] - whole.y[g]) <= 1e-6 * (1.0 + fabs(whole.y[g]))))
                fail_msg("runs of %d edges: slot %d: y = %.9g, one run %.9g", chunks[c], g,
                         part.y[g], whole.y[g]);
        assert_true(fabs(part.loss - whole.loss) <= 1e-6 * whole.loss);
        assert_grads_close(&fx.m, part.grads, whole.grads, chunks[c]);
        free(part.grads);
    }
    /* and the one-receiver runs against the double reference (test_schnet's bound) */
    double *theta = theta_of(&fx.m), yr[64], scale = 0.0;
    reference(&fx.m, theta, &fx.hb.b, yr);
    step_out one;
    run_step(&fx, 1, NULL, &one);
    for (int g = 0; g < fx.hb.b.cap_graphs; g++) scale = fmax(scale, fabs(yr[g]));
    for (int g = 0; g < fx.hb.b.cap_graphs; g++)
        if (fx.hb.b.graph_id[g] >= 0 && fabs(one.y[g] - yr[g]) > 2e-5 * scale)
            fail_msg("slot %d: y = %.9g, reference %.9g", g, one.y[g], yr[g]);
    free(one.grads);
    free(theta);
    free(whole.grads);
    fixture_close(&fx);
}

static void test_runs_sum_readout(void **state)
{
    (void)state;
    check_runs(PT_READOUT_SUM);
}

static void test_runs_mean_readout(void **state)
{
    (void)state;
    check_runs(PT_READOUT_MEAN);
}

/* ---- range ops ------------------------------------------------------------- */

enum { RN = 6, RE = 11, RF = 19 };
/* receivers: 0 ← {1, 2}, 1 ← {0}, 2 ← {}, 3 ← {4, 5, 0}, 4 ← {3}, 5 ← {5, 5, 5, 5} */
static const int32_t r_src[RE] = {1, 2, 0, 4, 5, 0, 3, 5, 5, 5, 5};
static const int32_t r_off[RN + 1] = {0, 2, 3, 3, 6, 7, 11};

static void fill_uniform(pt_rng *r, float *v, size_t n)
{
    for (size_t i = 0; i < n; i++) v[i] = (float)(2.0 * pt_rng_uniform(r) - 1.0);
}

/* Forward over [0,3) then [3,6) is the whole-batch forward bit for bit (the
 * same operations in the same order); backward accumulates dx over runs and
 * writes dP run-relative; the bias gradient is the same sum split in two. */
static void test_range_ops_compose(void **state)
{
    (void)state;
    pt_rng r;
    pt_rng_init(&r, 21, 0);
    float x[RN * RF], p[RE * RF], b[RF], cut[RE], dm[RN * RF];
    fill_uniform(&r, x, RN * RF);
    fill_uniform(&r, p, RE * RF);
    fill_uniform(&r, b, RF);
    fill_uniform(&r, dm, RN * RF);
    for (int k = 0; k < RE; k++) cut[k] = k == RE - 1 ? 0.0f : (float)(0.1 + 0.08 * k);

    float m1[RN * RF], w1[RE * RF], m2[RN * RF], w2[RE * RF];
    memcpy(w1, p, sizeof p);
    memcpy(w2, p, sizeof p);
    memset(m2, 0xff, sizeof m2);
    pt_cfconv_forward(m1, w1, b, cut, x, r_src, r_off, RN, RF);
    pt_cfconv_forward_range(m2, w2, b, cut, x, r_src, r_off, 0, 3, RF);
    pt_cfconv_forward_range(m2, w2, b, cut, x, r_src, r_off, 3, RN, RF);
    assert_memory_equal(m1, m2, sizeof m1);
    assert_memory_equal(w1, w2, sizeof w1);

    /* without b the bias must already be in P: the same W and m */
    float w3[RE * RF], m3[RN * RF];
    for (int k = 0; k < RE; k++)
        for (int c = 0; c < RF; c++) w3[k * RF + c] = p[k * RF + c] + b[c];
    pt_cfconv_forward_range(m3, w3, NULL, cut, x, r_src, r_off, 0, RN, RF);
    assert_memory_equal(m1, m3, sizeof m1);
    assert_memory_equal(w1, w3, sizeof w1);

    float dx1[RN * RF], dp1[RE * RF], db1[RF] = {0};
    pt_cfconv_backward(dx1, dp1, db1, dm, x, w1, cut, r_src, r_off, RN, RF);
    float dx2[RN * RF], dpa[3 * RF], dpb[8 * RF], db2[RF] = {0};
    memset(dx2, 0, sizeof dx2);
    pt_cfconv_backward_range(dx2, dpa, db2, dm, x, w1, cut, r_src, r_off, 0, 3, RF);
    pt_cfconv_backward_range(dx2, dpb, db2, dm, x, w1, cut, r_src, r_off, 3, RN, RF);
    assert_memory_equal(dx1, dx2, sizeof dx1);
    assert_memory_equal(dp1, dpa, sizeof dpa);           /* edges 0..2 */
    assert_memory_equal(dp1 + 3 * RF, dpb, sizeof dpb);  /* edges 3..10, from row 0 */
    for (int c = 0; c < RF; c++) {
        assert_true(fabsf(db1[c] - db2[c]) <= 1e-6f * (1.0f + fabsf(db1[c])));
        assert_true(dpb[7 * RF + c] == 0.0f); /* the zero-cutoff edge carries nothing */
    }
}

/* pt_ssp_forward with b = NULL is the biased form with b = 0, element for
 * element, on a run whose length is not a multiple of any vector width. */
static void test_ssp_without_bias(void **state)
{
    (void)state;
    enum { N = 7, C = 37 };
    pt_rng r;
    pt_rng_init(&r, 5, 0);
    float x1[N * C], x2[N * C], s1[N * C], s2[N * C], zero[C] = {0};
    for (int i = 0; i < N * C; i++) x1[i] = x2[i] = (float)(40.0 * pt_rng_uniform(&r) - 20.0);
    x1[3] = x2[3] = 0.0f;
    x1[4] = x2[4] = -100.0f;
    x1[5] = x2[5] = 100.0f;
    pt_ssp_forward(x1, s1, zero, N, C);
    pt_ssp_forward(x2, s2, NULL, N, C);
    assert_memory_equal(x1, x2, sizeof x1);
    assert_memory_equal(s1, s2, sizeof s1);
    assert_true(x2[3] == 0.0f && s2[3] == 0.5f);
    assert_true(fabsf(x2[4] + (float)PT_LN2) < 1e-7f && s2[4] < 1e-30f);
    assert_true(fabsf(x2[5] - (100.0f - (float)PT_LN2)) < 1e-5f && s2[5] == 1.0f);
}

/* ---- profile ---------------------------------------------------------------- */

static void test_profile_charges_every_op(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    pt_schnet_profile prof;
    memset(&prof, 0, sizeof prof);
    step_out a, b;
    run_step(&fx, 9, &prof, &a);
    run_step(&fx, 9, &prof, &b);
    assert_int_equal(prof.forwards, 2);
    assert_int_equal(prof.backwards, 2);
    for (int k = 0; k < PT_SCHNET_OP_COUNT; k++)
        if (!(prof.seconds[k] > 0.0 && prof.seconds[k] < 10.0))
            fail_msg("%s: %g s", pt_schnet_op_name((pt_schnet_op)k), prof.seconds[k]);
    /* profiling changes nothing in the numbers */
    step_out c;
    run_step(&fx, 9, NULL, &c);
    assert_memory_equal(a.grads, c.grads, fx.m.n_params * sizeof(float));
    assert_int_equal(prof.forwards, 2);
    free(a.grads);
    free(b.grads);
    free(c.grads);
    fixture_close(&fx);
}

static void test_op_names(void **state)
{
    (void)state;
    static const char *const want[PT_SCHNET_OP_COUNT] = {
        "edge_basis", "filter_gemm", "filter_ssp", "cfconv", "node_gemm", "node_ssp", "other"};
    for (int k = 0; k < PT_SCHNET_OP_COUNT; k++)
        assert_string_equal(pt_schnet_op_name((pt_schnet_op)k), want[k]);
    assert_string_equal(pt_schnet_op_name(PT_SCHNET_OP_COUNT), "unknown");
    assert_string_equal(pt_schnet_op_name((pt_schnet_op)-1), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_sum_readout),
        cmocka_unit_test(test_runs_mean_readout),
        cmocka_unit_test(test_range_ops_compose),
        cmocka_unit_test(test_ssp_without_bias),
        cmocka_unit_test(test_profile_charges_every_op),
        cmocka_unit_test(test_op_names),
    };
    return cmocka_run_group_tests_name("schnet_runs", tests, NULL, NULL);
}
