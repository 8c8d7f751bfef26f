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
/* plan_for's job trains on forces (the FORCES_TRAIN arena) when set. */
static int plan_forces;

static int plan_for(pt_memplan *plan, const pt_job_config *cfg, pt_pack_limits L, pt_errors *errs)
{
    pt_train_layout l;
    if (pt_train_layout_resolve(&l, cfg, 1, plan_forces, 0, errs)) return -1;
    return pt_memplan_for_job(plan, cfg, &l, L, plan_forces, errs);
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

/* The arena the plan counts is the one the engine allocates, in each mode;
 * a forces training arena needs more than a forces one, which needs more
 * than an energy one. */
static void test_acts_bytes_match_arena(void **state)
{
    (void)state;
    static const int caps[][3] = {{1, 0, 1}, {40, 640, 16}, {37, 1001, 3}, {640, 10240, 32}};
    static const pt_schnet_mode modes[3] = {PT_SCHNET_ENERGY, PT_SCHNET_FORCES,
                                            PT_SCHNET_FORCES_TRAIN};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const int *s = shapes[i];
        pt_schnet_config c = model_of(s[0], s[1], s[2], s[3], s[4]);
        pt_schnet m;
        assert_int_equal(pt_schnet_init(&m, &c, NULL), 0);
        for (size_t k = 0; k < sizeof caps / sizeof *caps; k++) {
            size_t prev = 0;
            for (int md = 0; md < 3; md++) {
                pt_schnet_acts a;
                assert_int_equal(pt_schnet_acts_init_mode(&a, &m, caps[k][0], caps[k][1],
                                                          caps[k][2], modes[md], NULL), 0);
                size_t bytes = pt_memplan_acts_bytes(&c, caps[k][0], caps[k][1], caps[k][2],
                                                     modes[md]);
                assert_int_equal(bytes, a.bytes);
                assert_true(bytes > prev);
                prev = bytes;
                pt_schnet_acts_close(&a);
            }
        }
        pt_schnet_close(&m);
    }
}

static void test_batch_bytes_by_hand(void **state)
{
    (void)state;
    /* 2 packs of 10 nodes, 20 edges, 3 graphs: 20 nodes x (1 z + 4 node_graph
     * + 12 node_force + 4 row_cursor) + 21 x 4 dst_offset + 40 edges x (4 + 4
     * + 4 + 12 edge_vec + the filter-row table's 4 edge_row + 1 edge_first + 4
     * row_last + 4 row_dist) + 6 graphs x (4 + 4 + 8 + 1 has_forces + 72
     * stress + 1 has_stress + 8 volume) */
    pt_pack_limits L = {10, 20, 3};
    assert_int_equal(pt_memplan_batch_bytes(L, 2), 20 * 21 + 21 * 4 + 40 * 37 + 6 * 98);
    /* no edges: the allocator still keeps one edge slot */
    pt_pack_limits L0 = {10, 0, 3};
    assert_int_equal(pt_memplan_batch_bytes(L0, 1), 10 * 21 + 11 * 4 + 1 * 37 + 3 * 98);
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
    pt_schnet_config c = pt_memplan_job_model(&cfg, 0);
    assert_int_equal(c.use_atomref, 1);   /* default normalisation is atomref */
    size_t n = pt_memplan_param_count(&c);
    int32_t b = plan.micro_packs;          /* auto: 16 / (R·A) = 4 on one core */
    assert_int_equal(b, 4);
    assert_int_equal(plan.n_params, n);
    assert_int_equal(plan.params, n * 4);
    assert_int_equal(plan.grads, 3 * n * 4);
    assert_int_equal(plan.optimizer, 2 * n * 4);
    assert_int_equal(plan.activations,
                     pt_memplan_acts_bytes(&c, b * 40, b * 700, b * 4, PT_SCHNET_ENERGY));
    assert_int_equal(plan.io, (size_t)(4 + 3) * pt_memplan_batch_bytes(L, b));
    /* the evaluator: a forward-only arena and one batch, ~1/6 of the arena */
    assert_int_equal(plan.eval, pt_schnet_acts_bytes_forward(&c, b * 40, b * 700, b * 4) +
                                    pt_memplan_batch_bytes(L, b));
    assert_true(plan.eval > 0 && 3 * plan.eval < plan.activations);
    assert_int_equal(plan.total, plan.params + plan.grads + plan.optimizer + plan.activations +
                                     plan.io + plan.eval);
    assert_int_equal(plan.budget, 900u * 1024u * 1024u);
    assert_int_equal(pt_memplan_check(&plan, &errs), 0);
    assert_int_equal(errs.total, 0);

    /* a job training on forces: the FORCES_TRAIN arena, everything else the same */
    pt_memplan fp;
    pt_train_layout l;
    assert_int_equal(pt_train_layout_resolve(&l, &cfg, 1, 0, 0, &errs), 0);
    assert_int_equal(pt_memplan_for_job(&fp, &cfg, &l, L, 1, &errs), 0);
    assert_int_equal(fp.mode, PT_SCHNET_FORCES_TRAIN);
    assert_int_equal(fp.activations,
                     pt_memplan_acts_bytes(&c, b * 40, b * 700, b * 4, PT_SCHNET_FORCES_TRAIN));
    assert_true(fp.activations > plan.activations);
    /* its evaluator computes forces: the FORCES arena */
    assert_int_equal(fp.eval, pt_memplan_acts_bytes(&c, b * 40, b * 700, b * 4, PT_SCHNET_FORCES) +
                                  pt_memplan_batch_bytes(L, b));
    assert_int_equal(fp.total - fp.activations - fp.eval,
                     plan.total - plan.activations - plan.eval);

    json_t *j = pt_memplan_json(&plan);
    assert_non_null(j);
    assert_int_equal(json_integer_value(json_object_get(j, "total_bytes")), (json_int_t)plan.total);
    assert_int_equal(json_integer_value(json_object_get(j, "eval_bytes")), (json_int_t)plan.eval);
    assert_int_equal(json_integer_value(json_object_get(j, "grad_buffers")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "micro_packs")), b);
    assert_true(json_is_true(json_object_get(j, "fits")));
    json_decref(j);
    pt_errors_close(&errs);
}

