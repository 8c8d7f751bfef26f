/* test_schnet_forces_step.c — the force training step as the trainer uses it
 * (the numbers themselves are checked against finite differences in
 * test_schnet_forces.c):
 *   - with only the energy weight, the force path's gradient is the energy
 *     backward's, and pt_schnet_forces' energy is pt_schnet_forward's; the
 *     energy backward runs on a forces arena too;
 *   - static shapes (a filter row per edge slot, padding included) give the
 *     same step;
 *   - more padding (an empty pack, more slots, other pack mates) changes
 *     nothing but rounding;
 *   - nothing is read that the step did not write (an arena of NaN works),
 *     and gradients accumulate;
 *   - the step does not allocate (fp32 and bf16);
 *   - bf16 products give a step close to fp32's, and not identical;
 *   - the loss denominators: totals passed in scale the loss and gradient;
 *   - the arena's size for each mode is what pt_schnet_acts_bytes_mode says,
 *     and an unknown mode is refused;
 *   - a forces arena's batch check compares edge vectors and distances. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/alloc_count.h"
#include "tests/unit/forces_fixture.h"

static const int packs3[5] = {0, 0, 1, 1, 2};
static const pt_pack_limits lim3 = {.max_nodes = 7, .max_edges = 200, .max_graphs = 3};
static const pt_schnet_loss_weights wts = {1.0, 2000.0, 2e5};

typedef struct step_result {
    double loss, y[FX_MAXS], f[FX_MAXS][FX_MAXA][3], s[FX_MAXS][9];
    float *grads;
} step_result;

/* One force training step of structures packed by pack_of into n_packs
 * packs of `lim`; results by structure. */
static int static_shapes; /* run_step's arenas: 1 = one filter row per edge slot */

static void run_step(pt_schnet *m, const int *pack_of, int n_packs, pt_pack_limits lim,
                     pt_precision prec, int poison, step_result *r)
{
    fx_batch fb;
    fx_batch_build(&fb, pack_of, n_packs, lim, fx_cutoff);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, m, fb.b.cap_nodes, fb.b.cap_edges,
                                              fb.b.cap_graphs, PT_SCHNET_FORCES_TRAIN, NULL), 0);
    a.precision = prec;
    a.static_shapes = static_shapes;
    if (poison) memset(a.memory, 0xff, a.bytes); /* all NaN */
    r->grads = calloc(m->n_params, sizeof(float));
    const double *y = pt_schnet_forward(m, &a, &fb.b);
    pt_schnet_forces(m, &a, &fb.b);
    r->loss = pt_schnet_loss_forces(m, &a, &fb.b, &wts, NULL, NULL);
    pt_schnet_backward_forces(m, &a, &fb.b, r->grads);
    for (int k = 0; k < fx_n_structs; k++) {
        if (pack_of[k] < 0) continue;
        r->y[k] = y[fb.slot[k]];
        for (int i = 0; i < fx_structs[k].n; i++)
            for (int x = 0; x < 3; x++)
                r->f[k][i][x] = a.force[3 * (size_t)(fb.first_node[k] + i) + x];
        for (int q = 0; q < 9; q++) r->s[k][q] = a.stress[9 * (size_t)fb.slot[k] + q];
    }
    pt_schnet_acts_close(&a);
    fx_batch_free(&fb);
}

/* |a − b| ≤ rtol · max|a| per tensor, or over all forces / stresses */
static void assert_steps_close(const pt_schnet *m, const step_result *a, const step_result *b,
                               double rtol)
{
    assert_true(fabs(a->loss - b->loss) <= rtol * a->loss);
    double fm = 0.0, sm = 0.0;
    for (int k = 0; k < fx_n_structs; k++) {
        assert_true(fabs(a->y[k] - b->y[k]) <= rtol * (1.0 + fabs(a->y[k])));
        for (int i = 0; i < fx_structs[k].n; i++)
            for (int x = 0; x < 3; x++) fm = fmax(fm, fabs(a->f[k][i][x]));
        for (int q = 0; q < 9; q++) sm = fmax(sm, fabs(a->s[k][q]));
    }
    for (int k = 0; k < fx_n_structs; k++) {
        for (int i = 0; i < fx_structs[k].n; i++)
            for (int x = 0; x < 3; x++)
                if (fabs(a->f[k][i][x] - b->f[k][i][x]) > rtol * fm)
                    fail_msg("structure %d atom %d: force %.9g vs %.9g", k, i, a->f[k][i][x],
                             b->f[k][i][x]);
        for (int q = 0; q < 9; q++) assert_true(fabs(a->s[k][q] - b->s[k][q]) <= rtol * sm);
    }
    for (size_t t = 0; t < m->n_tensors; t++) {
        const pt_schnet_tensor *tt = &m->tensors[t];
        double mx = 0.0;
        for (size_t k = 0; k < tt->numel; k++) mx = fmax(mx, fabs(a->grads[tt->offset + k]));
        for (size_t k = tt->offset; k < tt->offset + tt->numel; k++)
            if (!(fabs(a->grads[k] - b->grads[k]) <= rtol * mx))
                fail_msg("%s[%zu]: %.9g vs %.9g", tt->name, k - tt->offset, (double)a->grads[k],
                         (double)b->grads[k]);
    }
}

