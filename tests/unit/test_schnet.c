/* test_schnet.c — the whole SchNet model: forward against a double-precision
 * reference (plain loops over PyG's equations), backward against central
 * finite differences of that reference for every parameter tensor, padding
 * invariance, accumulation semantics, and the no-allocation rule of the
 * training step.  Batches are built by hand (schnet_fixture.h): small
 * molecules packed into fixed-shape packs with padding nodes, padding edges
 * and padding graph slots, one pack filled to the last node slot (its padding
 * edges are then self-loops on a real atom). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/rng.h"
#include "engine/model/schnet.h"

#include "tests/unit/alloc_count.h"
#include "tests/unit/schnet_fixture.h"

/* ---- tests ------------------------------------------------------------------ */

/* Forward predictions and loss of the float model against the reference: the
 * float path has ~10 layers of sums of ≤ 25 terms, each ≤ 25·ε ≈ 1.5e-6
 * relative, so 2e-5 relative to the prediction scale bounds it. */
static void check_forward(pt_readout readout)
{
    fixture fx;
    fixture_open(&fx, readout);
    const double *y = pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    double loss = pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0);
    double *theta = theta_of(&fx.m);
    double yr[64];
    double lr = reference(&fx.m, theta, &fx.hb.b, yr);
    double scale = 0.0;
    for (int g = 0; g < fx.hb.b.cap_graphs; g++) scale = fmax(scale, fabs(yr[g]));
    for (int g = 0; g < fx.hb.b.cap_graphs; g++) {
        if (fx.hb.b.graph_id[g] < 0) {
            assert_true(y[g] == 0.0);
            continue;
        }
        if (fabs(y[g] - yr[g]) > 2e-5 * scale)
            fail_msg("slot %d: y = %.9g, reference %.9g", g, y[g], yr[g]);
    }
    assert_true(fabs(loss - lr) <= 1e-4 * lr + 1e-6);
    free(theta);
    fixture_close(&fx);
}

static void test_forward_sum_matches_reference(void **state)
{
    (void)state;
    check_forward(PT_READOUT_SUM);
}

static void test_forward_mean_matches_reference(void **state)
{
    (void)state;
    check_forward(PT_READOUT_MEAN);
}

/* Every parameter tensor: up to 12 sampled entries (all of the small ones),
 * the float analytic gradient against central differences (h = 1e-6) of the
 * double reference loss.  Tolerance: the FD value is exact to ~1e-8 relative
 * (h² truncation, 1e-16/h round-off on an O(10) loss).  The float path is
 * ~10 layers forward and as many backward, each a sum of at most K = 6 terms
 * here (H=6, F=5, G=4, ≤ 5 neighbours), so ≤ 20·K·ε ≈ 7e-6 relative to the
 * magnitudes summed: |g − fd| ≤ 1e-5·|fd| + 1e-6·max|fd|, the max over all
 * sampled entries (small gradients are sums with cancellation, whose error
 * scales with the largest terms, not with the result).  Measured: ~2% of it. */
