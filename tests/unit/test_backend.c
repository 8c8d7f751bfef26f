/* test_backend.c — the emulated multi-IPU backend on real molecules (a
 * 240-molecule QM9 slice, ingested here), against the invariants of issue 4:
 *
 *   - R replicas x A accumulation x b packs gives the Adam update of 1
 *     replica with one batch of R·A·b packs within 1e-6 relative (the
 *     gradient within float32 rounding), and — R, A powers of two, same b,
 *     same BLAS threads — the same bits for every split; the per-tensor all-reduce ablation gives
 *     the same bits as the merged buffer; R above the core count works;
 *   - every graph of an epoch is computed exactly once across replicas and
 *     padding contributes nothing (an all-padding replica adds exact zeros);
 *   - the same seed gives the same loss curve and parameters, bit for bit,
 *     whatever the prefetch depth, loader mode, device iterations or pack
 *     order (predicted, shuffled or mispredicted steps);
 *   - the memory plan rejects a job at open, and every error path reports
 *     its message. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/unit/backend_fixture.h"

/* Gradient and stats of packs first..first+n under split (R, A, b). */
static float *grad_of(int R, int A, int b, uint32_t first, uint32_t n, pt_step_stats *st,
                      int merge)
{
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, R, A, b);
    cfg.backend.merge_all_reduce = merge;
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(F.model.n_params * sizeof(float));
    assert_non_null(g);
    uint32_t *ids = malloc(n * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) ids[i] = first + i;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, n, NULL, g, st, &errs), 0);
    pt_errors_close(&errs);
    free(ids);
    eng.close(eng.self);
    return g;
}

/* ---- invariants -------------------------------------------------------------- */

static void test_splits_give_one_batch_gradient(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    const uint32_t G = 8;
    assert_true(F.packs.n_packs >= 3 * G);
    pt_step_stats ref_st;
    float *ref = grad_of(1, 1, 8, G, G, &ref_st, 1);
    float *ref_up = adam_update(ref);
    static const int splits[][3] = {
        {2, 1, 4}, {1, 2, 4}, {2, 2, 2}, {4, 1, 2}, {1, 4, 2},
        {4, 2, 1}, {8, 1, 1}, {2, 4, 1}, {1, 8, 1},
    };
    float *first_of_b[9] = {0};
    for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
        const int *s = splits[k];
        pt_step_stats st;
        float *g = grad_of(s[0], s[1], s[2], G, G, &st, 1);
        /* the gradients differ by float32 rounding only: the filter biases
         * sum b·max_edges ≈ 5,700 terms per micro-batch in float, whose
         * relative error grows like sqrt(K)·2^-24 ≈ 5e-6; measured ≈ 9e-7 */
        double rd = rel_diff(g, ref, n);
        if (rd > 2e-6) fail_msg("split R=%d A=%d b=%d: gradient differs by %g", s[0], s[1], s[2], rd);
        /* the invariant of issue 4: the same parameter update (≈ 1.3e-7 here) */
        float *up = adam_update(g);
        double ru = rel_diff(up, ref_up, n);
        if (ru > 1e-6) fail_msg("split R=%d A=%d b=%d: update differs by %g", s[0], s[1], s[2], ru);
        free(up);
        assert_int_equal(st.graphs, ref_st.graphs);
        assert_int_equal(st.nodes, ref_st.nodes);
        assert_int_equal(st.edges, ref_st.edges);
        assert_true(fabs(st.loss_sum - ref_st.loss_sum) <= 1e-9 * fabs(ref_st.loss_sum));
        /* same b: one balanced tree over the R·A micro-batches, same bits */
        if (first_of_b[s[2]])
            assert_memory_equal(g, first_of_b[s[2]], n * sizeof(float));
        else
        {
            first_of_b[s[2]] = g;
            g = NULL;
        }
        free(g);
    }
    /* the splits really differ from the one-batch sum in rounding, so the
     * bitwise agreement above is not a triviality */
    assert_true(memcmp(first_of_b[1], ref, n * sizeof(float)) != 0);
    for (int b = 0; b < 9; b++) free(first_of_b[b]);
    free(ref);
    free(ref_up);
}

