/* test_schnet_batch_rows.c — the model reads the filter-row table its batch's
 * fill made (engine/pack/batch.h; schnet.c, pt_schnet_prepare_edges) instead
 * of building its own:
 *   - an energy training step (forward, loss, backward; fp32 and bf16) and
 *     a force training step (energy+forces, periodic EMT cells) give the
 *     same bits with the batch's table as with the arena's own, built from
 *     the same edges; the batch's is really the one read (the pointers);
 *   - a model whose cutoff is not the batch's builds its own (fewer rows
 *     at a smaller cutoff), as does a static-shape arena (one row per edge
 *     slot) and a batch whose table was not made (n_rows = -1);
 *   - the arena's own table is used again after a batch with a table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "tests/unit/real_batch_fixture.h"

typedef struct run_out {
    double loss[2];
    double *y, *force;
    float *grads;
    int32_t n_rows;
    int used_batch;   /* 1: the arena's row pointers were the batch's */
} run_out;

/* Two training steps on d's batch (gradients accumulated), energy or
 * energy+forces, in `precision`; rows: 0 withholds the batch's table (as a
 * batch without one), 1 leaves it. */
static void run(data *d, pt_schnet_mode mode, pt_precision precision, int rows, run_out *o)
{
    pt_batch *b = &d->b;
    const int32_t kept = b->n_rows;
    if (!rows) b->n_rows = -1;
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init_mode(&a, &d->m, b->cap_nodes, b->cap_edges,
                                              b->cap_graphs, mode, NULL),
                     0);
    a.precision = precision;
    const pt_schnet_loss_weights w = {1.0, 100.0, 1000.0, 0};
    o->grads = calloc(d->m.n_params, sizeof(float));
    o->y = malloc((size_t)b->cap_graphs * sizeof(double));
    o->force = calloc((size_t)b->cap_nodes * 3, sizeof(double));
    assert_true(o->grads && o->y && o->force);
    for (int s = 0; s < 2; s++) {
        const double *y = pt_schnet_forward(&d->m, &a, b);
        if (mode == PT_SCHNET_FORCES_TRAIN) {
            pt_schnet_forces(&d->m, &a, b);
            o->loss[s] = pt_schnet_loss_forces(&d->m, &a, b, &w, NULL, NULL);
            pt_schnet_backward_forces(&d->m, &a, b, o->grads);
        } else {
            o->loss[s] = pt_schnet_loss(&d->m, &a, b, 0.0);
            pt_schnet_backward(&d->m, &a, b, o->grads);
        }
        if (s) continue;
        memcpy(o->y, y, (size_t)b->cap_graphs * sizeof(double));
        if (mode == PT_SCHNET_FORCES_TRAIN)
            memcpy(o->force, a.force, (size_t)b->cap_nodes * 3 * sizeof(double));
    }
    o->n_rows = a.n_rows;
    o->used_batch = a.row == b->edge_row && a.first == b->edge_first &&
                    a.row_last == b->row_last && a.row_dist == b->row_dist;
    if (!o->used_batch) {
        assert_ptr_equal(a.row, a.own_row);
        assert_ptr_equal(a.first, a.own_first);
        assert_ptr_equal(a.row_last, a.own_row_last);
        assert_ptr_equal(a.row_dist, a.own_row_dist);
    }
    pt_schnet_acts_close(&a);
    b->n_rows = kept;
}

static void run_free(run_out *o)
{
    free(o->grads), free(o->y), free(o->force);
}

static void check_same(data *d, pt_schnet_mode mode, pt_precision precision)
{
    run_out own, batch;
    run(d, mode, precision, 0, &own);
    run(d, mode, precision, 1, &batch);
    assert_int_equal(own.used_batch, 0);
    assert_int_equal(batch.used_batch, 1);
    assert_true(d->b.n_rows > 0);
    assert_int_equal(own.n_rows, d->b.n_rows);
    assert_int_equal(batch.n_rows, d->b.n_rows);
    assert_memory_equal(own.loss, batch.loss, sizeof own.loss);
    assert_memory_equal(own.y, batch.y, (size_t)d->b.cap_graphs * sizeof(double));
    assert_memory_equal(own.force, batch.force, (size_t)d->b.cap_nodes * 3 * sizeof(double));
    assert_memory_equal(own.grads, batch.grads, d->m.n_params * sizeof(float));
    run_free(&own);
    run_free(&batch);
}

/* check_same on a batch of `file`'s first 8 LPFHP packs */
static void check_file(const char *file, const char *target, pt_schnet_mode mode,
                       pt_precision precision)
{
    data d;
    data_open(&d, file, target);
    check_same(&d, mode, precision);
    data_close(&d);
}

static void test_energy_step_same_bits(void **state)
{
    (void)state;
    const char *qm9 = "tests/data/backend_qm9_240.extxyz.gz";
    check_file(qm9, "energy_U0", PT_SCHNET_ENERGY, PT_PRECISION_FP32);
    check_file(qm9, "energy_U0", PT_SCHNET_ENERGY, PT_PRECISION_BF16);
    check_file("tests/data/ingest_water_slice.extxyz.gz", "energy", PT_SCHNET_ENERGY,
               PT_PRECISION_FP32);
}

static void test_force_step_same_bits(void **state)
{
    (void)state;
    check_file("tests/data/emt_train_240.extxyz.gz", "energy", PT_SCHNET_FORCES_TRAIN,
               PT_PRECISION_FP32);
}

/* A model at 5 Å on a batch filled at 6 Å: the batch's table keeps edges
 * up to 6 Å, so reading it would be wrong; the model builds its own, with
 * fewer rows.  A static-shape arena takes one row per edge slot. */
static void test_own_table_when_batch_does_not_fit(void **state)
{
    (void)state;
    data d;
    data_open(&d, "tests/data/backend_qm9_240.extxyz.gz", "energy_U0");
    const pt_batch *b = &d.b;
    assert_true(b->n_rows > 0);
    pt_schnet_config mc = d.m.cfg;
    mc.cutoff = 5.0f;
    pt_schnet m5;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_init(&m5, &mc, &errs), 0);
    pt_schnet_init_weights(&m5, 5);
    pt_schnet_acts a;
    assert_int_equal(pt_schnet_acts_init(&a, &m5, b->cap_nodes, b->cap_edges, b->cap_graphs, NULL),
                     0);
    pt_schnet_forward(&m5, &a, b);
    assert_ptr_equal(a.row, a.own_row);
    assert_ptr_equal(a.row_dist, a.own_row_dist);
    assert_true(a.n_rows > 0 && a.n_rows < b->n_rows);
    for (int32_t u = 0; u < a.n_rows; u++) assert_true(a.row_dist[u] < 5.0f);
    /* the same arena on a model at the batch's cutoff reads the batch's,
     * and a static-shape arena goes back to its own, an identity */
    pt_schnet_forward(&d.m, &a, b);
    assert_ptr_equal(a.row, b->edge_row);
    assert_int_equal(a.n_rows, b->n_rows);
    a.static_shapes = 1;
    pt_schnet_forward(&d.m, &a, b);
    assert_ptr_equal(a.row, a.own_row);
    assert_int_equal(a.n_rows, b->cap_edges);
    for (int32_t k = 0; k < b->cap_edges; k++) assert_int_equal(a.row[k], k);
    pt_schnet_acts_close(&a);
    pt_schnet_close(&m5);
    pt_errors_close(&errs);
    data_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_energy_step_same_bits),
        cmocka_unit_test(test_force_step_same_bits),
        cmocka_unit_test(test_own_table_when_batch_does_not_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
