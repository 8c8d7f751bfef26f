/* mpi_backend.c — backend.kind "mpi"'s engine: the emulated multi-IPU
 * backend on every rank, one MPI_Allreduce of the merged gradient buffer
 * across ranks (or, with ZeRO, a reduce-scatter and an all-gather), agreed
 * failures and the parameter check (model and rules in mpi_backend.h).  The
 * process's MPI state is mpi_world.c, a rank's training run mpi_run.c.
 *
 * Built with -DPT_HAVE_MPI (the Makefile adds it when it finds mpicc) this
 * is the real thing; without it the same functions reject kind "mpi" with
 * PT_MPI_MISSING_MSG, so a build without Open MPI still compiles, links and
 * says why a job cannot run. */
#include "engine/mpi/mpi_backend.h"

#include <math.h>
#include <string.h>

#include "engine/mpi/mpi_launch.h"   /* PT_MPI_MISSING_MSG */

#ifndef PT_HAVE_MPI

int pt_mpi_backend_open(pt_grad_engine *eng, const pt_train_data *data, pt_errors *errs)
{
    (void)data;
    memset(eng, 0, sizeof(*eng));
    pt_errors_add(errs, "", 0, "backend.kind", "%s", PT_MPI_MISSING_MSG);
    return -1;
}

#else /* PT_HAVE_MPI */

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/backend/backend.h"
#include "engine/mpi/mpi_internal.h"
#include "engine/mpi/mpi_world.h"

/* ---- the engine ------------------------------------------------------------- */

enum { ST_LOSS, ST_GRAPHS, ST_NODES, ST_NODE_SLOTS, ST_EDGES, ST_EDGE_SLOTS, ST_FILTER_ROWS,
       ST_FORCES_SSE, ST_STRESS_SSE, ST_FORCE_COMPONENTS, ST_STRESS_COMPONENTS, ST_FAILED,
       ST_BATCH, ST_HEADS_LOSS, ST_COUNT };

typedef struct mpi_engine {
    const pt_train_data *d;     /* the loop's view: R replicas in all */
    pt_train_data local;        /* d with this rank's layout: one process, R/N replicas */
    pt_grad_engine inner;
    uint32_t G, per;            /* packs per global batch, per rank */
    pt_mpi_view view;
    uint32_t *ids;              /* [per] view positions of this step */
    int64_t steps;
    int64_t check_every;
    pt_phase_times phases;      /* the cross-rank all-reduce and checks */
    /* ZeRO (backend_zero.h): every rank's block of the flat buffer, the sum of its
     * replicas' shards, as MPI counts; scratch for the reduce-scatter */
    int32_t stage;
    int *counts, *displs;       /* [world] */
    float *block;               /* [largest block] */
} mpi_engine;

static int mpi_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                       const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                       pt_errors *errs);
static void mpi_phases(void *self, pt_phase_times *out, int reset);
static int mpi_update(void *self, pt_optim *opt, float *grads, double lr, double clip,
                      pt_errors *errs);
static int mpi_sync_state(void *self, pt_optim *opt, pt_errors *errs);

static void mpi_close(void *self)
{
    mpi_engine *me = self;
    if (!me) return;
    if (me->inner.close) me->inner.close(me->inner.self);
    pt_mpi_view_close(&me->view);
    free(me->ids);
    free(me->counts);
    free(me->displs);
    free(me->block);
    free(me);
}

/* Rank k's block: the shards of replicas k·R/N .. (k+1)·R/N − 1 (backend_zero.h's
 * shard edges), so the local replicas' shards are the rank's block. */
static int zero_blocks(mpi_engine *me, int32_t local_r, pt_errors *errs)
{
    const uint64_t n = me->d->model->n_params, R = (uint64_t)me->d->layout.replicas;
    if (n > INT32_MAX) {
        pt_errors_add(errs, "", 0, "backend.zero_stage", "ZeRO over MPI ranks counts in MPI's int: "
                      "at most %d parameters, the model has %llu", INT32_MAX,
                      (unsigned long long)n);
        return -1;
    }
    me->counts = malloc((size_t)pt_mpi_proc.size * sizeof(int));
    me->displs = malloc((size_t)pt_mpi_proc.size * sizeof(int));
    if (!me->counts || !me->displs) goto oom;
    int most = 0;
    for (int k = 0; k < pt_mpi_proc.size; k++) {
        uint64_t lo = pt_backend_shard_edge(n, (int64_t)k * local_r, (int64_t)R);
        uint64_t hi = pt_backend_shard_edge(n, (int64_t)(k + 1) * local_r, (int64_t)R);
        me->displs[k] = (int)lo;
        me->counts[k] = (int)(hi - lo);
        if (me->counts[k] > most) most = me->counts[k];
    }
    if (!(me->block = malloc(((size_t)most + 1) * sizeof(float)))) goto oom;
    return 0;
oom:
    pt_errors_add(errs, "", 0, "backend", "out of memory");
    return -1;
}