/* A job of several targets, one per atom: its batches carry every target
 * (a double per graph slot and per node slot per key, pt_batch_set_keys_atom),
 * counted in every I/O buffer and in the evaluator's batch; PyG's single
 * head carries none. */
static void test_label_arrays(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const char *text = "{\"targets\":[{\"key\":\"energy\"},{\"key\":\"charges\","
                       "\"level\":\"atom\"},{\"key\":\"gap\"}]}";
    assert_int_equal(pt_job_config_parse(&cfg, text, strlen(text), NULL, &errs), 0);
    pt_pack_limits L = {40, 700, 4};
    pt_memplan plan;
    assert_int_equal(plan_for(&plan, &cfg, L, &errs), 0);
    const int32_t b = plan.micro_packs;
    pt_schnet_config c = pt_memplan_job_model(&cfg, 0);
    assert_int_equal(c.n_heads, 3);
    const size_t labels = 3 * (size_t)b * (4 + 40) * sizeof(double);
    assert_int_equal(pt_memplan_label_bytes(&c, L, b), labels);
    assert_int_equal(plan.io, (size_t)plan.io_batches * (pt_memplan_batch_bytes(L, b) + labels));
    assert_int_equal(plan.eval, pt_schnet_acts_bytes_forward(&c, b * 40, b * 700, b * 4) +
                                    pt_memplan_batch_bytes(L, b) + labels);
    /* graph-level targets only: per graph slot */
    text = "{\"targets\":[{\"key\":\"energy\"},{\"key\":\"gap\"}]}";
    assert_int_equal(pt_job_config_parse(&cfg, text, strlen(text), NULL, &errs), 0);
    c = pt_memplan_job_model(&cfg, 0);
    assert_int_equal(pt_memplan_label_bytes(&c, L, 2), 2 * 2 * 4 * sizeof(double));
    /* one graph target: PyG's head, no label arrays */
    pt_job_config_defaults(&cfg);
    c = pt_memplan_job_model(&cfg, 0);
    assert_int_equal(pt_memplan_label_bytes(&c, L, 8), 0);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
}

/* ZeRO (backend_zero.h): per-replica bytes of each stage from the formulas of
 * memplan.h, for a large SchNet (H = F = 1024, T = 6) at R = 4 — each stage
 * below the one before, offload below the same stage without — and the
 * largest layer is a block. */
