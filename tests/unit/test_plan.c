/* test_plan.c — the plan of a job (engine/train/plan.h): the "auto" layout
 * on machines of several sizes, halved micro-batches for large packs, kind
 * "mpi" with ranks alone, and the plan of
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

static char dir[64], ptd[128], emt_ptd[128];
static pt_dataset ds, emt;   /* QM9 (no forces); EMT (energy, forces, stress) */

static int setup(void **state)
{
    (void)state;
    if (tfx_mkdtemp(dir, sizeof dir, "plan")) return -1;
    snprintf(ptd, sizeof ptd, "%s/qm9.ptd", dir);
    char err[256];
    if (tfx_ingest("tests/data/train_qm9_400.extxyz.gz", ptd) || pt_dataset_open(&ds, ptd, err, sizeof err))
        return -1;
    snprintf(emt_ptd, sizeof emt_ptd, "%s/emt.ptd", dir);
    if (tfx_ingest("tests/data/emt_train_240.extxyz.gz", emt_ptd) ||
        pt_dataset_open(&emt, emt_ptd, err, sizeof err))
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_dataset_close(&ds);
    pt_dataset_close(&emt);
    tfx_rmtree(dir);
    return 0;
}

static pt_train_layout layout_of(const pt_job_config *cfg, int cores, int forces)
{
    pt_train_layout l;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_train_layout_resolve(&l, cfg, cores, forces, 0, &errs), 0);
    pt_errors_close(&errs);
    return l;
}

static pt_train_layout layout(const pt_job_config *cfg, int cores)
{
    return layout_of(cfg, cores, 0);
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

/* A job trained on forces: micro-batches of one pack, as many more of them
 * (the global batch unchanged); given values are kept. */
static void test_auto_layout_forces(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);
    static const int want[][4] = {{1, 1, 16}, {2, 2, 8}, {6, 4, 4}, {16, 16, 1}, {64, 16, 1}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        pt_train_layout l = layout_of(&cfg, want[k][0], 1);
        assert_int_equal(l.replicas, want[k][1]);
        assert_int_equal(l.accumulation, want[k][2]);
        assert_int_equal(l.micro_packs, 1);
    }
    for (int cores = 1; cores <= 64; cores++) {
        pt_train_layout l = layout_of(&cfg, cores, 1), e = layout(&cfg, cores);
        assert_int_equal(pt_train_layout_global_packs(&l), PT_JOB_AUTO_GLOBAL_PACKS);
        assert_int_equal(l.replicas, e.replicas);
        assert_int_equal(l.threads, e.threads);
    }
    cfg.backend.gradient_accumulation = 2;
    pt_train_layout l = layout_of(&cfg, 2, 1);
    assert_int_equal(l.replicas * 100 + l.accumulation * 10 + l.micro_packs, 281);
    /* model_batch_size given: kept, as for energy */
    cfg.backend.gradient_accumulation = 1;
    cfg.batching.model_batch_size = 4;
    l = layout_of(&cfg, 2, 1);
    assert_int_equal(l.replicas * 100 + l.accumulation * 10 + l.micro_packs, 114);
    /* kind mpi: R = ranks, b = 1 */
    pt_job_config_defaults(&cfg);
    cfg.backend.kind = PT_JOB_BACKEND_MPI;
    cfg.backend.ranks = 2;
    l = layout_of(&cfg, 8, 1);
    assert_int_equal(l.replicas * 100 + l.accumulation * 10 + l.micro_packs, 281);
}

static pt_train_layout layout_edges(const pt_job_config *cfg, int cores, int forces,
                                    int32_t max_edges)
{
    pt_train_layout l;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_train_layout_resolve(&l, cfg, cores, forces, max_edges, &errs), 0);
    pt_errors_close(&errs);
    return l;
}

#define RAB(l) ((l).replicas * 100 + (l).accumulation * 10 + (l).micro_packs)

/* Large packs: b auto halves (A doubles) while one per-edge array of a
 * micro-batch, b x max_edges x filters floats, is above
 * PT_PLAN_MICRO_EDGE_BYTES; the global batch and R never change, given
 * values are kept. */