/* Whether every rank holds the same `h`: MAX of h and of ~h, so min = max. */
static int all_equal(uint64_t h, int *equal, pt_errors *errs)
{
    uint64_t v[2] = {h, ~h}, r[2];
    int rc = MPI_Allreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, pt_mpi_proc.comm);
    if (rc != MPI_SUCCESS) return pt_mpi_error(errs, "MPI_Allreduce", rc);
    *equal = r[0] == ~r[1];
    return 0;
}

/* What every rank must share before the first step: the dataset's shape, the
 * batch layout, the initial parameters.  Also tells each rank whether any
 * other failed to open. */
static int open_agree(const mpi_engine *me, int ok, pt_errors *errs)
{
    int failed = !ok, any_failed = 0, rc;
    if ((rc = MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, pt_mpi_proc.comm)) != MPI_SUCCESS)
        return pt_mpi_error(errs, "MPI_Allreduce", rc);
    if (any_failed) {
        if (ok) pt_errors_add(errs, "", 0, "backend", "another rank could not open its backend "
                              "(its error is in the worker log)");
        return -1;
    }
    const pt_train_data *d = me->d;
    uint64_t shape[6] = {d->ds->n_structs, d->ds->n_atoms, d->model->n_params, me->G,
                         (uint64_t)d->limits.max_nodes << 32 | (uint32_t)d->limits.max_edges,
                         (uint64_t)(uint32_t)d->limits.max_graphs};
    uint64_t h = pt_mpi_hash_floats((const float *)shape, 2 * (sizeof shape / sizeof shape[0]));
    h ^= pt_mpi_hash_floats(d->model->params_memory, d->model->n_params) * 31;
    int equal = 0;
    if (all_equal(h, &equal, errs)) return -1;
    if (!equal) {
        pt_errors_add(errs, "", 0, "backend", "the ranks disagree on the dataset, the pack "
                      "limits or the initial parameters: every host must read the same dataset "
                      "file and job configuration (shared data directory)");
        return -1;
    }
    return 0;
}

int pt_mpi_backend_open(pt_grad_engine *eng, const pt_train_data *d, pt_errors *errs)
{
    memset(eng, 0, sizeof(*eng));
    const pt_train_layout *l = &d->layout;
    if (pt_mpi_init(errs)) return -1;
    int32_t local_r;
    if (pt_mpi_plan_replicas(l->ranks, l->replicas, pt_mpi_proc.size, &local_r, errs)) return -1;
    mpi_engine *me = calloc(1, sizeof(*me));
    if (!me) {
        pt_errors_add(errs, "", 0, "backend", "out of memory");
        return -1;
    }
    me->d = d;
    me->local = *d;
    me->local.layout.ranks = 1;
    me->local.layout.replicas = local_r;
    me->local.layout.threads = pt_mpi_rank_threads(d->cfg->backend.threads);
    /* ZeRO's shards are cut over every rank's replicas (backend_zero.h) */
    me->local.layout.shard_replicas = l->replicas;
    me->local.layout.shard_first = pt_mpi_proc.rank * local_r;
    me->stage = d->cfg->backend.zero_stage;
    me->G = (uint32_t)pt_train_layout_global_packs(l);
    me->per = (uint32_t)pt_train_layout_global_packs(&me->local.layout);
    const char *every = getenv("PACKTRAIN_MPI_CHECK_EVERY");
    me->check_every = every && every[0] ? atoll(every) : 100;
    /* an epoch holds every training graph once: the dataset bounds the view */
    uint32_t cap = d->ds->n_structs ? d->ds->n_structs : 1;
    int ok = pt_backend_open(&me->inner, &me->local, errs) == 0 &&
             pt_mpi_view_init(&me->view, cap, cap, errs) == 0;
    if (ok && !(me->ids = malloc((size_t)me->per * sizeof(uint32_t)))) {
        pt_errors_add(errs, "", 0, "backend", "out of memory");
        ok = 0;
    }
    if (ok && me->stage > 0 && zero_blocks(me, local_r, errs) != 0) ok = 0;
    if (open_agree(me, ok, errs) != 0) {
        mpi_close(me);
        return -1;
    }
    eng->self = me;
    eng->kind = PT_MPI_KIND;
    eng->compute = mpi_compute;
    eng->phases = mpi_phases;
    eng->close = mpi_close;
    if (me->stage > 0) {
        eng->update = mpi_update;
        eng->sync_state = mpi_sync_state;
    }
    return 0;
}

