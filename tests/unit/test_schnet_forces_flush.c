/* test_schnet_forces_flush.c — the force passes' flush scope
 * (engine/core/fpflush.h: FTZ and DAZ around the two products that meet
 * subnormals, schnet_forces.c):
 *   - the scope flushes a subnormal result and reads a subnormal operand as
 *     zero, only when asked, and restores the caller's MXCSR;
 *   - a whole force training step (forward, forces and stress, the loss on
 *     energies, forces and stress, the second backward; gradients
 *     accumulated over two steps so that chains start from 0 and from
 *     non-zero gradients) gives the same bits with the scope as with IEEE
 *     subnormals (pt_schnet_acts.ieee_subnormals), on real batches of 8
 *     LPFHP packs: periodic EMT cells (checked to really produce subnormal
 *     ė = e' λ, so the scope is exercised) and water clusters;
 *   - so does an energy training step (the filter backward's dA1 += ds1ᵀ e
 *     in the scope, schnet_filter.c; two steps, gradients accumulated) on
 *     water clusters and QM9 molecules, whose bases e are checked to hold
 *     entries below 2^-120 (the basis' floor, e^-87 ≈ 2^-125.5, over a
 *     row's Gaussians far from its distance), whose products with ds1 and
 *     the sums of such products are subnormal. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/core/fpflush.h"
#include "engine/model/schnet.h"
#include "tests/unit/real_batch_fixture.h"

static void test_scope(void **state)
{
    (void)state;
#if defined(__x86_64__) || defined(__i386__)
    volatile float tiny = 1e-20f, sub = 1e-40f, one = 1.0f;
    const unsigned ctl = ~0x3fu;   /* control bits: not the sticky exception flags */
    const unsigned before = _mm_getcsr() & ctl;
    assert_true(tiny * tiny != 0.0f);   /* IEEE: a subnormal result */
    assert_true(sub * one != 0.0f);     /* and a subnormal operand */
    unsigned fp = pt_flush_begin(1);
    assert_true(tiny * tiny == 0.0f);
    assert_true(sub * one == 0.0f);
    pt_flush_end(fp);
    assert_int_equal(_mm_getcsr() & ctl, before);
    assert_true(tiny * tiny != 0.0f);
    fp = pt_flush_begin(0);             /* not asked: IEEE */
    assert_true(tiny * tiny != 0.0f);
    assert_true(sub * one != 0.0f);
    pt_flush_end(fp);
    assert_int_equal(_mm_getcsr() & ctl, before);
#else
    pt_flush_end(pt_flush_begin(1));
#endif
}

typedef struct step_out {
    double loss[2];
    double *y, *force, *stress;
    float *grads;
    size_t subnormal_edot;   /* subnormal entries of ė after the first step */
} step_out;

static size_t count_subnormal(const float *x, size_t n)
{
    size_t c = 0;
    for (size_t k = 0; k < n; k++) c += x[k] != 0.0f && fabsf(x[k]) < 0x1p-126f;
    return c;
}

/* Two force training steps on d's batch, gradients accumulated. */
static void run(data *d, int ieee, step_out *o)
{
    const pt_batch *b = &d->b;
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, &d->m, b->cap_nodes, b->cap_edges,
                                              b->cap_graphs, PT_SCHNET_FORCES_TRAIN, NULL), 0);
    a.ieee_subnormals = ieee;
    const pt_schnet_loss_weights w = {1.0, 100.0, 1000.0, 0};
    o->grads = calloc(d->m.n_params, sizeof(float));
    o->y = malloc((size_t)b->cap_graphs * sizeof(double));
    o->force = malloc((size_t)b->cap_nodes * 3 * sizeof(double));
    o->stress = malloc((size_t)b->cap_graphs * 9 * sizeof(double));
    assert_true(o->grads && o->y && o->force && o->stress);
    for (int s = 0; s < 2; s++) {
        const double *y = pt_schnet_forward(&d->m, &a, b);
        pt_schnet_forces(&d->m, &a, b);
        o->loss[s] = pt_schnet_loss_forces(&d->m, &a, b, &w, NULL, NULL);
        pt_schnet_backward_forces(&d->m, &a, b, o->grads);
        if (s) continue;
        memcpy(o->y, y, (size_t)b->cap_graphs * sizeof(double));
        memcpy(o->force, a.force, (size_t)b->cap_nodes * 3 * sizeof(double));
        memcpy(o->stress, a.stress, (size_t)b->cap_graphs * 9 * sizeof(double));
        const size_t ug = (size_t)a.n_rows * (size_t)d->m.cfg.gaussians;
        o->subnormal_edot = count_subnormal(a.e + ug, ug);
    }
    pt_schnet_acts_close(&a);
}