static void test_energy_weight_alone_is_the_energy_backward(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_MEAN);
    fx_batch fb;
    fx_batch_build(&fb, packs3, 3, lim3, fx_cutoff);
    pt_schnet_acts ae, af;
    assert_int_equal(pt_schnet_acts_init(&ae, &m, fb.b.cap_nodes, fb.b.cap_edges,
                                         fb.b.cap_graphs, NULL), 0);
    assert_int_equal(pt_schnet_acts_init_mode(&af, &m, fb.b.cap_nodes, fb.b.cap_edges,
                                              fb.b.cap_graphs, PT_SCHNET_FORCES_TRAIN, NULL), 0);
    float *ge = calloc(m.n_params, sizeof(float)), *gf = calloc(m.n_params, sizeof(float));
    const double *ye = pt_schnet_forward(&m, &ae, &fb.b);
    double le = pt_schnet_loss(&m, &ae, &fb.b, 0.0);
    pt_schnet_backward(&m, &ae, &fb.b, ge);
    const double *yf = pt_schnet_forward(&m, &af, &fb.b);
    pt_schnet_forces(&m, &af, &fb.b);
    pt_schnet_loss_weights w = {1.0, 0.0, 0.0};
    double lf = pt_schnet_loss_forces(&m, &af, &fb.b, &w, NULL, NULL);
    pt_schnet_backward_forces(&m, &af, &fb.b, gf);
    for (int g = 0; g < fb.b.cap_graphs; g++) assert_true(ye[g] == yf[g]);
    assert_true(fabs(le - lf) <= 1e-12 * le);
    /* the energy backward also runs on a forces arena (its row scratch is the
     * forces passes' shared rows): the same gradient, bit for bit */
    float *g2 = calloc(m.n_params, sizeof(float));
    pt_schnet_forward(&m, &af, &fb.b);
    pt_schnet_loss(&m, &af, &fb.b, 0.0);
    pt_schnet_backward(&m, &af, &fb.b, g2);
    assert_memory_equal(ge, g2, m.n_params * sizeof(float));
    free(g2);
    for (size_t t = 0; t < m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &m.tensors[t];
        double mx = 0.0;
        for (size_t k = 0; k < tt->numel; k++) mx = fmax(mx, fabs(ge[tt->offset + k]));
        for (size_t k = tt->offset; k < tt->offset + tt->numel; k++)
            if (fabs(ge[k] - gf[k]) > 1e-5 * mx)
                fail_msg("%s: energy backward %.9g, force path %.9g", tt->name, (double)ge[k],
                         (double)gf[k]);
    }
    free(ge);
    free(gf);
    pt_schnet_acts_close(&ae);
    pt_schnet_acts_close(&af);
    fx_batch_free(&fb);
    pt_schnet_close(&m);
}

/* Energy-only losses of pt_schnet_loss_forces on an energy arena (the
 * trainer's path for a per-atom or weighted energy loss without forces):
 * with w = {1, 0, 0} the seeds are pt_schnet_loss's bit for bit; per atom,
 * each graph's seed is divided by its atom count squared. */