/* The rank's packs of this step as positions in its view, when the loop
 * walks a pack list in whole global batches (what pt_train_run does); NULL
 * (use the loop's ids) otherwise.  The view is rebuilt at an epoch's start
 * and whenever the step's packs differ from it, so it is never stale. */
static const pt_packs *step_view(mpi_engine *me, const pt_packs *packs, const uint32_t *ids,
                                 uint32_t n, uint32_t first, uint32_t count)
{
    if (n == 0 || ids[0] % me->G != 0) return NULL;
    for (uint32_t i = 1; i < n; i++)
        if (ids[i] != ids[0] + i) return NULL;
    uint32_t vfirst = ids[0] / me->G * me->per;
    if (ids[0] == 0 || !pt_mpi_view_matches(&me->view, vfirst, packs, ids[0] + first, count)) {
        if (pt_mpi_view_build(&me->view, packs, me->G, me->per, pt_mpi_proc.rank) != 0) return NULL;
        if (!pt_mpi_view_matches(&me->view, vfirst, packs, ids[0] + first, count)) return NULL;
    }
    for (uint32_t i = 0; i < count; i++) me->ids[i] = vfirst + i;
    return &me->view.packs;
}

/* The periodic check that the parameters are still the same everywhere. */
static int check_params(mpi_engine *me, pt_errors *errs)
{
    if (me->check_every <= 0 || me->steps % me->check_every != 0) return 0;
    int equal = 0;
    uint64_t h = pt_mpi_hash_floats(me->d->model->params_memory, me->d->model->n_params);
    if (all_equal(h, &equal, errs)) return -1;
    if (!equal) {
        pt_errors_add(errs, "", 0, "backend", "parameters diverged across MPI ranks before step "
                      "%lld (hash check every %lld steps)", (long long)me->steps + 1,
                      (long long)me->check_every);
        return -1;
    }
    return 0;
}

/* The local replicas' phases with the cross-rank all-reduce added. */
static void mpi_phases(void *self, pt_phase_times *out, int reset)
{
    mpi_engine *me = self;
    me->inner.phases(me->inner.self, out, reset);
    for (int p = 0; p < PT_PHASE_COUNT; p++) out->seconds[p] += me->phases.seconds[p];
    if (reset) pt_phase_times_clear(&me->phases);
}

