/* test_backend_forces.c — the emulated multi-IPU backend training on energies
 * and forces (training.loss with forces; engine/model/schnet_forces.c), on
 * 240 EMT structures (tests/data/emt_train_240.extxyz.gz: slabs with pbc
 * "T T F" and "T T T", bulk cells of 1, 4 and 32 atoms; every neighbour
 * within 4 Å), against the invariants test_backend.c holds energy jobs to:
 *
 *   - R replicas x A accumulation x b packs gives the gradient of one batch
 *     of R·A·b packs within float rounding, the same Adam update within
 *     1e-6, and the same bits for every split with the same b; the
 *     built-in local engine gives the backend's bits;
 *   - padding contributes nothing (an all-padding replica adds exact zeros);
 *   - the same curve and parameters, bit for bit, whatever the loader,
 *     prefetch depth or device iterations;
 *   - every packing method sees the same loss: over one epoch with the
 *     parameters fixed, the energy, force and stress sums agree to rounding
 *     and count the same force and stress components;
 *   - backend.static_shapes (padding computed, no shared filter rows) and
 *     bf16 products give the fp32 gradient within their rounding;
 *   - the loss denominators are the global batch's: a share computed with
 *     the whole batch's counts is that share of the whole batch's gradient;
 *   - ZeRO stages 1-3 (and offload) train to stage 0's bits where the
 *     reduction order is kept, stages 2-3 with accumulation within float32
 *     rounding; a replica allocates its stage's memory plan. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#define BFX_DATA "tests/data/emt_train_240.extxyz.gz"
#define BFX_TARGET "energy"
#define BFX_CUTOFF 4.0
#define BFX_MAX_NEIGHBORS 0
#include "tests/unit/backend_fixture.h"

static uint32_t *consecutive(uint32_t first, uint32_t n)
{
    uint32_t *ids = malloc(n * sizeof(uint32_t));
    for (uint32_t i = 0; i < n; i++) ids[i] = first + i;
    return ids;
}

/* Gradient and stats of packs first..first+n of F.packs with engine `eng`. */
static float *grad_with(pt_grad_engine *eng, uint32_t first, uint32_t n,
                        const pt_schnet_loss_norm *norm, pt_step_stats *st)
{
    float *g = malloc(F.model.n_params * sizeof(float));
    uint32_t *ids = consecutive(first, n);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    if (eng->compute(eng->self, &F.packs, ids, n, norm, g, st, &errs) != 0) {
        char buf[512];
        pt_errors_first(&errs, buf, sizeof buf);
        fail_msg("compute: %s", buf);
    }
    pt_errors_close(&errs);
    free(ids);
    return g;
}

typedef struct variant {
    int static_shapes;
    pt_precision precision;
} variant;

static float *grad_of_v(int R, int A, int b, uint32_t first, uint32_t n, pt_step_stats *st,
                        variant v)
{
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, R, A, b);
    assert_int_equal(d.loss.forces, 1);
    cfg.backend.static_shapes = v.static_shapes;
    cfg.training.precision = v.precision;
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = grad_with(&eng, first, n, NULL, st);
    eng.close(eng.self);
    return g;
}

static float *grad_of(int R, int A, int b, uint32_t first, uint32_t n, pt_step_stats *st)
{
    return grad_of_v(R, A, b, first, n, st, (variant){0, PT_PRECISION_FP32});
}

static void assert_stats_close(const pt_step_stats *a, const pt_step_stats *b, double tol)
{
    assert_int_equal(a->graphs, b->graphs);
    assert_int_equal(a->nodes, b->nodes);
    assert_int_equal(a->edges, b->edges);
    assert_int_equal(a->force_components, b->force_components);
    assert_int_equal(a->stress_components, b->stress_components);
    assert_true(fabs(a->loss_sum - b->loss_sum) <= tol * fabs(b->loss_sum));
    assert_true(fabs(a->forces_sse - b->forces_sse) <= tol * fabs(b->forces_sse));
    assert_true(fabs(a->stress_sse - b->stress_sse) <= tol * fabs(b->stress_sse) + 1e-300);
}

