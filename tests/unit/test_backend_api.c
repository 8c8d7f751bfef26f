/* test_backend_api.c — the emulated IPU backend's reports and errors: phase
 * times and statistics after real steps (with reset), every rejection at open
 * (settings, kind, batch size, overflow, the memory plan's message) and at
 * compute (oversized step, unknown pack, pack over max_graphs, a fill that
 * fails on a replica — after which the engine goes on working); the memory
 * plan's evaluator against the one the loop allocates; and no heap growth
 * across steps. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <malloc.h>

#include "engine/model/bf16.h"
#include "engine/train/train_internal.h"
#include "tests/unit/backend_fixture.h"

/* ---- reports and errors ------------------------------------------------------ */

static void test_phases_and_stats(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 2, 2, 2);
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(F.model.n_params * sizeof(float));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    uint32_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    pt_step_stats st;
    pt_bf16_set_threads(3);   /* the evaluation's setting, as the loop leaves it */
    for (int k = 0; k < 3; k++)
        assert_int_equal(eng.compute(eng.self, &F.packs, ids, 8, NULL, g, &st, &errs), 0);
    assert_int_equal(pt_bf16_get_threads(), 3);   /* steps restore it */
    pt_bf16_set_threads(1);
    pt_phase_times ph;
    assert_non_null(eng.phases);
    eng.phases(eng.self, &ph, 1);
    assert_int_equal(ph.steps, 3);
    assert_true(ph.seconds[PT_PHASE_FORWARD] > 0.0);
    assert_true(ph.seconds[PT_PHASE_BACKWARD] > 0.0);
    for (int p = 0; p < PT_PHASE_COUNT; p++) assert_true(ph.seconds[p] >= 0.0);
    assert_true(ph.seconds[PT_PHASE_OPTIMIZER] == 0.0);
    eng.phases(eng.self, &ph, 0);
    assert_int_equal(ph.steps, 0);                       /* the reset worked */
    pt_backend_stats bs;
    assert_int_equal(pt_backend_stats_get(&eng, &bs), 0);
    assert_int_equal(bs.steps, 3);
    assert_int_equal(bs.jobs, 12);
    assert_int_equal(bs.blas_threads, 1);
    /* where the two replicas' time went: each one's compute, at most the
     * slowest's, in wall clock and thread CPU */
    assert_true(bs.busy_seconds > 0.0 && bs.busy_cpu_seconds > 0.0);
    assert_true(2.0 * bs.busy_max_seconds >= bs.busy_seconds);
    assert_true(bs.busy_max_seconds <= bs.busy_seconds);
    assert_true(2.0 * bs.busy_cpu_max_seconds >= bs.busy_cpu_seconds);
    assert_true(bs.busy_cpu_max_seconds <= bs.busy_cpu_seconds);
    assert_true(bs.start_lag_seconds >= 0.0);
    /* the host's serial work around the replicas (three steps: two gaps,
     * no update called), and who filled the batches: every job computed
     * was filled exactly once, by the loader's thread, its consumer or a
     * waiting replica (more fills than jobs only for prefetched ones) */
    assert_true(bs.host_prep_seconds > 0.0 && bs.host_join_seconds >= 0.0);
    assert_true(bs.host_post_seconds > 0.0 && bs.host_gap_seconds > 0.0);
    assert_true(bs.update_seconds == 0.0);
    assert_true(bs.fills_thread >= 0 && bs.fills_consumer >= 0 && bs.fills_helper >= 0);
    assert_true(bs.fills_thread + bs.fills_consumer + bs.fills_helper >= bs.jobs);
    eng.close(eng.self);

    /* not a backend engine */
    pt_grad_engine other = {0};
    assert_int_equal(pt_backend_stats_get(&other, &bs), -1);
    other.kind = "local";
    assert_int_equal(pt_backend_stats_get(&other, &bs), -1);
    pt_errors_close(&errs);
    free(g);
}

/* The memory plan's evaluator is the one the loop allocates: its arena
 * (forward-only for an energy job) is the plan's eval less one batch. */