static void check_gradients(pt_readout readout)
{
    fixture fx;
    fixture_open(&fx, readout);
    pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0);
    pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
    double *theta = theta_of(&fx.m), y[64];
    pt_rng r;
    pt_rng_init(&r, 3, 0);
    enum { MAXS = 400 };
    size_t idx[MAXS], ns = 0;
    double fd[MAXS];
    for (size_t t = 0; t < fx.m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &fx.m.tensors[t];
        size_t take = tt->numel <= 12 ? tt->numel : 12;
        for (size_t s = 0; s < take; s++) {
            size_t k = tt->numel <= 12 ? s : (size_t)pt_rng_below(&r, tt->numel);
            if (!strcmp(tt->name, "embedding.weight") || !strcmp(tt->name, "atomref.weight")) {
                /* rows of elements present (and row 0, whose gradient must be 0) */
                static const int rows[4] = {0, 1, 6, 8};
                int cols = (int)(tt->numel / PT_SCHNET_ZROWS);
                k = (size_t)rows[s % 4] * cols + (size_t)(s / 4) % cols;
            }
            idx[ns++] = tt->offset + k;
        }
    }
    double mx = 0.0;
    for (size_t s = 0; s < ns; s++) {
        double keep = theta[idx[s]], h = 1e-6;
        theta[idx[s]] = keep + h;
        double lp = reference(&fx.m, theta, &fx.hb.b, y);
        theta[idx[s]] = keep - h;
        double lm = reference(&fx.m, theta, &fx.hb.b, y);
        theta[idx[s]] = keep;
        fd[s] = (lp - lm) / (2 * h);
        mx = fmax(mx, fabs(fd[s]));
    }
    double worst = 0.0;
    for (size_t s = 0; s < ns; s++) {
        double g = fx.grads[idx[s]], tol = 1e-5 * fabs(fd[s]) + 1e-6 * mx;
        worst = fmax(worst, fabs(g - fd[s]) / tol);
        if (fabs(g - fd[s]) > tol) {
            const char *name = "?";
            for (size_t t = 0; t < fx.m.n_tensors; t++)
                if (idx[s] >= fx.m.tensors[t].offset) name = fx.m.tensors[t].name;
            fail_msg("%s: analytic %.9g vs finite difference %.9g (tol %.3g)", name, g, fd[s], tol);
        }
    }
    print_message("%zu entries checked, worst error = %.3f of tolerance\n", ns, worst);
    /* the padding row of the embedding and of atomref receive nothing */
    for (int c = 0; c < fx.m.cfg.hidden; c++) assert_true(fx.grads[c] == 0.0f);
    assert_true(fx.grads[pt_schnet_find_tensor(&fx.m, "atomref.weight")->offset] == 0.0f);
    free(theta);
    fixture_close(&fx);
}

static void test_gradients_sum_readout(void **state)
{
    (void)state;
    check_gradients(PT_READOUT_SUM);
}

static void test_gradients_mean_readout(void **state)
{
    (void)state;
    check_gradients(PT_READOUT_MEAN);
}

/* The same molecules in a batch with more padding everywhere (an empty pack,
 * more node, edge and graph slots, different pack mates) give the same
 * predictions, loss and gradients.  Not bit-identical: the weight gradients
 * sum over all edge rows and a longer K changes OpenBLAS's blocking, so the
 * bound is float round-off, 1e-5 of each tensor's largest gradient. */
static void test_padding_never_contributes(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_MEAN);
    const double *y = pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    double y1[MAXM];
    for (int k = 0; k < n_mols; k++) y1[k] = y[fx.hb.slot_of_mol[k]];
    double loss1 = pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0);
    pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);

    hand_batch big;
    const pt_pack_limits lim = {.max_nodes = 13, .max_edges = 70, .max_graphs = 4};
    const int packs[5] = {2, 0, 2, 3, 0}; /* pack 1 stays empty */
    batch_build(&big, mols, packs, n_mols, 4, lim, cutoff + 1.0f);
    pt_schnet_acts a2;
    assert_int_equal(pt_schnet_acts_init(&a2, &fx.m, big.b.cap_nodes, big.b.cap_edges,
                                         big.b.cap_graphs, NULL), 0);
    assert_int_equal(pt_schnet_batch_check(&fx.m, &a2, &big.b, NULL), 0);
    float *g2 = calloc(fx.m.n_params, sizeof(float));
    y = pt_schnet_forward(&fx.m, &a2, &big.b);
    for (int k = 0; k < n_mols; k++)
        assert_true(fabs(y[big.slot_of_mol[k]] - y1[k]) <= 1e-6 * (1.0 + fabs(y1[k])));
    assert_true(fabs(pt_schnet_loss(&fx.m, &a2, &big.b, 0.0) - loss1) <= 1e-6 * loss1);
    pt_schnet_backward(&fx.m, &a2, &big.b, g2);
    for (size_t t = 0; t < fx.m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &fx.m.tensors[t];
        double mx = 0.0;
        for (size_t k = 0; k < tt->numel; k++) mx = fmax(mx, fabs(fx.grads[tt->offset + k]));
        for (size_t k = 0; k < tt->numel; k++)
            if (fabs(g2[tt->offset + k] - fx.grads[tt->offset + k]) > 1e-5 * mx + 1e-30)
                fail_msg("%s[%zu]: %.9g with more padding, %.9g without", tt->name, k,
                         (double)g2[tt->offset + k], (double)fx.grads[tt->offset + k]);
    }
    free(g2);
    pt_schnet_acts_close(&a2);
    batch_free(&big);
    fixture_close(&fx);
}

