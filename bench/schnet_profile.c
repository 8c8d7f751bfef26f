/* schnet_profile.c — where one replica's training step spends its time.
 *
 *   schnet_profile DATA.ptd JOB.json [STEPS [WARMUP]]
 *   schnet_profile --corename     (the OpenBLAS kernel set in use, and exit)
 *
 * Runs the real training loop (pt_train_run) for WARMUP + STEPS optimizer
 * steps with a gradient engine of its own: the built-in local engine's work
 * (fill, forward, loss, backward of each micro-batch, on this thread, with
 * backend.threads OpenBLAS threads), but with the activation arena's
 * profile switched on (schnet.h, pt_schnet_profile).  Prints one JSON object:
 *   graphs_per_s, ms_per_step, cpu_ms_per_compute (the training thread's
 *   CPU time per gradient computation: on a loaded machine it moves far less
 *   than wall time, which preemption stretches), graphs_per_step, the
 *   per-pack limits, and
 *   "ms": time per optimizer step of each kind of work — the model's ops
 *   (edge_basis, filter_gemm, filter_ssp, cfconv, node_gemm, node_ssp,
 *   other), "fill" (batch assembly) and "optimizer" (between two gradient
 *   computations: optimizer update and loop bookkeeping), with "share" the
 *   same as fractions of the step.
 * Used by bench/bench_speed.sh for the before/after table of
 * docs/performance.md. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/pack/batch.h"
#include "engine/train/config.h"
#include "engine/data/dataset.h"
#include "engine/model/schnet.h"
#include "engine/model/schnet_internal.h"
#include "engine/train/train.h"
#include "engine/train/train_internal.h"

typedef struct prof_engine {
    const pt_train_data *d;
    pt_batch batch;
    pt_schnet_acts acts;
    pt_schnet_profile prof;
    long warmup, steps_seen;
    int64_t rows, edge_slots; /* filter rows and edge slots computed, measured steps */
    double fill_s, outside_s, compute_s, last_end;
    double cpu_s; /* the training thread's CPU time in measured computes */
    int64_t graphs;
} prof_engine;

static prof_engine g_eng;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int prof_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                        const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                        pt_errors *errs)
{
    prof_engine *pe = self;
    const pt_train_data *d = pe->d;
    double t0 = now(), c0 = cpu_now();
    int measured = pe->steps_seen >= pe->warmup;
    if (pe->steps_seen == pe->warmup) memset(&pe->prof, 0, sizeof pe->prof);
    if (measured && pe->steps_seen > pe->warmup) pe->outside_s += t0 - pe->last_end;
    memset(st, 0, sizeof(*st));
    memset(grads, 0, d->model->n_params * sizeof(float));
    pt_schnet_loss_norm own;
    if (!norm) {
        pt_train_loss_norm(d, packs, ids, n, &own);
        norm = &own;
    }
    for (uint32_t at = 0; at < n; at += (uint32_t)d->layout.micro_packs) {
        uint32_t k = n - at < (uint32_t)d->layout.micro_packs ? n - at
                                                            : (uint32_t)d->layout.micro_packs;
        double tf = now();
        int rc = pt_batch_fill_ids(&pe->batch, d->ds, d->graphs, packs, ids + at, (int32_t)k,
                                   (int)d->target_key);
        if (rc != PT_BATCH_OK) {
            pt_errors_add(errs, NULL, 0, "batching", "%s", pt_batch_strerror(rc));
            return -1;
        }
        if (measured) pe->fill_s += now() - tf;
        /* the training loop's own micro-batch (energy or forces job) */
        pt_train_micro_forward(d, d->model, &pe->acts, &pe->batch, norm, st);
        pt_train_micro_backward(d, d->model, &pe->acts, &pe->batch, grads);
        if (measured) {
            pe->rows += pe->acts.n_rows;
            pe->edge_slots += pe->batch.cap_edges;
        }
    }
    pe->last_end = now();
    if (measured) {
        pe->compute_s += pe->last_end - t0;
        pe->cpu_s += cpu_now() - c0;
        pe->graphs += st->graphs;
    }
    pe->steps_seen++;
    return 0;
}

static void prof_close(void *self)
{
    prof_engine *pe = self;
    pt_batch_close(&pe->batch);
    pt_schnet_acts_close(&pe->acts);
}

static int prof_open(pt_grad_engine *eng, const pt_train_data *d, pt_errors *errs)
{
    prof_engine *pe = &g_eng;
    pe->d = d;
    if (pt_batch_init(&pe->batch, d->limits, d->layout.micro_packs, (float)d->cfg->model.cutoff) !=
            PT_BATCH_OK ||
        pt_schnet_acts_init_mode(&pe->acts, d->model, pe->batch.cap_nodes, pe->batch.cap_edges,
                                 pe->batch.cap_graphs, pt_train_step_mode(d), errs) != 0) {
        pt_errors_add(errs, NULL, 0, "", "cannot allocate the batch");
        return -1;
    }
    pe->acts.profile = &pe->prof;
    pe->acts.precision = d->cfg->training.precision;
    pe->acts.static_shapes = d->cfg->backend.static_shapes;
    eng->self = pe;
    eng->kind = "local";
    eng->compute = prof_compute;
    eng->close = prof_close;
    return 0;
}