static void test_energy_losses_on_an_energy_arena(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    fx_batch fb;
    fx_batch_build(&fb, packs3, 3, lim3, fx_cutoff);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init(&a, &m, fb.b.cap_nodes, fb.b.cap_edges,
                                         fb.b.cap_graphs, NULL), 0);
    const int B = fb.b.cap_graphs;
    double dy[64], dy_total[64];
    assert_true(B <= 64);
    pt_schnet_forward(&m, &a, &fb.b);
    double l0 = pt_schnet_loss(&m, &a, &fb.b, 0.0);
    memcpy(dy, a.dy, (size_t)B * sizeof(double));
    pt_schnet_loss_weights total = {1.0, 0.0, 0.0, 0};
    double l1 = pt_schnet_loss_forces(&m, &a, &fb.b, &total, NULL, NULL);
    assert_memory_equal(dy, a.dy, (size_t)B * sizeof(double));
    assert_true(fabs(l0 - l1) <= 1e-14 * l0);
    memcpy(dy_total, a.dy, (size_t)B * sizeof(double));
    pt_schnet_loss_weights per_atom = {1.0, 0.0, 0.0, 1};
    pt_schnet_loss_parts p;
    double l2 = pt_schnet_loss_forces(&m, &a, &fb.b, &per_atom, NULL, &p);
    double want = 0.0, n = 0.0;
    for (int g = 0; g < B; g++) {
        if (fb.b.graph_id[g] < 0) {
            assert_true(a.dy[g] == 0.0);
            continue;
        }
        const double na = fb.b.graph_natoms[g], r = (a.y[g] - fb.b.target[g]) / na;
        want += r * r;
        n += 1.0;
        assert_true(fabs(a.dy[g] - dy_total[g] / (na * na)) <= 1e-14 * fabs(dy_total[g]));
    }
    assert_true(fabs(l2 - want / n) <= 1e-12 * l2);
    assert_true(p.energy == l2 && p.forces == 0.0 && p.stress == 0.0);
    pt_schnet_acts_close(&a);
    fx_batch_free(&fb);
    pt_schnet_close(&m);
}

static void test_padding_never_contributes(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    step_result a, b;
    run_step(&m, packs3, 3, lim3, PT_PRECISION_FP32, 0, &a);
    const int packs[5] = {3, 0, 3, 0, 2}; /* pack 1 stays empty */
    const pt_pack_limits lim = {.max_nodes = 11, .max_edges = 320, .max_graphs = 4};
    run_step(&m, packs, 4, lim, PT_PRECISION_FP32, 0, &b);
    assert_steps_close(&m, &a, &b, 1e-5);
    free(a.grads);
    free(b.grads);
    pt_schnet_close(&m);
}

/* backend.static_shapes: every edge slot a filter row, padding included
 * (at the cutoff: C = C' = 0, so no message, force or λ) — the same step. */
static void test_static_shapes_step(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_MEAN);
    step_result a, b;
    run_step(&m, packs3, 3, lim3, PT_PRECISION_FP32, 0, &a);
    static_shapes = 1;
    run_step(&m, packs3, 3, lim3, PT_PRECISION_FP32, 1, &b);
    static_shapes = 0;
    assert_steps_close(&m, &a, &b, 1e-5);
    free(a.grads);
    free(b.grads);
    pt_schnet_close(&m);
}

static void test_arena_needs_no_zeroing(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    step_result a, b;
    run_step(&m, packs3, 3, lim3, PT_PRECISION_FP32, 0, &a);
    run_step(&m, packs3, 3, lim3, PT_PRECISION_FP32, 1, &b);
    assert_steps_close(&m, &a, &b, 0.0);
    free(a.grads);
    free(b.grads);
    pt_schnet_close(&m);
}

static void test_gradients_accumulate(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    fx_batch fb;
    fx_batch_build(&fb, packs3, 3, lim3, fx_cutoff);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, fb.b.cap_nodes, fb.b.cap_edges,
                                              fb.b.cap_graphs, PT_SCHNET_FORCES_TRAIN, NULL), 0);
    float *g = calloc(m.n_params, sizeof(float)), *once = malloc(m.n_params * sizeof(float));
    for (int rep = 0; rep < 2; rep++) {
        pt_schnet_forward(&m, &a, &fb.b);
        pt_schnet_forces(&m, &a, &fb.b);
        pt_schnet_loss_forces(&m, &a, &fb.b, &wts, NULL, NULL);
        pt_schnet_backward_forces(&m, &a, &fb.b, g);
        if (!rep) memcpy(once, g, m.n_params * sizeof(float));
    }
    for (size_t t = 0; t < m.n_tensors; t++) {
        const pt_schnet_tensor *tt = &m.tensors[t];
        double mx = 0.0;
        for (size_t k = 0; k < tt->numel; k++) mx = fmax(mx, fabs(once[tt->offset + k]));
        for (size_t k = tt->offset; k < tt->offset + tt->numel; k++)
            assert_true(fabs(g[k] - 2.0 * once[k]) <= 1e-5 * mx);
    }
    free(g);
    free(once);
    pt_schnet_acts_close(&a);
    fx_batch_free(&fb);
    pt_schnet_close(&m);
}