static void test_plan_counts_the_evaluator(void **state)
{
    (void)state;
    for (int b = 1; b <= 8; b *= 2) {
        pt_job_config cfg;
        pt_train_data d = data_for(&cfg, 1, 1, b);
        pt_errors errs;
        pt_errors_init(&errs, 0);
        pt_evaluator ev;
        assert_int_equal(pt_evaluator_init(&ev, &d, d.limits, &errs), 0);
        pt_memplan plan;
        assert_int_equal(pt_memplan_compute(&plan, &F.model.cfg, d.limits, &d.layout,
                                            &cfg.backend, PT_SCHNET_ENERGY, &errs), 0);
        assert_int_equal(ev.batch.n_packs, b);
        assert_int_equal(plan.eval, ev.acts.bytes + pt_memplan_batch_bytes(d.limits, b));
        /* forward-only: one set of s1 and W rows for every block, against
         * the training arena's s1 and W a block and the backward's rows
         * (2T + 2 of them; σ1 is not kept in an energy arena) */
        assert_true(2 * ev.acts.bytes < plan.activations);
        pt_evaluator_close(&ev);
        pt_errors_close(&errs);
    }
}

/* F.cfg's layout with micro-batches of b packs. */
static pt_train_layout layout_of(const pt_job_config *cfg, int b)
{
    pt_train_layout l;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_train_layout_resolve(&l, cfg, 1, 0, 0, &errs), 0);
    pt_errors_close(&errs);
    l.micro_packs = b;
    return l;
}

static void expect_open_error(pt_job_config *cfg, pt_train_layout l, const char *field,
                              const char *message)
{
    pt_train_data d = {.cfg = cfg, .ds = &F.ds, .graphs = &F.graphs, .target_key = F.target_key,
                       .model = &F.model, .limits = F.packer.limits, .layout = l};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_grad_engine eng;
    assert_int_equal(pt_backend_open(&eng, &d, &errs), -1);
    assert_true(errs.kept >= 1);
    assert_string_equal(errs.items[0].field, field);
    if (message && !strstr(errs.items[0].message, message))
        fail_msg("expected \"%s\" in \"%s\"", message, errs.items[0].message);
    assert_null(eng.self);
    pt_errors_close(&errs);
}

/* The engine checks its layout and settings in its own terms: the values a
 * validated configuration and the plan cannot give (the validator's
 * messages name the configuration's keys; test_config checks them). */
static void test_open_errors(void **state)
{
    (void)state;
    pt_job_config cfg = F.cfg;
    pt_train_layout l = layout_of(&cfg, 2);
    l.replicas = 0;
    expect_open_error(&cfg, l, "backend", "got ranks 1, replicas 0, accumulation 1");
    l = layout_of(&cfg, 2);
    l.accumulation = -1;
    expect_open_error(&cfg, l, "backend", "accumulation -1,");
    l = layout_of(&cfg, 2);
    l.ranks = 2;
    expect_open_error(&cfg, l, "backend", "got ranks 2,");
    l = layout_of(&cfg, 0);
    expect_open_error(&cfg, l, "backend", "micro-batch 0,");
    l = layout_of(&cfg, 2);
    l.threads = 0;
    expect_open_error(&cfg, l, "backend", "threads 0,");
    cfg.backend.device_iterations = 0;
    expect_open_error(&cfg, layout_of(&cfg, 2), "backend", "device iterations 0,");
    cfg = F.cfg;
    cfg.backend.prefetch_depth = 0;
    expect_open_error(&cfg, layout_of(&cfg, 2), "backend", "prefetch 0");
    cfg = F.cfg;
    cfg.backend.replication_factor = 1024;
    cfg.backend.gradient_accumulation = 65536;
    expect_open_error(&cfg, layout_of(&cfg, 65536), "backend",
                      "a layout of 4398046511104 packs per step (with 67111936 batch buffers) is "
                      "too large for one process");
    /* the memory plan: 1 MB cannot hold this model and batch */
    cfg = F.cfg;
    cfg.backend.device_memory_mb = 1;
    expect_open_error(&cfg, layout_of(&cfg, 64), "backend.device_memory_mb", NULL);
}