/* ---- one batch, any split ------------------------------------------------------- */

static void test_splits_give_one_batch_gradient(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    const uint32_t G = 8;
    assert_true(F.packs.n_packs >= 2 * G);
    pt_step_stats ref_st;
    float *ref = grad_of(1, 1, 8, G, G, &ref_st);
    assert_true(ref_st.force_components > 0);
    float *ref_up = adam_update(ref);
    static const int splits[][3] = {{2, 1, 4}, {1, 2, 4}, {2, 2, 2}, {4, 1, 2}, {1, 4, 2},
                                    {4, 2, 1}, {8, 1, 1}, {2, 4, 1}};
    float *first_of_b[9] = {0};
    for (size_t k = 0; k < sizeof splits / sizeof *splits; k++) {
        const int *s = splits[k];
        pt_step_stats st;
        float *g = grad_of(s[0], s[1], s[2], G, G, &st);
        double rd = rel_diff(g, ref, n);
        if (rd > 2e-6) fail_msg("split R=%d A=%d b=%d: gradient differs by %g", s[0], s[1], s[2], rd);
        float *up = adam_update(g);
        double ru = rel_diff(up, ref_up, n);
        if (ru > 1e-6) fail_msg("split R=%d A=%d b=%d: update differs by %g", s[0], s[1], s[2], ru);
        free(up);
        assert_stats_close(&st, &ref_st, 1e-9);
        if (first_of_b[s[2]]) {
            assert_memory_equal(g, first_of_b[s[2]], n * sizeof(float));
            free(g);
        } else {
            first_of_b[s[2]] = g;
        }
    }
    assert_true(memcmp(first_of_b[1], ref, n * sizeof(float)) != 0);
    for (int b = 0; b < 9; b++) free(first_of_b[b]);
    free(ref);
    free(ref_up);
}

/* The training loop's built-in engine computes what the backend computes. */
static void test_local_engine_same_bits(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 1, 1, 4);
    pt_grad_engine eng;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_grad_engine_open_local(&eng, &d, &errs), 0);
    pt_errors_close(&errs);
    pt_step_stats a, b;
    float *local = grad_with(&eng, 4, 4, NULL, &a);
    eng.close(eng.self);
    float *be = grad_of(1, 1, 4, 4, 4, &b);
    assert_memory_equal(local, be, F.model.n_params * sizeof(float));
    assert_true(a.loss_sum == b.loss_sum && a.forces_sse == b.forces_sse &&
                a.stress_sse == b.stress_sse);
    free(local);
    free(be);
}

static void test_padding_contributes_nothing(void **state)
{
    (void)state;
    pt_step_stats a, b;
    float *one = grad_of(1, 1, 4, 12, 4, &a);
    float *two = grad_of(2, 1, 4, 12, 4, &b);
    assert_memory_equal(one, two, F.model.n_params * sizeof(float));
    assert_true(a.loss_sum == b.loss_sum && a.forces_sse == b.forces_sse);
    assert_int_equal(a.force_components, b.force_components);
    free(one);
    free(two);
}

/* A rank's share computed with the whole batch's denominators is its
 * share of the whole batch's gradient: two halves add up to the whole. */
static void test_global_denominators(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 1, 1, 4);
    uint32_t *ids = consecutive(0, 8);
    pt_schnet_loss_norm whole;
    pt_train_loss_norm(&d, &F.packs, ids, 8, &whole);
    assert_true(whole.force_components > 0 && whole.graphs > 0);
    pt_grad_engine eng;
    open_ok(&eng, &d);
    pt_step_stats s1, s2, s;
    float *h1 = grad_with(&eng, 0, 4, &whole, &s1);
    float *h2 = grad_with(&eng, 4, 4, &whole, &s2);
    eng.close(eng.self);
    pt_step_stats both = s1;
    pt_step_stats_add(&both, &s2);
    float *all = grad_of(1, 1, 8, 0, 8, &s);
    for (size_t i = 0; i < n; i++) h1[i] += h2[i];
    assert_true(rel_diff(h1, all, n) <= 2e-6);
    assert_stats_close(&both, &s, 1e-12);
    /* the loss of the sums: the parts over their counts */
    pt_train_loss l = d.loss;
    double want = l.w.energy * s.loss_sum / (double)s.graphs +
                  l.w.forces * s.forces_sse / (double)s.force_components;
    assert_true(fabs(pt_step_stats_loss(&s, &l) - want) <= 1e-12 * want);
    free(ids);
    free(h1);
    free(h2);
    free(all);
}

