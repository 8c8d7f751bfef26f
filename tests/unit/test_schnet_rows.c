/* test_schnet_rows.c — the speed-motivated parts of the SchNet engine give
 * the numbers of the plain formulation:
 *   - the filter-row table (engine/pack/edge_rows.h): the two directions of a bond
 *     (reverse edge, vector exactly negated) share a row only when their
 *     distances are bit-identical, one-sided edges get rows of their own,
 *     edges at or past the cutoff get none; periodic bonds pair by shift:
 *     one pair at several shifts, and an atom with its own images;
 *   - the model run over that table matches the double-precision per-edge
 *     reference of schnet_fixture.h (which runs the filter network on every
 *     directed edge, as PyG does), also when some bonds cannot share a row;
 *   - the shifted softplus without a bias is the one with a zero bias;
 *   - an energy arena carves no sigmoids (σ1, σ2, σ4: NULL; its backward
 *     recovers them from s1, u and q), and a forward that takes no gradient
 *     (no_grad) predicts the same bits;
 *   - du kept in dx's memory (schnet_acts.c) gives the gradients of du in
 *     a buffer of its own, in fp32 and bf16;
 *   - the optional profile charges time to every kind of work and counts
 *     passes, and names its ops. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/pack/edge_rows.h"
#include "engine/model/schnet.h"
#include "engine/model/schnet_internal.h"
#include "tests/unit/schnet_fixture.h"

typedef struct step_out {
    double y[64];
    double loss;
    float *grads;
} step_out;

static void run_step(fixture *fx, pt_schnet_profile *prof, step_out *out)
{
    fx->a.profile = prof;
    const double *y = pt_schnet_forward(&fx->m, &fx->a, &fx->hb.b);
    for (int g = 0; g < fx->hb.b.cap_graphs; g++) out->y[g] = y[g];
    out->loss = pt_schnet_loss(&fx->m, &fx->a, &fx->hb.b, 0.0);
    out->grads = calloc(fx->m.n_params, sizeof(float));
    assert_non_null(out->grads);
    pt_schnet_backward(&fx->m, &fx->a, &fx->hb.b, out->grads);
}

/* ---- the row table ------------------------------------------------------------ */

enum { TN = 5, TE = 10 };
/* pt_edge_rows_build's scratch (a position in each list) */
static int32_t cursor[8];

static void test_rows_table(void **state)
{
    (void)state;
    /* receivers 0..4 in CSR order; cutoff 3 */
    const int32_t src[TE] = {1, 2, 0, 2, 3, 0, 1, 3, 4, 0};
    const int32_t off[TN + 1] = {0, 2, 5, 8, 8, 10};
    float d[TE] = {1.0f, 2.0f, 1.0f, 1.5f, 2.5f, 2.0f, 1.5f, 2.9f, 3.0f, NAN};
    /* vectors r_src - r_dst: reverse edges are exact negations */
    const float vec[3 * TE] = {1.0f, 0, 0, 0, 2.0f, 0, -1.0f, 0, 0, 0, 1.5f, 0, 0, 0, 2.5f,
                               0, -2.0f, 0, 0, -1.5f, 0, 2.9f, 0, 0, 3.0f, 0, 0, 0, 0, 0};
    /* 0–1, 0–2, 1–2 both ways at equal distances: shared.  1←3, 2←3 have no
     * reverse edge.  4←4 sits at the cutoff, 4←0 is not a number: no row. */
    int32_t row[TE];
    uint8_t first[TE];
    float rd[TE];
    int32_t n = pt_edge_rows_build(row, first, rd, cursor, src, off, d, vec, TN, 3.0f);
    const int32_t want_row[TE] = {0, 1, 0, 2, 3, 1, 2, 4, -1, -1};
    const uint8_t want_first[TE] = {1, 1, 0, 1, 1, 0, 0, 1, 0, 0};
    const float want_rd[5] = {1.0f, 2.0f, 1.5f, 2.5f, 2.9f};
    assert_int_equal(n, 5);
    assert_memory_equal(row, want_row, sizeof row);
    assert_memory_equal(first, want_first, sizeof first);
    assert_memory_equal(rd, want_rd, sizeof want_rd);

    /* one ulp apart: the directions of 0–2 no longer share */
    d[5] = nextafterf(2.0f, 3.0f);
    n = pt_edge_rows_build(row, first, rd, cursor, src, off, d, vec, TN, 3.0f);
    assert_int_equal(n, 6);
    assert_int_equal(row[1], 1);
    assert_int_equal(row[5], 4);
    assert_int_equal(first[5], 1);
    assert_true(rd[4] == d[5]);
    /* every row's first edge precedes its other edges */
    for (int k = 0; k < TE; k++)
        if (row[k] >= 0 && !first[k])
            for (int q = k + 1; q < TE; q++) assert_false(row[q] == row[k] && first[q]);
    /* the static-shape table: one row per slot, padding and NaN included */
    assert_int_equal(pt_edge_rows_identity(row, first, rd, d, TE), TE);
    for (int k = 0; k < TE; k++) {
        assert_int_equal(row[k], k);
        assert_int_equal(first[k], 1);
        assert_memory_equal(&rd[k], &d[k], sizeof(float));
    }
    /* no edges at all */
    const int32_t off0[2] = {0, 0};
    assert_int_equal(pt_edge_rows_build(row, first, rd, cursor, src, off0, d, vec, 1, 3.0f), 0);
}

