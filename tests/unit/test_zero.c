/* test_zero.c — ZeRO stages 1-3 and optimizer offload on the emulated
 * replicas (engine/backend/backend_zero.h), on the 240-molecule QM9 fixture:
 *
 *   - every stage, with and without offload, trains to the parameters and
 *     loss curve of stage 0 bit for bit where the reduction order is kept
 *     (stage 1 at any accumulation; stages 2-3 with one micro-batch per
 *     replica; offload against the same stage without), and within float32
 *     reduction-order rounding where it is not (stages 2-3 with A > 1,
 *     clipping's sharded norm) — and those really differ from stage 0, so
 *     the tolerance is not hiding a no-op;
 *   - replicas 1, 2, 3 (uneven shards) and 4, accumulation 1, 2, 4;
 *   - inside pt_train_run: a run stopped at a checkpoint and resumed under
 *     the same layout ends with the parameters of a run that never stopped;
 *     under another stage the resume is refused as another configuration;
 *   - what a replica allocates equals the memory plan of its stage;
 *   - the offload's charged link time is 16 bytes per shard parameter per
 *     step at PT_ZERO_LINK_GBPS;
 *   - the configuration rules (range, offload needs a stage). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "engine/backend/backend_zero.h"
#include "tests/unit/backend_fixture.h"

typedef struct run_opts {
    int R, A, b, stage, offload;
    double clip;
    int steps;
    int serial;   /* the loop's own clip + pt_optim_step even where the engine updates */
    int fused;    /* the loop's offer of the update before compute (arm_update) */
} run_opts;

/* Trains `steps` optimizer steps over epoch 0's packs from the initial
 * parameters, the way the loop does (engine update when the engine has one,
 * else clip + pt_optim_step), AdamW with weight decay so the decay path is
 * exercised.  Returns the final parameters; curve[] gets the loss sums. */
static float *train(const run_opts *o, double *curve, pt_backend_stats *bs)
{
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, o->R, o->A, o->b);
    cfg.backend.zero_stage = o->stage;
    cfg.backend.offload_optimizer = o->offload;
    reset_params();
    pt_grad_engine eng;
    open_ok(&eng, &d);
    /* stage 0 splits the update over R > 1 replicas (backend_zero.h), and
     * can apply it inside the all-reduce */
    assert_true((eng.update != NULL) == (o->stage > 0 || o->R > 1));
    assert_true((eng.arm_update != NULL) == (o->stage == 0 && o->R > 1));
    size_t n = F.model.n_params;
    float *g = malloc(n * sizeof(float));
    pt_optim_params op = pt_optim_defaults(PT_OPTIM_ADAMW);
    pt_optim opt;
    assert_int_equal(pt_optim_init(&opt, &op, n), 0);
    /* a decay exemption, as the trainer makes for atomref */
    assert_int_equal(pt_optim_exempt_decay(&opt, 0, 100), 0);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const uint32_t G = (uint32_t)(o->R * o->A * o->b);
    uint32_t *ids = malloc(F.packs.n_packs * sizeof(uint32_t));
    for (uint32_t i = 0; i < F.packs.n_packs; i++) ids[i] = i;
    uint32_t first = 0;
    for (int s = 0; s < o->steps; s++) {
        if (first >= F.packs.n_packs) first = 0;
        uint32_t cnt = F.packs.n_packs - first < G ? F.packs.n_packs - first : G;
        pt_step_stats st;
        if (o->fused && eng.arm_update)
            assert_int_equal(eng.arm_update(eng.self, &opt, 1e-3, o->clip), o->clip <= 0);
        assert_int_equal(eng.compute(eng.self, &F.packs, ids + first, cnt, NULL, g, &st, &errs), 0);
        curve[s] = st.loss_sum;
        if (eng.update && !o->serial) {
            assert_int_equal(eng.update(eng.self, &opt, g, 1e-3, o->clip, &errs), 0);
        } else {
            if (o->clip > 0) pt_grad_clip(g, n, o->clip);
            pt_optim_step(&opt, F.model.params_memory, g, 1e-3);
        }
        first += cnt;
    }
    assert_int_equal(opt.step, o->steps);
    pt_backend_stats own;
    if (!bs) bs = &own;
    pt_backend_stats_get(&eng, bs);
    assert_int_equal(bs->fused_updates, o->fused && eng.arm_update && o->clip <= 0 ? o->steps : 0);
    return run_finish(&eng, &opt, &errs, ids, g);
}

enum { STEPS = 12 };