static void test_auto_layout_large_packs(void **state)
{
    (void)state;
    pt_job_config cfg;
    pt_job_config_defaults(&cfg);   /* filters 100 */
    /* water's LPFHP packs (4,500 edge slots): 2 x 4 micro-batches of 2 packs */
    assert_int_equal(RAB(layout_edges(&cfg, 2, 0, 4500)), 242);
    assert_int_equal(layout_edges(&cfg, 1, 0, 4500).micro_packs, 2);
    assert_int_equal(layout_edges(&cfg, 1, 0, 4500).accumulation, 8);
    /* QM9's (826): unchanged on 1 and 2 cores, as with the limits unknown */
    assert_int_equal(RAB(layout_edges(&cfg, 2, 0, 826)), 218);
    assert_int_equal(RAB(layout_edges(&cfg, 2, 0, 0)), 218);
    assert_int_equal(layout_edges(&cfg, 1, 0, 826).micro_packs, 16);
    /* wider filters halve further, down to one pack */
    cfg.model.filters = 200;
    assert_int_equal(RAB(layout_edges(&cfg, 2, 0, 4500)), 281);
    assert_int_equal(RAB(layout_edges(&cfg, 2, 0, 1000000)), 281);
    cfg.model.filters = 100;
    const int32_t edges[] = {0, 1, 826, 2000, 4500, 9000, 40000};
    for (int cores = 1; cores <= 64; cores++)
        for (size_t e = 0; e < sizeof edges / sizeof edges[0]; e++) {
            pt_train_layout l = layout_edges(&cfg, cores, 0, edges[e]), u = layout(&cfg, cores);
            assert_int_equal(pt_train_layout_global_packs(&l), PT_JOB_AUTO_GLOBAL_PACKS);
            assert_int_equal(l.replicas, u.replicas);
            const int64_t bytes = (int64_t)l.micro_packs * edges[e] * cfg.model.filters * 4;
            assert_true(bytes <= PT_PLAN_MICRO_EDGE_BYTES || l.micro_packs == 1);
            /* the largest such b: twice it would be over */
            if (l.micro_packs < u.micro_packs) assert_true(2 * bytes > PT_PLAN_MICRO_EDGE_BYTES);
        }
    /* accumulation given: halved from 16 / (R·A) */
    cfg.backend.gradient_accumulation = 2;
    assert_int_equal(RAB(layout_edges(&cfg, 2, 0, 4500)), 242);
    /* forces: one pack already */
    cfg.backend.gradient_accumulation = 1;
    assert_int_equal(RAB(layout_edges(&cfg, 2, 1, 4500)), 281);
    /* model_batch_size given: the user's split, kept */
    cfg.batching.model_batch_size = 8;
    cfg.backend.replication_factor = 2;
    assert_int_equal(RAB(layout_edges(&cfg, 2, 0, 4500)), 218);
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
    /* the layout sees the packs' edge slots: packs of up to 20,000 (16
     * filters: 1.28 MB per pack) run as 2 x 2 micro-batches of 4 */
    cfg.batching.max_edges = 20000;
    assert_int_equal(pt_train_plan_init(&a, &cfg, &ds, PT_PLAN_COUNT_EDGES, 2, &errs), 0);
    assert_int_equal(a.train_pk.limits.max_edges, 20000);
    assert_int_equal(RAB(a.layout), 224);
    pt_train_plan_close(&a);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
}

static void expect_plan_error_on(const pt_dataset *data, const pt_job_config *cfg,
                                 const char *field, const char *message)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_plan p;
    assert_int_equal(pt_train_plan_init(&p, cfg, data, PT_PLAN_COUNT_EDGES, 1, &errs), -1);
    assert_true(errs.kept >= 1);
    assert_string_equal(errs.items[0].field, field);
    if (!strstr(errs.items[0].message, message))
        fail_msg("\"%s\" lacks \"%s\"", errs.items[0].message, message);
    assert_null(p.natoms);   /* closed on failure */
    pt_errors_close(&errs);
}

static void expect_plan_error(const pt_job_config *cfg, const char *field, const char *message)
{
    expect_plan_error_on(&ds, cfg, field, message);
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

static pt_train_loss loss_of(const pt_job_config *cfg, const pt_dataset *data)
{
    pt_train_loss l;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_train_loss_resolve(&l, cfg, data, &errs), 0);
    assert_int_equal(errs.total, 0);
    pt_errors_close(&errs);
    return l;
}

/* training.loss resolved on a dataset: "auto" is forces weight 1 and
 * energies per atom where there are forces, the energy-only default
 * (weight 1, total: pt_schnet_loss's loss) where there are none. */