/* Backward adds to the gradient buffer (accumulation is the caller's choice),
 * and forward/backward read nothing they did not write in this step: an arena
 * poisoned with NaN gives the same result as a fresh one. */
static void test_backward_accumulates_and_arena_needs_no_zeroing(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0);
    pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
    float *once = malloc(fx.m.n_params * sizeof(float));
    memcpy(once, fx.grads, fx.m.n_params * sizeof(float));

    memset(fx.a.memory, 0xff, fx.a.bytes); /* all NaN */
    pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0);
    pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
    /* sgemm adds its product into C block by block, so g + g is not rounded
     * like 2g: the bound is round-off, relative to each tensor's largest entry */
    for (size_t t = 0; t < fx.m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &fx.m.tensors[t];
        double mx = 0.0;
        for (size_t k = 0; k < tt->numel; k++) mx = fmax(mx, fabs(once[tt->offset + k]));
        for (size_t k = tt->offset; k < tt->offset + tt->numel; k++)
            if (!(fabs(fx.grads[k] - 2.0 * once[k]) <= 1e-5 * mx))
                fail_msg("%s: %g after two steps, %g after one", tt->name, (double)fx.grads[k],
                         (double)once[k]);
    }
    free(once);
    fixture_close(&fx);
}

/* n_norm: the loss is the sum of squared errors over n_norm, and so is dL/dy */
static void test_loss_normalisation(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    const double *y = pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
    double sse = 0.0;
    for (int g = 0; g < fx.hb.b.cap_graphs; g++)
        if (fx.hb.b.graph_id[g] >= 0) sse += pow(y[g] - fx.hb.b.target[g], 2);
    assert_true(fabs(pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0) - sse / n_mols) < 1e-9 * sse);
    assert_true(fabs(pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 20.0) - sse / 20.0) < 1e-9 * sse);
    int g0 = fx.hb.slot_of_mol[0];
    assert_true(fabs(fx.a.dy[g0] - 2.0 * (y[g0] - mols[0].target) / 20.0) < 1e-12);
    for (int g = 0; g < fx.hb.b.cap_graphs; g++)
        if (fx.hb.b.graph_id[g] < 0) assert_true(fx.a.dy[g] == 0.0);
    fixture_close(&fx);
}

static void test_training_step_does_not_allocate(void **state)
{
    (void)state;
    fixture fx;
    fixture_open(&fx, PT_READOUT_MEAN);
    /* fp32 and bf16 (whose products keep one grow-only scratch per thread) */
    for (int prec = PT_PRECISION_FP32; prec <= PT_PRECISION_BF16; prec++) {
        fx.a.precision = (pt_precision)prec;
        /* warm-up: OpenBLAS and the bf16 kernel set up their buffers on first use */
        pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
        pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0);
        pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
        n_allocs = 0;
        counting = 1;
        for (int rep = 0; rep < 3; rep++) {
            pt_schnet_forward(&fx.m, &fx.a, &fx.hb.b);
            pt_schnet_loss(&fx.m, &fx.a, &fx.hb.b, 0.0);
            pt_schnet_backward(&fx.m, &fx.a, &fx.hb.b, fx.grads);
        }
        counting = 0;
        if (n_allocs != 0) fail_msg("precision %d: %ld allocations in 3 steps", prec, n_allocs);
    }
    /* the counter itself works */
    counting = 1;
    free(malloc(16));
    counting = 0;
    assert_int_equal(n_allocs, 2);
    fixture_close(&fx);
}

