/* backend_fixture.h — shared by the backend tests (header-only, included by
 * test_backend.c, test_backend_api.c, test_backend_forces.c and
 * test_mpi_backend.c after <cmocka.h>): a 240-molecule QM9 slice (every 53rd
 * molecule of the shared subset) ingested into a temporary .ptd, its
 * neighbour graphs, LPFHP packs of epoch 0, a small seeded SchNet, and
 * helpers to open the backend with a given split, and to compare gradients
 * (rel_diff, adam_update).  A test file may define
 * BFX_DATA, BFX_TARGET, BFX_CUTOFF and BFX_MAX_NEIGHBORS before including
 * it for other data (test_backend_forces.c: the EMT slice, energies and
 * forces, every neighbour within 4 Å). */
#ifndef PT_BACKEND_FIXTURE_H
#define PT_BACKEND_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/backend/backend.h"
#include "engine/backend/memplan.h"
#include "engine/train/config.h"
#include "engine/graph/graph.h"
#include "engine/data/ingest.h"
#include "engine/train/optim.h"
#include "engine/pack/packing.h"
#include "engine/core/rng.h"
#include "engine/train/train.h"

#ifndef BFX_DATA
#define BFX_DATA "tests/data/backend_qm9_240.extxyz.gz"
#define BFX_TARGET "energy_U0"
#endif
#ifndef BFX_CUTOFF
#define BFX_CUTOFF 6.0
#define BFX_MAX_NEIGHBORS 32
#endif

/* ---- fixture: dataset, graphs, packs, model -------------------------------- */

typedef struct fixture {
    char dir[64], ptd[96];
    pt_dataset ds;
    pt_graphs graphs;
    uint32_t *natoms, *nedges, *ids;
    pt_packer packer;
    pt_packs packs;            /* epoch 0 */
    pt_schnet model;
    float *init_params;        /* [n_params] */
    pt_job_config cfg;
    uint32_t target_key;
} fixture;

static fixture F;

static int setup(void **state)
{
    (void)state;
    memset(&F, 0, sizeof F);
    snprintf(F.dir, sizeof F.dir, "%s", "/tmp/pt_test_backend_" "XX" "XX" "XX"); /* mkdtemp pattern */
    if (!mkdtemp(F.dir)) return -1;
    snprintf(F.ptd, sizeof F.ptd, "%s/qm9.ptd", F.dir);
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_ingest_options io;
    pt_ingest_options_init(&io);
    pt_ingest_report rep;
    const char *inputs[] = {BFX_DATA};
    int rc = pt_ingest_files(inputs, 1, F.ptd, &io, &rep, &errs);
    pt_ingest_report_close(&rep);
    char err[256];
    if (rc || pt_dataset_open(&F.ds, F.ptd, err, sizeof err)) return -1;
    int key = pt_dataset_find_target(&F.ds, BFX_TARGET);
    if (key < 0) return -1;
    F.target_key = (uint32_t)key;

    pt_job_config_defaults(&F.cfg);
    F.cfg.model.hidden = 32;
    F.cfg.model.filters = 32;
    F.cfg.model.interactions = 2;
    F.cfg.model.gaussians = 16;
    F.cfg.backend.threads = 1;
    F.cfg.model.cutoff = BFX_CUTOFF;
    F.cfg.model.max_neighbors = BFX_MAX_NEIGHBORS;
    snprintf(F.cfg.target, sizeof F.cfg.target, "%s", BFX_TARGET);
    pt_graph_params gp = {(float)F.cfg.model.cutoff, F.cfg.model.max_neighbors, PT_GRAPH_RADIUS};
    if (pt_graphs_build(&F.graphs, &F.ds, &gp, &errs)) return -1;

    uint32_t n = F.ds.n_structs;
    F.natoms = malloc(n * sizeof(uint32_t));
    F.nedges = malloc(n * sizeof(uint32_t));
    F.ids = malloc(n * sizeof(uint32_t));
    for (uint32_t s = 0; s < n; s++) {
        F.natoms[s] = pt_dataset_natoms(&F.ds, s);
        F.nedges[s] = pt_graphs_nedges(&F.graphs, s);
        F.ids[s] = s;
    }
    pt_pack_request req = {.method = PT_PACK_LPFHP, .max_graphs = 3};
    if (pt_packer_init(&F.packer, &req, F.natoms, F.nedges, n, F.ids, n, &errs)) return -1;
    if (pt_packer_epoch(&F.packer, 7, 0, &F.packs)) return -1;

    pt_schnet_config mc = pt_schnet_config_default();
    mc.hidden = F.cfg.model.hidden;
    mc.filters = F.cfg.model.filters;
    mc.interactions = F.cfg.model.interactions;
    mc.gaussians = F.cfg.model.gaussians;
    mc.cutoff = (float)F.cfg.model.cutoff;
    mc.max_neighbors = F.cfg.model.max_neighbors;
    if (pt_schnet_init(&F.model, &mc, &errs)) return -1;
    pt_schnet_init_weights(&F.model, 3);
    /* a per-atom mean keeps the loss and gradients in a sane range */
    double sum = 0.0;
    uint64_t atoms = 0;
    for (uint32_t s = 0; s < n; s++) {
        sum += F.ds.targets[(size_t)F.target_key * n + s];
        atoms += F.natoms[s];
    }
    F.model.mean[0] = sum / (double)atoms;
    F.init_params = malloc(F.model.n_params * sizeof(float));
    memcpy(F.init_params, F.model.params_memory, F.model.n_params * sizeof(float));
    pt_errors_close(&errs);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    pt_schnet_close(&F.model);
    pt_packs_close(&F.packs);
    pt_packer_close(&F.packer);
    pt_graphs_close(&F.graphs);
    pt_dataset_close(&F.ds);
    free(F.natoms);
    free(F.nedges);
    free(F.ids);
    free(F.init_params);
    unlink(F.ptd);
    rmdir(F.dir);
    return 0;
}

