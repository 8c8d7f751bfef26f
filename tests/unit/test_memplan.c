/* test_memplan.c — the per-replica memory plan: its parameter and activation
 * byte counts equal what pt_schnet_init and pt_schnet_acts_init allocate, for
 * many model and batch shapes; the batch, gradient, optimizer and I/O terms
 * follow the buffers the backend keeps; a plan over budget is rejected with
 * a message giving the need, the excess, the largest batch that fits (which
 * is checked to fit, one more not) and the breakdown; invalid inputs are
 * reported with their field. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "engine/train/config.h"
#include "engine/backend/memplan.h"
#include "engine/model/schnet.h"


/* pt_memplan_for_job with the layout the plan gives cfg. */
static int plan_for(pt_memplan *plan, const pt_job_config *cfg, pt_pack_limits L, pt_errors *errs)
{
    pt_train_layout l;
    if (pt_train_layout_resolve(&l, cfg, 1, errs)) return -1;
    return pt_memplan_for_job(plan, cfg, &l, L, errs);
}

static pt_schnet_config model_of(int H, int F, int T, int G, int atomref)
{
    pt_schnet_config c = pt_schnet_config_default();
    c.hidden = H;
    c.filters = F;
    c.interactions = T;
    c.gaussians = G;
    c.use_atomref = atomref;
    return c;
}

static const int shapes[][5] = {
    /* H, F, T, G, atomref */
    {100, 100, 4, 25, 0}, {100, 100, 4, 25, 1}, {128, 128, 6, 50, 0}, {7, 3, 1, 2, 1},
    {64, 32, 16, 10, 0},  {2, 1, 2, 1024, 1},
};

static void test_param_count_matches_model(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int *s = shapes[i];
        pt_schnet_config c = model_of(s[0], s[1], s[2], s[3], s[4]);
        pt_schnet m;
        assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
        assert_int_equal(pt_memplan_param_count(&c), m.n_params);
        pt_schnet_close(&m);
    }
}

static void test_acts_bytes_match_arena(void **state)
{
    (void)state;
    static const int caps[][3] = {{1, 0, 1}, {40, 640, 16}, {37, 1001, 3}, {640, 10240, 32}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int *s = shapes[i];
        pt_schnet_config c = model_of(s[0], s[1], s[2], s[3], s[4]);
        pt_schnet m;
        assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
        for (size_t k = 0; k < sizeof caps / sizeof *caps; k++) {
            pt_schnet_acts a;
            assert_int_equal(pt_schnet_acts_init(&a, &m, caps[k][0], caps[k][1], caps[k][2], NULL),
                             0);
            assert_int_equal(pt_memplan_acts_bytes(&c, caps[k][0], caps[k][1], caps[k][2]),
                             a.bytes);
            pt_schnet_acts_close(&a);
        }
        pt_schnet_close(&m);
    }
}

static void test_batch_bytes_by_hand(void **state)
{
    (void)state;
    /* 2 packs of 10 nodes, 20 edges, 3 graphs: 20 nodes x (1 z + 4 node_graph
     * + 12 node_force) + 21 x 4 dst_offset + 40 edges x (4 + 4 + 4 + 12 edge_vec)
     * + 6 graphs x (4 + 4 + 8 + 1 has_forces + 72 stress + 1 has_stress + 8 volume) */
    pt_pack_limits L = {10, 20, 3};
    assert_int_equal(pt_memplan_batch_bytes(L, 2), 20 * 17 + 21 * 4 + 40 * 24 + 6 * 98);
    /* no edges: the allocator still keeps one edge slot */
    pt_pack_limits L0 = {10, 0, 3};
    assert_int_equal(pt_memplan_batch_bytes(L0, 1), 10 * 17 + 11 * 4 + 1 * 24 + 3 * 98);
}