static void test_loss_resolved(void **state)
{
    (void)state;
    pt_job_config cfg = small_job();
    pt_train_loss l = loss_of(&cfg, &ds);
    assert_int_equal(l.forces, 0);
    assert_int_equal(l.with_forces, 0);
    assert_true(l.w.energy == 1.0 && l.w.forces == 0.0 && l.w.stress == 0.0);
    assert_int_equal(l.w.energy_per_atom, 0);
    l = loss_of(&cfg, &emt);
    assert_int_equal(l.forces, 1);
    assert_int_equal(l.with_forces, 240);
    assert_int_equal(l.with_stress, 130);   /* the slice's T T T slabs and bulk cells */
    assert_true(l.w.energy == 1.0 && l.w.forces == 1.0 && l.w.stress == 0.0);
    assert_int_equal(l.w.energy_per_atom, 1);
    /* explicit values are kept */
    cfg.training.loss = (pt_job_loss){.energy_weight = 0.01, .forces_weight = 0.99,
                                      .stress_weight = 5.0, .energy = PT_JOB_ENERGY_TOTAL};
    l = loss_of(&cfg, &emt);
    assert_true(l.w.energy == 0.01 && l.w.forces == 0.99 && l.w.stress == 5.0);
    assert_int_equal(l.w.energy_per_atom, 0);
    /* stress alone trains through the force path; per atom without forces */
    cfg.training.loss = (pt_job_loss){.energy_weight = 1.0, .forces_weight = 0.0,
                                      .stress_weight = 1.0, .energy = PT_JOB_ENERGY_AUTO};
    l = loss_of(&cfg, &emt);
    assert_int_equal(l.forces, 1);
    assert_int_equal(l.w.energy_per_atom, 1);
    cfg.training.loss = (pt_job_loss){.energy_weight = 2.0, .forces_weight = PT_JOB_WEIGHT_AUTO,
                                      .energy = PT_JOB_ENERGY_PER_ATOM};
    l = loss_of(&cfg, &ds);
    assert_int_equal(l.forces, 0);
    assert_int_equal(l.w.energy_per_atom, 1);
    assert_true(l.w.energy == 2.0);
    /* the plan carries it */
    cfg = small_job();
    snprintf(cfg.target, sizeof cfg.target, "energy");
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_plan p;
    assert_int_equal(pt_train_plan_init(&p, &cfg, &emt, PT_PLAN_COUNT_EDGES, 1, &errs), 0);
    assert_int_equal(p.loss.forces, 1);
    pt_train_plan_close(&p);
    pt_errors_close(&errs);
}

/* A weight the dataset has no labels for, a forces key naming nothing, and a
 * loss with nothing to train: refused by the plan, at the key to change. */
static void test_loss_errors(void **state)
{
    (void)state;
    pt_job_config cfg = small_job();
    cfg.training.loss.forces_weight = 1.0;
    expect_plan_error(&cfg, "training.loss.forces_weight",
                      "forces weight 1, but none of the dataset's 400 structures has force "
                      "labels (a per-atom 'forces' column); set it to 0 or \"auto\", or upload "
                      "structures with forces");
    cfg = small_job();
    cfg.training.loss.stress_weight = 0.5;
    expect_plan_error(&cfg, "training.loss.stress_weight",
                      "stress weight 0.5, but none of the dataset's 400 structures has a stress "
                      "label on a cell periodic along a, b and c");
    cfg = small_job();
    snprintf(cfg.forces_key, sizeof cfg.forces_key, "atomic_forces");
    expect_plan_error(&cfg, "forces_key",
                      "'atomic_forces' names no force labels of this dataset; its per-atom "
                      "labels: none (no structure has force labels)");
    cfg.training.loss.forces_weight = 0.0;   /* no forces trained: the key is not used */
    pt_train_loss l = loss_of(&cfg, &ds);
    assert_int_equal(l.forces, 0);
    cfg = small_job();
    snprintf(cfg.target, sizeof cfg.target, "energy");
    snprintf(cfg.forces_key, sizeof cfg.forces_key, "force");
    expect_plan_error_on(&emt, &cfg, "forces_key",
                         "'force' names no force labels of this dataset; its per-atom labels: "
                         "forces (a dataset keeps one set of force labels");
    cfg = small_job();
    snprintf(cfg.target, sizeof cfg.target, "energy");
    for (int stage = 0; stage <= 3; stage++) {   /* forces by default on EMT: every stage */
        cfg.backend.zero_stage = stage;
        assert_int_equal(loss_of(&cfg, &emt).forces, 1);
    }
    cfg = small_job();
    cfg.training.loss.energy_weight = 0.0;
    expect_plan_error(&cfg, "training.loss.energy_weight",
                      "energy weight 0 and forces weight \"auto\" on a dataset without force "
                      "labels: nothing would be trained");
    /* every problem at once, with the target's */
    cfg = small_job();
    snprintf(cfg.target, sizeof cfg.target, "nope");
    cfg.training.loss.forces_weight = 2.0;
    cfg.training.loss.stress_weight = 2.0;
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_train_plan p;
    assert_int_equal(pt_train_plan_init(&p, &cfg, &ds, PT_PLAN_COUNT_EDGES, 1, &errs), -1);
    assert_int_equal(errs.total, 3);
    assert_string_equal(errs.items[0].field, "target");
    assert_string_equal(errs.items[1].field, "training.loss.forces_weight");
    assert_string_equal(errs.items[2].field, "training.loss.stress_weight");
    pt_errors_close(&errs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_layout),
        cmocka_unit_test(test_auto_layout_mpi),
        cmocka_unit_test(test_auto_layout_forces),
        cmocka_unit_test(test_auto_layout_large_packs),
        cmocka_unit_test(test_plan_built_or_counted),
        cmocka_unit_test(test_plan_errors),
        cmocka_unit_test(test_loss_resolved),
        cmocka_unit_test(test_loss_errors),
    };
    return cmocka_run_group_tests_name("plan", tests, setup, teardown);
}