/* Periodic bonds: atoms 0 and 1 of a crystal bonded at two shifts with the
 * same distance (S and S' in the 1<-0 direction, -S and -S' back), atom 0
 * bonded to its own images +a and -a.  Rows pair each edge with its exact
 * reverse only: four bonds, never one row for the equal-distance pair. */
static void test_rows_periodic_bonds(void **state)
{
    (void)state;
    enum { N = 2, E = 6 };
    /* receiver 0: 0<-0 (+a), 0<-0 (-a), 0<-1 (v1), 0<-1 (v2); receiver 1: 1<-0 (-v1), 1<-0 (-v2) */
    const int32_t src[E] = {0, 0, 1, 1, 0, 0};
    const int32_t off[N + 1] = {0, 4, 6};
    const float d[E] = {2.5f, 2.5f, 2.0f, 2.0f, 2.0f, 2.0f};
    const float vec[3 * E] = {2.5f, 0, 0, -2.5f, 0, 0, 1.2f, 1.6f, 0, 1.2f, -1.6f, 0,
                              -1.2f, 1.6f, 0, -1.2f, -1.6f, 0};
    int32_t row[E];
    uint8_t first[E];
    float rd[E];
    assert_int_equal(pt_edge_rows_build(row, first, rd, cursor, src, off, d, vec, N, 3.0f), 3);
    /* self images share; 1<-0 (-v2) pairs with 0<-1 (v2), 1<-0 (-v1) with 0<-1 (v1) */
    const int32_t want_row[E] = {0, 0, 1, 2, 2, 1};
    const uint8_t want_first[E] = {1, 0, 1, 1, 0, 0};
    assert_memory_equal(row, want_row, sizeof row);
    assert_memory_equal(first, want_first, sizeof first);
    /* a self image without its -S partner (capped away) keeps a row of its own */
    const float lone[3 * E] = {2.5f, 0, 0, 0, 2.5f, 0, 1.2f, 1.6f, 0, 1.2f, -1.6f, 0,
                               -1.2f, -1.6f, 0, -1.2f, 1.6f, 0};
    assert_int_equal(pt_edge_rows_build(row, first, rd, cursor, src, off, d, lone, N, 3.0f), 4);
    const int32_t want_lone[E] = {0, 1, 2, 3, 2, 3};
    assert_memory_equal(row, want_lone, sizeof row);
    /* a zero component and its negation (+0 / -0) still pair */
    const float zeros[3 * E] = {2.5f, 0.0f, -0.0f, -2.5f, -0.0f, 0.0f, 1.2f, 1.6f, 0, 1.2f, -1.6f, 0,
                                -1.2f, -1.6f, -0.0f, -1.2f, 1.6f, -0.0f};
    assert_int_equal(pt_edge_rows_build(row, first, rd, cursor, src, off, d, zeros, N, 3.0f), 3);
}