static void test_init_weights_like_pyg(void **state)
{
    (void)state;
    pt_schnet m1, m2;
    pt_schnet_config c = pt_schnet_config_default();
    assert_int_equal(pt_schnet_init(&m1, &c, NULL), 0);
    assert_int_equal(pt_schnet_init(&m2, &c, NULL), 0);
    pt_schnet_init_weights(&m1, 7);
    pt_schnet_init_weights(&m2, 7);
    assert_memory_equal(m1.params_memory, m2.params_memory, m1.n_params * sizeof(float));
    assert_int_equal(m1.n_tensors, 1 + 9 * 4 + 4);
    /* H=F=100, G=25, T=4: 100·100 + 4·(2500+100+10000+100+10000+10000+100+10000+100) + 5000+50+50+1 */
    assert_int_equal(m1.n_params, 10000 + 4 * 42900 + 5101);
    assert_int_equal(pt_schnet_param_count(&c), m1.n_params);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init(&a, &m1, 50, 400, 4, NULL), 0);
    assert_int_equal(pt_schnet_acts_bytes(&c, 50, 400, 4), a.bytes);
    /* the E×F activations dominate: 2T + 2 buffers of 400×100 floats (s1
     * and W a block, dP and ds1), and no σ1 (3T + 2 would be more than the
     * whole energy arena) */
    assert_true(a.bytes >= (size_t)(2 * 4 + 2) * 400 * 100 * 4);
    assert_true(a.bytes < (size_t)(3 * 4 + 2) * 400 * 100 * 4);
    pt_schnet_acts_close(&a);
    for (size_t t = 0; t < m1.n_tensors; t++) {
        const pt_schnet_tensor *tt = &m1.tensors[t];
        const float *v = m1.params_memory + tt->offset;
        double sum = 0, sum2 = 0, mx = 0;
        for (size_t k = 0; k < tt->numel; k++) {
            sum += v[k];
            sum2 += (double)v[k] * v[k];
            mx = fmax(mx, fabs(v[k]));
        }
        if (t == 0) {
            for (int k = 0; k < c.hidden; k++) assert_true(v[k] == 0.0f);
            double var = sum2 / (tt->numel - c.hidden);
            assert_true(fabs(var - 1.0) < 0.05);
            assert_true(fabs(sum / (tt->numel - c.hidden)) < 0.05);
        } else if (tt->ndim == 1) {
            assert_true(mx == 0.0);
        } else {
            double bound = sqrt(6.0 / (double)(tt->shape[0] + tt->shape[1]));
            assert_true(mx <= bound);
            if (tt->numel >= 1000) {
                assert_true(mx > 0.95 * bound);
                assert_true(fabs(sum / tt->numel) < 0.05 * bound);
                assert_true(fabs(sum2 / tt->numel - bound * bound / 3.0) < 0.1 * bound * bound / 3.0);
            }
        }
    }
    assert_string_equal(m1.tensors[5].name, "interactions.0.conv.lin1.weight");
    assert_int_equal(m1.tensors[5].shape[0], 100);
    assert_string_equal(m1.tensors[m1.n_tensors - 3].name, "lin1.bias");
    pt_schnet_close(&m1);
    pt_schnet_close(&m2);
}

static void test_config_errors_name_the_field(void **state)
{
    (void)state;
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = 1;
    c.interactions = 17;
    c.gaussians = 1;
    c.cutoff = -1.0f;
    c.filters = 0;
    c.max_neighbors = -1;
    c.readout = (pt_readout)5;
    c.use_atomref = 3;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_schnet m;
    assert_int_equal(pt_schnet_init(&m, &c, &errs), -1);
    assert_int_equal(errs.total, 8);
    assert_string_equal(errs.items[0].field, "hidden");
    assert_string_equal(errs.items[0].message, "must be in 2..4096 (the head is H/2 wide), got 1");
    assert_string_equal(errs.items[1].field, "filters");
    assert_string_equal(errs.items[2].field, "interactions");
    assert_string_equal(errs.items[2].message, "must be in 1..16, got 17");
    assert_string_equal(errs.items[3].field, "gaussians");
    assert_string_equal(errs.items[4].field, "cutoff");
    assert_string_equal(errs.items[4].message, "must be in (0, 100] Å, got -1");
    assert_string_equal(errs.items[5].field, "max_neighbors");
    assert_string_equal(errs.items[6].field, "readout");
    assert_string_equal(errs.items[7].field, "atomref");
    pt_errors_close(&errs);

    pt_schnet_acts a;
    pt_errors_init(&errs, 0);
    c = pt_schnet_config_default();
    assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
    assert_int_equal(pt_schnet_acts_init(&a, &m, 0, 10, 1, &errs), -1);
    assert_string_equal(errs.items[0].message,
                        "capacities must be nodes >= 1, edges >= 0, graphs >= 1 (got 0, 10, 1)");
    pt_errors_close(&errs);
    pt_schnet_close(&m);
}