static void test_buffer_counts(void **state)
{
    (void)state;
    assert_int_equal(pt_backend_grad_buffers(1), 1);
    assert_int_equal(pt_backend_grad_buffers(2), 2);
    assert_int_equal(pt_backend_grad_buffers(3), 2);
    assert_int_equal(pt_backend_grad_buffers(4), 3);
    assert_int_equal(pt_backend_grad_buffers(7), 3);
    assert_int_equal(pt_backend_grad_buffers(8), 4);
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.backend.gradient_accumulation = 3;
    cfg.backend.device_iterations = 2;
    cfg.backend.prefetch_depth = 5;
    cfg.backend.use_async_loader = true;
    assert_int_equal(pt_backend_io_batches(&cfg.backend, cfg.backend.gradient_accumulation), 3 * 2 + 5);
    cfg.backend.use_async_loader = false;
    assert_int_equal(pt_backend_io_batches(&cfg.backend, cfg.backend.gradient_accumulation), 3 * 2);
}

static void test_plan_of_default_job(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.backend.gradient_accumulation = 4;
    pt_pack_limits L = {40, 700, 4};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_memplan plan;
    assert_int_equal(plan_for(&plan, &cfg, L, &errs), 0);
    pt_schnet_config c = pt_memplan_job_model(&cfg);
    assert_int_equal(c.use_atomref, 1);   /* default normalisation is atomref */
    size_t n = pt_memplan_param_count(&c);
    int32_t b = plan.micro_packs;          /* auto: 16 / (R·A) = 4 on one core */
    assert_int_equal(b, 4);
    assert_int_equal(plan.n_params, n);
    assert_int_equal(plan.params, n * 4);
    assert_int_equal(plan.grads, 3 * n * 4);
    assert_int_equal(plan.optimizer, 2 * n * 4);
    assert_int_equal(plan.activations, pt_memplan_acts_bytes(&c, b * 40, b * 700, b * 4));
    assert_int_equal(plan.io, (size_t)(4 + 3) * pt_memplan_batch_bytes(L, b));
    assert_int_equal(plan.total,
                     plan.params + plan.grads + plan.optimizer + plan.activations + plan.io);
    assert_int_equal(plan.budget, 900u * 1024u * 1024u);
    assert_int_equal(pt_memplan_check(&plan, &errs), 0);
    assert_int_equal(errs.total, 0);

    json_t *j = pt_memplan_json(&plan);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "total_bytes")), (json_int_t)plan.total);
    assert_int_equal(json_integer_value(json_object_get(j, "grad_buffers")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "micro_packs")), b);
    assert_true(json_is_true(json_object_get(j, "fits")));
    json_decref(j);
    pt_errors_close(&errs);
}

static void test_rejection_message(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.batching.model_batch_size = 64;
    cfg.backend.device_memory_mb = 100;
    pt_pack_limits L = {40, 700, 4};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_memplan plan;
    assert_int_equal(plan_for(&plan, &cfg, L, &errs), 0);
    assert_true(plan.total > plan.budget);
    assert_int_equal(pt_memplan_check(&plan, &errs), -1);
    assert_int_equal(errs.kept, 2);

    /* the advised batch fits and one more pack does not */
    int32_t fit = 0;
    for (int32_t b = 1; b < 64; b++) {
        pt_job_config c2 = cfg;
        c2.batching.model_batch_size = b;
        pt_memplan p2;
        assert_int_equal(plan_for(&p2, &c2, L, &errs), 0);
        if (p2.total <= p2.budget) fit = b;
    }
    assert_true(fit > 1 && fit < 64);

    const double MB = 1024.0 * 1024.0;
    char want[512];
    snprintf(want, sizeof want,
             "a replica needs %.1f MB, %.1f MB more than the 100 MB of device memory; lower "
             "batching.model_batch_size from 64 to %d or less (activations and I/O scale with "
             "it), or max_nodes/max_edges, model.hidden/filters",
             (double)plan.total / MB, (double)plan.total / MB - 100.0, fit);
    assert_string_equal(errs.items[0].field, "backend.device_memory_mb");
    assert_string_equal(errs.items[0].message, want);
    snprintf(want, sizeof want,
             "per replica: parameters %.1f MB, gradients %.1f MB, optimizer state %.1f MB, "
             "activations %.1f MB (64 packs of 40 nodes, 700 edges), I/O buffers %.1f MB",
             (double)plan.params / MB, (double)plan.grads / MB, (double)plan.optimizer / MB,
             (double)plan.activations / MB, (double)plan.io / MB);
    assert_string_equal(errs.items[1].message, want);
    pt_errors_close(&errs);
}