/* Stage 0's update split over the replicas, as a second dispatch and
 * applied inside the all-reduce (fused; declined with clipping): the bits
 * of the loop's serial update, with and without clipping, uneven shards and
 * accumulation stacks of 1-3 levels included. */
static void test_stage0_split_update_is_serial_bits(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    static const int layouts[][3] = {{2, 1, 2}, {3, 1, 1}, {4, 2, 1}, {2, 4, 1}};
    for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
        for (int clip = 0; clip <= 1; clip++) {
            const int *l = layouts[k];
            double ref_curve[STEPS], curve[STEPS];
            run_opts o = {.R = l[0], .A = l[1], .b = l[2], .stage = 0, .steps = STEPS,
                          .clip = clip ? 0.05 : 0.0, .serial = 1};
            float *ref = train(&o, ref_curve, NULL);
            o.serial = 0;
            for (int fused = 0; fused <= 1; fused++) {
                o.fused = fused;
                float *p = train(&o, curve, NULL);
                if (memcmp(p, ref, n * sizeof(float)) != 0)
                    fail_msg("R=%d A=%d b=%d clip %d fused %d: split update differs from the "
                             "serial one (relative %g)", l[0], l[1], l[2], clip, fused,
                             rel_diff(p, ref, n));
                assert_memory_equal(curve, ref_curve, sizeof curve);
                free(p);
            }
            free(ref);
        }
    }
}

/* An update offered for a step whose loss is not finite (a NaN parameter)
 * is not applied: parameters, moments and step count stay as they were, as
 * the loop, which stops there, expects; an applied one, with the per-tensor
 * all-reduce, has the serial update's bits, leaves the gradient buffer
 * unwritten and is counted only by an update call with the step's own
 * optimizer and gradient buffer. */
static void test_fused_update_only_for_a_finite_step(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    pt_job_config cfg;
    pt_train_data d = data_for(&cfg, 2, 1, 2);
    cfg.backend.merge_all_reduce = 0;
    pt_grad_engine eng;
    open_ok(&eng, &d);
    float *g = malloc(n * sizeof(float));
    float *before = malloc(n * sizeof(float));
    assert_non_null(g);
    assert_non_null(before);
    pt_optim_params op = pt_optim_defaults(PT_OPTIM_ADAMW);
    pt_optim opt, other;
    assert_int_equal(pt_optim_init(&opt, &op, n), 0);
    assert_int_equal(pt_optim_init(&other, &op, n), 0);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    uint32_t ids[4] = {0, 1, 2, 3};
    pt_step_stats st;
    F.model.params_memory[n - 1] = NAN;
    memcpy(before, F.model.params_memory, n * sizeof(float));
    assert_int_equal(eng.arm_update(eng.self, &opt, 1e-3, 0.0), 1);
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 4, NULL, g, &st, &errs), 0);
    assert_false(pt_step_stats_finite(&st));
    assert_memory_equal(F.model.params_memory, before, n * sizeof(float));
    for (size_t i = 0; i < n; i++) assert_true(opt.m[i] == 0.0f && opt.v[i] == 0.0f);
    assert_int_equal(opt.step, 0);
    reset_params();

    /* a finite step: its gradient (not armed: nothing applied) ... */
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 4, NULL, g, &st, &errs), 0);
    assert_memory_equal(F.model.params_memory, F.init_params, n * sizeof(float));
    pt_optim ref;
    assert_int_equal(pt_optim_init(&ref, &op, n), 0);
    memcpy(before, F.init_params, n * sizeof(float));
    pt_optim_step(&ref, before, g, 1e-3);
    /* ... then armed: applied in compute, g untouched, counted by update */
    for (size_t i = 0; i < n; i++) g[i] = -3.0f;
    assert_int_equal(eng.arm_update(eng.self, &opt, 1e-3, 0.0), 1);
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 4, NULL, g, &st, &errs), 0);
    assert_true(pt_step_stats_finite(&st));
    assert_int_equal(opt.step, 0);
    for (size_t i = 0; i < n; i++) assert_true(g[i] == -3.0f);
    assert_memory_equal(F.model.params_memory, before, n * sizeof(float));
    assert_memory_equal(opt.m, ref.m, n * sizeof(float));
    assert_memory_equal(opt.v, ref.v, n * sizeof(float));
    assert_true(memcmp(before, F.init_params, n * sizeof(float)) != 0);
    pt_optim_close(&ref);
    assert_int_equal(eng.update(eng.self, &opt, g, 1e-3, 0.0, &errs), 0);
    assert_int_equal(opt.step, 1);
    /* the same again, counted with another optimizer: refused */
    assert_int_equal(eng.arm_update(eng.self, &opt, 1e-3, 0.0), 1);
    assert_int_equal(eng.compute(eng.self, &F.packs, ids, 4, NULL, g, &st, &errs), 0);
    assert_int_equal(eng.update(eng.self, &other, g, 1e-3, 0.0, &errs), -1);
    assert_int_equal(errs.kept, 1);
    assert_string_equal(errs.items[0].message,
                        "update called with another optimizer or gradient buffer than the "
                        "step's, which applied it already");
    pt_backend_stats bs;
    assert_int_equal(pt_backend_stats_get(&eng, &bs), 0);
    assert_int_equal(bs.fused_updates, 2);
    pt_optim_close(&other);
    free(before);
    float *p = run_finish(&eng, &opt, &errs, NULL, g);
    free(p);
}