static void test_step_does_not_allocate(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_MEAN);
    fx_batch fb;
    fx_batch_build(&fb, packs3, 3, lim3, fx_cutoff);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, fb.b.cap_nodes, fb.b.cap_edges,
                                              fb.b.cap_graphs, PT_SCHNET_FORCES_TRAIN, NULL), 0);
    float *g = calloc(m.n_params, sizeof(float));
    for (int prec = PT_PRECISION_FP32; prec <= PT_PRECISION_BF16; prec++) {
        a.precision = (pt_precision)prec;
        for (int rep = 0; rep < 4; rep++) {
            if (rep == 1) { /* after a warm-up step: OpenBLAS and bf16 set up on first use */
                n_allocs = 0;
                counting = 1;
            }
            pt_schnet_forward(&m, &a, &fb.b);
            pt_schnet_forces(&m, &a, &fb.b);
            pt_schnet_loss_forces(&m, &a, &fb.b, &wts, NULL, NULL);
            pt_schnet_backward_forces(&m, &a, &fb.b, g);
        }
        counting = 0;
        if (n_allocs != 0) fail_msg("precision %d: %ld allocations in 3 steps", prec, n_allocs);
    }
    free(g);
    pt_schnet_acts_close(&a);
    fx_batch_free(&fb);
    pt_schnet_close(&m);
}

/* bf16 rounds every product operand to 8 significant bits (schnet_ops.h):
 * on this tiny model the step moves by ~1e-3 relative.  Bounds: 3e-2 of each
 * tensor's (or the forces') largest value; and bf16 must really have run. */
static void test_bf16_step_close_to_fp32(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    step_result a, b;
    run_step(&m, packs3, 3, lim3, PT_PRECISION_FP32, 0, &a);
    run_step(&m, packs3, 3, lim3, PT_PRECISION_BF16, 0, &b);
    assert_steps_close(&m, &a, &b, 3e-2);
    double diff = 0.0;
    for (size_t k = 0; k < m.n_params; k++) diff = fmax(diff, fabs(a.grads[k] - b.grads[k]));
    assert_true(diff > 0.0);
    free(a.grads);
    free(b.grads);
    pt_schnet_close(&m);
}

/* Totals passed as denominators divide the loss and its gradient. */
static void test_loss_denominators(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    fx_batch fb;
    fx_batch_build(&fb, packs3, 3, lim3, fx_cutoff);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, fb.b.cap_nodes, fb.b.cap_edges,
                                              fb.b.cap_graphs, PT_SCHNET_FORCES_TRAIN, NULL), 0);
    pt_schnet_forward(&m, &a, &fb.b);
    pt_schnet_forces(&m, &a, &fb.b);
    pt_schnet_loss_parts p1, p2;
    pt_schnet_loss_forces(&m, &a, &fb.b, &wts, NULL, &p1);
    /* this batch: 5 graphs, 13 atoms with forces, 2 graphs with stress */
    pt_schnet_loss_norm own = {5.0, 39.0, 18.0}, twice = {10.0, 78.0, 36.0};
    double l1 = pt_schnet_loss_forces(&m, &a, &fb.b, &wts, &own, &p2);
    assert_true(fabs(p1.total - l1) <= 1e-12 * l1);
    assert_true(p1.energy == p2.energy && p1.forces == p2.forces && p1.stress == p2.stress);
    float lam[FX_MAXE];
    memcpy(lam, a.lambda, sizeof(float) * (size_t)(a.n_rows < FX_MAXE ? a.n_rows : FX_MAXE));
    double dy0 = a.dy[0];
    double l2 = pt_schnet_loss_forces(&m, &a, &fb.b, &wts, &twice, NULL);
    assert_true(fabs(l2 - 0.5 * l1) <= 1e-12 * l1);
    assert_true(fabs(a.dy[0] - 0.5 * dy0) <= 1e-12 * fabs(dy0));
    for (int u = 0; u < a.n_rows && u < FX_MAXE; u++)
        assert_true(fabs(a.lambda[u] - 0.5f * lam[u]) <= 1e-6f * fabsf(lam[u]));
    /* padding graph slots get no dL/dy */
    for (int g = 0; g < fb.b.cap_graphs; g++)
        if (fb.b.graph_id[g] < 0) assert_true(a.dy[g] == 0.0);
    pt_schnet_acts_close(&a);
    fx_batch_free(&fb);
    pt_schnet_close(&m);
}