static void print_errors(const pt_errors *errs)
{
    char buf[1024];
    for (size_t i = 0; i < errs->kept; i++) {
        pt_error_format(&errs->items[i], buf, sizeof buf);
        fprintf(stderr, "schnet_profile: %s\n", buf);
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--corename")) {
        printf("%s\n", openblas_get_corename());
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: schnet_profile DATA.ptd JOB.json [STEPS [WARMUP]]\n");
        return 2;
    }
    long steps = argc > 3 ? atol(argv[3]) : 40, warmup = argc > 4 ? atol(argv[4]) : 5;
    if (steps < 1 || warmup < 0) {
        fprintf(stderr, "schnet_profile: STEPS must be >= 1 and WARMUP >= 0\n");
        return 2;
    }
    pt_errors errs;
    pt_errors_init(&errs, 0);
    pt_job_config cfg;
    pt_dataset ds;
    char err[512];
    if (pt_job_config_load(&cfg, argv[2], &errs) != 0) {
        print_errors(&errs);
        return 1;
    }
    if (pt_dataset_open(&ds, argv[1], err, sizeof err) != 0) {
        fprintf(stderr, "schnet_profile: %s\n", err);
        return 1;
    }
    cfg.training.max_steps = steps + warmup;
    cfg.training.epochs = 1000;
    g_eng.warmup = warmup;
    pt_train_options opt = {.engine_open = prof_open};
    pt_train_result res;
    int rc = pt_train_run(&cfg, &ds, NULL, &opt, &res, &errs);
    if (rc != 0) {
        print_errors(&errs);
        return 1;
    }
    prof_engine *pe = &g_eng;
    double op_s = 0;
    for (int k = 0; k < PT_SCHNET_OP_COUNT; k++) op_s += pe->prof.seconds[k];
    long measured = pe->steps_seen - pe->warmup;
    /* the last step's "optimizer" was not seen: charge the mean of the others */
    double outside = measured > 1 ? pe->outside_s / (double)(measured - 1) : 0.0;
    double step = pe->compute_s / (double)measured + outside;
    double gps = (double)pe->graphs / (step * (double)measured);
    /* the rows per filter-network call (schnet_filter.c's chunks; given no
     * rows it answers 1 when the filter runs over the whole micro-batch) */
    const int chunk = pt_schnet_filter_chunk(cfg.training.precision, cfg.model.gaussians,
                                             cfg.model.filters, 0);
    printf("{\"openblas_core\":\"%s\",\"threads\":%d,\"steps\":%ld,\"graphs_per_s\":%.1f,"
           "\"ms_per_step\":%.3f,\"cpu_ms_per_compute\":%.3f,\"graphs_per_step\":%.2f,"
           "\"micro_packs\":%d,"
           "\"max_nodes\":%d,\"max_edges\":%d,\"precision\":\"%s\","
           "\"filter_rows_per_edge_slot\":%.3f,\"filter_chunk\":%d,\"ms\":{",
           openblas_get_corename(), cfg.backend.threads, measured, gps, step * 1e3,
           pe->cpu_s / (double)measured * 1e3,
           (double)pe->graphs / (double)measured, cfg.batching.model_batch_size,
           res.limits.max_nodes, res.limits.max_edges,
           cfg.training.precision == PT_PRECISION_BF16 ? "bf16" : "fp32",
           pe->edge_slots ? (double)pe->rows / (double)pe->edge_slots : 0.0,
           chunk > 1 ? chunk : 0);
    double parts[PT_SCHNET_OP_COUNT + 2];
    for (int k = 0; k < PT_SCHNET_OP_COUNT; k++)
        parts[k] = pe->prof.seconds[k] / (double)measured;
    parts[PT_SCHNET_OP_COUNT] = pe->fill_s / (double)measured;
    /* time inside compute not in an op or the fill: loss, zeroing, stats */
    double rest = pe->compute_s / (double)measured - parts[PT_SCHNET_OP_COUNT] -
                  op_s / (double)measured;
    parts[PT_SCHNET_OP_COUNT + 1] = outside + rest;
    const char *names[PT_SCHNET_OP_COUNT + 2];
    for (int k = 0; k < PT_SCHNET_OP_COUNT; k++) names[k] = pt_schnet_op_name((pt_schnet_op)k);
    names[PT_SCHNET_OP_COUNT] = "fill";
    names[PT_SCHNET_OP_COUNT + 1] = "optimizer";
    for (int k = 0; k < PT_SCHNET_OP_COUNT + 2; k++)
        printf("%s\"%s\":%.3f", k ? "," : "", names[k], parts[k] * 1e3);
    printf("},\"share\":{");
    for (int k = 0; k < PT_SCHNET_OP_COUNT + 2; k++)
        printf("%s\"%s\":%.3f", k ? "," : "", names[k], parts[k] / step);
    printf("}}\n");
    pt_dataset_close(&ds);
    pt_errors_close(&errs);
    return 0;
}