/* ---- same curve whatever the loader ---------------------------------------------- */

static float *train_curve(int D, int async, int prefetch, double *curve, int max_steps)
{
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 2, 1, 2);
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
    const uint32_t G = 4;
    uint32_t *ids = consecutive(0, F.packs.n_packs);
    int step = 0;
    for (uint32_t first = 0; first < F.packs.n_packs && step < max_steps; first += G) {
        uint32_t cnt = F.packs.n_packs - first < G ? F.packs.n_packs - first : G;
        pt_step_stats st;
        assert_int_equal(eng.compute(eng.self, &F.packs, ids + first, cnt, NULL, g, &st, &errs),
                         0);
        curve[step++] = st.loss_sum + st.forces_sse;
        pt_optim_step(&opt, F.model.params_memory, g, 1e-3);
    }
    return run_finish(&eng, &opt, &errs, ids, g);
}

static void test_same_curve_whatever_the_loader(void **state)
{
    (void)state;
    enum { STEPS = 12 };
    double ref_curve[STEPS], curve[STEPS];
    float *ref = train_curve(1, 0, 1, ref_curve, STEPS);
    assert_true(memcmp(ref, F.init_params, F.model.n_params * sizeof(float)) != 0);
    static const int variants[][3] = {{1, 3, 1}, {0, 1, 3}, {1, 2, 4}};   /* async, prefetch, D */
    for (size_t k = 0; k < sizeof variants / sizeof *variants; k++) {
        const int *v = variants[k];
        float *p = train_curve(v[2], v[0], v[1], curve, STEPS);
        assert_memory_equal(curve, ref_curve, sizeof curve);
        assert_memory_equal(p, ref, F.model.n_params * sizeof(float));
        free(p);
    }
    free(ref);
}

/* ---- ZeRO (engine/backend/backend_zero.h) ------------------------------------------ */

/* `steps` Adam steps at R = 2 (A micro-batches of 2/A packs) on forces, the
 * engine's own update (at stage 0 too: R = 2 replicas split it). */
static float *zero_curve(int stage, int offload, int A, double *curve, int steps)
{
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 2, A, 2 / A);
    cfg.backend.zero_stage = stage;
    cfg.backend.offload_optimizer = offload;
    reset_params();
    pt_grad_engine eng;
    open_ok(&eng, &d);
    assert_true(eng.update != NULL);
    size_t n = F.model.n_params;
    float *g = malloc(n * sizeof(float));
    pt_optim_params op = pt_optim_defaults(PT_OPTIM_ADAM);
    pt_optim opt;
    assert_int_equal(pt_optim_init(&opt, &op, n), 0);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    uint32_t *ids = consecutive(0, F.packs.n_packs);
    for (int s = 0; s < steps; s++) {
        pt_step_stats st;
        assert_int_equal(eng.compute(eng.self, &F.packs, ids + 4 * s, 4, NULL, g, &st, &errs), 0);
        curve[s] = st.loss_sum + st.forces_sse;
        if (eng.update) assert_int_equal(eng.update(eng.self, &opt, g, 1e-3, 0.0, &errs), 0);
        else pt_optim_step(&opt, F.model.params_memory, g, 1e-3);
    }
    return run_finish(&eng, &opt, &errs, ids, g);
}