/* A split that is not a power of two, and a partial last step. */
static void test_uneven_split_and_partial_step(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    pt_step_stats a, b;
    float *ref = grad_of(1, 1, 9, 0, 9, &a, 1);
    float *g = grad_of(3, 1, 3, 0, 9, &b, 1);
    assert_true(rel_diff(g, ref, n) <= 1e-6);
    free(g);
    free(ref);
    /* 5 real packs in a step of 12: three micro-batches are pure padding */
    ref = grad_of(1, 1, 5, 0, 5, &a, 1);
    g = grad_of(3, 2, 2, 0, 5, &b, 1);
    assert_true(rel_diff(g, ref, n) <= 1e-6);
    assert_int_equal(b.graphs, a.graphs);
    assert_int_equal(b.node_slots, 12 * F.packer.limits.max_nodes);
    free(g);
    free(ref);
}

/* An all-padding replica adds exact zeros: R=2 with 4 real packs of b=4 is
 * bit for bit R=1 with those packs. */
static void test_padding_contributes_nothing(void **state)
{
    (void)state;
    pt_step_stats a, b;
    float *one = grad_of(1, 1, 4, 20, 4, &a, 1);
    float *two = grad_of(2, 1, 4, 20, 4, &b, 1);
    assert_memory_equal(one, two, F.model.n_params * sizeof(float));
    assert_int_equal(a.graphs, b.graphs);
    assert_true(a.loss_sum == b.loss_sum);
    assert_int_equal(b.node_slots, 2 * a.node_slots);
    free(one);
    free(two);
}

/* The merged layout runs the progressive all-reduce (each replica's last
 * micro-batch merges and publishes layer by layer, engine/backend/allreduce.h),
 * the per-tensor one the barrier-per-segment run: the same bits, for stacks
 * whose last merges come from the binary counter (A = 2, 4) and from the
 * closing loop (A = 3). */
static void test_per_tensor_allreduce_same_bits(void **state)
{
    (void)state;
    static const int layouts[][3] = {{3, 1, 2}, {2, 3, 1}, {3, 3, 1}, {2, 4, 1}, {2, 2, 2}};
    for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
        const int R = layouts[k][0], A = layouts[k][1], b = layouts[k][2];
        const uint32_t G = (uint32_t)(R * A * b);
        pt_step_stats a, c;
        float *merged = grad_of(R, A, b, 0, G, &a, 1);
        float *split = grad_of(R, A, b, 0, G, &c, 0);
        if (memcmp(merged, split, F.model.n_params * sizeof(float)) != 0)
            fail_msg("R=%d A=%d b=%d: merged and per-tensor all-reduce differ", R, A, b);
        free(merged);
        free(split);
    }
}

/* One replica's step gradient in the caller's buffer: whatever the buffer
 * held before — NaN here — and whatever the step before left in it, it has
 * the bits of three replicas' all-reduce over the same micro-batches (the
 * tree ((0+1)+2) both ways), and a second step on other packs, then the
 * first packs again, overwrites rather than adds.  (The guard for writing
 * level 0 of the stack into the caller's buffer in place of the one-rank
 * all-reduce's copy, session 9: docs/performance.md.) */
static void test_one_replica_sums_in_place(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    pt_step_stats st;
    float *three = grad_of(3, 1, 2, 0, 6, &st, 1);
    float *other = grad_of(1, 3, 2, 6, 6, &st, 1);
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 1, 3, 2);
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(n * sizeof(float));
    assert_non_null(g);
    for (size_t i = 0; i < n; i++) g[i] = NAN;
    uint32_t ids[6], ids2[6];
    for (uint32_t i = 0; i < 6; i++) ids[i] = i, ids2[i] = 6 + i;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 6, NULL, g, &st, &errs), 0);
    assert_memory_equal(g, three, n * sizeof(float));
    assert_int_equal(eng.compute(eng.self, &F.packs, ids2, 6, NULL, g, &st, &errs), 0);
    assert_memory_equal(g, other, n * sizeof(float));
    assert_true(memcmp(other, three, n * sizeof(float)) != 0);
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 6, NULL, g, &st, &errs), 0);
    assert_memory_equal(g, three, n * sizeof(float));
    pt_errors_close(&errs);
    eng.close(eng.self);
    free(g);
    free(other);
    free(three);
}