static void test_zero_stages(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.model.hidden = cfg.model.filters = 1024;
    cfg.model.interactions = 6;
    cfg.backend.replication_factor = 4;
    cfg.backend.gradient_accumulation = 2;   /* 2 gradient buffers */
    cfg.batching.model_batch_size = 1;
    pt_pack_limits L = {40, 700, 4};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_schnet_config mc = pt_memplan_job_model(&cfg, 0);
    const size_t n = pt_memplan_param_count(&mc), S = (n + 3) / 4;
    const size_t H = 1024, F = 1024, G = (size_t)cfg.model.gaussians;
    const size_t block = F * G + F + F * F + F + F * H + H * F + H + H * H + H;
    assert_int_equal(pt_memplan_max_layer(&mc), block);
    size_t prev = SIZE_MAX;
    for (int stage = 0; stage <= 3; stage++) {
        for (int off = 0; off <= (stage > 0); off++) {
            cfg.backend.zero_stage = stage;
            cfg.backend.offload_optimizer = off;
            pt_memplan p;
            assert_int_equal(plan_for(&p, &cfg, L, &errs), 0);
            assert_int_equal(p.zero_stage, stage);
            assert_int_equal(p.shard, S);
            assert_int_equal(p.params, (stage == 3 ? S + block : n) * 4);
            assert_int_equal(p.grads, (stage >= 2 ? block + 2 * S : 2 * n) * 4);
            assert_int_equal(p.optimizer, off ? 2 * ((size_t)1 << 18) * 4 : (stage ? S : n) * 8);
            assert_int_equal(p.optimizer_host, off ? S * 8 : 0);
            assert_int_equal(p.total,
                             p.params + p.grads + p.optimizer + p.activations + p.io + p.eval);
            assert_true(p.total < prev);
            prev = p.total;
            json_t *j = pt_memplan_json(&p);
            assert_int_equal(json_integer_value(json_object_get(j, "zero_stage")), stage);
            assert_int_equal(json_is_true(json_object_get(j, "offload_optimizer")), off);
            assert_int_equal(json_integer_value(json_object_get(j, "shard_params")), (json_int_t)S);
            json_decref(j);
        }
    }
    /* over several MPI ranks the rank's replicas keep stage 1's gradients */
    cfg.backend.kind = PT_JOB_BACKEND_MPI;
    cfg.backend.ranks = 2;
    cfg.backend.zero_stage = 3;
    cfg.backend.offload_optimizer = 0;
    pt_memplan p;
    assert_int_equal(plan_for(&p, &cfg, L, &errs), 0);
    assert_int_equal(p.grads, 2 * n * 4);
    assert_int_equal(p.params, (S + block) * 4);
    pt_errors_close(&errs);
}

/* A job that does not fit at stage 0 is refused naming the lowest stage
 * (then offload) that fits; with one replica no stage helps.  Energy and
 * forces jobs alike (every stage trains forces: backend_zero.h). */
static void rejection_names_the_stage(void)
{
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.model.hidden = cfg.model.filters = 1024;
    cfg.model.interactions = 6;
    cfg.backend.replication_factor = 4;
    cfg.batching.model_batch_size = 1;
    pt_pack_limits L = {40, 700, 4};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    /* find budgets between the stages' needs */
    size_t need[4], need_off3;
    for (int s = 0; s <= 3; s++) {
        cfg.backend.zero_stage = s;
        pt_memplan p;
        assert_int_equal(plan_for(&p, &cfg, L, &errs), 0);
        need[s] = p.total;
    }
    cfg.backend.zero_stage = 3;
    cfg.backend.offload_optimizer = 1;
    pt_memplan p3;
    assert_int_equal(plan_for(&p3, &cfg, L, &errs), 0);
    need_off3 = p3.total;
    cfg.backend.offload_optimizer = 0;
    for (int want = 1; want <= 3; want++) {
        cfg.backend.zero_stage = 0;
        cfg.backend.device_memory_mb = (int32_t)((need[want] + need[want - 1]) / 2 / (1 << 20));
        pt_memplan p;
        assert_int_equal(plan_for(&p, &cfg, L, &errs), 0);
        if (p.budget < need[want]) continue;   /* rounding of MB: not between */
        pt_errors_clear(&errs);
        assert_int_equal(pt_memplan_check(&p, &errs), -1);
        assert_string_equal(errs.items[0].field, "backend.zero_stage");
        char frag[64];
        snprintf(frag, sizeof frag, "backend.zero_stage %d would fit", want);
        if (!strstr(errs.items[0].message, frag)) fail_msg("%s", errs.items[0].message);
        assert_non_null(strstr(errs.items[1].message, "per replica: parameters "));
    }
    /* only offload makes it fit */
    cfg.backend.zero_stage = 0;
    cfg.backend.device_memory_mb = (int32_t)(need_off3 / (1 << 20)) + 1;
    if (need_off3 + (1 << 20) < need[3]) {
        pt_memplan p;
        assert_int_equal(plan_for(&p, &cfg, L, &errs), 0);
        pt_errors_clear(&errs);
        assert_int_equal(pt_memplan_check(&p, &errs), -1);
        assert_non_null(strstr(errs.items[0].message, "with backend.offload_optimizer true would fit"));
    }
    /* one replica: shards are the whole, nothing to suggest but the batch */
    cfg.backend.replication_factor = 1;
    cfg.backend.device_memory_mb = (int32_t)(need[3] / (1 << 20));
    pt_memplan p;
    assert_int_equal(plan_for(&p, &cfg, L, &errs), 0);
    pt_errors_clear(&errs);
    assert_int_equal(pt_memplan_check(&p, &errs), -1);
    assert_string_equal(errs.items[0].field, "backend.device_memory_mb");
    pt_errors_close(&errs);
}