/* Every stage trains a forces job to stage 0's bits where the reduction
 * order is kept: stage 1 (and offload) at any split, stages 2-3 with one
 * micro-batch per replica (the layer hooks of the force step's passes:
 * stage 3 gathers each layer before the forward, the force backward, the
 * tangent pass and the second backward; stage 2 reduce-scatters each
 * layer's gradient as the second backward completes it). */
static void test_zero_stages(void **state)
{
    (void)state;
    enum { STEPS = 12 };
    assert_true(F.packs.n_packs >= 4 * STEPS);
    double ref_curve[STEPS], curve[STEPS];
    float *ref = zero_curve(0, 0, 1, ref_curve, STEPS);
    for (int stage = 1; stage <= 3; stage++)
        for (int off = 0; off <= 1; off++) {
            float *p = zero_curve(stage, off, 1, curve, STEPS);
            if (memcmp(p, ref, F.model.n_params * sizeof(float)))
                fail_msg("stage %d offload %d: parameters differ from stage 0", stage, off);
            assert_memory_equal(curve, ref_curve, sizeof curve);
            free(p);
        }
    free(ref);
    /* the plan takes every stage for a forces job */
    for (int stage = 0; stage <= 3; stage++) {
        pt_job_config cfg = F.cfg;
        cfg.backend.zero_stage = stage;
        pt_train_loss l;
        pt_errors errs;
        pt_errors_init(&errs, 0);
        assert_int_equal(pt_train_loss_resolve(&l, &cfg, &F.ds, &errs), 0);
        assert_true(l.forces);
        pt_errors_close(&errs);
    }
}

/* Stages 2-3 with accumulation sum each micro-batch over the replicas
 * before summing micro-batches: within float32 rounding of stage 0, and not
 * equal to it (the tolerance hides no no-op); offload gives the same stage's
 * bits. */
static void test_zero_accumulation_within_rounding(void **state)
{
    (void)state;
    enum { STEPS = 6 };
    const size_t n = F.model.n_params;
    double ref_curve[STEPS], curve[STEPS], off_curve[STEPS];
    float *ref = zero_curve(0, 0, 2, ref_curve, STEPS);
    int differed = 0;
    for (int stage = 2; stage <= 3; stage++) {
        float *p = zero_curve(stage, 0, 2, curve, STEPS);
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < n; i++) {
            num += ((double)p[i] - ref[i]) * ((double)p[i] - ref[i]);
            den += (double)ref[i] * ref[i];
        }
        /* 6 Adam steps amplify gradient rounding (≈1e-7) into ≈1e-6 */
        if (sqrt(num / den) > 1e-5)
            fail_msg("stage %d: parameters differ by %g", stage, sqrt(num / den));
        differed += memcmp(p, ref, n * sizeof(float)) != 0;
        for (int s = 0; s < STEPS; s++)
            assert_true(fabs(curve[s] - ref_curve[s]) <= 1e-4 * fabs(ref_curve[s]));
        float *q = zero_curve(stage, 1, 2, off_curve, STEPS);
        assert_memory_equal(q, p, n * sizeof(float));
        assert_memory_equal(off_curve, curve, sizeof curve);
        free(p);
        free(q);
    }
    assert_true(differed > 0);
    free(ref);
}

/* What a replica of a forces job allocates is the memory plan of its stage
 * (the FORCES_TRAIN arena; at stages 2-3 a layer buffer and the shard's
 * accumulation stack instead of full gradients). */
static void test_zero_allocations_follow_the_plan(void **state)
{
    (void)state;
    static const int layouts[][3] = {{2, 1, 2}, {2, 2, 1}, {3, 1, 1}};
    allocations_follow_the_plan(layouts, sizeof layouts / sizeof *layouts, PT_SCHNET_FORCES_TRAIN);
}

/* ---- packing methods, static shapes, bf16 ---------------------------------------- */