static void step_out_free(step_out *o)
{
    free(o->grads), free(o->y), free(o->force), free(o->stress);
}

static void check(const char *file, int needs_subnormals)
{
    data d;
    data_open(&d, file, "energy");
    step_out ieee, fast;
    run(&d, 1, &ieee);
    run(&d, 0, &fast);
    if (needs_subnormals) assert_true(ieee.subnormal_edot > 0);
    assert_memory_equal(ieee.loss, fast.loss, sizeof ieee.loss);
    assert_memory_equal(ieee.y, fast.y, (size_t)d.b.cap_graphs * sizeof(double));
    assert_memory_equal(ieee.force, fast.force, (size_t)d.b.cap_nodes * 3 * sizeof(double));
    assert_memory_equal(ieee.stress, fast.stress, (size_t)d.b.cap_graphs * 9 * sizeof(double));
    assert_memory_equal(ieee.grads, fast.grads, d.m.n_params * sizeof(float));
    step_out_free(&ieee);
    step_out_free(&fast);
    data_close(&d);
}

/* Two energy training steps on d's batch, gradients accumulated; the
 * entries of the Gaussian basis e below 2^-120. */
static size_t run_energy(data *d, int ieee, double loss[2], float *grads)
{
    const pt_batch *b = &d->b;
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init(&a, &d->m, b->cap_nodes, b->cap_edges, b->cap_graphs,
                                         NULL),
                     0);
    a.ieee_subnormals = ieee;
    size_t sub = 0;
    for (int s = 0; s < 2; s++) {
        pt_schnet_forward(&d->m, &a, b);
        loss[s] = pt_schnet_loss(&d->m, &a, b, 0.0);
        pt_schnet_backward(&d->m, &a, b, grads);
        for (size_t k = 0; !s && k < (size_t)a.n_rows * (size_t)d->m.cfg.gaussians; k++)
            sub += a.e[k] < 0x1p-120f;
    }
    pt_schnet_acts_close(&a);
    return sub;
}

static void check_energy(const char *file, const char *target)
{
    data d;
    data_open(&d, file, target);
    double loss_ieee[2], loss_fast[2];
    float *g_ieee = calloc(d.m.n_params, sizeof(float)), *g_fast = calloc(d.m.n_params, sizeof(float));
    assert_true(g_ieee && g_fast);
    assert_true(run_energy(&d, 1, loss_ieee, g_ieee) > 0);
    run_energy(&d, 0, loss_fast, g_fast);
    assert_memory_equal(loss_ieee, loss_fast, sizeof loss_ieee);
    assert_memory_equal(g_ieee, g_fast, d.m.n_params * sizeof(float));
    free(g_ieee), free(g_fast);
    data_close(&d);
}

static void test_energy_water_same_bits(void **state)
{
    (void)state;
    check_energy("tests/data/ingest_water_slice.extxyz.gz", "energy");
}

static void test_energy_qm9_same_bits(void **state)
{
    (void)state;
    check_energy("tests/data/backend_qm9_240.extxyz.gz", "energy_U0");
}

static void test_emt_step_same_bits(void **state)
{
    (void)state;
    check("tests/data/emt_train_240.extxyz.gz", 1);
}

static void test_water_step_same_bits(void **state)
{
    (void)state;
    check("tests/data/ingest_water_slice.extxyz.gz", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scope),
        cmocka_unit_test(test_emt_step_same_bits),
        cmocka_unit_test(test_water_step_same_bits),
        cmocka_unit_test(test_energy_water_same_bits),
        cmocka_unit_test(test_energy_qm9_same_bits),
    };
    return cmocka_run_group_tests_name("schnet_forces_flush", tests, NULL, NULL);
}