static void test_memory_rejection_message(void **state)
{
    (void)state;
    pt_job_config cfg = F.cfg;
    cfg.backend.device_memory_mb = 10;
    pt_train_data d = {.cfg = &cfg, .ds = &F.ds, .graphs = &F.graphs, .target_key = F.target_key,
                       .model = &F.model, .limits = F.packer.limits, .layout = layout_of(&cfg, 64)};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_grad_engine eng;
    assert_int_equal(pt_backend_open(&eng, &d, &errs), -1);
    assert_int_equal(errs.kept, 2);
    assert_non_null(strstr(errs.items[0].message, "MB more than the 10 MB of device memory; "
                                                  "lower batching.model_batch_size from 64 to "));
    assert_non_null(strstr(errs.items[1].message, "per replica: parameters "));
    pt_errors_close(&errs);
}

static void test_compute_errors(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 2, 1, 2);
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(F.model.n_params * sizeof(float));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_step_stats st;
    uint32_t ids[5] = {0, 1, 2, 3, 4};
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 5, NULL, g, &st, &errs), -1);
    assert_string_equal(errs.items[0].message, "a step of 5 packs, above R x A x b = 4");
    uint32_t bad[2] = {0, 100000};
    assert_int_equal(eng.compute(eng.self, &F.packs, bad, 2, NULL, g, &st, &errs), -1);
    char want[128];
    snprintf(want, sizeof want, "pack 100000 asked for, the epoch has %u packs", F.packs.n_packs);
    assert_string_equal(errs.items[1].message, want);

    /* a pack with more graphs than the limits allow */
    uint32_t offs[2] = {0, 4}, graphs[4] = {0, 1, 2, 3};
    pt_packs big = {F.packer.limits, 1, offs, graphs};
    uint32_t zero = 0;
    assert_int_equal(eng.compute(eng.self, &big, &zero, 1, NULL, g, &st, &errs), -1);
    assert_string_equal(errs.items[2].message, "pack 0 holds 4 graphs, above max_graphs 3");

    /* a pack the batch cannot hold: the fill fails on a replica, the step
     * reports it, and the engine goes on working */
    uint32_t heavy[3];
    uint32_t k = 0;
    for (uint32_t s = 0; s < F.ds.n_structs && k < 3; s++)
        if (F.natoms[s] * 3 > (uint32_t)F.packer.limits.max_nodes) heavy[k++] = s;
    assert_int_equal(k, 3);
    uint32_t hoffs[2] = {0, 3};
    pt_packs over = {F.packer.limits, 1, hoffs, heavy};
    size_t before = errs.kept;
    assert_int_equal(eng.compute(eng.self, &over, &zero, 1, NULL, g, &st, &errs), -1);
    assert_true(errs.kept > before);
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 4, NULL, g, &st, &errs), 0);
    assert_true(st.graphs > 0);
    eng.close(eng.self);
    pt_errors_close(&errs);
    free(g);
}

/* No allocation in a step: after warm-up, the heap in use is the same
 * before and after many steps, whatever the replica and loader threads do
 * (main() puts every thread on the main arena, the one mallinfo2 reports).
 * Under ASan mallinfo2 reports nothing and the comparison holds trivially;
 * the release build is the one that checks. */
static void test_no_allocation_per_step(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 2, 2, 2);
    cfg.backend.device_iterations = 2;
    cfg.backend.prefetch_depth = 2;
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(F.model.n_params * sizeof(float));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const uint32_t G = 8;
    uint32_t ids[8];
    pt_step_stats st;
    size_t before = 0;
    for (uint32_t step = 0; (step + 1) * G <= F.packs.n_packs; step++) {
        if (step == 2) before = mallinfo2().uordblks;
        for (uint32_t i = 0; i < G; i++) ids[i] = step * G + i;
        assert_int_equal(eng.compute(eng.self, &F.packs, ids, G, NULL, g, &st, &errs), 0);
    }
    assert_int_equal(mallinfo2().uordblks, before);
    pt_backend_stats bs;
    pt_backend_stats_get(&eng, &bs);
    assert_true(bs.steps >= 10);
    eng.close(eng.self);
    pt_errors_close(&errs);
    free(g);
}

int main(void)
{
    mallopt(M_ARENA_MAX, 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phases_and_stats),
        cmocka_unit_test(test_plan_counts_the_evaluator),
        cmocka_unit_test(test_no_allocation_per_step),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_memory_rejection_message),
        cmocka_unit_test(test_compute_errors),
    };
    return cmocka_run_group_tests_name("backend_api", tests, setup, teardown);
}