/* each corruption of a valid batch is reported with what and where */
static void check_batch_error(void (*corrupt)(pt_batch *), const char *field, const char *msg)
{
    fixture fx;
    fixture_open(&fx, PT_READOUT_SUM);
    corrupt(&fx.hb.b);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_true(pt_schnet_batch_check(&fx.m, &fx.a, &fx.hb.b, &errs) > 0);
    assert_string_equal(errs.items[0].field, field);
    assert_string_equal(errs.items[0].message, msg);
    pt_errors_close(&errs);
    fixture_close(&fx);
}

static void bad_cutoff(pt_batch *b) { b->cutoff = 2.5f; }
static void bad_z(pt_batch *b) { b->z[1] = 120; }
static void bad_graph(pt_batch *b) { b->node_graph[2] = 9; }
static void graph_is_padding(pt_batch *b) { b->node_graph[9] = 5; }
static void real_z0(pt_batch *b) { b->z[0] = 0; }
static void bad_csr_end(pt_batch *b) { b->dst_offset[b->cap_nodes] = 7; }
static void bad_dst(pt_batch *b) { b->edge_dst[0] = 1; }
static void bad_src(pt_batch *b) { b->edge_src[3] = -2; }
static void bad_dist(pt_batch *b) { b->edge_dist[4] = NAN; }
static void bad_shape(pt_batch *b) { b->cap_edges = 1000; }

static void test_batch_check_reports_each_problem(void **state)
{
    (void)state;
    check_batch_error(bad_cutoff, "cutoff",
                      "batch padding edges sit at 2.5 Å, inside the model's cutoff 3 Å, so they "
                      "would carry messages");
    check_batch_error(bad_z, "z", "node 1 has atomic number 120, above 99");
    check_batch_error(bad_graph, "node_graph", "node 2 points to graph slot 9 of 9");
    check_batch_error(graph_is_padding, "node_graph",
                      "node 9 belongs to graph slot 5, which is padding");
    check_batch_error(real_z0, "z", "node 0 of graph slot 0 has z = 0 (the padding element)");
    check_batch_error(bad_csr_end, "dst_offset", "CSR must start at 0 and end at 120 edges (got 0 .. 7)");
    check_batch_error(bad_dst, "edge_dst", "edge 0 has receiver 1 but lies in CSR row 0");
    check_batch_error(bad_src, "edge_src", "edge 3 has sender -2 outside 0..20");
    check_batch_error(bad_dist, "edge_dist", "edge 4 has distance nan");
    check_batch_error(bad_shape, "batch",
                      "shape (21 nodes, 1000 edges, 9 graphs) does not fit the activation arena "
                      "(21, 120, 9)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_sum_matches_reference),
        cmocka_unit_test(test_forward_mean_matches_reference),
        cmocka_unit_test(test_gradients_sum_readout),
        cmocka_unit_test(test_gradients_mean_readout),
        cmocka_unit_test(test_padding_never_contributes),
        cmocka_unit_test(test_backward_accumulates_and_arena_needs_no_zeroing),
        cmocka_unit_test(test_loss_normalisation),
        cmocka_unit_test(test_training_step_does_not_allocate),
        cmocka_unit_test(test_init_weights_like_pyg),
        cmocka_unit_test(test_config_errors_name_the_field),
        cmocka_unit_test(test_batch_check_reports_each_problem),
    };
    return cmocka_run_group_tests_name("schnet", tests, NULL, NULL);
}
