/* test_plan.c — the plan of a job (engine/train/plan.h): the "auto" layout
 * on machines of several sizes, kind "mpi" with ranks alone, and the plan of
 * a dataset — the same limits whether the graphs are built (the worker) or
 * only counted (the submission check), and errors named by the
 * configuration's keys. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "engine/train/plan.h"
#include "tests/unit/tmp_fixture.h"

static char dir[64], ptd[128];
static pt_dataset ds;

static int setup(void **state)
{
    (void)state;
    if (tfx_mkdtemp(dir, sizeof dir, "plan")) return -1;
    snprintf(ptd, sizeof ptd, "%s/qm9.ptd", dir);
    char err[256];
    if (tfx_ingest("tests/data/train_qm9_400.extxyz.gz", ptd) || pt_dataset_open(&ds, ptd, err, sizeof err))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_dataset_close(&ds);
    tfx_rmtree(dir);
    return 0;
}

static pt_train_layout layout(const pt_job_config *cfg, int cores)
{
    pt_train_layout l;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_train_layout_resolve(&l, cfg, cores, &errs), 0);
    pt_errors_close(&errs);
    return l;
}

static void expect_layout(const pt_job_config *cfg, int cores, int R, int b, int threads)
{
    pt_train_layout l = layout(cfg, cores);
    if (l.replicas != R || l.micro_packs != b || l.threads != threads)
        fail_msg("%d cores: R %d b %d threads %d, want %d %d %d", cores, l.replicas, l.micro_packs,
                 l.threads, R, b, threads);
}

/* The default: one single-threaded replica per core (a power of two), the
 * global batch 16 packs on every machine. */
static void test_auto_layout(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    expect_layout(&cfg, 1, 1, 16, 1);
    expect_layout(&cfg, 2, 2, 8, 2);
    expect_layout(&cfg, 6, 4, 4, 6);
    expect_layout(&cfg, 16, 16, 1, 16);
    expect_layout(&cfg, 64, 16, 1, 64);
    for (int cores = 1; cores <= 64; cores++) {
        pt_train_layout l = layout(&cfg, cores);
        assert_int_equal(pt_train_layout_global_packs(&l), PT_JOB_AUTO_GLOBAL_PACKS);
    }
    /* threads pins the cores a job may use */
    cfg.backend.threads = 1;
    expect_layout(&cfg, 8, 1, 16, 1);
    /* accumulation: R·A still divides 16 */
    cfg.backend.threads = 0;
    cfg.backend.gradient_accumulation = 2;
    expect_layout(&cfg, 8, 8, 1, 8);
    expect_layout(&cfg, 2, 2, 4, 2);
    /* given values are kept, and the global batch never depends on the
     * machine: with model_batch_size given, auto replicas are 1 */
    cfg.backend.gradient_accumulation = 1;
    cfg.backend.replication_factor = 2;
    expect_layout(&cfg, 8, 2, 8, 8);
    cfg.backend.replication_factor = 0;
    cfg.batching.model_batch_size = 3;
    expect_layout(&cfg, 4, 1, 3, 4);
    expect_layout(&cfg, 1, 1, 3, 1);
}

/* `ranks: N` alone means N replicas, one per rank. */
static void test_auto_layout_mpi(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    const char *text = "{\"backend\":{\"kind\":\"mpi\",\"ranks\":2}}";
    assert_int_equal(pt_job_config_parse(&cfg, text, strlen(text), NULL, &errs), 0);
    pt_train_layout l = layout(&cfg, 8);
    assert_int_equal(l.ranks, 2);
    assert_int_equal(l.replicas, 2);
    assert_int_equal(l.micro_packs, 8);
    cfg.backend.ranks = 3;
    l = layout(&cfg, 8);
    assert_int_equal(l.replicas, 3);
    assert_int_equal(l.micro_packs, 5);
    /* a replication_factor that is given must still be a multiple of ranks */
    text = "{\"backend\":{\"kind\":\"mpi\",\"ranks\":2,\"replication_factor\":3}}";
    assert_int_equal(pt_job_config_parse(&cfg, text, strlen(text), NULL, &errs), -1);
    assert_string_equal(errs.items[0].field, "backend.replication_factor");
    pt_errors_close(&errs);
}

static pt_job_config small_job(void)
{
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    cfg.model.hidden = 16;
    cfg.model.filters = 16;
    return cfg;
}

/* The worker builds the graphs, the submission check counts their edges:
 * the same split, sizes and limits either way. */
static void test_plan_built_or_counted(void **state)
{
    (void)state;
    pt_job_config cfg = small_job();
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_plan a, b;
    assert_int_equal(pt_train_plan_init(&a, &cfg, &ds, PT_PLAN_GRAPHS, 2, &errs), 0);
    assert_int_equal(pt_train_plan_init(&b, &cfg, &ds, PT_PLAN_COUNT_EDGES, 2, &errs), 0);
    assert_int_equal(a.has_graphs, 1);
    assert_int_equal(b.has_graphs, 0);
    assert_memory_equal(a.nedges, b.nedges, ds.n_structs * sizeof(uint32_t));
    assert_int_equal(a.split.n_train + a.split.n_val + a.split.n_test, ds.n_structs);
    assert_memory_equal(&a.train_pk.limits, &b.train_pk.limits, sizeof a.train_pk.limits);
    assert_memory_equal(&a.val_pk.limits, &b.val_pk.limits, sizeof a.val_pk.limits);
    assert_int_equal(a.split_moved, b.split_moved);
    assert_true(a.train_pk.limits.max_nodes > 0 && a.test_pk.n_ids == a.split.n_test);
    assert_int_equal(a.layout.replicas, 2);
    assert_int_equal(a.target_key, (uint32_t)pt_dataset_find_target(&ds, "energy_U0"));
    pt_train_plan_close(&a);
    pt_train_plan_close(&b);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
}

static void expect_plan_error(const pt_job_config *cfg, const char *field, const char *message)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_plan p;
    assert_int_equal(pt_train_plan_init(&p, cfg, &ds, PT_PLAN_COUNT_EDGES, 1, &errs), -1);
    assert_true(errs.kept >= 1);
    assert_string_equal(errs.items[0].field, field);
    if (!strstr(errs.items[0].message, message))
        fail_msg("\"%s\" lacks \"%s\"", errs.items[0].message, message);
    assert_null(p.natoms);   /* closed on failure */
    pt_errors_close(&errs);
}

static void test_plan_errors(void **state)
{
    (void)state;
    pt_job_config cfg = small_job();
    snprintf(cfg.target, sizeof cfg.target, "energy");
    expect_plan_error(&cfg, "target", "the dataset has no numeric key 'energy'; its keys: qm9_id, ");
    cfg = small_job();
    cfg.batching.max_nodes = 3;
    expect_plan_error(&cfg, "batching.max_nodes", "atoms, more than max_nodes 3");
    cfg = small_job();
    cfg.training.split[0] = 0.999;
    cfg.training.split[1] = 0.001;
    cfg.training.split[2] = 0.0;
    expect_plan_error(&cfg, "training.split", "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_layout),
        cmocka_unit_test(test_auto_layout_mpi),
        cmocka_unit_test(test_plan_built_or_counted),
        cmocka_unit_test(test_plan_errors),
    };
    return cmocka_run_group_tests_name("plan", tests, setup, teardown);
}