/* ---- the model over rows against the per-edge reference -------------------- */

static void assert_matches_reference(fixture *fx)
{
    double *theta = theta_of(&fx->m);
    double want[64];
    double loss_ref = reference(&fx->m, theta, &fx->hb.b, want);
    step_out out;
    run_step(fx, NULL, &out);
    for (int g = 0; g < fx->hb.b.cap_graphs; g++)
        if (!(fabs(out.y[g] - want[g]) <= 1e-5 * (1.0 + fabs(want[g]))))
            fail_msg("slot %d: y = %.9g, reference %.9g", g, out.y[g], want[g]);
    assert_true(fabs(out.loss - loss_ref) <= 1e-5 * (1.0 + loss_ref));
    free(out.grads);
    free(theta);
}

static void check_rows(pt_readout readout)
{
    fixture fx;
    fixture_open(&fx, readout);
    const pt_batch *b = &fx.hb.b;
    assert_matches_reference(&fx);
    /* every real bond is listed both ways at one distance: one row per bond,
     * none for the padding edges */
    assert_int_equal(fx.a.n_rows * 2, b->n_real_edges);
    int unused = 0;
    for (int k = 0; k < b->cap_edges; k++) unused += fx.a.row[k] < 0;
    assert_int_equal(unused, b->cap_edges - b->n_real_edges);

    /* nudge one direction of every third bond by an ulp: those directions get
     * rows of their own and the model must still match the reference */
    int nudged = 0;
    for (int k = 0; k < b->cap_edges; k += 3)
        if (fx.a.row[k] >= 0 && !fx.a.first[k]) {
            b->edge_dist[k] = nextafterf(b->edge_dist[k], 0.0f);
            nudged++;
        }
    assert_true(nudged > 0);
    assert_matches_reference(&fx);
    assert_int_equal(fx.a.n_rows, b->n_real_edges / 2 + nudged);
    fixture_close(&fx);
}

/* backend.static_shapes: every edge slot its own row (the IPU's cost), the
 * same numbers up to rounding */
static void test_rows_static_shapes(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    step_out shared;
    run_step(&fx, NULL, &shared);
    fx.a.static_shapes = 1;
    assert_matches_reference(&fx);
    assert_int_equal(fx.a.n_rows, fx.hb.b.cap_edges);
    step_out slots;
    run_step(&fx, NULL, &slots);
    for (size_t t = 0; t < fx.m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &fx.m.tensors[t];
        double mx = 0.0;
        for (size_t k = tt->offset; k < tt->offset + tt->numel; k++)
            mx = fmax(mx, fabs(shared.grads[k]));
        for (size_t k = tt->offset; k < tt->offset + tt->numel; k++)
            if (!(fabs(slots.grads[k] - shared.grads[k]) <= 1e-5 * mx + 1e-30))
                fail_msg("%s: static %.9g, shared rows %.9g", tt->name, (double)slots.grads[k],
                         (double)shared.grads[k]);
    }
    free(shared.grads);
    free(slots.grads);
    fixture_close(&fx);
}

static void test_rows_sum_readout(void **state)
{
    (void)state;
    check_rows(PT_READOUT_SUM);
}

static void test_rows_mean_readout(void **state)
{
    (void)state;
    check_rows(PT_READOUT_MEAN);
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

/* An energy arena carves no sigmoids (σ1 of every block, σ2, the head's σ4:
 * NULL; pt_schnet_sig_stored): a forward or backward that wrote or read one
 * would fault here.  no_grad: the same predictions, bit for bit. */
static void assert_no_sigmas(const fixture *fx)
{
    assert_int_equal(fx->a.mode, PT_SCHNET_ENERGY);
    assert_int_equal(pt_schnet_sig_stored(&fx->a), 0);
    for (int t = 0; t < fx->m.cfg.interactions; t++) {
        assert_null(fx->a.block[t].sig1);
        assert_null(fx->a.block[t].sig2);
    }
    assert_null(fx->a.head[0].sig4);
    assert_null(fx->a.sig4);
}

static void test_no_grad_forward(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    const int G = fx.hb.b.cap_graphs;
    assert_true(G <= 64);
    assert_no_sigmas(&fx);
    double ref[64], got[64];
    memcpy(ref, pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b), sizeof(double) * G);
    fx.a.no_grad = 1;
    memcpy(got, pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b), sizeof(double) * G);
    assert_memory_equal(got, ref, sizeof(double) * G);
    fixture_close(&fx);
}