static int mpi_compute(void *self, const pt_packs *packs, const uint32_t *ids, uint32_t n,
                       const pt_schnet_loss_norm *norm, float *grads, pt_step_stats *st,
                       pt_errors *errs)
{
    mpi_engine *me = self;
    pt_phase_timer clk;
    pt_phase_timer_start(&clk);
    memset(st, 0, sizeof(*st));
    int ok = 1;
    if (n > me->G) {
        pt_errors_add(errs, "", 0, "backend", "a step of %u packs, above R x A x b = %u", n, me->G);
        ok = 0;
    }
    for (uint32_t i = 0; ok && i < n; i++) {
        if (ids[i] >= packs->n_packs) {
            pt_errors_add(errs, "", 0, "backend", "pack %u asked for, the epoch has %u packs",
                          ids[i], packs->n_packs);
            ok = 0;
        }
    }
    /* the global batch's denominators, as one process would take them */
    pt_schnet_loss_norm global = {0};
    if (ok) pt_train_loss_norm(me->d, packs, ids, n, &global);
    const int64_t n_g = (int64_t)global.graphs;
    if (norm) global = *norm;
    /* collective on every rank at the same step, whatever happened above */
    if (check_params(me, errs)) return -1;
    uint32_t first = 0, count = 0;
    pt_step_stats local = {0};
    if (ok) {
        pt_mpi_slice(n, me->per, pt_mpi_proc.rank, &first, &count);
        const pt_packs *src = step_view(me, packs, ids, n, first, count);
        const uint32_t *lids = src ? me->ids : ids + first;
        pt_phase_lap(&clk, &me->phases, PT_PHASE_OTHER);
        ok = me->inner.compute(me->inner.self, src ? src : packs, lids, count, &global, grads,
                               &local, errs) == 0;
        pt_phase_timer_start(&clk);   /* the backend accounted its own time */
    }
    double v[ST_COUNT] = {local.loss_sum, (double)local.graphs, (double)local.nodes,
                          (double)local.node_slots, (double)local.edges, (double)local.edge_slots,
                          (double)local.filter_rows, local.forces_sse, local.stress_sse,
                          (double)local.force_components, (double)local.stress_components,
                          ok ? 0.0 : 1.0, (double)n_g, local.heads_loss_sum}, sum[ST_COUNT];
    int rc = MPI_Allreduce(v, sum, ST_COUNT, MPI_DOUBLE, MPI_SUM, pt_mpi_proc.comm);
    if (rc != MPI_SUCCESS) return pt_mpi_error(errs, "MPI_Allreduce", rc);
    me->steps++;
    if (sum[ST_FAILED] > 0) {
        if (ok) pt_errors_add(errs, "", 0, "backend", "%.0f other rank(s) failed at step %lld "
                              "(their errors are in the worker log)", sum[ST_FAILED],
                              (long long)me->steps);
        return -1;
    }
    if (sum[ST_BATCH] != (double)n_g * pt_mpi_proc.size) {
        pt_errors_add(errs, "", 0, "backend", "the ranks disagree on the packs of step %lld (%lld "
                      "graphs here): every host must read the same dataset and configuration",
                      (long long)me->steps, (long long)n_g);
        return -1;
    }
    size_t np = me->d->model->n_params;
    if (me->stage >= 2) {
        /* ZeRO 2-3: each rank receives the sum of its own block only */
        int k = pt_mpi_proc.rank;
        rc = MPI_Reduce_scatter(grads, me->block, me->counts, MPI_FLOAT, MPI_SUM, pt_mpi_proc.comm);
        if (rc != MPI_SUCCESS) return pt_mpi_error(errs, "MPI_Reduce_scatter", rc);
        memcpy(grads + me->displs[k], me->block, (size_t)me->counts[k] * sizeof(float));
        np = 0;
    }
    for (size_t off = 0; off < np;) {
        /* MPI counts are int: very large models go in pieces */
        int len = np - off > (size_t)1 << 30 ? 1 << 30 : (int)(np - off);
        rc = MPI_Allreduce(MPI_IN_PLACE, grads + off, len, MPI_FLOAT, MPI_SUM, pt_mpi_proc.comm);
        if (rc != MPI_SUCCESS) return pt_mpi_error(errs, "MPI_Allreduce", rc);
        off += (size_t)len;
    }
    pt_phase_lap(&clk, &me->phases, PT_PHASE_ALLREDUCE);
    st->loss_sum = sum[ST_LOSS];
    st->heads_loss_sum = sum[ST_HEADS_LOSS];
    st->graphs = (int64_t)sum[ST_GRAPHS];
    st->nodes = (int64_t)sum[ST_NODES];
    st->node_slots = (int64_t)sum[ST_NODE_SLOTS];
    st->edges = (int64_t)sum[ST_EDGES];
    st->edge_slots = (int64_t)sum[ST_EDGE_SLOTS];
    st->filter_rows = (int64_t)sum[ST_FILTER_ROWS];
    st->forces_sse = sum[ST_FORCES_SSE];
    st->stress_sse = sum[ST_STRESS_SSE];
    st->force_components = (int64_t)sum[ST_FORCE_COMPONENTS];
    st->stress_components = (int64_t)sum[ST_STRESS_COMPONENTS];
    return 0;
}

/* ZeRO's update across ranks: the shards' squared norms summed over all
 * ranks, each rank's replicas update their shards (backend_zero.h), the parameters
 * all-gathered by blocks into every rank's host copy, then into the local
 * replicas' own copies. */
static int mpi_update(void *self, pt_optim *opt, float *grads, double lr, double clip,
                      pt_errors *errs)
{
    mpi_engine *me = self;
    float coef = 1.0f;   /* the loop times the whole update as the optimizer phase */
    int rc;
    if (clip > 0) {
        double mine = pt_backend_zero_sumsq(&me->inner, grads), all = 0.0;
        if ((rc = MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, pt_mpi_proc.comm)) != MPI_SUCCESS)
            return pt_mpi_error(errs, "MPI_Allreduce", rc);
        coef = pt_grad_clip_coef(sqrt(all), clip);
    }
    pt_backend_zero_apply(&me->inner, opt, grads, lr, coef);
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, me->d->model->params_memory,
                        me->counts, me->displs, MPI_FLOAT, pt_mpi_proc.comm);
    if (rc != MPI_SUCCESS) return pt_mpi_error(errs, "MPI_Allgatherv", rc);
    pt_backend_zero_gather(&me->inner);
    return 0;
}

/* A rank updates only its block of m and v: before a checkpoint every rank
 * gets the others' (rank 0 writes it). */
static int mpi_sync_state(void *self, pt_optim *opt, pt_errors *errs)
{
    mpi_engine *me = self;
    float *both[2] = {opt->m, opt->v};
    for (int k = 0; k < 2; k++) {
        int rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, both[k], me->counts,
                                me->displs, MPI_FLOAT, pt_mpi_proc.comm);
        if (rc != MPI_SUCCESS) return pt_mpi_error(errs, "MPI_Allgatherv", rc);
    }
    return 0;
}

#endif /* PT_HAVE_MPI */