/* The accumulation stack needs no zeroing before a backward: the merges
 * and the all-reduce leave every level they read zero.  Consecutive steps
 * on one engine — other packs, then the first again — each give the
 * gradient a fresh engine gives, for stacks of 1-3 levels, merged and
 * per-tensor all-reduce; a level left holding a sum would add it. */
static void test_stack_left_zero_between_steps(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    static const int layouts[][4] = {{2, 4, 1, 1}, {3, 2, 1, 0}, {2, 1, 3, 1}};
    for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
        const int R = layouts[k][0], A = layouts[k][1], b = layouts[k][2];
        const uint32_t G = (uint32_t)(R * A * b);
        pt_step_stats st;
        float *want[2];
        for (uint32_t w = 0; w < 2; w++) want[w] = grad_of(R, A, b, w * G, G, &st, layouts[k][3]);
        assert_true(memcmp(want[0], want[1], n * sizeof(float)) != 0);
        pt_job_config cfg;
        pt_train_data d = data_for(&cfg, R, A, b);
        cfg.backend.merge_all_reduce = layouts[k][3];
        pt_grad_engine eng;
        open_ok(&eng, &d);
        float *g = malloc(n * sizeof(float));
        uint32_t *ids = malloc(2 * G * sizeof(uint32_t));
        assert_non_null(g);
        assert_non_null(ids);
        for (uint32_t i = 0; i < 2 * G; i++) ids[i] = i;
        pt_errors errs;
        pt_errors_init(&errs, 0);
        static const uint32_t order[] = {0, 1, 1, 0};
        for (size_t s = 0; s < sizeof order / sizeof *order; s++) {
            const uint32_t w = order[s];
            assert_int_equal(eng.compute(eng.self, &F.packs, ids + w * G, G, NULL, g, &st, &errs), 0);
            if (memcmp(g, want[w], n * sizeof(float)) != 0)
                fail_msg("R=%d A=%d b=%d, step %zu: not a fresh engine's gradient", R, A, b, s);
        }
        pt_errors_close(&errs);
        eng.close(eng.self);
        free(ids);
        free(g);
        free(want[0]);
        free(want[1]);
    }
}

/* One epoch, parameters fixed: the backend's loss sum over all steps equals
 * the sum over the graphs evaluated one pack at a time, and the counts equal
 * the dataset's — each graph computed exactly once. */
static void test_epoch_sees_every_graph_once(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 3, 2, 2);
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(F.model.n_params * sizeof(float));
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const uint32_t G = 12;
    uint32_t *ids = malloc(G * sizeof(uint32_t));
    pt_step_stats tot = {0};
    int64_t steps = 0;
    for (uint32_t first = 0; first < F.packs.n_packs; first += G) {
        uint32_t n = F.packs.n_packs - first < G ? F.packs.n_packs - first : G;
        for (uint32_t i = 0; i < n; i++) ids[i] = first + i;
        pt_step_stats st;
        assert_int_equal(eng.compute(eng.self, &F.packs, ids, n, NULL, g, &st, &errs), 0);
        tot.loss_sum += st.loss_sum;
        tot.graphs += st.graphs;
        tot.nodes += st.nodes;
        tot.edges += st.edges;
        steps++;
    }
    eng.close(eng.self);
    assert_int_equal(tot.graphs, F.ds.n_structs);
    assert_int_equal(tot.nodes, F.ds.n_atoms);
    assert_int_equal(tot.edges, F.graphs.n_edges);

    /* reference: every pack alone through a 1x1x1 engine */
    pt_job_config c1;
    pt_train_data d1 = data_for(&c1, 1, 1, 1);
    open_ok(&eng, &d1);
    double ref = 0.0;
    for (uint32_t p = 0; p < F.packs.n_packs; p++) {
        pt_step_stats st;
        assert_int_equal(eng.compute(eng.self, &F.packs, &p, 1, NULL, g, &st, &errs), 0);
        ref += st.loss_sum;
    }
    eng.close(eng.self);
    assert_true(fabs(tot.loss_sum - ref) <= 1e-9 * ref);
    pt_errors_close(&errs);
    free(ids);
    free(g);
    (void)steps;
}