/* A training step of an energy arena neither writes nor reads the node
 * layers' σ2 nor the head's σ4 (the backward recovers them from u and q):
 * the arena has none (NULL); two steps give the same bits, and the
 * predictions and loss match the double-precision per-edge reference
 * (schnet_fixture.h). */
static void test_energy_step_recovers_node_sigma(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    assert_no_sigmas(&fx);
    step_out ref, got;
    run_step(&fx, NULL, &ref);
    run_step(&fx, NULL, &got);
    assert_memory_equal(got.grads, ref.grads, fx.m.n_params * sizeof(float));
    assert_memory_equal(got.y, ref.y, sizeof(double) * (size_t)fx.hb.b.cap_graphs);
    assert_matches_reference(&fx);
    free(ref.grads), free(got.grads);
    fixture_close(&fx);
}

/* The arena keeps du in dx's memory (the block's backward is done with du
 * before the convolution's backward clears dx): the gradients are bit for
 * bit those of du in a buffer of its own, in fp32 and bf16 (the fused bf16
 * backward has its own sequence of du's uses).  Fails if any use of du
 * moved after the convolution's backward. */
static void test_du_shares_dx(void **state)
{
    (void)state;
    const pt_precision precs[2] = {PT_PRECISION_FP32, PT_PRECISION_BF16};
    for (int p = 0; p < 2; p++) {
        fixture fx;
        fixture_open(&fx, PT_READOUT_SUM);
        fx.a.precision = precs[p];
        assert_ptr_equal(fx.a.du, fx.a.dx);
        step_out shared, own;
        run_step(&fx, NULL, &shared);
        const size_t n = (size_t)fx.a.cap_nodes * (size_t)fx.m.cfg.hidden;
        float *du = malloc(n * sizeof(float));
        assert_non_null(du);
        memset(du, 0xff, n * sizeof(float));
        fx.a.du = du;
        run_step(&fx, NULL, &own);
        assert_memory_equal(own.y, shared.y, sizeof(double) * (size_t)fx.hb.b.cap_graphs);
        assert_memory_equal(own.grads, shared.grads, fx.m.n_params * sizeof(float));
        fx.a.du = fx.a.dx;
        free(du);
        free(shared.grads), free(own.grads);
        fixture_close(&fx);
    }
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
    run_step(&fx, &prof, &a);
    run_step(&fx, &prof, &b);
    assert_int_equal(prof.forwards, 2);
    assert_int_equal(prof.backwards, 2);
    for (int k = 0; k < PT_SCHNET_OP_COUNT; k++)
        if (!(prof.seconds[k] > 0.0 && prof.seconds[k] < 10.0))
            fail_msg("%s: %g s", pt_schnet_op_name((pt_schnet_op)k), prof.seconds[k]);
    /* profiling changes nothing in the numbers */
    step_out c;
    run_step(&fx, NULL, &c);
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
        cmocka_unit_test(test_rows_table),
        cmocka_unit_test(test_rows_periodic_bonds),
        cmocka_unit_test(test_rows_sum_readout),
        cmocka_unit_test(test_rows_mean_readout),
        cmocka_unit_test(test_rows_static_shapes),
        cmocka_unit_test(test_ssp_without_bias),
        cmocka_unit_test(test_no_grad_forward),
        cmocka_unit_test(test_energy_step_recovers_node_sigma),
        cmocka_unit_test(test_du_shares_dx),
        cmocka_unit_test(test_profile_charges_every_op),
        cmocka_unit_test(test_op_names),
    };
    return cmocka_run_group_tests_name("schnet_rows", tests, NULL, NULL);
}