/* One epoch of `method` with the initial parameters, summed. */
static pt_step_stats epoch_sums(pt_pack_method method)
{
    pt_job_config cfg = F.cfg;
    pt_pack_request req = {.method = method};
    if (method >= PT_PACK_STATIC64) req.batch_size = 8;
    else if (method != PT_PACK_PAD) req.max_graphs = 4;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_packer pk;
    if (pt_packer_init(&pk, &req, F.natoms, F.nedges, F.ds.n_structs, F.ids, F.ds.n_structs,
                       &errs) != 0) {
        char buf[512];
        pt_errors_first(&errs, buf, sizeof buf);
        fail_msg("method %d: %s", (int)method, buf);
    }
    pt_packs packs = {0};
    assert_int_equal(pt_packer_epoch(&pk, 3, 0, &packs), 0);
    cfg.backend.replication_factor = 2;
    cfg.batching.model_batch_size = 2;
    pt_train_data d = {.cfg = &cfg, .ds = &F.ds, .graphs = &F.graphs, .target_key = F.target_key,
                       .model = &F.model, .limits = pk.limits};
    assert_int_equal(pt_train_loss_resolve(&d.loss, &cfg, &F.ds, &errs), 0);
    assert_int_equal(pt_train_layout_resolve(&d.layout, &cfg, 2, d.loss.forces, 0, &errs), 0);
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(F.model.n_params * sizeof(float));
    uint32_t *ids = consecutive(0, packs.n_packs);
    pt_step_stats tot = {0};
    for (uint32_t first = 0; first < packs.n_packs; first += 4) {
        uint32_t n = packs.n_packs - first < 4 ? packs.n_packs - first : 4;
        pt_step_stats st;
        assert_int_equal(eng.compute(eng.self, &packs, ids + first, n, NULL, g, &st, &errs), 0);
        pt_step_stats_add(&tot, &st);
    }
    eng.close(eng.self);
    pt_errors_close(&errs);
    free(g);
    free(ids);
    pt_packs_close(&packs);
    pt_packer_close(&pk);
    return tot;
}

static void test_every_packing_method(void **state)
{
    (void)state;
    pt_step_stats ref = epoch_sums(PT_PACK_LPFHP);
    assert_int_equal(ref.graphs, F.ds.n_structs);
    assert_int_equal(ref.force_components, 3 * (int64_t)F.ds.n_atoms);
    assert_int_equal(ref.stress_components, 9 * 130);
    for (int m = 1; m < PT_PACK_N_METHODS; m++) {
        pt_step_stats st = epoch_sums((pt_pack_method)m);
        assert_stats_close(&st, &ref, 1e-9);
    }
}

static void test_static_shapes_and_bf16(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    pt_step_stats a, b, c;
    float *ref = grad_of(2, 1, 2, 0, 4, &a);
    float *st = grad_of_v(2, 1, 2, 0, 4, &b, (variant){1, PT_PRECISION_FP32});
    double rd = rel_diff(st, ref, n);
    if (rd > 2e-6) fail_msg("static shapes: gradient differs by %g", rd);
    assert_stats_close(&b, &a, 1e-6);
    float *bf = grad_of_v(2, 1, 2, 0, 4, &c, (variant){0, PT_PRECISION_BF16});
    rd = rel_diff(bf, ref, n);
    /* bf16 products (8 mantissa bits): a few per cent, never the fp32 bits */
    if (!(rd > 1e-5 && rd < 5e-2)) fail_msg("bf16: gradient differs by %g", rd);
    assert_true(fabs(c.forces_sse - a.forces_sse) <= 2e-2 * a.forces_sse);
    free(ref);
    free(st);
    free(bf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_splits_give_one_batch_gradient),
        cmocka_unit_test(test_local_engine_same_bits),
        cmocka_unit_test(test_padding_contributes_nothing),
        cmocka_unit_test(test_global_denominators),
        cmocka_unit_test(test_same_curve_whatever_the_loader),
        cmocka_unit_test(test_zero_stages),
        cmocka_unit_test(test_zero_accumulation_within_rounding),
        cmocka_unit_test(test_zero_allocations_follow_the_plan),
        cmocka_unit_test(test_every_packing_method),
        cmocka_unit_test(test_static_shapes_and_bf16),
    };
    return cmocka_run_group_tests_name("backend_forces", tests, setup, teardown);
}