/* ---- same seed, same curve --------------------------------------------------- */

typedef enum order_kind { ORDER_CONSECUTIVE, ORDER_SHUFFLED, ORDER_SKIP } order_kind;

/* Trains 2 epochs of Adam; writes the per-step loss sums to curve[] and
 * returns the final parameters.  ORDER_SKIP walks consecutive packs but
 * jumps one step ahead now and then, so prefetched predictions are wrong. */
static float *train_curve(int R, int A, int b, int D, int async, int prefetch, order_kind order,
                          double *curve, int max_steps, pt_backend_stats *bs)
{
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, R, A, b);
    cfg.backend.device_iterations = D;
    cfg.backend.use_async_loader = async;
    cfg.backend.prefetch_depth = prefetch;
    reset_params();
    pt_grad_engine eng;
    open_ok(&eng, &d);
    size_t n = F.model.n_params;
    float *g = malloc(n * sizeof(float));
    pt_optim_params op = pt_optim_defaults(PT_OPTIM_ADAM);
    pt_optim opt;
    assert_int_equal(pt_optim_init(&opt, &op, n), 0);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const uint32_t G = (uint32_t)(R * A * b);
    uint32_t *order_ids = malloc(F.packs.n_packs * sizeof(uint32_t));
    int step = 0;
    for (uint32_t epoch = 0; epoch < 2 && step < max_steps; epoch++) {
        pt_packs packs = {0};
        assert_int_equal(pt_packer_epoch(&F.packer, 11, epoch, &packs), 0);
        for (uint32_t i = 0; i < packs.n_packs; i++) order_ids[i] = i;
        if (order == ORDER_SHUFFLED) {
            pt_rng rng;
            pt_rng_init(&rng, 5, epoch);
            pt_rng_shuffle_u32(&rng, order_ids, packs.n_packs);
        }
        for (uint32_t first = 0; first < packs.n_packs && step < max_steps; first += G) {
            if (order == ORDER_SKIP && step % 5 == 4 && first + 2 * G < packs.n_packs) first += G;
            uint32_t cnt = packs.n_packs - first < G ? packs.n_packs - first : G;
            pt_step_stats st;
            assert_int_equal(eng.compute(eng.self, &packs, order_ids + first, cnt, NULL, g, &st, &errs),
                             0);
            curve[step++] = st.loss_sum;
            pt_optim_step(&opt, F.model.params_memory, g, 1e-3);
        }
        pt_packs_close(&packs);
    }
    if (bs) pt_backend_stats_get(&eng, bs);
    return run_finish(&eng, &opt, &errs, order_ids, g);
}

static void test_same_curve_whatever_the_loader(void **state)
{
    (void)state;
    enum { STEPS = 40 };
    const size_t n = F.model.n_params;
    double ref_curve[STEPS], curve[STEPS];
    pt_backend_stats bs;
    float *ref = train_curve(2, 1, 2, 1, 0, 1, ORDER_CONSECUTIVE, ref_curve, STEPS, &bs);
    assert_int_equal(bs.loader_threads, 0);
    /* the optimizer did move the parameters */
    assert_true(memcmp(ref, F.init_params, n * sizeof(float)) != 0);
    static const int variants[][3] = {
        /* async, prefetch, D */
        {1, 1, 1}, {1, 3, 1}, {1, 8, 1}, {0, 1, 3}, {1, 3, 4},
    };
    for (size_t k = 0; k < sizeof variants / sizeof *variants; k++) {
        const int *v = variants[k];
        float *p = train_curve(2, 1, 2, v[2], v[0], v[1], ORDER_CONSECUTIVE, curve, STEPS, &bs);
        assert_memory_equal(curve, ref_curve, sizeof curve);
        assert_memory_equal(p, ref, n * sizeof(float));
        assert_int_equal(bs.mispredicted, 0);
        if (v[0]) assert_true(bs.queued_ahead > 0);     /* prefetch did happen */
        assert_int_equal(bs.slots, 2 * (v[2] + (v[0] ? v[1] : 0)));
        free(p);
    }
    free(ref);
}