static void test_rejection_even_one_pack(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.model.hidden = 1024;
    cfg.model.filters = 1024;
    cfg.backend.device_memory_mb = 64;
    pt_pack_limits L = {400, 12000, 4};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_memplan plan;
    assert_int_equal(plan_for(&plan, &cfg, L, &errs), 0);
    assert_int_equal(pt_memplan_check(&plan, &errs), -1);
    const double MB = 1024.0 * 1024.0;
    char want[512];
    snprintf(want, sizeof want,
             "a replica needs %.1f MB, %.1f MB more than the 64 MB of device memory, and even "
             "1 pack per micro-batch does not fit; lower batching.max_nodes/max_edges or "
             "model.hidden/filters/gaussians/interactions",
             (double)plan.total / MB, (double)plan.total / MB - 64.0);
    assert_string_equal(errs.items[0].message, want);
    pt_errors_close(&errs);
}

static void test_invalid_inputs(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_memplan plan;
    pt_pack_limits unresolved = {0, 0, 0};
    assert_int_equal(plan_for(&plan, &cfg, unresolved, &errs), -1);
    assert_int_equal(errs.kept, 1);
    assert_string_equal(errs.items[0].field, "batching");
    assert_string_equal(errs.items[0].message,
                        "pack limits must be resolved (max_nodes >= 1, max_edges >= 0, "
                        "max_graphs >= 1), got 0, 0, 0");
    pt_errors_clear(&errs);

    pt_schnet_config bad = model_of(1, 100, 4, 25, 0);
    pt_pack_limits L = {40, 700, 4};
    pt_train_layout l0 = {.ranks = 1, .replicas = 1, .accumulation = 1, .micro_packs = 0, .threads = 1};
    assert_int_equal(pt_memplan_compute(&plan, &bad, L, &l0, &cfg.backend, &errs), -1);
    assert_int_equal(errs.kept, 2);
    assert_string_equal(errs.items[0].field, "hidden");
    assert_string_equal(errs.items[1].field, "batching");
    assert_string_equal(errs.items[1].message, "a micro-batch needs at least one pack and a "
                                               "replica at least one micro-batch, got 0 and 1");
    pt_errors_clear(&errs);

    pt_pack_limits huge = {1 << 22, 1 << 24, 4};
    pt_schnet_config ok = model_of(100, 100, 4, 25, 0);
    pt_train_layout l1000 = {.ranks = 1, .replicas = 1, .accumulation = 1, .micro_packs = 1000,
                             .threads = 1};
    assert_int_equal(pt_memplan_compute(&plan, &ok, huge, &l1000, &cfg.backend, &errs), -1);
    assert_int_equal(errs.kept, 2);
    assert_string_equal(errs.items[0].message,
                        "1000 packs give 4194304000 node slots per micro-batch, above the "
                        "engine's limit of 2147483646");
    assert_string_equal(errs.items[1].message,
                        "1000 packs give 16777216000 edge slots per micro-batch, above the "
                        "engine's limit of 2147483646");
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_count_matches_model),
        cmocka_unit_test(test_acts_bytes_match_arena),
        cmocka_unit_test(test_batch_bytes_by_hand),
        cmocka_unit_test(test_buffer_counts),
        cmocka_unit_test(test_plan_of_default_job),
        cmocka_unit_test(test_rejection_message),
        cmocka_unit_test(test_rejection_even_one_pack),
        cmocka_unit_test(test_invalid_inputs),
    };
    return cmocka_run_group_tests_name("memplan", tests, NULL, NULL);
}