static void test_zero_rejection_names_the_stage(void **state)
{
    (void)state;
    for (plan_forces = 0; plan_forces <= 1; plan_forces++) rejection_names_the_stage();
    plan_forces = 0;
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
             "batching.model_batch_size from 64 to %d or less (activations, I/O and evaluation "
             "scale with it), or max_nodes/max_edges, model.hidden/filters",
             (double)plan.total / MB, (double)plan.total / MB - 100.0, fit);
    assert_string_equal(errs.items[0].field, "backend.device_memory_mb");
    assert_string_equal(errs.items[0].message, want);
    snprintf(want, sizeof want,
             "per replica: parameters %.1f MB, gradients %.1f MB, optimizer state %.1f MB, "
             "activations %.1f MB (64 packs of 40 nodes, 700 edges), I/O buffers %.1f MB, "
             "evaluation %.1f MB",
             (double)plan.params / MB, (double)plan.grads / MB, (double)plan.optimizer / MB,
             (double)plan.activations / MB, (double)plan.io / MB, (double)plan.eval / MB);
    assert_string_equal(errs.items[1].message, want);
    pt_errors_close(&errs);
}

/* A forces job that fits as an energy job but not with its training arena
 * is refused, and the breakdown says the activations are for forces. */
static void test_rejection_forces_job(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.batching.model_batch_size = 8;
    pt_pack_limits L = {40, 700, 4};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_layout l;
    assert_int_equal(pt_train_layout_resolve(&l, &cfg, 1, 0, 0, &errs), 0);
    pt_memplan e, f;
    assert_int_equal(pt_memplan_for_job(&e, &cfg, &l, L, 0, &errs), 0);
    assert_int_equal(pt_memplan_for_job(&f, &cfg, &l, L, 1, &errs), 0);
    const size_t MB = 1024 * 1024;
    cfg.backend.device_memory_mb = (int32_t)((e.total + f.total) / 2 / MB);
    assert_int_equal(pt_memplan_for_job(&e, &cfg, &l, L, 0, &errs), 0);
    assert_int_equal(pt_memplan_check(&e, &errs), 0);
    assert_int_equal(pt_memplan_for_job(&f, &cfg, &l, L, 1, &errs), 0);
    assert_int_equal(pt_memplan_check(&f, &errs), -1);
    assert_int_equal(errs.kept, 2);
    assert_non_null(strstr(errs.items[1].message, "(training on forces, 8 packs of 40 nodes"));
    json_t *j = pt_memplan_json(&f);
    assert_true(json_is_true(json_object_get(j, "forces")));
    assert_true(json_is_false(json_object_get(j, "fits")));
    json_decref(j);
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
    assert_int_equal(pt_memplan_compute(&plan, &bad, L, &l0, &cfg.backend, PT_SCHNET_ENERGY, &errs), -1);
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
    assert_int_equal(pt_memplan_compute(&plan, &ok, huge, &l1000, &cfg.backend, PT_SCHNET_ENERGY, &errs), -1);
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
        cmocka_unit_test(test_label_arrays),
        cmocka_unit_test(test_buffer_counts),
        cmocka_unit_test(test_plan_of_default_job),
        cmocka_unit_test(test_rejection_message),
        cmocka_unit_test(test_zero_stages),
        cmocka_unit_test(test_zero_rejection_names_the_stage),
        cmocka_unit_test(test_rejection_forces_job),
        cmocka_unit_test(test_rejection_even_one_pack),
        cmocka_unit_test(test_invalid_inputs),
    };
    return cmocka_run_group_tests_name("memplan", tests, NULL, NULL);
}