/* Stage 1 at any split, stages 2-3 with A = 1: the bits of stage 0. */
static void test_same_bits_where_order_is_kept(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    static const int layouts[][3] = {{2, 1, 2}, {4, 1, 1}, {3, 1, 1}, {1, 1, 4}, {2, 2, 1},
                                     {2, 4, 1}};
    for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
        const int *l = layouts[k];
        double ref_curve[STEPS], curve[STEPS];
        run_opts o = {.R = l[0], .A = l[1], .b = l[2], .stage = 0, .steps = STEPS};
        float *ref = train(&o, ref_curve, NULL);
        assert_true(memcmp(ref, F.init_params, n * sizeof(float)) != 0);
        for (int stage = 1; stage <= 3; stage++) {
            if (stage >= 2 && l[1] > 1) continue;   /* order changes: next test */
            for (int off = 0; off <= 1; off++) {
                o.stage = stage;
                o.offload = off;
                float *p = train(&o, curve, NULL);
                if (memcmp(p, ref, n * sizeof(float)) != 0)
                    fail_msg("R=%d A=%d b=%d stage %d offload %d: parameters differ from stage 0 "
                             "(relative %g)", l[0], l[1], l[2], stage, off, rel_diff(p, ref, n));
                assert_memory_equal(curve, ref_curve, sizeof curve);
                free(p);
            }
        }
        free(ref);
    }
}

/* Stages 2-3 with accumulation: micro-batches summed after the replicas, so
 * within rounding of stage 0 — and not equal to it; offload still the bits
 * of the same stage without it. */
static void test_accumulation_within_rounding(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    static const int layouts[][3] = {{2, 2, 1}, {2, 4, 1}, {4, 2, 1}};
    int differed = 0;
    for (size_t k = 0; k < sizeof layouts / sizeof *layouts; k++) {
        const int *l = layouts[k];
        double ref_curve[STEPS], curve[STEPS], off_curve[STEPS];
        run_opts o = {.R = l[0], .A = l[1], .b = l[2], .stage = 0, .steps = STEPS};
        float *ref = train(&o, ref_curve, NULL);
        for (int stage = 2; stage <= 3; stage++) {
            o.stage = stage;
            o.offload = 0;
            float *p = train(&o, curve, NULL);
            double rd = rel_diff(p, ref, n);
            /* 12 Adam steps amplify gradient rounding (≈1e-7) into ≈1e-6 */
            if (rd > 1e-5) fail_msg("R=%d A=%d stage %d: parameters differ by %g", l[0], l[1], stage, rd);
            differed += memcmp(p, ref, n * sizeof(float)) != 0;
            for (int s = 0; s < STEPS; s++)
                assert_true(fabs(curve[s] - ref_curve[s]) <= 1e-4 * fabs(ref_curve[s]));
            o.offload = 1;
            float *q = train(&o, off_curve, NULL);
            assert_memory_equal(q, p, n * sizeof(float));
            assert_memory_equal(off_curve, curve, sizeof curve);
            free(p);
            free(q);
        }
        free(ref);
    }
    assert_true(differed > 0);
}