__attribute__((unused)) static pt_train_data data_for(pt_job_config *cfg, int R, int A, int b)
{
    *cfg = F.cfg;
    cfg->backend.replication_factor = R;
    cfg->backend.gradient_accumulation = A;
    cfg->batching.model_batch_size = b;
    pt_train_data d = {.cfg = cfg, .ds = &F.ds, .graphs = &F.graphs, .target_key = F.target_key,
                       .model = &F.model, .limits = F.packer.limits};
    pt_errors errs;
    pt_errors_init(&errs, 0);
    assert_int_equal(pt_train_loss_resolve(&d.loss, cfg, &F.ds, &errs), 0);
    assert_int_equal(pt_train_layout_resolve(&d.layout, cfg, pt_online_cores(), d.loss.forces, 0,
                                             &errs), 0);
    pt_errors_close(&errs);
    return d;
}

/* The model back to the fixture's initial parameters. */
__attribute__((unused)) static void reset_params(void)
{
    memcpy(F.model.params_memory, F.init_params, F.model.n_params * sizeof(float));
}

/* Ends one of the tests' training runs: closes the engine, the optimizer and
 * the error list, frees the run's ids and gradient, and returns the trained
 * parameters (malloc'd, caller frees) with the model put back to its
 * initial ones for the next run. */
__attribute__((unused)) static float *run_finish(pt_grad_engine *eng, pt_optim *opt, pt_errors *errs,
                                                 void *ids, float *g)
{
    eng->close(eng->self);
    pt_optim_close(opt);
    pt_errors_close(errs);
    free(ids);
    free(g);
    size_t n = F.model.n_params;
    float *out = malloc(n * sizeof(float));
    assert_non_null(out);
    memcpy(out, F.model.params_memory, n * sizeof(float));
    reset_params();
    return out;
}

/* ||a - ref|| / ||ref|| over n floats (in double). */
__attribute__((unused)) static double rel_diff(const float *a, const float *ref, size_t n)
{
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return sqrt(num / den);
}

/* Adam's first update from the fixture's initial parameters with gradient
 * g (malloc'ed, caller frees): what a gradient difference does to a step. */
__attribute__((unused)) static float *adam_update(const float *g)
{
    size_t n = F.model.n_params;
    pt_optim_params p = pt_optim_defaults(PT_OPTIM_ADAM);
    pt_optim opt;
    assert_int_equal(pt_optim_init(&opt, &p, n), 0);
    float *theta = malloc(n * sizeof(float));
    memcpy(theta, F.init_params, n * sizeof(float));
    pt_optim_step(&opt, theta, g, 1e-3);
    for (size_t i = 0; i < n; i++) theta[i] -= F.init_params[i];
    pt_optim_close(&opt);
    return theta;
}

__attribute__((unused)) static void open_ok(pt_grad_engine *eng, const pt_train_data *d)
{
    pt_errors errs;
    pt_errors_init(&errs, 0);
    int rc = pt_backend_open(eng, d, &errs);
    if (rc) {
        char buf[512];
        pt_errors_first(&errs, buf, sizeof buf);
        fail_msg("open: %s", buf);
    }
    pt_errors_close(&errs);
    assert_string_equal(eng->kind, PT_BACKEND_KIND);
}

/* What a replica allocates equals the memory plan of its ZeRO stage (and
 * offload) with arenas of `mode`, for each layout {R, A, b} (test_zero.c:
 * energy jobs; test_backend_forces.c: forces jobs). */
__attribute__((unused)) static void allocations_follow_the_plan(const int (*layouts)[3], size_t n,
                                                                pt_schnet_mode mode)
{
    for (size_t k = 0; k < n; k++)
        for (int stage = 0; stage <= 3; stage++)
            for (int off = 0; off <= (stage > 0); off++) {
                pt_job_config cfg;
                pt_train_data d = data_for(&cfg, layouts[k][0], layouts[k][1], layouts[k][2]);
                cfg.backend.zero_stage = stage;
                cfg.backend.offload_optimizer = off;
                pt_grad_engine eng;
                open_ok(&eng, &d);
                pt_backend_stats bs;
                assert_int_equal(pt_backend_stats_get(&eng, &bs), 0);
                eng.close(eng.self);
                pt_memplan plan;
                pt_errors errs;
                pt_errors_init(&errs, 0);
                assert_int_equal(pt_memplan_compute(&plan, &F.model.cfg, d.limits, &d.layout,
                                                    &cfg.backend, mode, &errs), 0);
                pt_errors_close(&errs);
                /* the evaluator is the loop's, not the engine's (test_memplan) */
                if ((size_t)bs.replica_bytes != plan.total - plan.eval)
                    fail_msg("R=%d A=%d b=%d stage %d offload %d: allocated %lld, planned %zu",
                             layouts[k][0], layouts[k][1], layouts[k][2], stage, off,
                             (long long)bs.replica_bytes, plan.total - plan.eval);
            }
}

#endif