static void test_arena_sizes(void **state)
{
    (void)state;
    pt_schnet m;
    pt_schnet_config c = pt_schnet_config_default();
    assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
    size_t prev = 0;
    for (int mode = PT_SCHNET_ENERGY; mode <= PT_SCHNET_FORCES_TRAIN; mode++) {
        pt_schnet_acts a;
        assert_int_equal(pt_schnet_acts_init_mode(&a, &m, 50, 400, 4, (pt_schnet_mode)mode, NULL),
                         0);
        assert_int_equal(a.bytes, pt_schnet_acts_bytes_mode(&c, 50, 400, 4, (pt_schnet_mode)mode));
        assert_true(a.bytes > prev);
        prev = a.bytes;
        pt_schnet_acts_close(&a);
    }
    assert_int_equal(pt_schnet_acts_bytes(&c, 50, 400, 4),
                     pt_schnet_acts_bytes_mode(&c, 50, 400, 4, PT_SCHNET_ENERGY));
    pt_schnet_acts a;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, 50, 400, 4, (pt_schnet_mode)7, &errs), -1);
    assert_string_equal(errs.items[0].field, "mode");
    assert_string_equal(errs.items[0].message, "unknown arena mode 7");
    pt_errors_close(&errs);
    pt_schnet_close(&m);
}

/* A forces arena refuses edge vectors that do not match the distances, and
 * a batch without vectors. */
static void test_batch_check_edge_vectors(void **state)
{
    (void)state;
    fx_make_structs();
    pt_schnet m;
    fx_make_model(&m, PT_READOUT_SUM);
    fx_batch fb;
    fx_batch_build(&fb, packs3, 3, lim3, fx_cutoff);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, &m, fb.b.cap_nodes, fb.b.cap_edges,
                                              fb.b.cap_graphs, PT_SCHNET_FORCES, NULL), 0);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_batch_check(&m, &a, &fb.b, &errs), 0);
    fb.b.edge_vec[3 * 5 + 1] += 0.01f;
    assert_int_equal(pt_schnet_batch_check(&m, &a, &fb.b, &errs), 1);
    assert_string_equal(errs.items[0].field, "edge_vec");
    assert_non_null(strstr(errs.items[0].message, "edge 5: |edge_vec| = "));
    pt_errors_close(&errs);
    pt_errors_init(&errs, 0);
    float *keep = fb.b.edge_vec;
    fb.b.edge_vec = NULL;
    assert_int_equal(pt_schnet_batch_check(&m, &a, &fb.b, &errs), 1);
    assert_string_equal(errs.items[0].message,
                        "a forces arena needs the batch's edge vectors and cell volumes");
    fb.b.edge_vec = keep;
    pt_errors_close(&errs);
    /* an energy arena does not look at them */
    pt_schnet_acts e;
    assert_int_equal(pt_schnet_acts_init(&e, &m, fb.b.cap_nodes, fb.b.cap_edges, fb.b.cap_graphs,
                                         NULL), 0);
    assert_int_equal(pt_schnet_batch_check(&m, &e, &fb.b, NULL), 0);
    pt_schnet_acts_close(&e);
    pt_schnet_acts_close(&a);
    fx_batch_free(&fb);
    pt_schnet_close(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_energy_weight_alone_is_the_energy_backward),
        cmocka_unit_test(test_energy_losses_on_an_energy_arena),
        cmocka_unit_test(test_padding_never_contributes),
        cmocka_unit_test(test_static_shapes_step),
        cmocka_unit_test(test_arena_needs_no_zeroing),
        cmocka_unit_test(test_gradients_accumulate),
        cmocka_unit_test(test_step_does_not_allocate),
        cmocka_unit_test(test_bf16_step_close_to_fp32),
        cmocka_unit_test(test_loss_denominators),
        cmocka_unit_test(test_arena_sizes),
        cmocka_unit_test(test_batch_check_edge_vectors),
    };
    return cmocka_run_group_tests_name("schnet_forces_step", tests, NULL, NULL);
}