/* Clipping: the sharded norm is a sum of shard sums. */
static void test_clipping(void **state)
{
    (void)state;
    const size_t n = F.model.n_params;
    double ref_curve[STEPS], curve[STEPS];
    run_opts o = {.R = 4, .A = 1, .b = 1, .stage = 0, .clip = 0.05, .steps = STEPS};
    float *ref = train(&o, ref_curve, NULL);
    run_opts plain = o;
    plain.clip = 0;
    float *unclipped = train(&plain, curve, NULL);
    /* the threshold is low enough to bite */
    assert_true(rel_diff(unclipped, ref, n) > 1e-4);
    for (int stage = 1; stage <= 3; stage++) {
        o.stage = stage;
        float *p = train(&o, curve, NULL);
        double rd = rel_diff(p, ref, n);
        if (rd > 1e-6) fail_msg("stage %d with clipping: parameters differ by %g", stage, rd);
        free(p);
    }
    free(ref);
    free(unclipped);
}

static void test_offload_charges_the_link(void **state)
{
    (void)state;
    double curve[STEPS];
    pt_backend_stats bs;
    run_opts o = {.R = 4, .A = 1, .b = 1, .stage = 2, .offload = 1, .steps = 3};
    free(train(&o, curve, &bs));
    const size_t n = F.model.n_params;
    /* all replicas: m and v, in and out, every shard once per step */
    assert_int_equal(bs.offload_bytes, 3 * 4 * (int64_t)(16 * ((n + 3) / 4)));
    double want = 3 * 16.0 * (double)((n + 3) / 4) / (PT_ZERO_LINK_GBPS * 1e9);
    assert_true(fabs(bs.offload_seconds - want) <= 1e-12 + 1e-9 * want);
    o.offload = 0;
    free(train(&o, curve, &bs));
    assert_int_equal(bs.offload_bytes, 0);
}

/* What replica 0 really allocated equals the memory plan of its stage. */
static void test_allocations_follow_the_plan(void **state)
{
    (void)state;
    static const int layouts[][3] = {{4, 2, 1}, {3, 1, 2}, {1, 4, 1}};
    allocations_follow_the_plan(layouts, sizeof layouts / sizeof *layouts, PT_SCHNET_ENERGY);
}

/* ---- inside the loop: checkpoint and resume ---------------------------------- */

static int stop_after(void *user)
{
    int *left = user;
    return --*left <= 0;
}

static float *loop_run(int stage, int offload, const char *dir, int stop_at, const char *resume,
                       char *ckpt_out, size_t ckpt_len)
{
    pt_job_config cfg = F.cfg;
    cfg.backend.replication_factor = 2;
    cfg.backend.gradient_accumulation = 2;
    cfg.batching.model_batch_size = 1;
    cfg.backend.zero_stage = stage;
    cfg.backend.offload_optimizer = offload;
    cfg.training.epochs = 2;
    cfg.training.max_steps = 30;
    cfg.training.log_every = 5;
    int left = stop_at;
    pt_train_options opt = {.engine_open = pt_backend_open, .resume_path = resume,
                            .user = &left, .should_stop = stop_at ? stop_after : NULL};
    pt_train_result res;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_train_run(&cfg, &F.ds, dir, &opt, &res, &errs);
    if (rc) {
        char buf[512];
        pt_errors_first(&errs, buf, sizeof buf);
        fail_msg("train (stage %d): %s", stage, buf);
    }
    pt_errors_close(&errs);
    if (ckpt_out) snprintf(ckpt_out, ckpt_len, "%s", res.last_checkpoint);
    if (stop_at) {
        assert_string_equal(res.stop_reason, "cancelled");
        return NULL;
    }
    pt_schnet m;
    char path[400];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    pt_errors_init(&errs, 0);
    if (pt_schnet_load(&m, path, &errs)) {
        char buf[512];
        pt_errors_first(&errs, buf, sizeof buf);
        fail_msg("load %s: %s", path, buf);
    }
    pt_errors_close(&errs);
    float *out = malloc(m.n_params * sizeof(float));
    memcpy(out, m.params_memory, m.n_params * sizeof(float));
    pt_schnet_close(&m);
    return out;
}