/* Shuffled pack order (nothing to predict) and skipped steps (wrong
 * predictions dropped) give the curve of the same order without prefetch. */
static void test_orders_and_mispredictions(void **state)
{
    (void)state;
    enum { STEPS = 24 };
    const size_t n = F.model.n_params;
    double ref_curve[STEPS], curve[STEPS];
    pt_backend_stats bs;
    static const order_kind orders[] = {ORDER_SHUFFLED, ORDER_SKIP};
    for (size_t k = 0; k < 2; k++) {
        float *ref = train_curve(2, 2, 1, 1, 0, 1, orders[k], ref_curve, STEPS, NULL);
        float *p = train_curve(2, 2, 1, 2, 1, 3, orders[k], curve, STEPS, &bs);
        assert_memory_equal(curve, ref_curve, sizeof curve);
        assert_memory_equal(p, ref, n * sizeof(float));
        if (orders[k] == ORDER_SKIP) assert_true(bs.mispredicted > 0);
        else assert_int_equal(bs.queued_ahead, 0);
        free(p);
        free(ref);
    }
}

/* ---- inside the training loop -------------------------------------------------- */

static void record_first_loss(void *user, const pt_train_metrics *m, const char *json)
{
    (void)json;
    double *first = user;
    if (!strcmp(m->kind, "step") && m->step == 1) *first = m->loss;
}

/* pt_train_run with the backend as its engine: same steps and, from the
 * same initial weights, the first step's loss of the built-in engine. */
static void test_runs_inside_the_loop(void **state)
{
    (void)state;
    double first[2] = {NAN, NAN};
    int64_t steps[2];
    for (int k = 0; k < 2; k++) {
        pt_job_config cfg = F.cfg;
        cfg.backend.replication_factor = 2;
        cfg.backend.gradient_accumulation = 2;
        cfg.batching.model_batch_size = 2;
        cfg.training.epochs = 1;
        cfg.training.max_steps = 4;
        cfg.training.log_every = 1;
        pt_train_options opt = {.user = &first[k], .on_metrics = record_first_loss,
                                .engine_open = k ? pt_backend_open : NULL};
        pt_train_result res;
        pt_errors errs;
        pt_errors_init(&errs, 0);
        assert_int_equal(pt_train_run(&cfg, &F.ds, NULL, &opt, &res, &errs), 0);
        steps[k] = res.steps;
        pt_errors_close(&errs);
    }
    assert_int_equal(steps[0], 4);
    assert_int_equal(steps[1], 4);
    assert_true(isfinite(first[0]));
    assert_true(fabs(first[1] - first[0]) <= 1e-9 * first[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splits_give_one_batch_gradient),
        cmocka_unit_test(test_uneven_split_and_partial_step),
        cmocka_unit_test(test_padding_contributes_nothing),
        cmocka_unit_test(test_per_tensor_allreduce_same_bits),
        cmocka_unit_test(test_one_replica_sums_in_place),
        cmocka_unit_test(test_stack_left_zero_between_steps),
        cmocka_unit_test(test_epoch_sees_every_graph_once),
        cmocka_unit_test(test_same_curve_whatever_the_loader),
        cmocka_unit_test(test_orders_and_mispredictions),
        cmocka_unit_test(test_runs_inside_the_loop),
    };
    return cmocka_run_group_tests_name("backend", tests, setup, teardown);
}