static void rm_rf(const char *dir)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_checkpoint_resume(void **state)
{
    (void)state;
    char dir[] = "/tmp/pt_test_zero_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char a[300], b[300];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    float *ref = loop_run(0, 0, a, 0, NULL, NULL, 0);
    size_t n;
    pt_schnet m0;
    char path[320];
    snprintf(path, sizeof path, "%s/model.safetensors", a);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_schnet_load(&m0, path, &errs), 0);
    n = m0.n_params;
    pt_schnet_close(&m0);
    pt_errors_close(&errs);
    for (int stage = 1; stage <= 3; stage++) {
        rm_rf(b);
        float *whole = loop_run(stage, stage == 2, b, 0, NULL, NULL, 0);
        /* stage 1: the bits of stage 0; 2-3 accumulate (A = 2) in another order */
        if (stage == 1) assert_memory_equal(whole, ref, n * sizeof(float));
        else assert_true(rel_diff(whole, ref, n) < 1e-5);
        rm_rf(b);
        char ck[4200];
        free(loop_run(stage, stage == 2, b, 7, NULL, ck, sizeof ck));
        assert_true(ck[0] != '\0');
        float *resumed = loop_run(stage, stage == 2, b, 0, ck, NULL, 0);
        assert_memory_equal(resumed, whole, n * sizeof(float));
        free(resumed);
        free(whole);
        /* another layout (the next stage, or stage 0) is another configuration:
         * refused, never re-sharded */
        pt_job_config cfg = F.cfg;
        cfg.backend.replication_factor = 2;
        cfg.backend.gradient_accumulation = 2;
        cfg.batching.model_batch_size = 1;
        cfg.backend.zero_stage = (stage + 1) % 4;
        cfg.training.epochs = 2;
        cfg.training.max_steps = 30;
        cfg.training.log_every = 5;
        pt_train_options opt = {.engine_open = pt_backend_open, .resume_path = ck};
        pt_train_result res;
        pt_errors_init(&errs, 0);
        char c[300];
        snprintf(c, sizeof c, "%s/c", dir);
        assert_int_equal(pt_train_run(&cfg, &F.ds, c, &opt, &res, &errs), -1);
        char msg[512];
        pt_errors_first(&errs, msg, sizeof msg);
        if (!strstr(msg, "the checkpoint was made with another job configuration"))
            fail_msg("stage %d checkpoint resumed at stage %d: %s", stage, cfg.backend.zero_stage,
                     msg);
        pt_errors_close(&errs);
    }
    free(ref);
    rm_rf(dir);
}

/* ---- configuration ------------------------------------------------------------- */

static void test_config_rules(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const char *ok = "{\"target\":\"e\",\"backend\":{\"zero_stage\":3,\"offload_optimizer\":true}}";
    assert_int_equal(pt_job_config_parse(&cfg, ok, strlen(ok), "job.json", &errs), 0);
    assert_int_equal(cfg.backend.zero_stage, 3);
    assert_true(cfg.backend.offload_optimizer);
    char *dump = pt_job_config_dump(&cfg);
    assert_non_null(strstr(dump, "\"zero_stage\":3"));
    assert_non_null(strstr(dump, "\"offload_optimizer\":true"));
    free(dump);
    /* the defaults are left out of the canonical form (older jobs' hashes) */
    pt_job_config_defaults(&cfg);
    dump = pt_job_config_dump(&cfg);
    assert_null(strstr(dump, "zero_stage"));
    assert_null(strstr(dump, "offload_optimizer"));
    free(dump);
    static const char *const bad[][2] = {
        {"{\"target\":\"e\",\"backend\":{\"zero_stage\":4}}", "backend.zero_stage"},
        {"{\"target\":\"e\",\"backend\":{\"zero_stage\":-1}}", "backend.zero_stage"},
        {"{\"target\":\"e\",\"backend\":{\"zero_stage\":\"2\"}}", "backend.zero_stage"},
        {"{\"target\":\"e\",\"backend\":{\"offload_optimizer\":true}}", "backend.offload_optimizer"},
        {"{\"target\":\"e\",\"backend\":{\"offload_optimizer\":1,\"zero_stage\":1}}",
         "backend.offload_optimizer"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        pt_errors_clear(&errs);
        assert_int_equal(pt_job_config_parse(&cfg, bad[k][0], strlen(bad[k][0]), "job.json", &errs),
                         -1);
        int found = 0;
        for (size_t e = 0; e < errs.kept; e++) found |= !strcmp(errs.items[e].field, bad[k][1]);
        if (!found) fail_msg("%s: no error on %s", bad[k][0], bad[k][1]);
    }
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage0_split_update_is_serial_bits),
        cmocka_unit_test(test_fused_update_only_for_a_finite_step),
        cmocka_unit_test(test_same_bits_where_order_is_kept),
        cmocka_unit_test(test_accumulation_within_rounding),
        cmocka_unit_test(test_clipping),
        cmocka_unit_test(test_offload_charges_the_link),
        cmocka_unit_test(test_allocations_follow_the_plan),
        cmocka_unit_test(test_checkpoint_resume),
        cmocka_unit_test(test_config_rules),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
